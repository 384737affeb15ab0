/* libfabric's start-up, on a thread of shunt's own.
 *
 * Loading libfabric runs its dependencies' constructors (Debian's pulls in
 * libinfinipath, which calibrates a clock with ~900 nanosleeps) and its
 * first fi_getinfo initialises every built-in provider: 100-300 ms here.
 * A process's first connection to another host does not wait for that: it
 * starts it here and goes by TCP (provider-loading), unless
 * fabric_load_wait_ms lets it wait; later connections find it done.  A
 * listener waits for it in listen() (fab_on_listen), as before.
 *
 * Three moments need care while the thread runs:
 *
 *   fork    a child must not inherit a start-up half done (libfabric's and
 *           the loader's locks held by a thread it does not have): the
 *           prepare handler waits for the thread to finish (bounded; a
 *           child forked past the bound never uses the fabric).
 *   exit    libfabric's own destructor would tear its providers down under
 *           the thread: an atexit handler, which runs before the
 *           destructors, waits for it (bounded).  A process that exits
 *           while libfabric starts so pays what is left of the start.
 *   exec    needs nothing: the fds libfabric makes are borrowed and
 *           close-on-exec as they are made (preload/shunt_sock.c), and
 *           the thread goes with the old image.
 *
 * The thread holds the guard: libfabric's sockets, socketpairs and epoll
 * fds are marked as libfabric's (core/shunt_ownfd.h) like those it makes
 * in an application's call. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fab_internal.h"
#include "core/shunt_forklock.h"
#include "core/shunt_log.h"

/* How long fork and exit wait for a start-up at most: far beyond one that
 * works (a few hundred ms), short enough not to hang a process whose
 * provider hangs. */
#define FAB_START_MAX_WAIT_MS 10000u

enum { ST_IDLE, ST_RUNNING, ST_READY, ST_FAILED };

static int state = ST_IDLE; /* atomic; changes under mu (for the waiters) */
static char prov_name[32];
/* What the start-up does on its thread: open the process's domain
 * (fab_prov.c, above this file).  1 when it is up. */
static int (*start_up)(const char *prov);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Taken across fork() by before_fork() below, which also waits there for a
 * start-up in progress. */
SHUNT_FORK_OWN(mu);
static pthread_cond_t cv;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_cv(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &a);
	pthread_condattr_destroy(&a);
}

/* Wait (mu held) while the thread runs, at most ms (FAB_WAIT_FOREVER: no
 * bound). */
static void wait_locked(unsigned ms)
{
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (long)(ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_RUNNING) {
		int rc = ms == FAB_WAIT_FOREVER ? pthread_cond_wait(&cv, &mu)
						: pthread_cond_timedwait(&cv, &mu, &end);
		if (rc == ETIMEDOUT)
			break;
	}
}

/* Without mu (a signal handler may have interrupted its holder on this
 * very thread): look every millisecond, at most ms. */
static void poll_while_running(unsigned ms)
{
	struct timespec one = {0, 1000000};
	for (unsigned i = 0; i < ms && __atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_RUNNING; i++)
		nanosleep(&one, NULL);
}

static int fork_locked;

static void before_fork(void)
{
	fork_locked = pthread_mutex_trylock(&mu) == 0;
	if (fork_locked)
		wait_locked(FAB_START_MAX_WAIT_MS);
	else
		poll_while_running(FAB_START_MAX_WAIT_MS);
}

static void after_fork_parent(void)
{
	if (fork_locked)
		pthread_mutex_unlock(&mu);
}

static void after_fork_child(void)
{
	/* The child has one thread: whoever held mu in the parent is not
	 * here.  A start-up that did not finish in time never will. */
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&mu, &m, sizeof m);
	init_cv();
	if (__atomic_load_n(&state, __ATOMIC_RELAXED) == ST_RUNNING)
		__atomic_store_n(&state, ST_FAILED, __ATOMIC_RELEASE);
}

static void at_exit(void)
{
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != ST_RUNNING)
		return;
	if (pthread_mutex_trylock(&mu) != 0) {
		poll_while_running(FAB_START_MAX_WAIT_MS);
		return;
	}
	wait_locked(FAB_START_MAX_WAIT_MS);
	pthread_mutex_unlock(&mu);
}

static void init_once(void)
{
	init_cv();
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	atexit(at_exit);
}

int fab_thread_start(void *(*fn)(void *))
{
	sigset_t all, old;
	sigfillset(&all);
	/* The application's signals are not ours to take. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &a, fn, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0 ? 0 : -1;
}

static void *start_thread(void *arg)
{
	(void)arg;
	SHUNT_GUARD_ENTER(); /* libfabric's fds are libfabric's */
	uint64_t t0 = shunt_now_ms();
	int ok = start_up(prov_name);
	pthread_mutex_lock(&mu);
	__atomic_store_n(&state, ok ? ST_READY : ST_FAILED, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	SHUNT_DEBUG("fabric: provider %s %s in %llu ms", prov_name, ok ? "started" : "failed to start",
		    (unsigned long long)(shunt_now_ms() - t0));
	SHUNT_GUARD_LEAVE();
	return NULL;
}

enum shunt_reason fab_start_on_thread(const char *prov, unsigned wait_ms,
				      int (*up)(const char *prov))
{
	int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	if (st == ST_READY)
		return SHUNT_R_NONE;
	if (st == ST_FAILED)
		return SHUNT_R_PROVIDER_ERROR;
	pthread_once(&once, init_once);
	pthread_mutex_lock(&mu);
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_IDLE) {
		snprintf(prov_name, sizeof prov_name, "%s", prov);
		start_up = up;
		__atomic_store_n(&state, ST_RUNNING, __ATOMIC_RELEASE);
		if (fab_thread_start(start_thread) < 0) {
			SHUNT_INFO("fabric: no thread to start libfabric on: remote connections take TCP");
			__atomic_store_n(&state, ST_FAILED, __ATOMIC_RELEASE);
		} else {
			SHUNT_DEBUG("fabric: starting provider %s in the background", prov);
		}
	}
	if (wait_ms)
		wait_locked(wait_ms);
	st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&mu);
	return st == ST_READY	 ? SHUNT_R_NONE
	       : st == ST_FAILED ? SHUNT_R_PROVIDER_ERROR
				 : SHUNT_R_PROVIDER_LOADING;
}
