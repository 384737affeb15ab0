/* Remote rendezvous (fab_rdv.h): the client's offer through the agent on the
 * destination host, the server's taking of it from its own agent.
 *
 * The exchange runs on a TCP connection of shunt's own (an internal fd,
 * made under the guard), kept open for the next offer to the same host, and
 * is bounded as a whole by timeout_ms.  A
 * host whose agent did not answer, or refused us, is remembered in a small
 * fixed table for agent_cache_s, so a plain network costs one probe per host
 * and the hot path neither allocates nor makes a system call. */
#include "fab_rdv.h"
#include "fab_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_client.h"
#include "agent/agent_proto.h"
#include "core/shunt_clock.h"
#include "core/shunt_core.h"
#include "core/shunt_fdpass.h"
#include "core/shunt_forklock.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_rundir.h"
#include "core/shunt_rundir_open.h"

/* ---- per-host negative cache ---------------------------------------------------
 * 4-way set associative, 64 sets: a lookup reads at most 4 entries under a
 * one-byte spinlock held for a few loads (no system call inside, so a
 * signal handler re-entering connect() on the same thread is the only way
 * to find it taken: it then skips the cache rather than spin). */

#define CACHE_WAYS 4
#define CACHE_SETS 64

struct cache_entry {
	uint8_t addr[16];
	uint64_t until_ms;   /* 0: free */
	uint8_t result;      /* enum fab_rdv_result */
};

static struct cache_entry cache[CACHE_SETS][CACHE_WAYS];
static uint8_t cache_lock;
SHUNT_FORK_BYTELOCK(cache_lock, SHUNT_RANK_FAB_AGENTS)

static unsigned cache_set(const uint8_t a[16])
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < 16; i++)
		h = (h ^ a[i]) * 16777619u;
	return (h ^ (h >> 15)) % CACHE_SETS;
}

static int spin_take(uint8_t *lock)
{
	for (int spins = 0; spins < 1000; spins++) {
		if (!__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
			return 1;
		shunt_cpu_relax();
	}
	return 0;
}

static int cache_take(void)
{
	return spin_take(&cache_lock);
}

static void cache_give(void)
{
	__atomic_store_n(&cache_lock, 0, __ATOMIC_RELEASE);
}

/* 1 with *r when a live entry says what happened last time. */
static int cache_get(const uint8_t a[16], uint64_t now, enum fab_rdv_result *r)
{
	struct cache_entry *set = cache[cache_set(a)];
	int hit = 0;
	if (!cache_take())
		return 0;
	for (int i = 0; i < CACHE_WAYS; i++)
		if (set[i].until_ms > now && !memcmp(set[i].addr, a, 16)) {
			*r = (enum fab_rdv_result)set[i].result;
			hit = 1;
			break;
		}
	cache_give();
	return hit;
}

static void cache_put(const uint8_t a[16], uint64_t until, enum fab_rdv_result r)
{
	struct cache_entry *set = cache[cache_set(a)];
	if (!cache_take())
		return;
	/* The same host, else a free or expired way, else the one that
	 * expires first. */
	int w = 0;
	for (int i = 0; i < CACHE_WAYS; i++) {
		if (!memcmp(set[i].addr, a, 16)) {
			w = i;
			break;
		}
		if (set[i].until_ms < set[w].until_ms)
			w = i;
	}
	memcpy(set[w].addr, a, 16);
	set[w].until_ms = until;
	set[w].result = (uint8_t)r;
	cache_give();
}

/* ---- the secret ----------------------------------------------------------------- */

static char secret[AGENT_SECRET_MAX + 1];
static int secret_len = -2; /* -2 not read yet, -1 unusable, else length */

/* Read once: a secret file is not read on every connect. */
static int get_secret(void)
{
	int n = __atomic_load_n(&secret_len, __ATOMIC_ACQUIRE);
	if (n != -2)
		return n;
	char buf[AGENT_SECRET_MAX + 1], err[256] = "";
	n = agent_secret_get(shunt_config(), buf, sizeof buf, err, sizeof err);
	if (n < 0)
		shunt_log(SHUNT_LOG_WARN, "%s: fabric offers are off", err);
	int expect = -2;
	/* Two threads may both read it; the first to publish wins. */
	if (n > 0)
		memcpy(secret, buf, (size_t)n + 1);
	if (!__atomic_compare_exchange_n(&secret_len, &expect, n, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		n = expect;
	memset(buf, 0, sizeof buf);
	return n;
}

/* ---- one exchange with an agent ----------------------------------------------------- */

struct link {
	int fd;
	uint64_t deadline;
	uint8_t in[AGENT_FRAME_MAX];
	size_t nin;
};

/* Wait for events on the link until the deadline: 1 ready, 0 timed out,
 * -1 error. */
static int wait_for(struct link *l, short events)
{
	for (;;) {
		uint64_t now = shunt_now_ms();
		if (now >= l->deadline)
			return 0;
		struct pollfd p = {.fd = l->fd, .events = events};
		int r = REAL(poll)(&p, 1, (int)(l->deadline - now));
		if (r > 0)
			return p.revents & (POLLERR | POLLNVAL) && !(p.revents & events) ? -1 : 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

static int send_msg(struct link *l, const struct agent_msg *m)
{
	uint8_t buf[AGENT_FRAME_MAX];
	size_t n = agent_encode(m, buf), off = 0;
	if (!n)
		return -1;
	while (off < n) {
		ssize_t w = REAL(send)(l->fd, buf + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (w < 0 && errno == EAGAIN && wait_for(l, POLLOUT) <= 0)
			return -1;
	}
	return 0;
}

/* Next frame: 1 with *m, 0 timed out or closed, -1 a malformed frame. */
static int recv_msg(struct link *l, struct agent_msg *m)
{
	for (;;) {
		int n = agent_next_frame(l->in, &l->nin, m, NULL);
		if (n)
			return n;
		ssize_t r = REAL(recv)(l->fd, l->in + l->nin, sizeof l->in - l->nin, MSG_DONTWAIT);
		if (r > 0) {
			l->nin += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			return 0;
		if (wait_for(l, POLLIN) <= 0)
			return 0;
	}
}

static int open_link(struct link *l, const struct sockaddr *dst, socklen_t len, uint16_t port)
{
	struct sockaddr_storage a;
	if (len > sizeof a)
		return -1;
	memcpy(&a, dst, len);
	if (a.ss_family == AF_INET)
		((struct sockaddr_in *)&a)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&a)->sin6_port = htons(port);
	int fd = REAL(socket)(a.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* Ours while it lives: the application cannot close or dup2 over it
	 * from another thread. */
	l->fd = shunt_fd_own(fd, &l->fd);
	int one = 1;
	REAL(setsockopt)(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (REAL(connect)(l->fd, (struct sockaddr *)&a, len) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EINTR)
		return -1;
	if (wait_for(l, POLLOUT) <= 0)
		return -1;
	int err = 0;
	socklen_t el = sizeof err;
	if (REAL(getsockopt)(l->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
		return -1;
	return 0;
}

static int io_send(void *l, const struct agent_msg *m)
{
	return send_msg(l, m);
}

static int io_recv(void *l, struct agent_msg *m)
{
	return recv_msg(l, m);
}

/* The challenge-response, both ways (agent/agent_client.c): the agent
 * proves it knows the secret too, so an offer's token never goes to an
 * impostor. */
static enum fab_rdv_result authenticate(struct link *l, const char *key, size_t klen)
{
	struct agent_io io = {io_send, io_recv, l};
	enum agent_auth_result r = agent_authenticate(&io, key, klen, NULL, NULL);
	return r == AGENT_AUTHED ? FAB_RDV_OK : r == AGENT_AUTH_SILENT ? FAB_RDV_NO_AGENT : FAB_RDV_REFUSED;
}

/* ---- links kept open to agents --------------------------------------------------
 * The link of an exchange that ended cleanly (one answer, nothing unread)
 * stays open for the next offer to that host: one TCP connect (and, with a
 * secret, the authentication's two round trips) per host instead of per
 * connection.  A kept link serves one exchange at a time (a thread, or a
 * signal handler, that finds it busy opens a link of its own, as before);
 * only in the process that opened it (a forked child closes its copy and
 * opens its own); and an error or a timeout closes it, so no late answer
 * is ever read as the next one's.  The agent closes links idle for a minute
 * (shuntd_client.c); a link found closed, or closed under a request, is
 * replaced once. */

#define KEPT_LINKS 8
#define KEPT_IDLE_MS 30000 /* well inside the agent's idle bound */

static struct kept {
	struct link l;     /* l.fd valid when open */
	uint8_t addr[16];
	uint16_t port;
	uint8_t open, busy;
	uint8_t stale;     /* open in the parent before a fork */
	pid_t pid;
	uint64_t used_ms;
} kept[KEPT_LINKS];
static uint8_t kept_lock;
SHUNT_FORK_BYTELOCK(kept_lock, SHUNT_RANK_FAB_AGENTS)

/* A slot for host a16:port, marked busy: its open link if there is one,
 * else a free slot or the least recently used; -1 when none is to be had. */
static int kept_get(const uint8_t a16[16], uint16_t port, pid_t me)
{
	int k = -1;
	if (!spin_take(&kept_lock))
		return -1;
	for (int i = 0; i < KEPT_LINKS; i++) {
		struct kept *s = &kept[i];
		/* (A busy mark inherited through fork is no one's.) */
		if (s->busy && s->pid == me)
			continue;
		if (s->open && s->pid == me && s->port == port && !memcmp(s->addr, a16, 16)) {
			k = i;
			break;
		}
		if (k < 0 || !s->open || (kept[k].open && s->used_ms < kept[k].used_ms))
			k = i;
	}
	if (k >= 0) {
		kept[k].busy = 1;
		kept[k].stale = kept[k].pid != me;
		kept[k].pid = me;
	}
	__atomic_store_n(&kept_lock, 0, __ATOMIC_RELEASE);
	return k;
}

static void link_close(struct link *l)
{
	if (l->fd >= 0)
		shunt_fd_release(l->fd);
	l->fd = -1;
}

/* Slot k (busy, ours) holds a link to a16:port that can take a request:
 * 1; else whatever it held is closed (another host's, idle too long, a
 * parent's copy, closed or spoken to by the agent) and 0. */
static int kept_usable(int k, const uint8_t a16[16], uint16_t port, uint64_t now)
{
	struct kept *s = &kept[k];
	if (!s->open) {
		s->l.fd = -1;
		return 0;
	}
	if (!s->stale && s->port == port && !memcmp(s->addr, a16, 16) &&
	    now - s->used_ms < KEPT_IDLE_MS) {
		/* An idle link has nothing to read: anything there (EOF, an
		 * error) means the agent is done with it. */
		struct pollfd p = {.fd = s->l.fd, .events = POLLIN | POLLRDHUP};
		if (REAL(poll)(&p, 1, 0) == 0)
			return 1;
	}
	/* (In a forked child this closes only the child's copy.) */
	link_close(&s->l);
	s->open = 0;
	return 0;
}

static void kept_put(int k, int keep, const uint8_t a16[16], uint16_t port)
{
	struct kept *s = &kept[k];
	if (keep) {
		memcpy(s->addr, a16, 16);
		s->port = port;
		s->used_ms = shunt_now_ms();
	} else {
		link_close(&s->l);
	}
	s->open = (uint8_t)keep;
	__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

/* A new link to dst's agent, authenticated when there is a secret. */
static enum fab_rdv_result link_start(struct link *l, const struct sockaddr *dst, socklen_t len,
				      uint16_t port, int klen)
{
	l->fd = -1;
	l->nin = 0;
	if (open_link(l, dst, len, port) < 0)
		return FAB_RDV_NO_AGENT;
	return klen > 0 ? authenticate(l, secret, (size_t)klen) : FAB_RDV_OK;
}

/* One OFFER on an open link.  *answered: the agent answered it (the link is
 * still in step); *host as for exchange(). */
static enum fab_rdv_result offer_once(struct link *l, const struct agent_offer *o, int *host,
				      int *answered)
{
	struct agent_msg m = {.type = AGENT_OFFER}, a;
	m.u.offer = *o;
	*answered = 0;
	if (send_msg(l, &m) < 0)
		return FAB_RDV_NO_AGENT;
	int r = recv_msg(l, &a);
	if (r < 0 || (r > 0 && a.type == AGENT_ERROR))
		return FAB_RDV_REFUSED;
	if (r > 0 && a.type == AGENT_OFFER_ANSWER) {
		/* About this offer only (the listener, its owner, the tuple). */
		*host = 0;
		*answered = 1;
		return a.u.status == AGENT_ST_OK	     ? FAB_RDV_OK
		       : a.u.status == AGENT_ST_NO_LISTENER ? FAB_RDV_NO_LISTENER
							    : FAB_RDV_REFUSED;
	}
	return r > 0 ? FAB_RDV_REFUSED : FAB_RDV_NO_AGENT;
}

/* *host: the answer holds for the host (no agent, or the agent refused us:
 * secret, version), not just for this offer. */
static enum fab_rdv_result exchange(const struct sockaddr *dst, socklen_t len,
				    const uint8_t a16[16], const struct agent_offer *o,
				    int timeout_ms, int *host)
{
	const struct shunt_config *cfg = shunt_config();
	uint16_t port = (uint16_t)cfg->agent_port;
	int klen = get_secret();
	*host = 1;
	if (klen < 0)
		return FAB_RDV_REFUSED;
	pid_t me = getpid();
	uint64_t now = shunt_now_ms();
	struct link local = {.fd = -1};
	int k = kept_get(a16, port, me);
	struct link *l = k >= 0 ? &kept[k].l : &local;
	int reused = k >= 0 && kept_usable(k, a16, port, now);
	l->deadline = now + (uint64_t)timeout_ms;
	l->nin = 0;
	enum fab_rdv_result res;
	int answered = 0;
	for (;;) {
		if (!reused && (res = link_start(l, dst, len, port, klen)) != FAB_RDV_OK)
			break;
		res = offer_once(l, o, host, &answered);
		if (answered || !reused)
			break;
		/* The kept link was closed under us (the agent's idle bound,
		 * a restart): once more on a new one. */
		link_close(l);
		reused = 0;
	}
	int keep = answered && l->nin == 0 && l->fd >= 0;
	if (k >= 0)
		kept_put(k, keep, a16, port);
	else
		link_close(l);
	return res;
}

int fab_rdv_host_cached(const struct sockaddr *dst, enum fab_rdv_result *r)
{
	uint8_t a16[16];
	uint16_t port;
	return shunt_addr16(dst, a16, &port) == 0 && cache_get(a16, shunt_now_ms(), r);
}

enum fab_rdv_result fab_rdv_offer(const struct sockaddr *dst, socklen_t len,
				  const struct agent_offer *o, int timeout_ms)
{
	uint8_t a16[16];
	uint16_t port;
	enum fab_rdv_result r;
	/* Our own offer out of bounds says nothing about the host. */
	if (shunt_addr16(dst, a16, &port) < 0 || agent_offer_check(o) < 0)
		return FAB_RDV_REFUSED;
	const struct shunt_config *cfg = shunt_config();
	if (timeout_ms <= 0)
		timeout_ms = (int)cfg->agent_timeout_ms;
	uint64_t now = shunt_now_ms();
	if (cache_get(a16, now, &r))
		return r;
	int saved = errno, host = 1;
	SHUNT_GUARD_ENTER();
	r = exchange(dst, len, a16, o, timeout_ms, &host);
	SHUNT_GUARD_LEAVE();
	errno = saved;
	if (host && cfg->agent_cache_s)
		cache_put(a16, shunt_now_ms() + (uint64_t)cfg->agent_cache_s * 1000, r);
	if (shunt_config()->log_level >= SHUNT_LOG_DEBUG) {
		char h[INET6_ADDRSTRLEN] = "?";
		inet_ntop(AF_INET6, a16, h, sizeof h);
		shunt_log(SHUNT_LOG_DEBUG, "fabric offer for [%s]:%u via its agent: %s", h,
			  (unsigned)port,
			  r == FAB_RDV_OK		? "filed"
			  : r == FAB_RDV_NO_LISTENER ? "no listener"
			  : r == FAB_RDV_NO_AGENT    ? "no agent"
						     : "refused");
	}
	return r;
}

/* ---- tuples on the wire ----------------------------------------------------------- */

void fab_tuple_to_wire(struct agent_tuple *w, const struct shunt_tuple *t)
{
	memcpy(w->caddr, t->caddr, 16);
	memcpy(w->saddr, t->saddr, 16);
	w->cport = t->cport;
	w->sport = t->sport;
}

void fab_tuple_from_wire(struct shunt_tuple *t, const struct agent_tuple *w)
{
	memset(t, 0, sizeof *t);
	memcpy(t->caddr, w->caddr, 16);
	memcpy(t->saddr, w->saddr, 16);
	t->cport = w->cport;
	t->sport = w->sport;
}

static int same_tuple(const struct agent_tuple *w, const struct shunt_tuple *t)
{
	struct shunt_tuple x;
	fab_tuple_from_wire(&x, w);
	return !memcmp(&x, t, sizeof x);
}

/* ---- frames the agent filed for us -------------------------------------------- */

/* Read the frame the agent filed at path (a regular file of len bytes)
 * and decode it as type; 0 with *m filled, -1 when there is none or it is
 * not that. */
static int take_frame(const char *path, int type, size_t len, struct agent_msg *m)
{
	uint8_t buf[AGENT_FRAME_MAX + 1];
	struct stat st;
	int fd = shunt_rundir_open(path, O_RDONLY, 0, S_IFREG, SHUNT_ANY_OWNER, &st);
	if (fd < 0)
		return -1;
	ssize_t n = -1;
	if ((size_t)st.st_size == len)
		n = REAL(read)(fd, buf, sizeof buf);
	REAL(close)(fd);
	int why;
	return n == (ssize_t)len && agent_decode(buf, (size_t)n, m, &why) == (int)n &&
			       m->type == type
		       ? 0
		       : -1;
}

/* ---- offers the agent holds for us ---------------------------------------------- */

/* The agent on the other end of l: root, us, or the rundir's owner (who
 * runs it).  In a group's rundir any member can put a socket of its own in
 * agent.sock's place; its offers would send our connection to its
 * endpoint. */
static int agent_trusted(const struct link *l, const char *rundir)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	struct stat st;
	if (REAL(getsockopt)(l->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return 0;
	if (cr.uid == 0 || cr.uid == geteuid())
		return 1;
	return stat(rundir, &st) == 0 && st.st_uid == cr.uid;
}

int fab_rdv_take(const char *rundir, const struct shunt_tuple *t, struct agent_offer *o)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (!rundir || (size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", rundir,
					SHUNT_AGENT_SOCK) >= sizeof sa.sun_path)
		return -1;
	/* (The configuration, before the guard: under it an unread one
	 * reads as zeros.) */
	unsigned timeout_ms = shunt_config()->agent_timeout_ms;
	int saved = errno, rc = -1;
	SHUNT_GUARD_ENTER();
	struct link l = {.fd = -1};
	l.deadline = shunt_now_ms() + timeout_ms;
	int fd = REAL(socket)(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		l.fd = shunt_fd_own(fd, &l.fd);
	struct agent_msg m = {.type = AGENT_TAKE}, a;
	fab_tuple_to_wire(&m.u.take, t);
	/* One round trip.  No agent (no socket, nobody listening, a full
	 * backlog): a refused connect, and the kernel path at once. */
	if (l.fd >= 0 && REAL(connect)(l.fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	    agent_trusted(&l, rundir) && send_msg(&l, &m) == 0 && recv_msg(&l, &a) > 0 &&
	    a.type == AGENT_TAKE_ANSWER && a.u.taken.status == AGENT_ST_OK &&
	    same_tuple(&a.u.taken.offer.tuple, t)) {
		*o = a.u.taken.offer;
		rc = 0;
	}
	link_close(&l);
	SHUNT_GUARD_LEAVE();
	errno = saved;
	return rc;
}

/* ---- the countersignature of our own agent ---------------------------------------- */

/* SIGN with the socket: the fd travels with the frame's first byte, which
 * is how the agent tells whose request it is. */
static int send_sign(struct link *l, const struct agent_msg *m, int sock)
{
	uint8_t buf[AGENT_FRAME_MAX];
	size_t n = agent_encode(m, buf);
	if (!n)
		return -1;
	/* A frame is far below a Unix socket's buffer: one call sends it
	 * whole, or the agent is not keeping up and we go unsigned. */
	ssize_t w;
	do
		w = shunt_send_fds(l->fd, buf, n, &sock, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)n ? 0 : -1;
}

int fab_rdv_countersign(const char *rundir, int fd, struct agent_offer *o, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (!rundir || (size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", rundir,
					SHUNT_AGENT_SOCK) >= sizeof sa.sun_path)
		return -1;
	int saved = errno, rc = -1;
	SHUNT_GUARD_ENTER();
	struct link l = {.fd = -1};
	l.deadline = shunt_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	int s = REAL(socket)(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s >= 0)
		l.fd = shunt_fd_own(s, &l.fd);
	struct agent_msg m = {.type = AGENT_SIGN}, a;
	m.u.sign = *o;
	memset(m.u.sign.csig, 0, sizeof m.u.sign.csig);
	/* Our socket goes only to an agent we trust: another's could write
	 * into the connection with it. */
	if (l.fd >= 0 && REAL(connect)(l.fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	    agent_trusted(&l, rundir) && send_sign(&l, &m, fd) == 0 && recv_msg(&l, &a) > 0 &&
	    a.type == AGENT_SIGN_ANSWER && a.u.signed_.status == AGENT_ST_OK) {
		memcpy(o->csig, a.u.signed_.csig, sizeof o->csig);
		rc = 0;
	}
	link_close(&l);
	SHUNT_GUARD_LEAVE();
	errno = saved;
	return rc;
}

/* ---- relayed DEMOTE positions (docs/ARCHITECTURE.md, "Fabric demotion") ------ */

int fab_rdv_relay(const struct sockaddr *dst, socklen_t len, const struct agent_relay *r,
		  int timeout_ms)
{
	uint8_t a16[16];
	uint16_t port;
	if (shunt_addr16(dst, a16, &port) < 0)
		return -1;
	const struct shunt_config *cfg = shunt_config();
	if (timeout_ms <= 0)
		timeout_ms = (int)cfg->agent_timeout_ms;
	int saved = errno, rc = -1;
	SHUNT_GUARD_ENTER();
	int klen = get_secret();
	/* A link of its own: rare, and never worth disturbing a kept one. */
	struct link l = {.fd = -1};
	l.deadline = shunt_now_ms() + (uint64_t)timeout_ms;
	struct agent_msg m = {.type = AGENT_RELAY}, a;
	m.u.relay = *r;
	if (klen >= 0 && link_start(&l, dst, len, (uint16_t)cfg->agent_port, klen) == FAB_RDV_OK &&
	    send_msg(&l, &m) == 0 && recv_msg(&l, &a) > 0 && a.type == AGENT_RELAY_ANSWER &&
	    a.u.status == AGENT_ST_OK)
		rc = 0;
	link_close(&l);
	SHUNT_GUARD_LEAVE();
	errno = saved;
	return rc;
}

int fab_rdv_relay_take(const char *rundir, const struct shunt_tuple *t, int client,
		       const uint8_t key[AGENT_TOKEN_LEN], uint64_t *pos)
{
	char name[32], path[SHUNT_PATH_MAX];
	struct agent_msg m;
	if (!rundir)
		return -1;
	shunt_tuple_key(t, name, sizeof name);
	if (shunt_rundir_path(path, sizeof path, rundir, SHUNT_ROOM_RELAY, "%s.%c", name,
			      client ? 'c' : 's') < 0)
		return -1;
	SHUNT_GUARD_ENTER();
	/* Only a position proved with the connection's key counts: anything
	 * else is left to the agent's sweep. */
	int rc = take_frame(path, AGENT_RELAY, AGENT_HDR_LEN + AGENT_RELAY_LEN, &m);
	if (rc == 0 && (!same_tuple(&m.u.relay.tuple, t) ||
			m.u.relay.to_client != !!client || fab_relay_verify(key, &m.u.relay)))
		rc = -1;
	if (rc == 0) {
		unlink(path);
		*pos = m.u.relay.pos;
	}
	SHUNT_GUARD_LEAVE();
	return rc;
}
