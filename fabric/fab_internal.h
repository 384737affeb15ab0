/* Internals shared by the files of the fabric transport.
 *
 * A one-way stack (fabric/layers.txt, checked by the build), the top first:
 *   fab_selftest.c a connection from this host to itself, bytes checked
 *   fab_offer.c   rendezvous: offer, connect back, decline; the tables
 *   fab_data.c    data path: reads, writes, waits, readiness
 *   fab_watch.c   the thread that moves connections the application is
 *                 not looking at
 *   fab_life.c    a connection's close, fork, free and exit
 *   fab_demote.c  demoting: the DEMOTE exchange, the replay over TCP
 *   fab_post.c    posting to the endpoint (RMA writes, credits, CQ data)
 *                 and reading its completions
 *   fab_conn.c    the connection object: buffers, CQ, EQ, endpoint
 *   fab_pending.c client offers waiting for their connect-back
 *   fab_fit.c     whether a provider can carry the transport, and why not
 *   fab_prov.c    libfabric: provider choice, fabric/domain, the process's
 *                 passive endpoints and the thread that answers them
 *   fab_start.c   libfabric's start-up, on a thread of its own
 *   fab_op.c      one operation handed to the provider, with its context
 *   fab_verbs.c   the verbs provider's rules, enforced elsewhere (tests)
 *   fab_attr.c    a provider's attributes, what the transport needs of them
 *   fab_rdv.c     the agent's client: offers, filed offers, relayed positions
 *   fab_lib.c     libfabric itself, loaded by the first connection needing it
 *   fab_wire.c    what the peer sees: CQ data, connection data */
#ifndef FAB_INTERNAL_H
#define FAB_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

/* libfabric is loaded on first use (fab_lib.c), not linked: its functions
 * that are not inline are ours, forwarding to it.  Before its headers, so
 * that they declare (and fi_allocinfo calls) these. */
#define fi_getinfo fab_fi_getinfo
#define fi_freeinfo fab_fi_freeinfo
#define fi_dupinfo fab_fi_dupinfo
#define fi_fabric fab_fi_fabric
#define fi_strerror fab_fi_strerror

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>

#include "fab_ctx.h"
#include "fab_rdv.h"
#include "fab_wire.h"
#include "core/shunt_clock.h"
#include "core/shunt_conn.h"
#include "core/shunt_transport.h"

#define FAB_API FI_VERSION(1, 9)
enum { FAB_RX = 0, FAB_TX = 1 };

enum fab_state {
	FAB_OFFERED = 1, /* client: offer filed, no connect-back yet; the
			    application may already write (staged) */
	FAB_ACCEPTING,   /* client: the passive thread took the request */
	FAB_UP,          /* both ends move bytes over the endpoint */
	FAB_DECLINED,    /* never up: the client replays its staged bytes */
	FAB_DEMOTED,     /* on TCP after the demotion exchange */
	FAB_BROKEN,      /* the endpoint failed with no exchange possible */
	FAB_DEMOTING,    /* our DEMOTE is out: reads take the ring up to
			    rx_limit, then the socket; writes are staged until
			    the peer's DEMOTE, then replayed (fab_demote.c) */
};

struct fab_conn {
	struct shunt_conn base;
	int state;                /* enum fab_state; atomic */
	int client;
	pid_t pid;                /* the process that owns the fabric objects */
	uint32_t lock;            /* one xchg lock over endpoint and positions */
	struct fid_ep *ep;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_mr *mr;
	int wait_fd;              /* the CQ's FI_WAIT_FD, -1 if none */
	/* Threads share the CQ: one that reads it may take the event another
	 * sleeps for, and wakes it through an eventfd, one per role (data or
	 * state for readers, space for writers) so a writer never drains a
	 * reader's wakeup. */
	int kick[2];
	unsigned waiters[2];
	uint8_t *buf;             /* [tx ring][rx ring][scratch] registered */
	size_t buf_len;
	void *desc;
	uint64_t ring;            /* bytes per direction, power of two */
	uint64_t peer_addr, peer_key; /* the peer's rx ring */
	int rx_cq_data;           /* remote CQ data consumes a posted receive */
	size_t tx_depth;          /* operations in flight at most */
	uint64_t chunk;           /* bytes per RMA write at most */
	size_t tx_inflight;
	int cq_fresh;             /* the last CQ read emptied it, and no write
				     has skipped the provider since */
	/* Stream positions, free running. */
	uint64_t tx_head;         /* written by the application into tx ring */
	uint64_t tx_posted;       /* handed to the provider */
	uint64_t tx_acked;        /* consumed by the peer (credits) */
	uint64_t rx_arrived;      /* landed in our rx ring */
	uint64_t rx_consumed;     /* given to the application */
	uint64_t rx_credited;     /* last credit sent */
	uint64_t rx_limit;        /* after the demotion: ring bytes up to here,
				     then the socket */
	uint64_t peer_demote;     /* the peer's DEMOTE position */
	uint64_t peer_shut_at;    /* SHUT/CLOSE position */
	uint64_t fail_after;      /* test knob: demote after this many bytes */
	int peer_shut, peer_closed, got_demote, sent_demote;
	int peer_ready;           /* the peer's endpoint is up: something came
				     from it (the client's first message) */
	int shut_wr;
	int failed;               /* a provider error was seen */
	int replaying;            /* DEMOTING: replaying from peer_demote */
	int tcp_taken;            /* DEMOTING: bytes read from the socket */
	uint64_t demote_end;      /* DEMOTING: reset if not done by then (ms) */
	uint64_t eof_at;          /* DEMOTING: the socket closed, no DEMOTE */
	uint64_t relay_at;        /* DEMOTING: positions go through the agents
				     from then on (fab_demote.c) */
	int relay_sent;
	int relay_hint;           /* the watcher saw a relayed position filed */
	int dead;                 /* test knob: the endpoint is dead both ways */
	int fail_dead;            /* test knob: ... once fail_after is reached */
	struct shunt_tuple tuple;   /* client, server: names a relayed position */
	struct sockaddr_storage peer_sa; /* the peer's address (its agent's host) */
	socklen_t peer_salen;
	int why;                  /* enum shunt_reason of the demotion */
	uint8_t key[FAB_KEY_LEN]; /* the connection's key (fab_wire.h): what
				     its connection data and relayed positions
				     are proved with */
	uint8_t id[FAB_ID_LEN];   /* client: the id requests name its offer by */
	struct fab_conn *next;    /* in the offer table */
	struct fab_ctxs ctxs;     /* a context per operation (fab_ctx.h) */
	struct {                  /* SHUNT_FABRIC_EMULATE=verbs: the receives */
		void *q[FAB_CTX_MAX]; /* posted, in order (fab_verbs.c) */
		unsigned head, n;
	} vrb;
};

/* The tables of a fabric end: its life (fab_life.c), data and waits
 * (fab_data.c), and all three with the transport (fab_offer.c). */
extern const struct shunt_conn_life_ops fab_life_ops;
extern const struct shunt_conn_data_ops fab_data_ops;
extern const struct shunt_conn_wait_ops fab_wait_ops;
extern const struct shunt_conn_ops fab_conn_ops;

/* ---- fab_start.c: libfabric's start-up ------------------------------------- */

#define FAB_WAIT_FOREVER (~0u)

/* libfabric's start-up for provider prov, run by up(prov) (1: up) on a
 * thread of shunt's own, started by the first call: SHUNT_R_NONE once up,
 * SHUNT_R_PROVIDER_LOADING while it is starting (after waiting up to
 * wait_ms for it), SHUNT_R_PROVIDER_ERROR when it cannot start. */
enum shunt_reason fab_start_on_thread(const char *prov, unsigned wait_ms,
				      int (*up)(const char *prov));
/* A detached thread of shunt's own, with every signal blocked. */
int fab_thread_start(void *(*fn)(void *));

/* ---- fab_op.c: operations ------------------------------------------------- */

/* An RMA write of len bytes from our buffer at offset off to the peer's
 * rx ring at offset roff, with remote CQ data (t, pos), with a context of
 * its own (lock held): 0, or a negative libfabric error (-FI_EAGAIN when
 * the queue or the contexts are full). */
ssize_t fab_op_write(struct fab_conn *c, uint64_t off, size_t len, uint64_t roff,
		     enum fab_imm t, uint64_t pos, uint64_t flags);
/* A zero-byte receive for a write's remote CQ data (lock held). */
ssize_t fab_op_recv(struct fab_conn *c);
/* A completion's context back: FAB_CTX_TX, FAB_CTX_RX, or -1 when it
 * carried none of ours (lock held). */
int fab_op_done(struct fab_conn *c, void *ctx);
/* The key the peer names our buffer by (the provider's). */
uint64_t fab_mr_key(struct fab_conn *c);

/* ---- fab_prov.c ----------------------------------------------------------- */

/* What the transport asks a provider for (FI_EP_MSG, RMA, remote CQ
 * data...): hints to free with fi_freeinfo. */
struct fi_info *fab_hints_for(const char *prov);

/* libfabric and the process's domain for provider prov, started on its
 * thread (fab_start_on_thread). */
enum shunt_reason fab_start(const char *prov, unsigned wait_ms);

/* Whether this process could take a fabric offer at all: a provider is
 * named, or (auto) an RDMA device exists.  No system call after the first;
 * when 0, accept() does not ask the agent for an offer: with auto and no
 * RDMA device the answer would be a refusal (no-rdma-route) anyway. */
int fab_may_take(void);

/* The provider configured for dst: 0 with name filled, or a reason (the
 * start-up waited for at most wait_ms when the choice needs libfabric). */
enum shunt_reason fab_provider_for(const struct sockaddr *dst, socklen_t len, char name[32],
				   unsigned wait_ms);
/* The process's fabric and domain for provider name; NULL if unusable. */
struct fid_domain *fab_domain(const char *prov, struct fid_fabric **fabric);
/* The process's passive endpoint on source address src (listening, its
 * requests answered by a thread, with answer: fab_offer_answer); its
 * address into o. */
int fab_pep_addr(const char *prov, const struct sockaddr *src, socklen_t slen,
		 struct agent_offer *o,
		 int (*answer)(struct fid_domain *, struct fi_eq_cm_entry *, size_t));
/* An endpoint description to reach a peer's passive endpoint. */
struct fi_info *fab_info_for_peer(const struct agent_offer *o);
/* Registered memory for a connection: len bytes, desc and key. */
int fab_mr_reg(struct fid_domain *d, void *buf, size_t len, uint64_t access,
	       struct fid_mr **mr);
/* Remote address of a registered buffer as the peer names it. */
uint64_t fab_mr_remote_addr(const void *base, const void *p);
/* The process's fabric (NULL before the first connection, or in a child). */
struct fid_fabric *fab_fabric(void);
/* The process's domain if it is open (NULL before, or in a child). */
struct fid_domain *fab_domain_of_process(void);
/* listen() on fd: start libfabric now if this listener may be offered
 * fabric connections (fab_prov.c). */
void fab_on_listen(int fd);
/* The process owning the fabric objects (a forked child does not). */
int fab_is_owner(pid_t pid);

/* ---- fab_fit.c: can a provider serve ----------------------------------------- */

/* 0 when provider prov can carry the transport here; -1 with why (len
 * bytes) when it cannot: absent, no FI_EP_MSG endpoints, attributes the
 * protocol cannot run on (fab_attrs_unfit). */
int fab_provider_fit(const char *prov, char *why, size_t len);

/* ---- fab_conn.c: the object ------------------------------------------------ */

/* A connection object with ops (fab_conn_ops; client: 1 for the client
 * end), or NULL. */
struct fab_conn *fab_conn_new(const struct shunt_conn_ops *ops, int client);
/* Close its fabric objects, keep or drop its buffer, recycle it. */
void fab_conn_release(struct fab_conn *c);
/* Rings (registered, kept across connections when possible), CQ, eventfds:
 * before the endpoint, so a client can stage bytes while its offer is open. */
int fab_conn_mem(struct fab_conn *c, struct fid_domain *d, uint64_t ring);
/* The endpoint for info, bound to the CQ and a new EQ, enabled. */
int fab_conn_ep(struct fab_conn *c, struct fid_domain *d, struct fid_fabric *fab,
		struct fi_info *info);
/* Our rx ring, as the peer names it in its RMA writes. */
uint64_t fab_ring_addr_rx(struct fab_conn *c);
/* The TCP connection can no longer be trusted: reset it. */
void fab_reset_tcp(struct fab_conn *c);
/* One xchg lock over a connection's endpoint and positions. */
void fab_lock(struct fab_conn *c);
void fab_unlock(struct fab_conn *c);

/* ---- fab_pending.c: offers waiting for their connect-back ------------------ */

/* Offers waiting for their connect-back, by id. */
void fab_offer_add(struct fab_conn *c);
void fab_offer_del(struct fab_conn *c);
/* The passive thread: the offer req names (NULL, with *why, when none
 * matches: its id, key, ring and the server's address), taken out of the
 * table; *won when one CAS moved it from OFFERED to ACCEPTING (DECLINED
 * for a declining request), and then held by a reference. */
struct fab_conn *fab_offer_claim(const struct fab_cm_req *req, const struct fi_info *info,
				 const char **why, int *won);
/* Wait while the passive thread owns c (between its CAS and its answer). */
void fab_wait_accepting(struct fab_conn *c);

/* ---- fab_post.c: posting and completions ------------------------------------ */

/* Read the CQ to its end (lock held): 1 if anything moved. */
int fab_cq_drain_locked(struct fab_conn *c);
/* The same in the data path: up to a short read, which emptied it (the
 * provider's progress runs again at the next look, not now). */
int fab_cq_read_locked(struct fab_conn *c);
/* Post what the application staged (lock held). */
void fab_flush(struct fab_conn *c);
/* A zero-byte write carrying only CQ data (lock held); -1 when it cannot be
 * posted. */
int fab_post_imm(struct fab_conn *c, enum fab_imm t, uint64_t pos);
/* Return the consumed position to the peer when a credit is due (lock
 * held). */
void fab_credit_locked(struct fab_conn *c);
/* Wake this end's sleepers of a role (FAB_RX, FAB_TX) if there are any. */
void fab_kick(struct fab_conn *c, int role);

/* ---- fab_life.c: close, fork, exit ----------------------------------------- */

/* exit(): say goodbye to every connection of t (the fabric transport,
 * fab_offer.c) this process owns. */
void fab_at_exit(const struct shunt_transport_ops *t);

/* ---- fab_offer.c: rendezvous ------------------------------------------------ */

/* Wait on an endpoint's EQ for FI_CONNECTED: 0 connected (replen bytes of
 * its connection data into rep), 1 refused or failed, -1 no answer within
 * timeout_ms. */
int fab_wait_connected(struct fid_eq *eq, int timeout_ms, void *rep, size_t replen);

/* The passive thread: a connection request arrived (e, with len bytes of
 * connection data); take it (1, the connection's endpoint is then up) or
 * refuse it (0): it must name an offer of ours, be made with its key and
 * come from the server's address. */
int fab_offer_answer(struct fid_domain *d, struct fi_eq_cm_entry *e, size_t len);

/* ---- fab_data.c: the data path ---------------------------------------------- */

ssize_t fab_recvmsg(struct shunt_conn *c, struct msghdr *m, int flags);
ssize_t fab_sendmsg(struct shunt_conn *c, const struct msghdr *m, int flags);
int fab_shutdown(struct shunt_conn *c, int how);
int fab_ioctl(struct shunt_conn *c, unsigned long req, void *arg);
short fab_poll(struct shunt_conn *c, short events);
int fab_arm(struct shunt_conn *c, short events, struct pollfd out[], int *timeout_ms);
void fab_disarm(struct shunt_conn *c, short events, const struct pollfd *fds, int n);
uint64_t fab_progress(struct shunt_conn *c);

/* ---- fab_demote.c: leaving the fabric ---------------------------------------- */

/* The demote op: leave the fabric now (exec, fork, fdopen...); unread bytes
 * nobody can replay go to a spill. */
void fab_demote(struct shunt_conn *c, enum shunt_reason why);
/* Start demoting (UP -> DEMOTING, or DEMOTED when the peer has closed):
 * 1 when an exchange began, which the watcher then moves while the
 * application does not (fab_watch_demoting). */
int fab_demote_begin(struct fab_conn *c, int why);
/* One step of the exchange, never waiting: 1 when the state moved. */
int fab_demote_step(struct fab_conn *c);
/* Demote now: the DEMOTE exchange and the replay to their end (lock held).
 * 0 on success, -1 when the connection had to be reset. */
int fab_demote_now_locked(struct fab_conn *c, int why);
/* Client, OFFERED: the offer is over; replay the staged bytes over TCP and
 * demote (lock held). */
void fab_demote_offer_locked(struct fab_conn *c);
/* A DEMOTE position the peer relayed through the agents (lock held): 1
 * when it was taken (got_demote). */
int fab_relay_check(struct fab_conn *c);
/* Send the FIN a shutdown(SHUT_WR) deferred, once c is DEMOTED. */
void fab_send_fin(struct fab_conn *c);

/* ---- fab_watch.c: the watcher thread ----------------------------------------- */

/* Have the process's watcher thread move c while the application does not
 * (c is UP). */
void fab_watch_add(struct fab_conn *c);
/* Have the watcher look at c every few ms until its exchange is over (c is
 * DEMOTING, and its application may not call again). */
void fab_watch_demoting(struct fab_conn *c);

#endif
