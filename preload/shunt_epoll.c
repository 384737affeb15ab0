/* epoll over accelerated connections.
 *
 * The kernel cannot see ring readiness, so an accelerated fd's interest is
 * kept here, per epoll fd, and answered from user space; in the kernel set
 * shunt registers instead the socket itself (for FIN/RST) and the
 * transport's wake fd, both tagged with a marker so their events are never
 * handed to the application.  Non-accelerated fds in the same set stay
 * plain kernel registrations.  Level and edge triggered, EPOLLONESHOT and
 * EPOLLRDHUP are emulated; a connection handed back to TCP is re-registered
 * with the application's own events and data.
 *
 * While no accelerated fd was ever added to an epoll fd, every call on it
 * is libc's own after one table lookup. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shunt_conn.h"
#include "shunt_real.h"
#include "shunt_wait.h"

/* Tag of shunt's own registrations: user-space pointers and small integers
 * never carry these top bits. */
#define MARK 0xf5a7000000000000ull
#define MARK_MASK 0xffff000000000000ull
#define MARK_WAKE 0x0000000100000000ull

struct item {
	int fd;
	int wake[SHUNT_ARM_MAX]; /* the transport's wake fds, tagged MARK_WAKE */
	int nwake;
	struct shunt_conn *c;
	uint32_t events;   /* the application's */
	epoll_data_t data; /* the application's */
	int disabled;      /* EPOLLONESHOT fired */
	int parked;        /* EPOLL_CTL_DEL'd by the application: its kernel
			      registrations are kept for a later ADD (event
			      loops delete and re-add an fd on every request) */
	short last;        /* EPOLLET: readiness last reported */
	uint64_t seq;      /* EPOLLET: transport progress at the last report */
};

struct epset {
	pthread_mutex_t mu;
	int ep;      /* its epoll fd */
	int n, cap;
	struct item *items;
	unsigned rr; /* round robin start, for fairness when maxevents is small */
	unsigned calls; /* epoll_wait calls that found ring data */
};

/* Indexed by epoll fd; grown under sets_mu, read lock-free. */
static struct epset **sets;
static int nsets;
static pthread_mutex_t sets_mu = PTHREAD_MUTEX_INITIALIZER;

static struct epset *set_of(int ep)
{
	struct epset **s = __atomic_load_n(&sets, __ATOMIC_ACQUIRE);
	if (ep < 0 || ep >= __atomic_load_n(&nsets, __ATOMIC_ACQUIRE) || !s)
		return NULL;
	return __atomic_load_n(&s[ep], __ATOMIC_ACQUIRE);
}

static struct epset *set_make(int ep)
{
	struct epset *s = set_of(ep);
	if (s)
		return s;
	pthread_mutex_lock(&sets_mu);
	if (ep >= nsets) {
		int n = nsets ? nsets : 64;
		while (n <= ep)
			n *= 2;
		/* The old array is leaked on purpose: a concurrent reader may
		 * still hold it.  It is small and grows by doubling. */
		struct epset **ns = calloc((size_t)n, sizeof *ns);
		if (!ns) {
			pthread_mutex_unlock(&sets_mu);
			return NULL;
		}
		if (sets)
			memcpy(ns, sets, (size_t)nsets * sizeof *ns);
		__atomic_store_n(&sets, ns, __ATOMIC_RELEASE);
		__atomic_store_n(&nsets, n, __ATOMIC_RELEASE);
	}
	s = sets[ep];
	if (!s) {
		s = calloc(1, sizeof *s);
		if (s) {
			pthread_mutex_init(&s->mu, NULL);
			s->ep = ep;
			__atomic_store_n(&sets[ep], s, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&sets_mu);
	return s;
}

static struct item *find(struct epset *s, int fd)
{
	for (int i = 0; i < s->n; i++)
		if (s->items[i].fd == fd)
			return &s->items[i];
	return NULL;
}

/* An item holds a reference on its connection (see epoll_ctl ADD). */
static void drop(struct epset *s, struct item *it)
{
	struct shunt_conn *c = it->c;
	*it = s->items[--s->n];
	shunt_conn_put(c);
}

static short to_poll(uint32_t ev)
{
	short p = 0;
	if (ev & EPOLLIN)
		p |= POLLIN;
	if (ev & EPOLLOUT)
		p |= POLLOUT;
	if (ev & EPOLLRDHUP)
		p |= POLLRDHUP;
	if (ev & EPOLLPRI)
		p |= POLLPRI;
	return p;
}

static uint32_t to_epoll(short p)
{
	uint32_t e = 0;
	if (p & POLLIN)
		e |= EPOLLIN;
	if (p & POLLOUT)
		e |= EPOLLOUT;
	if (p & POLLRDHUP)
		e |= EPOLLRDHUP;
	if (p & POLLPRI)
		e |= EPOLLPRI;
	if (p & POLLERR)
		e |= EPOLLERR;
	if (p & POLLHUP)
		e |= EPOLLHUP;
	return e;
}

/* The kernel side of an accelerated fd's registration: its socket and the
 * transport's wake fds, tagged so their events never reach the
 * application. */
static int kernel_add(int ep, int fd, struct item *it)
{
	struct shunt_conn *c = it->c;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = MARK | (unsigned)fd};
	if (REAL(epoll_ctl)(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -1;
	struct pollfd w[SHUNT_ARM_MAX];
	int ms = -1;
	int m = c->ops->arm(c, POLLIN | POLLOUT, w, &ms);
	c->ops->disarm(c, POLLIN | POLLOUT, w, 0);
	it->nwake = 0;
	for (int i = 0; i < m; i++) {
		if (w[i].fd == fd)
			continue;
		struct epoll_event we = {.events = EPOLLIN,
					 .data.u64 = MARK | MARK_WAKE | (unsigned)fd};
		if (REAL(epoll_ctl)(ep, EPOLL_CTL_ADD, w[i].fd, &we) < 0 && errno != EEXIST) {
			int err = errno;
			REAL(epoll_ctl)(ep, EPOLL_CTL_DEL, fd, NULL);
			for (int j = 0; j < it->nwake; j++)
				REAL(epoll_ctl)(ep, EPOLL_CTL_DEL, it->wake[j], NULL);
			errno = err;
			return -1;
		}
		it->wake[it->nwake++] = w[i].fd;
	}
	return 0;
}

static void kernel_del_wakes(int ep, struct item *it)
{
	for (int j = 0; j < it->nwake; j++)
		REAL(epoll_ctl)(ep, EPOLL_CTL_DEL, it->wake[j], NULL);
	it->nwake = 0;
}

/* The connection went back to TCP: register the socket as the application
 * asked, so the kernel answers for it from now on. */
static void convert(int ep, struct epset *s, struct item *it)
{
	struct epoll_event ev = {.events = it->events, .data = it->data};
	kernel_del_wakes(ep, it);
	if (it->parked) {
		REAL(epoll_ctl)(ep, EPOLL_CTL_DEL, it->fd, NULL);
		drop(s, it);
		return;
	}
	if (!it->disabled)
		REAL(epoll_ctl)(ep, EPOLL_CTL_MOD, it->fd, &ev);
	else
		REAL(epoll_ctl)(ep, EPOLL_CTL_DEL, it->fd, NULL);
	drop(s, it);
}

SHUNT_EXPORT int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	struct epset *s = set_of(ep);
	if (likely(!e && !s))
		return REAL(epoll_ctl)(ep, op, fd, ev);
	if (!s && (op != EPOLL_CTL_ADD || !(s = set_make(ep)))) {
		if (!s && op == EPOLL_CTL_ADD) {
			errno = ENOMEM;
			return -1;
		}
		return REAL(epoll_ctl)(ep, op, fd, ev);
	}
	pthread_mutex_lock(&s->mu);
	struct item *it = find(s, fd);
	int rc = 0;
	if (!it && !e) {
		pthread_mutex_unlock(&s->mu);
		return REAL(epoll_ctl)(ep, op, fd, ev);
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!ev) {
			errno = EFAULT;
			rc = -1;
			break;
		}
		if (it && it->parked && e && it->c == e->conn) {
			/* Back after a DEL: no system call. */
			it->parked = it->disabled = 0;
			it->events = ev->events;
			it->data = ev->data;
			it->last = 0;
			it->seq = 0;
			break;
		}
		if (it && it->parked) {
			/* Another connection has this number now. */
			REAL(epoll_ctl)(ep, EPOLL_CTL_DEL, fd, NULL);
			kernel_del_wakes(ep, it);
			drop(s, it);
			it = NULL;
		}
		if (it) {
			errno = EEXIST;
			rc = -1;
			break;
		}
		if (!e) {
			pthread_mutex_unlock(&s->mu);
			return REAL(epoll_ctl)(ep, op, fd, ev);
		}
		if (s->n == s->cap) {
			int cap = s->cap ? 2 * s->cap : 8;
			struct item *ni = realloc(s->items, (size_t)cap * sizeof *ni);
			if (!ni) {
				errno = ENOMEM;
				rc = -1;
				break;
			}
			s->items = ni;
			s->cap = cap;
		}
		it = &s->items[s->n];
		*it = (struct item){.fd = fd, .c = shunt_conn_get(e), .events = ev->events,
				    .data = ev->data};
		if (!it->c) {
			/* Demoted meanwhile: a plain registration. */
			pthread_mutex_unlock(&s->mu);
			return REAL(epoll_ctl)(ep, op, fd, ev);
		}
		if ((rc = kernel_add(ep, fd, it)) == 0)
			s->n++;
		else
			shunt_conn_put(it->c);
		break;
	case EPOLL_CTL_MOD:
		if (!it || it->parked) {
			errno = ENOENT;
			rc = -1;
			break;
		}
		if (!ev) {
			errno = EFAULT;
			rc = -1;
			break;
		}
		it->events = ev->events;
		it->data = ev->data;
		it->disabled = 0;
		it->last = 0;
		if (!e)
			convert(ep, s, it);
		break;
	case EPOLL_CTL_DEL:
		if (!it || it->parked) {
			errno = ENOENT;
			rc = -1;
			break;
		}
		it->parked = 1;
		break;
	default:
		errno = EINVAL;
		rc = -1;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* What an item reports now: level readiness, or for EPOLLET what is new
 * since its last report (new readiness, or transport progress: bytes
 * arriving on a non-empty ring are an edge for the kernel too). */
static short item_ready(struct item *it, int commit)
{
	short want = to_poll(it->events);
	short r = it->c->ops->poll(it->c, (short)(want | POLLRDHUP));
	r = (short)(r & (want | POLLERR | POLLHUP));
	if (!(it->events & EPOLLET) || !r)
		return r;
	uint64_t seq = it->c->ops->progress(it->c);
	short fresh = seq != it->seq ? r : (short)(r & ~it->last);
	if (commit) {
		it->last = r;
		it->seq = seq;
	}
	return fresh;
}

/* Ready accelerated items into out; returns the count. */
static int collect(int ep, struct epset *s, struct epoll_event *out, int max)
{
	int got = 0;
	unsigned start = s->n ? s->rr++ % (unsigned)s->n : 0;
	for (int i = 0; i < s->n && got < max;) {
		struct item *it = &s->items[(start + (unsigned)i) % (unsigned)s->n];
		/* As the kernel keys a registration to the open file, an item
		 * lives while any fd number of its connection does (dup). */
		if (__atomic_load_n(&it->c->fds, __ATOMIC_ACQUIRE) == 0) {
			drop(s, it);
			continue;
		}
		if (__atomic_load_n(&it->c->finished, __ATOMIC_ACQUIRE)) {
			convert(ep, s, it); /* handed back to TCP */
			continue;
		}
		i++;
		if (it->disabled || it->parked)
			continue;
		short r = item_ready(it, 1);
		if (__atomic_load_n(&it->c->finished, __ATOMIC_ACQUIRE)) {
			/* poll() just finished it: look again as a kernel fd */
			convert(ep, s, it);
			i--;
			continue;
		}
		if (!r)
			continue;
		out[got].events = to_epoll(r);
		out[got].data = it->data;
		got++;
		if (it->events & EPOLLONESHOT)
			it->disabled = 1;
	}
	return got;
}

static int any_ready(void *arg)
{
	struct epset *s = arg;
	for (int i = 0; i < s->n; i++) {
		struct item *it = &s->items[i];
		if (!it->disabled && !it->parked && !it->c->finished && item_ready(it, 0))
			return 1;
	}
	return 0;
}

static int ep_of(const struct epset *s)
{
	return s->ep;
}

/* Drain a wake fd, or note that the socket spoke (FIN, RST, replay). */
static void wake_seen(struct item *it, uint64_t wake)
{
	struct pollfd w[SHUNT_ARM_MAX];
	int ms = -1;
	int m = it->c->ops->arm(it->c, POLLIN | POLLOUT, w, &ms);
	for (int j = 0; j < m; j++)
		w[j].revents = (short)((w[j].fd == it->fd) == !wake ? POLLIN : 0);
	it->c->ops->disarm(it->c, POLLIN | POLLOUT, w, m);
}

/* Kernel events: the application's go to out, shunt's own mark which
 * connection to look at again (a later collect() does). */
static int take_kernel(struct epset *s, struct epoll_event *kev, int kn,
		       struct epoll_event *out, int got, int max)
{
	for (int i = 0; i < kn; i++) {
		if ((kev[i].data.u64 & MARK_MASK) == MARK) {
			/* A wake or the socket: the next collect() looks. */
			struct item *it = find(s, (int)(kev[i].data.u64 & 0xffffffffu));
			if (it && it->parked) {
				/* Deleted by the application and now active in
				 * the kernel (a FIN stays readable): apply the
				 * deletion for real. */
				REAL(epoll_ctl)(ep_of(s), EPOLL_CTL_DEL, it->fd, NULL);
				kernel_del_wakes(ep_of(s), it);
				drop(s, it);
			} else if (it) {
				wake_seen(it, kev[i].data.u64 & MARK_WAKE);
			}
			continue;
		}
		if (got < max)
			out[got++] = kev[i];
	}
	return got;
}

static int wait_common(int ep, struct epoll_event *out, int max, uint64_t deadline,
		       const sigset_t *mask)
{
	struct epset *s = set_of(ep);
	struct epoll_event kev[64];
	int spun = 0, kernel_seen = 0;
	if (max <= 0) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int got = collect(ep, s, out, max);
		int accel = s->n;
		/* Rings had data: answer without a system call, but ask the
		 * kernel every 8th time so its fds are never starved. */
		if (got && (++s->calls & 7))
			kernel_seen = 1;
		pthread_mutex_unlock(&s->mu);
		if (got < max && !kernel_seen) {
			int kn = REAL(epoll_wait)(ep, kev, max - got < 64 ? max - got : 64, 0);
			if (kn < 0)
				return got ? got : -1;
			pthread_mutex_lock(&s->mu);
			got = take_kernel(s, kev, kn, out, got, max);
			pthread_mutex_unlock(&s->mu);
		}
		if (got)
			return got;
		kernel_seen = 0;
		int ms = shunt_remaining_ms(deadline);
		if (ms == 0)
			return 0;
		if (!accel) {
			/* epoll_pwait, not pwait2: millisecond waits are enough
			 * here, and valgrind (3.19) and older kernels lack it. */
			int kn = REAL(epoll_pwait)(ep, out, max, ms, mask);
			if (kn <= 0)
				return kn;
			/* Marks of items already converted are dropped. */
			int k = 0;
			for (int i = 0; i < kn; i++)
				if ((out[i].data.u64 & MARK_MASK) != MARK)
					out[k++] = out[i];
			if (k)
				return k;
			continue;
		}
		if (!spun) {
			spun = 1;
			pthread_mutex_lock(&s->mu);
			shunt_spin_accel(any_ready, s);
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		/* Sleep: arm every item, look once more, then wait in the
		 * kernel, where the wake fds and sockets are registered. */
		pthread_mutex_lock(&s->mu);
		int n = s->n, again = 0;
		struct {
			struct shunt_conn *c;
			short ev;
		} armed[n > 0 ? n : 1];
		for (int i = 0; i < n; i++) {
			struct item *it = &s->items[i];
			struct pollfd two[SHUNT_ARM_MAX];
			/* The item may be dropped while we sleep unlocked. */
			__atomic_add_fetch(&it->c->refs, 1, __ATOMIC_RELAXED);
			armed[i].c = it->c;
			armed[i].ev = it->disabled || it->parked ? 0 : to_poll(it->events);
			it->c->ops->arm(it->c, armed[i].ev, two, &ms);
			if (!again && armed[i].ev && !it->c->finished && item_ready(it, 0))
				again = 1;
		}
		pthread_mutex_unlock(&s->mu);
		int kn = 0;
		if (!again) {
			kn = REAL(epoll_pwait)(ep, kev, 64, ms, mask);
		}
		int err = errno;
		pthread_mutex_lock(&s->mu);
		for (int i = 0; i < n; i++) {
			armed[i].c->ops->disarm(armed[i].c, armed[i].ev, NULL, 0);
			shunt_conn_put(armed[i].c);
		}
		got = kn > 0 ? take_kernel(s, kev, kn, out, 0, max) : 0;
		pthread_mutex_unlock(&s->mu);
		if (kn < 0) {
			errno = err;
			return -1;
		}
		if (got)
			return got;
		/* The kernel just told all it had (fewer than asked for):
		 * the next round need not ask it again before looking at
		 * the rings. */
		kernel_seen = kn < 64;
	}
}

static uint64_t deadline_ms(int t)
{
	return t < 0 ? 0 : shunt_now_ns() + (uint64_t)t * 1000000u + 1;
}

SHUNT_EXPORT int epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	struct epset *s = set_of(ep);
	if (likely(!s))
		return REAL(epoll_wait)(ep, ev, n, t);
	return wait_common(ep, ev, n, deadline_ms(t), NULL);
}

SHUNT_EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int n, int t, const sigset_t *m)
{
	struct epset *s = set_of(ep);
	if (likely(!s))
		return REAL(epoll_pwait)(ep, ev, n, t, m);
	return wait_common(ep, ev, n, deadline_ms(t), m);
}

SHUNT_EXPORT int epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *t,
			      const sigset_t *m)
{
	struct epset *s = set_of(ep);
	if (likely(!s))
		return REAL(epoll_pwait2)(ep, ev, n, t, m);
	uint64_t d = t ? shunt_now_ns() + (uint64_t)t->tv_sec * 1000000000u +
				 (uint64_t)t->tv_nsec + 1
		       : 0;
	return wait_common(ep, ev, n, d, m);
}

static int new_fd(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		shunt_fd_reset(fd);
		shunt_epoll_forget(fd);
		errno = saved;
	}
	return fd;
}

SHUNT_EXPORT int epoll_create(int size)
{
	return new_fd(REAL(epoll_create)(size));
}

SHUNT_EXPORT int epoll_create1(int flags)
{
	return new_fd(REAL(epoll_create1)(flags));
}

void shunt_epoll_forget(int fd)
{
	int n = __atomic_load_n(&nsets, __ATOMIC_ACQUIRE);
	struct epset *s = set_of(fd);
	if (unlikely(s != NULL)) {
		/* fd was an epoll fd: its set goes with it. */
		pthread_mutex_lock(&s->mu);
		while (s->n)
			drop(s, &s->items[s->n - 1]);
		pthread_mutex_unlock(&s->mu);
	}
	/* An accelerated connection leaves every set when its last fd number
	 * closes, as the kernel drops a released file's registrations. */
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (!e || !e->conn || __atomic_load_n(&e->conn->fds, __ATOMIC_ACQUIRE) > 1)
		return;
	for (int ep = 0; ep < n; ep++) {
		struct epset *x = set_of(ep);
		if (!x || !x->n)
			continue;
		pthread_mutex_lock(&x->mu);
		struct item *it = find(x, fd);
		if (it && it->c == e->conn)
			drop(x, it);
		pthread_mutex_unlock(&x->mu);
	}
}
