/* Wakeups: how one end of an shm connection wakes the other's sleepers.
 *
 * A blocking call sleeps on a futex word of the ring it waits for (the
 * header is a shared file mapping, so both processes meet on the word):
 * the cheapest wakeup there is, and it needs no file descriptor and no
 * name anyone could remove.  poll/select/epoll need something the kernel
 * can report with the application's other fds: a wake socket, bound per
 * role (data arrived, space freed) and named after the connection in
 * <rundir>/o.  One unbound datagram socket per process sends; one datagram
 * per sleep (the sender skips it while a wakeup is pending).  Bound sockets
 * are kept between connections and renamed (a rename keeps the binding).
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
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/shunt_log.h"
#include "core/shunt_forklock.h"
#include "core/shunt_ownfd.h"
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

/* What sleeps on one role of a ring: futex sleepers on seq, poll/epoll
 * waiters on the peer's wake socket of that role.  After the fence. */
static void wake_sleepers(struct shm_conn *c, uint32_t *seq, const uint32_t *sleep,
			  const uint32_t *fd, int role)
{
	if (__atomic_load_n(sleep, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(seq, 1, __ATOMIC_RELEASE);
		syscall(SYS_futex, seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		__atomic_store_n(&c->base.woke, 1, __ATOMIC_RELAXED);
	}
	if (__atomic_load_n(fd, __ATOMIC_RELAXED)) {
		shm_wake_role(c, role);
		__atomic_store_n(&c->base.woke, 1, __ATOMIC_RELAXED);
	}
}

void shm_wake_data(struct shm_conn *c)
{
	struct shm_ring_ctl *t = c->tx.ctl;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	wake_sleepers(c, &t->data_seq, &t->reader_sleep, &t->reader_fd, SHM_WAKE_RX);
}

void shm_wake_space(struct shm_conn *c)
{
	struct shm_ring_ctl *r = c->rx.ctl;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
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
SHUNT_FORK_MUTEX(wpool_mu, SHUNT_RANK_SHM_WAKE)

static int wpool_name(char *buf, size_t len, unsigned id)
{
	return shunt_rundir_path(buf, len, shunt_rundir(), SHUNT_ROOM_OFFER, "w-%d-%u",
				 (int)shunt_pid(), id);
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
		char name[SHUNT_PATH_MAX];
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
	char name[SHUNT_PATH_MAX];
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

int shm_wake_bind_peer(struct shm_conn *c)
{
	for (int role = 0; role < 2; role++)
		if (wake_addr(&c->peer[role], &c->peer_len[role], c->key, !c->side, role) < 0)
			return -1;
	return 0;
}

/* Let go of c's wake sockets: kept for a later connection, or closed and
 * their names removed (after fork another process may still wait on
 * them: then only closed). */
void shm_wake_release(struct shm_conn *c)
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
}

/* At exit: remove the names of the wake sockets this process keeps. */
void shm_wake_exit(void)
{
	pthread_mutex_lock(&wpool_mu);
	if (wpool_pid == shunt_pid()) {
		for (unsigned i = 0; i < wpool_n; i++) {
			char name[SHUNT_PATH_MAX];
			if (!wpool_name(name, sizeof name, wpool[i].id))
				unlink(name);
		}
	}
	pthread_mutex_unlock(&wpool_mu);
}
