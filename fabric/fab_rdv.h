/* Remote rendezvous: how a client shim tells the peer host that it wants a
 * fabric connection, and how the accepting shim there finds out.
 *
 *   client shim                  shuntd on the server's host     server shim
 *   bind(), open its passive
 *   endpoint, fab_rdv_offer() -> is addr:port a live shunt
 *                                listener (shm registry)?  hold
 *                                the offer in memory
 *                             <- answer
 *   TCP connect() ----------------------------------------------> accept()
 *                                TAKE(tuple) <------------------ fab_rdv_take()
 *                                (on agent.sock; SO_PEERCRED:
 *                                the listener's owner) -- offer ->
 *   passive endpoint <------------- fi_connect(token) ----------
 *
 * The TCP connection is the control plane throughout; nothing travels on it
 * but the application's bytes.  Every field of an offer is hostile to the
 * side that did not write it. */
#ifndef FAB_RDV_H
#define FAB_RDV_H

#include <stdint.h>
#include <sys/socket.h>

#include "agent/agent_proto.h"
#include "core/shunt_tuple.h"

enum fab_rdv_result {
	FAB_RDV_OK = 0,        /* a live listener; the offer is filed */
	FAB_RDV_NO_LISTENER,   /* an agent answered: no shunt listener there */
	FAB_RDV_NO_AGENT,      /* nothing answered in time (cached per host) */
	FAB_RDV_REFUSED,       /* the agent refused (secret, version, bounds) */
};

/* Client side, before the TCP connect: ask the agent on dst's host
 * (dst's address, agent_port) to file offer o for the listener at dst.
 * Bounded by timeout_ms (<= 0: the agent_timeout_ms setting).  A host whose
 * agent did not answer (or refused us) is remembered for agent_cache_s, so a
 * plain network costs one probe per host, not one per connection: then this
 * returns the remembered FAB_RDV_NO_AGENT / FAB_RDV_REFUSED at once.
 * Authenticates with agent_secret / agent_secret_file when set.  Preserves
 * errno. */
enum fab_rdv_result fab_rdv_offer(const struct sockaddr *dst, socklen_t len,
				  const struct agent_offer *o, int timeout_ms);

/* Client side, before fab_rdv_offer(): ask our own agent (on
 * <rundir>/agent.sock, one round trip bounded by timeout_ms) to
 * countersign o, passing it the TCP socket fd (SCM_RIGHTS) as the proof
 * that this process holds o's client end; only to an agent we trust (root,
 * us, the rundir's owner).  0 with o->csig filled, -1 (o unchanged: the
 * offer goes unsigned) when there is no agent, it has no countersign key
 * or it refuses.  Preserves errno. */
int fab_rdv_countersign(const char *rundir, int fd, struct agent_offer *o, int timeout_ms);

/* What fab_rdv_offer() would answer for dst's host from its negative cache
 * alone (no agent, or the agent refused us): 1 with *r, else 0.  No system
 * call: a connection to a host known to have no agent costs a lookup. */
int fab_rdv_host_cached(const struct sockaddr *dst, enum fab_rdv_result *r);

/* Server side, in accept(): take the offer the agent holds for the accepted
 * connection's tuple (one request on <rundir>/agent.sock, bounded by
 * agent_timeout_ms; no agent there: -1 at once).  0 with *o filled and
 * checked (bounds, tuple equal to t), -1 when there is none, the agent is
 * not one we trust (root, us, the rundir's owner) or the answer is
 * malformed.  Preserves errno. */
int fab_rdv_take(const char *rundir, const struct shunt_tuple *t, struct agent_offer *o);

/* Both ways dead: send our DEMOTE position to the agent of the peer's host
 * (dst, agent_port), which files it for the peer.  0 when filed. */
int fab_rdv_relay(const struct sockaddr *dst, socklen_t len, const struct agent_relay *r,
		  int timeout_ms);

/* The position the peer relayed to this end (client: 1 for the client end)
 * of tuple t, if one was filed proved with the connection's key
 * (fab_relay_proof): 0 with *pos (the file is removed), else -1. */
int fab_rdv_relay_take(const char *rundir, const struct shunt_tuple *t, int client,
		       const uint8_t key[AGENT_TOKEN_LEN], uint64_t *pos);

/* The agent protocol's form of a tuple, and back: the same four fields. */
void fab_tuple_to_wire(struct agent_tuple *w, const struct shunt_tuple *t);
void fab_tuple_from_wire(struct shunt_tuple *t, const struct agent_tuple *w);

#endif
