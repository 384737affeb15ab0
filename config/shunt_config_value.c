/* Settings as text: one key's value as a configuration file writes it, and
 * the one-line summary of what differs from the defaults.  Both walk the
 * parser's own key table, so a new key shows up in both without a second
 * list to keep in step. */
#include "shunt_config.h"
#include "shunt_config_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *shunt_config_key_name(unsigned i)
{
	return i < K_RULE ? shunt_config_keys[i].name : NULL;
}

const char *shunt_config_key_env(unsigned i)
{
	return i < K_RULE ? shunt_config_keys[i].env : NULL;
}

static int key_index(const char *key)
{
	for (int k = 0; k < K_RULE; k++)
		if (!strcmp(key, shunt_config_keys[k].name))
			return k;
	return -1;
}

/* A string value, in double quotes when the file syntax needs them. */
static int text(char *buf, size_t len, const char *v)
{
	int needq = v[0] == '\0' || strpbrk(v, " \t\",#") != NULL;
	return snprintf(buf, len, needq ? "\"%s\"" : "%s", v);
}

/* 1G / 64M / 4k when the size is a whole number of them. */
static int size_text(char *buf, size_t len, size_t s)
{
	if (s && (s & (((size_t)1 << 30) - 1)) == 0)
		return snprintf(buf, len, "%zuG", s >> 30);
	if (s && (s & (((size_t)1 << 20) - 1)) == 0)
		return snprintf(buf, len, "%zuM", s >> 20);
	if (s && (s & (((size_t)1 << 10) - 1)) == 0)
		return snprintf(buf, len, "%zuk", s >> 10);
	return snprintf(buf, len, "%zu", s);
}

static int key_value(const struct shunt_config *c, int k, char *buf, size_t len)
{
	switch ((enum key_id)k) {
	case K_ENABLE: return snprintf(buf, len, "%s", c->enabled ? "yes" : "no");
	case K_LOG: return snprintf(buf, len, "%s", shunt_log_level_name(c->log_level));
	case K_LOG_FILE: return text(buf, len, c->log_file);
	case K_RUNDIR: return text(buf, len, c->rundir);
	case K_SHM_GROUP: return text(buf, len, c->shm_group);
	case K_SPIN_US: return snprintf(buf, len, "%u", c->spin_us);
	case K_SPIN_MAX_US: return snprintf(buf, len, "%u", c->spin_max_us);
	case K_RING_SIZE: return size_text(buf, len, c->ring_size);
	case K_CMA_MIN: return size_text(buf, len, c->cma_min);
	case K_FABRIC_PROVIDER: {
		char p[sizeof(c->fabric_provider)];
		memcpy(p, c->fabric_provider, sizeof(p));
		p[sizeof(p) - 1] = '\0';
		return text(buf, len, p);
	}
	case K_FABRIC_LOAD_WAIT_MS: return snprintf(buf, len, "%u", c->fabric_load_wait_ms);
	case K_AGENT_PORT: return snprintf(buf, len, "%u", (unsigned)c->agent_port);
	case K_DEFAULT_TRANSPORT:
		return snprintf(buf, len, "%s", shunt_transport_name(c->default_transport));
	case K_OFFER_TIMEOUT_MS: return snprintf(buf, len, "%u", c->offer_timeout_ms);
	case K_AGENT_SECRET: /* never the secret itself */
		return text(buf, len, c->agent_secret[0] ? "(set)" : "");
	case K_AGENT_SECRET_FILE: return text(buf, len, c->agent_secret_file);
	case K_AGENT_CACHE_S: return snprintf(buf, len, "%u", c->agent_cache_s);
	case K_AGENT_TIMEOUT_MS: return snprintf(buf, len, "%u", c->agent_timeout_ms);
	case K_COUNTERSIGN_KEY_FILE: return text(buf, len, c->countersign_key_file);
	case K_SOCKMAP: return snprintf(buf, len, "%s", c->sockmap ? "on" : "off");
	case K_SOCKMAP_CGROUP: return text(buf, len, c->sockmap_cgroup);
	case K_SOCKMAP_PIN: return text(buf, len, c->sockmap_pin);
	case K_RULE:
	case K_COUNT:
		break;
	}
	return -1;
}

int shunt_config_value(const struct shunt_config *c, const char *key, char *buf, size_t len)
{
	int k = key ? key_index(key) : -1;
	if (!c || k < 0 || !buf || !len)
		return -1;
	return key_value(c, k, buf, len);
}

/* ---- describe ---------------------------------------------------------- */

struct out {
	char *buf;
	size_t len, pos;
};

__attribute__((format(printf, 2, 3)))
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->pos + 1 >= o->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= o->len - o->pos)
		o->pos = o->len - 1;
	else
		o->pos += (size_t)n;
}

size_t shunt_config_describe(const struct shunt_config *c, char *buf,
			     size_t len)
{
	struct out o = { buf, len, 0 };
	char val[PATH_MAX + 8];

	if (!buf || len == 0)
		return 0;
	buf[0] = '\0';
	if (!c)
		return 0;
	for (int k = 0; k < K_RULE; k++) {
		if (shunt_config_is_default(c, k))
			continue;
		if (key_value(c, k, val, sizeof(val)) < 0)
			continue;
		put(&o, "%s%s=%s", o.pos ? " " : "", shunt_config_keys[k].name, val);
	}
	if (c->nrules)
		put(&o, "%srules=%u", o.pos ? " " : "", c->nrules);
	return o.pos;
}
