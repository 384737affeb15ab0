/* Signal handlers: sigaction and the calls libc builds on it.
 *
 * A blocking call on an accelerated connection waits in shunt (a futex, a
 * poll), where the kernel's restart rule cannot apply: it knows that a
 * handler interrupted the wait, not which one.  The application's handlers
 * are therefore installed behind a trampoline that tells core which ran
 * (core/shunt_signal.h) before calling them, and the call is restarted or
 * fails with EINTR as the kernel's socket call would have for that
 * handler's SA_RESTART.  The kernel keeps the application's flags and mask;
 * querying an action gives back exactly what the application set. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "core/shunt_core.h"
#include "core/shunt_real.h"
#include "core/shunt_signal.h"

/* What the application set for each signal whose kernel action is the
 * trampoline.  fn last written, first read: the trampoline and a query
 * never pair a handler with another's flags for long (only while two
 * threads race to set one signal, as with the kernel). */
static struct {
	void *fn;
	int flags;
} acts[NSIG];

/* SA_RESTART cleared by siginterrupt(sig, 1), for signal()'s BSD flags. */
static sigset_t interrupting;

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	void *fn = __atomic_load_n(&acts[sig].fn, __ATOMIC_ACQUIRE);
	int flags = __atomic_load_n(&acts[sig].flags, __ATOMIC_RELAXED);
	shunt_sig_ran(flags & SA_RESTART);
	if (!fn)
		return;
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
	else
		((void (*)(int))fn)(sig);
}

static int is_function(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

SHUNT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
		return REAL(sigaction)(sig, act, old);
	void *pfn = __atomic_load_n(&acts[sig].fn, __ATOMIC_ACQUIRE);
	int pflags = __atomic_load_n(&acts[sig].flags, __ATOMIC_RELAXED);
	struct sigaction k, w;
	const struct sigaction *give = act;
	if (act && is_function(act)) {
		w = *act;
		w.sa_sigaction = trampoline;
		w.sa_flags |= SA_SIGINFO;
		__atomic_store_n(&acts[sig].flags, act->sa_flags, __ATOMIC_RELAXED);
		__atomic_store_n(&acts[sig].fn,
				 act->sa_flags & SA_SIGINFO ? (void *)act->sa_sigaction
							    : (void *)act->sa_handler,
				 __ATOMIC_RELEASE);
		give = &w;
	}
	int r = REAL(sigaction)(sig, give, &k);
	int e = errno;
	if (r < 0 && give == &w) {
		__atomic_store_n(&acts[sig].flags, pflags, __ATOMIC_RELAXED);
		__atomic_store_n(&acts[sig].fn, pfn, __ATOMIC_RELEASE);
	}
	if (r == 0 && old) {
		*old = k;
		if (k.sa_sigaction == trampoline) {
			/* Ours: the application's own handler and flags. */
			old->sa_flags = pflags;
			if (pflags & SA_SIGINFO)
				old->sa_sigaction = (void (*)(int, siginfo_t *, void *))pfn;
			else
				old->sa_handler = (void (*)(int))pfn;
		}
	}
	errno = e;
	return r;
}

/* signal() and its relatives, as glibc defines them, on the sigaction
 * above (libc's own call sigaction inside libc, past the trampoline). */
static __sighandler_t set_handler(int sig, __sighandler_t fn, int flags, int mask_self)
{
	struct sigaction a, o;
	memset(&a, 0, sizeof a);
	a.sa_handler = fn;
	sigemptyset(&a.sa_mask);
	if (mask_self && sig > 0 && sig < NSIG)
		sigaddset(&a.sa_mask, sig);
	a.sa_flags = flags;
	if (sigaction(sig, &a, &o) < 0)
		return SIG_ERR;
	return o.sa_handler;
}

static int bsd_flags(int sig)
{
	return sig > 0 && sig < NSIG && sigismember(&interrupting, sig) == 1 ? 0 : SA_RESTART;
}

SHUNT_EXPORT __sighandler_t signal(int sig, __sighandler_t fn)
{
	if (sig <= 0 || sig >= NSIG || fn == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	return set_handler(sig, fn, bsd_flags(sig), 1);
}

SHUNT_EXPORT __sighandler_t bsd_signal(int sig, __sighandler_t fn)
{
	return signal(sig, fn);
}

SHUNT_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t fn)
{
	if (sig <= 0 || sig >= NSIG || fn == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	return set_handler(sig, fn, SA_RESETHAND | SA_NODEFER, 0);
}

SHUNT_EXPORT int siginterrupt(int sig, int on)
{
	struct sigaction a;
	if (sig <= 0 || sig >= NSIG || sigaction(sig, NULL, &a) < 0) {
		errno = EINVAL;
		return -1;
	}
	if (on) {
		sigaddset(&interrupting, sig);
		a.sa_flags &= ~SA_RESTART;
	} else {
		sigdelset(&interrupting, sig);
		a.sa_flags |= SA_RESTART;
	}
	return sigaction(sig, &a, NULL);
}
