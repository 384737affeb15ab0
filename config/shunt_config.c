/* shunt configuration: settings, the config file, the environment.
 *
 * Pure code: no globals, no logging.  The only allocation is the buffer a
 * config file is read into.  File I/O goes through stdio (fopen/fread/
 * fclose), whose internal read/close calls do not go through the PLT, so
 * loading the configuration never enters the preload layer's own read()/
 * close() wrappers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "shunt_config.h"
#include "shunt_config_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define LINE_MAX_CHARS 1023              /* longest accepted line */
#define FILE_MAX_BYTES (1024 * 1024)     /* largest accepted file */

#define RULE_TEXT_MAX 1024               /* longest rule text from env */

#define DEF_SPIN_US 20u
#define DEF_SPIN_MAX_US 100u
#define DEF_RING_SIZE ((size_t)1 << 20)
/* Off: on the machines measured a process_vm_writev costs more CPU per byte
 * than the ring's two copies (docs/ARCHITECTURE.md, "Single copy"). */
#define DEF_CMA_MIN ((size_t)0)
#define MAX_CMA_MIN ((uint64_t)1 << 30)
#define DEF_AGENT_PORT 7476u
#define DEF_SOCKMAP_PIN "/sys/fs/bpf/shunt" /* SHUNT_SM_PIN_DEFAULT */
#define DEF_OFFER_TIMEOUT_MS 500u
#define MAX_OFFER_TIMEOUT_MS 60000u
#define MAX_FABRIC_LOAD_WAIT_MS 60000u
#define DEF_AGENT_CACHE_S 30u
#define MAX_AGENT_CACHE_S 86400u
#define DEF_AGENT_TIMEOUT_MS 250u
#define MAX_AGENT_TIMEOUT_MS 10000u
#define MAX_SPIN_US 1000000u
#define MIN_RING_SIZE ((uint64_t)SHUNT_RING_MIN)
#define MAX_RING_SIZE ((uint64_t)SHUNT_RING_MAX)

const struct shunt_config_key shunt_config_keys[K_COUNT] = {
	[K_ENABLE] = { "enable", "SHUNT_ENABLE", 0 },
	[K_LOG] = { "log", "SHUNT_LOG", 0 },
	[K_LOG_FILE] = { "log_file", "SHUNT_LOG_FILE", 1 },
	[K_RUNDIR] = { "rundir", "SHUNT_RUNDIR", 1 },
	[K_SHM_GROUP] = { "shm_group", "SHUNT_SHM_GROUP", 1 },
	[K_SPIN_US] = { "spin_us", "SHUNT_SPIN_US", 0 },
	[K_SPIN_MAX_US] = { "spin_max_us", "SHUNT_SPIN_MAX_US", 0 },
	[K_RING_SIZE] = { "ring_size", "SHUNT_RING_SIZE", 0 },
	[K_CMA_MIN] = { "cma_min", "SHUNT_CMA_MIN", 0 },
	[K_FABRIC_PROVIDER] = { "fabric_provider", "SHUNT_FABRIC_PROVIDER", 0 },
	[K_FABRIC_LOAD_WAIT_MS] = { "fabric_load_wait_ms", "SHUNT_FABRIC_LOAD_WAIT_MS", 0 },
	[K_AGENT_PORT] = { "agent_port", "SHUNT_AGENT_PORT", 0 },
	[K_DEFAULT_TRANSPORT] = { "default_transport",
				  "SHUNT_DEFAULT_TRANSPORT", 0 },
	[K_OFFER_TIMEOUT_MS] = { "offer_timeout_ms", "SHUNT_OFFER_TIMEOUT_MS", 0 },
	[K_AGENT_SECRET] = { "agent_secret", "SHUNT_AGENT_SECRET", 1 },
	[K_AGENT_SECRET_FILE] = { "agent_secret_file", "SHUNT_AGENT_SECRET_FILE", 1 },
	[K_AGENT_CACHE_S] = { "agent_cache_s", "SHUNT_AGENT_CACHE_S", 0 },
	[K_AGENT_TIMEOUT_MS] = { "agent_timeout_ms", "SHUNT_AGENT_TIMEOUT_MS", 0 },
	[K_COUNTERSIGN_KEY_FILE] = { "countersign_key_file", "SHUNT_COUNTERSIGN_KEY_FILE", 1 },
	[K_SOCKMAP] = { "sockmap", "SHUNT_SOCKMAP", 0 },
	[K_SOCKMAP_CGROUP] = { "sockmap_cgroup", "SHUNT_SOCKMAP_CGROUP", 1 },
	[K_SOCKMAP_PIN] = { "sockmap_pin", "SHUNT_SOCKMAP_PIN", 0 },
	[K_RULE] = { "rule", NULL, 0 },
};

/* ---- small helpers ----------------------------------------------------- */

static int is_ws(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' ||
	       ch == '\v' || ch == '\f';
}

static int is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* Trim whitespace around s[0..*n). */
static const char *trim(const char *s, size_t *n)
{
	while (*n && is_ws(s[0])) {
		s++;
		(*n)--;
	}
	while (*n && is_ws(s[*n - 1]))
		(*n)--;
	return s;
}

/* Copy s[0..n) for use inside '...' in a message: printable ASCII kept,
 * anything else becomes '?', long input is cut with "...". */
void shunt_config_quote(char *out, size_t outsz, const char *s, size_t n)
{
	size_t i, o = 0;

	if (outsz == 0)
		return;
	for (i = 0; i < n && o + 1 < outsz; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i == QUOTE_MAX) {
			const char *dots = "...";

			while (*dots && o + 1 < outsz)
				out[o++] = *dots++;
			break;
		}
		out[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	out[o] = '\0';
}

int shunt_config_fail(char *err, size_t errlen, const char *origin, const char *fmt, ...)
{
	va_list ap;
	char msg[SHUNT_ERR_MAX];

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		if (origin && *origin)
			snprintf(err, errlen, "%s: %s", origin, msg);
		else
			snprintf(err, errlen, "%s", msg);
	}
	return -1;
}

static int span_is(const char *s, size_t n, const char *w)
{
	return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

/* Strict unsigned decimal: digits only, no sign, no junk, value <= max. */
static int parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		unsigned d;

		if (!is_digit(s[i]))
			return -1;
		d = (unsigned)(s[i] - '0');
		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* ---- names ------------------------------------------------------------- */

const char *shunt_transport_name(enum shunt_transport t)
{
	switch (t) {
	case SHUNT_TP_AUTO: return "auto";
	case SHUNT_TP_SHM: return "shm";
	case SHUNT_TP_FABRIC: return "fabric";
	case SHUNT_TP_KERNEL: return "kernel";
	}
	return "?";
}

const char *shunt_role_name(enum shunt_role r)
{
	switch (r) {
	case SHUNT_ROLE_ANY: return "*";
	case SHUNT_ROLE_CLIENT: return "client";
	case SHUNT_ROLE_SERVER: return "server";
	}
	return "?";
}

const char *shunt_log_level_name(enum shunt_log_level l)
{
	switch (l) {
	case SHUNT_LOG_ERROR: return "error";
	case SHUNT_LOG_WARN: return "warn";
	case SHUNT_LOG_INFO: return "info";
	case SHUNT_LOG_DEBUG: return "debug";
	}
	return "?";
}

/* ---- settings ---------------------------------------------------------- */

void shunt_config_defaults(struct shunt_config *c)
{
	memset(c, 0, sizeof(*c));
	c->enabled = 1;
	c->log_level = SHUNT_LOG_WARN;
	c->spin_us = DEF_SPIN_US;
	c->spin_max_us = DEF_SPIN_MAX_US;
	c->ring_size = DEF_RING_SIZE;
	c->cma_min = DEF_CMA_MIN;
	strcpy(c->fabric_provider, "auto");
	c->agent_port = DEF_AGENT_PORT;
	c->offer_timeout_ms = DEF_OFFER_TIMEOUT_MS;
	c->agent_cache_s = DEF_AGENT_CACHE_S;
	c->agent_timeout_ms = DEF_AGENT_TIMEOUT_MS;
	c->default_transport = SHUNT_TP_AUTO;
	strcpy(c->sockmap_pin, DEF_SOCKMAP_PIN);
}

int shunt_config_is_default(const struct shunt_config *c, int key)
{
	switch ((enum key_id)key) {
	case K_ENABLE: return c->enabled == 1;
	case K_LOG: return c->log_level == SHUNT_LOG_WARN;
	case K_LOG_FILE: return !c->log_file[0];
	case K_RUNDIR: return !c->rundir[0];
	case K_SHM_GROUP: return !c->shm_group[0];
	case K_SPIN_US: return c->spin_us == DEF_SPIN_US;
	case K_SPIN_MAX_US: return c->spin_max_us == DEF_SPIN_MAX_US;
	case K_RING_SIZE: return c->ring_size == DEF_RING_SIZE;
	case K_CMA_MIN: return c->cma_min == DEF_CMA_MIN;
	case K_FABRIC_PROVIDER:
		return !strncmp(c->fabric_provider, "auto", sizeof(c->fabric_provider));
	case K_FABRIC_LOAD_WAIT_MS: return c->fabric_load_wait_ms == 0;
	case K_AGENT_PORT: return c->agent_port == DEF_AGENT_PORT;
	case K_DEFAULT_TRANSPORT: return c->default_transport == SHUNT_TP_AUTO;
	case K_OFFER_TIMEOUT_MS: return c->offer_timeout_ms == DEF_OFFER_TIMEOUT_MS;
	case K_AGENT_SECRET: return !c->agent_secret[0];
	case K_AGENT_SECRET_FILE: return !c->agent_secret_file[0];
	case K_AGENT_CACHE_S: return c->agent_cache_s == DEF_AGENT_CACHE_S;
	case K_AGENT_TIMEOUT_MS: return c->agent_timeout_ms == DEF_AGENT_TIMEOUT_MS;
	case K_COUNTERSIGN_KEY_FILE: return !c->countersign_key_file[0];
	case K_SOCKMAP: return c->sockmap == 0;
	case K_SOCKMAP_CGROUP: return !c->sockmap_cgroup[0];
	case K_SOCKMAP_PIN: return !strcmp(c->sockmap_pin, DEF_SOCKMAP_PIN);
	case K_RULE: return c->nrules == 0;
	case K_COUNT: break;
	}
	return 1;
}

static int parse_transport(const char *v, size_t n, enum shunt_transport *t)
{
	if (span_is(v, n, "auto"))
		*t = SHUNT_TP_AUTO;
	else if (span_is(v, n, "shm"))
		*t = SHUNT_TP_SHM;
	else if (span_is(v, n, "fabric"))
		*t = SHUNT_TP_FABRIC;
	else if (span_is(v, n, "kernel"))
		*t = SHUNT_TP_KERNEL;
	else
		return -1;
	return 0;
}

/* Size with an optional k/m/g (binary) suffix. */
static int parse_size(const char *v, size_t n, uint64_t *out)
{
	unsigned shift = 0;
	uint64_t x;

	if (n == 0)
		return -1;
	switch (v[n - 1]) {
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	}
	if (shift)
		n--;
	if (parse_u64(v, n, UINT64_MAX >> shift, &x))
		return -1;
	*out = x << shift;
	return 0;
}

/* shm_group: "" (none), a number below (gid_t)-1, or a name as useradd
 * accepts them: letters, digits, '_', '.', '-' (not first), a final '$'. */
static int group_check(const char *v, size_t n)
{
	size_t i, digits = 0;
	uint64_t x;

	if (n == 0)
		return 0;
	if (n > SHUNT_GROUP_MAX || v[0] == '-')
		return -1;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)v[i];
		if (ch >= '0' && ch <= '9')
			digits++;
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
			   ch == '.' || ch == '-' || (ch == '$' && i == n - 1)))
			return -1;
	}
	if (digits == n)
		return parse_u64(v, n, 4294967294u, &x);
	return 0;
}

int shunt_config_group_id(const struct shunt_config *c, unsigned *gid)
{
	uint64_t x;
	size_t n = strlen(c->shm_group);

	if (!n || strspn(c->shm_group, "0123456789") != n ||
	    parse_u64(c->shm_group, n, 4294967294u, &x))
		return 0;
	*gid = (unsigned)x;
	return 1;
}

/* A path value: at most PATH_MAX-1 bytes, no control characters. */
static int copy_path(char *dst, const char *v, size_t n)
{
	size_t i;

	if (n >= PATH_MAX)
		return -1;
	for (i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return -1;
	memcpy(dst, v, n);
	dst[n] = '\0';
	return 0;
}

/* copy_path, for settings that take an absolute path or "" (unset). */
static int copy_abs_path(char *dst, const char *v, size_t n)
{
	return (n && v[0] != '/') || copy_path(dst, v, n);
}

static int add_rule(struct shunt_config *c, const char *text, size_t n,
		    unsigned line, const char *origin, char *err, size_t errlen)
{
	char buf[RULE_TEXT_MAX];
	char msg[SHUNT_ERR_MAX];
	char q[QUOTE_MAX + 4];

	if (n >= sizeof(buf)) {
		shunt_config_quote(q, sizeof(q), text, n);
		return shunt_config_fail(err, errlen, origin,
			    "rule: '%s' too long (at most %zu characters)", q,
			    sizeof(buf) - 1);
	}
	if (memchr(text, '\0', n))
		return shunt_config_fail(err, errlen, origin, "rule: NUL byte in rule");
	if (c->nrules >= SHUNT_MAX_RULES)
		return shunt_config_fail(err, errlen, origin, "too many rules (at most %d)",
			    SHUNT_MAX_RULES);
	memcpy(buf, text, n);
	buf[n] = '\0';
	if (shunt_config_parse_rule(&c->rules[c->nrules], buf, msg,
				    sizeof(msg)))
		return shunt_config_fail(err, errlen, origin, "%s", msg);
	c->rules[c->nrules].line = line;
	c->nrules++;
	return 0;
}

static int find_key(const char *key, size_t n)
{
	int k;

	for (k = 0; k < K_COUNT; k++)
		if (span_is(key, n, shunt_config_keys[k].name))
			return k;
	return -1;
}

/* Set key[0..kn) from value[0..vn).  The value is trimmed; one pair of
 * surrounding double quotes is removed. */
static int set_value(struct shunt_config *c, const char *key, size_t kn,
		    const char *val, size_t vn, unsigned line,
		    const char *origin, char *err, size_t errlen)
{
	char q[QUOTE_MAX + 4];
	const char *name;
	uint64_t x;
	size_t i;
	int k;

	key = trim(key, &kn);
	val = trim(val, &vn);
	k = find_key(key, kn);
	if (k < 0) {
		shunt_config_quote(q, sizeof(q), key, kn);
		return shunt_config_fail(err, errlen, origin, "unknown key '%s'", q);
	}
	name = shunt_config_keys[k].name;
	if (k == K_RULE)
		return add_rule(c, val, vn, line, origin, err, errlen);

	if (vn && val[0] == '"') {
		if (vn < 2 || val[vn - 1] != '"') {
			shunt_config_quote(q, sizeof(q), val, vn);
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (unterminated quote)",
				    q, name);
		}
		val++;
		vn -= 2;
	}
	if (memchr(val, '\0', vn))
		return shunt_config_fail(err, errlen, origin, "NUL byte in value for %s",
			    name);
	shunt_config_quote(q, sizeof(q), val, vn);

	switch ((enum key_id)k) {
	case K_ENABLE:
		if (span_is(val, vn, "yes") || span_is(val, vn, "true") ||
		    span_is(val, vn, "on") || span_is(val, vn, "1"))
			c->enabled = 1;
		else if (span_is(val, vn, "no") || span_is(val, vn, "false") ||
			 span_is(val, vn, "off") || span_is(val, vn, "0"))
			c->enabled = 0;
		else
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected yes|no|true|false|on|off|1|0)",
				    q, name);
		return 0;

	case K_LOG:
		if (span_is(val, vn, "error"))
			c->log_level = SHUNT_LOG_ERROR;
		else if (span_is(val, vn, "warn") || span_is(val, vn, "warning"))
			c->log_level = SHUNT_LOG_WARN;
		else if (span_is(val, vn, "info"))
			c->log_level = SHUNT_LOG_INFO;
		else if (span_is(val, vn, "debug"))
			c->log_level = SHUNT_LOG_DEBUG;
		else
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected error|warn|info|debug)",
				    q, name);
		return 0;

	case K_LOG_FILE:
		for (i = 0; i < vn; i++) {
			if (val[i] != '%')
				continue;
			if (i + 1 < vn && (val[i + 1] == 'p' || val[i + 1] == '%')) {
				i++;
				continue;
			}
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (only %%p and %%%% may follow %%)",
				    q, name);
		}
		if (copy_path(c->log_file, val, vn))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected a path, at most %d characters)",
				    q, name, PATH_MAX - 1);
		return 0;

	case K_RUNDIR:
		if (copy_abs_path(c->rundir, val, vn))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an absolute path or \"\")",
				    q, name);
		return 0;

	case K_SHM_GROUP:
		if (group_check(val, vn))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected a group name or a number below 4294967295, or \"\")",
				    q, name);
		memcpy(c->shm_group, val, vn);
		c->shm_group[vn] = '\0';
		return 0;

	case K_SPIN_US:
		if (parse_u64(val, vn, MAX_SPIN_US, &x))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an integer 0..%u)",
				    q, name, MAX_SPIN_US);
		c->spin_us = (unsigned)x;
		return 0;

	case K_SPIN_MAX_US:
		if (parse_u64(val, vn, MAX_SPIN_US, &x))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an integer 0..%u)",
				    q, name, MAX_SPIN_US);
		c->spin_max_us = (unsigned)x;
		return 0;

	case K_RING_SIZE:
		if (parse_size(val, vn, &x) || x < MIN_RING_SIZE ||
		    x > MAX_RING_SIZE || (x & (x - 1)) != 0)
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected a power of two 4096..1G, optional k/m/g suffix)",
				    q, name);
		c->ring_size = (size_t)x;
		return 0;

	case K_CMA_MIN:
		if (parse_size(val, vn, &x) || (x && x < SHUNT_CMA_MIN_LOW) || x > MAX_CMA_MIN)
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected 0 (off) or 16k..1G, optional k/m/g suffix)",
				    q, name);
		c->cma_min = (size_t)x;
		return 0;

	case K_FABRIC_PROVIDER:
		for (i = 0; i < vn; i++) {
			char ch = val[i];

			if (!((ch >= 'a' && ch <= 'z') || is_digit(ch) ||
			      ch == '_' || ch == ';' || ch == '-'))
				break;
		}
		if (vn == 0 || i < vn || vn >= sizeof(c->fabric_provider))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected a provider name of [a-z0-9_;-], at most %zu characters)",
				    q, name, sizeof(c->fabric_provider) - 1);
		memcpy(c->fabric_provider, val, vn);
		c->fabric_provider[vn] = '\0';
		return 0;

	case K_AGENT_PORT:
		if (parse_u64(val, vn, 65535, &x) || x == 0)
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected a port 1..65535)",
				    q, name);
		c->agent_port = (uint16_t)x;
		return 0;

	case K_DEFAULT_TRANSPORT: {
		enum shunt_transport t;

		if (parse_transport(val, vn, &t))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected auto|shm|fabric|kernel)",
				    q, name);
		c->default_transport = t;
		return 0;
	}

	case K_OFFER_TIMEOUT_MS:
		if (parse_u64(val, vn, MAX_OFFER_TIMEOUT_MS, &x) || x == 0)
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an integer 1..%u)",
				    q, name, MAX_OFFER_TIMEOUT_MS);
		c->offer_timeout_ms = (unsigned)x;
		return 0;

	case K_AGENT_SECRET:
		/* Printable ASCII without spaces, so it survives every source
		 * (file, environment, SHUNT_OPTIONS) the same way.  Setting
		 * one of agent_secret / agent_secret_file clears the other:
		 * the source of higher precedence wins. */
		for (i = 0; i < vn; i++)
			if ((unsigned char)val[i] <= 0x20 || (unsigned char)val[i] >= 0x7f ||
			    val[i] == ',')
				break;
		if (i < vn || (vn && vn < SHUNT_AGENT_SECRET_MIN) || vn > SHUNT_AGENT_SECRET_MAX)
			return shunt_config_fail(err, errlen, origin,
				    "bad value for %s (expected %d..%d printable characters, no space or comma)",
				    name, SHUNT_AGENT_SECRET_MIN, SHUNT_AGENT_SECRET_MAX);
		memcpy(c->agent_secret, val, vn);
		c->agent_secret[vn] = '\0';
		if (vn)
			c->agent_secret_file[0] = '\0';
		return 0;

	case K_AGENT_SECRET_FILE:
		if (copy_abs_path(c->agent_secret_file, val, vn))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an absolute path or \"\")",
				    q, name);
		if (vn)
			c->agent_secret[0] = '\0';
		return 0;

	case K_COUNTERSIGN_KEY_FILE:
		/* shuntd's alone: read by the agent, never by a shim. */
		if (copy_abs_path(c->countersign_key_file, val, vn))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an absolute path or \"\")",
				    q, name);
		return 0;

	case K_SOCKMAP:
		if (span_is(val, vn, "yes") || span_is(val, vn, "true") ||
		    span_is(val, vn, "on") || span_is(val, vn, "1"))
			c->sockmap = 1;
		else if (span_is(val, vn, "no") || span_is(val, vn, "false") ||
			 span_is(val, vn, "off") || span_is(val, vn, "0"))
			c->sockmap = 0;
		else
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected on|off)", q, name);
		return 0;

	case K_SOCKMAP_CGROUP:
		if (copy_abs_path(c->sockmap_cgroup, val, vn))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an absolute path or \"\")",
				    q, name);
		return 0;

	case K_SOCKMAP_PIN:
		if (vn == 0 || copy_abs_path(c->sockmap_pin, val, vn))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an absolute path)",
				    q, name);
		return 0;

	case K_AGENT_CACHE_S:
		if (parse_u64(val, vn, MAX_AGENT_CACHE_S, &x))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an integer 0..%u)",
				    q, name, MAX_AGENT_CACHE_S);
		c->agent_cache_s = (unsigned)x;
		return 0;

	case K_FABRIC_LOAD_WAIT_MS:
		if (parse_u64(val, vn, MAX_FABRIC_LOAD_WAIT_MS, &x))
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an integer 0..%u)",
				    q, name, MAX_FABRIC_LOAD_WAIT_MS);
		c->fabric_load_wait_ms = (unsigned)x;
		return 0;

	case K_AGENT_TIMEOUT_MS:
		if (parse_u64(val, vn, MAX_AGENT_TIMEOUT_MS, &x) || x == 0)
			return shunt_config_fail(err, errlen, origin,
				    "bad value '%s' for %s (expected an integer 1..%u)",
				    q, name, MAX_AGENT_TIMEOUT_MS);
		c->agent_timeout_ms = (unsigned)x;
		return 0;

	case K_RULE:
	case K_COUNT:
		break;
	}
	return shunt_config_fail(err, errlen, origin, "internal error for key %s", name);
}

/* Who is told which source set a key (shunt_config_load_traced). */
struct tracer {
	shunt_config_seen_fn *fn;
	void *arg;
};

/* set_value, then the tracer told.  Setting one of agent_secret and
 * agent_secret_file clears the other: that source decided both. */
static int set_span(struct shunt_config *c, const struct tracer *tr, const char *key,
		    size_t kn, const char *val, size_t vn, unsigned line,
		    const char *origin, char *err, size_t errlen)
{
	int had_secret = c->agent_secret[0] != '\0';
	int had_file = c->agent_secret_file[0] != '\0';
	if (set_value(c, key, kn, val, vn, line, origin, err, errlen))
		return -1;
	if (!tr || !tr->fn)
		return 0;
	key = trim(key, &kn);
	int k = find_key(key, kn);
	if (k < 0 || k == K_RULE)
		return 0;
	tr->fn(shunt_config_keys[k].name, origin, tr->arg);
	if (had_file && !c->agent_secret_file[0] && k == K_AGENT_SECRET)
		tr->fn(shunt_config_keys[K_AGENT_SECRET_FILE].name, origin, tr->arg);
	if (had_secret && !c->agent_secret[0] && k == K_AGENT_SECRET_FILE)
		tr->fn(shunt_config_keys[K_AGENT_SECRET].name, origin, tr->arg);
	return 0;
}

int shunt_config_set(struct shunt_config *c, const char *key,
		     const char *value, const char *origin,
		     char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!c || !key)
		return shunt_config_fail(err, errlen, origin, "no key");
	if (!value)
		value = "";
	return set_span(c, NULL, key, strlen(key), value, strlen(value), 0, origin,
			err, errlen);
}

/* ---- config text ------------------------------------------------------- */

static int is_transport_word(const char *s, size_t n)
{
	return span_is(s, n, "rule") || span_is(s, n, "shm") ||
	       span_is(s, n, "fabric") || span_is(s, n, "auto") ||
	       span_is(s, n, "kernel");
}

/* Length of s[0..n) before a comment: '#' at the start or after whitespace.
 * With quotes set, a '#' inside "..." does not start a comment. */
static size_t strip_comment(const char *s, size_t n, int quotes)
{
	int inq = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (quotes && s[i] == '"')
			inq = !inq;
		else if (!inq && s[i] == '#' && (i == 0 || is_ws(s[i - 1])))
			return i;
	}
	return n;
}

/* One line, NUL-free, at most LINE_MAX_CHARS long. */
static int parse_line(struct shunt_config *c, const struct tracer *tr, const char *s,
		      size_t n, unsigned line, const char *origin, char *err,
		      size_t errlen)
{
	char q[QUOTE_MAX + 4];
	size_t i, klen;

	s = trim(s, &n);
	if (n == 0 || s[0] == '#')
		return 0;

	for (klen = 0; klen < n && !is_ws(s[klen]) && s[klen] != '='; klen++)
		;
	for (i = klen; i < n && is_ws(s[i]); i++)
		;
	if (klen > 0 && i < n && s[i] == '=') {
		const char *v = s + i + 1;
		size_t vn = n - i - 1;

		/* '#' right at the start of the value starts a comment too */
		while (vn && is_ws(v[0])) {
			v++;
			vn--;
		}
		vn = strip_comment(v, vn, 1);
		return set_span(c, tr, s, klen, v, vn, line, origin, err, errlen);
	}
	if (klen > 0 && is_transport_word(s, klen))
		return add_rule(c, s, strip_comment(s, n, 0), line, origin,
				err, errlen);

	n = strip_comment(s, n, 0);
	s = trim(s, &n);
	shunt_config_quote(q, sizeof(q), s, n);
	return shunt_config_fail(err, errlen, origin,
		    "expected 'key = value' or a rule, got '%s'", q);
}

static int parse_text(struct shunt_config *c, const struct tracer *tr, const char *name,
		      const char *text, size_t len, char *err, size_t errlen)
{
	char origin[PATH_MAX + 32];
	size_t pos = 0;
	unsigned line = 0;

	if (err && errlen)
		err[0] = '\0';
	if (!name)
		name = "(config)";
	if (!c)
		return shunt_config_fail(err, errlen, name, "no configuration");
	if (!text) {
		if (len)
			return shunt_config_fail(err, errlen, name, "no text");
		return 0;
	}
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		pos = 3;        /* UTF-8 byte order mark */

	while (pos < len) {
		const char *s = text + pos;
		const char *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		size_t i;

		line++;
		snprintf(origin, sizeof(origin), "%s:%u", name, line);
		if (n > LINE_MAX_CHARS)
			return shunt_config_fail(err, errlen, origin,
				    "line too long (more than %d characters)",
				    LINE_MAX_CHARS);
		for (i = 0; i < n; i++) {
			unsigned char ch = (unsigned char)s[i];

			if (ch == 0)
				return shunt_config_fail(err, errlen, origin,
					    "NUL byte in line");
			if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch == 0x7f)
				return shunt_config_fail(err, errlen, origin,
					    "control character 0x%02x in line",
					    ch);
		}
		if (parse_line(c, tr, s, n, line, origin, err, errlen))
			return -1;
		pos += n + (nl ? 1 : 0);
	}
	return 0;
}

int shunt_config_parse(struct shunt_config *c, const char *name,
		       const char *text, size_t len, char *err, size_t errlen)
{
	return parse_text(c, NULL, name, text, len, err, errlen);
}

static int parse_file(struct shunt_config *c, const struct tracer *tr, const char *path,
		      int required, char *err, size_t errlen)
{
	struct stat st;
	char ebuf[128];
	char *buf;
	size_t n, cap;
	FILE *f;
	int rc, e;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !*path) {
		if (required)
			return shunt_config_fail(err, errlen, NULL, "empty config file name");
		return 0;
	}
	f = fopen(path, "re");
	if (!f) {
		e = errno;
		if (e == ENOENT && !required)
			return 0;
		return shunt_config_fail(err, errlen, path, "cannot read: %s",
			    strerror_r(e, ebuf, sizeof(ebuf)));
	}
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return shunt_config_fail(err, errlen, path, "cannot read: %s",
			    strerror_r(EISDIR, ebuf, sizeof(ebuf)));
	}
	/* grow the buffer as needed, up to one byte past the cap */
	n = 0;
	cap = 0;
	buf = NULL;
	for (;;) {
		size_t got;

		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			char *nbuf;

			if (ncap > FILE_MAX_BYTES + 1)
				ncap = FILE_MAX_BYTES + 1;
			if (ncap == cap)
				break;          /* n > FILE_MAX_BYTES */
			nbuf = realloc(buf, ncap);
			if (!nbuf) {
				fclose(f);
				free(buf);
				return shunt_config_fail(err, errlen, path, "cannot read: %s",
					    strerror_r(ENOMEM, ebuf, sizeof(ebuf)));
			}
			buf = nbuf;
			cap = ncap;
		}
		errno = 0;
		got = fread(buf + n, 1, cap - n, f);
		e = errno;
		n += got;
		if (n < cap) {          /* a short read: end of file or error */
			if (ferror(f)) {
				fclose(f);
				free(buf);
				return shunt_config_fail(err, errlen, path, "cannot read: %s",
					    strerror_r(e ? e : EIO, ebuf,
						       sizeof(ebuf)));
			}
			break;
		}
	}
	fclose(f);
	if (n > FILE_MAX_BYTES) {
		free(buf);
		return shunt_config_fail(err, errlen, path, "file too large (more than %d bytes)",
			    FILE_MAX_BYTES);
	}
	rc = parse_text(c, tr, path, buf, n, err, errlen);
	free(buf);
	return rc;
}

int shunt_config_parse_file(struct shunt_config *c, const char *path,
			    int required, char *err, size_t errlen)
{
	return parse_file(c, NULL, path, required, err, errlen);
}

/* ---- environment ------------------------------------------------------- */

static const char *real_getenv(const char *name)
{
	return secure_getenv(name);
}

/* SHUNT_OPTIONS="key=value,key=value,...": empty items are skipped. */
static int parse_options(struct shunt_config *c, const struct tracer *tr, const char *opts,
			 char *err, size_t errlen)
{
	const char *p = opts;
	unsigned item = 0;
	char origin[64];
	char q[QUOTE_MAX + 4];

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		const char *s = p;
		const char *eq;

		item++;
		s = trim(s, &n);
		if (n) {
			snprintf(origin, sizeof(origin), "SHUNT_OPTIONS: item %u",
				 item);
			eq = memchr(s, '=', n);
			if (!eq || eq == s) {
				shunt_config_quote(q, sizeof(q), s, n);
				return shunt_config_fail(err, errlen, NULL,
					    "SHUNT_OPTIONS: item %u '%s': expected key=value",
					    item, q);
			}
			if (set_span(c, tr, s, (size_t)(eq - s), eq + 1,
				     n - (size_t)(eq - s) - 1, 0, origin, err,
				     errlen))
				return -1;
		}
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* SHUNT_RULES="rule; rule; ...": empty items are skipped. */
static int parse_rules_env(struct shunt_config *c, const char *rules,
			   char *err, size_t errlen)
{
	const char *p = rules;
	unsigned item = 0;
	char origin[64];

	for (;;) {
		const char *semi = strchr(p, ';');
		size_t n = semi ? (size_t)(semi - p) : strlen(p);
		const char *s = p;

		item++;
		s = trim(s, &n);
		if (n) {
			snprintf(origin, sizeof(origin), "SHUNT_RULES: item %u",
				 item);
			if (add_rule(c, s, n, 0, origin, err, errlen))
				return -1;
		}
		if (!semi)
			return 0;
		p = semi + 1;
	}
}

static void swap_rules(struct shunt_rule *a, struct shunt_rule *b)
{
	struct shunt_rule t = *a;

	*a = *b;
	*b = t;
}

static void reverse_rules(struct shunt_rule *r, unsigned n)
{
	unsigned i;

	for (i = 0; i < n / 2; i++)
		swap_rules(&r[i], &r[n - 1 - i]);
}

static int load(struct shunt_config *c, const char *(*getenv_fn)(const char *name),
		const struct tracer *tr, char *err, size_t errlen)
{
	const char *v;
	unsigned nfile;
	int k;

	if (err && errlen)
		err[0] = '\0';
	if (!c)
		return shunt_config_fail(err, errlen, NULL, "no configuration");
	if (!getenv_fn)
		getenv_fn = real_getenv;
	shunt_config_defaults(c);

	v = getenv_fn("SHUNT_CONFIG");
	if (v && *v) {
		if (parse_file(c, tr, v, 1, err, errlen))
			return -1;
	} else if (parse_file(c, tr, SHUNT_DEFAULT_CONFIG, 0, err, errlen)) {
		return -1;
	}
	nfile = c->nrules;

	for (k = 0; k < K_COUNT; k++) {
		size_t n;
		const char *s;

		if (!shunt_config_keys[k].env)
			continue;
		v = getenv_fn(shunt_config_keys[k].env);
		if (!v)
			continue;
		n = strlen(v);
		s = trim(v, &n);
		if (n == 0 && !shunt_config_keys[k].empty_is_default)
			continue;
		const char *name = shunt_config_keys[k].name;
		if (set_span(c, tr, name, strlen(name), s, n, 0, shunt_config_keys[k].env, err,
			     errlen))
			return -1;
	}

	v = getenv_fn("SHUNT_OPTIONS");
	if (v && parse_options(c, tr, v, err, errlen))
		return -1;
	v = getenv_fn("SHUNT_RULES");
	if (v && parse_rules_env(c, v, err, errlen))
		return -1;

	/* [file][options][SHUNT_RULES] -> [options][SHUNT_RULES][file] */
	if (nfile && nfile < c->nrules) {
		reverse_rules(c->rules, nfile);
		reverse_rules(c->rules + nfile, c->nrules - nfile);
		reverse_rules(c->rules, c->nrules);
	}
	return 0;
}

int shunt_config_load(struct shunt_config *c,
		      const char *(*getenv_fn)(const char *name),
		      char *err, size_t errlen)
{
	return load(c, getenv_fn, NULL, err, errlen);
}

int shunt_config_load_traced(struct shunt_config *c,
			     const char *(*getenv_fn)(const char *name),
			     shunt_config_seen_fn *seen, void *arg, char *err, size_t errlen)
{
	struct tracer tr = { seen, arg };
	return load(c, getenv_fn, &tr, err, errlen);
}
