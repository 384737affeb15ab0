/* The environment `shunt run` gives its command, and the check that the
 * library will accept it.  shunt run applies it; shunt ab checks the shunt
 * side's settings with the same code before it runs anything, so a typo
 * is an error there too instead of a silently plain "shunt" side. */
#ifndef SHUNT_RUN_ENV_H
#define SHUNT_RUN_ENV_H

#include <limits.h>

#include "config/shunt_config.h"

struct run_env {
	const char *config;      /* --config FILE (SHUNT_CONFIG) */
	const char *log;         /* --log LEVEL (SHUNT_LOG) */
	const char *log_file;    /* --log-file PATH (SHUNT_LOG_FILE) */
	const char *transport;   /* --transport T (SHUNT_DEFAULT_TRANSPORT) */
	const char *options;     /* --options 'k=v,...' (appended to SHUNT_OPTIONS) */
	/* canonical forms, filled by run_env_check */
	char config_abs[PATH_MAX], log_file_abs[PATH_MAX];
};

/* Check each option as the library reads it (same parser, same message)
 * and make paths absolute; cmd ("run", "ab") names the subcommand in
 * messages.  0, or SHUNT_EXIT_USAGE with a message printed. */
int run_env_check(struct run_env *e, const char *cmd);

/* The configuration a process started with e (over the current
 * environment) would load: 0, or -1 with the library's message in err. */
int run_env_load(const struct run_env *e, struct shunt_config *c, char *err, size_t errlen);

/* Set the variables of e in this process's environment.  0, or -1 with a
 * message printed. */
int run_env_apply(const struct run_env *e);

#endif
