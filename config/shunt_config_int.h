/* Shared by the files of config/ only. */
#ifndef SHUNT_CONFIG_INT_H
#define SHUNT_CONFIG_INT_H

#include <stddef.h>

struct shunt_config;

#define QUOTE_MAX 64 /* longest input echoed in a message */

/* s[0..n) made fit to quote in an error message. */
void shunt_config_quote(char *out, size_t outsz, const char *s, size_t n);
/* "origin: message" into err (or just "message" without an origin), the
 * message formatted from fmt; -1, what a parser returns with it. */
__attribute__((format(printf, 4, 5)))
int shunt_config_fail(char *err, size_t errlen, const char *origin, const char *fmt, ...);

/* The settings, in the order they are documented and shown. */
enum key_id {
	K_ENABLE,
	K_LOG,
	K_LOG_FILE,
	K_RUNDIR,
	K_SHM_GROUP,
	K_SPIN_US,
	K_SPIN_MAX_US,
	K_RING_SIZE,
	K_CMA_MIN,
	K_FABRIC_PROVIDER,
	K_FABRIC_LOAD_WAIT_MS,
	K_AGENT_PORT,
	K_DEFAULT_TRANSPORT,
	K_OFFER_TIMEOUT_MS,
	K_AGENT_SECRET,
	K_AGENT_SECRET_FILE,
	K_AGENT_CACHE_S,
	K_AGENT_TIMEOUT_MS,
	K_COUNTERSIGN_KEY_FILE,
	K_SOCKMAP,
	K_SOCKMAP_CGROUP,
	K_SOCKMAP_PIN,
	K_RULE,
	K_COUNT
};

struct shunt_config_key {
	const char *name;
	const char *env;             /* SHUNT_<KEY>, NULL if none */
	int empty_is_default;        /* set-but-empty env var resets to "" */
};

/* The key table (shunt_config.c): what the parser accepts, and so what
 * describe and `shunt config --show` print. */
extern const struct shunt_config_key shunt_config_keys[K_COUNT];

/* 1 when setting key (enum key_id) of c has its built-in default. */
int shunt_config_is_default(const struct shunt_config *c, int key);

#endif
