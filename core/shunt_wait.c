/* The shared wait (shunt_wait.h): the spin budget, and a blocking call's
 * wait on one accelerated connection. */
#include "shunt_wait.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shunt_clock.h"
#include "shunt_conn.h"
#include "shunt_core.h"
#include "shunt_ownfd.h"
#include "shunt_real.h"
#include "shunt_signal.h"
#include "shunt_spin.h"

/* A peer runnable on our CPU (it runs there, or we just woke it there)
 * needs that CPU, not our spin.  One yield gives it, when nobody else
 * waits for the CPU (shunt_spin_yield_ok): the peer answers, and we find
 * the answer with no sleep and no wakeup for it to pay.  Once only: if
 * the CPU went to someone else, a sleep is the next step, not another
 * spin (each end yielding in turn against a busy neighbour is what costs
 * 2x).  Returns 1 (look again). */
static int runnable_sample(unsigned *ncpus, uint64_t now);
static int handoff(struct shunt_conn *c, enum shunt_spin_verdict why, int unknown, int oneway)
{
	if (why != SHUNT_SPIN_SAME_CPU && !unknown)
		return 1;
	unsigned ncpus = 1;
	int r = (why == SHUNT_SPIN_SAME_CPU && oneway) ? 0 : runnable_sample(&ncpus, 0);
	if (shunt_spin_yield_ok(why, unknown, oneway, r, ncpus)) {
		if (c)
			c->gave_cpu++;
		sched_yield();
	}
	return 1;
}

/* How often the machine's runnable count is read: a pread of a small
 * /proc file (a couple of microseconds), shared by every wait of the
 * process. */
#define SHUNT_CROWD_SAMPLE_NS 10000000ull

static int loadavg_open(void *arg)
{
	(void)arg;
	return open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
}

/* Tasks runnable on the machine now (the 4th field of /proc/loadavg,
 * "running/total"), or -1. */
static int runnable_now(void)
{
	static struct shunt_proc_fd lfd = SHUNT_PROC_FD_INIT;
	int fd = shunt_proc_fd(&lfd, shunt_pid(), loadavg_open, NULL);
	char b[128];
	ssize_t n = fd < 0 ? -1 : pread(fd, b, sizeof b - 1, 0);
	if (n <= 0)
		return -1;
	b[n] = 0;
	/* "0.50 1.20 2.28 3/250 12345" */
	const char *p = b;
	for (int f = 0; f < 3 && p; f++)
		p = strchr(p + 1, ' ');
	return p ? atoi(p + 1) : -1;
}

/* The runnable count, sampled at most every SHUNT_CROWD_SAMPLE_NS, and
 * the CPUs online; now is the clock when the caller has read it, else 0.
 * (Racy statics: a stale answer costs a spin, a yield or a sleep, never a
 * byte.) */
static int runnable_sample(unsigned *ncpus, uint64_t now)
{
	static uint64_t next;
	static int last = -1;
	static unsigned n;
	if (!__atomic_load_n(&n, __ATOMIC_RELAXED)) {
		long k = sysconf(_SC_NPROCESSORS_ONLN);
		__atomic_store_n(&n, k > 0 ? (unsigned)k : 1u, __ATOMIC_RELAXED);
	}
	*ncpus = __atomic_load_n(&n, __ATOMIC_RELAXED);
	if (!now)
		now = shunt_now_ns();
	if (now < __atomic_load_n(&next, __ATOMIC_RELAXED))
		return __atomic_load_n(&last, __ATOMIC_RELAXED);
	__atomic_store_n(&next, now + SHUNT_CROWD_SAMPLE_NS, __ATOMIC_RELAXED);
	int r = runnable_now();
	__atomic_store_n(&last, r, __ATOMIC_RELAXED);
	return r;
}

int shunt_spin_crowded_now(int peer_running)
{
	unsigned ncpus;
	int r = runnable_sample(&ncpus, 0);
	return r >= 0 && shunt_spin_crowded((unsigned)r, ncpus, peer_running);
}

int shunt_spin_oversubscribed_now(uint64_t now)
{
	unsigned ncpus;
	int r = runnable_sample(&ncpus, now);
	return shunt_spin_oversubscribed(r, ncpus);
}

int shunt_conn_worth_spin(struct shunt_conn *c, int cpu)
{
	struct shunt_presence *mine;
	const struct shunt_presence *peer = c->ops->wait->presence ? c->ops->wait->presence(c, &mine) : NULL;
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	if (!peer)
		return SHUNT_WORTH_SPIN;
	switch (shunt_spin_check(peer, cpu, __atomic_load_n(&c->woke, __ATOMIC_RELAXED), 0, 1,
				 &beat)) {
	case SHUNT_SPIN_ON:
		return SHUNT_WORTH_SPIN;
	case SHUNT_SPIN_SAME_CPU:
		return SHUNT_WORTH_YIELD;
	default:
		return SHUNT_WORTH_NOT;
	}
}

int shunt_spin_accel(int (*ready)(void *), int (*worth)(void *, int), void *arg, int many)
{
	/* One budget per thread: a thread waits in one event loop, and what
	 * its waits teach it is about the peers of that loop. */
	static __thread struct shunt_spin_state st;
	static __thread uint8_t st_init;
	/* Spun since this thread last gave its CPU away (ns). */
	static __thread uint64_t run_ns;
	uint64_t cap = (uint64_t)shunt_config()->spin_us * 1000 * (many ? SHUNT_SPIN_LOOP_X : 1u);
	if (!st_init) {
		shunt_spin_init(&st, cap);
		st_init = 1;
	}
	uint64_t budget = shunt_spin_budget(&st, cap);
	if (!budget)
		return 0;
	int cpu = sched_getcpu();
	int w = worth(arg, cpu);
	if (w != SHUNT_WORTH_SPIN)
		return w == SHUNT_WORTH_YIELD && handoff(NULL, SHUNT_SPIN_SAME_CPU, 0, 0) && ready(arg);
	uint64_t t0 = shunt_now_ns();
	enum shunt_spin_verdict why = SHUNT_SPIN_BUDGET;
	int ok = 0;
	for (unsigned i = 1;; i++) {
		if (ready(arg)) {
			ok = 1;
			break;
		}
		shunt_cpu_relax();
		if ((i & 63) == 0) {
			if (shunt_now_ns() - t0 >= budget)
				break;
			if ((w = worth(arg, cpu)) != SHUNT_WORTH_SPIN) {
				why = w == SHUNT_WORTH_YIELD ? SHUNT_SPIN_SAME_CPU
							     : SHUNT_SPIN_PEER_ASLEEP;
				break;
			}
		}
	}
	uint64_t spun = shunt_now_ns() - t0;
	shunt_spin_learn(&st, cap, spun, ok, ok ? SHUNT_SPIN_ON : why);
	if (!ok) {
		run_ns = 0; /* it sleeps or yields now */
		return why == SHUNT_SPIN_SAME_CPU && handoff(NULL, why, 0, 0) && ready(arg);
	}
	if (many && shunt_spin_run(&run_ns, spun))
		sched_yield();
	return 1;
}

/* The socket's SO_RCVTIMEO / SO_SNDTIMEO, as a deadline (0 = none). */
static uint64_t deadline_of(struct shunt_conn *c, int opt)
{
	struct timeval tv;
	socklen_t l = sizeof tv;
	if (REAL(getsockopt)(c->fd, SOL_SOCKET, opt, &tv, &l) < 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return 0;
	return shunt_now_ms() + (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000 + 1;
}

struct conn_spin {
	struct shunt_conn *c;
	short ev;
};

/* Ready, or demoted: a poll() that hands the connection to the kernel
 * path answers 0 ("ask the kernel"), and the caller must then go to the
 * socket rather than sleep on wake fds nobody will signal again.  (A close
 * in another thread is not a reason to stop: as with the kernel's socket,
 * a blocked read goes on waiting for data or EOF.) */
static int conn_ready(void *p)
{
	struct conn_spin *a = p;
	return a->c->ops->wait->poll(a->c, a->ev) != 0 || __atomic_load_n(&a->c->left, __ATOMIC_ACQUIRE);
}

/* Spin while spinning pays (core/shunt_spin.h): 1 when c is ready. */
static int spin(struct shunt_conn *c, struct conn_spin *a, const struct shunt_presence *peer,
		struct shunt_presence *mine, int cpu, int oneway)
{
	uint64_t cap = (uint64_t)shunt_config()->spin_us * 1000;
	uint64_t budget = mine ? shunt_spin_budget(&c->spin, cap) : cap;
	/* Not an exchange: a locked instruction here would wait for the
	 * stores of the call that came before (the data just sent) to reach
	 * the peer. */
	int woke = __atomic_load_n(&c->woke, __ATOMIC_RELAXED);
	if (woke)
		__atomic_store_n(&c->woke, 0, __ATOMIC_RELAXED);
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	enum shunt_spin_verdict why =
		budget ? shunt_spin_check(peer, cpu, woke, 0, budget, &beat) : SHUNT_SPIN_BUDGET;
	uint64_t t0 = 0; /* the spin's start: one clock read for the sample too */
	int young = c->waits < SHUNT_SPIN_YOUNG_WAITS;
	if (young) {
		/* The peer's setup (core/shunt_spin.h): hand it our CPU
		 * rather than sleep, whatever the crowd. */
		oneway = 1;
		c->waits++;
	}
	if (why == SHUNT_SPIN_ON && peer) {
		/* Others want the CPUs: sleep until the answer, as the
		 * kernel's sockets do (shunt_spin_crowd). */
		unsigned ncpus;
		t0 = shunt_now_ns();
		int r = runnable_sample(&ncpus, t0);
		if (shunt_spin_crowd(young,
				     __atomic_load_n(&peer->where, __ATOMIC_RELAXED) != SHUNT_AT_SLEEP,
				     r, ncpus))
			why = SHUNT_SPIN_CROWDED;
	}
	if (why == SHUNT_SPIN_ON && peer && __atomic_load_n(&peer->cpu, __ATOMIC_RELAXED) < 0) {
		/* The peer has not said where it runs (a server that has not
		 * accepted yet): it may be queued on our CPU, waiting for the
		 * very slice a spin would burn.  Let it run first. */
		handoff(c, why, 1, 0);
		if (conn_ready(a))
			return 1;
		t0 = 0; /* the spin starts after the yield, not before it */
	}
	if (why != SHUNT_SPIN_ON) {
		/* Not worth a spin (the peer shares our CPU, or sleeps): hand
		 * off at once.  The budget stays: this was the placement. */
		if (mine && budget)
			shunt_spin_learn(&c->spin, cap, 0, 0, why);
		return handoff(c, why, 0, oneway) && conn_ready(a);
	}
	/* "Spinning" is said only once the spin lasts (its first beat): a
	 * wait answered within a few hundred nanoseconds writes nothing the
	 * peer reads, and to the peer it looks as what it is, an end that
	 * runs (core/shunt_spin.h). */
	if (mine)
		shunt_presence_note(mine, SHUNT_AT_APP, cpu);
	if (!t0)
		t0 = shunt_now_ns();
	int ready = 0;
	unsigned i;
	for (i = 1;; i++) {
		if (conn_ready(a)) {
			ready = 1;
			break;
		}
		shunt_cpu_relax();
		if ((i & 63) == 0) {
			if (mine) {
				__atomic_store_n(&mine->beat, mine->beat + 1, __ATOMIC_RELAXED);
				if (i == 64)
					__atomic_store_n(&mine->where, SHUNT_AT_SPIN,
							 __ATOMIC_RELEASE);
			}
			why = shunt_spin_check(peer, cpu, woke, shunt_now_ns() - t0, budget, &beat);
			if (why != SHUNT_SPIN_ON)
				break;
		}
	}
	/* An answer before the first look at the clock teaches "sooner than
	 * a beat", as a spin of 0 ns does (the floor); not reading the clock
	 * keeps a vDSO call off the path from the data to the application. */
	if (mine)
		shunt_spin_learn(&c->spin, cap, ready && i < 64 ? 0 : shunt_now_ns() - t0, ready,
				 why);
	return ready || (handoff(c, why, 0, oneway) && conn_ready(a));
}

int shunt_conn_wait(struct shunt_conn *c, short ev, int opt, uint64_t *deadline)
{
	const struct shunt_conn_ops *ops = c->ops;
	struct conn_spin a = {c, ev};
	struct shunt_presence *mine = NULL;
	const struct shunt_presence *peer = ops->wait->presence ? ops->wait->presence(c, &mine) : NULL;
	int cpu = mine ? sched_getcpu() : -1;
	/* Has anything gone the other way since this end last waited in this
	 * direction?  (Plain reads: a thread sharing the end may race, and a
	 * wrong guess costs a yield or a sleep, never a byte.) */
	int in = (ev & POLLOUT) == 0;
	int oneway = shunt_spin_oneway(&c->wait_mark[!in], in ? c->bytes_out : c->bytes_in);
	/* Not asked again after a spin that saw it ready: for a transport
	 * whose readiness test calls into a provider, that is a system call
	 * between the data and the application. */
	if (spin(c, &a, peer, mine, cpu, oneway)) {
		if (mine)
			shunt_presence_note(mine, SHUNT_AT_APP, cpu);
		SHUNT_STAT_ADD(c, spin_hits, 1);
		return 0;
	}
	SHUNT_STAT_ADD(c, sleeps, 1);
	c->gave_cpu++;
	/* The socket's timeout, asked only now: a system call the spinning
	 * path must not pay.  (UINT64_MAX: asked, none set.) */
	if (!*deadline) {
		*deadline = c->timeo ? deadline_of(c, opt) : 0;
		if (!*deadline)
			*deadline = UINT64_MAX;
	}
	uint64_t dl = *deadline == UINT64_MAX ? 0 : *deadline;
	if (mine)
		shunt_presence_set(mine, SHUNT_AT_SLEEP, cpu);
	int recheck = SHUNT_RECHECK_FIRST_MS, rc;
	unsigned mark = shunt_sig_mark();
	for (;;) {
		int timeout = -1;
		if (dl) {
			uint64_t now = shunt_now_ms();
			if (now >= dl) {
				errno = EAGAIN;
				rc = -1;
				break;
			}
			timeout = (int)(dl - now);
		}
		int r = SHUNT_SLEEP_ARM, err;
		if (ops->wait->sleep) {
			r = ops->wait->sleep(c, ev, timeout < 0 || timeout > recheck ? recheck : timeout);
			err = errno;
			if (r == SHUNT_SLEEP_AGAIN) {
				if (recheck < SHUNT_RECHECK_MAX_MS)
					recheck *= 2;
				continue;
			}
		}
		if (r == SHUNT_SLEEP_ARM) {
			struct pollfd p[SHUNT_ARM_MAX];
			int n = ops->wait->arm(c, ev, p, &timeout);
			if (conn_ready(&a)) {
				ops->wait->disarm(c, ev, p, 0);
				rc = 0;
				break;
			}
			r = REAL(poll)(p, (nfds_t)n, timeout);
			err = errno;
			ops->wait->disarm(c, ev, p, r > 0 ? n : 0);
			if (r > 0)
				r = 0;
			else if (r == 0 && (!dl || shunt_now_ms() < dl))
				r = 0; /* the transport's own slice ran out */
			else if (r == 0)
				continue; /* the deadline: said at the top */
		}
		if (r < 0 && err == EINTR) {
			/* As the kernel's socket calls: restarted after a
			 * handler with SA_RESTART, EINTR otherwise, and never
			 * restarted with a timeout set, whatever the handler.
			 * Which handlers ran is known when the application
			 * installed them through libc (core/shunt_signal.h). */
			int again = shunt_sig_restart_since(mark);
			if (again < 0)
				again = shunt_sig_all_restart();
			if (!dl && again) {
				mark = shunt_sig_mark();
				continue;
			}
			errno = EINTR;
			rc = -1;
			break;
		}
		if (r < 0) {
			errno = err;
			rc = -1;
			break;
		}
		/* Woken, or the time ran out with something to look at. */
		if (dl && shunt_now_ms() >= dl && !conn_ready(&a)) {
			errno = EAGAIN;
			rc = -1;
			break;
		}
		rc = 0;
		break;
	}
	/* Where the scheduler woke us, which need not be where we slept: the
	 * peer's spin decisions read it (one vDSO call per sleep). */
	if (mine)
		shunt_presence_set(mine, SHUNT_AT_APP, sched_getcpu());
	return rc;
}

int shunt_conn_block(struct shunt_conn *c, short ev, int flags, size_t done, uint64_t *deadline,
		     ssize_t *ret)
{
	int stop = (flags & MSG_DONTWAIT) || __atomic_load_n(&c->nonblock, __ATOMIC_RELAXED);
	if (stop && !done)
		errno = EAGAIN;
	if (!stop && shunt_conn_wait(c, ev, ev == POLLOUT ? SO_SNDTIMEO : SO_RCVTIMEO,
				     deadline) == 0)
		return 0;
	*ret = done ? (ssize_t)done : -1;
	return 1;
}
