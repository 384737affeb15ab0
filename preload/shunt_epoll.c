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
 * is libc's own after one table lookup.
 *
 * Nested epoll: an epoll fd is readable to the kernel only through what is
 * in its kernel set, and ring readiness is not.  So a set waited on from
 * outside (added to another epoll set, or passed to poll/select) gets an
 * eventfd in its kernel set, tagged like the others: whoever waits on the
 * outer set first "primes" each inner one -- signals its eventfd if an item
 * is ready in user space, and arms its items so that data arriving later
 * wakes one of the wake fds already in the inner kernel set.  The kernel then
 * reports the inner epoll fd with the application's own data, at any depth.
 * An epoll_wait on the inner set clears the eventfd.  See "Nested epoll" in
 * docs/ARCHITECTURE.md. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/shunt_conn.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_clock.h"
#include "core/shunt_waitset.h"
#include "shunt_poll.h"

/* Tag of shunt's own registrations: user-space pointers and small integers
 * never carry these top bits. */
#define MARK 0xf5a7000000000000ull
#define MARK_MASK 0xffff000000000000ull
#define MARK_WAKE 0x0000000100000000ull
#define MARK_NEST 0x0000000200000000ull /* the set's own nest eventfd */
/* A wake fd's index in its item's wake[], so the one that fired is the one
 * drained. */
#define MARK_WIDX_SHIFT 34
#define MARK_WIDX_MASK (0x3ull << MARK_WIDX_SHIFT)
_Static_assert(SHUNT_ARM_MAX <= 4, "a wake index fits its two bits");
/* The kernel allows 5 levels of epoll nesting; a deeper walk means our
 * record of the nesting is stale. */
#define NEST_DEPTH_MAX 6
#define NEST_KIDS_MAX 64 /* inner sets of one set that are primed */

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
	/* Nesting.  kids: epoll fds the application added to this set (its
	 * inner sets), which a wait on this set primes.  nfd: this set's nest
	 * eventfd (-1 until it is first waited on from outside), in its kernel
	 * set tagged MARK_NEST; nsig: it is signalled. */
	int *kids;
	int nkids, capkids;
	int nfd;
	int nsig;
	/* The application's kernel fds in the set (-1: not known): while
	 * none, a wait need not ask the kernel before it spins (shunt's own
	 * registrations say nothing the application waits for, and the
	 * sleep hears them).  An fd closed without EPOLL_CTL_DEL stays
	 * counted: too high costs a look.  Too low (an fd added through a
	 * dup of the epoll fd) delays its event by a spin, never loses it:
	 * the sleep after the spin asks the kernel. */
	int nkern;
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
			s->nfd = -1;
			s->nkern = -1;
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

/* ---- nesting: the nest eventfd ------------------------------------------ */

/* s's nest eventfd, made and put in its kernel set on first use; -1 if it
 * cannot be (then an outer wait sees only what the kernel sees).  Under
 * s->mu. */
static int nest_fd(struct epset *s)
{
	if (s->nfd >= 0)
		return s->nfd;
	int fd = shunt_fd_own(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), &s->nfd);
	if (fd < 0)
		return -1;
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = MARK | MARK_NEST};
	if (REAL(epoll_ctl)(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		shunt_fd_release(fd);
		s->nfd = -1;
		return -1;
	}
	return fd;
}

/* Make the kernel's view of s agree with its user-space readiness: the
 * eventfd is readable exactly while an item may be ready.  Only a change
 * costs a system call; a clear -> set change is a new edge for an outer
 * EPOLLET registration.  Under s->mu. */
static void nest_set(struct epset *s, int ready)
{
	uint64_t v = 1;
	int saved = errno;
	if (ready && !s->nsig) {
		if (nest_fd(s) >= 0 && REAL(write)(s->nfd, &v, sizeof v) == sizeof v)
			s->nsig = 1;
	} else if (!ready && s->nsig) {
		REAL(read)(s->nfd, &v, sizeof v);
		s->nsig = 0;
	}
	errno = saved;
}

static void kid_add(struct epset *s, int fd)
{
	for (int i = 0; i < s->nkids; i++)
		if (s->kids[i] == fd)
			return;
	if (s->nkids == s->capkids) {
		int cap = s->capkids ? 2 * s->capkids : 4;
		int *nk = realloc(s->kids, (size_t)cap * sizeof *nk);
		if (!nk)
			return; /* not emulated: the kernel alone answers for it */
		s->kids = nk;
		s->capkids = cap;
	}
	s->kids[s->nkids++] = fd;
}

static void kid_del(struct epset *s, int fd)
{
	for (int i = 0; i < s->nkids; i++)
		if (s->kids[i] == fd) {
			s->kids[i] = s->kids[--s->nkids];
			return;
		}
}

/* Has s inner sets worth priming?  Only while some connection in the
 * process is accelerated: otherwise every inner set is plain kernel. */
static int kids_active(const struct epset *s)
{
	return __atomic_load_n(&s->nkids, __ATOMIC_RELAXED) && shunt_any_accel();
}

/* A copy of s's inner sets (so no lock is held while they are visited). */
static int kids_copy(struct epset *s, int out[NEST_KIDS_MAX])
{
	pthread_mutex_lock(&s->mu);
	int n = s->nkids < NEST_KIDS_MAX ? s->nkids : NEST_KIDS_MAX;
	memcpy(out, s->kids, (size_t)n * sizeof *out);
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* The kernel side of an accelerated fd's registration: its socket and the
 * transport's wake fds, tagged so their events never reach the
 * application. */
static int kernel_add(int ep, int fd, struct item *it)
{
	struct shunt_conn *c = it->c;
	/* Edge-triggered: what the socket says (a FIN, a replay) is noted
	 * once (wake_seen) and the transport answers from then on; level, a
	 * FIN kept every wait from sleeping while the application held the
	 * half-closed socket open. */
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
				 .data.u64 = MARK | (unsigned)fd};
	if (REAL(epoll_ctl)(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -1;
	struct pollfd w[SHUNT_ARM_MAX];
	int ms = -1;
	int m = c->ops->wait->arm(c, POLLIN | POLLOUT, w, &ms);
	c->ops->wait->disarm(c, POLLIN | POLLOUT, w, 0);
	it->nwake = 0;
	for (int i = 0; i < m; i++) {
		if (w[i].fd == fd)
			continue;
		struct epoll_event we = {
			.events = EPOLLIN,
			.data.u64 = MARK | MARK_WAKE | ((uint64_t)it->nwake << MARK_WIDX_SHIFT) |
				    (unsigned)fd};
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

/* s counts the application's own kernel registrations (nkern); under its
 * lock. */
static void kern_count(struct epset *s, int op, int rc)
{
	if (rc != 0 || s->nkern < 0)
		return;
	if (op == EPOLL_CTL_ADD)
		s->nkern++;
	else if (op == EPOLL_CTL_DEL && s->nkern > 0)
		s->nkern--;
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
		kern_count(s, EPOLL_CTL_ADD, REAL(epoll_ctl)(ep, EPOLL_CTL_MOD, it->fd, &ev));
	else
		REAL(epoll_ctl)(ep, EPOLL_CTL_DEL, it->fd, NULL);
	drop(s, it);
}

/* An epoll fd added to (or removed from) the set ep: recorded, so that a
 * wait on ep primes it. */
static int ctl_nested(int ep, int op, int fd, struct epoll_event *ev)
{
	int rc = REAL(epoll_ctl)(ep, op, fd, ev);
	if (rc < 0 || (op != EPOLL_CTL_ADD && op != EPOLL_CTL_DEL))
		return rc;
	int saved = errno;
	struct epset *s = op == EPOLL_CTL_ADD ? set_make(ep) : set_of(ep);
	if (s) {
		pthread_mutex_lock(&s->mu);
		if (op == EPOLL_CTL_ADD)
			kid_add(s, fd);
		else
			kid_del(s, fd);
		pthread_mutex_unlock(&s->mu);
	}
	errno = saved;
	return rc;
}

static short item_ready(struct item *it, int commit);

/* The fds registered in the kernel set ep (its /proc fdinfo "tfd:"
 * lines), or -1. */
static int kernel_count(int ep)
{
	char path[48], b[4096];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", ep);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int n = 0, at_line = 1;
	ssize_t r;
	while ((r = REAL(read)(fd, b, sizeof b)) > 0) {
		for (ssize_t i = 0; i < r; i++) {
			if (at_line && i + 4 <= r && !memcmp(b + i, "tfd:", 4))
				n++;
			at_line = b[i] == '\n';
		}
	}
	REAL(close)(fd);
	return r < 0 ? -1 : n;
}

/* One of the application's kernel fds, in a set we track: the kernel's,
 * and counted. */
static int plain_ctl(struct epset *s, int ep, int op, int fd, struct epoll_event *ev)
{
	int rc = REAL(epoll_ctl)(ep, op, fd, ev);
	int err = errno;
	kern_count(s, op, rc);
	pthread_mutex_unlock(&s->mu);
	errno = err;
	return rc;
}

/* Returned by ctl_add: the fd is one of the application's kernel fds. */
#define CTL_PLAIN 2

/* EPOLL_CTL_ADD of fd (entry e, accelerated or NULL; it: its item in s, or
 * NULL) to s, under s->mu: 0, -1 with errno, or CTL_PLAIN. */
static int ctl_add(struct epset *s, int ep, int fd, struct epoll_event *ev, struct shunt_fd *e,
		   struct item *it)
{
	if (!ev) {
		errno = EFAULT;
		return -1;
	}
	if (it && it->parked && e && it->c == e->conn) {
		/* Back after a DEL: no system call. */
		it->parked = it->disabled = 0;
		it->events = ev->events;
		it->data = ev->data;
		it->last = 0;
		it->seq = 0;
		if (s->nfd >= 0 && item_ready(it, 0))
			nest_set(s, 1); /* an outer waiter must see it */
		return 0;
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
		return -1;
	}
	if (!e)
		return CTL_PLAIN;
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 8;
		struct item *ni = realloc(s->items, (size_t)cap * sizeof *ni);
		if (!ni) {
			errno = ENOMEM;
			return -1;
		}
		s->items = ni;
		s->cap = cap;
	}
	it = &s->items[s->n];
	*it = (struct item){.fd = fd, .c = shunt_conn_get(e), .events = ev->events,
			    .data = ev->data};
	if (!it->c) /* demoted meanwhile: a plain registration */
		return CTL_PLAIN;
	/* Before the set's first item (and so before any registration
	 * of ours): what the application put there so far. */
	if (s->n == 0 && s->nkern < 0)
		s->nkern = kernel_count(ep);
	if (kernel_add(ep, fd, it) < 0) {
		shunt_conn_put(it->c);
		return -1;
	}
	s->n++;
	if (s->nfd >= 0 && item_ready(it, 0))
		nest_set(s, 1);
	return 0;
}

SHUNT_EXPORT int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	struct shunt_fd *x = shunt_fd_peek(fd);
	struct shunt_fd *e = x && shunt_fd_kind(x) == SHUNT_FD_ACCEL ? x : NULL;
	struct epset *s = set_of(ep);
	if (likely(!e && !s && !(x && (__atomic_load_n(&x->flags, __ATOMIC_RELAXED) &
				       SHUNT_FDF_EPOLL))))
		return REAL(epoll_ctl)(ep, op, fd, ev);
	if (!e && x && (__atomic_load_n(&x->flags, __ATOMIC_RELAXED) & SHUNT_FDF_EPOLL))
		return ctl_nested(ep, op, fd, ev);
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
	if (!it && !e)
		return plain_ctl(s, ep, op, fd, ev);
	switch (op) {
	case EPOLL_CTL_ADD:
		rc = ctl_add(s, ep, fd, ev, e, it);
		if (rc == CTL_PLAIN)
			return plain_ctl(s, ep, op, fd, ev);
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
		else if (s->nfd >= 0 && item_ready(it, 0))
			nest_set(s, 1); /* re-armed (EPOLLONESHOT) and ready */
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

/* What an item reports now: level readiness, or for EPOLLET all of it
 * once something happened since its last report (new readiness, or
 * transport progress: bytes arriving on a non-empty ring are an edge for
 * the kernel too).  All of it, as the kernel does: a FIN on a socket read
 * before reports EPOLLIN with EPOLLRDHUP, and nginx reads only on EPOLLIN
 * (an EPOLLRDHUP alone left its connections in CLOSE-WAIT). */
static short item_ready(struct item *it, int commit)
{
	short want = to_poll(it->events);
	short r = it->c->ops->wait->poll(it->c, (short)(want | POLLRDHUP));
	r = (short)(r & (want | POLLERR | POLLHUP));
	if (!(it->events & EPOLLET) || !r)
		return r;
	uint64_t seq = it->c->ops->wait->progress(it->c);
	short fresh = seq != it->seq || (r & ~it->last) ? r : 0;
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
		/* Finished (here or before): collect() converts it. */
		if (!it->disabled && !it->parked &&
		    (it->c->finished || item_ready(it, 0) || it->c->finished))
			return 1;
	}
	return 0;
}

/* Most items looked at to decide whether a spin may pay (see shunt_poll.c). */
#define SPIN_WORTH_MAX 16

static int any_worth(void *arg, int cpu)
{
	struct epset *s = arg;
	int seen = 0, best = SHUNT_WORTH_NOT;
	for (int i = 0; i < s->n && seen < SPIN_WORTH_MAX; i++) {
		struct item *it = &s->items[i];
		if (it->disabled || it->parked || it->c->finished)
			continue;
		seen++;
		int w = shunt_conn_worth_spin(it->c, cpu);
		if (w == SHUNT_WORTH_SPIN)
			return w;
		if (w == SHUNT_WORTH_YIELD)
			best = w;
	}
	return seen == 0 ? SHUNT_WORTH_SPIN : best;
}

/* The earliest wakeup stamp of a peer within t0..now (the answer of a
 * wait that slept), among the first SPIN_WORTH_MAX items. */
static uint64_t any_woke_at(void *arg, uint64_t t0, uint64_t now)
{
	struct epset *s = arg;
	uint64_t best = 0;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->n && i < SPIN_WORTH_MAX; i++) {
		uint64_t at = shunt_conn_woke_at(s->items[i].c);
		if (at >= t0 && at <= now && (!best || at < best))
			best = at;
	}
	pthread_mutex_unlock(&s->mu);
	return best;
}

static int tree_worth(void *arg, int cpu)
{
	(void)arg;
	(void)cpu;
	return SHUNT_WORTH_SPIN; /* nested sets: the budget decides */
}

static int ep_of(const struct epset *s)
{
	return s->ep;
}

/* ---- nesting: readiness and priming --------------------------------------- */

/* Is anything of s ready in user space, in s or in a set nested in it?
 * Takes each set's lock in turn, never two at once. */
static int tree_ready(struct epset *s, int depth)
{
	if (!s || depth > NEST_DEPTH_MAX)
		return 0;
	pthread_mutex_lock(&s->mu);
	int r = s->n && any_ready(s);
	pthread_mutex_unlock(&s->mu);
	if (r || !kids_active(s))
		return r;
	int kids[NEST_KIDS_MAX];
	int nk = kids_copy(s, kids);
	for (int i = 0; i < nk && !r; i++)
		r = tree_ready(set_of(kids[i]), depth + 1);
	return r;
}

static int tree_ready_fn(void *arg)
{
	return tree_ready(arg, 0);
}

static void armlist_push(struct shunt_armlist *al, struct shunt_conn *c, short ev)
{
	if (al->n == al->cap) {
		int cap = 2 * al->cap;
		struct shunt_armed *nv = malloc((size_t)cap * sizeof *nv);
		if (!nv)
			return; /* not armed: the deadline is shortened instead */
		memcpy(nv, al->v, (size_t)al->n * sizeof *nv);
		if (al->v != al->buf)
			free(al->v);
		al->v = nv;
		al->cap = cap;
	}
	al->v[al->n++] = (struct shunt_armed){c, ev};
}

void shunt_armlist_init(struct shunt_armlist *al)
{
	al->n = 0;
	al->cap = (int)(sizeof al->buf / sizeof al->buf[0]);
	al->v = al->buf;
	al->short_ms = 0;
}

void shunt_armlist_release(struct shunt_armlist *al)
{
	for (int i = 0; i < al->n; i++) {
		al->v[i].c->ops->wait->disarm(al->v[i].c, al->v[i].ev, NULL, 0);
		shunt_conn_put(al->v[i].c);
	}
	if (al->v != al->buf)
		free(al->v);
	shunt_armlist_init(al);
}

static int prime_set(struct epset *k, struct shunt_armlist *al, int *ms, int depth);

static int prime_kids(struct epset *s, struct shunt_armlist *al, int *ms, int depth)
{
	if (!kids_active(s))
		return 0;
	int kids[NEST_KIDS_MAX], ready = 0;
	int nk = kids_copy(s, kids);
	for (int i = 0; i < nk; i++)
		ready |= prime_set(set_of(kids[i]), al, ms, depth + 1);
	return ready;
}

/* Prepare k (and the sets nested in it) for a wait from outside: with al,
 * arm its items first (the peer then sends a wakeup to a wake fd of k's
 * kernel set when data or space comes), then make its nest eventfd say
 * whether an item is ready now.  Returns 1 if something is. */
static int prime_set(struct epset *k, struct shunt_armlist *al, int *ms, int depth)
{
	if (!k || depth > NEST_DEPTH_MAX)
		return 0;
	int ready = prime_kids(k, al, ms, depth);
	pthread_mutex_lock(&k->mu);
	if (k->n) {
		for (int i = 0; al && i < k->n; i++) {
			struct item *it = &k->items[i];
			struct pollfd w[SHUNT_ARM_MAX];
			if (it->disabled || it->parked || it->c->finished)
				continue;
			short ev = to_poll(it->events);
			int before = al->n;
			__atomic_add_fetch(&it->c->refs, 1, __ATOMIC_RELAXED);
			armlist_push(al, it->c, ev);
			if (al->n == before) {
				shunt_conn_put(it->c);
				al->short_ms = 1;
				continue;
			}
			it->c->ops->wait->arm(it->c, ev, w, ms);
		}
	}
	/* (A set whose items are all gone may still be signalled.) */
	int r = k->n && any_ready(k);
	nest_set(k, r);
	ready |= r;
	pthread_mutex_unlock(&k->mu);
	return ready;
}

int shunt_epoll_emulated(int fd)
{
	struct epset *s = set_of(fd);
	return s && (__atomic_load_n(&s->n, __ATOMIC_RELAXED) || kids_active(s));
}

int shunt_epoll_prime(int fd, struct shunt_armlist *al, int *timeout_ms)
{
	return prime_set(set_of(fd), al, timeout_ms, 0);
}

/* The set's own nest eventfd reported: it has been seen.  Under s->mu. */
static void nest_seen(struct epset *s)
{
	nest_set(s, 0);
}

/* Drain the wake fd that fired (the one registered in the kernel set, as
 * the kernel reports it), or note that the socket spoke (FIN, RST,
 * replay).  A wake fd left undrained would be reported at every wait. */
static void wake_seen(struct item *it, uint64_t data)
{
	if (data & MARK_WAKE) {
		unsigned i = (unsigned)((data & MARK_WIDX_MASK) >> MARK_WIDX_SHIFT);
		char b[64];
		if (i < (unsigned)it->nwake)
			REAL(recv)(it->wake[i], b, sizeof b, MSG_DONTWAIT);
		return;
	}
	struct pollfd w[SHUNT_ARM_MAX];
	int ms = -1;
	int m = it->c->ops->wait->arm(it->c, POLLIN | POLLOUT, w, &ms);
	for (int j = 0; j < m; j++)
		w[j].revents = (short)(w[j].fd == it->fd ? POLLIN : 0);
	it->c->ops->wait->disarm(it->c, POLLIN | POLLOUT, w, m);
}

/* Kernel events: the application's go to out, shunt's own mark which
 * connection to look at again (a later collect() does). */
static int take_kernel(struct epset *s, struct epoll_event *kev, int kn,
		       struct epoll_event *out, int got, int max)
{
	for (int i = 0; i < kn; i++) {
		if ((kev[i].data.u64 & MARK_MASK) == MARK) {
			if (kev[i].data.u64 & MARK_NEST) {
				nest_seen(s);
				continue;
			}
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
				wake_seen(it, kev[i].data.u64);
			}
			continue;
		}
		if (got < max)
			out[got++] = kev[i];
	}
	return got;
}

/* One epoll wait over a set holding accelerated fds, as the steps of
 * core's wait (core/shunt_waitset.h). */
struct ewait {
	struct shunt_waitset w;
	int ep;
	struct epset *s;
	struct epoll_event *out;
	int max;
	const sigset_t *mask;
	int nested; /* the set has inner sets to prime */
};

static int ewait_look(struct shunt_waitset *w, int kernel)
{
	struct ewait *ew = (struct ewait *)w;
	struct epset *s = ew->s;
	struct epoll_event kev[64];
	ew->nested = kids_active(s);
	pthread_mutex_lock(&s->mu);
	int got = collect(ew->ep, s, ew->out, ew->max);
	/* Rings had data: answer without a system call, but ask the kernel
	 * every 8th time so its fds are never starved.  A set with inner sets
	 * asks every time (they are kernel fds), and so does one waited on
	 * from outside: the wakeup that made the outer wait return is still
	 * queued in its kernel set.  Rings empty before a first spin: the
	 * kernel has something for the application only if the set holds fds
	 * of its own (nkern); the spin's outcome decides the rest. */
	if (!ew->nested && s->nfd < 0 &&
	    (got ? (++s->calls & 7) != 0 : !w->spun && s->nkern == 0))
		kernel = 0;
	w->can_spin = s->n || ew->nested;
	w->many = ew->nested || s->n > 1;
	pthread_mutex_unlock(&s->mu);
	if (got < ew->max && kernel) {
		if (ew->nested)
			prime_kids(s, NULL, NULL, 0);
		int kn = REAL(epoll_wait)(ew->ep, kev, ew->max - got < 64 ? ew->max - got : 64, 0);
		if (kn < 0) {
			w->rc = got ? got : -1;
			return 1;
		}
		pthread_mutex_lock(&s->mu);
		got = take_kernel(s, kev, kn, ew->out, got, ew->max);
		pthread_mutex_unlock(&s->mu);
	}
	if (ew->nested) {
		w->ready = tree_ready_fn;
		w->worth = tree_worth;
		w->woke_at = NULL;
		w->lock = NULL;
	} else {
		w->ready = any_ready;
		w->worth = any_worth;
		w->woke_at = any_woke_at;
		w->lock = &s->mu;
	}
	w->rc = got;
	return got != 0;
}

/* A set with nothing in user space: the kernel alone (marks of items
 * already converted are dropped). */
static int ewait_kernel(struct ewait *ew, int ms)
{
	/* epoll_pwait, not pwait2: millisecond waits are enough here, and
	 * valgrind (3.19) and older kernels lack it. */
	int kn = REAL(epoll_pwait)(ew->ep, ew->out, ew->max, ms, ew->mask);
	if (kn <= 0) {
		ew->w.rc = kn;
		return 1;
	}
	int k = 0;
	for (int i = 0; i < kn; i++)
		if ((ew->out[i].data.u64 & MARK_MASK) != MARK)
			ew->out[k++] = ew->out[i];
		else if (ew->out[i].data.u64 & MARK_NEST) {
			pthread_mutex_lock(&ew->s->mu);
			nest_seen(ew->s);
			pthread_mutex_unlock(&ew->s->mu);
		}
	ew->w.rc = k;
	return k != 0;
}

struct armed_item {
	struct shunt_conn *c;
	short ev;
};

/* Arm every item of s for a sleep (each held: the item may be dropped
 * while we sleep unlocked); 1 when one is ready already.  Under s->mu. */
static int arm_items(struct epset *s, struct armed_item *armed, int n, int *ms)
{
	int again = 0;
	for (int i = 0; i < n; i++) {
		struct item *it = &s->items[i];
		struct pollfd two[SHUNT_ARM_MAX];
		__atomic_add_fetch(&it->c->refs, 1, __ATOMIC_RELAXED);
		armed[i].c = it->c;
		armed[i].ev = it->disabled || it->parked ? 0 : to_poll(it->events);
		it->c->ops->wait->arm(it->c, armed[i].ev, two, ms);
		/* A look may finish the connection (a demotion's last ring
		 * byte read): its socket is still registered for shunt's
		 * wakes alone, so only a collect() (which converts it) may
		 * follow, not a sleep. */
		if (!again && armed[i].ev &&
		    (it->c->finished || item_ready(it, 0) || it->c->finished))
			again = 1;
	}
	return again;
}

/* Sleep: arm every item, look once more, then wait in the kernel, where
 * the wake fds and sockets are registered. */
static int ewait_sleep(struct shunt_waitset *w, int ms)
{
	struct ewait *ew = (struct ewait *)w;
	struct epset *s = ew->s;
	struct epoll_event kev[64];
	if (!w->can_spin)
		return ewait_kernel(ew, ms);
	pthread_mutex_lock(&s->mu);
	int n = s->n;
	struct armed_item armed[n > 0 ? n : 1];
	int again = arm_items(s, armed, n, &ms);
	pthread_mutex_unlock(&s->mu);
	/* Inner sets: armed too, and their nest eventfds set, so the kernel
	 * wait below returns when any of them becomes ready.  Whether one is
	 * ready now is the kernel's to say: with an outer EPOLLET registration
	 * an inner set still ready since the last report is no new event, and
	 * must not end the wait. */
	struct shunt_armlist al;
	shunt_armlist_init(&al);
	if (ew->nested)
		prime_kids(s, &al, &ms, 0);
	if (al.short_ms && (ms < 0 || ms > 10))
		ms = 10;
	/* No more than the caller can take: an application event the kernel
	 * hands over and out has no room for would be lost for an EPOLLET
	 * registration. */
	int ask = ew->max < 64 ? ew->max : 64;
	int kn = again ? 0 : REAL(epoll_pwait)(ew->ep, kev, ask, ms, ew->mask);
	int err = errno;
	shunt_armlist_release(&al);
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < n; i++) {
		armed[i].c->ops->wait->disarm(armed[i].c, armed[i].ev, NULL, 0);
		shunt_conn_put(armed[i].c);
	}
	int got = kn > 0 ? take_kernel(s, kev, kn, ew->out, 0, ew->max) : 0;
	pthread_mutex_unlock(&s->mu);
	errno = err;
	w->rc = kn < 0 ? -1 : got;
	/* The kernel just told all it had (fewer than asked for): the next
	 * round need not ask it again before looking at the rings. */
	w->told = kn < ask;
	return w->rc != 0;
}

static int wait_common(int ep, struct epoll_event *out, int max, uint64_t deadline,
		       const sigset_t *mask)
{
	struct epset *s = set_of(ep);
	if (max <= 0) {
		errno = EINVAL;
		return -1;
	}
	if (__atomic_load_n(&s->nsig, __ATOMIC_RELAXED)) {
		/* Waited on directly: what the nest eventfd announced is
		 * answered here; the next prime from outside sets it again if
		 * something is still ready (a new edge for an outer EPOLLET). */
		pthread_mutex_lock(&s->mu);
		nest_seen(s);
		pthread_mutex_unlock(&s->mu);
	}
	struct ewait ew = {.w = {.look = ewait_look, .sleep = ewait_sleep, .arg = s,
				 .deadline_ns = deadline},
			   .ep = ep, .s = s, .out = out, .max = max, .mask = mask};
	return shunt_waitset_run(&ew.w);
}

/* A set that never held an accelerated fd and whose inner sets need no
 * priming (nothing is accelerated in the process): the kernel alone. */
static inline int plain_set(const struct epset *s)
{
	return !s || (!__atomic_load_n(&s->cap, __ATOMIC_RELAXED) && !kids_active(s));
}

static uint64_t deadline_ms(int t)
{
	return t < 0 ? 0 : shunt_now_ns() + (uint64_t)t * 1000000u + 1;
}

SHUNT_EXPORT int epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	struct epset *s = set_of(ep);
	if (likely(plain_set(s)))
		return REAL(epoll_wait)(ep, ev, n, t);
	return wait_common(ep, ev, n, deadline_ms(t), NULL);
}

SHUNT_EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int n, int t, const sigset_t *m)
{
	struct epset *s = set_of(ep);
	if (likely(plain_set(s)))
		return REAL(epoll_pwait)(ep, ev, n, t, m);
	return wait_common(ep, ev, n, deadline_ms(t), m);
}

SHUNT_EXPORT int epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *t,
			      const sigset_t *m)
{
	struct epset *s = set_of(ep);
	if (likely(plain_set(s)))
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
		if (unlikely(shunt_guard))
			fd = shunt_fd_borrow(fd); /* libfabric's (shunt_ownfd.h) */
		else
			shunt_fd_reset(fd);
		shunt_epoll_forget(fd);
		/* Marked, so that adding it to another set or polling it is
		 * seen (nested epoll). */
		struct shunt_fd *e = shunt_fd_get(fd);
		if (e)
			__atomic_or_fetch(&e->flags, SHUNT_FDF_EPOLL, __ATOMIC_RELEASE);
		errno = saved;
	}
	return fd;
}

SHUNT_EXPORT int epoll_create(int size)
{
	/* libfabric's (under the guard): close-on-exec from the start, see
	 * shunt_sock.c. */
	if (unlikely(shunt_guard))
		return new_fd(REAL(epoll_create1)(EPOLL_CLOEXEC));
	return new_fd(REAL(epoll_create)(size));
}

SHUNT_EXPORT int epoll_create1(int flags)
{
	return new_fd(REAL(epoll_create1)(flags | (unlikely(shunt_guard) ? EPOLL_CLOEXEC : 0)));
}

void shunt_epoll_forget(int fd)
{
	int n = __atomic_load_n(&nsets, __ATOMIC_ACQUIRE);
	struct epset *s = set_of(fd);
	struct shunt_fd *fe = shunt_fd_peek(fd);
	if (fe && (__atomic_load_n(&fe->flags, __ATOMIC_RELAXED) & SHUNT_FDF_EPOLL))
		__atomic_and_fetch(&fe->flags, (uint8_t)~SHUNT_FDF_EPOLL, __ATOMIC_RELEASE);
	if (unlikely(s != NULL)) {
		/* fd was an epoll fd: its set goes with it, and it leaves the
		 * sets it was nested in (the kernel drops a closed file's
		 * registrations). */
		pthread_mutex_lock(&s->mu);
		while (s->n)
			drop(s, &s->items[s->n - 1]);
		s->nkids = 0;
		if (s->nfd >= 0) {
			shunt_fd_release(s->nfd);
			s->nfd = -1;
		}
		s->nsig = 0;
		s->nkern = -1;
		pthread_mutex_unlock(&s->mu);
		for (int ep = 0; ep < n; ep++) {
			struct epset *p = set_of(ep);
			if (!p || p == s || !__atomic_load_n(&p->nkids, __ATOMIC_RELAXED))
				continue;
			pthread_mutex_lock(&p->mu);
			kid_del(p, fd);
			pthread_mutex_unlock(&p->mu);
		}
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
		if (it && it->c == e->conn) {
			/* The kernel drops the socket's registration with the
			 * file; the wake fds live on (kept for the next
			 * connection), and would report its wakeups here, for
			 * an fd number that is no longer theirs. */
			kernel_del_wakes(ep, it);
			drop(x, it);
		}
		pthread_mutex_unlock(&x->mu);
	}
}
