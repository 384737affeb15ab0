/* The environment of `shunt run` (see shunt_run_env.h). */
#include "shunt_run_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shunt_tool.h"

/* Check a value the way the library will read it (same accepted spellings,
 * same message); the canonical spelling is then in scratch. */
static int valid_value(struct shunt_config *scratch, const char *key, const char *value,
		       const char *opt, const char *cmd)
{
	char err[SHUNT_ERR_MAX];
	shunt_config_defaults(scratch);
	if (shunt_config_set(scratch, key, value, opt, err, sizeof(err)) == 0)
		return 1;
	shunt_usage_error(cmd, "%s", err);
	return 0;
}

/* path made absolute against the current directory, without requiring it
 * to exist (log files are created later, and may contain %p). */
static int absolute(const char *path, char *out, size_t len)
{
	if (path[0] == '/')
		return snprintf(out, len, "%s", path) < (int)len ? 0 : -1;
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		return -1;
	return snprintf(out, len, "%s/%s", cwd, path) < (int)len ? 0 : -1;
}

int run_env_check(struct run_env *e, const char *cmd)
{
	static struct shunt_config scratch;
	if (e->log) {
		if (!valid_value(&scratch, "log", e->log, "--log", cmd))
			return SHUNT_EXIT_USAGE;
		e->log = shunt_log_level_name(scratch.log_level);
	}
	if (e->transport) {
		if (!valid_value(&scratch, "default_transport", e->transport, "--transport", cmd))
			return SHUNT_EXIT_USAGE;
		e->transport = shunt_transport_name(scratch.default_transport);
	}
	if (e->log_file) {
		if (!e->log_file[0])
			return shunt_usage_error(cmd, "--log-file: empty path");
		if (absolute(e->log_file, e->log_file_abs, sizeof(e->log_file_abs)) != 0) {
			fprintf(stderr, "shunt %s: --log-file %s: path too long or no current "
				"directory\n", cmd, e->log_file);
			return SHUNT_EXIT_USAGE;
		}
	}
	if (e->config) {
		if (!e->config[0])
			return shunt_usage_error(cmd, "--config: empty path");
		if (!realpath(e->config, e->config_abs) || access(e->config_abs, R_OK) != 0) {
			fprintf(stderr, "shunt %s: --config %s: %s\n", cmd, e->config,
				strerror(errno));
			return SHUNT_EXIT_USAGE;
		}
	}
	return 0;
}

/* SHUNT_OPTIONS as CMD gets it: the inherited value, then e->options. */
static char *joined_options(const struct run_env *e)
{
	const char *old = getenv("SHUNT_OPTIONS");
	if (!e->options || !e->options[0])
		return old ? strdup(old) : NULL;
	if (!old || !old[0])
		return strdup(e->options);
	size_t n = strlen(old) + strlen(e->options) + 2;
	char *j = malloc(n);
	if (j)
		snprintf(j, n, "%s,%s", old, e->options);
	return j;
}

/* The environment a command of e sees, for shunt_config_load. */
static const struct run_env *overlay;
static char *overlay_options;

static const char *overlay_getenv(const char *name)
{
	const struct run_env *e = overlay;
	if (!strcmp(name, "SHUNT_CONFIG") && e->config)
		return e->config_abs;
	if (!strcmp(name, "SHUNT_LOG") && e->log)
		return e->log;
	if (!strcmp(name, "SHUNT_LOG_FILE") && e->log_file)
		return e->log_file_abs;
	if (!strcmp(name, "SHUNT_DEFAULT_TRANSPORT") && e->transport)
		return e->transport;
	if (!strcmp(name, "SHUNT_OPTIONS"))
		return overlay_options;
	return getenv(name);
}

int run_env_load(const struct run_env *e, struct shunt_config *c, char *err, size_t errlen)
{
	overlay = e;
	overlay_options = joined_options(e);
	if (e->options && e->options[0] && !overlay_options) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = shunt_config_load(c, overlay_getenv, err, errlen);
	free(overlay_options);
	overlay_options = NULL;
	overlay = NULL;
	return rc;
}

static int set_env(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0) {
		fprintf(stderr, "shunt run: setenv %s: %s\n", name, strerror(errno));
		return -1;
	}
	return 0;
}

int run_env_apply(const struct run_env *e)
{
	if (e->config && set_env("SHUNT_CONFIG", e->config_abs))
		return -1;
	if (e->log && set_env("SHUNT_LOG", e->log))
		return -1;
	if (e->log_file && set_env("SHUNT_LOG_FILE", e->log_file_abs))
		return -1;
	if (e->transport && set_env("SHUNT_DEFAULT_TRANSPORT", e->transport))
		return -1;
	if (e->options && e->options[0]) {
		char *j = joined_options(e);
		int rc = j ? set_env("SHUNT_OPTIONS", j) : -1;
		free(j);
		if (rc)
			return -1;
	}
	return 0;
}
