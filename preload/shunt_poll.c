/* poll, ppoll, select, pselect.
 *
 * While no connection in the process is accelerated these are libc's own,
 * after one load of a counter.  Otherwise readiness of accelerated fds comes
 * from their transport (rings, in user space) and that of every other fd
 * from the kernel; to sleep, the transports' wake fds join the kernel wait
 * and the results are translated back, so the application only ever sees
 * its own fds and events. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/shunt_clock.h"
#include "core/shunt_conn.h"
#include "core/shunt_real.h"
#include "core/shunt_wait.h"
#include "shunt_poll.h"

extern void __chk_fail(void) __attribute__((noreturn));

/* An epoll fd (see SHUNT_FDF_EPOLL): nested epoll may make part of its
 * readiness user-space readiness. */
static inline int epoll_fd(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	return e && (__atomic_load_n(&e->flags, __ATOMIC_RELAXED) & SHUNT_FDF_EPOLL);
}

/* User-space readiness of p's accelerated fds and emulated epoll fds;
 * counts them in *naccel.  An epoll fd stays a kernel fd as well: its
 * revents here are what user space adds to the kernel's answer. */
static int accel_scan(struct pollfd *p, nfds_t n, int *naccel)
{
	int ready = 0;
	*naccel = 0;
	for (nfds_t i = 0; i < n; i++) {
		struct shunt_fd *e = shunt_fd_accel(p[i].fd);
		struct shunt_conn *c = e ? shunt_conn_get(e) : NULL;
		if (!c) {
			if (!e && epoll_fd(p[i].fd)) {
				p[i].revents = 0;
				if (!shunt_epoll_emulated(p[i].fd))
					continue;
				(*naccel)++;
				/* Also sets its nest eventfd, so the kernel's
				 * view agrees. */
				if (shunt_epoll_prime(p[i].fd, NULL, NULL) && (p[i].events & POLLIN)) {
					p[i].revents = POLLIN;
					ready++;
				}
			}
			continue;
		}
		short r = c->ops->wait->poll(c, (short)(p[i].events | POLLRDHUP));
		shunt_conn_put(c);
		if (shunt_fd_kind(e) != SHUNT_FD_ACCEL)
			continue; /* just handed to the kernel path */
		(*naccel)++;
		p[i].revents = (short)(r & (p[i].events | POLLERR | POLLHUP | POLLNVAL));
		if (p[i].revents)
			ready++;
	}
	return ready;
}

struct scan_arg {
	struct pollfd *p;
	nfds_t n;
};

static int scan_ready(void *a)
{
	struct scan_arg *s = a;
	int naccel;
	return accel_scan(s->p, s->n, &naccel) > 0;
}

/* Most accelerated fds looked at to decide whether a spin may pay: a
 * wait over thousands has some peer awake somewhere, and asking them all
 * would cost more than the spin. */
#define SPIN_WORTH_MAX 16

static int scan_worth(void *a, int cpu)
{
	struct scan_arg *s = a;
	int seen = 0, best = SHUNT_WORTH_NOT;
	for (nfds_t i = 0; i < s->n && seen < SPIN_WORTH_MAX; i++) {
		struct shunt_fd *e = shunt_fd_accel(s->p[i].fd);
		struct shunt_conn *c = e ? shunt_conn_get(e) : NULL;
		if (!c)
			continue;
		seen++;
		int w = shunt_conn_worth_spin(c, cpu);
		shunt_conn_put(c);
		if (w == SHUNT_WORTH_SPIN)
			return w;
		if (w == SHUNT_WORTH_YIELD)
			best = w;
	}
	/* Nested epoll fds only: nothing known, the budget decides. */
	return seen == 0 ? SHUNT_WORTH_SPIN : best;
}

struct armed {
	struct shunt_conn *c;
	short events;
	int at, m;
};

static struct timespec *ms_to_ts(int ms, struct timespec *ts)
{
	if (ms < 0)
		return NULL;
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long)(ms % 1000) * 1000000;
	return ts;
}

int shunt_poll_emulated(struct pollfd *p, nfds_t n, uint64_t deadline_ns,
			const sigset_t *mask)
{
	struct pollfd kbuf[128];
	struct armed abuf[64];
	struct pollfd *k = kbuf;
	struct armed *a = abuf;
	size_t kcap = sizeof kbuf / sizeof *kbuf, acap = sizeof abuf / sizeof *abuf;
	struct timespec ts;
	int spun = 0, skip_kernel = 0, rc;
	for (;;) {
		int naccel;
		int ready = accel_scan(p, n, &naccel);
		if (naccel == 0 && ready == 0) {
			/* Nothing accelerated any more: one plain call. */
			rc = REAL(ppoll)(p, n, ms_to_ts(shunt_remaining_ms(deadline_ns), &ts), mask);
			goto out;
		}
		size_t need = n + SHUNT_ARM_MAX * (size_t)naccel;
		if (need > kcap) {
			struct pollfd *nk = malloc(need * sizeof *nk);
			if (!nk)
				goto nomem;
			if (k != kbuf)
				free(k);
			k = nk;
			kcap = need;
		}
		if ((size_t)naccel > acap) {
			struct armed *na = malloc((size_t)naccel * sizeof *na);
			if (!na)
				goto nomem;
			if (a != abuf)
				free(a);
			a = na;
			acap = (size_t)naccel;
		}
		/* Kernel fds: a non-blocking look.  An fd of -1 is skipped.
		 * Not right after a spin that saw nothing: the kernel was
		 * asked just before it, and the sleep below asks again (it
		 * returns at once for a ready fd). */
		for (nfds_t i = 0; i < n; i++) {
			k[i] = p[i];
			k[i].revents = 0;
			if (shunt_fd_accel(p[i].fd))
				k[i].fd = -1;
		}
		int kr = skip_kernel ? 0 : REAL(poll)(k, n, 0);
		skip_kernel = 0;
		if (kr < 0) {
			rc = -1;
			goto out;
		}
		for (nfds_t i = 0; i < n; i++) {
			if (k[i].fd < 0 && p[i].fd >= 0)
				continue;
			short user = epoll_fd(p[i].fd) ? p[i].revents : 0;
			p[i].revents = (short)(k[i].revents | user);
			if (k[i].revents && !user)
				ready++;
		}
		if (ready) {
			rc = ready;
			goto out;
		}
		int ms = shunt_remaining_ms(deadline_ns);
		if (ms == 0) {
			rc = 0;
			goto out;
		}
		if (!spun) {
			struct scan_arg sa = {p, n};
			spun = 1;
			skip_kernel = !shunt_spin_accel(scan_ready, scan_worth, &sa, naccel > 1);
			continue;
		}
		/* Sleep: arm every accelerated fd, look once more, then wait
		 * in the kernel on everything.  An emulated epoll fd is primed:
		 * its connections armed, its nest eventfd set if ready. */
		size_t nk = n;
		int na = 0, again = 0;
		struct shunt_armlist al;
		shunt_armlist_init(&al);
		for (nfds_t i = 0; i < n; i++) {
			struct shunt_fd *e = shunt_fd_accel(p[i].fd);
			struct shunt_conn *c;
			if (!e && epoll_fd(p[i].fd) && shunt_epoll_emulated(p[i].fd)) {
				if (shunt_epoll_prime(p[i].fd, &al, &ms) && (p[i].events & POLLIN))
					again = 1;
				continue;
			}
			if (!e || na == naccel || !(c = shunt_conn_get(e)))
				continue;
			short ev = (short)(p[i].events | POLLRDHUP);
			a[na] = (struct armed){c, ev, (int)nk, 0};
			a[na].m = c->ops->wait->arm(c, ev, &k[nk], &ms);
			nk += (size_t)a[na].m;
			na++;
		}
		for (int j = 0; j < na && !again; j++)
			again = a[j].c->ops->wait->poll(a[j].c, a[j].events) != 0;
		if (al.short_ms && (ms < 0 || ms > 10))
			ms = 10;
		kr = again ? 0 : REAL(ppoll)(k, (nfds_t)nk, ms_to_ts(ms, &ts), mask);
		int err = errno;
		shunt_armlist_release(&al);
		for (int j = 0; j < na; j++) {
			a[j].c->ops->wait->disarm(a[j].c, a[j].events, &k[a[j].at], kr > 0 ? a[j].m : 0);
			shunt_conn_put(a[j].c);
		}
		if (kr < 0) {
			errno = err;
			rc = -1; /* EINTR: poll is never restarted */
			goto out;
		}
	}
nomem:
	errno = ENOMEM;
	rc = -1;
out:
	if (k != kbuf)
		free(k);
	if (a != abuf)
		free(a);
	return rc;
}

static uint64_t deadline_from_ms(int t)
{
	return t < 0 ? 0 : shunt_now_ns() + (uint64_t)t * 1000000u + 1;
}

static uint64_t deadline_from_ts(const struct timespec *t)
{
	if (!t)
		return 0;
	return shunt_now_ns() + (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec + 1;
}

static inline __attribute__((always_inline)) int any_accel(const struct pollfd *p, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		if (shunt_fd_accel(p[i].fd) ||
		    (epoll_fd(p[i].fd) && shunt_epoll_emulated(p[i].fd)))
			return 1;
	return 0;
}

SHUNT_EXPORT int poll(struct pollfd *p, nfds_t n, int t)
{
	if (likely(!shunt_any_accel()) || !any_accel(p, n))
		return REAL(poll)(p, n, t);
	return shunt_poll_emulated(p, n, deadline_from_ms(t), NULL);
}

SHUNT_EXPORT int __poll_chk(struct pollfd *p, nfds_t n, int t, size_t size)
{
	if (size / sizeof(*p) < n)
		__chk_fail();
	return poll(p, n, t);
}

SHUNT_EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t,
		       const sigset_t *s)
{
	if (likely(!shunt_any_accel()) || !any_accel(p, n))
		return REAL(ppoll)(p, n, t, s);
	return shunt_poll_emulated(p, n, deadline_from_ts(t), s);
}

SHUNT_EXPORT int __ppoll_chk(struct pollfd *p, nfds_t n, const struct timespec *t,
			     const sigset_t *s, size_t size)
{
	if (size / sizeof(*p) < n)
		__chk_fail();
	return ppoll(p, n, t, s);
}

/* select/pselect with an accelerated fd in a set: the same wait as poll. */
static int select_emulated(int n, fd_set *r, fd_set *w, fd_set *x, uint64_t deadline,
			   const sigset_t *mask)
{
	struct pollfd p[FD_SETSIZE];
	nfds_t np = 0;
	if (n > FD_SETSIZE)
		n = FD_SETSIZE;
	for (int fd = 0; fd < n; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (x && FD_ISSET(fd, x))
			ev |= POLLPRI;
		if (ev)
			p[np++] = (struct pollfd){fd, ev, 0};
	}
	int rc = shunt_poll_emulated(p, np, deadline, mask);
	if (rc < 0)
		return rc;
	for (nfds_t i = 0; i < np; i++)
		if (p[i].revents & POLLNVAL) {
			errno = EBADF;
			return -1;
		}
	int count = 0;
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (x)
		FD_ZERO(x);
	for (nfds_t i = 0; i < np; i++) {
		short re = p[i].revents;
		if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(p[i].fd, r);
			count++;
		}
		if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
			FD_SET(p[i].fd, w);
			count++;
		}
		if (x && (p[i].events & POLLPRI) && (re & POLLPRI)) {
			FD_SET(p[i].fd, x);
			count++;
		}
	}
	return count;
}

static int sets_accel(int n, fd_set *r, fd_set *w, fd_set *x)
{
	if (n > FD_SETSIZE)
		n = FD_SETSIZE;
	for (int fd = 0; fd < n; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x))) &&
		    (shunt_fd_accel(fd) || (epoll_fd(fd) && shunt_epoll_emulated(fd))))
			return 1;
	return 0;
}

SHUNT_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	if (likely(!shunt_any_accel()) || !sets_accel(n, r, w, e))
		return REAL(select)(n, r, w, e, t);
	uint64_t d = t ? shunt_now_ns() + (uint64_t)t->tv_sec * 1000000000u +
				 (uint64_t)t->tv_usec * 1000u + 1
		       : 0;
	int rc = select_emulated(n, r, w, e, d, NULL);
	if (t) {
		/* Linux select reports the time left. */
		int ms = shunt_remaining_ms(d);
		t->tv_sec = ms / 1000;
		t->tv_usec = (ms % 1000) * 1000;
	}
	return rc;
}

SHUNT_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
			 const sigset_t *s)
{
	if (likely(!shunt_any_accel()) || !sets_accel(n, r, w, e))
		return REAL(pselect)(n, r, w, e, t, s);
	return select_emulated(n, r, w, e, deadline_from_ts(t), s);
}
