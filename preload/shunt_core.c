#include "shunt_core.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <shunt/version.h>

#include "shunt_log.h"
#include "shunt_real.h"

__thread int shunt_guard __attribute__((tls_model("initial-exec")));
unsigned shunt_naccel;

static struct shunt_config cfg;
static int cfg_ready;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	char err[SHUNT_ERR_MAX];
	SHUNT_GUARD_ENTER();
	int rc = shunt_config_load(&cfg, NULL, err, sizeof err);
	if (rc < 0) {
		/* Property 6: one clear message, then stay out of the way. */
		shunt_config_defaults(&cfg);
		cfg.enabled = 0;
	}
	__atomic_store_n(&cfg_ready, 1, __ATOMIC_RELEASE);
	if (rc < 0) {
		shunt_log(SHUNT_LOG_ERROR,
			  "%s; shunt disabled, connections use the kernel path", err);
	} else if (cfg.log_level >= SHUNT_LOG_INFO) {
		char desc[1024];
		shunt_config_describe(&cfg, desc, sizeof desc);
		shunt_log(SHUNT_LOG_INFO, "shunt %s %s%s%s", SHUNT_VERSION,
			  cfg.enabled ? "enabled" : "disabled", desc[0] ? ": " : "",
			  desc);
	}
	SHUNT_GUARD_LEAVE();
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
	return program_invocation_short_name ? program_invocation_short_name : "?";
}

/* Resolving symbols is in-memory work, no I/O; the configuration is read
 * lazily by the first call that needs a decision. */
__attribute__((constructor)) static void shunt_ctor(void)
{
	shunt_real_init();
}
