/* Unit tests for config/: settings, file syntax, rules, matching, the
 * environment and describe. */
#include "shunt_config.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ----------------------------------------------------------- */

static struct shunt_config cfg;
static struct shunt_rule rule;
static char err[SHUNT_ERR_MAX];

static int parse_text(const char *text)
{
	shunt_config_defaults(&cfg);
	memset(err, 'x', sizeof(err));
	err[sizeof(err) - 1] = '\0';
	return shunt_config_parse(&cfg, "t.conf", text, strlen(text), err,
				  sizeof(err));
}

#define OK(text) do { \
	const char *t_ = (text); \
	cr_assert_eq(parse_text(t_), 0, "'%s' failed: %s", t_, err); \
	cr_assert_str_empty(err); \
} while (0)

/* error containing a substring */
#define BAD(text, sub) do { \
	const char *t_ = (text), *s_ = (sub); \
	cr_assert_eq(parse_text(t_), -1, "'%s' was accepted", t_); \
	cr_assert(strstr(err, s_) != NULL, "'%s': error '%s' lacks '%s'", \
		  t_, err, s_); \
	cr_assert(strchr(err, '\n') == NULL, "multi-line error '%s'", err); \
} while (0)

/* exact error */
#define BAD_EQ(text, msg) do { \
	const char *t_ = (text); \
	cr_assert_eq(parse_text(t_), -1, "'%s' was accepted", t_); \
	cr_assert_str_eq(err, (msg)); \
} while (0)

static int parse_rule(const char *text)
{
	memset(&rule, 0xa5, sizeof(rule));
	err[0] = '\0';
	return shunt_config_parse_rule(&rule, text, err, sizeof(err));
}

#define RULE_OK(text) cr_assert_eq(parse_rule(text), 0, "'%s' failed: %s", \
				   (text), err)
#define RULE_BAD(text, sub) do { \
	const char *t_ = (text), *s_ = (sub); \
	cr_assert_eq(parse_rule(t_), -1, "'%s' was accepted", t_); \
	cr_assert(strstr(err, s_) != NULL, "'%s': error '%s' lacks '%s'", \
		  t_, err, s_); \
	cr_assert(strncmp(err, "rule: ", 6) == 0, "'%s'", err); \
} while (0)

static struct sockaddr_storage ss;

static const struct sockaddr *sa(const char *ip, unsigned port,
				 socklen_t *len)
{
	memset(&ss, 0, sizeof(ss));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		cr_assert_eq(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1, "%s", ip);
		*len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		cr_assert_eq(inet_pton(AF_INET, ip, &s4->sin_addr), 1, "%s", ip);
		*len = sizeof(*s4);
	}
	return (const struct sockaddr *)&ss;
}

/* index of the first matching rule, -1 for none */
static int match(enum shunt_role role, const char *prog, const char *ip,
		 unsigned port)
{
	socklen_t len;
	const struct sockaddr *a = sa(ip, port, &len);
	const struct shunt_rule *r = shunt_config_match(&cfg, role, prog, a, len);

	return r ? (int)(r - cfg.rules) : -1;
}

static int rule_matches(const char *ruletext, const char *ip, unsigned port)
{
	char text[256];

	snprintf(text, sizeof(text), "kernel * * %s\n", ruletext);
	cr_assert_eq(parse_text(text), 0, "'%s': %s", ruletext, err);
	return match(SHUNT_ROLE_CLIENT, "p", ip, port) == 0;
}

/* fake environment */
struct kv {
	const char *k, *v;
};
static struct kv env[16];

static void env_set(const char *k, const char *v)
{
	size_t i;

	for (i = 0; i < sizeof(env) / sizeof(env[0]) - 1; i++) {
		if (!env[i].k || strcmp(env[i].k, k) == 0) {
			env[i].k = k;
			env[i].v = v;
			return;
		}
	}
	cr_assert_fail("fake environment full");
}

static const char *fake_getenv(const char *name)
{
	size_t i;

	for (i = 0; env[i].k; i++)
		if (strcmp(env[i].k, name) == 0)
			return env[i].v;
	return NULL;
}

static int load(void)
{
	memset(err, 'x', sizeof(err));
	err[sizeof(err) - 1] = '\0';
	return shunt_config_load(&cfg, fake_getenv, err, sizeof(err));
}

static char tmpdir[64];

static const char *tmpfile_with(const char *name, const char *text)
{
	static char path[128];
	FILE *f;

	if (!tmpdir[0]) {
		strcpy(tmpdir, "/tmp/shunt-test-config-XXXXXX");
		cr_assert_not_null(mkdtemp(tmpdir));
	}
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void cleanup_tmp(void)
{
	char cmd[128];

	if (tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", tmpdir);
	}
}

/* ---- defaults and names ------------------------------------------------ */

Test(defaults, values)
{
	shunt_config_defaults(&cfg);
	cr_assert_eq(cfg.enabled, 1);
	cr_assert_eq(cfg.log_level, SHUNT_LOG_WARN);
	cr_assert_str_empty(cfg.log_file);
	cr_assert_str_empty(cfg.rundir);
	cr_assert_eq(cfg.spin_us, 20);
	cr_assert_eq(cfg.ring_size, 1 << 20);
	cr_assert_str_eq(cfg.fabric_provider, "auto");
	cr_assert_eq(cfg.agent_port, 7476);
	cr_assert_eq(cfg.default_transport, SHUNT_TP_AUTO);
	cr_assert_eq(cfg.nrules, 0);
}

Test(defaults, names)
{
	cr_assert_str_eq(shunt_transport_name(SHUNT_TP_AUTO), "auto");
	cr_assert_str_eq(shunt_transport_name(SHUNT_TP_SHM), "shm");
	cr_assert_str_eq(shunt_transport_name(SHUNT_TP_FABRIC), "fabric");
	cr_assert_str_eq(shunt_transport_name(SHUNT_TP_KERNEL), "kernel");
	cr_assert_str_eq(shunt_transport_name((enum shunt_transport)42), "?");
	cr_assert_str_eq(shunt_role_name(SHUNT_ROLE_ANY), "*");
	cr_assert_str_eq(shunt_role_name(SHUNT_ROLE_CLIENT), "client");
	cr_assert_str_eq(shunt_role_name(SHUNT_ROLE_SERVER), "server");
	cr_assert_str_eq(shunt_role_name((enum shunt_role)7), "?");
	cr_assert_str_eq(shunt_log_level_name(SHUNT_LOG_ERROR), "error");
	cr_assert_str_eq(shunt_log_level_name(SHUNT_LOG_WARN), "warn");
	cr_assert_str_eq(shunt_log_level_name(SHUNT_LOG_INFO), "info");
	cr_assert_str_eq(shunt_log_level_name(SHUNT_LOG_DEBUG), "debug");
	cr_assert_str_eq(shunt_log_level_name((enum shunt_log_level)9), "?");
}

/* ---- settings ---------------------------------------------------------- */

Test(settings, enable)
{
	static const char *yes[] = { "yes", "true", "on", "1", "YES", "True" };
	static const char *no[] = { "no", "false", "off", "0", "No", "OFF" };
	char line[64];
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		snprintf(line, sizeof(line), "enable = no\nenable = %s\n", yes[i]);
		OK(line);
		cr_assert_eq(cfg.enabled, 1, "%s", yes[i]);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		snprintf(line, sizeof(line), "enable = %s\n", no[i]);
		OK(line);
		cr_assert_eq(cfg.enabled, 0, "%s", no[i]);
	}
	BAD_EQ("enable = maybe",
	       "t.conf:1: bad value 'maybe' for enable (expected yes|no|true|false|on|off|1|0)");
	BAD("enable = 2", "bad value '2' for enable");
	BAD("enable = yess", "bad value 'yess' for enable");
	BAD("enable =", "bad value '' for enable");
}

Test(settings, log)
{
	OK("log = error");
	cr_assert_eq(cfg.log_level, SHUNT_LOG_ERROR);
	OK("log = warn");
	cr_assert_eq(cfg.log_level, SHUNT_LOG_WARN);
	OK("log = warning");
	cr_assert_eq(cfg.log_level, SHUNT_LOG_WARN);
	OK("log = info");
	cr_assert_eq(cfg.log_level, SHUNT_LOG_INFO);
	OK("log = DEBUG");
	cr_assert_eq(cfg.log_level, SHUNT_LOG_DEBUG);
	BAD_EQ("\nlog = verbose",
	       "t.conf:2: bad value 'verbose' for log (expected error|warn|info|debug)");
	BAD("log = 3", "bad value '3' for log");
}

Test(settings, log_file)
{
	OK("log_file = /var/log/shunt-%p.log");
	cr_assert_str_eq(cfg.log_file, "/var/log/shunt-%p.log");
	OK("log_file = rel/100%%.log");
	cr_assert_str_eq(cfg.log_file, "rel/100%%.log");
	OK("log_file = /x\nlog_file =");
	cr_assert_str_empty(cfg.log_file);
	OK("log_file = /x\nlog_file = \"\"");
	cr_assert_str_empty(cfg.log_file);
	OK("log_file = \"/tmp/with space #1.log\"   # comment");
	cr_assert_str_eq(cfg.log_file, "/tmp/with space #1.log");
	OK("log_file = /tmp/a#b.log");
	cr_assert_str_eq(cfg.log_file, "/tmp/a#b.log");
	BAD_EQ("log_file = /tmp/%d.log",
	       "t.conf:1: bad value '/tmp/%d.log' for log_file (only %p and %% may follow %)");
	BAD("log_file = /tmp/x%", "bad value '/tmp/x%' for log_file");
	BAD("log_file = \"/tmp/x", "unterminated quote");
	BAD("log_file = \"", "unterminated quote");
}

Test(settings, log_file_length)
{
	char *v = malloc(PATH_MAX + 1);

	memset(v, 'a', PATH_MAX);
	v[0] = '/';
	v[PATH_MAX - 1] = '\0';             /* PATH_MAX-1 characters: fits */
	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_set(&cfg, "log_file", v, "o", err,
				      sizeof(err)), 0, "%s", err);
	cr_assert_eq(strlen(cfg.log_file), PATH_MAX - 1);
	v[PATH_MAX - 1] = 'a';
	v[PATH_MAX] = '\0';
	cr_assert_eq(shunt_config_set(&cfg, "log_file", v, "o", err,
				      sizeof(err)), -1);
	cr_assert(strstr(err, "o: bad value '/aaa") == err, "%s", err);
	cr_assert(strstr(err, "...' for log_file (expected a path"), "%s", err);
	cr_assert_lt(strlen(err), 200);
	cr_assert_eq(shunt_config_set(&cfg, "log_file", "/a\tb", "o", err,
				      sizeof(err)), -1);
	cr_assert(strstr(err, "bad value '/a?b'"), "%s", err);
	free(v);
}

Test(settings, rundir)
{
	OK("rundir = /run/shunt-test");
	cr_assert_str_eq(cfg.rundir, "/run/shunt-test");
	OK("rundir = /x\nrundir = \"\"");
	cr_assert_str_empty(cfg.rundir);
	OK("rundir = /x\nrundir=");
	cr_assert_str_empty(cfg.rundir);
	BAD_EQ("rundir = run/shunt",
	       "t.conf:1: bad value 'run/shunt' for rundir (expected an absolute path or \"\")");
	BAD("rundir = ~/x", "bad value '~/x' for rundir");
}

Test(settings, shm_group)
{
	unsigned gid = 7;

	shunt_config_defaults(&cfg);
	cr_assert_str_empty(cfg.shm_group);
	cr_assert_eq(shunt_config_group_id(&cfg, &gid), 0);
	OK("shm_group = shunt");
	cr_assert_str_eq(cfg.shm_group, "shunt");
	cr_assert_eq(shunt_config_group_id(&cfg, &gid), 0, "a name is not a number");
	OK("shm_group = app-users_2.x$");
	cr_assert_str_eq(cfg.shm_group, "app-users_2.x$");
	OK("shm_group = 1000");
	cr_assert_eq(shunt_config_group_id(&cfg, &gid), 1);
	cr_assert_eq(gid, 1000);
	OK("shm_group = 0");
	cr_assert_eq(shunt_config_group_id(&cfg, &gid), 1);
	cr_assert_eq(gid, 0);
	OK("shm_group = 4294967294");
	cr_assert_eq(shunt_config_group_id(&cfg, &gid), 1);
	cr_assert_eq(gid, 4294967294u);
	OK("shm_group = \"users\"");
	cr_assert_str_eq(cfg.shm_group, "users");
	OK("shm_group = 1000\nshm_group = \"\"");
	cr_assert_str_empty(cfg.shm_group);
	OK("shm_group = 32charactersxxxxxxxxxxxxxxxxxxxx");
	BAD_EQ("\nshm_group = 4294967295",
	       "t.conf:2: bad value '4294967295' for shm_group (expected a group name or a number below 4294967295, or \"\")");
	BAD("shm_group = 33charactersxxxxxxxxxxxxxxxxxxxxx", "t.conf:1: bad value");
	BAD("shm_group = -g", "bad value '-g' for shm_group");
	BAD("shm_group = a b", "for shm_group");
	BAD("shm_group = a/b", "bad value 'a/b' for shm_group");
	BAD("shm_group = a$b", "bad value 'a$b' for shm_group");
	BAD("shm_group = 12a:", "for shm_group");
	BAD("shm_group = 99999999999999999999", "for shm_group");
	BAD("shm_group = gr\xc3\xbcppe", "for shm_group");
}

Test(settings, spin_us)
{
	OK("spin_us = 0");
	cr_assert_eq(cfg.spin_us, 0);
	OK("spin_us = 1000000");
	cr_assert_eq(cfg.spin_us, 1000000);
	OK("spin_us = 007");
	cr_assert_eq(cfg.spin_us, 7);
	OK("spin_us=5");
	cr_assert_eq(cfg.spin_us, 5);
	BAD_EQ("\n\n\n\n\n\nspin_us = abc",
	       "t.conf:7: bad value 'abc' for spin_us (expected an integer 0..1000000)");
	BAD("spin_us = 1000001", "bad value '1000001' for spin_us");
	BAD("spin_us = -1", "bad value '-1' for spin_us");
	BAD("spin_us = +1", "bad value '+1' for spin_us");
	BAD("spin_us = 12abc", "bad value '12abc' for spin_us");
	BAD("spin_us = 12 34", "bad value '12 34' for spin_us");
	BAD("spin_us = 0x10", "bad value '0x10' for spin_us");
	BAD("spin_us = 1.5", "bad value '1.5' for spin_us");
	BAD("spin_us =", "bad value '' for spin_us");
	BAD("spin_us = 18446744073709551617", "bad value '18446744073709551617'");
	BAD("spin_us = 99999999999999999999999999999", "for spin_us");
}

Test(settings, ring_size)
{
	static const struct { const char *v; size_t n; } good[] = {
		{ "4096", 4096 }, { "4k", 4096 }, { "4K", 4096 },
		{ "64k", 65536 }, { "1m", 1 << 20 }, { "2M", 2 << 20 },
		{ "1g", 1 << 30 }, { "1G", 1 << 30 }, { "1024M", 1 << 30 },
		{ "1048576k", 1 << 30 }, { "1073741824", 1 << 30 },
		{ "\"8k\"", 8192 },
	};
	static const char *bad[] = {
		"4095", "2048", "2k", "0", "0k", "3000", "6k", "3M", "2G",
		"2147483648", "1T", "k", "", "-4k", "4kb", "4 k", "4kk",
		"18446744073709551616", "17179869184G", "4.5k", "0x1000",
	};
	char line[96];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(line, sizeof(line), "ring_size = %s", good[i].v);
		OK(line);
		cr_assert_eq(cfg.ring_size, good[i].n, "%s", good[i].v);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(line, sizeof(line), "ring_size = %s", bad[i]);
		BAD(line, "for ring_size (expected a power of two 4096..1G, optional k/m/g suffix)");
	}
	BAD_EQ("ring_size = 5000",
	       "t.conf:1: bad value '5000' for ring_size (expected a power of two 4096..1G, optional k/m/g suffix)");
}

Test(settings, cma_min)
{
	static const struct { const char *v; size_t n; } good[] = {
		{ "0", 0 }, { "16k", 16384 }, { "256k", 262144 }, { "300000", 300000 },
		{ "1m", 1 << 20 }, { "1G", 1 << 30 },
	};
	static const char *bad[] = { "1", "16383", "4k", "2G", "-1", "k", "", "1T", "0x4000" };
	char line[96];
	size_t i;

	shunt_config_defaults(&cfg);
	cr_assert_eq(cfg.cma_min, 0);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(line, sizeof(line), "cma_min = %s", good[i].v);
		OK(line);
		cr_assert_eq(cfg.cma_min, good[i].n, "%s", good[i].v);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(line, sizeof(line), "cma_min = %s", bad[i]);
		BAD(line, "for cma_min (expected 0 (off) or 16k..1G, optional k/m/g suffix)");
	}
}

Test(settings, fabric_provider)
{
	char line[96];

	OK("fabric_provider = tcp");
	cr_assert_str_eq(cfg.fabric_provider, "tcp");
	OK("fabric_provider = tcp;ofi_rxm");
	cr_assert_str_eq(cfg.fabric_provider, "tcp;ofi_rxm");
	OK("fabric_provider = verbs");
	OK("fabric_provider = shm-2_x");
	OK("fabric_provider = auto");
	cr_assert_str_eq(cfg.fabric_provider, "auto");
	snprintf(line, sizeof(line), "fabric_provider = %.31s",
		 "abcdefghijklmnopqrstuvwxyz0123456789");
	OK(line);
	cr_assert_eq(strlen(cfg.fabric_provider), 31);
	snprintf(line, sizeof(line), "fabric_provider = %.32s",
		 "abcdefghijklmnopqrstuvwxyz0123456789");
	BAD(line, "for fabric_provider (expected a provider name of [a-z0-9_;-], at most 31 characters)");
	BAD("fabric_provider = TCP", "bad value 'TCP' for fabric_provider");
	BAD("fabric_provider = tcp rxm", "bad value 'tcp rxm'");
	BAD("fabric_provider = a/b", "bad value 'a/b'");
	BAD("fabric_provider =", "bad value '' for fabric_provider");
}

Test(settings, agent_port)
{
	OK("agent_port = 1");
	cr_assert_eq(cfg.agent_port, 1);
	OK("agent_port = 65535");
	cr_assert_eq(cfg.agent_port, 65535);
	BAD_EQ("agent_port = 0",
	       "t.conf:1: bad value '0' for agent_port (expected a port 1..65535)");
	BAD("agent_port = 65536", "bad value '65536' for agent_port");
	BAD("agent_port = -1", "bad value '-1' for agent_port");
	BAD("agent_port = http", "bad value 'http' for agent_port");
}

Test(settings, agent_secret)
{
	OK("");
	cr_assert_str_empty(cfg.agent_secret);
	OK("agent_secret = 0123456789abcdef");
	cr_assert_str_eq(cfg.agent_secret, "0123456789abcdef");
	OK("agent_secret = \"\"");
	cr_assert_str_empty(cfg.agent_secret);
	char longest[SHUNT_AGENT_SECRET_MAX + 32];
	memset(longest, 'k', SHUNT_AGENT_SECRET_MAX);
	snprintf(longest + SHUNT_AGENT_SECRET_MAX, 32, "\n");
	char line[sizeof longest + 32];
	snprintf(line, sizeof line, "agent_secret = %s", longest);
	OK(line);
	cr_assert_eq(strlen(cfg.agent_secret), SHUNT_AGENT_SECRET_MAX);
	snprintf(line, sizeof line, "agent_secret = k%s", longest);
	BAD(line, "for agent_secret (expected 16..128 printable characters");
	BAD("agent_secret = short", "for agent_secret (expected 16..128");
	BAD("agent_secret = \"0123456789 abcdef\"", "no space or comma");
	/* The secret never appears in a message. */
	cr_assert_eq(parse_text("agent_secret = \"0123456789,abcdef\""), -1);
	cr_assert_null(strstr(err, "0123456789"), "secret echoed: %s", err);
}

Test(settings, agent_secret_file)
{
	OK("agent_secret_file = /etc/shunt/secret");
	cr_assert_str_eq(cfg.agent_secret_file, "/etc/shunt/secret");
	BAD("agent_secret_file = secret", "bad value 'secret' for agent_secret_file");
	/* One replaces the other: the source of higher precedence wins. */
	OK("agent_secret = 0123456789abcdef\nagent_secret_file = /s");
	cr_assert_str_empty(cfg.agent_secret);
	cr_assert_str_eq(cfg.agent_secret_file, "/s");
	OK("agent_secret_file = /s\nagent_secret = 0123456789abcdef");
	cr_assert_str_empty(cfg.agent_secret_file);
	cr_assert_str_eq(cfg.agent_secret, "0123456789abcdef");
}

Test(settings, agent_cache_and_timeout)
{
	OK("");
	cr_assert_eq(cfg.agent_cache_s, 30);
	cr_assert_eq(cfg.agent_timeout_ms, 250);
	OK("agent_cache_s = 0\nagent_timeout_ms = 1");
	cr_assert_eq(cfg.agent_cache_s, 0);
	cr_assert_eq(cfg.agent_timeout_ms, 1);
	OK("agent_cache_s = 86400\nagent_timeout_ms = 10000");
	cr_assert_eq(cfg.agent_cache_s, 86400);
	cr_assert_eq(cfg.agent_timeout_ms, 10000);
	BAD_EQ("agent_cache_s = 86401",
	       "t.conf:1: bad value '86401' for agent_cache_s (expected an integer 0..86400)");
	BAD_EQ("agent_timeout_ms = 0",
	       "t.conf:1: bad value '0' for agent_timeout_ms (expected an integer 1..10000)");
	BAD("agent_timeout_ms = 10001", "bad value '10001' for agent_timeout_ms");
	BAD("agent_cache_s = -1", "bad value '-1' for agent_cache_s");
}

Test(settings, fabric_load_wait_ms)
{
	OK("");
	cr_assert_eq(cfg.fabric_load_wait_ms, 0);
	OK("fabric_load_wait_ms = 60000");
	cr_assert_eq(cfg.fabric_load_wait_ms, 60000);
	BAD_EQ("fabric_load_wait_ms = 60001",
	       "t.conf:1: bad value '60001' for fabric_load_wait_ms (expected an integer 0..60000)");
	BAD("fabric_load_wait_ms = -1", "bad value '-1' for fabric_load_wait_ms");
}

Test(describe, agent_keys_hide_the_secret)
{
	char buf[512];
	OK("agent_secret = 0123456789abcdef\nagent_cache_s = 5\nagent_timeout_ms = 100");
	shunt_config_describe(&cfg, buf, sizeof(buf));
	cr_assert_str_eq(buf, "agent_secret=(set) agent_cache_s=5 agent_timeout_ms=100");
}

Test(settings, default_transport)
{
	OK("default_transport = shm");
	cr_assert_eq(cfg.default_transport, SHUNT_TP_SHM);
	OK("default_transport = fabric");
	cr_assert_eq(cfg.default_transport, SHUNT_TP_FABRIC);
	OK("default_transport = kernel");
	cr_assert_eq(cfg.default_transport, SHUNT_TP_KERNEL);
	OK("default_transport = Auto");
	cr_assert_eq(cfg.default_transport, SHUNT_TP_AUTO);
	BAD_EQ("default_transport = tcp",
	       "t.conf:1: bad value 'tcp' for default_transport (expected auto|shm|fabric|kernel)");
}

Test(settings, unknown_key)
{
	BAD_EQ("spn_us = 5", "t.conf:1: unknown key 'spn_us'");
	BAD_EQ("# x\n\nspin-us=5", "t.conf:3: unknown key 'spin-us'");
	BAD_EQ("auto = 1", "t.conf:1: unknown key 'auto'");
}

Test(settings, keys_case_insensitive_last_wins)
{
	OK("SPIN_US = 3\nspin_us = 4\nSpin_Us = 5");
	cr_assert_eq(cfg.spin_us, 5);
}

Test(settings, set_api)
{
	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_set(&cfg, "spin_us", " 9 ", "here", err,
				      sizeof(err)), 0);
	cr_assert_eq(cfg.spin_us, 9);
	cr_assert_eq(shunt_config_set(&cfg, "spin_us", "x", NULL, err,
				      sizeof(err)), -1);
	cr_assert_str_eq(err, "bad value 'x' for spin_us (expected an integer 0..1000000)");
	cr_assert_eq(shunt_config_set(&cfg, "nope", "1", "here", err,
				      sizeof(err)), -1);
	cr_assert_str_eq(err, "here: unknown key 'nope'");
	cr_assert_eq(shunt_config_set(&cfg, "rule", "kernel * * *:22", "here",
				      err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.nrules, 1);
	cr_assert_eq(cfg.rules[0].port_lo, 22);
	cr_assert_eq(shunt_config_set(&cfg, "rule", "kernel * *", "here",
				      err, sizeof(err)), -1);
	cr_assert(strstr(err, "here: rule: missing address") == err, "%s", err);
	/* no error buffer, tiny error buffer */
	cr_assert_eq(shunt_config_set(&cfg, "spin_us", "x", "o", NULL, 0), -1);
	cr_assert_eq(shunt_config_set(&cfg, "spin_us", "x", "o", err, 5), -1);
	cr_assert_str_eq(err, "o: b");
	cr_assert_eq(shunt_config_set(&cfg, "enable", NULL, "o", err,
				      sizeof(err)), -1);
}

/* ---- file syntax ------------------------------------------------------- */

Test(syntax, comments_blanks_spaces)
{
	OK("");
	OK("\n\n   \n\t\n");
	OK("# only a comment");
	OK("   # indented comment\n#\n##");
	OK("spin_us=1\nspin_us =2\nspin_us= 3\n  spin_us\t=\t4  \n");
	cr_assert_eq(cfg.spin_us, 4);
	OK("spin_us = 5 # trailing comment");
	cr_assert_eq(cfg.spin_us, 5);
	OK("spin_us = 6\t# tab comment");
	cr_assert_eq(cfg.spin_us, 6);
	OK("spin_us = 7 ### more");
	cr_assert_eq(cfg.spin_us, 7);
	OK("spin_us = 8");           /* no final newline */
	cr_assert_eq(cfg.spin_us, 8);
	BAD("spin_us = 9#no space", "bad value '9#no space' for spin_us");
	OK("log_file=#comment");
	cr_assert_str_empty(cfg.log_file);
	OK("kernel * * 127.0.0.53:53   # resolver\n# auto * * *");
	cr_assert_eq(cfg.nrules, 1);
}

Test(syntax, crlf_and_bom)
{
	OK("spin_us = 11\r\nlog = info\r\n\r\nkernel * * *\r\n");
	cr_assert_eq(cfg.spin_us, 11);
	cr_assert_eq(cfg.log_level, SHUNT_LOG_INFO);
	cr_assert_eq(cfg.nrules, 1);
	OK("\xef\xbb\xbfspin_us = 12\n");
	cr_assert_eq(cfg.spin_us, 12);
}

Test(syntax, neither_setting_nor_rule)
{
	BAD_EQ("hello world", "t.conf:1: expected 'key = value' or a rule, got 'hello world'");
	BAD_EQ("\nspin_us 5 # x", "t.conf:2: expected 'key = value' or a rule, got 'spin_us 5'");
	BAD_EQ("= 5", "t.conf:1: expected 'key = value' or a rule, got '= 5'");
	BAD_EQ("shmm * * *", "t.conf:1: expected 'key = value' or a rule, got 'shmm * * *'");
}

Test(syntax, line_length)
{
	char *t = malloc(2000);

	memset(t, 'x', 2000);
	t[0] = '#';
	t[1023] = '\0';               /* 1023 characters */
	OK(t);
	t[1023] = '\n';
	t[1024] = '\0';
	OK(t);
	t[1023] = 'x';                /* 1024 characters */
	BAD_EQ(t, "t.conf:1: line too long (more than 1023 characters)");
	memcpy(t, "spin_us=1\n#", 11);
	t[1024] = 'x';
	t[1040] = '\0';                /* line 2: 1030 characters */
	BAD_EQ(t, "t.conf:2: line too long (more than 1023 characters)");
	free(t);
}

Test(syntax, nul_and_control_bytes)
{
	static const char text[] = "spin_us = 1\nspin_us = 2\0\nlog = info\n";

	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_parse(&cfg, "n.conf", text, sizeof(text) - 1,
					err, sizeof(err)), -1);
	cr_assert_str_eq(err, "n.conf:2: NUL byte in line");
	BAD_EQ("spin_us = 1\x01", "t.conf:1: control character 0x01 in line");
	BAD_EQ("#\x1b[31m", "t.conf:1: control character 0x1b in line");
	BAD("a\x7f = 1", "control character 0x7f");
	/* bytes above 0x7f are fine (UTF-8 in globs and paths) ... */
	OK("log_file = /tmp/\xc3\xa9t\xc3\xa9.log");
	/* ... but echoed as '?' in messages */
	BAD_EQ("\xc3\xa9 = 1", "t.conf:1: unknown key '?" "?'");
}

Test(syntax, length_is_respected)
{
	/* only the first len bytes are parsed, no NUL needed */
	static const char text[] = "spin_us = 12345";

	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_parse(&cfg, "l", text, 12, err, sizeof(err)), 0);
	cr_assert_eq(cfg.spin_us, 12);
	cr_assert_eq(shunt_config_parse(&cfg, NULL, "spin_us=x", 9, err,
					sizeof(err)), -1);
	cr_assert_str_eq(err, "(config):1: bad value 'x' for spin_us (expected an integer 0..1000000)");
	cr_assert_eq(shunt_config_parse(&cfg, "e", NULL, 0, err, sizeof(err)), 0);
}

Test(syntax, long_values_are_cut_in_messages)
{
	char t[1024];

	memset(t, 'z', sizeof(t));
	memcpy(t, "spin_us = ", 10);
	t[1000] = '\0';
	BAD(t, "bad value 'zzzz");
	cr_assert(strstr(err, "...' for spin_us"), "%s", err);
	cr_assert_lt(strlen(err), 160);
}

/* ---- rules: parsing ---------------------------------------------------- */

Test(rules, fields)
{
	RULE_OK("shm client redis-* 10.0.0.0/8:6379");
	cr_assert_eq(rule.transport, SHUNT_TP_SHM);
	cr_assert_eq(rule.role, SHUNT_ROLE_CLIENT);
	cr_assert_str_eq(rule.prog, "redis-*");
	cr_assert_eq(rule.line, 0);
	RULE_OK("rule fabric server * *");
	cr_assert_eq(rule.transport, SHUNT_TP_FABRIC);
	cr_assert_eq(rule.role, SHUNT_ROLE_SERVER);
	RULE_OK("  AUTO\t*  nginx   *  ");
	cr_assert_eq(rule.transport, SHUNT_TP_AUTO);
	cr_assert_eq(rule.role, SHUNT_ROLE_ANY);
	cr_assert_str_eq(rule.prog, "nginx");
	RULE_OK("kernel Client * *");
	cr_assert_eq(rule.transport, SHUNT_TP_KERNEL);
	cr_assert_eq(rule.role, SHUNT_ROLE_CLIENT);
}

Test(rules, field_errors)
{
	RULE_BAD("", "rule: empty rule");
	RULE_BAD("rule", "rule: empty rule");
	cr_assert_eq(shunt_config_parse_rule(&rule, NULL, err, sizeof(err)), -1);
	RULE_BAD("tcp * * *", "rule: bad transport 'tcp' (expected shm|fabric|auto|kernel)");
	RULE_BAD("shm", "rule: missing role");
	RULE_BAD("shm *", "rule: missing program");
	RULE_BAD("shm * *", "rule: missing address");
	RULE_BAD("shm * * * extra", "rule: unexpected 'extra' after the address");
	RULE_BAD("shm * * * # comment", "unexpected '#'");
	RULE_BAD("shm any * *", "rule: bad role 'any' (expected client|server|*)");
	RULE_BAD("rule rule * * *", "bad transport 'rule'");
}

Test(rules, program_glob_length)
{
	char text[128];

	snprintf(text, sizeof(text), "shm * %.63s *",
		 "0123456789012345678901234567890123456789012345678901234567890123456789");
	RULE_OK(text);
	cr_assert_eq(strlen(rule.prog), 63);
	snprintf(text, sizeof(text), "shm * %.64s *",
		 "0123456789012345678901234567890123456789012345678901234567890123456789");
	RULE_BAD(text, "too long (at most 63 characters)");
}

static void expect_addr(const char *spec, int family, const char *ip,
			unsigned prefix, unsigned lo, unsigned hi)
{
	char text[200];
	uint8_t want[16] = { 0 };

	snprintf(text, sizeof(text), "auto * * %s", spec);
	cr_assert_eq(parse_rule(text), 0, "'%s': %s", spec, err);
	cr_assert_eq(rule.family, family, "'%s' family %d", spec, rule.family);
	if (ip)
		cr_assert_eq(inet_pton(family, ip, want), 1);
	cr_assert_eq(memcmp(rule.addr, want, 16), 0, "'%s' address", spec);
	cr_assert_eq(rule.prefix, prefix, "'%s' prefix %u", spec, rule.prefix);
	cr_assert_eq(rule.port_lo, lo, "'%s' port_lo %u", spec, rule.port_lo);
	cr_assert_eq(rule.port_hi, hi, "'%s' port_hi %u", spec, rule.port_hi);
}

Test(rules, address_forms)
{
	expect_addr("*", 0, NULL, 0, 0, 65535);
	expect_addr("*:*", 0, NULL, 0, 0, 65535);
	expect_addr("*:80", 0, NULL, 0, 80, 80);
	expect_addr("*:80-90", 0, NULL, 0, 80, 90);
	expect_addr("1.2.3.4", AF_INET, "1.2.3.4", 32, 0, 65535);
	expect_addr("1.2.3.4:*", AF_INET, "1.2.3.4", 32, 0, 65535);
	expect_addr("1.2.3.4:443", AF_INET, "1.2.3.4", 32, 443, 443);
	expect_addr("10.0.0.0/8", AF_INET, "10.0.0.0", 8, 0, 65535);
	expect_addr("10.0.0.0/8:80-90", AF_INET, "10.0.0.0", 8, 80, 90);
	expect_addr("0.0.0.0/0", AF_INET, "0.0.0.0", 0, 0, 65535);
	expect_addr("1.2.3.4/32", AF_INET, "1.2.3.4", 32, 0, 65535);
	expect_addr("[::1]", AF_INET6, "::1", 128, 0, 65535);
	expect_addr("[::1]:6379", AF_INET6, "::1", 128, 6379, 6379);
	expect_addr("[::1]:*", AF_INET6, "::1", 128, 0, 65535);
	expect_addr("[2001:db8::/32]:443", AF_INET6, "2001:db8::", 32, 443, 443);
	expect_addr("[2001:db8::]/32:1-1024", AF_INET6, "2001:db8::", 32, 1, 1024);
	expect_addr("[2001:db8::]/32", AF_INET6, "2001:db8::", 32, 0, 65535);
	expect_addr("[2001:db8::/32]", AF_INET6, "2001:db8::", 32, 0, 65535);
	expect_addr("::1", AF_INET6, "::1", 128, 0, 65535);
	expect_addr("2001:db8::/32", AF_INET6, "2001:db8::", 32, 0, 65535);
	expect_addr("::/0", AF_INET6, "::", 0, 0, 65535);
	expect_addr("[::]/0:1-2", AF_INET6, "::", 0, 1, 2);
	expect_addr("2001:db8::1/128", AF_INET6, "2001:db8::1", 128, 0, 65535);
	/* IPv4-mapped rules are stored as IPv4 */
	expect_addr("::ffff:10.0.0.0/104", AF_INET, "10.0.0.0", 8, 0, 65535);
	expect_addr("[::ffff:1.2.3.4]:80", AF_INET, "1.2.3.4", 32, 80, 80);
	expect_addr("::ffff:0:0/96", AF_INET, "0.0.0.0", 0, 0, 65535);
	expect_addr("::fffe:0:0/95", AF_INET6, "::fffe:0:0", 95, 0, 65535);
}

Test(rules, address_errors)
{
	RULE_BAD("auto * * 1.2.3", "rule: bad IPv4 address '1.2.3'");
	RULE_BAD("auto * * 1.2.3.256", "bad IPv4 address '1.2.3.256'");
	RULE_BAD("auto * * localhost", "bad IPv4 address 'localhost'");
	RULE_BAD("auto * * 1.2.3.4:80:90", "bad port '80:90'");
	RULE_BAD("auto * * [::1", "bad address '[::1' (missing ']')");
	RULE_BAD("auto * * [::1]x", "(expected ':PORTS' after ']')");
	RULE_BAD("auto * * [1.2.3.4]", "bad IPv6 address '1.2.3.4'");
	RULE_BAD("auto * * [::g]", "bad IPv6 address '::g'");
	RULE_BAD("auto * * fe80::1%eth0", "bad IPv6 address 'fe80::1%eth0'");
	RULE_BAD("auto * * [::/32]/32", "(two prefixes)");
	RULE_BAD("auto * * *x", "bad address '*x' (expected * or *:PORTS)");
	RULE_BAD("auto * * */0", "bad address '*/0'");
	RULE_BAD("auto * * ::1:80:", "bad IPv6 address '::1:80:'");
}

Test(rules, prefixes)
{
	static const char text[] = "\n\nshm * * 10.0.0.0/33";

	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_parse(&cfg, "x.conf", text, strlen(text),
					err, sizeof(err)), -1);
	cr_assert_str_eq(err, "x.conf:3: rule: bad prefix '/33' for IPv4 address (expected 0..32)");
	RULE_BAD("auto * * [::1]/129", "rule: bad prefix '/129' for IPv6 address (expected 0..128)");
	RULE_BAD("auto * * ::/129", "bad prefix '/129' for IPv6");
	RULE_BAD("auto * * 10.0.0.0/", "bad prefix '/' for IPv4");
	RULE_BAD("auto * * 10.0.0.0/-1", "bad prefix '/-1'");
	RULE_BAD("auto * * 10.0.0.0/8/8", "bad prefix '/8/8'");
	RULE_BAD("auto * * 10.0.0.0/0008", "bad prefix '/0008'");
	RULE_BAD("auto * * 10.0.0.0/a", "bad prefix '/a'");
	RULE_OK("auto * * 10.0.0.0/008");
	cr_assert_eq(rule.prefix, 8);
	RULE_OK("auto * * ::/000");
	cr_assert_eq(rule.prefix, 0);
}

Test(rules, host_bits)
{
	RULE_BAD("auto * * 10.0.0.1/8",
		 "rule: host bits set in '10.0.0.1/8' (the network is 10.0.0.0/8)");
	RULE_BAD("auto * * 1.2.3.4/0", "(the network is 0.0.0.0/0)");
	RULE_BAD("auto * * 10.0.0.129/25:80", "host bits set in '10.0.0.129/25'");
	RULE_OK("auto * * 10.0.0.128/25");
	RULE_BAD("auto * * 10.0.0.129/25", "(the network is 10.0.0.128/25)");
	RULE_BAD("auto * * 2001:db8::1/32",
		 "rule: host bits set in '2001:db8::1/32' (the network is 2001:db8::/32)");
	RULE_BAD("auto * * [2001:db8:8000::]/32:80", "host bits set");
	RULE_BAD("auto * * [::1/127]", "(the network is ::/127)");
	RULE_OK("auto * * [2001:db8:8000::]/33");
}

Test(rules, ports)
{
	expect_addr("*:1", 0, NULL, 0, 1, 1);
	expect_addr("*:65535", 0, NULL, 0, 65535, 65535);
	expect_addr("*:1-65535", 0, NULL, 0, 1, 65535);
	expect_addr("*:5-5", 0, NULL, 0, 5, 5);
	expect_addr("*:0080", 0, NULL, 0, 80, 80);
	RULE_BAD("auto * * *:0", "rule: bad port '0' (expected 1..65535, LO-HI or *)");
	RULE_BAD("auto * * *:65536", "bad port '65536'");
	RULE_BAD("auto * * *:0-10", "bad port '0-10'");
	RULE_BAD("auto * * *:10-65536", "bad port '10-65536'");
	RULE_BAD("auto * * *:90-80", "rule: bad port range '90-80' (low port above high port)");
	RULE_BAD("auto * * *:80-", "bad port '80-'");
	RULE_BAD("auto * * *:-80", "bad port '-80'");
	RULE_BAD("auto * * *:1-2-3", "bad port '1-2-3'");
	RULE_BAD("auto * * *:http", "bad port 'http'");
	RULE_BAD("auto * * *:", "bad port ''");
	RULE_BAD("auto * * 1.2.3.4:", "bad port ''");
	RULE_BAD("auto * * [::1]:", "bad port ''");
	RULE_BAD("auto * * [::1]:*-5", "bad port '*-5'");
	RULE_BAD("auto * * *:99999999999999999999", "bad port");
}

Test(rules, in_file_with_line_numbers)
{
	OK("# rules\nkernel * * 127.0.0.53:53\n\nrule shm * * *\nauto * * * # all");
	cr_assert_eq(cfg.nrules, 3);
	cr_assert_eq(cfg.rules[0].line, 2);
	cr_assert_eq(cfg.rules[1].line, 4);
	cr_assert_eq(cfg.rules[2].line, 5);
	cr_assert_eq(cfg.rules[0].transport, SHUNT_TP_KERNEL);
	cr_assert_eq(cfg.rules[1].transport, SHUNT_TP_SHM);
	cr_assert_eq(cfg.rules[2].transport, SHUNT_TP_AUTO);
	/* '#' inside a word is not a comment */
	OK("shm * a#b *");
	cr_assert_str_eq(cfg.rules[0].prog, "a#b");
	BAD_EQ("\nshm * * 10.0.0.1/8",
	       "t.conf:2: rule: host bits set in '10.0.0.1/8' (the network is 10.0.0.0/8)");
	BAD_EQ("rule bogus * * *",
	       "t.conf:1: rule: bad transport 'bogus' (expected shm|fabric|auto|kernel)");
}

Test(rules, too_many)
{
	size_t sz = (SHUNT_MAX_RULES + 1) * 16 + 1;
	char *t = malloc(sz), *p = t;
	int i;

	for (i = 0; i < SHUNT_MAX_RULES; i++)
		p += sprintf(p, "shm * * *:%d\n", i + 1);
	*p = '\0';
	OK(t);
	cr_assert_eq(cfg.nrules, SHUNT_MAX_RULES);
	sprintf(p, "kernel * * *\n");
	BAD_EQ(t, "t.conf:257: too many rules (at most 256)");
	free(t);
}

/* ---- rules: matching --------------------------------------------------- */

Test(match, first_match_wins)
{
	OK("kernel * * 10.1.2.3\n"
	   "shm * * 10.0.0.0/8\n"
	   "fabric * * *\n");
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "p", "10.1.2.3", 80), 0);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "p", "10.1.2.4", 80), 1);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "p", "11.0.0.1", 80), 2);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "p", "::1", 80), 2);
}

Test(match, roles)
{
	OK("shm client * *:80\nfabric server * *:80\nkernel * * *:80");
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "p", "1.1.1.1", 80), 0);
	cr_assert_eq(match(SHUNT_ROLE_SERVER, "p", "1.1.1.1", 80), 1);
	cr_assert_eq(match(SHUNT_ROLE_ANY, "p", "1.1.1.1", 80), 2);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "p", "1.1.1.1", 81), -1);
}

Test(match, program_globs)
{
	OK("shm * redis-* *\n"
	   "fabric * nginx *\n"
	   "kernel * python3.[0-9]* *\n"
	   "auto * ?url *\n");
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "redis-server", "1.1.1.1", 1), 0);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "redis-", "1.1.1.1", 1), 0);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "redis", "1.1.1.1", 1), -1);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "nginx", "1.1.1.1", 1), 1);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "nginx2", "1.1.1.1", 1), -1);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "NGINX", "1.1.1.1", 1), -1);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "python3.11", "1.1.1.1", 1), 2);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "python3", "1.1.1.1", 1), -1);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "curl", "1.1.1.1", 1), 3);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "url", "1.1.1.1", 1), -1);
	OK("auto * * *");
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, "", "1.1.1.1", 1), 0);
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, NULL, "1.1.1.1", 1), 0);
	OK("auto * x* *");
	cr_assert_eq(match(SHUNT_ROLE_CLIENT, NULL, "1.1.1.1", 1), -1);
}

Test(match, ipv4_prefixes)
{
	cr_assert(rule_matches("10.0.0.0/8", "10.0.0.0", 1));
	cr_assert(rule_matches("10.0.0.0/8", "10.255.255.255", 1));
	cr_assert(!rule_matches("10.0.0.0/8", "11.0.0.0", 1));
	cr_assert(!rule_matches("10.0.0.0/8", "9.255.255.255", 1));
	cr_assert(rule_matches("10.0.0.128/25", "10.0.0.200", 1));
	cr_assert(!rule_matches("10.0.0.128/25", "10.0.0.127", 1));
	cr_assert(rule_matches("198.18.0.0/15", "198.19.1.1", 1));
	cr_assert(!rule_matches("198.18.0.0/15", "198.20.0.1", 1));
	cr_assert(rule_matches("0.0.0.0/0", "255.255.255.255", 1));
	cr_assert(rule_matches("0.0.0.0/0", "0.0.0.0", 1));
	cr_assert(!rule_matches("0.0.0.0/0", "::1", 1));
	cr_assert(!rule_matches("0.0.0.0/0", "2001:db8::1", 1));
	cr_assert(rule_matches("1.2.3.4/32", "1.2.3.4", 1));
	cr_assert(!rule_matches("1.2.3.4/32", "1.2.3.5", 1));
	cr_assert(rule_matches("1.2.3.4", "1.2.3.4", 1));
	cr_assert(!rule_matches("1.2.3.4", "1.2.3.5", 1));
}

Test(match, ipv6_prefixes)
{
	cr_assert(rule_matches("::1", "::1", 1));
	cr_assert(!rule_matches("::1", "::2", 1));
	cr_assert(!rule_matches("::1", "127.0.0.1", 1));
	cr_assert(rule_matches("[2001:db8::/32]", "2001:db8:ffff::1", 1));
	cr_assert(!rule_matches("[2001:db8::/32]", "2001:db9::1", 1));
	cr_assert(rule_matches("2001:db8:8000::/33", "2001:db8:8000::1", 1));
	cr_assert(!rule_matches("2001:db8:8000::/33", "2001:db8:7fff::1", 1));
	cr_assert(rule_matches("2001:db8::1/128", "2001:db8::1", 1));
	cr_assert(!rule_matches("2001:db8::1/128", "2001:db8::", 1));
	cr_assert(rule_matches("::/0", "ffff::1", 1));
	cr_assert(!rule_matches("::/0", "10.0.0.1", 1));
}

Test(match, ipv4_mapped_peers)
{
	/* mapped peers match IPv4 rules ... */
	cr_assert(rule_matches("10.0.0.0/8", "::ffff:10.1.2.3", 1));
	cr_assert(!rule_matches("10.0.0.0/8", "::ffff:11.1.2.3", 1));
	cr_assert(rule_matches("0.0.0.0/0", "::ffff:1.2.3.4", 1));
	cr_assert(rule_matches("127.0.0.1:6379", "::ffff:127.0.0.1", 6379));
	cr_assert(!rule_matches("127.0.0.1:6379", "::ffff:127.0.0.1", 6380));
	/* ... and mapped rules (stored as IPv4), not other IPv6 rules */
	cr_assert(rule_matches("::ffff:10.0.0.0/104", "10.9.9.9", 1));
	cr_assert(rule_matches("::ffff:10.0.0.0/104", "::ffff:10.9.9.9", 1));
	cr_assert(!rule_matches("::/0", "::ffff:10.9.9.9", 1));
	/* ::a.b.c.d (IPv4-compatible, deprecated) is plain IPv6 */
	cr_assert(!rule_matches("10.0.0.0/8", "::10.1.2.3", 1));
}

Test(match, any_address_and_ports)
{
	cr_assert(rule_matches("*", "1.2.3.4", 0));
	cr_assert(rule_matches("*", "::1", 65535));
	cr_assert(rule_matches("*:80-90", "::1", 80));
	cr_assert(rule_matches("*:80-90", "1.2.3.4", 90));
	cr_assert(!rule_matches("*:80-90", "1.2.3.4", 79));
	cr_assert(!rule_matches("*:80-90", "1.2.3.4", 91));
	cr_assert(rule_matches("*:65535", "1.2.3.4", 65535));
	cr_assert(!rule_matches("*:65535", "1.2.3.4", 65534));
	cr_assert(rule_matches("*:1", "1.2.3.4", 1));
	cr_assert(!rule_matches("*:1", "1.2.3.4", 0));
	cr_assert(rule_matches("10.0.0.0/8:6379", "10.0.0.1", 6379));
	cr_assert(!rule_matches("10.0.0.0/8:6379", "10.0.0.1", 6378));
	cr_assert(rule_matches("[::1]:1-1024", "::1", 1024));
	cr_assert(!rule_matches("[::1]:1-1024", "::1", 1025));
}

Test(match, unknown_or_short_address)
{
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	struct sockaddr_un_like { sa_family_t f; char p[20]; } su = { AF_UNIX, "" };

	OK("shm * * 10.0.0.0/8\nfabric * * *:80\nkernel * * *");
	cr_assert_eq(shunt_config_match(&cfg, SHUNT_ROLE_CLIENT, "p", NULL, 0),
		     &cfg.rules[2]);
	cr_assert_eq(shunt_config_match(&cfg, SHUNT_ROLE_CLIENT, "p",
					(struct sockaddr *)&s4, 4), &cfg.rules[2]);
	cr_assert_eq(shunt_config_match(&cfg, SHUNT_ROLE_CLIENT, "p",
					(struct sockaddr *)&su, sizeof(su)),
		     &cfg.rules[2]);
	OK("shm * * 10.0.0.0/8");
	cr_assert_null(shunt_config_match(&cfg, SHUNT_ROLE_CLIENT, "p", NULL, 0));
	cr_assert_null(shunt_config_match(NULL, SHUNT_ROLE_CLIENT, "p", NULL, 0));
}

Test(match, decide)
{
	socklen_t len;
	const struct sockaddr *a;

	OK("default_transport = kernel\nshm * * 127.0.0.0/8");
	a = sa("127.0.0.1", 1, &len);
	cr_assert_eq(shunt_config_decide(&cfg, SHUNT_ROLE_CLIENT, "p", a, len),
		     SHUNT_TP_SHM);
	a = sa("10.0.0.1", 1, &len);
	cr_assert_eq(shunt_config_decide(&cfg, SHUNT_ROLE_CLIENT, "p", a, len),
		     SHUNT_TP_KERNEL);
	OK("");
	cr_assert_eq(shunt_config_decide(&cfg, SHUNT_ROLE_SERVER, "p", a, len),
		     SHUNT_TP_AUTO);
}

/* ---- files ------------------------------------------------------------- */

Test(file, read_and_errors, .fini = cleanup_tmp)
{
	const char *p;
	char *big;
	size_t i;
	FILE *f;

	p = tmpfile_with("good.conf", "spin_us = 33\nkernel * * *\n");
	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_parse_file(&cfg, p, 1, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(cfg.spin_us, 33);
	cr_assert_eq(cfg.nrules, 1);

	p = tmpfile_with("bad.conf", "\n\n\nspin_us = x\n");
	cr_assert_eq(shunt_config_parse_file(&cfg, p, 1, err, sizeof(err)), -1);
	cr_assert(strstr(err, "/bad.conf:4: bad value 'x' for spin_us"), "%s", err);
	cr_assert(strncmp(err, tmpdir, strlen(tmpdir)) == 0, "%s", err);

	/* missing: error only when required */
	cr_assert_eq(shunt_config_parse_file(&cfg, "/nonexistent/shunt.conf", 0,
					     err, sizeof(err)), 0);
	cr_assert_eq(shunt_config_parse_file(&cfg, "/nonexistent/shunt.conf", 1,
					     err, sizeof(err)), -1);
	cr_assert_str_eq(err, "/nonexistent/shunt.conf: cannot read: No such file or directory");

	/* a directory, a path under a regular file: errors even when optional */
	cr_assert_eq(shunt_config_parse_file(&cfg, tmpdir, 0, err, sizeof(err)), -1);
	cr_assert(strstr(err, ": cannot read: Is a directory"), "%s", err);
	p = tmpfile_with("plain", "");
	{
		char sub[160];

		snprintf(sub, sizeof(sub), "%s/shunt.conf", p);
		cr_assert_eq(shunt_config_parse_file(&cfg, sub, 0, err,
						     sizeof(err)), -1);
		cr_assert(strstr(err, "/plain/shunt.conf: cannot read: Not a directory"),
			  "%s", err);
	}
	cr_assert_eq(shunt_config_parse_file(&cfg, "", 0, err, sizeof(err)), 0);
	cr_assert_eq(shunt_config_parse_file(&cfg, "", 1, err, sizeof(err)), -1);
	cr_assert_eq(shunt_config_parse_file(&cfg, NULL, 1, err, sizeof(err)), -1);

	/* size cap: 1 MiB is fine, one byte more is not */
	big = malloc(1024 * 1024 + 1);
	for (i = 0; i < 1024 * 1024; i += 64) {
		memset(big + i, ' ', 64);
		big[i] = '#';
		big[i + 63] = '\n';
	}
	p = tmpfile_with("big.conf", "");
	f = fopen(p, "w");
	fwrite(big, 1, 1024 * 1024, f);
	fclose(f);
	cr_assert_eq(shunt_config_parse_file(&cfg, p, 1, err, sizeof(err)), 0,
		     "%s", err);
	f = fopen(p, "a");
	fputc('\n', f);
	fclose(f);
	cr_assert_eq(shunt_config_parse_file(&cfg, p, 1, err, sizeof(err)), -1);
	cr_assert(strstr(err, "/big.conf: file too large (more than 1048576 bytes)"),
		  "%s", err);
	free(big);

	/* /dev/null reads as empty */
	cr_assert_eq(shunt_config_parse_file(&cfg, "/dev/null", 1, err,
					     sizeof(err)), 0);
}

/* ---- environment ------------------------------------------------------- */

Test(env, defaults_with_empty_config)
{
	env_set("SHUNT_CONFIG", "/dev/null");
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_str_empty(err);
	cr_assert_eq(cfg.spin_us, 20);
	cr_assert_eq(cfg.nrules, 0);
}

Test(env, default_file_is_optional)
{
	struct stat st;

	if (stat(SHUNT_DEFAULT_CONFIG, &st) == 0)
		cr_skip_test("%s exists on this machine", SHUNT_DEFAULT_CONFIG);
	cr_assert_eq(load(), 0, "%s", err);
	env_set("SHUNT_CONFIG", "");            /* empty = unset */
	cr_assert_eq(load(), 0, "%s", err);
}

Test(env, required_file)
{
	env_set("SHUNT_CONFIG", "/nonexistent/x.conf");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "/nonexistent/x.conf: cannot read: No such file or directory");
	env_set("SHUNT_CONFIG", "/");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "/: cannot read: Is a directory");
	env_set("SHUNT_CONFIG", "/dev/null/x");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "/dev/null/x: cannot read: Not a directory");
}

Test(env, precedence, .fini = cleanup_tmp)
{
	const char *p = tmpfile_with("p.conf",
		"spin_us = 1\nlog = error\nagent_port = 1000\nring_size = 8k\n"
		"kernel * file1 *\nkernel * file2 *\n");

	env_set("SHUNT_CONFIG", p);
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_eq(cfg.spin_us, 1);
	cr_assert_eq(cfg.log_level, SHUNT_LOG_ERROR);

	env_set("SHUNT_SPIN_US", "2");
	env_set("SHUNT_LOG", "info");
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_eq(cfg.spin_us, 2);
	cr_assert_eq(cfg.log_level, SHUNT_LOG_INFO);
	cr_assert_eq(cfg.agent_port, 1000);

	env_set("SHUNT_OPTIONS", " spin_us=3 ,, rule=shm * opt1 *,"
		"agent_port = 2000,rule = fabric * opt2 *,");
	env_set("SHUNT_RULES", "auto * env1 *; ;rule auto * env2 *;");
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_eq(cfg.spin_us, 3);                 /* options > SHUNT_X */
	cr_assert_eq(cfg.log_level, SHUNT_LOG_INFO);  /* SHUNT_X > file */
	cr_assert_eq(cfg.agent_port, 2000);
	cr_assert_eq(cfg.ring_size, 8192);            /* file > default */
	/* rules: SHUNT_OPTIONS, then SHUNT_RULES, then the file */
	cr_assert_eq(cfg.nrules, 6);
	cr_assert_str_eq(cfg.rules[0].prog, "opt1");
	cr_assert_str_eq(cfg.rules[1].prog, "opt2");
	cr_assert_str_eq(cfg.rules[2].prog, "env1");
	cr_assert_str_eq(cfg.rules[3].prog, "env2");
	cr_assert_str_eq(cfg.rules[4].prog, "file1");
	cr_assert_str_eq(cfg.rules[5].prog, "file2");
	cr_assert_eq(cfg.rules[0].line, 0);
	cr_assert_eq(cfg.rules[3].line, 0);
	cr_assert_eq(cfg.rules[4].line, 5);
	cr_assert_eq(cfg.rules[5].line, 6);
	cr_assert_eq(cfg.rules[1].transport, SHUNT_TP_FABRIC);
}

Test(env, rules_order_without_file_rules)
{
	env_set("SHUNT_CONFIG", "/dev/null");
	env_set("SHUNT_RULES", "kernel * b *");
	env_set("SHUNT_OPTIONS", "rule=shm * a *");
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_eq(cfg.nrules, 2);
	cr_assert_str_eq(cfg.rules[0].prog, "a");
	cr_assert_str_eq(cfg.rules[1].prog, "b");
}

Test(env, every_variable)
{
	env_set("SHUNT_CONFIG", "/dev/null");
	env_set("SHUNT_ENABLE", "off");
	env_set("SHUNT_LOG", "debug");
	env_set("SHUNT_LOG_FILE", "/tmp/s-%p.log");
	env_set("SHUNT_RUNDIR", "/tmp/rd");
	env_set("SHUNT_SHM_GROUP", "4242");
	env_set("SHUNT_SPIN_US", " 77 ");
	env_set("SHUNT_RING_SIZE", "256k");
	env_set("SHUNT_FABRIC_PROVIDER", "tcp");
	env_set("SHUNT_AGENT_PORT", "9000");
	env_set("SHUNT_DEFAULT_TRANSPORT", "kernel");
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_eq(cfg.enabled, 0);
	cr_assert_eq(cfg.log_level, SHUNT_LOG_DEBUG);
	cr_assert_str_eq(cfg.log_file, "/tmp/s-%p.log");
	cr_assert_str_eq(cfg.rundir, "/tmp/rd");
	cr_assert_str_eq(cfg.shm_group, "4242");
	cr_assert_eq(cfg.spin_us, 77);
	cr_assert_eq(cfg.ring_size, 256 * 1024);
	cr_assert_str_eq(cfg.fabric_provider, "tcp");
	cr_assert_eq(cfg.agent_port, 9000);
	cr_assert_eq(cfg.default_transport, SHUNT_TP_KERNEL);
}

Test(env, empty_variables, .fini = cleanup_tmp)
{
	const char *p = tmpfile_with("e.conf",
		"spin_us = 5\nlog_file = /tmp/f.log\nrundir = /tmp/r\n");

	env_set("SHUNT_CONFIG", p);
	env_set("SHUNT_SPIN_US", "");
	env_set("SHUNT_ENABLE", "  ");
	env_set("SHUNT_LOG", "");
	env_set("SHUNT_RING_SIZE", "");
	env_set("SHUNT_FABRIC_PROVIDER", "");
	env_set("SHUNT_AGENT_PORT", "");
	env_set("SHUNT_DEFAULT_TRANSPORT", "");
	env_set("SHUNT_OPTIONS", "");
	env_set("SHUNT_RULES", "");
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_eq(cfg.spin_us, 5);                 /* empty = unset */
	cr_assert_str_eq(cfg.log_file, "/tmp/f.log");
	env_set("SHUNT_LOG_FILE", "");                /* empty = default */
	env_set("SHUNT_RUNDIR", "");
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_str_empty(cfg.log_file);
	cr_assert_str_empty(cfg.rundir);
	cr_assert_eq(cfg.spin_us, 5);
}

Test(env, variable_errors)
{
	env_set("SHUNT_CONFIG", "/dev/null");
	env_set("SHUNT_SPIN_US", "abc");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_SPIN_US: bad value 'abc' for spin_us (expected an integer 0..1000000)");
	env_set("SHUNT_SPIN_US", "1");
	env_set("SHUNT_RUNDIR", "relative");
	cr_assert_eq(load(), -1);
	cr_assert(strstr(err, "SHUNT_RUNDIR: bad value 'relative' for rundir") == err,
		  "%s", err);
	env_set("SHUNT_RUNDIR", "/x");
	env_set("SHUNT_RING_SIZE", "1\n2");
	cr_assert_eq(load(), -1);
	cr_assert(strstr(err, "SHUNT_RING_SIZE: bad value '1?2' for ring_size") == err,
		  "%s", err);
	cr_assert_null(strchr(err, '\n'));
}

Test(env, options_errors)
{
	env_set("SHUNT_CONFIG", "/dev/null");
	env_set("SHUNT_OPTIONS", "spin_us=1,foo");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_OPTIONS: item 2 'foo': expected key=value");
	env_set("SHUNT_OPTIONS", "=5");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_OPTIONS: item 1 '=5': expected key=value");
	env_set("SHUNT_OPTIONS", "log=info, spn_us=5");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_OPTIONS: item 2: unknown key 'spn_us'");
	env_set("SHUNT_OPTIONS", "spin_us=-5");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_OPTIONS: item 1: bad value '-5' for spin_us (expected an integer 0..1000000)");
	env_set("SHUNT_OPTIONS", ",,rule=shm * * 10.0.0.0/33");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_OPTIONS: item 3: rule: bad prefix '/33' for IPv4 address (expected 0..32)");
	env_set("SHUNT_OPTIONS", "log_file=\"/tmp/x");
	cr_assert_eq(load(), -1);
	cr_assert(strstr(err, "SHUNT_OPTIONS: item 1: bad value '\"/tmp/x' for log_file (unterminated quote)"),
		  "%s", err);
}

Test(env, rules_errors)
{
	env_set("SHUNT_CONFIG", "/dev/null");
	env_set("SHUNT_RULES", "shm * * *; kernel * * 1.2.3.4:99999");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_RULES: item 2: rule: bad port '99999' (expected 1..65535, LO-HI or *)");
	env_set("SHUNT_RULES", "shm * *");
	cr_assert_eq(load(), -1);
	cr_assert(strstr(err, "SHUNT_RULES: item 1: rule: missing address") == err,
		  "%s", err);
}

Test(env, file_error_wins_and_is_located, .fini = cleanup_tmp)
{
	const char *p = tmpfile_with("l.conf", "# c\nlog = info\nrule shm * * 1.2.3.4/40\n");
	char want[256];

	env_set("SHUNT_CONFIG", p);
	env_set("SHUNT_SPIN_US", "abc");
	cr_assert_eq(load(), -1);
	snprintf(want, sizeof(want),
		 "%s:3: rule: bad prefix '/40' for IPv4 address (expected 0..32)", p);
	cr_assert_str_eq(err, want);
}

Test(env, too_many_rules_across_sources, .fini = cleanup_tmp)
{
	char *t = malloc(SHUNT_MAX_RULES * 16 + 1), *q = t;
	int i;

	for (i = 0; i < SHUNT_MAX_RULES; i++)
		q += sprintf(q, "shm * * *:%d\n", i + 1);
	env_set("SHUNT_CONFIG", tmpfile_with("m.conf", t));
	cr_assert_eq(load(), 0, "%s", err);
	env_set("SHUNT_RULES", "kernel * * *");
	cr_assert_eq(load(), -1);
	cr_assert_str_eq(err, "SHUNT_RULES: item 1: too many rules (at most 256)");
	free(t);
}

Test(env, real_environment)
{
	setenv("SHUNT_CONFIG", "/dev/null", 1);
	setenv("SHUNT_SPIN_US", "123", 1);
	setenv("SHUNT_OPTIONS", "rule=kernel * * *", 1);
	cr_assert_eq(shunt_config_load(&cfg, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.spin_us, 123);
	cr_assert_eq(cfg.nrules, 1);
}

/* ---- describe ---------------------------------------------------------- */

Test(describe, defaults_are_empty)
{
	char buf[64] = "junk";

	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_describe(&cfg, buf, sizeof(buf)), 0);
	cr_assert_str_empty(buf);
}

Test(describe, differences)
{
	char buf[512];
	size_t n;

	OK("enable = no\nlog = debug\nspin_us = 0\nring_size = 64k\n"
	   "kernel * * *:22\nshm * * *\n");
	n = shunt_config_describe(&cfg, buf, sizeof(buf));
	cr_assert_str_eq(buf, "enable=no log=debug spin_us=0 ring_size=64k rules=2");
	cr_assert_eq(n, strlen(buf));

	OK("log_file = /tmp/l-%p.log\nrundir = /run/x\n"
	   "fabric_provider = tcp;ofi_rxm\nagent_port = 1\n"
	   "default_transport = kernel\nring_size = 1G\n");
	shunt_config_describe(&cfg, buf, sizeof(buf));
	cr_assert_str_eq(buf, "log_file=/tmp/l-%p.log rundir=/run/x ring_size=1G "
			 "fabric_provider=tcp;ofi_rxm agent_port=1 default_transport=kernel");

	OK("shm_group = 61000\nrundir = /dev/shm/g");
	shunt_config_describe(&cfg, buf, sizeof(buf));
	cr_assert_str_eq(buf, "rundir=/dev/shm/g shm_group=61000");

	OK("ring_size = 4096\nlog_file = \"/tmp/a b\"\nlog=info");
	shunt_config_describe(&cfg, buf, sizeof(buf));
	cr_assert_str_eq(buf, "log=info log_file=\"/tmp/a b\" ring_size=4k");
	OK("ring_size = 1024k\nspin_us = 20");      /* same as the defaults */
	cr_assert_eq(shunt_config_describe(&cfg, buf, sizeof(buf)), 0);
	cr_assert_str_empty(buf);
}

Test(describe, truncation)
{
	char buf[12];
	size_t n;

	OK("enable = no\nlog = debug\n");
	n = shunt_config_describe(&cfg, buf, sizeof(buf));
	cr_assert_str_eq(buf, "enable=no l");
	cr_assert_eq(n, 11);
	cr_assert_eq(shunt_config_describe(&cfg, buf, 1), 0);
	cr_assert_str_empty(buf);
	cr_assert_eq(shunt_config_describe(&cfg, NULL, 0), 0);
}

Test(describe, round_trip)
{
	struct shunt_config again;
	char buf[1024], *tok, *save = NULL;

	OK("enable = off\nlog = info\nlog_file = /tmp/%p\nrundir = /r\n"
	   "spin_us = 999\nring_size = 32M\nfabric_provider = verbs\n"
	   "agent_port = 12\ndefault_transport = fabric\n");
	shunt_config_describe(&cfg, buf, sizeof(buf));
	shunt_config_defaults(&again);
	for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');

		cr_assert_not_null(eq);
		*eq = '\0';
		cr_assert_eq(shunt_config_set(&again, tok, eq + 1, "rt", err,
					      sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(memcmp(&again, &cfg, sizeof(cfg)), 0);
}

/* ---- every key's value, and where it came from -------------------------- */

/* The last origin named for each key (shunt_config_load_traced). */
static char origins[32][160];

static void seen(const char *key, const char *origin, void *arg)
{
	(void)arg;
	for (unsigned i = 0; shunt_config_key_name(i); i++)
		if (!strcmp(shunt_config_key_name(i), key))
			snprintf(origins[i], sizeof(origins[i]), "%s", origin);
}

static const char *origin_of(const char *key)
{
	for (unsigned i = 0; shunt_config_key_name(i); i++)
		if (!strcmp(shunt_config_key_name(i), key))
			return origins[i][0] ? origins[i] : "default";
	cr_assert_fail("no key %s", key);
	return NULL;
}

static const char *value_of(const char *key)
{
	static char buf[PATH_MAX + 8];
	cr_assert_geq(shunt_config_value(&cfg, key, buf, sizeof(buf)), 0, "%s", key);
	return buf;
}

Test(value, every_key_of_the_table)
{
	static const char *const want[] = {
		"enable", "log", "log_file", "rundir", "shm_group", "spin_us", "spin_max_us", "ring_size",
		"cma_min",
		"fabric_provider", "fabric_load_wait_ms", "agent_port", "default_transport",
		"offer_timeout_ms", "agent_secret", "agent_secret_file", "agent_cache_s", "agent_timeout_ms",
		"countersign_key_file", "sockmap", "sockmap_cgroup", "sockmap_pin",
	};
	unsigned n = 0;
	char buf[64];

	shunt_config_defaults(&cfg);
	while (shunt_config_key_name(n))
		n++;
	cr_assert_eq(n, sizeof(want) / sizeof(want[0]));
	for (unsigned i = 0; i < n; i++) {
		cr_assert_str_eq(shunt_config_key_name(i), want[i]);
		cr_assert_geq(shunt_config_value(&cfg, want[i], buf, sizeof(buf)), 0, "%s", want[i]);
	}
	cr_assert_str_eq(shunt_config_key_env(5), "SHUNT_SPIN_US");
	cr_assert_null(shunt_config_key_name(n + 5));
	cr_assert_eq(shunt_config_value(&cfg, "rule", buf, sizeof(buf)), -1);
	cr_assert_eq(shunt_config_value(&cfg, "spn_us", buf, sizeof(buf)), -1);
}

Test(value, as_a_file_writes_it)
{
	OK("ring_size = 64k\nlog_file = \"/tmp/a b\"\noffer_timeout_ms = 7\n"
	   "agent_secret = 0123456789abcdef0123\nshm_group = 61000\n");
	cr_assert_str_eq(value_of("ring_size"), "64k");
	cr_assert_str_eq(value_of("log_file"), "\"/tmp/a b\"");
	cr_assert_str_eq(value_of("offer_timeout_ms"), "7");
	cr_assert_str_eq(value_of("agent_secret"), "(set)");
	cr_assert_str_eq(value_of("shm_group"), "61000");
	cr_assert_str_eq(value_of("rundir"), "\"\"");
	cr_assert_str_eq(value_of("enable"), "yes");
	cr_assert_str_eq(value_of("default_transport"), "auto");
}

Test(value, sockmap_keys)
{
	OK("");
	cr_assert_eq(cfg.sockmap, 0);
	cr_assert_str_eq(value_of("sockmap"), "off");
	cr_assert_str_eq(value_of("sockmap_pin"), "/sys/fs/bpf/shunt");
	cr_assert_str_eq(value_of("sockmap_cgroup"), "\"\"");
	OK("sockmap = on\nsockmap_cgroup = /sys/fs/cgroup/apps\nsockmap_pin = /run/bpf/s\n");
	cr_assert_eq(cfg.sockmap, 1);
	cr_assert_str_eq(value_of("sockmap"), "on");
	cr_assert_str_eq(cfg.sockmap_cgroup, "/sys/fs/cgroup/apps");
	cr_assert_str_eq(cfg.sockmap_pin, "/run/bpf/s");
	BAD("sockmap = maybe\n", "expected on|off");
	BAD("sockmap_pin = bpf/shunt\n", "expected an absolute path");
	BAD("sockmap_pin = \"\"\n", "expected an absolute path");
	BAD("sockmap_cgroup = apps\n", "expected an absolute path");
}

Test(traced, each_value_names_its_source)
{
	const char *p = tmpfile_with("traced.conf", "# settings\nspin_us = 5\n"
				     "agent_secret = 0123456789abcdef0123\nring_size = 8k\n");
	memset(origins, 0, sizeof(origins));
	env_set("SHUNT_CONFIG", p);
	env_set("SHUNT_RING_SIZE", "16k");
	env_set("SHUNT_OPTIONS", "log=info,agent_secret_file=/etc/s");
	cr_assert_eq(shunt_config_load_traced(&cfg, fake_getenv, seen, NULL, err, sizeof(err)), 0,
		     "%s", err);
	char want[200];
	snprintf(want, sizeof(want), "%s:2", p);
	cr_assert_str_eq(origin_of("spin_us"), want);
	cr_assert_str_eq(origin_of("ring_size"), "SHUNT_RING_SIZE");
	cr_assert_str_eq(value_of("ring_size"), "16k");
	cr_assert_str_eq(origin_of("log"), "SHUNT_OPTIONS: item 1");
	/* the file's secret was cleared by the options' secret file */
	cr_assert_str_eq(origin_of("agent_secret_file"), "SHUNT_OPTIONS: item 2");
	cr_assert_str_eq(origin_of("agent_secret"), "SHUNT_OPTIONS: item 2");
	cr_assert_str_eq(value_of("agent_secret"), "\"\"");
	cr_assert_str_eq(origin_of("agent_port"), "default");
	/* the untraced load gives the same configuration */
	struct shunt_config traced = cfg;
	cr_assert_eq(load(), 0, "%s", err);
	cr_assert_eq(memcmp(&traced, &cfg, sizeof(cfg)), 0);
	cleanup_tmp();
}

/* ---- the shipped example ----------------------------------------------- */

Test(example, parses_to_defaults_plus_rules)
{
#ifdef SHUNT_EXAMPLE_CONF
	struct shunt_config d;
	socklen_t len;
	const struct sockaddr *a;

	shunt_config_defaults(&cfg);
	cr_assert_eq(shunt_config_parse_file(&cfg, SHUNT_EXAMPLE_CONF, 1, err,
					     sizeof(err)), 0, "%s", err);
	/* every setting is commented out: all defaults */
	shunt_config_defaults(&d);
	d.nrules = cfg.nrules;
	memcpy(d.rules, cfg.rules, sizeof(d.rules));
	cr_assert_eq(memcmp(&d, &cfg, sizeof(d)), 0);
	cr_assert_eq(cfg.nrules, 4);
	a = sa("127.0.0.53", 53, &len);
	cr_assert_eq(shunt_config_decide(&cfg, SHUNT_ROLE_CLIENT, "curl", a, len),
		     SHUNT_TP_KERNEL);
	a = sa("10.1.1.1", 22, &len);
	cr_assert_eq(shunt_config_decide(&cfg, SHUNT_ROLE_CLIENT, "x", a, len),
		     SHUNT_TP_KERNEL);
	a = sa("10.1.1.1", 2222, &len);
	cr_assert_eq(shunt_config_decide(&cfg, SHUNT_ROLE_CLIENT, "sshd", a, len),
		     SHUNT_TP_KERNEL);
	cr_assert_eq(shunt_config_decide(&cfg, SHUNT_ROLE_CLIENT, "redis-cli", a,
					 len), SHUNT_TP_AUTO);
#else
	cr_skip_test("SHUNT_EXAMPLE_CONF not defined");
#endif
}

/* The commented-out lines of the example are valid too. */
Test(example, commented_lines_are_valid)
{
#ifdef SHUNT_EXAMPLE_CONF
	FILE *f = fopen(SHUNT_EXAMPLE_CONF, "r");
	char line[1100];
	unsigned n = 0;

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (line[0] != '#' || line[1] == '#' || line[1] == ' ' ||
		    line[1] == '\n')
			continue;
		cr_assert_eq(parse_text(line + 1), 0, "'%s': %s", line + 1, err);
		n++;
	}
	fclose(f);
	cr_assert_geq(n, 12);
#else
	cr_skip_test("SHUNT_EXAMPLE_CONF not defined");
#endif
}
