/* Both ends of a connection in one test process (conn_pair.h). */
#include "conn_pair.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/shunt_conn.h"
#include "core/shunt_decide.h"
#include "core/shunt_transport.h"

/* A test that loses a byte fails in seconds rather than hangs: blocking
 * calls on the pair give up (EAGAIN) after this long, shunt's waits
 * included. */
static void bounded(int fd)
{
	struct timeval tv = {5, 0};
	cr_assert(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	cr_assert(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
}

void pair_listen(struct conn_pair *p, int registered)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	p->lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(p->lfd >= 0);
	cr_assert(bind(p->lfd, (struct sockaddr *)&a, sizeof a) == 0);
	cr_assert(listen(p->lfd, 16) == 0);
	p->dlen = sizeof p->dst;
	cr_assert(getsockname(p->lfd, (struct sockaddr *)&p->dst, &p->dlen) == 0);
	shunt_conn_new_tcp(p->lfd, 0);
	if (registered)
		shunt_conn_on_listen(p->lfd, shunt_fd_get(p->lfd));
}

void pair_connect(struct conn_pair *p)
{
	p->cfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(p->cfd >= 0);
	bounded(p->cfd);
	shunt_conn_new_tcp(p->cfd, 0);
	struct shunt_fd *e = shunt_fd_get(p->cfd);
	shunt_conn_on_connect(p->cfd, e, (struct sockaddr *)&p->dst, p->dlen);
	cr_assert(connect(p->cfd, (struct sockaddr *)&p->dst, p->dlen) == 0, "connect: %s",
		  strerror(errno));
	shunt_conn_decided(p->cfd, e, (struct sockaddr *)&p->dst, p->dlen);
}

void pair_accept(struct conn_pair *p, int shunt)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	p->sfd = accept(p->lfd, (struct sockaddr *)&peer, &plen);
	cr_assert(p->sfd >= 0);
	bounded(p->sfd);
	if (!shunt)
		return;
	shunt_conn_new_tcp(p->sfd, 0);
	shunt_conn_on_accept(p->lfd, p->sfd, shunt_fd_peek(p->sfd), (struct sockaddr *)&peer, plen);
}

void pair_open(struct conn_pair *p)
{
	pair_listen(p, 1);
	pair_connect(p);
	pair_accept(p, 1);
}

void pair_close_fd(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (e && shunt_fd_kind(e) != SHUNT_FD_UNKNOWN)
		shunt_conn_on_close(fd, e);
	close(fd);
}

void pair_close(struct conn_pair *p)
{
	pair_close_fd(p->cfd);
	pair_close_fd(p->sfd);
	pair_close_fd(p->lfd);
}

int fd_kind(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	return e ? (int)shunt_fd_kind(e) : SHUNT_FD_UNKNOWN;
}

const char *fd_reason(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	return e ? shunt_reason_name(e->reason) : "?";
}

const char *fd_transport(int fd)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	return e ? shunt_conn_name(e->conn) : "kernel";
}

ssize_t t_send(int fd, const void *b, size_t n, int flags)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	struct shunt_conn *c = e ? shunt_conn_get(e) : NULL;
	if (!c)
		return send(fd, b, n, flags | MSG_NOSIGNAL);
	struct iovec v = {(void *)b, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	ssize_t r = c->ops->data->send ? c->ops->data->send(c, b, n, flags | MSG_NOSIGNAL)
				 : c->ops->data->sendmsg(c, &m, flags | MSG_NOSIGNAL);
	int err = errno;
	shunt_conn_put(c);
	errno = err;
	return r;
}

ssize_t t_recv(int fd, void *b, size_t n, int flags)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	struct shunt_conn *c = e ? shunt_conn_get(e) : NULL;
	if (!c)
		return recv(fd, b, n, flags);
	struct iovec v = {b, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	ssize_t r = c->ops->data->recv ? c->ops->data->recv(c, b, n, flags) : c->ops->data->recvmsg(c, &m, flags);
	int err = errno;
	shunt_conn_put(c);
	errno = err;
	return r;
}

void t_send_all(int fd, const void *b, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = t_send(fd, (const uint8_t *)b + done, n - done, 0);
		cr_assert(r > 0, "send on fd %d: %zd (%s)", fd, r, strerror(errno));
		done += (size_t)r;
	}
}

void t_recv_all(int fd, void *b, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = t_recv(fd, (uint8_t *)b + done, n - done, 0);
		cr_assert(r > 0, "recv on fd %d after %zu of %zu bytes: %zd (%s)", fd, done, n, r,
			  strerror(errno));
		done += (size_t)r;
	}
}

static uint8_t byte_at(uint64_t i, unsigned seed)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
	return (uint8_t)(x >> 29 ^ x >> 47);
}

void pattern(uint8_t *b, size_t n, uint64_t from, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = byte_at(from + i, seed);
}

int pattern_ok(const uint8_t *b, size_t n, uint64_t from, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != byte_at(from + i, seed))
			return 0;
	return 1;
}
