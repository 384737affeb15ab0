/* The one-buffer data calls of the shm transport (shm_recv, shm_send:
 * what read, recv, write and send take) against core alone: a write that
 * does not fit returns what went, and a read that slept on an empty ring
 * when the peer left reads on from the socket.  Both ends live in the test
 * process, on a private rundir (scratch_rundir.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "conn_pair.h"
#include "core/shunt_conn.h"
#include "core/shunt_fdtab.h"
#include "core/shunt_transport.h"
#include "shm/shm_internal.h"

const struct shunt_transport_ops *const shunt_transports[] = {&shunt_transport_shm, NULL};

static struct shm_conn *conn_of(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	cr_assert(e && e->conn, "fd %d is not accelerated", fd);
	return (struct shm_conn *)e->conn;
}

/* Non-blocking writes of 1000 bytes fill the ring (a power of two: the
 * last one fits in part): it returns what went, the next one EAGAIN, and
 * the reader gets every byte once, in order. */
Test(shm_data, a_write_that_does_not_fit_returns_what_went)
{
	struct conn_pair p;
	pair_open(&p);
	cr_assert_str_eq(fd_transport(p.cfd), "shm");
	struct shm_conn *c = conn_of(p.cfd);
	size_t size = (size_t)c->tx.size;
	cr_assert_neq(size % 1000, 0);
	uint8_t *out = malloc(size + 1000), *in = malloc(size + 1000);
	pattern(out, size + 1000, 0, 31);
	size_t sent = 0;
	ssize_t r;
	while ((r = t_send(p.cfd, out + sent, 1000, MSG_DONTWAIT)) == 1000)
		sent += 1000;
	cr_assert_eq(r, (ssize_t)(size % 1000), "the last write returned %zd", r);
	sent += (size_t)r;
	cr_assert_eq(sent, size);
	cr_assert_eq(t_send(p.cfd, out + sent, 1000, MSG_DONTWAIT), -1);
	cr_assert_eq(errno, EAGAIN);

	t_recv_all(p.sfd, in, size);
	cr_assert(pattern_ok(in, size, 0, 31), "a byte lost, repeated or moved");
	char b;
	cr_assert_eq(t_recv(p.sfd, &b, 1, MSG_DONTWAIT), -1, "a byte too many");
	cr_assert_eq(errno, EAGAIN);
	/* The ring works on after it was full. */
	t_send_all(p.cfd, out + sent, 1000);
	t_recv_all(p.sfd, in, 1000);
	cr_assert(pattern_ok(in, 1000, size, 31));
	free(out);
	free(in);
	pair_close(&p);
}

struct reader {
	int fd;
	uint8_t buf[64];
	ssize_t got;
	int err;
};

static void *read_once(void *arg)
{
	struct reader *r = arg;
	r->got = t_recv(r->fd, r->buf, sizeof r->buf, 0);
	r->err = errno;
	return NULL;
}

/* A blocking read asleep on an empty ring (its futex) when the client
 * leaves for TCP: it wakes, demotes in turn, and returns the bytes the
 * client then writes on the socket. */
Test(shm_data, a_read_asleep_when_the_peer_leaves_reads_the_socket, .timeout = 60)
{
	struct conn_pair p;
	pair_open(&p);
	struct shm_conn *s = conn_of(p.sfd);
	struct reader r = {.fd = p.sfd};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, read_once, &r), 0);
	/* Asleep: counted in on the ring it waits for (shm_sleep). */
	while (!__atomic_load_n(&s->rx.ctl->reader_sleep, __ATOMIC_ACQUIRE))
		sched_yield();

	shunt_conn_demote(p.cfd, shunt_fd_peek(p.cfd), SHUNT_R_EXEC);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_KERNEL);
	uint8_t out[16];
	pattern(out, sizeof out, 0, 41);
	t_send_all(p.cfd, out, sizeof out);

	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(r.got, (ssize_t)sizeof out, "read %zd (%s)", r.got, strerror(r.err));
	cr_assert(pattern_ok(r.buf, sizeof out, 0, 41));
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.sfd), "peer-demoted");
	pair_close(&p);
}
