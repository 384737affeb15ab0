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
#include "core/shunt_waitset.h"
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

static struct timespec *ms_to_ts(int ms, struct timespec *ts)
{
	if (ms < 0)
		return NULL;
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long)(ms % 1000) * 1000000;
	return ts;
}

/* The earliest wakeup stamp of a peer within t0..now (the answer of a
 * wait that slept), among the first SPIN_WORTH_MAX connections. */
static uint64_t scan_woke_at(void *a, uint64_t t0, uint64_t now)
{
	struct scan_arg *s = a;
	uint64_t best = 0;
	int seen = 0;
	for (nfds_t i = 0; i < s->n && seen < SPIN_WORTH_MAX; i++) {
		struct shunt_fd *e = shunt_fd_accel(s->p[i].fd);
		struct shunt_conn *c = e ? shunt_conn_get(e) : NULL;
		if (!c)
			continue;
		seen++;
		uint64_t at = shunt_conn_woke_at(c);
		shunt_conn_put(c);
		if (at >= t0 && at <= now && (!best || at < best))
			best = at;
	}
	return best;
}

struct armed {
	struct shunt_conn *c;
	short events;
	int at, m;
};

/* One poll over a set holding accelerated fds, as the steps of core's
 * wait (core/shunt_waitset.h): k is what the kernel is asked (the
 * application's fds, then the transports' wake fds), a the connections
 * armed for a sleep. */
struct pwait {
	struct shunt_waitset w;
	struct pollfd *p;
	nfds_t n;
	const sigset_t *mask;
	int naccel;
	struct scan_arg sa;
	struct pollfd *k, kbuf[128];
	struct armed *a, abuf[64];
	size_t kcap, acap;
};

/* Room for the kernel's view of the set and the armed connections. */
static int pwait_room(struct pwait *pw)
{
	size_t need = pw->n + SHUNT_ARM_MAX * (size_t)pw->naccel;
	if (need > pw->kcap) {
		struct pollfd *nk = malloc(need * sizeof *nk);
		if (!nk)
			return -1;
		if (pw->k != pw->kbuf)
			free(pw->k);
		pw->k = nk;
		pw->kcap = need;
	}
	if ((size_t)pw->naccel > pw->acap) {
		struct armed *na = malloc((size_t)pw->naccel * sizeof *na);
		if (!na)
			return -1;
		if (pw->a != pw->abuf)
			free(pw->a);
		pw->a = na;
		pw->acap = (size_t)pw->naccel;
	}
	return 0;
}

/* The kernel fds, without blocking (kernel: asked at all; an fd of -1 is
 * skipped), their answers merged into p: the count of those ready, or -1. */
static int kernel_look(struct pwait *pw, int kernel)
{
	struct pollfd *p = pw->p, *k = pw->k;
	int ready = 0;
	for (nfds_t i = 0; i < pw->n; i++) {
		k[i] = p[i];
		k[i].revents = 0;
		if (shunt_fd_accel(p[i].fd))
			k[i].fd = -1;
	}
	if (kernel && REAL(poll)(k, pw->n, 0) < 0)
		return -1;
	for (nfds_t i = 0; i < pw->n; i++) {
		if (k[i].fd < 0 && p[i].fd >= 0)
			continue;
		short user = epoll_fd(p[i].fd) ? p[i].revents : 0;
		p[i].revents = (short)(k[i].revents | user);
		if (k[i].revents && !user)
			ready++;
	}
	return ready;
}

static int pwait_look(struct shunt_waitset *w, int kernel)
{
	struct pwait *pw = (struct pwait *)w;
	struct timespec ts;
	int ready = accel_scan(pw->p, pw->n, &pw->naccel);
	if (pw->naccel == 0 && ready == 0) {
		/* Nothing accelerated any more: one plain call. */
		w->rc = REAL(ppoll)(pw->p, pw->n, ms_to_ts(shunt_remaining_ms(w->deadline_ns), &ts),
				    pw->mask);
		return 1;
	}
	if (pwait_room(pw) < 0) {
		errno = ENOMEM;
		w->rc = -1;
		return 1;
	}
	int kr = kernel_look(pw, kernel);
	w->many = pw->naccel > 1;
	w->rc = kr < 0 ? -1 : ready + kr;
	return w->rc != 0;
}

/* Arm every accelerated fd (an emulated epoll fd is primed: its
 * connections armed, its nest eventfd set if ready); 1 when something is
 * ready already.  The armed count in *na, the kernel's fds in *nk. */
static int arm_all(struct pwait *pw, struct shunt_armlist *al, int *ms, int *na, size_t *nk)
{
	int again = 0;
	*na = 0;
	*nk = pw->n;
	for (nfds_t i = 0; i < pw->n; i++) {
		struct shunt_fd *e = shunt_fd_accel(pw->p[i].fd);
		struct shunt_conn *c;
		if (!e && epoll_fd(pw->p[i].fd) && shunt_epoll_emulated(pw->p[i].fd)) {
			if (shunt_epoll_prime(pw->p[i].fd, al, ms) && (pw->p[i].events & POLLIN))
				again = 1;
			continue;
		}
		if (!e || *na == pw->naccel || !(c = shunt_conn_get(e)))
			continue;
		short ev = (short)(pw->p[i].events | POLLRDHUP);
		struct armed *a = &pw->a[*na];
		*a = (struct armed){c, ev, (int)*nk, 0};
		a->m = c->ops->wait->arm(c, ev, &pw->k[*nk], ms);
		*nk += (size_t)a->m;
		(*na)++;
	}
	for (int j = 0; j < *na && !again; j++)
		again = pw->a[j].c->ops->wait->poll(pw->a[j].c, pw->a[j].events) != 0;
	return again;
}

/* Sleep: arm, look once more, then wait in the kernel on everything. */
static int pwait_sleep(struct shunt_waitset *w, int ms)
{
	struct pwait *pw = (struct pwait *)w;
	struct timespec ts;
	struct shunt_armlist al;
	int na;
	size_t nk;
	shunt_armlist_init(&al);
	int again = arm_all(pw, &al, &ms, &na, &nk);
	if (al.short_ms && (ms < 0 || ms > 10))
		ms = 10;
	int kr = again ? 0 : REAL(ppoll)(pw->k, (nfds_t)nk, ms_to_ts(ms, &ts), pw->mask);
	int err = errno;
	shunt_armlist_release(&al);
	for (int j = 0; j < na; j++) {
		struct armed *a = &pw->a[j];
		a->c->ops->wait->disarm(a->c, a->events, &pw->k[a->at], kr > 0 ? a->m : 0);
		shunt_conn_put(a->c);
	}
	if (kr >= 0)
		return 0;
	errno = err;
	w->rc = -1; /* EINTR: poll is never restarted */
	return 1;
}

int shunt_poll_emulated(struct pollfd *p, nfds_t n, uint64_t deadline_ns,
			const sigset_t *mask)
{
	struct pwait pw = {
		.w = {.look = pwait_look, .sleep = pwait_sleep, .ready = scan_ready,
		      .worth = scan_worth, .woke_at = scan_woke_at, .can_spin = 1,
		      .deadline_ns = deadline_ns},
		.p = p, .n = n, .mask = mask, .sa = {p, n},
		.kcap = sizeof pw.kbuf / sizeof *pw.kbuf, .acap = sizeof pw.abuf / sizeof *pw.abuf};
	pw.w.arg = &pw.sa;
	pw.k = pw.kbuf;
	pw.a = pw.abuf;
	int rc = shunt_waitset_run(&pw.w);
	int err = errno;
	if (pw.k != pw.kbuf)
		free(pw.k);
	if (pw.a != pw.abuf)
		free(pw.a);
	errno = err;
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
