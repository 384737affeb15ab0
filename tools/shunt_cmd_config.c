/* shunt config: check a configuration file, or show the effective one.
 *
 *   shunt config --check FILE...   parse each file on top of the defaults;
 *                                  "FILE: ok" (+ settings, rule count) or
 *                                  the error line on stderr; exit 0 / 1
 *   shunt config --show            the configuration a process started from
 *                                  this environment would use, as
 *                                  "key = value" lines and its rules */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/shunt_config.h"
#include "shunt_tool.h"

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

/* key = value, quoted like shunt_config_describe() does when needed, so the
 * output reads back as a configuration file. */
static void kv(const char *key, const char *value)
{
	if (!value[0] || strpbrk(value, " \t\",#"))
		printf("%s = \"%s\"\n", key, value);
	else
		printf("%s = %s\n", key, value);
}

static int show(void)
{
	static struct shunt_config c;
	char err[SHUNT_ERR_MAX];
	if (shunt_config_load(&c, shunt_tool_getenv, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	const char *file = getenv("SHUNT_CONFIG");
	const char *opts = getenv("SHUNT_OPTIONS");
	if (!file || !file[0])
		file = SHUNT_DEFAULT_CONFIG;
	printf("# effective configuration: defaults < %s%s < SHUNT_* < SHUNT_OPTIONS%s%s\n",
	       file, access(file, F_OK) == 0 ? "" : " (absent)",
	       opts && opts[0] ? " = " : "", opts && opts[0] ? opts : "");
	printf("enable = %s\n", c.enabled ? "yes" : "no");
	printf("log = %s\n", shunt_log_level_name(c.log_level));
	kv("log_file", c.log_file);
	kv("rundir", c.rundir);
	printf("spin_us = %u\n", c.spin_us);
	printf("ring_size = %zu\n", c.ring_size);
	kv("fabric_provider", c.fabric_provider);
	printf("agent_port = %u\n", c.agent_port);
	printf("default_transport = %s\n",
	       shunt_transport_name(c.default_transport));
	printf("# %u rule%s, first match wins\n", c.nrules,
	       c.nrules == 1 ? "" : "s");
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
