/* shunt: the command-line front end.
 *
 *   shunt run [options] [--] CMD [ARGS...]   run CMD with libshunt.so preloaded
 *   shunt config --check FILE | --show       validate / show configuration
 *   shunt stat [-p PID] [-n NAME] [-i S] [--json]   live connections and counters
 *   shunt bench [options]                    kernel TCP vs shunt vs raw ring
 *   shunt ab --server CMD --client CMD       A/B of any program pair
 *   shunt doctor [--to HOST:PORT] [...]      will shunt work here, and to there?
 *   shunt version                            print the version
 *   shunt help [COMMAND]                     print usage, or COMMAND's
 *
 * Subcommands are dispatched through a table; each lives in its own file
 * (shunt_run.c, shunt_cmd_config.c, ...), so new ones are a file plus a row. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shunt/version.h>

#include "shunt_tool.h"

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

static const struct shunt_subcmd subcmds[] = {
	{ "run", "[--config FILE] [--log LEVEL] [--log-file PATH]\n"
		 "            [--transport auto|shm|fabric|kernel] [--options 'k=v,...'] [--] CMD [ARGS...]",
	  "run CMD with libshunt.so preloaded", shunt_cmd_run },
	{ "config", "--check FILE... | --show",
	  "validate a configuration file, or show the effective configuration",
	  shunt_cmd_config },
	{ "stat", "[-p PID] [-n NAME] [-i SECONDS [-c COUNT]] [--json] [--rundir DIR]",
	  "show connections, transports, bytes and fallbacks of running processes",
	  shunt_cmd_stat },
	{ "bench", "[--rounds N] [--duration SEC] [--sizes 64,4096] [--cpus A,B]\n"
		   "            [--csv FILE] [--plot FILE.svg] [...]",
	  "measure kernel TCP, a Unix socket, shunt and the raw ring, interleaved",
	  shunt_cmd_bench },
	{ "ab", "--server 'CMD' --client 'CMD' [--runs N] [--port P] [...]",
	  "run a server/client pair plain and under shunt, alternately; compare",
	  shunt_cmd_ab },
	{ "doctor", "[--config FILE] [--options 'k=v,...'] [--connections N]\n"
		    "            [--to HOST:PORT [--program NAME]] [--json]",
	  "check this host (rundir, agent, libfabric) and what a connection to HOST:PORT takes",
	  shunt_cmd_doctor },
	{ "version", "", "print the version", cmd_version },
	{ "help", "[COMMAND]", "print this help, or a command's", cmd_help },
};

#define NSUBCMDS (sizeof(subcmds) / sizeof(subcmds[0]))

int shunt_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "shunt %s: ", cmd);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n(see 'shunt %s --help')\n", cmd);
	va_end(ap);
	return SHUNT_EXIT_USAGE;
}

const char *shunt_tool_getenv(const char *name)
{
	return getenv(name);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: shunt <command> [args]\n\ncommands:\n");
	for (size_t i = 0; i < NSUBCMDS; i++)
		fprintf(f, "  %-8s  %s\n", subcmds[i].name, subcmds[i].summary);
	fprintf(f, "\n");
	for (size_t i = 0; i < NSUBCMDS; i++)
		fprintf(f, "  shunt %s%s%s\n", subcmds[i].name,
			subcmds[i].args[0] ? " " : "", subcmds[i].args);
	fprintf(f, "\n"
		"shunt run sets LD_PRELOAD, SHUNT_CONFIG, SHUNT_LOG, SHUNT_LOG_FILE,\n"
		"SHUNT_DEFAULT_TRANSPORT and SHUNT_OPTIONS, then executes CMD.\n"
		"libshunt.so is taken from $SHUNT_LIBRARY when set.\n"
		"See shunt(1) and shunt.conf(5).\n");
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("shunt %s\n", SHUNT_VERSION);
	return 0;
}

static const struct shunt_subcmd *find_subcmd(const char *name)
{
	for (size_t i = 0; i < NSUBCMDS; i++)
		if (!strcmp(name, subcmds[i].name))
			return &subcmds[i];
	return NULL;
}

/* shunt help COMMAND is shunt COMMAND --help. */
static int cmd_help(int argc, char **argv)
{
	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	const struct shunt_subcmd *c = find_subcmd(argv[1]);
	if (argc > 2 || !c) {
		fprintf(stderr, "shunt help: %s '%s'\n\n", c ? "unexpected" : "unknown command",
			argv[c ? 2 : 1]);
		usage(stderr);
		return SHUNT_EXIT_USAGE;
	}
	if (c->main == cmd_help || c->main == cmd_version) {
		printf("usage: shunt %s%s%s\n  %s\n", c->name, c->args[0] ? " " : "", c->args,
		       c->summary);
		return 0;
	}
	char *sub_argv[] = { (char *)c->name, "--help", NULL };
	return c->main(2, sub_argv);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "shunt: no command given\n\n");
		usage(stderr);
		return SHUNT_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h"))
		name = "help";
	else if (!strcmp(name, "--version") || !strcmp(name, "-V"))
		name = "version";
	const struct shunt_subcmd *c = find_subcmd(name);
	if (c) {
		int rc = c->main(argc - 1, argv + 1);
		if (fflush(stdout) != 0 || ferror(stdout)) {
			fprintf(stderr, "shunt: error writing output\n");
			return 1;
		}
		return rc;
	}
	fprintf(stderr, "shunt: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return SHUNT_EXIT_USAGE;
}
