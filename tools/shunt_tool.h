/* The `shunt` command-line tool: shared declarations.
 *
 * Each subcommand lives in its own file and is listed in the table in
 * shunt.c.  A subcommand gets argv with argv[0] set to its own name and
 * returns the process exit status: 0 ok, 1 failure, 2 usage error. */
#ifndef SHUNT_TOOL_H
#define SHUNT_TOOL_H

#define SHUNT_EXIT_USAGE 2

struct shunt_subcmd {
	const char *name;
	const char *args;      /* one-line argument synopsis for the usage text */
	const char *summary;   /* one-line description */
	int (*main)(int argc, char **argv);
};

int shunt_cmd_run(int argc, char **argv);      /* shunt_run.c */
int shunt_cmd_config(int argc, char **argv);   /* shunt_cmd_config.c */
int shunt_cmd_bench(int argc, char **argv);    /* shunt_bench.c */
int shunt_cmd_ab(int argc, char **argv);       /* shunt_ab.c */
int shunt_cmd_stat(int argc, char **argv);     /* shunt_stat.c */
int shunt_cmd_doctor(int argc, char **argv);   /* shunt_doctor.c */

/* "shunt CMD: <message>" and a pointer to --help on stderr; returns
 * SHUNT_EXIT_USAGE.  Each subcommand defines usage_error(...) with its name. */
__attribute__((format(printf, 2, 3)))
int shunt_usage_error(const char *cmd, const char *fmt, ...);

/* getenv with the signature shunt_config_load() expects. */
const char *shunt_tool_getenv(const char *name);

#endif
