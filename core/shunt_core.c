#include "shunt_core.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <shunt/version.h>

#include "shunt_conn.h"
#include "shunt_listen.h"
#include "shunt_log.h"
#include "shunt_ownfd.h"
#include "shunt_real.h"
#include "shunt_spill.h"
#include "shunt_stats.h"
#include "shunt_transport.h"

__thread int shunt_guard __attribute__((tls_model("initial-exec")));
unsigned shunt_naccel;

static struct shunt_config cfg;

/* Copied in the constructor, before the program can change them: nginx
 * rewrites argv[0] (the process title) and some programs clear their
 * environment before their first socket call. */
static char prog[64] = "?";
static char envbuf[16384];
static const char *envv[64];
static int envn;

static void snapshot(void)
{
	const char *name = program_invocation_short_name;
	if (name && *name)
		snprintf(prog, sizeof prog, "%s", name);
	/* As secure_getenv: a setuid program's environment is not trusted. */
	if (getauxval(AT_SECURE))
		return;
	size_t used = 0;
	for (char **e = environ; e && *e && envn < (int)(sizeof envv / sizeof *envv); e++) {
		if (strncmp(*e, "SHUNT_", 6))
			continue;
		size_t len = strlen(*e) + 1;
		if (used + len > sizeof envbuf)
			break;
		memcpy(envbuf + used, *e, len);
		envv[envn++] = envbuf + used;
		used += len;
	}
}

static const char *env_at_start(const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < envn; i++)
		if (!strncmp(envv[i], name, n) && envv[i][n] == '=')
			return envv[i] + n + 1;
	return NULL;
}
static int cfg_ready;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	char err[SHUNT_ERR_MAX];
	SHUNT_GUARD_ENTER();
	int rc = shunt_config_load(&cfg, env_at_start, err, sizeof err);
	if (rc < 0) {
		/* Property 6: one clear message, then stay out of the way. */
		shunt_config_defaults(&cfg);
		cfg.enabled = 0;
	}
	__atomic_store_n(&cfg_ready, 1, __ATOMIC_RELEASE);
	if (rc < 0)
		shunt_log(SHUNT_LOG_ERROR,
			  "%s; shunt disabled, connections use the kernel path", err);
	SHUNT_GUARD_LEAVE();
}

/* The startup line waits for the first decision: a shell script run under
 * shunt starts dozens of processes that never touch a TCP socket, and
 * each would otherwise print it.  A fork child has seen its parent's. */
static int startup_said;

void shunt_first_decision(void)
{
	if (likely(__atomic_load_n(&startup_said, __ATOMIC_RELAXED)) ||
	    __atomic_exchange_n(&startup_said, 1, __ATOMIC_RELAXED))
		return;
	const struct shunt_config *c = shunt_config();
	if (c->log_level < SHUNT_LOG_INFO)
		return;
	char desc[1024];
	shunt_config_describe(c, desc, sizeof desc);
	shunt_log(SHUNT_LOG_INFO, "shunt %s %s%s%s", SHUNT_VERSION,
		  c->enabled ? "enabled" : "disabled", desc[0] ? ": " : "", desc);
}

const struct shunt_config *shunt_config(void)
{
	if (likely(__atomic_load_n(&cfg_ready, __ATOMIC_ACQUIRE)))
		return &cfg;
	/* Logging from inside load() asks for the configuration again: it
	 * gets the defaults-so-far, which is fine for a log level. */
	if (shunt_guard)
		return &cfg;
	int saved = errno;
	pthread_once(&cfg_once, load);
	errno = saved;
	return &cfg;
}

int shunt_active(void)
{
	return !shunt_guard;
}

const char *shunt_prog(void)
{
	return prog;
}

/* Resolving symbols and copying a few strings is in-memory work, no I/O;
 * the configuration file is read lazily by the first call that needs a
 * decision. */
pid_t shunt_self;

/* (uid_t)-1 + 1 = 0: not asked yet. */
static uid_t euid_plus1;

uid_t shunt_euid(void)
{
	uid_t u = __atomic_load_n(&euid_plus1, __ATOMIC_RELAXED);
	if (u)
		return u - 1;
	u = geteuid();
	__atomic_store_n(&euid_plus1, u + 1, __ATOMIC_RELAXED);
	return u;
}

void shunt_euid_forget(void)
{
	__atomic_store_n(&euid_plus1, 0, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void shunt_ctor(void)
{
	shunt_real_init();
	shunt_self = getpid();
	snapshot();
	const char *spill = env_at_start("SHUNT_SPILL");
	if (spill)
		shunt_spill_inherit(spill);
}

static void transports_fork(int phase)
{
	for (const struct shunt_transport_ops *const *t = shunt_transports; *t; t++)
		if ((*t)->fork)
			(*t)->fork(phase);
}

void shunt_before_fork(void)
{
	/* Both processes will hold every connection: transports keep what
	 * the other may still need (wake socket names), or leave first. */
	if (shunt_any_accel())
		shunt_conn_before_fork();
	transports_fork(SHUNT_FORK_PREPARE);
}

void shunt_after_fork_parent(void)
{
	if (shunt_any_accel())
		shunt_conn_after_fork_parent();
	transports_fork(SHUNT_FORK_PARENT);
}

void shunt_after_fork_child(void)
{
	__atomic_store_n(&shunt_self, getpid(), __ATOMIC_RELAXED);
	shunt_conn_after_fork_child();
	shunt_listen_after_fork_child();
	shunt_fd_borrowed_after_fork();
	transports_fork(SHUNT_FORK_CHILD);
}

/* exit() (not _exit, not a fatal signal, which skip it as they skip stdio
 * buffers): listeners leave the registry (no new offers to a process on its
 * way out), each transport says goodbye and removes its names, then the
 * summary line.  An exit() from inside
 * shunt's own code (a dependency's signal handler) leaves the transports
 * alone: their locks may be held by this very thread. */
__attribute__((destructor)) static void shunt_dtor(void)
{
	if (!__atomic_load_n(&shunt_guard, __ATOMIC_RELAXED)) {
		shunt_listen_at_exit();
		for (const struct shunt_transport_ops *const *t = shunt_transports; *t; t++)
			if ((*t)->at_exit)
				(*t)->at_exit();
	}
	shunt_stats_summary();
}
