/* shunt run: execute a command with libshunt.so preloaded.
 *
 *   shunt run [--config FILE] [--log LEVEL] [--log-file PATH]
 *             [--transport auto|shm|fabric|kernel] [--options 'k=v,...']
 *             [--] CMD [ARGS...]
 *
 * Sets LD_PRELOAD (libshunt.so first, existing entries kept, no duplicate),
 * SHUNT_CONFIG, SHUNT_LOG, SHUNT_LOG_FILE, SHUNT_DEFAULT_TRANSPORT, appends to
 * SHUNT_OPTIONS, checks that the resulting configuration loads (if it does not:
 * one message, and CMD runs without the library), then execvp()s
 * CMD.  Exit status: CMD's; 2 on a usage error; 127 when
 * libshunt.so is not found or CMD cannot be executed.
 *
 * A CMD LD_PRELOAD cannot reach (statically linked, a Go program:
 * shunt_reach.h) still runs, on TCP, after one line on stderr saying so and
 * why (unless log = error).
 *
 * Where libshunt.so is looked for, in order:
 *   1. $SHUNT_LIBRARY, when set (and then nowhere else);
 *   2. <directory of this executable>/SHUNT_BIN_TO_LIBDIR/libshunt.so (the
 *      installed layout, e.g. /usr/bin/../lib/x86_64-linux-gnu/shunt);
 *   3. SHUNT_BUILD_LIB, when this executable is the one in the build tree. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/shunt_config.h"
#include "shunt_reach.h"
#include "shunt_run_env.h"
#include "shunt_tool.h"

#ifndef SHUNT_BIN_TO_LIBDIR
#define SHUNT_BIN_TO_LIBDIR "../lib"
#endif

#define LIBNAME "libshunt.so"

static void run_usage(FILE *f)
{
	fprintf(f,
		"usage: shunt run [--config FILE] [--log LEVEL] [--log-file PATH]\n"
		"                 [--transport auto|shm|fabric|kernel] [--options 'k=v,...']\n"
		"                 [--] CMD [ARGS...]\n"
		"  --config FILE     configuration file (SHUNT_CONFIG); must exist\n"
		"  --log LEVEL       error|warn|info|debug (SHUNT_LOG)\n"
		"  --log-file PATH   log destination, %%p = pid (SHUNT_LOG_FILE)\n"
		"  --transport T     transport when no rule matches (SHUNT_DEFAULT_TRANSPORT)\n"
		"  --options 'k=v,...'  appended to SHUNT_OPTIONS\n"
		"The '--' is needed only when CMD starts with '-'.\n"
		"libshunt.so is taken from $SHUNT_LIBRARY when set.\n");
}

#define usage_error(...) shunt_usage_error("run", __VA_ARGS__)

static int is_file(const char *p)
{
	return p && p[0] && access(p, R_OK) == 0;
}

/* Directory of the running executable, or "" when unknown. */
static void self_dir(char *out, size_t len)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	out[0] = '\0';
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (!slash)
		return;
	*slash = '\0';
	snprintf(out, len, "%s", buf[0] ? buf : "/");
}

/* Find libshunt.so into out[PATH_MAX]; on failure print where we looked and
 * return -1. */
static int find_library(char out[PATH_MAX])
{
	const char *env = getenv("SHUNT_LIBRARY");
	if (env && env[0]) {
		if (access(env, R_OK) == 0 && realpath(env, out))
			return 0;
		fprintf(stderr, "shunt run: SHUNT_LIBRARY=%s: %s\n", env,
			strerror(errno));
		return -1;
	}

	char dir[PATH_MAX], cand[2][PATH_MAX + 64];
	int ncand = 0;
	self_dir(dir, sizeof(dir));
	if (dir[0])
		snprintf(cand[ncand++], sizeof(cand[0]), "%s/%s/%s", dir,
			 SHUNT_BIN_TO_LIBDIR, LIBNAME);
#if defined(SHUNT_BUILD_LIB) && defined(SHUNT_BUILD_BINDIR)
	/* The build-tree library, only for the build-tree binary: an installed
	 * shunt must never pick up a stale build. */
	char real_dir[PATH_MAX], real_build[PATH_MAX];
	if (dir[0] && realpath(dir, real_dir) &&
	    realpath(SHUNT_BUILD_BINDIR, real_build) &&
	    !strcmp(real_dir, real_build))
		snprintf(cand[ncand++], sizeof(cand[0]), "%s", SHUNT_BUILD_LIB);
#endif
	for (int i = 0; i < ncand; i++)
		if (is_file(cand[i]) && realpath(cand[i], out))
			return 0;

	fprintf(stderr, "shunt run: %s not found; looked in:\n", LIBNAME);
	fprintf(stderr, "  $SHUNT_LIBRARY (not set)\n");
	for (int i = 0; i < ncand; i++)
		fprintf(stderr, "  %s\n", cand[i]);
	if (!ncand)
		fprintf(stderr, "  (cannot resolve /proc/self/exe)\n");
	fprintf(stderr, "set SHUNT_LIBRARY to the path of %s\n", LIBNAME);
	return -1;
}

/* LD_PRELOAD with lib first and every other entry (':' or blank separated)
 * kept once, in order. */
static char *build_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	size_t cap = strlen(lib) + (old ? strlen(old) : 0) + 2;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	snprintf(out, cap, "%s", lib);
	if (!old)
		return out;

	char *copy = strdup(old);
	if (!copy) {
		free(out);
		return NULL;
	}
	char *save = NULL;
	for (char *tok = strtok_r(copy, ": \t", &save); tok;
	     tok = strtok_r(NULL, ": \t", &save)) {
		char real[PATH_MAX];
		if (!strcmp(tok, lib) || (realpath(tok, real) && !strcmp(real, lib)))
			continue;
		/* skip entries already present (the list is small) */
		int dup = 0;
		size_t tl = strlen(tok);
		for (const char *p = out; (p = strstr(p, tok)); p += tl)
			if ((p == out || p[-1] == ':') && (p[tl] == ':' || !p[tl])) {
				dup = 1;
				break;
			}
		if (dup)
			continue;
		strcat(out, ":");
		strcat(out, tok);
	}
	free(copy);
	return out;
}

int shunt_cmd_run(int argc, char **argv)
{
	enum { O_CONFIG = 1, O_LOG, O_LOG_FILE, O_TRANSPORT, O_OPTIONS, O_HELP };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, O_CONFIG },
		{ "log", required_argument, NULL, O_LOG },
		{ "log-file", required_argument, NULL, O_LOG_FILE },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "options", required_argument, NULL, O_OPTIONS },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct run_env env = { 0 };

	opterr = 0;
	optind = 1;
	int o;
	/* '+': stop at the first non-option (CMD); ':': report missing args */
	while ((o = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (o) {
		case O_CONFIG: env.config = optarg; break;
		case O_LOG: env.log = optarg; break;
		case O_LOG_FILE: env.log_file = optarg; break;
		case O_TRANSPORT: env.transport = optarg; break;
		case O_OPTIONS: env.options = optarg; break;
		case 'h':
		case O_HELP:
			run_usage(stdout);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("no command given");
	char **cmd = argv + optind;

	/* validated, then passed on in canonical spelling */
	int rc = run_env_check(&env, "run");
	if (rc)
		return rc;

	char lib[PATH_MAX];
	if (find_library(lib) != 0)
		return 127;

	/* Load the configuration the library will see, so that a mistake is
	 * reported here, once, instead of by the library in every process of
	 * CMD.  As the library would, shunt then stays out of the way: CMD
	 * runs, on the kernel path (without the library). */
	static struct shunt_config conf;
	char err[SHUNT_ERR_MAX];
	int loaded = run_env_load(&env, &conf, err, sizeof(err));
	if (run_env_apply(&env) != 0)
		return 1;
	if (loaded != 0) {
		fprintf(stderr, "shunt: %s; shunt disabled, %s runs on the kernel path\n", err,
			cmd[0]);
		fflush(stdout);
		execvp(cmd[0], cmd);
		fprintf(stderr, "shunt: %s: %s\n", cmd[0], strerror(errno));
		return 127;
	}

	char *preload = build_preload(lib);
	if (!preload || setenv("LD_PRELOAD", preload, 1) != 0) {
		fprintf(stderr, "shunt run: LD_PRELOAD: %s\n", preload ? strerror(errno) : "out of memory");
		free(preload);
		return 1;
	}
	free(preload);

	/* Said before it runs, not found out from a benchmark: the program
	 * works, on TCP, and its peers under shunt never wait for it. */
	char path[PATH_MAX], why[PATH_MAX + 256];
	if (conf.log_level >= SHUNT_LOG_WARN && shunt_reach_find(cmd[0], path, sizeof path) == 0) {
		enum shunt_reach r = shunt_reach_file(path, why, sizeof why);
		if (r == SHUNT_REACH_STATIC || r == SHUNT_REACH_GO)
			fprintf(stderr,
				"shunt: %s cannot be accelerated: %s; its connections stay on TCP "
				"(its peers under shunt say no-peer-shim)\n",
				cmd[0], why);
	}

	fflush(stdout);
	execvp(cmd[0], cmd);
	fprintf(stderr, "shunt: %s: %s\n", cmd[0], strerror(errno));
	return 127;
}
