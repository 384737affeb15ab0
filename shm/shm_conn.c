/* The shm transport's control path: rundir, offer and commit, decline,
 * demotion, close.  The data path is in shm_data.c.
 *
 * Rendezvous (brief, "Local rendezvous"):
 *   client connect():  registry says a live shunt listener has dst
 *                      -> bind (so the 4-tuple is known)
 *                      -> create <rundir>/o/<key>: header + two rings
 *                      -> bind wake socket <key>.c
 *                      -> real connect(); may write into the ring at once
 *   server accept():   open <rundir>/o/<key> for the accepted 4-tuple
 *                      -> owner uid, size, header checked
 *                      -> wake socket <key>.s; CAS OFFERED -> COMMITTED
 *                      -> unlink the offer file, wake the client
 *   decline (either):  CAS -> DEMOTING: the client sends its unread ring
 *                      bytes over TCP (see shm_switch).
 * No byte of this goes over the TCP connection. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_spill.h"
#include "shm_internal.h"


static int path_of(char *buf, size_t len, const char *key, const char *suffix)
{
	int n = snprintf(buf, len, "%s/o/%s%s", shunt_rundir(), key, suffix);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* ---- wakeups -------------------------------------------------------------- */

/* One unbound datagram socket per process sends every wakeup; each end of a
 * connection owns a bound one that its waits poll. */
static int sender = -1;
static pid_t sender_pid;

int shm_wake_sender(void)
{
	pid_t pid = shunt_pid();
	int fd = __atomic_load_n(&sender, __ATOMIC_ACQUIRE);
	if (fd >= 0 && __atomic_load_n(&sender_pid, __ATOMIC_RELAXED) == pid)
		return fd;
	int nfd = shunt_fd_own(REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0),
			       NULL);
	if (nfd < 0)
		return -1;
	if (!__atomic_compare_exchange_n(&sender, &fd, nfd, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		shunt_fd_release(nfd);
		return fd;
	}
	struct shunt_fd *e = shunt_fd_peek(nfd);
	if (e)
		e->owner = &sender;
	/* A child after fork: the inherited one is the parent's (harmless to
	 * share, but it would never be closed). */
	if (fd >= 0)
		shunt_fd_release(fd);
	__atomic_store_n(&sender_pid, pid, __ATOMIC_RELAXED);
	return nfd;
}

static const char *const suffix[2][2] = {
	[SHM_CLIENT] = {".c", ".cw"},
	[SHM_SERVER] = {".s", ".sw"},
};

static int wake_addr(struct sockaddr_un *a, socklen_t *len, const char *key, int side,
		     int role)
{
	char path[SHM_PATH_MAX];
	if (path_of(path, sizeof path, key, suffix[side][role]) ||
	    strlen(path) >= sizeof a->sun_path)
		return -1;
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	strcpy(a->sun_path, path);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
	return 0;
}

void shm_wake_role(struct shm_conn *c, int role)
{
	if (c->hdr &&
	    __atomic_exchange_n(&c->hdr->wake_pending[!c->side][role], 1, __ATOMIC_ACQ_REL))
		return;
	int s = shm_wake_sender();
	if (s < 0)
		return;
	char b = 0;
	/* A full queue already holds a wakeup; a TX socket not bound yet has
	 * no sleeper: both errors are fine. */
	REAL(sendto)(s, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
		     (struct sockaddr *)&c->peer[role], c->peer_len[role]);
}

void shm_wake_peer(struct shm_conn *c)
{
	shm_wake_role(c, SHM_WAKE_RX);
	shm_wake_role(c, SHM_WAKE_TX);
}

/* Bound wake sockets kept between connections.  Binding costs a socket,
 * a bind and moving the fd out of the application's range (five system
 * calls); a kept socket is renamed to the connection's name (one).
 * Renaming a bound socket's file keeps the binding: datagrams sent to the
 * new name reach it.  A late datagram from the previous peer only makes a
 * wait look once more. */
#define WAKE_POOL_MAX 64
static struct {
	int fd;
	unsigned id; /* its name while kept: <rundir>/o/w-<pid>-<id> */
} wpool[WAKE_POOL_MAX];
static unsigned wpool_n, wpool_seq;
static pid_t wpool_pid;
/* Also serialises binding, so two threads never bind one name. */
static pthread_mutex_t wpool_mu = PTHREAD_MUTEX_INITIALIZER;

static int wpool_name(char *buf, size_t len, unsigned id)
{
	int n = snprintf(buf, len, "%s/o/w-%d-%u", shunt_rundir(), (int)shunt_pid(), id);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static void wpool_mine(void)
{
	if (wpool_pid != shunt_pid()) {
		/* Inherited from the parent: its names, its sockets. */
		wpool_n = 0;
		wpool_pid = shunt_pid();
	}
}

/* A kept socket renamed to path, or -1.  wpool_mu held. */
static int wpool_take(const char *path)
{
	wpool_mine();
	while (wpool_n) {
		wpool_n--;
		int fd = wpool[wpool_n].fd;
		char name[SHM_PATH_MAX];
		if (!wpool_name(name, sizeof name, wpool[wpool_n].id) && rename(name, path) == 0)
			return fd;
		shunt_fd_release(fd);
		unlink(name);
	}
	return -1;
}

/* Keep a socket the connection is done with; 0 if it cannot be kept. */
static int wpool_put(int fd, const char *path)
{
	int kept = 0;
	pthread_mutex_lock(&wpool_mu);
	wpool_mine();
	struct shunt_fd *e = shunt_fd_peek(fd);
	char name[SHM_PATH_MAX];
	unsigned id = ++wpool_seq;
	if (wpool_n < WAKE_POOL_MAX && e && !wpool_name(name, sizeof name, id) &&
	    rename(path, name) == 0) {
		char buf[64];
		while (REAL(recv)(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
			;
		wpool[wpool_n].fd = fd;
		wpool[wpool_n].id = id;
		e->owner = &wpool[wpool_n].fd;
		wpool_n++;
		kept = 1;
	}
	pthread_mutex_unlock(&wpool_mu);
	return kept;
}

static int bind_one(struct shm_conn *c, int role)
{
	struct sockaddr_un a;
	socklen_t len;
	if (wake_addr(&a, &len, c->key, c->side, role) < 0)
		return -1;
	int rc = 0;
	pthread_mutex_lock(&wpool_mu);
	if (__atomic_load_n(&c->wake[role], __ATOMIC_ACQUIRE) >= 0)
		goto out; /* another thread bound it first */
	int fd = wpool_take(a.sun_path);
	if (fd < 0) {
		rc = -1;
		fd = REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			goto out;
		unlink(a.sun_path);
		if (REAL(bind)(fd, (struct sockaddr *)&a, len) < 0) {
			REAL(close)(fd);
			goto out;
		}
		/* Sending a wakeup takes write permission on the socket's
		 * file (a pooled one keeps this mode when renamed). */
		shm_share_path(a.sun_path);
		fd = shunt_fd_own(fd, NULL);
		rc = 0;
	}
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (e)
		e->owner = &c->wake[role];
	__atomic_store_n(&c->wake[role], fd, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&wpool_mu);
	return rc;
}

int shm_wake_fd(struct shm_conn *c, int role)
{
	int fd = __atomic_load_n(&c->wake[role], __ATOMIC_ACQUIRE);
	if (fd >= 0)
		return fd;
	SHUNT_GUARD_ENTER();
	bind_one(c, role);
	SHUNT_GUARD_LEAVE();
	return __atomic_load_n(&c->wake[role], __ATOMIC_ACQUIRE);
}

static int bind_wake_peer_only(struct shm_conn *c)
{
	for (int role = 0; role < 2; role++)
		if (wake_addr(&c->peer[role], &c->peer_len[role], c->key, !c->side, role) < 0)
			return -1;
	return 0;
}

/* Our RX wake socket now (the peer's first wakeups and the liveness probe
 * go there); the peer's addresses for both roles. */
static int bind_wake(struct shm_conn *c)
{
	if (bind_wake_peer_only(c) < 0)
		return -1;
	return bind_one(c, SHM_WAKE_RX);
}

/* ---- objects -------------------------------------------------------------- */

/* Connection objects are recycled, never freed: a racing shunt_conn_get()
 * may read one after it died (see shunt_conn.h).  Pushes are lock-free (a
 * last put may run in any thread); pops take a mutex, which makes the
 * Treiber pop safe from ABA (a listed object can only be popped by us). */
static struct shm_conn *pool;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

static struct shm_conn *pool_get(void)
{
	pthread_mutex_lock(&pool_mu);
	struct shm_conn *c = __atomic_load_n(&pool, __ATOMIC_ACQUIRE);
	while (c && !__atomic_compare_exchange_n(&pool, &c, c->next_free, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
		;
	pthread_mutex_unlock(&pool_mu);
	if (!c)
		return calloc(1, sizeof *c);
	/* refs stays 0 until the connection is settled. */
	memset((char *)c + sizeof c->base.ops, 0, sizeof *c - sizeof c->base.ops);
	return c;
}

static void pool_put(struct shm_conn *c)
{
	struct shm_conn *head = __atomic_load_n(&pool, __ATOMIC_RELAXED);
	do
		c->next_free = head;
	while (!__atomic_compare_exchange_n(&pool, &head, c, 1, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

/* Takes over the slot (released with the connection), or NULL. */
static struct shm_conn *conn_new(const struct shm_slot *slot, int side)
{
	struct shm_conn *c = pool_get();
	if (!c)
		return NULL;
	struct shm_hdr *h = slot->hdr;
	c->base.ops = &shm_ops;
	c->hdr = h;
	c->slot = *slot;
	c->side = side;
	c->wake[0] = c->wake[1] = -1;
	uint8_t *base = (uint8_t *)h;
	uint8_t *c2s = base + SHM_HDR_SIZE, *s2c = c2s + h->ring_size;
	if (side == SHM_CLIENT) {
		shm_ring_init(&c->tx, &h->ring[0], c2s, h->ring_size);
		shm_ring_init(&c->rx, &h->ring[1], s2c, h->ring_size);
	} else {
		shm_ring_init(&c->tx, &h->ring[1], s2c, h->ring_size);
		shm_ring_init(&c->rx, &h->ring[0], c2s, h->ring_size);
	}
	return c;
}

static void conn_free(struct shm_conn *c)
{
	for (int role = 0; role < 2; role++) {
		if (c->wake[role] < 0)
			continue;
		/* After fork another process may still wait on this name. */
		struct sockaddr_un a;
		socklen_t len;
		if (c->forked || wake_addr(&a, &len, c->key, c->side, role)) {
			shunt_fd_release(c->wake[role]);
		} else if (!wpool_put(c->wake[role], a.sun_path)) {
			shunt_fd_release(c->wake[role]);
			unlink(a.sun_path);
		}
		c->wake[role] = -1;
	}
	if (c->hdr)
		shm_arena_release(&c->slot, c->forked);
	c->hdr = NULL;
	pool_put(c);
}

uint64_t shm_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- listen --------------------------------------------------------------- */

static void shm_listen_close(struct shunt_conn *base)
{
	struct shm_listen *l = (struct shm_listen *)base;
	const char *rd = shunt_rundir();
	if (rd)
		shm_registry_remove(rd, &l->reg);
}

static void shm_listen_free(struct shunt_conn *base)
{
	free(base);
}

static void exit_one(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	struct shm_listen *l = (struct shm_listen *)e->conn;
	if (shunt_fd_kind(e) != SHUNT_FD_LISTEN || !l || l->base.ops != &shm_listen_ops ||
	    l->pid != shunt_pid())
		return;
	const char *rd = shunt_rundir();
	if (rd)
		shm_registry_remove(rd, &l->reg);
}

/* A listener that exits without closing (the usual way) leaves its names;
 * the lock is gone, so clients would skip them, but the process that
 * registered them removes them at exit().  Forked children, which share
 * the lock's open file, leave them to their parent. */
__attribute__((destructor)) static void shm_at_exit(void)
{
	if (__atomic_load_n(&shunt_guard, __ATOMIC_RELAXED) != 0)
		return;
	shunt_fd_foreach(SHUNT_FD_LISTEN, exit_one, NULL);
	/* Names only: peers keep what they mapped or were sending to. */
	if (!shunt_rundir())
		return;
	pthread_mutex_lock(&wpool_mu);
	if (wpool_pid == shunt_pid()) {
		for (unsigned i = 0; i < wpool_n; i++) {
			char name[SHM_PATH_MAX];
			if (!wpool_name(name, sizeof name, wpool[i].id))
				unlink(name);
		}
	}
	pthread_mutex_unlock(&wpool_mu);
	shm_arena_exit();
}

static void shm_listen_child(struct shunt_conn *base)
{
	struct shm_listen *l = (struct shm_listen *)base;
	const char *rd = shunt_rundir();
	if (rd)
		shm_registry_reown(rd, &l->reg);
	l->pid = shunt_pid();
}

const struct shunt_transport_ops shm_listen_ops = {
	.name = "shm",
	.id = SHUNT_TP_SHM,
	.close = shm_listen_close,
	.free = shm_listen_free,
	.child = shm_listen_child,
};

static void shm_on_listen(int fd, struct shunt_fd *e)
{
	const char *rd = shunt_rundir();
	if (!rd || e->conn)
		return;
	shm_sweep();
	struct shm_listen *l = calloc(1, sizeof *l);
	if (!l)
		return;
	SHUNT_GUARD_ENTER();
	int rc = shm_registry_add(rd, fd, &l->reg);
	SHUNT_GUARD_LEAVE();
	if (rc < 0) {
		free(l);
		return;
	}
	l->base.ops = &shm_listen_ops;
	l->base.refs = 1;
	l->base.fds = 1;
	l->pid = shunt_pid();
	l->base.fd = fd;
	e->conn = &l->base;
	SHUNT_DEBUG("listen fd=%d registered for shm (%d names)", fd, l->reg.nlocks);
}

/* ---- client: offer -------------------------------------------------------- */

/* The source address the kernel will pick for dst: a connected UDP socket
 * is routed without sending anything.  Four system calls, so the answer
 * is kept a second per destination address: a route that changes within
 * it names an offer the server will not find (it declines, nothing lost). */
#define ROUTE_CACHE 16
#define ROUTE_TTL_MS 1000
static struct {
	uint8_t dst[16];
	struct sockaddr_storage src;
	socklen_t slen;
	uint64_t until;
} route_cache[ROUTE_CACHE];
static unsigned route_next;
static pthread_mutex_t route_mu = PTHREAD_MUTEX_INITIALIZER;

static int route_source(const struct sockaddr *dst, socklen_t len,
			struct sockaddr_storage *src, socklen_t *slen)
{
	uint8_t a[16];
	uint16_t port;
	if (shm_addr16(dst, a, &port) < 0)
		return -1;
	uint64_t now = shm_now_ms();
	pthread_mutex_lock(&route_mu);
	for (unsigned i = 0; i < ROUTE_CACHE; i++) {
		if (route_cache[i].until > now && route_cache[i].src.ss_family == dst->sa_family &&
		    !memcmp(route_cache[i].dst, a, 16) && route_cache[i].slen <= *slen) {
			memcpy(src, &route_cache[i].src, route_cache[i].slen);
			*slen = route_cache[i].slen;
			pthread_mutex_unlock(&route_mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&route_mu);
	int s = REAL(socket)(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int rc = REAL(connect)(s, dst, len);
	if (rc == 0)
		rc = getsockname(s, (struct sockaddr *)src, slen);
	REAL(close)(s);
	if (rc == 0 && *slen <= sizeof route_cache[0].src) {
		pthread_mutex_lock(&route_mu);
		unsigned i = route_next++ % ROUTE_CACHE;
		memcpy(route_cache[i].dst, a, 16);
		memcpy(&route_cache[i].src, src, *slen);
		route_cache[i].slen = *slen;
		route_cache[i].until = now + ROUTE_TTL_MS;
		pthread_mutex_unlock(&route_mu);
	}
	return rc;
}

static int addr_unspecified(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == 0;
	const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	return IN6_IS_ADDR_UNSPECIFIED(a);
}

static in_port_t port_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					: ((const struct sockaddr_in6 *)ss)->sin6_port;
}

static void set_port(struct sockaddr_storage *ss, in_port_t p)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = p;
	else
		((struct sockaddr_in6 *)ss)->sin6_port = p;
}

/* Bind the socket now so its 4-tuple is known before the SYN: the offer is
 * named by it.  A socket the application bound keeps its address. */
static int fix_local(int fd, const struct sockaddr *dst, socklen_t dlen,
		     struct sockaddr_storage *local)
{
	socklen_t ll = sizeof *local;
	if (getsockname(fd, (struct sockaddr *)local, &ll) < 0)
		return -1;
	in_port_t port = port_of(local);
	if (addr_unspecified(local)) {
		struct sockaddr_storage src;
		socklen_t sl = sizeof src;
		if (route_source(dst, dlen, &src, &sl) < 0 || src.ss_family != local->ss_family)
			return -1;
		if (!port) {
			set_port(&src, 0);
			/* bind() picks a port before the destination is known,
			 * so ports in TIME_WAIT stay off limits where connect()
			 * would reuse them: under heavy churn this fails first
			 * (bind-failed) and the connection takes the kernel
			 * path.  (SO_REUSEADDR would let bind pick a port whose
			 * 4-tuple is still in TIME_WAIT: connect would fail.) */
			if (REAL(bind)(fd, (struct sockaddr *)&src, sl) < 0)
				return -1;
			ll = sizeof *local;
			return getsockname(fd, (struct sockaddr *)local, &ll);
		}
		/* Bound to a port on the wildcard: the kernel fills in the
		 * address at connect from the same route. */
		*local = src;
		set_port(local, port);
		return 0;
	}
	if (!port) {
		if (REAL(bind)(fd, (struct sockaddr *)local, ll) < 0)
			return -1;
		ll = sizeof *local;
		return getsockname(fd, (struct sockaddr *)local, &ll);
	}
	return 0;
}

static enum shunt_reason shm_connect(int fd, struct shunt_fd *e, const struct sockaddr *dst,
				     socklen_t dlen)
{
	const char *rd = shunt_rundir();
	if (!rd)
		return SHUNT_R_RING_ALLOC;
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	SHUNT_GUARD_ENTER();
	struct sockaddr_storage local;
	struct shm_tuple t;
	char key[96], path[SHM_PATH_MAX];
	struct shm_conn *c = NULL;
	if (!shm_registry_lookup(rd, dst))
		goto out;
	shm_sweep();
	why = SHUNT_R_BIND_FAILED;
	if (fix_local(fd, dst, dlen, &local) < 0 ||
	    shm_tuple_make(&t, (struct sockaddr *)&local, dst) < 0)
		goto out;
	why = SHUNT_R_RING_ALLOC;
	shm_tuple_key(&t, key, sizeof key);
	if (path_of(path, sizeof path, key, ""))
		goto out;
	uint64_t ring = shunt_config()->ring_size;
	struct shm_slot slot;
	char target[96];
	if (shm_arena_alloc(ring, &slot, target, sizeof target) < 0)
		goto out;
	struct shm_hdr *h = slot.hdr;
	h->magic = SHM_MAGIC;
	h->version = SHM_VERSION;
	h->ring_size = ring;
	h->file_size = slot.len;
	h->pid[SHM_CLIENT] = shunt_pid();
	h->uid[SHM_CLIENT] = geteuid();
	h->tuple = t;
	__atomic_store_n(&h->state, SHM_OFFERED, __ATOMIC_RELEASE);
	c = conn_new(&slot, SHM_CLIENT);
	if (!c) {
		shm_arena_release(&slot, 0);
		goto out;
	}
	snprintf(c->key, sizeof c->key, "%s", key);
	/* The offer is a name for the slot, made last: whoever finds it
	 * finds a complete header and a bound wake socket. */
	if (bind_wake(c) < 0 ||
	    (symlink(target, path) < 0 &&
	     (errno != EEXIST || unlink(path) < 0 || symlink(target, path) < 0))) {
		/* (EEXIST: left by a connection with the same 4-tuple that
		 * died.) */
		conn_free(c);
		c = NULL;
		goto out;
	}
	c->offer_deadline = shm_now_ms() + shunt_config()->offer_timeout_ms;
	e->conn = &c->base;
	why = SHUNT_R_NONE;
out:
	SHUNT_GUARD_LEAVE();
	return why;
}

/* ---- server: commit or decline ------------------------------------------- */

static int tuple_of(int fd, const struct sockaddr *peer, struct shm_tuple *t)
{
	struct sockaddr_storage local;
	socklen_t ll = sizeof local;
	if (getsockname(fd, (struct sockaddr *)&local, &ll) < 0)
		return -1;
	return shm_tuple_make(t, peer, (struct sockaddr *)&local);
}

int shm_offer_uid_ok(uid_t uid, gid_t gid)
{
	gid_t g;
	return uid == geteuid() || (shunt_rundir_group(&g) && gid == g);
}

void shm_share_fd(int fd)
{
	if (fd >= 0 && shunt_rundir_group(NULL))
		fchmod(fd, 0660);
}

void shm_share_path(const char *path)
{
	if (shunt_rundir_group(NULL))
		chmod(path, 0660);
}

/* Hold the slot the offer for key names, if there is a valid one from a
 * user we trust. */
static int open_offer(const char *key, struct shm_slot *s, enum shunt_reason *why)
{
	char path[SHM_PATH_MAX], target[128];
	*why = SHUNT_R_NO_PEER_SHIM;
	if (path_of(path, sizeof path, key, ""))
		return -1;
	ssize_t n = readlink(path, target, sizeof target - 1);
	if (n < 0) {
		if (errno == EINVAL)
			*why = SHUNT_R_BAD_OFFER; /* not a name for a slot */
		return -1;
	}
	target[n] = 0;
	return shm_arena_attach(target, s, why);
}

/* 1 when a socket is bound at the peer's RX wake name.  connect() on a
 * datagram socket answers without sending: a datagram would wake the
 * peer for nothing. */
static int peer_alive(struct shm_conn *c)
{
	static int probe = -1;
	static pid_t probe_pid;
	int fd = __atomic_load_n(&probe, __ATOMIC_ACQUIRE);
	if (fd < 0 || __atomic_load_n(&probe_pid, __ATOMIC_RELAXED) != shunt_pid()) {
		int nfd = shunt_fd_own(
			REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), NULL);
		if (nfd < 0)
			return 1; /* cannot tell: the commit CAS still decides */
		if (!__atomic_compare_exchange_n(&probe, &fd, nfd, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			shunt_fd_release(nfd);
		} else {
			struct shunt_fd *e = shunt_fd_peek(nfd);
			if (e)
				e->owner = &probe;
			__atomic_store_n(&probe_pid, shunt_pid(), __ATOMIC_RELAXED);
			fd = nfd;
		}
	}
	if (REAL(connect)(fd, (struct sockaddr *)&c->peer[SHM_WAKE_RX],
			  c->peer_len[SHM_WAKE_RX]) == 0)
		return 1;
	return errno != ECONNREFUSED && errno != ENOENT;
}

/* Tell the client to carry on over TCP (it replays what it wrote). */
static void refuse(struct shm_hdr *h)
{
	uint32_t st = SHM_OFFERED;
	__atomic_compare_exchange_n(&h->state, &st, SHM_DEMOTING, 0, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

static enum shunt_reason shm_accept(int lfd, int fd, struct shunt_fd *e,
				    const struct sockaddr *peer, socklen_t plen)
{
	(void)lfd;
	(void)plen;
	const char *rd = shunt_rundir();
	if (!rd)
		return SHUNT_R_RING_ALLOC;
	struct shm_tuple t;
	char key[96], path[SHM_PATH_MAX];
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	struct shm_slot slot;
	SHUNT_GUARD_ENTER();
	struct shm_hdr *h = NULL;
	struct shm_conn *c = NULL;
	if (tuple_of(fd, peer, &t) < 0)
		goto out;
	shm_tuple_key(&t, key, sizeof key);
	if (path_of(path, sizeof path, key, ""))
		goto out;
	if (open_offer(key, &slot, &why) < 0)
		goto out;
	h = slot.hdr;
	if (shm_hdr_check(h, slot.len, &t) < 0) {
		why = SHUNT_R_BAD_OFFER;
		goto refuse;
	}
	c = conn_new(&slot, SHM_SERVER);
	if (!c) {
		why = SHUNT_R_RING_ALLOC;
		goto refuse;
	}
	snprintf(c->key, sizeof c->key, "%s", key);
	if (bind_wake(c) < 0) {
		why = SHUNT_R_RING_ALLOC;
		goto refuse;
	}
	/* The client's wake socket proves it is alive: an offer left by a
	 * dead process, for a 4-tuple now reused, must not be taken. */
	if (!peer_alive(c)) {
		unlink(path);
		unlink(c->peer[SHM_WAKE_RX].sun_path);
		why = SHUNT_R_NO_PEER_SHIM;
		goto fail;
	}
	uint32_t st = SHM_OFFERED;
	if (!__atomic_compare_exchange_n(&h->state, &st, SHM_COMMITTED, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		/* The client gave up waiting (offer_timeout_ms) and is on TCP. */
		why = SHUNT_R_OFFER_TIMEOUT;
		goto fail;
	}
	h->pid[SHM_SERVER] = shunt_pid();
	h->uid[SHM_SERVER] = geteuid();
	c->committed = 1;
	unlink(path);
	/* Only a client asleep needs to hear of it (it counted itself in
	 * before sleeping, see shm_arm); one that is not will see the
	 * state.  A wakeup costs the client a trip through the scheduler. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->tx.ctl->reader_waiting, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&c->rx.ctl->writer_waiting, __ATOMIC_RELAXED))
		shm_wake_peer(c);
	e->conn = &c->base;
	SHUNT_GUARD_LEAVE();
	return SHUNT_R_NONE;
refuse:
	refuse(h);
	unlink(path); /* refused: nobody will take it */
	if (c && c->wake[SHM_WAKE_RX] >= 0)
		shm_wake_peer(c);
fail:
	if (c)
		conn_free(c);
	else
		shm_arena_release(&slot, 0);
out:
	SHUNT_GUARD_LEAVE();
	return why;
}

static void shm_decline(int fd, const struct sockaddr *peer, socklen_t plen)
{
	(void)plen;
	const char *rd = shunt_rundir();
	struct shm_tuple t;
	char key[96];
	struct shm_slot slot;
	enum shunt_reason why;
	if (!rd || tuple_of(fd, peer, &t) < 0)
		return;
	SHUNT_GUARD_ENTER();
	shm_tuple_key(&t, key, sizeof key);
	if (open_offer(key, &slot, &why) == 0) {
		struct shm_hdr *h = slot.hdr;
		if (shm_hdr_check(h, slot.len, &t) == 0) {
			struct shm_conn c = {.side = SHM_SERVER};
			char path[SHM_PATH_MAX];
			refuse(h);
			if (!path_of(path, sizeof path, key, ""))
				unlink(path);
			snprintf(c.key, sizeof c.key, "%s", key);
			if (bind_wake_peer_only(&c) == 0)
				shm_wake_peer(&c);
		}
		shm_arena_release(&slot, 0);
	}
	SHUNT_GUARD_LEAVE();
}

/* ---- switching to TCP ----------------------------------------------------- */

/* Write every byte of our tx ring the peer has not consumed to the socket,
 * in order, before anything else we send there. */
static int replay(struct shm_conn *c)
{
	struct iovec v[2];
	size_t n = shm_ring_unread(&c->tx, v);
	size_t done = 0;
	while (done < n) {
		struct iovec w[2];
		int cnt = 0;
		size_t skip = done;
		for (int i = 0; i < 2; i++) {
			if (skip >= v[i].iov_len) {
				skip -= v[i].iov_len;
				continue;
			}
			w[cnt].iov_base = (uint8_t *)v[i].iov_base + skip;
			w[cnt].iov_len = v[i].iov_len - skip;
			skip = 0;
			cnt++;
		}
		struct msghdr m = {.msg_iov = w, .msg_iovlen = (size_t)cnt};
		ssize_t r = REAL(sendmsg)(c->base.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			struct pollfd p = {c->base.fd, POLLOUT, 0};
			REAL(poll)(&p, 1, -1);
			continue;
		}
		return -1;
	}
	/* The peer's view: those bytes are gone from the ring.  The stats
	 * slot keeps them: it counts what the application sent, whichever
	 * path carried it (the peer counts them once, where it reads them). */
	shm_ring_consume(&c->tx, n);
	c->bytes_out -= n;
	return 0;
}

void shm_send_fin(struct shm_conn *c)
{
	int fd = __atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE);
	if (c->fin_pending && fd >= 0 && __atomic_exchange_n(&c->fin_pending, 0, __ATOMIC_ACQ_REL))
		REAL(shutdown)(fd, SHUT_WR);
}

/* Both ends leave the rings the same way: each resends over TCP the bytes
 * of its tx ring the other has not consumed, then uses only the socket.
 * Exact because a consumer checks the state under its ring's read lock, and
 * the state turns DEMOTING under the demoter's tx read lock: once a replay
 * takes its snapshot under that lock, the peer consumes nothing more.  As
 * both ends do the same, two ends demoting at once (exec on both sides)
 * lose nothing either. */
int shm_switch(struct shm_conn *c)
{
	if (__atomic_load_n(&c->switched, __ATOMIC_ACQUIRE))
		return 0;
	shm_lock(&c->tx.ctl->wlock);
	if (!c->switched) {
		/* Wait out a consume in flight; after it the peer sees the
		 * state and consumes nothing more.  The replay itself runs
		 * without the peer's lock: it may wait for the peer to read
		 * the socket. */
		shm_lock(&c->tx.ctl->rlock);
		shm_unlock(&c->tx.ctl->rlock);
		replay(c);
		__atomic_store_n(&c->switched, 1, __ATOMIC_RELEASE);
	}
	shm_unlock(&c->tx.ctl->wlock);
	/* A shutdown(SHUT_WR) made while the offer was open: after the
	 * replayed bytes, as the application wrote them. */
	shm_send_fin(c);
	return 0;
}

/* Bytes in our rx ring the application has not read, when the peer that
 * would resend them over TCP has closed (or is gone): moved to a spill
 * (preload/shunt_spill.h) and consumed from the ring, as the caller hands
 * the fd to the kernel path (exec).  Consumed, they are not resent by a
 * copy of the peer still alive elsewhere (fork): each byte comes once, the
 * spill's first.  A live peer resends them instead, which also reaches
 * reads shunt does not see (stdio after fdopen, a program without shunt).
 * (Another thread reading the ring between this and the state change would
 * get later bytes ahead of the spill's; a program exec'ing or fdopen'ing a
 * socket another thread still reads has no order to keep.) */
static struct shunt_conn *spill_rx(struct shm_conn *c, enum shunt_reason why)
{
	struct shunt_conn *sp = NULL;
	shm_lock(&c->rx.ctl->rlock);
	struct iovec v[2];
	uint32_t st = __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE);
	/* The close flag is only a hint: it is also set when this very
	 * process (a child about to exec) closes its copy of the other end
	 * while the peer lives on elsewhere.  Only a dead wake socket, or the
	 * FIN of the last close, says nobody is left to resend. */
	int gone = !peer_alive(c);
	if (!gone && __atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE)) {
		int t = shunt_tcp_peek(&c->base, &c->tcp_eof);
		gone = t == 0 || t == -1;
	}
	size_t n = st == SHM_COMMITTED && gone && shm_ring_sane(&c->rx) ? shm_ring_unread(&c->rx, v)
									  : 0;
	if (n && (sp = shunt_spill_new(&c->base, v, 2, why)) != NULL)
		shm_ring_consume(&c->rx, n);
	shm_unlock(&c->rx.ctl->rlock);
	if (n && !sp)
		SHUNT_WARN("fd=%d: %zu unread bytes may be lost: no memory to keep them",
			   c->base.fd, n);
	return sp;
}

/* Ask for TCP from this end (see shm_switch); the peer follows when it
 * sees the state. */
static void shm_demote(struct shunt_conn *base, enum shunt_reason why)
{
	struct shm_conn *c = (struct shm_conn *)base;
	if (!c->why)
		c->why = why;
	SHUNT_GUARD_ENTER();
	struct shunt_conn *sp = spill_rx(c, why);
	shm_lock(&c->tx.ctl->wlock);
	shm_lock(&c->tx.ctl->rlock);
	uint32_t st = __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE);
	while ((st == SHM_OFFERED || st == SHM_COMMITTED) &&
	       !__atomic_compare_exchange_n(&c->hdr->state, &st, SHM_DEMOTING, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	shm_unlock(&c->tx.ctl->rlock);
	if (!c->switched) {
		replay(c);
		__atomic_store_n(&c->switched, 1, __ATOMIC_RELEASE);
	}
	shm_unlock(&c->tx.ctl->wlock);
	shm_wake_peer(c);
	shm_send_fin(c);
	if (sp)
		shunt_spill_install(base, sp);
	SHUNT_GUARD_LEAVE();
}

void shm_give_up(struct shm_conn *c)
{
	if (!c->why)
		c->why = SHUNT_R_OFFER_TIMEOUT;
	shm_demote(&c->base, SHUNT_R_OFFER_TIMEOUT);
}

static void shm_fork(struct shunt_conn *base)
{
	((struct shm_conn *)base)->forked = 1;
}

static void shm_close(struct shunt_conn *base)
{
	struct shm_conn *c = (struct shm_conn *)base;
	SHUNT_GUARD_ENTER();
	uint32_t st = __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE);
	if (c->side == SHM_CLIENT && st == SHM_OFFERED) {
		/* Never accepted yet: give the bytes to TCP, which keeps them
		 * for the server's accept() as it would have anyway. */
		shm_demote(base, SHUNT_R_NONE);
	} else if (st >= SHM_DEMOTING && !c->switched) {
		/* Declined (or demoted by the peer) while we were not looking:
		 * what the peer never read must still reach it, before FIN. */
		shm_switch(c);
	} else if (!c->switched) {
		/* Only a hint: the socket may live on in another process.
		 * The peer trusts the TCP FIN, which comes with the last
		 * close. */
		__atomic_store_n(&c->tx.ctl->closed_hint, 1, __ATOMIC_RELEASE);
		/* Only to a peer asleep (see shm_arm): one awake sees the
		 * hint, and the FIN wakes one that sleeps anyway. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&c->tx.ctl->reader_waiting, __ATOMIC_RELAXED))
			shm_wake_role(c, SHM_WAKE_RX);
		if (__atomic_load_n(&c->rx.ctl->writer_waiting, __ATOMIC_RELAXED))
			shm_wake_role(c, SHM_WAKE_TX);
	}
	if (c->side == SHM_CLIENT && !c->committed) {
		/* The server unlinks an offer it takes; one never taken is
		 * ours to remove. */
		char path[SHM_PATH_MAX];
		if (!path_of(path, sizeof path, c->key, ""))
			unlink(path);
	}
	if (shunt_log_on(SHUNT_LOG_DEBUG))
		shunt_log(SHUNT_LOG_DEBUG, "shm close fd=%d bytes_in=%llu bytes_out=%llu",
			  c->base.fd, (unsigned long long)c->bytes_in,
			  (unsigned long long)c->bytes_out);
	/* The number is about to be closed: a call still in flight in
	 * another thread must not touch it (it may be reused). */
	__atomic_store_n(&c->base.fd, -1, __ATOMIC_RELEASE);
	SHUNT_GUARD_LEAVE();
}

static void shm_free(struct shunt_conn *base)
{
	SHUNT_GUARD_ENTER();
	conn_free((struct shm_conn *)base);
	SHUNT_GUARD_LEAVE();
}

const struct shunt_transport_ops shm_ops = {
	.name = "shm",
	.id = SHUNT_TP_SHM,
	.on_listen = shm_on_listen,
	.connect = shm_connect,
	.accept = shm_accept,
	.decline = shm_decline,
	.close = shm_close,
	.free = shm_free,
	.demote = shm_demote,
	.fork = shm_fork,
	.recvmsg = shm_recvmsg,
	.sendmsg = shm_sendmsg,
	.shutdown = shm_shutdown,
	.ioctl = shm_ioctl,
	.poll = shm_poll,
	.arm = shm_arm,
	.disarm = shm_disarm,
	.progress = shm_progress,
};
