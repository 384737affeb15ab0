/* Wakeups: how one end of an shm connection wakes the other's sleepers.
 *
 * A blocking call sleeps on a futex word of the ring it waits for (the
 * header is a shared file mapping, so both processes meet on the word):
 * the cheapest wakeup there is, and it needs no file descriptor and no
 * name anyone could remove.  poll/select/epoll need something the kernel
 * can report with the application's other fds: a wake socket, bound per
 * role (data arrived, space freed).  One unbound datagram socket per
 * process sends; one datagram per sleep (the sender skips it while a
 * wakeup is pending).
 *
 * Where the wake sockets are bound is decided once per connection
 * (shm_wake_abstract): when both ends are in one network namespace, in the
 * abstract namespace under a random id the end publishes in the header
 * (no file: nothing in the rundir to unlink, nothing to create, so a
 * process that may no longer write the rundir binds them too); otherwise
 * by a path name in <rundir>/o named after the connection, which crosses
 * network namespaces.  Bound sockets are kept between connections: an
 * abstract one keeps its id, a named one is renamed (a rename keeps the
 * binding).
 *
 * A waker looks at the counts after a full fence (paired with the one a
 * waiter makes between counting itself in and its last look), so it never
 * pays a system call when nobody sleeps, and never misses a sleeper. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/shunt_log.h"
#include "core/shunt_forklock.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_clock.h"
#include "core/shunt_real.h"
#include "shm_internal.h"

/* One unbound datagram socket per process sends every wakeup; each end of a
 * connection owns a bound one that its waits poll. */
static struct shunt_proc_fd sender = SHUNT_PROC_FD_INIT;

static int datagram_socket(void *arg)
{
	(void)arg;
	return REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

int shm_wake_sender(void)
{
	return shunt_proc_fd(&sender, shunt_pid(), datagram_socket, NULL);
}

static const char *const suffix[2][2] = {
	[SHM_CLIENT] = {".c", ".cw"},
	[SHM_SERVER] = {".s", ".sw"},
};

static int wake_addr(struct sockaddr_un *a, socklen_t *len, const char *key, int side,
		     int role)
{
	char path[SHUNT_PATH_MAX];
	if (shm_path(path, sizeof path, key, suffix[side][role]) ||
	    strlen(path) >= sizeof a->sun_path)
		return -1;
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	strcpy(a->sun_path, path);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
	return 0;
}

socklen_t shm_wake_abstract_addr(struct sockaddr_un *a, uint64_t id)
{
	static const char hex[] = "0123456789abcdef";
	static const char prefix[] = SHM_WAKE_ABSTRACT_PREFIX;
	memset(a, 0, offsetof(struct sockaddr_un, sun_path) + sizeof prefix + 16);
	a->sun_family = AF_UNIX;
	/* sun_path[0] stays 0: the abstract namespace.  The name's length is
	 * the address length, no terminating 0. */
	memcpy(a->sun_path + 1, prefix, sizeof prefix - 1);
	char *d = a->sun_path + sizeof prefix;
	for (int i = 15; i >= 0; i--, id >>= 4)
		d[i] = hex[id & 15];
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof prefix + 16);
}

void shm_wake_role(struct shm_conn *c, int role)
{
	if (c->hdr &&
	    __atomic_exchange_n(&c->hdr->wake_pending[!c->side][role], 1, __ATOMIC_ACQ_REL))
		return;
	struct sockaddr_un abs;
	const struct sockaddr_un *to = &c->peer[role];
	socklen_t len = c->peer_len[role];
	if (c->wake_abs) {
		/* Published before the peer counted itself a waiter (the
		 * caller's acquire load of the count).  0: it has no socket
		 * (out of fds), and looks again on its own. */
		uint64_t id = c->hdr ? __atomic_load_n(&c->hdr->wake_id[!c->side][role],
						       __ATOMIC_ACQUIRE)
				     : 0;
		if (!id)
			return;
		len = shm_wake_abstract_addr(&abs, id);
		to = &abs;
	}
	int s = shm_wake_sender();
	if (s < 0)
		return;
	char b = 0;
	/* A full queue already holds a wakeup; a TX socket not bound yet has
	 * no sleeper: both errors are fine. */
	REAL(sendto)(s, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to, len);
}

/* What sleeps on one role of a ring: futex sleepers on seq, poll/epoll
 * waiters on the peer's wake socket of that role.  After the fence. */
static void wake_sleepers(struct shm_conn *c, uint32_t *seq, const uint32_t *sleep,
			  const uint32_t *fd, int role)
{
	if (__atomic_load_n(sleep, __ATOMIC_RELAXED) || __atomic_load_n(fd, __ATOMIC_RELAXED))
		/* When the answer came, for a waiter that slept through it:
		 * its policy learns from that, not from when it woke
		 * (core/shunt_waitpolicy.h). */
		__atomic_store_n(&c->hdr->pres[c->side].woke_ns, shunt_now_ns(), __ATOMIC_RELAXED);
	if (__atomic_load_n(sleep, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(seq, 1, __ATOMIC_RELEASE);
		REAL(syscall)(SYS_futex, seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		__atomic_store_n(&c->base.woke, 1, __ATOMIC_RELAXED);
	}
	/* Acquire: the waiter published its socket's id before counting
	 * itself in. */
	if (__atomic_load_n(fd, __ATOMIC_ACQUIRE)) {
		shm_wake_role(c, role);
		__atomic_store_n(&c->base.woke, 1, __ATOMIC_RELAXED);
	}
}

void shm_wake_data_slow(struct shm_conn *c)
{
	struct shm_ring_ctl *t = c->tx.ctl;
	wake_sleepers(c, &t->data_seq, &t->reader_sleep, &t->reader_fd, SHM_WAKE_RX);
}

void shm_wake_space_slow(struct shm_conn *c)
{
	struct shm_ring_ctl *r = c->rx.ctl;
	wake_sleepers(c, &r->space_seq, &r->writer_sleep, &r->writer_fd, SHM_WAKE_TX);
}

void shm_wake_peer(struct shm_conn *c)
{
	struct shm_ring_ctl *t = c->tx.ctl, *r = c->rx.ctl;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	wake_sleepers(c, &t->data_seq, &t->reader_sleep, &t->reader_fd, SHM_WAKE_RX);
	wake_sleepers(c, &r->space_seq, &r->writer_sleep, &r->writer_fd, SHM_WAKE_TX);
}

/* Bound wake sockets kept between connections.  Binding costs a socket,
 * a bind and moving the fd out of the application's range (five system
 * calls); a kept abstract socket costs none (it keeps its id, which the
 * next connection publishes), a kept named one a rename to the
 * connection's name (renaming a bound socket's file keeps the binding).
 * A late datagram from the previous peer only makes a wait look once
 * more.  Two stacks, one per kind, 64 sockets in all. */
#define WAKE_POOL_MAX 64
struct wpool {
	unsigned n;
	struct {
		int fd;
		uint64_t id; /* abstract: its id; named: its name while kept,
				<rundir>/o/w-<pid>-<id> */
	} v[WAKE_POOL_MAX];
};
static struct wpool wpool[2]; /* [abstract] */
static unsigned wpool_seq;
static pid_t wpool_pid;
/* Also serialises binding, so two threads never bind one name. */
static pthread_mutex_t wpool_mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(wpool_mu, SHUNT_RANK_SHM_WAKE)

static int wpool_name(char *buf, size_t len, uint64_t id)
{
	return shunt_rundir_path(buf, len, shunt_rundir(), SHUNT_ROOM_OFFER, "w-%d-%llu",
				 (int)shunt_pid(), (unsigned long long)id);
}

static void wpool_mine(void)
{
	if (wpool_pid != shunt_pid()) {
		/* Inherited from the parent: its names, its sockets. */
		wpool[0].n = wpool[1].n = 0;
		wpool_pid = shunt_pid();
	}
}

/* A kept socket of the kind asked for: a named one renamed to path, an
 * abstract one with its id in *id.  -1 if none.  wpool_mu held. */
static int wpool_take(int abs, const char *path, uint64_t *id)
{
	wpool_mine();
	struct wpool *p = &wpool[abs];
	while (p->n) {
		p->n--;
		int fd = p->v[p->n].fd;
		if (abs) {
			*id = p->v[p->n].id;
			return fd;
		}
		char name[SHUNT_PATH_MAX];
		if (!wpool_name(name, sizeof name, p->v[p->n].id) && rename(name, path) == 0)
			return fd;
		shunt_fd_release(fd);
		unlink(name);
	}
	return -1;
}

/* Keep a socket the connection is done with (named: its file at path,
 * abstract: path NULL, its id); 0 if it cannot be kept. */
static int wpool_put(int fd, const char *path, uint64_t id)
{
	int kept = 0;
	pthread_mutex_lock(&wpool_mu);
	wpool_mine();
	struct wpool *p = &wpool[path == NULL];
	struct shunt_fd *e = shunt_fd_peek(fd);
	char name[SHUNT_PATH_MAX];
	if (path)
		id = ++wpool_seq;
	if (wpool[0].n + wpool[1].n < WAKE_POOL_MAX && e &&
	    (!path || (!wpool_name(name, sizeof name, id) && rename(path, name) == 0))) {
		char buf[64];
		while (REAL(recv)(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
			;
		p->v[p->n].fd = fd;
		p->v[p->n].id = id;
		e->owner = &p->v[p->n].fd;
		p->n++;
		kept = 1;
	}
	pthread_mutex_unlock(&wpool_mu);
	return kept;
}

/* A random id, never 0: unguessable, so nobody else in the namespace can
 * bind the names we will draw before we do (one who tries only makes us
 * draw again). */
static uint64_t wake_random_id(void)
{
	uint64_t id = 0;
	while (!id) {
		if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id) {
			/* No entropy yet (early boot): guessable, but a name
			 * taken first only costs another draw. */
			id = (shunt_now_ns() ^ ((uint64_t)shunt_pid() << 40) ^ (uintptr_t)&id) *
			     0x9e3779b97f4a7c15ull;
		}
	}
	return id;
}

/* A new datagram socket bound in the abstract namespace under a fresh id
 * (*id), or -1. */
static int bind_abstract(uint64_t *id)
{
	int fd = REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	for (int tries = 0; tries < 16; tries++) {
		struct sockaddr_un a;
		uint64_t v = wake_random_id();
		socklen_t len = shm_wake_abstract_addr(&a, v);
		if (REAL(bind)(fd, (struct sockaddr *)&a, len) == 0) {
			*id = v;
			return fd;
		}
		if (errno != EADDRINUSE)
			break;
	}
	REAL(close)(fd);
	return -1;
}

/* A new datagram socket bound to path (o/<key><suffix>), or -1. */
static int bind_named(const struct sockaddr_un *a, socklen_t len)
{
	int fd = REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	unlink(a->sun_path);
	if (REAL(bind)(fd, (const struct sockaddr *)a, len) < 0) {
		REAL(close)(fd);
		return -1;
	}
	/* Sending a wakeup takes write permission on the socket's file (a
	 * pooled one keeps this mode when renamed). */
	shm_share_path(a->sun_path);
	return fd;
}

static int bind_one(struct shm_conn *c, int role)
{
	struct sockaddr_un a;
	socklen_t len = 0; /* set by wake_addr where it is used (named) */
	if (!c->wake_abs && wake_addr(&a, &len, c->key, c->side, role) < 0)
		return -1;
	int rc = 0;
	uint64_t id = 0;
	pthread_mutex_lock(&wpool_mu);
	if (__atomic_load_n(&c->wake[role], __ATOMIC_ACQUIRE) >= 0)
		goto out; /* another thread bound it first */
	int fd = wpool_take(c->wake_abs, c->wake_abs ? NULL : a.sun_path, &id);
	if (fd < 0) {
		rc = -1;
		fd = c->wake_abs ? bind_abstract(&id) : bind_named(&a, len);
		if (fd < 0)
			goto out;
		fd = shunt_fd_own(fd, NULL);
		rc = 0;
	}
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (e)
		e->owner = &c->wake[role];
	if (c->wake_abs) {
		/* Before the fd is seen: a waiter counts itself in only with
		 * the fd, and the count's increment (release) publishes this. */
		c->wake_id[role] = id;
		__atomic_store_n(&c->hdr->wake_id[c->side][role], id, __ATOMIC_RELEASE);
	}
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

int shm_wake_abstract(const struct shunt_tuple *t)
{
	/* A loopback destination never leaves the namespace; a connection
	 * to one of the namespace's own addresses is routed through lo with
	 * that address as its source. */
	return shunt_addr16_loopback(t->saddr) || !memcmp(t->caddr, t->saddr, sizeof t->caddr);
}

int shm_wake_bind_peer(struct shm_conn *c, const struct shunt_tuple *t)
{
	c->wake_abs = shm_wake_abstract(t);
	if (c->wake_abs)
		return 0; /* the peer's ids are read from the header at each wakeup */
	for (int role = 0; role < 2; role++)
		if (wake_addr(&c->peer[role], &c->peer_len[role], c->key, !c->side, role) < 0)
			return -1;
	return 0;
}

/* Let go of c's wake sockets: kept for a later connection, or closed and
 * their names removed (after fork another process may still wait on
 * them: then only closed, the id left published). */
void shm_wake_release(struct shm_conn *c)
{
	for (int role = 0; role < 2; role++) {
		if (c->wake[role] < 0)
			continue;
		struct sockaddr_un a;
		socklen_t len;
		if (c->forked) {
			shunt_fd_release(c->wake[role]);
		} else if (c->wake_abs) {
			/* The peer stops sending to a socket that is about to
			 * serve another connection (unless it already read
			 * the id: one more look, for nothing). */
			uint64_t id = c->wake_id[role];
			if (c->hdr)
				__atomic_compare_exchange_n(&c->hdr->wake_id[c->side][role], &id, 0,
							    0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
			if (!wpool_put(c->wake[role], NULL, c->wake_id[role]))
				shunt_fd_release(c->wake[role]);
		} else if (wake_addr(&a, &len, c->key, c->side, role)) {
			shunt_fd_release(c->wake[role]);
		} else if (!wpool_put(c->wake[role], a.sun_path, 0)) {
			shunt_fd_release(c->wake[role]);
			unlink(a.sun_path);
		}
		c->wake[role] = -1;
		c->wake_id[role] = 0;
	}
}

/* At exit: remove the names of the wake sockets this process keeps
 * (abstract ones have none: they go with the process). */
void shm_wake_exit(void)
{
	pthread_mutex_lock(&wpool_mu);
	if (wpool_pid == shunt_pid()) {
		for (unsigned i = 0; i < wpool[0].n; i++) {
			char name[SHUNT_PATH_MAX];
			if (!wpool_name(name, sizeof name, wpool[0].v[i].id))
				unlink(name);
		}
	}
	pthread_mutex_unlock(&wpool_mu);
}
