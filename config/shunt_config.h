/* shunt configuration: settings and transport rules.
 *
 * Pure code: no globals, no logging, no knowledge of the preload layer, so the
 * same object is linked into libshunt.so, the shunt tool, the unit tests and
 * the fuzzer.  The preload layer owns the single live instance.
 *
 * Precedence, lowest first: built-in defaults < file ($SHUNT_CONFIG, default
 * /etc/shunt/shunt.conf) < SHUNT_<KEY> variables < SHUNT_OPTIONS.  Rules given
 * in SHUNT_RULES / SHUNT_OPTIONS come before the file's rules (first match wins).
 */
#ifndef SHUNT_CONFIG_H
#define SHUNT_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SHUNT_DEFAULT_CONFIG "/etc/shunt/shunt.conf"
#define SHUNT_MAX_RULES 256
#define SHUNT_PROG_GLOB_MAX 64
#define SHUNT_ERR_MAX 512
#define SHUNT_GROUP_MAX 32 /* shm_group: a group name's length (useradd's limit) */
#define SHUNT_AGENT_SECRET_MIN 16
#define SHUNT_AGENT_SECRET_MAX 128
/* ring_size bounds: every transport and the agent protocol accept these. */
#define SHUNT_RING_MIN 4096u
#define SHUNT_RING_MAX (1u << 30)
/* cma_min's least value other than 0 (off): below it a system call per
 * transfer costs more than the copy it saves. */
#define SHUNT_CMA_MIN_LOW (16u << 10)

enum shunt_transport {
	SHUNT_TP_AUTO = 0,   /* fastest path both ends share */
	SHUNT_TP_SHM,
	SHUNT_TP_FABRIC,
	SHUNT_TP_KERNEL,
};

enum shunt_role {
	SHUNT_ROLE_ANY = 0,
	SHUNT_ROLE_CLIENT,   /* connect() side */
	SHUNT_ROLE_SERVER,   /* accept() side */
};

enum shunt_log_level {
	SHUNT_LOG_ERROR = 0,
	SHUNT_LOG_WARN,
	SHUNT_LOG_INFO,
	SHUNT_LOG_DEBUG,
};

/* `<transport> <role> <program-glob> <addr[/prefix]|*>[:port[-port]|*]` */
struct shunt_rule {
	enum shunt_transport transport;
	enum shunt_role role;
	char prog[SHUNT_PROG_GLOB_MAX];   /* fnmatch(3) glob; "*" matches all */
	int family;                       /* 0 = any address, AF_INET, AF_INET6 */
	uint8_t addr[16];                 /* network order; IPv4 in the first 4 */
	unsigned prefix;                  /* 0..32 or 0..128 */
	uint16_t port_lo, port_hi;        /* 0..65535 when any port */
	unsigned line;                    /* source line, 0 when from the environment */
};

struct shunt_config {
	int enabled;                          /* enable = yes|no */
	enum shunt_log_level log_level;       /* log = error|warn|info|debug */
	char log_file[PATH_MAX];              /* "" = stderr; %p expands to the pid */
	char rundir[PATH_MAX];                /* "" = /run/shunt, else /tmp/shunt-$UID */
	char shm_group[SHUNT_GROUP_MAX + 1];  /* "" = rundir private to the user;
						 else a group name or number whose
						 members share it (see
						 shunt_config_group_id) */
	unsigned spin_us;                     /* mean spin per wait (its CPU cost) */
	unsigned spin_max_us;                 /* the longest one spin */
	size_t ring_size;                     /* bytes per direction, power of two */
	size_t cma_min;                       /* shm: a read and a write of at
						 least this many bytes move in
						 one copy (0: never) */
	char fabric_provider[32];             /* "auto", "verbs", "tcp", ... */
	unsigned fabric_load_wait_ms;         /* a connection waits this long
						 for libfabric's start-up
						 before it goes by TCP
						 (provider-loading) */
	uint16_t agent_port;                  /* shuntd TCP port */
	enum shunt_transport default_transport; /* when no rule matches */
	unsigned offer_timeout_ms;            /* client waits this long for the
						 server to take an shm offer */
	char agent_secret[SHUNT_AGENT_SECRET_MAX + 1]; /* shared secret of the
						 agents and shims ("" = none) */
	char agent_secret_file[PATH_MAX];     /* or a file holding it */
	unsigned agent_cache_s;               /* a host without agent is not
						 asked again for this long */
	unsigned agent_timeout_ms;            /* bound on one agent exchange */
	char countersign_key_file[PATH_MAX];  /* shuntd: the agents' key that
						 countersigns fabric offers ("" = none) */
	int sockmap;                          /* shuntd: run the sockmap path */
	char sockmap_cgroup[PATH_MAX];        /* its cgroup v2 ("" = the root) */
	char sockmap_pin[PATH_MAX];           /* its pins, in a bpffs; the shims
						 look there for its mark map */
	unsigned nrules;
	struct shunt_rule rules[SHUNT_MAX_RULES];
};

/* Every function that can fail returns 0 on success and -1 on error, with a
 * one-line message in err that names where ("file:line: ...", "SHUNT_X: ...",
 * "SHUNT_OPTIONS: ...") and what is wrong.  On error *c may be partly updated;
 * callers discard it. */

void shunt_config_defaults(struct shunt_config *c);

/* shm_group as a number: 1 with *gid set when it is one ("1000"), 0 when it
 * is a name (resolved by the caller, with getgrnam) or empty. */
int shunt_config_group_id(const struct shunt_config *c, unsigned *gid);

/* Parse configuration text.  name is used in messages (usually the path). */
int shunt_config_parse(struct shunt_config *c, const char *name,
		       const char *text, size_t len, char *err, size_t errlen);

/* Read and parse a file.  A missing file is an error only if required. */
int shunt_config_parse_file(struct shunt_config *c, const char *path,
			    int required, char *err, size_t errlen);

/* Set one key from text (file, env or options).  origin names the source in
 * messages. */
int shunt_config_set(struct shunt_config *c, const char *key,
		     const char *value, const char *origin,
		     char *err, size_t errlen);

/* Parse one rule (without the leading "rule" word if any). */
int shunt_config_parse_rule(struct shunt_rule *r, const char *text,
			    char *err, size_t errlen);

/* Full load with the documented precedence.  getenv_fn lets tests and the
 * fuzzer supply an environment; pass NULL for the real one (read with
 * secure_getenv; libc's getenv returns char * and does not convert). */
int shunt_config_load(struct shunt_config *c,
		      const char *(*getenv_fn)(const char *name),
		      char *err, size_t errlen);

/* First rule matching role, program name and peer address, or NULL.  sa may
 * be AF_INET or AF_INET6 (IPv4-mapped IPv6 matches IPv4 rules). */
const struct shunt_rule *shunt_config_match(const struct shunt_config *c,
					    enum shunt_role role,
					    const char *prog,
					    const struct sockaddr *sa,
					    socklen_t salen);

/* The transport for a connection: the first matching rule's, else the default. */
enum shunt_transport shunt_config_decide(const struct shunt_config *c,
					 enum shunt_role role, const char *prog,
					 const struct sockaddr *sa,
					 socklen_t salen);

/* The same, telling seen(key, origin, arg) each time a source sets a key,
 * with origin as messages name it ("FILE:LINE", "SHUNT_SPIN_US",
 * "SHUNT_OPTIONS: item 2"): the last call for a key names the source its
 * value came from; a key never named has its default. */
typedef void shunt_config_seen_fn(const char *key, const char *origin, void *arg);
int shunt_config_load_traced(struct shunt_config *c,
			     const char *(*getenv_fn)(const char *name),
			     shunt_config_seen_fn *seen, void *arg, char *err, size_t errlen);

/* The name of the i-th setting of the parser's key table (rules are not
 * settings), NULL past the last; and its SHUNT_<KEY> variable (NULL: none). */
const char *shunt_config_key_name(unsigned i);
const char *shunt_config_key_env(unsigned i);

/* key's value in c as a configuration file writes it (in double quotes when
 * it needs them; agent_secret as "(set)", never its value).  The length
 * snprintf would write, or -1 for an unknown key. */
int shunt_config_value(const struct shunt_config *c, const char *key, char *buf, size_t len);

/* Writes "key=value key=value ..." for every setting that differs from the
 * defaults, plus "rules=N" when there are rules.  Returns the length. */
size_t shunt_config_describe(const struct shunt_config *c, char *buf,
			     size_t len);

const char *shunt_transport_name(enum shunt_transport t);
const char *shunt_role_name(enum shunt_role r);
const char *shunt_log_level_name(enum shunt_log_level l);

#endif
