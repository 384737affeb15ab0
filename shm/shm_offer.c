/* The shm transport's rendezvous: listeners, the client's offer, the
 * server's commit or refusal.
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
	shm_wake_exit();
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

void shm_on_listen(int fd, struct shunt_fd *e)
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
	if (shunt_addr16(dst, a, &port) < 0)
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

enum shunt_reason shm_connect(int fd, struct shunt_fd *e, const struct sockaddr *dst,
				     socklen_t dlen)
{
	const char *rd = shunt_rundir();
	if (!rd)
		return SHUNT_R_RING_ALLOC;
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	SHUNT_GUARD_ENTER();
	struct sockaddr_storage local;
	struct shunt_tuple t;
	char key[96], path[SHM_PATH_MAX];
	struct shm_conn *c = NULL;
	if (!shm_registry_lookup(rd, dst))
		goto out;
	shm_sweep();
	why = SHUNT_R_BIND_FAILED;
	if (fix_local(fd, dst, dlen, &local) < 0 ||
	    shunt_tuple_make(&t, (struct sockaddr *)&local, dst) < 0)
		goto out;
	why = SHUNT_R_RING_ALLOC;
	shunt_tuple_key(&t, key, sizeof key);
	if (shm_path(path, sizeof path, key, ""))
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
	c = shm_conn_new(&slot, SHM_CLIENT);
	if (!c) {
		shm_arena_release(&slot, 0);
		goto out;
	}
	snprintf(c->key, sizeof c->key, "%s", key);
	/* The offer is a name for the slot, made last: whoever finds it
	 * finds a complete header and a bound wake socket. */
	if (shm_wake_bind(c) < 0 ||
	    (symlink(target, path) < 0 &&
	     (errno != EEXIST || unlink(path) < 0 || symlink(target, path) < 0))) {
		/* (EEXIST: left by a connection with the same 4-tuple that
		 * died.) */
		shm_conn_free(c);
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
	if (shm_path(path, sizeof path, key, ""))
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

/* Tell the client to carry on over TCP (it replays what it wrote). */
static void refuse(struct shm_hdr *h)
{
	uint32_t st = SHM_OFFERED;
	__atomic_compare_exchange_n(&h->state, &st, SHM_DEMOTING, 0, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

enum shunt_reason shm_accept(int lfd, int fd, struct shunt_fd *e,
				    const struct sockaddr *peer, socklen_t plen)
{
	(void)lfd;
	(void)plen;
	const char *rd = shunt_rundir();
	if (!rd)
		return SHUNT_R_RING_ALLOC;
	struct shunt_tuple t;
	char key[96], path[SHM_PATH_MAX];
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	struct shm_slot slot;
	SHUNT_GUARD_ENTER();
	struct shm_hdr *h = NULL;
	struct shm_conn *c = NULL;
	if (shunt_tuple_accepted(&t, fd, peer) < 0)
		goto out;
	shunt_tuple_key(&t, key, sizeof key);
	if (shm_path(path, sizeof path, key, ""))
		goto out;
	if (open_offer(key, &slot, &why) < 0)
		goto out;
	h = slot.hdr;
	if (shm_hdr_check(h, slot.len, &t) < 0) {
		why = SHUNT_R_BAD_OFFER;
		goto refuse;
	}
	c = shm_conn_new(&slot, SHM_SERVER);
	if (!c) {
		why = SHUNT_R_RING_ALLOC;
		goto refuse;
	}
	snprintf(c->key, sizeof c->key, "%s", key);
	if (shm_wake_bind(c) < 0) {
		why = SHUNT_R_RING_ALLOC;
		goto refuse;
	}
	/* The client's wake socket proves it is alive: an offer left by a
	 * dead process, for a 4-tuple now reused, must not be taken. */
	if (!shm_peer_alive(c)) {
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
		shm_conn_free(c);
	else
		shm_arena_release(&slot, 0);
out:
	SHUNT_GUARD_LEAVE();
	return why;
}

void shm_decline(int fd, const struct sockaddr *peer, socklen_t plen)
{
	(void)plen;
	const char *rd = shunt_rundir();
	struct shunt_tuple t;
	char key[96];
	struct shm_slot slot;
	enum shunt_reason why;
	if (!rd || shunt_tuple_accepted(&t, fd, peer) < 0)
		return;
	SHUNT_GUARD_ENTER();
	shunt_tuple_key(&t, key, sizeof key);
	if (open_offer(key, &slot, &why) == 0) {
		struct shm_hdr *h = slot.hdr;
		if (shm_hdr_check(h, slot.len, &t) == 0) {
			struct shm_conn c = {.side = SHM_SERVER};
			char path[SHM_PATH_MAX];
			refuse(h);
			if (!shm_path(path, sizeof path, key, ""))
				unlink(path);
			snprintf(c.key, sizeof c.key, "%s", key);
			if (shm_wake_bind_peer(&c) == 0)
				shm_wake_peer(&c);
		}
		shm_arena_release(&slot, 0);
	}
	SHUNT_GUARD_LEAVE();
}
