/* The watcher: a thread per process that moves the fabric connections the
 * application is not looking at.
 *
 * shunt asks every provider for manual progress, so the data path costs no
 * thread handoff: bytes move only while someone calls the provider.  But a
 * process that sleeps elsewhere (in waitpid, on a pipe, computing) would
 * then stall its peers: a peer that writes, closes and exits waits for us
 * to take what it sent, and its provider dies with it where the kernel
 * would have kept sending; a peer's DEMOTE would wait for our next call.
 *
 * So the watcher sleeps on every connection's completion fd, one-shot.
 * When one fires and the application is not in that connection (trylock:
 * never in its way), it drives it: completions (bytes into the ring, the
 * peer's CLOSE, credits), and the DEMOTE exchange with its replay.  Then
 * the fd is re-armed only after WATCH_REARM_MS, so a busy connection costs
 * the watcher at most that many wakeups a second and an idle one none.  A
 * connection in the middle of the exchange is looked at every
 * WATCH_REARM_MS until it is done (its replay waits on the socket, which
 * the completion fd does not show). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab_internal.h"
#include "core/shunt_log.h"
#include "core/shunt_forklock.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_rundir.h"

#define WATCH_REARM_MS 10
#define WATCH_MAX_LATER 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(mu, SHUNT_RANK_FAB_WATCH)
static int epfd = -1;
static pid_t epid;
/* Connections the application put into their exchange (fab_watch_demoting):
 * handed over under mu, with a wakeup. */
static int wakefd = -1;
static struct fab_conn *soon[256];
static int nsoon;
/* <rundir>/r, where the agent files positions relayed to us. */
static int inofd = -1;
#define TAG_WAKE ((void *)1)
#define TAG_RELAY ((void *)2)

/* Connections to look at again (re-arm, or step) at a time; the thread's
 * own, no lock. */
static struct later {
	struct fab_conn *c;
	uint64_t at;
} later[WATCH_MAX_LATER];
static int nlater;

static int ref(struct fab_conn *c)
{
	return shunt_refs_get(&c->base.refs);
}

/* One look (the application's lock is free).  1 when the connection needs
 * looking at again soon whatever its fd says. */
static int drive(struct fab_conn *c)
{
	if (__atomic_exchange_n(&c->lock, 1, __ATOMIC_ACQUIRE))
		/* The application is in it: it moves it.  A relayed position
		 * is looked at again soon all the same (the application
		 * takes it too, at its next call, but may not make one). */
		return __atomic_load_n(&c->relay_hint, __ATOMIC_ACQUIRE) != 0;
	int st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
	if ((st == FAB_UP || st == FAB_DEMOTING) &&
	    __atomic_exchange_n(&c->relay_hint, 0, __ATOMIC_ACQ_REL))
		fab_relay_check(c);
	if (st == FAB_UP && fab_is_owner(c->pid)) {
		fab_cq_drain_locked(c);
		if (c->got_demote && fab_demote_begin(c, SHUNT_R_PEER_DEMOTED))
			fab_watch_demoting(c);
		st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
	}
	if (st == FAB_DEMOTING) {
		fab_demote_step(c);
		fab_send_fin(c);
		st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
		if (st != FAB_DEMOTING) {
			/* Whoever waits for the outcome. */
			fab_kick(c, FAB_RX);
			fab_kick(c, FAB_TX);
		}
	}
	fab_unlock(c);
	return st == FAB_DEMOTING;
}

static void rearm(struct fab_conn *c)
{
	int fd = c->wait_fd;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
	if (fd >= 0)
		REAL(epoll_ctl)(epfd, EPOLL_CTL_MOD, fd, &ev);
}

static void later_add(struct fab_conn *c, uint64_t at)
{
	if (nlater < WATCH_MAX_LATER)
		later[nlater++] = (struct later){c, at};
}

/* The agent filed a relayed position: mark the connections it names. */
struct relay_arg {
	const char *name;
	uint64_t now;
};

static void relay_one(int fd, struct shunt_fd *e, void *p)
{
	struct relay_arg *a = p;
	(void)fd;
	struct shunt_conn *b = __atomic_load_n(&e->conn, __ATOMIC_ACQUIRE);
	if (shunt_fd_kind(e) != SHUNT_FD_ACCEL || !b || b->ops->life != &fab_life_ops)
		return;
	struct fab_conn *c = (struct fab_conn *)b;
	char want[48];
	shunt_tuple_key(&c->tuple, want, 32);
	size_t n = strlen(want);
	snprintf(want + n, sizeof want - n, ".%c", c->client ? 'c' : 's');
	if (strcmp(want, a->name))
		return;
	/* (A connection recycled meanwhile finds no file of its own.) */
	__atomic_store_n(&c->relay_hint, 1, __ATOMIC_RELEASE);
	later_add(c, a->now);
}

static void relayed(uint64_t now)
{
	union {
		struct inotify_event ev;
		char raw[4096];
	} u;
	for (;;) {
		ssize_t n = REAL(read)(inofd, u.raw, sizeof u.raw);
		if (n <= 0)
			return;
		for (char *p = u.raw; p < u.raw + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			if (ev->len && ev->name[0] != '.') {
				struct relay_arg a = {ev->name, now};
				shunt_fd_foreach(SHUNT_FD_ACCEL, relay_one, &a);
			}
			p += sizeof *ev + ev->len;
		}
	}
}

static void *watch_thread(void *arg)
{
	(void)arg;
	/* Everything here is shunt's own: no interposition. */
	shunt_guard = 1;
	struct epoll_event ev[64];
	for (;;) {
		uint64_t now = shunt_now_ms();
		int ms = -1;
		for (int i = 0; i < nlater; i++) {
			int d = later[i].at > now ? (int)(later[i].at - now) : 0;
			if (ms < 0 || d < ms)
				ms = d;
		}
		int n = REAL(epoll_wait)(epfd, ev, 64, ms);
		if (n < 0 && errno != EINTR)
			return NULL;
		for (int i = 0; i < n; i++) {
			struct fab_conn *c = ev[i].data.ptr;
			if (ev[i].data.ptr == TAG_WAKE) {
				uint64_t v;
				if (REAL(read)(wakefd, &v, sizeof v) < 0) {
					/* drained by an earlier wakeup */
				}
				pthread_mutex_lock(&mu);
				for (int k = 0; k < nsoon; k++)
					if (ref(soon[k])) {
						later_add(soon[k], 0);
						shunt_conn_put(&soon[k]->base);
					}
				nsoon = 0;
				pthread_mutex_unlock(&mu);
				continue;
			}
			if (ev[i].data.ptr == TAG_RELAY) {
				relayed(shunt_now_ms());
				continue;
			}
			if (!ref(c))
				continue; /* gone: its fd left the set with it */
			drive(c);
			if (nlater < WATCH_MAX_LATER)
				later[nlater++] = (struct later){c, shunt_now_ms() + WATCH_REARM_MS};
			else
				rearm(c);
			shunt_conn_put(&c->base);
		}
		now = shunt_now_ms();
		for (int i = 0; i < nlater;) {
			struct fab_conn *c = later[i].c;
			if (later[i].at > now) {
				i++;
				continue;
			}
			later[i] = later[--nlater];
			if (!ref(c))
				continue;
			if (drive(c) && nlater < WATCH_MAX_LATER)
				later[nlater++] = (struct later){c, now + WATCH_REARM_MS};
			else
				rearm(c);
			shunt_conn_put(&c->base);
		}
	}
}

/* The set and the thread of this process (a forked child starts its own:
 * the parent's thread did not come along). */
static int start_locked(void)
{
	if (epfd >= 0 && epid == getpid())
		return 0;
	/* A forked child's copies of the parent's: not its to use. */
	shunt_fd_release(epfd);
	shunt_fd_release(wakefd);
	shunt_fd_release(inofd);
	epfd = wakefd = inofd = -1;
	nlater = nsoon = 0;
	int fd = REAL(epoll_create1)(EPOLL_CLOEXEC);
	if (fd < 0)
		return -1;
	epfd = shunt_fd_own(fd, &epfd);
	wakefd = shunt_fd_own(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), &wakefd);
	struct epoll_event we = {.events = EPOLLIN, .data.ptr = TAG_WAKE};
	if (wakefd < 0 || REAL(epoll_ctl)(epfd, EPOLL_CTL_ADD, wakefd, &we) < 0)
		return -1;
	/* Relayed positions (docs/ARCHITECTURE.md): without inotify they are
	 * still found, by the connection's own steps. */
	const char *rd = shunt_rundir();
	char dir[SHUNT_PATH_MAX];
	if (rd && shunt_rundir_path(dir, sizeof dir, rd, SHUNT_ROOM_RELAY, NULL) == 0) {
		mkdir(dir, 0700);
		inofd = shunt_fd_own(inotify_init1(IN_CLOEXEC | IN_NONBLOCK), &inofd);
		struct epoll_event ie = {.events = EPOLLIN, .data.ptr = TAG_RELAY};
		if (inofd >= 0 && (inotify_add_watch(inofd, dir, IN_MOVED_TO | IN_CLOSE_WRITE |
						       IN_ONLYDIR | IN_DONT_FOLLOW) < 0 ||
				   REAL(epoll_ctl)(epfd, EPOLL_CTL_ADD, inofd, &ie) < 0)) {
			shunt_fd_release(inofd);
			inofd = -1;
		}
	}
	if (fab_thread_start(watch_thread) < 0) {
		shunt_fd_release(epfd);
		epfd = -1;
		return -1;
	}
	epid = getpid();
	return 0;
}

void fab_watch_add(struct fab_conn *c)
{
	if (c->wait_fd < 0)
		return; /* a provider without a wait fd: the application only */
	pthread_mutex_lock(&mu);
	int ok = start_locked() == 0;
	pthread_mutex_unlock(&mu);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
	if (!ok || REAL(epoll_ctl)(epfd, EPOLL_CTL_ADD, c->wait_fd, &ev) < 0)
		SHUNT_DEBUG("fabric: fd=%d not watched: %s", c->base.fd,
			    ok ? "epoll_ctl failed" : "no watcher thread");
}

void fab_watch_demoting(struct fab_conn *c)
{
	pthread_mutex_lock(&mu);
	int ok = start_locked() == 0 && nsoon < (int)(sizeof soon / sizeof *soon);
	if (ok)
		soon[nsoon++] = c;
	pthread_mutex_unlock(&mu);
	uint64_t one = 1;
	if (ok && REAL(write)(wakefd, &one, sizeof one) < 0) {
		/* a wakeup is pending anyway */
	}
}
