/* The fabric self-test (fab_selftest.h).
 *
 * Both ends live in this process.  The client end files its offer in the
 * process's offer table, as fab_connect() would have after the agent took
 * it; the server end connects back to the passive endpoint as fab_accept()
 * does, with the offer's key; the passive thread answers it with the
 * transport's own code.  A socket pair stands for the TCP connection (the
 * control plane: nothing is written to it).  Then both ends move bytes
 * with the data path's own calls, non-blocking, alternately, with write
 * sizes from one byte to twice the ring; each byte is a function of its
 * stream position and direction, checked on arrival.  Then both close
 * (the goodbye waits for the peer's provider to take the CLOSE). */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fab_internal.h"
#include "fab_verbs.h"
#include "fab_selftest.h"
#include "core/shunt_real.h"

#define SELFTEST_MS 60000

static uint8_t pattern(uint64_t pos, int dir)
{
	uint64_t x = (pos + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)dir << 63;
	return (uint8_t)(x >> 56 ^ x >> 29);
}

struct report {
	char *p;
	size_t len, used;
};

static void say(struct report *r, const char *fmt, ...)
{
	if (r->used >= r->len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(r->p + r->used, r->len - r->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->used += (size_t)n < r->len - r->used ? (size_t)n : r->len - r->used - 1;
}

/* One direction's stream. */
struct flow {
	struct fab_conn *from, *to;
	int dir;
	uint64_t sent, got, want;
	uint32_t rng;
};

static size_t next_size(struct flow *f, uint64_t ring)
{
	f->rng = f->rng * 1103515245u + 12345u;
	uint32_t r = f->rng >> 8;
	/* Mostly small, some a page, some beyond the ring (wraps, partial
	 * writes, several RMA writes per call). */
	size_t n = r % 8 < 5 ? 1 + r % 300 : r % 8 < 7 ? 1 + r % 65536 : 1 + r % (2 * ring);
	return n > f->want - f->sent ? (size_t)(f->want - f->sent) : n;
}

/* Move what can move now: -1 on a wrong byte or an error. */
static int step(struct flow *f, uint64_t ring, uint8_t *buf, size_t cap, struct report *r)
{
	if (f->sent < f->want) {
		size_t n = next_size(f, ring);
		if (n > cap)
			n = cap;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(f->sent + i, f->dir);
		struct iovec v = {buf, n};
		struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
		ssize_t w = fab_sendmsg(&f->from->base, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && errno != EAGAIN) {
			say(r, "error: send: %s\n", strerror(errno));
			return -1;
		}
		if (w > 0)
			f->sent += (uint64_t)w;
	}
	if (f->got < f->want) {
		struct iovec v = {buf, cap};
		struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
		ssize_t n = fab_recvmsg(&f->to->base, &m, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			say(r, "error: receive: %s\n", n ? strerror(errno) : "end of stream");
			return -1;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern(f->got + (uint64_t)i, f->dir)) {
				say(r, "error: byte %llu of direction %d is wrong\n",
				    (unsigned long long)(f->got + (uint64_t)i), f->dir);
				return -1;
			}
		if (n > 0)
			f->got += (uint64_t)n;
	}
	return 0;
}

static int state_of(struct fab_conn *c)
{
	return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
}

/* The server end: connect back to offer o from addr, as fab_accept does. */
static int connect_back(struct fab_conn *s, struct fid_domain *d, struct fid_fabric *fab,
			const struct agent_offer *o, const struct sockaddr *addr, socklen_t alen,
			struct report *r)
{
	struct fi_info *info = fab_info_for_peer(o);
	if (!info) {
		say(r, "error: no endpoint reaches the passive one\n");
		return -1;
	}
	void *src = malloc(alen);
	if (src) {
		memcpy(src, addr, alen);
		((struct sockaddr_in *)src)->sin_port = 0; /* (sin6_port: the same offset) */
		free(info->src_addr);
		info->src_addr = src;
		info->src_addrlen = alen;
	}
	int rc = fab_conn_ep(s, d, fab, info);
	fi_freeinfo(info);
	if (rc < 0) {
		say(r, "error: endpoint: cannot open, bind or enable it\n");
		return -1;
	}
	struct fab_cm_req req;
	struct fab_cm_rep rep;
	uint8_t raw[FAB_CM_REQ_LEN], repraw[FAB_CM_REP_LEN];
	fab_cm_req_make(&req, raw, o->token, o->ring_size, fab_ring_addr_rx(s), fab_mr_key(s), 0);
	if ((rc = fi_connect(s->ep, o->addr, raw, sizeof raw)) != 0) {
		say(r, "error: fi_connect: %s\n", fi_strerror(-rc));
		return -1;
	}
	rc = fab_wait_connected(s->eq, 10000, repraw, sizeof repraw);
	if (rc != 0 || fab_cm_rep_check(&rep, repraw, sizeof repraw, o->token, &req) < 0) {
		say(r, "error: connection: %s\n",
		    rc < 0 ? "no answer in 10 s" : rc ? "refused" : "a wrong answer");
		return -1;
	}
	s->peer_addr = rep.rx_addr;
	s->peer_key = rep.rx_key;
	__atomic_store_n(&s->state, FAB_UP, __ATOMIC_RELEASE);
	fab_watch_add(s);
	return 0;
}

static struct fab_conn *end_new(int client, struct fid_domain *d, uint64_t ring, int fd)
{
	struct fab_conn *c = fab_conn_new(&fab_conn_ops, client);
	if (!c)
		return NULL;
	c->base.refs = 1; /* as an fd holds it */
	c->base.fd = fd;
	if (fab_conn_mem(c, d, ring) < 0) {
		fab_conn_release(c);
		return NULL;
	}
	return c;
}

static void end_close(struct fab_conn *c)
{
	if (!c)
		return;
	c->base.ops->life->close(&c->base);
	shunt_conn_put(&c->base);
}

int fab_selftest(const char *prov, const struct sockaddr *addr, socklen_t alen, uint64_t bytes,
		 uint64_t ring, char *out, size_t len)
{
	struct report r = {out, len, 0};
	char why[256], host[64] = "?";
	out[0] = '\0';
	if (addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, host, sizeof host);
	else if (addr->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)addr)->sin6_addr, host, sizeof host);
	say(&r, "provider: %s\naddress: %s\nverbs rules enforced: %s\n", prov, host,
	    fab_vrb_on() ? "yes (SHUNT_FABRIC_EMULATE=verbs)" : "no");
	if (fab_provider_fit(prov, why, sizeof why) < 0) {
		say(&r, "error: %s\nresult: FAIL\n", why);
		return -1;
	}
	if (fab_start(prov, FAB_WAIT_FOREVER) != SHUNT_R_NONE) {
		say(&r, "error: libfabric or the provider does not start\nresult: FAIL\n");
		return -1;
	}
	struct fid_fabric *fab = NULL;
	struct fid_domain *d = fab_domain(prov, &fab);
	int sp[2] = {-1, -1};
	struct fab_conn *cl = NULL, *sv = NULL;
	int rc = -1;
	uint64_t t0 = shunt_now_ms();
	if (!d) {
		say(&r, "error: no fabric or domain (see the log, log=info)\n");
		goto out;
	}
	if (REAL(socketpair)(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		say(&r, "error: socketpair: %s\n", strerror(errno));
		goto out;
	}
	struct agent_offer o;
	memset(&o, 0, sizeof o);
	if (!(cl = end_new(1, d, ring, sp[0])) || !(sv = end_new(0, d, ring, sp[1]))) {
		say(&r, "error: registered rings of %llu bytes: cannot allocate or register\n",
		    (unsigned long long)ring);
		goto out;
	}
	if (fab_pep_addr(prov, addr, alen, &o, fab_offer_answer) < 0) {
		say(&r, "error: no passive endpoint on %s\n", host);
		goto out;
	}
	if (getrandom(cl->key, sizeof cl->key, 0) != sizeof cl->key)
		goto out;
	memcpy(o.token, cl->key, sizeof o.token);
	o.ring_size = ring;
	fab_offer_id(cl->key, cl->id);
	memcpy(&cl->peer_sa, addr, alen);
	cl->peer_salen = alen;
	cl->state = FAB_OFFERED;
	fab_offer_add(cl);
	if (connect_back(sv, d, fab, &o, addr, alen, &r) < 0)
		goto out;
	/* The passive thread's answer makes the client end UP. */
	while (state_of(cl) != FAB_UP && shunt_now_ms() - t0 < 10000) {
		if (state_of(cl) != FAB_OFFERED && state_of(cl) != FAB_ACCEPTING) {
			say(&r, "error: the client end did not take the connection\n");
			goto out;
		}
		REAL(poll)(NULL, 0, 1);
	}
	say(&r, "connected: yes, in %llu ms\n", (unsigned long long)(shunt_now_ms() - t0));
	size_t cap = 2 * ring + 4096;
	uint8_t *buf = malloc(cap);
	if (!buf)
		goto out;
	struct flow f[2] = {{sv, cl, 0, 0, 0, bytes, 1}, {cl, sv, 1, 0, 0, bytes, 2}};
	uint64_t t1 = shunt_now_ms();
	while ((f[0].got < bytes || f[1].got < bytes) && shunt_now_ms() - t1 < SELFTEST_MS) {
		if (step(&f[0], ring, buf, cap, &r) < 0 || step(&f[1], ring, buf, cap, &r) < 0)
			break;
	}
	free(buf);
	uint64_t ms = shunt_now_ms() - t1;
	say(&r, "bytes server->client: %llu of %llu checked\nbytes client->server: %llu of %llu checked\n",
	    (unsigned long long)f[0].got, (unsigned long long)bytes, (unsigned long long)f[1].got,
	    (unsigned long long)bytes);
	say(&r, "ring: %llu bytes; writes at most %llu bytes; %llu ms\n", (unsigned long long)ring,
	    (unsigned long long)sv->chunk, (unsigned long long)ms);
	int up = state_of(cl) == FAB_UP && state_of(sv) == FAB_UP;
	if (!up)
		say(&r, "error: the connection left the fabric (state %d/%d, why %d/%d)\n",
		    state_of(sv), state_of(cl), sv->why, cl->why);
	rc = f[0].got == bytes && f[1].got == bytes && up ? 0 : -1;
	if (rc < 0 && f[0].got + f[1].got < 2 * bytes && ms >= SELFTEST_MS) {
		say(&r, "error: stalled for %d s\n", SELFTEST_MS / 1000);
		for (int i = 0; i < 2; i++) {
			struct fab_conn *c = i ? cl : sv;
			say(&r, "%s end: tx head %llu posted %llu acked %llu in flight %zu; rx arrived "
				"%llu consumed %llu credited %llu\n",
			    i ? "client" : "server", (unsigned long long)c->tx_head,
			    (unsigned long long)c->tx_posted, (unsigned long long)c->tx_acked,
			    c->tx_inflight, (unsigned long long)c->rx_arrived,
			    (unsigned long long)c->rx_consumed, (unsigned long long)c->rx_credited);
		}
	}
out:
	fab_offer_del(cl ? cl : sv);
	end_close(sv);
	end_close(cl);
	if (fab_vrb_on()) {
		char v[320];
		fab_vrb_report(v, sizeof v);
		say(&r, "verbs rules: %s\n", v);
	}
	for (int i = 0; i < 2; i++)
		if (sp[i] >= 0)
			REAL(close)(sp[i]);
	say(&r, "result: %s\n", rc == 0 ? "PASS" : "FAIL");
	return rc;
}
