/* Per-thread counts of the handler runs the trampoline reports
 * (shunt_signal.h).  Two counters, each written only by its thread (in a
 * handler that interrupts the thread's own code, never concurrently). */
#include "shunt_signal.h"

#include <signal.h>

#include "shunt_real.h"

static __thread unsigned ran __attribute__((tls_model("initial-exec")));
/* The value of ran after the last handler without SA_RESTART. */
static __thread unsigned ran_eintr __attribute__((tls_model("initial-exec")));

static __thread void (*guard_fn)(void *) __attribute__((tls_model("initial-exec")));
static __thread void *guard_arg __attribute__((tls_model("initial-exec")));

void shunt_sig_guard(void (*fn)(void *), void *arg)
{
	guard_arg = arg;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	guard_fn = fn;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void shunt_sig_ran(int restart)
{
	void (*fn)(void *) = guard_fn;
	if (fn) {
		guard_fn = NULL;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		fn(guard_arg);
	}
	unsigned n = __atomic_load_n(&ran, __ATOMIC_RELAXED) + 1;
	if (!restart)
		__atomic_store_n(&ran_eintr, n, __ATOMIC_RELAXED);
	/* Last: a wait that sees the count moved sees the verdict too. */
	__atomic_store_n(&ran, n, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

unsigned shunt_sig_mark(void)
{
	return __atomic_load_n(&ran, __ATOMIC_RELAXED);
}

int shunt_sig_restart_since(unsigned mark)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	unsigned now = __atomic_load_n(&ran, __ATOMIC_RELAXED);
	if (now == mark)
		return -1;
	/* Wrapping counters: "after mark" as a distance. */
	return __atomic_load_n(&ran_eintr, __ATOMIC_RELAXED) - mark - 1u >= now - mark;
}

int shunt_sig_all_restart(void)
{
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		if (s == SIGKILL || s == SIGSTOP || REAL(sigaction)(s, NULL, &sa) < 0)
			continue;
		if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN &&
		    !(sa.sa_flags & SA_RESTART))
			return 0;
	}
	return 1;
}
