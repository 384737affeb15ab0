/* One client of the agent.  The first byte tells the protocol apart: 'S'
 * starts an agent frame, 'G'/'H' an HTTP request (GET /metrics, GET /healthz; TCP port
 * only), anything else is garbage.  Every client must complete each request
 * within client_timeout_ms; a malformed, oversized or late one is counted
 * and closed, and nothing it sends can stop the others being served.
 * Between requests an agent client may stay connected for SHUNTD_IDLE_MS:
 * shims keep their link to send the next offer on (fab_rdv.c).  An idle
 * one is also the first to go when the agent has no room for a new one.
 * A Unix client may pass one fd (SCM_RIGHTS) with the first byte of a
 * request: SIGN uses it; any other fd, and one with any other request, is
 * closed at once. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utlist.h>

#include "agent_hmac.h"
#include "core/shunt_fdpass.h"
#include "core/shunt_registry.h"
#include "core/shunt_tuple.h"
#include "shuntd.h"
#include "shuntd_http.h"
#include "shuntd_net.h"
#include "shuntd_pending.h"
#include "shuntd_sign.h"

#define IN_MAX 1024 /* an agent frame, or an HTTP request head */

enum mode { M_NEW, M_AGENT, M_HTTP };

struct client {
	int fd;
	int is_unix;
	enum mode mode;
	int hello;                /* HELLO seen: snonce/cnonce valid */
	int authed;
	int closing;              /* close once out is flushed */
	uint8_t cnonce[AGENT_NONCE_LEN], snonce[AGENT_NONCE_LEN];
	struct sockaddr_storage peer;
	uid_t uid;                /* a Unix client's, by SO_PEERCRED */
	pid_t pid;
	int passed_fd;            /* came with the request being read, or -1 */
	uint64_t deadline;
	size_t nin;
	uint8_t in[IN_MAX];
	char *out;                /* pending output: small[] or malloc'ed */
	size_t nout, outoff;
	char small[AGENT_FRAME_MAX * 2];
	struct client *prev, *next; /* in clients (utlist) */
};

static struct client *clients;

static void drop(struct client *c)
{
	ev_unwatch(shuntd.el, c->fd);
	close(c->fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	if (c->out != c->small)
		free(c->out);
	DL_DELETE(clients, c);
	shuntd.n.open_clients--;
	free(c);
}

static void fail(struct client *c, enum shuntd_err e)
{
	shuntd.n.errors[e]++;
	SHUNTD_DEBUG("client fd %d dropped: %s", c->fd,
		     (const char *[]){"malformed", "oversized", "version", "auth", "unexpected",
				      "timeout", "busy", "http", "io"}[e]);
}

static void on_event(struct ev_loop *el, int fd, void *data, int mask);

/* An agent client between requests: nothing half-read, nothing to send. */
static int is_idle(const struct client *c)
{
	return c->mode == M_AGENT && !c->nin && !c->nout && !c->closing;
}

/* The idle client that has waited longest, to make room for a new one. */
static struct client *oldest_idle(void)
{
	struct client *o = NULL;
	for (struct client *c = clients; c; c = c->next)
		if (is_idle(c) && (!o || c->deadline < o->deadline))
			o = c;
	return o;
}

/* Write what is pending; 0 when all is out, 1 when some waits, -1 dead. */
static int flush(struct client *c)
{
	while (c->outoff < c->nout) {
		ssize_t w = send(c->fd, c->out + c->outoff, c->nout - c->outoff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			c->outoff += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return ev_watch(shuntd.el, c->fd, EV_WRITE, on_event, c) < 0 ? -1 : 1;
		return -1;
	}
	if (c->out != c->small)
		free(c->out);
	c->out = c->small;
	c->nout = c->outoff = 0;
	return 0;
}

static void reply(struct client *c, const struct agent_msg *m)
{
	if (c->nout + AGENT_FRAME_MAX > sizeof c->small || c->out != c->small)
		return; /* handle() runs only with nothing pending: cannot happen */
	c->nout += agent_encode(m, (uint8_t *)c->small + c->nout);
}

static void reply_error(struct client *c, int code, enum shuntd_err e)
{
	struct agent_msg m = {.type = AGENT_ERROR, .u.code = (uint8_t)code};
	reply(c, &m);
	fail(c, e);
	c->closing = 1;
}

/* The agent connection comes from the host at want (IPv4 as mapped IPv6):
 * a peer speaks only for its own connections.  Local shims reach the Unix
 * socket only through the rundir's permissions. */
static int from_host(const struct client *c, const uint8_t want[16])
{
	uint8_t a[16];
	uint16_t port;
	if (c->is_unix)
		return 1;
	return shunt_addr16((const struct sockaddr *)&c->peer, a, &port) == 0 &&
	       !memcmp(a, want, 16);
}

/* a:port as a socket address, a mapped IPv4 address as what it is (the
 * registry is keyed so). */
static const struct sockaddr *as_sockaddr(const uint8_t a[16], uint16_t port,
					  struct sockaddr_storage *ss)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memset(ss, 0, sizeof *ss);
	if (!memcmp(a, v4mapped, sizeof v4mapped)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, a + 12, 4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, a, 16);
	}
	return (const struct sockaddr *)ss;
}

/* Whom a request counts against: the peer's address (a local client's is
 * all zeros). */
static void source_of(const struct client *c, uint8_t src[16])
{
	uint16_t port;
	memset(src, 0, 16);
	if (!c->is_unix)
		shunt_addr16((const struct sockaddr *)&c->peer, src, &port);
}

static const char *const hold_name[SO_COUNT] = {
	"held", "no listener", "refused", "table full", "source full", "contested", "unsigned",
	"bad countersignature"};

/* An offer for a live listener here is held, in memory, until the shim
 * that accepts its connection takes it (do_take) or it expires. */
static void do_offer(struct client *c, const struct agent_offer *o)
{
	struct agent_msg m = {.type = AGENT_OFFER_ANSWER, .u.status = AGENT_ST_REFUSED};
	struct sockaddr_storage ss;
	struct pending *p = NULL;
	uint8_t src[16];
	unsigned uid = 0;
	enum shuntd_hold_res res = SO_REFUSED;
	const struct sockaddr *dst = as_sockaddr(o->tuple.saddr, o->tuple.sport, &ss);
	enum sign_verdict v = SIGN_OK;
	source_of(c, src);
	if (shuntd.csign_len > 0)
		v = sign_verify(shuntd.csign_key, (size_t)shuntd.csign_len, o);
	if (!from_host(c, o->tuple.caddr)) {
		res = SO_REFUSED;
	} else if (v != SIGN_OK) {
		/* Not vouched for by the client's agent: a filer that may not
		 * hold the connection (someone else on the client's address). */
		res = v == SIGN_NONE ? SO_UNSIGNED : SO_BADSIG;
	} else if (shunt_registry_lookup_uid(shuntd.rundir, dst, &uid) != SHUNT_REG_LIVE) {
		/* (A listener whose processes dropped their privileges could
		 * not take the offer either.) */
		res = SO_NO_LISTENER;
		m.u.status = AGENT_ST_NO_LISTENER;
	} else {
		enum pend_result r = pending_add(PK_OFFER, &o->tuple, src, ev_now_ms(), &p);
		res = r == PEND_HELD	     ? SO_HELD
		      : r == PEND_TABLE_FULL ? SO_TABLE_FULL
		      : r == PEND_CONTESTED  ? SO_CONTESTED
					     : SO_SOURCE_FULL;
		if (r == PEND_CONTESTED)
			shuntd_log("two offers for one connection to port %u: neither is "
				    "given (someone shares the client's address)",
				    (unsigned)o->tuple.sport);
		if (p) {
			p->uid = uid;
			p->offer = *o;
			m.u.status = AGENT_ST_OK;
		}
	}
	shuntd.n.offers[res]++;
	SHUNTD_DEBUG("offer for port %u: %s", (unsigned)o->tuple.sport, hold_name[res]);
	reply(c, &m);
}

/* The accepting shim asks for the offer held for its connection: only the
 * listener's owner may have it, or, in a group's rundir, any member (only
 * members reach agent.sock there).  Taken once. */
static void do_take(struct client *c, const struct agent_tuple *t)
{
	struct agent_msg m = {.type = AGENT_TAKE_ANSWER};
	struct pending *p = pending_find(PK_OFFER, t);
	enum shuntd_take_res res = ST_NONE;
	m.u.taken.status = AGENT_ST_NO_OFFER;
	if (p && p->contested) {
		/* Held empty: the shim takes the kernel path at once. */
		res = ST_CONTESTED;
	} else if (p && c->uid != p->uid && !shuntd.rundir_shared) {
		res = ST_REFUSED;
		m.u.taken.status = AGENT_ST_REFUSED;
	} else if (p) {
		res = ST_TAKEN;
		m.u.taken.status = AGENT_ST_OK;
		m.u.taken.offer = p->offer;
		pending_del(p);
	}
	shuntd.n.takes[res]++;
	SHUNTD_DEBUG("take for port %u by uid %u: %s", (unsigned)t->sport, (unsigned)c->uid,
		     (const char *[]){"taken", "none", "refused", "contested"}[res]);
	reply(c, &m);
}

/* A local shim about to offer asks for the countersignature, with its TCP
 * socket (fd, -1 when none came): signed only when that socket holds the
 * offer's client end.  fd stays the caller's. */
static void do_sign(struct client *c, const struct agent_offer *o, int fd)
{
	struct agent_msg m = {.type = AGENT_SIGN_ANSWER};
	const char *why = "no countersign key";
	enum shuntd_sign_res res = SG_NO_KEY;
	m.u.signed_.status = AGENT_ST_NO_KEY;
	if (shuntd.csign_len > 0) {
		res = SG_REFUSED;
		m.u.signed_.status = AGENT_ST_REFUSED;
		if (sign_socket_holds(fd, &o->tuple, &why) == 0) {
			res = SG_SIGNED;
			why = "signed";
			m.u.signed_.status = AGENT_ST_OK;
			sign_offer(shuntd.csign_key, (size_t)shuntd.csign_len, o, m.u.signed_.csig);
		}
	}
	shuntd.n.signs[res]++;
	if (res == SG_REFUSED)
		shuntd_log("countersign for port %u refused to pid %d uid %u: %s",
			   (unsigned)o->tuple.cport, (int)c->pid, (unsigned)c->uid, why);
	else
		SHUNTD_DEBUG("countersign for port %u by pid %d uid %u: %s",
			     (unsigned)o->tuple.cport, (int)c->pid, (unsigned)c->uid, why);
	reply(c, &m);
}

static void do_query(struct client *c, const struct agent_msg *q)
{
	struct agent_msg m = {.type = AGENT_QUERY_ANSWER};
	struct sockaddr_storage ss;
	const struct sockaddr *dst = as_sockaddr(q->u.query.addr, q->u.query.port, &ss);
	int live = shunt_registry_lookup(shuntd.rundir, dst) == SHUNT_REG_LIVE;
	shuntd.n.queries[live]++;
	m.u.status = live ? AGENT_ST_OK : AGENT_ST_NO_LISTENER;
	reply(c, &m);
}

/* A DEMOTE position for an end on this host, from the other end: the
 * sender must be that other end's host, and the end here must be one the
 * registry knows (a server: its listener's uid) or, for a client, the
 * rundir's owner reads it.  The token, which only the two ends know, is
 * what the shim checks. */
static void do_relay(struct client *c, const struct agent_relay *r)
{
	struct agent_msg m = {.type = AGENT_RELAY_ANSWER, .u.status = AGENT_ST_REFUSED};
	unsigned uid = (unsigned)geteuid();
	struct stat st;
	struct sockaddr_storage ss;
	struct pending *p = NULL;
	uint8_t src[16];
	enum shuntd_hold_res res = SO_REFUSED;
	int from_peer = from_host(c, r->to_client ? r->tuple.saddr : r->tuple.caddr);
	if (!r->to_client) {
		if (shunt_registry_lookup_uid(shuntd.rundir,
					      as_sockaddr(r->tuple.saddr, r->tuple.sport, &ss),
					      &uid) == SHUNT_REG_NONE)
			from_peer = 0;
	} else if (stat(shuntd.rundir, &st) == 0) {
		uid = st.st_uid;
	}
	/* Counted and bounded like offers; the file is what the shim's
	 * watcher sees (inotify on r/), and goes at the entry's lifetime. */
	source_of(c, src);
	if (from_peer) {
		enum pend_kind kind = r->to_client ? PK_RELAY_C : PK_RELAY_S;
		enum pend_result pr = pending_add(kind, &r->tuple, src, ev_now_ms(), &p);
		res = pr == PEND_TABLE_FULL ? SO_TABLE_FULL : pr == PEND_SOURCE_FULL ? SO_SOURCE_FULL
										     : SO_REFUSED;
	}
	if (p && rundir_file_relay(shuntd.rundir, r, uid) == 0) {
		res = SO_HELD;
		m.u.status = AGENT_ST_OK;
	} else if (p) {
		pending_del(p);
	}
	shuntd.n.relays[res]++;
	SHUNTD_DEBUG("relay for the %s end of port %u: %s", r->to_client ? "client" : "server",
		     (unsigned)r->tuple.sport, hold_name[res]);
	reply(c, &m);
}

static void handle(struct client *c, const struct agent_msg *m, int fd)
{
	/* Peers across the network prove the secret first; local shims reach
	 * the Unix socket only through the rundir's permissions. */
	int need_auth = shuntd.secret_len > 0 && !c->is_unix && !c->authed;
	struct agent_msg r;
	switch (m->type) {
	case AGENT_HELLO:
		shuntd.n.requests[SR_HELLO]++;
		if (c->hello)
			return reply_error(c, AGENT_E_UNEXPECTED, SE_UNEXPECTED);
		memcpy(c->cnonce, m->u.nonce, AGENT_NONCE_LEN);
		if (getrandom(c->snonce, AGENT_NONCE_LEN, 0) != (ssize_t)AGENT_NONCE_LEN)
			return reply_error(c, AGENT_E_AUTH, SE_IO);
		c->hello = 1;
		r.type = AGENT_CHALLENGE;
		memcpy(r.u.nonce, c->snonce, AGENT_NONCE_LEN);
		return reply(c, &r);
	case AGENT_AUTH: {
		shuntd.n.requests[SR_AUTH]++;
		uint8_t mac[AGENT_MAC_LEN];
		if (!c->hello || c->authed)
			return reply_error(c, AGENT_E_UNEXPECTED, SE_UNEXPECTED);
		if (!shuntd.secret_len)
			return reply_error(c, AGENT_E_AUTH, SE_AUTH);
		agent_auth_mac(shuntd.secret, (size_t)shuntd.secret_len, 1, c->cnonce, c->snonce,
			       mac);
		if (hmac_equal(mac, m->u.mac, AGENT_MAC_LEN))
			return reply_error(c, AGENT_E_AUTH, SE_AUTH);
		c->authed = 1;
		r.type = AGENT_AUTH_OK;
		agent_auth_mac(shuntd.secret, (size_t)shuntd.secret_len, 0, c->cnonce, c->snonce,
			       r.u.mac);
		return reply(c, &r);
	}
	case AGENT_QUERY:
		shuntd.n.requests[SR_QUERY]++;
		if (need_auth)
			return reply_error(c, AGENT_E_AUTH, SE_AUTH);
		return do_query(c, m);
	case AGENT_OFFER:
		shuntd.n.requests[SR_OFFER]++;
		if (need_auth)
			return reply_error(c, AGENT_E_AUTH, SE_AUTH);
		return do_offer(c, &m->u.offer);
	case AGENT_RELAY:
		shuntd.n.requests[SR_RELAY]++;
		if (need_auth)
			return reply_error(c, AGENT_E_AUTH, SE_AUTH);
		return do_relay(c, &m->u.relay);
	case AGENT_TAKE:
		/* Local shims only: over TCP, nobody's SO_PEERCRED. */
		shuntd.n.requests[SR_TAKE]++;
		if (!c->is_unix)
			return reply_error(c, AGENT_E_UNEXPECTED, SE_UNEXPECTED);
		return do_take(c, &m->u.take);
	case AGENT_SIGN:
		/* Local shims only: the socket passed is the proof. */
		shuntd.n.requests[SR_SIGN]++;
		if (!c->is_unix)
			return reply_error(c, AGENT_E_UNEXPECTED, SE_UNEXPECTED);
		return do_sign(c, &m->u.sign, fd);
	default:
		return reply_error(c, AGENT_E_UNEXPECTED, SE_UNEXPECTED);
	}
}

/* An HTTP request head is complete (or can never be): answer, then close. */
static void http_step(struct client *c)
{
	size_t n = 0;
	char *resp = NULL;
	int r = http_answer(c->in, c->nin, sizeof c->in, &resp, &n);
	if (r == 0)
		return;
	if (r < 0)
		fail(c, SE_HTTP);
	c->closing = 1;
	if (resp) {
		c->out = resp;
		c->nout = n;
		c->outoff = 0;
	}
}

/* Act on what has arrived; stops while output is pending, so a client that
 * sends without reading cannot make the agent buffer without bound. */
static void process(struct client *c)
{
	while (!c->closing && c->nout == 0 && c->nin) {
		if (c->mode == M_NEW) {
			if (c->in[0] == AGENT_MAGIC0)
				c->mode = M_AGENT;
			else if (!c->is_unix && (c->in[0] == 'G' || c->in[0] == 'H'))
				c->mode = M_HTTP;
			else {
				fail(c, SE_MALFORMED);
				c->closing = 1;
				return;
			}
		}
		if (c->mode == M_HTTP)
			return http_step(c);
		struct agent_msg m;
		int why = AGENT_E_MALFORMED;
		int n = agent_decode(c->in, c->nin, &m, &why);
		if (n == 0)
			return;
		if (n < 0) {
			enum shuntd_err e = why == AGENT_E_OVERSIZED ? SE_OVERSIZED
					    : why == AGENT_E_VERSION ? SE_VERSION
								     : SE_MALFORMED;
			return reply_error(c, why, e);
		}
		memmove(c->in, c->in + n, c->nin - (size_t)n);
		c->nin -= (size_t)n;
		c->deadline = ev_now_ms() + shuntd.client_timeout_ms;
		/* An fd belongs to the request it came with, whatever that is. */
		int fd = c->passed_fd;
		c->passed_fd = -1;
		handle(c, &m, fd);
		if (fd >= 0)
			close(fd);
	}
}

/* Read what a client sent.  On agent.sock: with any fds passed, of which
 * one is kept (c->passed_fd) if it came with the first byte of a request
 * and none is kept yet; every other is closed (a peer can send any fds, as
 * many as fit a control message, with any bytes). */
static ssize_t client_read(struct client *c)
{
	if (!c->is_unix)
		return recv(c->fd, c->in + c->nin, sizeof c->in - c->nin, MSG_DONTWAIT);
	int fds[SHUNT_FDPASS_MAX], nfd;
	int at_start = c->nin == 0;
	ssize_t r = shunt_recv_fds(c->fd, c->in + c->nin, sizeof c->in - c->nin, MSG_DONTWAIT, fds,
				   SHUNT_FDPASS_MAX, &nfd, NULL);
	for (int i = 0; i < nfd; i++) {
		if (at_start && r > 0 && c->passed_fd < 0)
			c->passed_fd = fds[i];
		else
			close(fds[i]);
	}
	return r;
}

static void on_event(struct ev_loop *el, int fd, void *data, int mask)
{
	struct client *c = data;
	if (mask & EV_READ && !c->closing) {
		ssize_t r = client_read(c);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			if (c->nin || c->mode == M_NEW || r < 0)
				fail(c, c->nin ? SE_MALFORMED : SE_IO); /* cut mid-frame */
			return drop(c);
		}
		if (r > 0) {
			/* The first bytes of a request: it has the read deadline
			 * from now, whatever the link's idle time was. */
			if (!c->nin && c->mode == M_AGENT)
				c->deadline = ev_now_ms() + shuntd.client_timeout_ms;
			c->nin += (size_t)r;
		}
	}
	for (;;) {
		process(c);
		int f = flush(c);
		if (f < 0)
			return drop(c);
		if (f > 0)
			return; /* EV_WRITE armed */
		if (c->closing)
			return drop(c);
		if (!c->nin || c->mode == M_HTTP || !agent_decode(c->in, c->nin, &(struct agent_msg){0}, NULL))
			break;
	}
	if (is_idle(c))
		c->deadline = ev_now_ms() + SHUNTD_IDLE_MS;
	if (ev_watch(el, fd, EV_READ, on_event, c) < 0)
		drop(c);
}

/* Listeners resting after accept() ran out of fds or memory: a listener
 * with a connection waiting stays readable, and asking again at once would
 * spin.  client_reap() wakes them. */
static struct {
	int fd;
	void *data;
	uint64_t until;
} resting[4];

static void rest(struct ev_loop *el, int lfd, void *data)
{
	for (unsigned i = 0; i < sizeof resting / sizeof *resting; i++)
		if (!resting[i].until) {
			resting[i].fd = lfd;
			resting[i].data = data;
			resting[i].until = ev_now_ms() + SHUNTD_ACCEPT_PAUSE_MS;
			ev_watch(el, lfd, 0, client_accept, data);
			shuntd.n.accept_pauses++;
			return;
		}
}

static void wake_rested(struct ev_loop *el, uint64_t now)
{
	for (unsigned i = 0; i < sizeof resting / sizeof *resting; i++)
		if (resting[i].until && now >= resting[i].until) {
			resting[i].until = 0;
			ev_watch(el, resting[i].fd, EV_READ, client_accept, resting[i].data);
		}
}

void client_accept(struct ev_loop *el, int lfd, void *data, int mask)
{
	int is_unix = data != NULL;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		int fd = net_accept(lfd, &ss);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Make room for the next one if anyone idles, and
				 * rest a moment. */
				struct client *idle = oldest_idle();
				if (idle)
					drop(idle);
				rest(el, lfd, data);
			}
			return;
		}
		client_adopt(el, fd, is_unix, &ss);
	}
}

void client_adopt(struct ev_loop *el, int fd, int is_unix, const struct sockaddr_storage *peer)
{
	shuntd.n.clients[is_unix]++;
	if (shuntd.n.open_clients >= shuntd.max_clients) {
		struct client *idle = oldest_idle();
		if (idle)
			drop(idle); /* its shim opens a new link when it needs one */
	}
	struct client *c = shuntd.n.open_clients < shuntd.max_clients ? malloc(sizeof *c) : NULL;
	if (!c) {
		/* Busy: say so if it is an agent client, then drop it. */
		static const uint8_t busy[] = {AGENT_MAGIC0, AGENT_MAGIC1, AGENT_PROTO_VERSION,
					       AGENT_ERROR, 0, 0, 0, 1, AGENT_E_BUSY};
		send(fd, busy, sizeof busy, MSG_NOSIGNAL | MSG_DONTWAIT);
		shuntd.n.errors[SE_BUSY]++;
		close(fd);
		return;
	}
	memset(c, 0, offsetof(struct client, in));
	c->fd = fd;
	c->is_unix = is_unix;
	c->peer = *peer;
	c->uid = (uid_t)-1;
	c->pid = 0;
	c->passed_fd = -1;
	struct ucred cr;
	socklen_t crl = sizeof cr;
	if (is_unix && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0) {
		c->uid = cr.uid;
		c->pid = cr.pid;
	}
	c->out = c->small;
	c->deadline = ev_now_ms() + shuntd.client_timeout_ms;
	c->nout = c->outoff = 0;
	DL_PREPEND(clients, c);
	shuntd.n.open_clients++;
	if (ev_watch(el, fd, EV_READ, on_event, c) < 0) {
		fail(c, SE_IO);
		drop(c);
	}
}

void client_reap(struct ev_loop *el, void *data)
{
	uint64_t now = ev_now_ms();
	wake_rested(el, now);
	struct client *c, *next;
	DL_FOREACH_SAFE(clients, c, next) {
		if (now >= c->deadline) {
			/* Idle past SHUNTD_IDLE_MS is no error; late in a request is. */
			if (!is_idle(c))
				fail(c, SE_TIMEOUT);
			drop(c);
		}
	}
}

void client_close_all(void)
{
	while (clients)
		drop(clients);
}
