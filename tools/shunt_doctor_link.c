/* shunt doctor speaking to an agent (see shunt_doctor_link.h). */
#include "shunt_doctor_link.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_client.h"
#include "agent/agent_proto.h"
#include "shunt_doctor_judge.h"

struct link {
	int fd;
	uint64_t deadline;
	uint8_t in[AGENT_FRAME_MAX];
	size_t nin;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Until fd is ready for events or the deadline: 1 ready, 0 timed out, -1
 * error. */
static int wait_for(struct link *l, short events)
{
	for (;;) {
		uint64_t now = now_ms();
		if (now >= l->deadline)
			return 0;
		struct pollfd p = {.fd = l->fd, .events = events};
		int r = poll(&p, 1, (int)(l->deadline - now));
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* 0 connected, else -1 with errno (ETIMEDOUT when the deadline passed). */
static int link_open(struct link *l, const struct sockaddr *a, socklen_t len, int timeout_ms)
{
	l->nin = 0;
	l->deadline = now_ms() + (uint64_t)timeout_ms;
	l->fd = socket(a->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return -1;
	if (connect(l->fd, a, len) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EAGAIN)
		return -1;
	int w = wait_for(l, POLLOUT);
	if (w <= 0) {
		errno = w == 0 ? ETIMEDOUT : errno;
		return -1;
	}
	int err = 0;
	socklen_t el = sizeof(err);
	if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		return -1;
	errno = err;
	return err ? -1 : 0;
}

static void link_close(struct link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

static int send_all(struct link *l, const void *buf, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t w = send(l->fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && wait_for(l, POLLOUT) > 0)
			continue;
		return -1;
	}
	return 0;
}

static int send_msg(struct link *l, const struct agent_msg *m)
{
	uint8_t buf[AGENT_FRAME_MAX];
	size_t n = agent_encode(m, buf);
	return n ? send_all(l, buf, n) : -1;
}

/* The next frame: 1 with *m, 0 closed or timed out, -1 not a frame. */
static int recv_msg(struct link *l, struct agent_msg *m)
{
	for (;;) {
		int r = agent_next_frame(l->in, &l->nin, m, NULL);
		if (r)
			return r;
		ssize_t n = recv(l->fd, l->in + l->nin, sizeof(l->in) - l->nin, 0);
		if (n > 0) {
			l->nin += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return 0;
		if (wait_for(l, POLLIN) <= 0)
			return 0;
	}
}

/* agent_client.h's view of a link. */
static int io_send(void *l, const struct agent_msg *m)
{
	return send_msg(l, m);
}

static int io_recv(void *l, struct agent_msg *m)
{
	return recv_msg(l, m);
}

/* An answer that is not the one wanted: what it says. */
static enum agent_ask_result unexpected(int r, const struct agent_msg *m, int after_auth,
					struct agent_ask *out)
{
	if (r == 0) {
		snprintf(out->detail, sizeof(out->detail), "no answer in time, or the connection closed");
		return ASK_NO_AGENT;
	}
	if (r < 0) {
		snprintf(out->detail, sizeof(out->detail), "an answer that is not an agent frame");
		return ASK_PROTOCOL;
	}
	if (m->type == AGENT_ERROR && m->u.code == AGENT_E_AUTH) {
		snprintf(out->detail, sizeof(out->detail), "ERROR auth");
		return after_auth ? ASK_AUTH_REFUSED : ASK_AUTH_REQUIRED;
	}
	if (m->type == AGENT_ERROR)
		snprintf(out->detail, sizeof(out->detail), "ERROR %s", agent_error_name(m->u.code));
	else
		snprintf(out->detail, sizeof(out->detail), "%s out of turn", agent_type_name(m->type));
	return ASK_PROTOCOL;
}

static enum agent_ask_result authenticate(struct link *l, const char *key, size_t klen,
					  struct agent_ask *out)
{
	struct agent_io io = {io_send, io_recv, l};
	struct agent_msg last;
	int after_auth;
	switch (agent_authenticate(&io, key, klen, &last, &after_auth)) {
	case AGENT_AUTHED:
		return ASK_ANSWERED;
	case AGENT_AUTH_SILENT:
		return unexpected(0, NULL, after_auth, out);
	case AGENT_AUTH_GARBAGE:
		return unexpected(-1, NULL, after_auth, out);
	case AGENT_AUTH_ANSWER:
		return unexpected(1, &last, after_auth, out);
	case AGENT_AUTH_FORGED:
		snprintf(out->detail, sizeof(out->detail), "its proof does not match our secret");
		return ASK_IMPOSTOR;
	case AGENT_AUTH_NO_RANDOM:
		break;
	}
	snprintf(out->detail, sizeof(out->detail), "no random bytes for a nonce");
	return ASK_PROTOCOL;
}

void doctor_agent_ask(const struct sockaddr *agent, socklen_t len, const char *secret, int klen,
		      const uint8_t a16[16], uint16_t port, int timeout_ms, struct agent_ask *out)
{
	struct link l = {.fd = -1};
	memset(out, 0, sizeof(*out));
	out->status = -1;
	if (link_open(&l, agent, len, timeout_ms) < 0) {
		out->connect_errno = errno ? errno : EIO;
		snprintf(out->detail, sizeof(out->detail), "%s",
			 errno == ETIMEDOUT ? "no answer in time" : strerror(errno));
		out->res = ASK_NO_AGENT;
		link_close(&l);
		return;
	}
	if (klen > 0) {
		out->res = authenticate(&l, secret, (size_t)klen, out);
		if (out->res != ASK_ANSWERED) {
			link_close(&l);
			return;
		}
		out->authed = 1;
	}
	struct agent_msg m = {.type = AGENT_QUERY}, a;
	memcpy(m.u.query.addr, a16, 16);
	m.u.query.port = port;
	int r = send_msg(&l, &m) < 0 ? 0 : recv_msg(&l, &a);
	if (r > 0 && a.type == AGENT_QUERY_ANSWER) {
		out->res = ASK_ANSWERED;
		out->status = a.u.status;
	} else {
		out->res = unexpected(r, &a, 0, out);
	}
	link_close(&l);
}

int doctor_http_get(const struct sockaddr *a, socklen_t len, const char *path, int timeout_ms,
		    char *buf, size_t cap, const char **body, size_t *blen)
{
	struct link l = {.fd = -1};
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nConnection: close\r\n\r\n", path);
	if (link_open(&l, a, len, timeout_ms) < 0 || send_all(&l, req, (size_t)n) < 0) {
		snprintf(buf, cap, "%s", errno == ETIMEDOUT ? "no answer in time" : strerror(errno));
		link_close(&l);
		return -1;
	}
	size_t got = 0;
	while (got + 1 < cap) {
		ssize_t r = recv(l.fd, buf + got, cap - 1 - got, 0);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR) || wait_for(&l, POLLIN) <= 0)
			break;
	}
	link_close(&l);
	buf[got] = '\0';
	int status = doctor_http_parse(buf, got, body, blen);
	if (status < 0)
		snprintf(buf, cap, "not an HTTP answer");
	return status;
}
