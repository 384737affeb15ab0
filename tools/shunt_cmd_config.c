/* shunt config: check a configuration file, or show the effective one.
 *
 *   shunt config --check FILE...   parse each file on top of the defaults;
 *                                  "FILE: ok" (+ settings, rule count) or
 *                                  the error line on stderr; exit 0 / 1
 *   shunt config --show            the configuration a process started from
 *                                  this environment would use: every key as
 *                                  "key = value  # where it came from", the
 *                                  rundir in use and why, and its rules */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/shunt_config.h"
#include "shunt_tool.h"
#include "core/shunt_stats_read.h"

static void config_usage(FILE *f)
{
	fprintf(f, "usage: shunt config --check FILE...\n"
		   "       shunt config --show\n");
}

/* The settings part of shunt_config_describe(), without the rule count. */
static void describe_settings(const struct shunt_config *c, char *buf,
			      size_t len)
{
	static struct shunt_config tmp;
	tmp = *c;
	tmp.nrules = 0;
	shunt_config_describe(&tmp, buf, len);
}

static int check_files(int n, char **files)
{
	int rc = 0;
	static struct shunt_config c;
	for (int i = 0; i < n; i++) {
		char err[SHUNT_ERR_MAX], desc[4096];
		shunt_config_defaults(&c);
		if (shunt_config_parse_file(&c, files[i], 1, err,
					    sizeof(err)) != 0) {
			fprintf(stderr, "%s\n", err);
			rc = 1;
			continue;
		}
		printf("%s: ok\n", files[i]);
		describe_settings(&c, desc, sizeof(desc));
		if (desc[0])
			printf("settings: %s\n", desc);
		if (c.nrules)
			printf("rules: %u\n", c.nrules);
	}
	return rc;
}

/* "<transport> <role> <prog> <addr[/prefix]|*>[:port[-port]]", the syntax
 * the rule parser reads. */
static void format_rule(const struct shunt_rule *r, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN + 8] = "*";
	char ip[INET6_ADDRSTRLEN];
	if (r->family == AF_INET &&
	    inet_ntop(AF_INET, r->addr, ip, sizeof(ip))) {
		if (r->prefix == 32)
			snprintf(addr, sizeof(addr), "%s", ip);
		else
			snprintf(addr, sizeof(addr), "%s/%u", ip, r->prefix);
	} else if (r->family == AF_INET6 &&
		   inet_ntop(AF_INET6, r->addr, ip, sizeof(ip))) {
		if (r->prefix == 128)
			snprintf(addr, sizeof(addr), "[%s]", ip);
		else
			snprintf(addr, sizeof(addr), "[%s/%u]", ip, r->prefix);
	}
	char port[16] = "";
	if (r->port_lo == r->port_hi)
		snprintf(port, sizeof(port), ":%u", r->port_lo);
	else if (!(r->port_lo == 0 && r->port_hi == 65535))
		snprintf(port, sizeof(port), ":%u-%u", r->port_lo, r->port_hi);
	snprintf(buf, len, "%s %s %s %s%s", shunt_transport_name(r->transport),
		 shunt_role_name(r->role), r->prog, addr, port);
}

/* The source that last set each key (shunt_config_load_traced). */
#define MAX_KEYS 64
static char origin[MAX_KEYS][PATH_MAX + 32];

static void seen(const char *key, const char *where, void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < MAX_KEYS && shunt_config_key_name(i); i++)
		if (!strcmp(shunt_config_key_name(i), key))
			snprintf(origin[i], sizeof(origin[i]), "%s", where);
}

static int show(void)
{
	static struct shunt_config c;
	char err[SHUNT_ERR_MAX];
	if (shunt_config_load_traced(&c, shunt_tool_getenv, seen, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	const char *file = getenv("SHUNT_CONFIG");
	if (!file || !file[0])
		file = SHUNT_DEFAULT_CONFIG;
	/* Not SHUNT_OPTIONS itself: it may hold agent_secret. */
	printf("# effective configuration: defaults < %s%s < SHUNT_* < SHUNT_OPTIONS\n", file,
	       access(file, F_OK) == 0 ? "" : " (absent)");
	/* Every key of the parser's table, with where its value came from. */
	for (unsigned i = 0; i < MAX_KEYS && shunt_config_key_name(i); i++) {
		const char *key = shunt_config_key_name(i);
		char value[PATH_MAX + 8], line[PATH_MAX + 80];
		shunt_config_value(&c, key, value, sizeof(value));
		snprintf(line, sizeof(line), "%s = %s", key, value);
		printf("%-34s # %s\n", line, origin[i][0] ? origin[i] : "default");
	}
	char rundir[SHUNT_STATS_DIR_MAX], why[1024], rerr[SHUNT_STATS_DIR_MAX + 600];
	if (shunt_stats_rundir_why(NULL, rundir, sizeof(rundir), why, sizeof(why), rerr,
				   sizeof(rerr)) == 0)
		printf("# rundir in use: %s: %s\n", rundir, why);
	else
		printf("# rundir in use: none: %s\n", rerr);
	printf("# %u rule%s, first match wins\n", c.nrules, c.nrules == 1 ? "" : "s");
	for (unsigned i = 0; i < c.nrules; i++) {
		char rule[256];
		format_rule(&c.rules[i], rule, sizeof(rule));
		if (c.rules[i].line)
			printf("rule %s    # line %u\n", rule, c.rules[i].line);
		else
			printf("rule %s    # environment\n", rule);
	}
	return 0;
}

int shunt_cmd_config(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "--check")) {
		if (argc < 3) {
			fprintf(stderr, "shunt config: --check needs a FILE\n");
			config_usage(stderr);
			return SHUNT_EXIT_USAGE;
		}
		return check_files(argc - 2, argv + 2);
	}
	if (argc == 2 && !strcmp(argv[1], "--show"))
		return show();
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		config_usage(stdout);
		return 0;
	}
	if (argc >= 2)
		fprintf(stderr, "shunt config: unexpected '%s'\n", argv[1]);
	config_usage(stderr);
	return SHUNT_EXIT_USAGE;
}
