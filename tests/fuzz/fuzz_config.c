/* libFuzzer target for the configuration parser.
 *
 * Each input is used as: a config file text (shunt_config_parse), a single
 * rule (shunt_config_parse_rule), a key=value pair (shunt_config_set), and,
 * split at newlines, as the values of SHUNT_OPTIONS, SHUNT_RULES and the
 * SHUNT_<KEY> variables for shunt_config_load.  Besides the sanitizers it
 * checks the invariants every successful parse must leave behind and that
 * every error message is one non-empty, bounded line.
 */
#include "shunt_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static void check_err(int rc, const char *err)
{
	size_t n = strnlen(err, SHUNT_ERR_MAX);

	CHECK(rc == 0 || rc == -1);
	if (rc == 0)
		return;
	CHECK(n > 0 && n < SHUNT_ERR_MAX);
	CHECK(strchr(err, '\n') == NULL);
	CHECK(strchr(err, '\r') == NULL);
}

static void check_rule(const struct shunt_rule *r)
{
	CHECK(r->transport >= SHUNT_TP_AUTO && r->transport <= SHUNT_TP_KERNEL);
	CHECK(r->role >= SHUNT_ROLE_ANY && r->role <= SHUNT_ROLE_SERVER);
	CHECK(memchr(r->prog, '\0', sizeof(r->prog)) != NULL);
	CHECK(r->prog[0] != '\0');
	CHECK(r->family == 0 || r->family == AF_INET || r->family == AF_INET6);
	CHECK(r->prefix <= (r->family == AF_INET ? 32u : 128u));
	if (r->family == 0)
		CHECK(r->prefix == 0);
	CHECK(r->port_lo <= r->port_hi);
	CHECK(r->port_lo >= 1 || (r->port_lo == 0 && r->port_hi == 65535));
}

static void check_config(const struct shunt_config *c)
{
	unsigned i;

	CHECK(c->enabled == 0 || c->enabled == 1);
	CHECK(c->log_level >= SHUNT_LOG_ERROR && c->log_level <= SHUNT_LOG_DEBUG);
	CHECK(memchr(c->log_file, '\0', sizeof(c->log_file)) != NULL);
	CHECK(memchr(c->rundir, '\0', sizeof(c->rundir)) != NULL);
	CHECK(c->rundir[0] == '\0' || c->rundir[0] == '/');
	CHECK(c->spin_us <= 1000000);
	CHECK(c->ring_size >= 4096 && c->ring_size <= (1u << 30));
	CHECK((c->ring_size & (c->ring_size - 1)) == 0);
	CHECK(memchr(c->fabric_provider, '\0', sizeof(c->fabric_provider)));
	CHECK(c->fabric_provider[0] != '\0');
	CHECK(c->agent_port >= 1);
	CHECK(c->default_transport >= SHUNT_TP_AUTO &&
	      c->default_transport <= SHUNT_TP_KERNEL);
	CHECK(c->nrules <= SHUNT_MAX_RULES);
	for (i = 0; i < c->nrules; i++)
		check_rule(&c->rules[i]);
}

static void exercise_match(const struct shunt_config *c, const uint8_t *data,
			   size_t size, const char *prog)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	uint8_t b[20] = { 0 };
	enum shunt_role role;
	const struct shunt_rule *r;

	memcpy(b, data, size < sizeof(b) ? size : sizeof(b));
	role = (enum shunt_role)(b[0] % 3);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	memcpy(&sin.sin_addr, b + 1, 4);
	sin.sin_port = (uint16_t)(b[5] | b[6] << 8);
	r = shunt_config_match(c, role, prog, (struct sockaddr *)&sin,
			       sizeof(sin));
	CHECK(!r || (r >= c->rules && r < c->rules + c->nrules));

	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	memcpy(&sin6.sin6_addr, b + 2, 16);
	sin6.sin6_port = (uint16_t)(b[18] | b[19] << 8);
	r = shunt_config_match(c, role, prog, (struct sockaddr *)&sin6,
			       sizeof(sin6));
	CHECK(!r || (r >= c->rules && r < c->rules + c->nrules));

	/* the same IPv4 address, mapped, must give the same answer */
	memset(&sin6.sin6_addr, 0, 16);
	sin6.sin6_addr.s6_addr[10] = 0xff;
	sin6.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&sin6.sin6_addr.s6_addr[12], b + 1, 4);
	sin6.sin6_port = sin.sin_port;
	CHECK(shunt_config_match(c, role, prog, (struct sockaddr *)&sin6,
				 sizeof(sin6)) ==
	      shunt_config_match(c, role, prog, (struct sockaddr *)&sin,
				 sizeof(sin)));

	(void)shunt_config_decide(c, role, prog, NULL, 0);
	(void)shunt_config_decide(c, role, NULL, (struct sockaddr *)&sin, 3);
}

static void exercise_describe(const struct shunt_config *c)
{
	char big[2 * PATH_MAX + 512], small[13];
	size_t n;

	n = shunt_config_describe(c, big, sizeof(big));
	CHECK(n == strlen(big));
	CHECK(strchr(big, '\n') == NULL);
	n = shunt_config_describe(c, small, sizeof(small));
	CHECK(n == strlen(small) && n < sizeof(small));
}

/* Environment for shunt_config_load: newline-separated fields of the input. */
static const char *env_names[] = {
	"SHUNT_OPTIONS", "SHUNT_RULES", "SHUNT_ENABLE", "SHUNT_LOG",
	"SHUNT_LOG_FILE", "SHUNT_RUNDIR", "SHUNT_SPIN_US", "SHUNT_RING_SIZE",
	"SHUNT_FABRIC_PROVIDER", "SHUNT_AGENT_PORT", "SHUNT_DEFAULT_TRANSPORT",
};
#define NENV (sizeof(env_names) / sizeof(env_names[0]))
static const char *env_values[NENV];

static const char *fake_getenv(const char *name)
{
	size_t i;

	if (strcmp(name, "SHUNT_CONFIG") == 0)
		return "/dev/null";
	for (i = 0; i < NENV; i++)
		if (strcmp(name, env_names[i]) == 0)
			return env_values[i];
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct shunt_config c;
	struct shunt_rule r;
	char err[SHUNT_ERR_MAX];
	char *s, *p, *eq;
	size_t i;
	int rc;

	/* 1. config text, not NUL-terminated (exact-size heap copy, so ASan
	 *    catches any read past the end) */
	s = malloc(size ? size : 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	shunt_config_defaults(&c);
	memset(err, 0, sizeof(err));
	rc = shunt_config_parse(&c, "fuzz.conf", s, size, err, sizeof(err));
	check_err(rc, err);
	if (rc == 0) {
		check_config(&c);
		exercise_match(&c, data, size, "prog");
		exercise_describe(&c);
	}
	/* a tiny error buffer must be safe too */
	(void)shunt_config_parse(&c, NULL, s, size, err, 7);
	CHECK(strlen(err) < 7);
	free(s);

	/* the rest wants a NUL-terminated string */
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	/* 2. one rule */
	rc = shunt_config_parse_rule(&r, s, err, sizeof(err));
	check_err(rc, err);
	if (rc == 0) {
		check_rule(&r);
		shunt_config_defaults(&c);
		c.rules[0] = r;
		c.nrules = 1;
		exercise_match(&c, data, size, s);
	}

	/* 3. key=value */
	eq = strchr(s, '=');
	if (eq) {
		*eq = '\0';
		shunt_config_defaults(&c);
		rc = shunt_config_set(&c, s, eq + 1, "fuzz", err, sizeof(err));
		check_err(rc, err);
		if (rc == 0)
			check_config(&c);
		*eq = '=';
	}

	/* 4. environment: newline-separated fields */
	p = s;
	for (i = 0; i < NENV; i++) {
		char *nl;

		if (!p) {
			env_values[i] = NULL;
			continue;
		}
		env_values[i] = p;
		nl = strchr(p, '\n');
		if (nl) {
			*nl = '\0';
			p = nl + 1;
		} else {
			p = NULL;
		}
	}
	rc = shunt_config_load(&c, fake_getenv, err, sizeof(err));
	check_err(rc, err);
	if (rc == 0) {
		check_config(&c);
		exercise_match(&c, data, size, "x");
		exercise_describe(&c);
	}
	for (i = 0; i < NENV; i++)
		env_values[i] = NULL;
	free(s);
	return 0;
}
