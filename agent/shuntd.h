/* shuntd, the per-host agent: state shared by its parts.
 *
 *   shuntd.c          options, configuration, signals, the main loop
 *   shuntd_ev.c       event loop (file events, periodic timers)
 *   shuntd_net.c      listening and accepting sockets
 *   shuntd_client.c   one client connection: agent protocol, or HTTP
 *   shuntd_http.c     the HTTP requests GET /metrics and GET /healthz
 *   shuntd_pending.c  offers and relays held for local shims, bounded
 *   shuntd_sign.c     countersigning offers, checking countersignatures
 *   shuntd_rundir.c   filing relays, sweeping stale rundir entries
 *   shuntd_metrics.c  counters and the Prometheus text of GET /metrics
 */
#ifndef SHUNTD_H
#define SHUNTD_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "config/shunt_config.h"
#include "agent_proto.h"
#include "shuntd_ev.h"

#define SHUNTD_MAX_CLIENTS 1024
/* fds kept for the agent's own use (listeners, epoll, signalfd, the rundir
 * files and directories a sweep, a scrape or a lookup opens): clients are
 * capped below RLIMIT_NOFILE by this much, so the longest idle one makes
 * room for a newcomer before accept() could fail with EMFILE. */
#define SHUNTD_FD_RESERVE 32
/* After accept() failed for want of fds or memory, listeners rest this
 * long rather than be reported readable again at once. */
#define SHUNTD_ACCEPT_PAUSE_MS 100
/* An agent client may wait this long between requests (shims keep their
 * link for the next offer); see shuntd_client.c. */
#define SHUNTD_IDLE_MS 60000

/* Why a client was dropped; the index of shuntd_errors_total{reason}. */
enum shuntd_err {
	SE_MALFORMED,   /* a frame that cannot be valid, or garbage */
	SE_OVERSIZED,   /* a length above the bound */
	SE_VERSION,     /* another protocol version */
	SE_AUTH,        /* no or wrong proof of the secret */
	SE_UNEXPECTED,  /* a valid message out of turn */
	SE_TIMEOUT,     /* no complete request within the read deadline */
	SE_BUSY,        /* SHUNTD_MAX_CLIENTS reached */
	SE_HTTP,        /* a bad HTTP request */
	SE_IO,          /* the connection failed */
	SE_COUNT
};

enum shuntd_req {
	SR_HELLO, SR_AUTH, SR_QUERY, SR_OFFER, SR_METRICS, SR_RELAY, SR_TAKE, SR_SIGN, SR_COUNT
};
/* OFFER and RELAY answers: held (filed), or why not. */
enum shuntd_hold_res {
	SO_HELD,
	SO_NO_LISTENER,
	SO_REFUSED,
	SO_TABLE_FULL,
	SO_SOURCE_FULL,
	SO_CONTESTED, /* a second offer for one connection: none is given */
	SO_UNSIGNED,  /* countersign key set, the offer has no countersignature */
	SO_BADSIG,    /* a countersignature not of the key, or not for this offer */
	SO_COUNT
};
enum shuntd_take_res { ST_TAKEN, ST_NONE, ST_REFUSED, ST_CONTESTED, ST_COUNT };
/* SIGN answers: countersigned, this agent has no key, or the passed socket
 * does not prove the offer's client end. */
enum shuntd_sign_res { SG_SIGNED, SG_NO_KEY, SG_REFUSED, SG_COUNT };
enum shuntd_swept { SW_REGISTRY, SW_RELAY, SW_SHM, SW_STATS, SW_COUNT };

struct shuntd_counters {
	uint64_t clients[2];          /* accepted: [0] tcp, [1] unix */
	uint64_t requests[SR_COUNT];
	uint64_t errors[SE_COUNT];
	uint64_t queries[2];          /* [0] no listener, [1] live */
	uint64_t offers[SO_COUNT];
	uint64_t relays[SO_COUNT];
	uint64_t takes[ST_COUNT];
	uint64_t signs[SG_COUNT];
	uint64_t expired[2];          /* [0] offers, [1] relays */
	uint64_t swept[SW_COUNT];
	uint64_t accept_pauses;       /* accept() out of fds or memory */
	unsigned open_clients;
};

struct shuntd {
	struct shunt_config cfg;
	char rundir[256];
	char secret[AGENT_SECRET_MAX + 1];
	int secret_len;               /* 0: none configured */
	uint8_t csign_key[AGENT_SECRET_MAX + 1]; /* countersign_key_file's */
	int csign_len;                /* 0: none: offers are neither signed
					 here nor required to be */
	unsigned client_timeout_ms;   /* read deadline of one request */
	unsigned max_clients;         /* SHUNTD_MAX_CLIENTS, or fewer for the fd limit */
	int rundir_shared;            /* a group's rundir (setgid, group rwx) */
	struct ev_loop *el;
	struct shuntd_counters n;
	int log_debug;
};

extern struct shuntd shuntd;

void shuntd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define SHUNTD_DEBUG(...)                         \
	do {                                      \
		if (shuntd.log_debug)             \
			shuntd_log(__VA_ARGS__); \
	} while (0)

/* shuntd_client.c: a new connection on a listener (unix: from the rundir
 * socket); closes those past their deadline. */
void client_accept(struct ev_loop *el, int lfd, void *data, int mask);
/* Serve fd (a connected, non-blocking socket; peer its address) as a
 * client; is_unix: it came in on agent.sock. */
void client_adopt(struct ev_loop *el, int fd, int is_unix, const struct sockaddr_storage *peer);
void client_reap(struct ev_loop *el, void *data);
void client_close_all(void);

/* shuntd_rundir.c */
/* Make the rundir's rooms.  Root's agent in a rundir another user owns
 * acts there from now on as that user (file access only). */
int rundir_prepare(const char *rundir, char *err, size_t errlen);
/* The uid files are created and checked with: the rundir owner's when
 * acting as it, else the agent's. */
uid_t shuntd_fsuid(void);
/* on: root's own file access back, for a file outside the rundir (the
 * pidfile); 0: the rundir owner's again.  0, or -1.  Nothing to do unless
 * acting as the owner. */
int shuntd_outside_rundir(int on);
/* The rundir and its subdirectories are still usable (cheap: no listing).
 * 0, or -1 with the reason in err. */
int rundir_check(const char *rundir, char *err, size_t errlen);
/* File a relayed DEMOTE position as r/<key>.<c|s> for the shim of that end
 * (readable by uid; the rundir's group too).  0 or -1. */
int rundir_file_relay(const char *rundir, const struct agent_relay *r, unsigned uid);
/* Remove the relay file of tuple t's end (client: 1 for the client end). */
void rundir_unfile_relay(const char *rundir, const struct agent_tuple *t, int client);
/* Remove stale registry entries, relays and what dead shm connections left. */
void rundir_sweep(struct ev_loop *el, void *data);
/* Forget offers and relays past their lifetime (a relay's file goes too). */
void pending_tick(struct ev_loop *el, void *data);

/* shuntd_metrics.c: the response body of GET /metrics, malloc'ed. */
char *metrics_render(size_t *len);
/* Fold the counters of processes that exited into the totals. */
void metrics_scan(void);

#endif
