/* The shared wait (shunt_wait.h): the spin budget, and a blocking call's
 * wait on one accelerated connection. */
#include "shunt_wait.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>

#include "shunt_clock.h"
#include "shunt_conn.h"
#include "shunt_real.h"

/* A peer that answers does so within a few microseconds; past that, with
 * more runnable threads than cores, it may be queued behind the spinner. */
#define SHUNT_SPIN_YIELD_NS 4000

int shunt_spin_accel(int (*ready)(void *), void *arg)
{
	/* The budget is per blocking call: spin once, then sleep.  Two
	 * cores: yield now and then so the peer we wait for can run. */
	uint64_t budget = (uint64_t)shunt_config()->spin_us * 1000;
	if (!budget)
		return 0;
	uint64_t t0 = shunt_now_ns();
	for (unsigned i = 1; !ready(arg); i++) {
		shunt_cpu_relax();
		if ((i & 63) == 0) {
			uint64_t spent = shunt_now_ns() - t0;
			if (spent >= budget)
				return 0;
			/* A peer that answers does so within a few microseconds;
			 * past that, with more runnable threads than cores, it
			 * may be queued behind us: let it run. */
			if (spent > SHUNT_SPIN_YIELD_NS)
				sched_yield();
		}
	}
	return 1;
}


/* A signal interrupted a wait.  A socket call is restarted after a handler
 * with SA_RESTART and fails with EINTR otherwise; which signal came is not
 * known here, so restart only if every caught signal has SA_RESTART. */
static int restartable(void)
{
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		if (s == SIGKILL || s == SIGSTOP || sigaction(s, NULL, &sa) < 0)
			continue;
		if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN &&
		    !(sa.sa_flags & SA_RESTART))
			return 0;
	}
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
	return a->c->ops->poll(a->c, a->ev) != 0 || __atomic_load_n(&a->c->left, __ATOMIC_ACQUIRE);
}

int shunt_conn_wait(struct shunt_conn *c, short ev, int opt, uint64_t *deadline)
{
	const struct shunt_conn_ops *ops = c->ops;
	struct conn_spin a = {c, ev};
	/* Not asked again after a spin that saw it ready: for a transport
	 * whose readiness test calls into a provider, that is a system call
	 * between the data and the application. */
	if (shunt_spin_accel(conn_ready, &a) || conn_ready(&a)) {
		SHUNT_STAT_ADD(c, spin_hits, 1);
		return 0;
	}
	SHUNT_STAT_ADD(c, sleeps, 1);
	/* The socket's timeout, asked only now: a system call the spinning
	 * path must not pay.  (UINT64_MAX: asked, none set.) */
	if (!*deadline) {
		*deadline = deadline_of(c, opt);
		if (!*deadline)
			*deadline = UINT64_MAX;
	}
	uint64_t dl = *deadline == UINT64_MAX ? 0 : *deadline;
	for (;;) {
		struct pollfd p[SHUNT_ARM_MAX];
		int timeout = -1;
		if (dl) {
			uint64_t now = shunt_now_ms();
			if (now >= dl) {
				errno = EAGAIN;
				return -1;
			}
			timeout = (int)(dl - now);
		}
		int n = ops->arm(c, ev, p, &timeout);
		if (conn_ready(&a)) {
			ops->disarm(c, ev, p, 0);
			return 0;
		}
		int r = REAL(poll)(p, (nfds_t)n, timeout);
		int err = errno;
		ops->disarm(c, ev, p, r > 0 ? n : 0);
		if (r > 0)
			return 0;
		if (r < 0 && err == EINTR) {
			if (restartable())
				continue;
			errno = EINTR;
			return -1;
		}
		if (r < 0) {
			errno = err;
			return -1;
		}
		/* r == 0: the transport's own slice or the caller's deadline
		 * ran out. */
		if (dl && shunt_now_ms() >= dl) {
			errno = EAGAIN;
			return -1;
		}
		return 0;
	}
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
