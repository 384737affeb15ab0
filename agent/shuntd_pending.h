/* What remote peers ask the agent to hold for a shim of this host: fabric
 * offers (held here, in memory, until the accepting shim takes one) and
 * relayed DEMOTE positions (filed in r/, remembered here so they stay few
 * and go when they are old).  Nothing a peer sends is kept without bound:
 * each kind has a total cap, a cap per source (an IPv4 address, an IPv6
 * /64) and a lifetime in seconds. */
#ifndef SHUNTD_PENDING_H
#define SHUNTD_PENDING_H

#include <stdint.h>

#include "agent_proto.h"

enum pend_kind { PK_OFFER, PK_RELAY_C, PK_RELAY_S, PK_COUNT };

struct pend_limits {
	unsigned total, per_source;
};
/* Offers: a busy client host has a few hundred connections between offer
 * and accept to one server host; relays happen only when a fabric died. */
#define PEND_LIMITS                                                        \
	{                                                                  \
		[PK_OFFER] = {8192, 512}, [PK_RELAY_C] = {1024, 64},       \
		[PK_RELAY_S] = {1024, 64},                                 \
	}
/* The lifetime of every entry.  An offer is taken when the listener
 * accepts its connection, and a client that waits for an answer gives up
 * after offer_timeout_ms; a listener whose backlog is half a minute deep
 * gets the kernel path.  A relayed position matters for a 5 s exchange. */
#define PEND_TTL_S 30

struct pending {
	uint8_t kind;                 /* enum pend_kind; with tuple, the key */
	struct agent_tuple tuple;
	uint8_t src[16];              /* whom it counts against */
	uint64_t expires_ms;
	unsigned uid;                 /* an offer's listener's owner */
	uint8_t contested;            /* PK_OFFER: a second offer came for the
					 tuple; none is given to anyone */
	struct agent_offer offer;     /* PK_OFFER */
};

enum pend_result { PEND_HELD, PEND_TABLE_FULL, PEND_SOURCE_FULL, PEND_CONTESTED };

/* Hold (kind, tuple) for src (a peer's address, 16 bytes, IPv4 mapped);
 * PEND_TTL_S from now.  *p, when held, is the entry (fill uid and offer
 * there).  A relay replaces what was held under its key.  An offer for a
 * tuple that has one already makes the tuple contested (PEND_CONTESTED):
 * both are forgotten, and the key stays held, empty, so that neither a
 * first nor a later offer for it is ever given to the accepting shim (one
 * of the two came from someone sharing the client's address, and which is
 * not known). */
enum pend_result pending_add(enum pend_kind kind, const struct agent_tuple *t,
			     const uint8_t src[16], uint64_t now_ms, struct pending **p);

/* The entry for (kind, tuple), or NULL. */
struct pending *pending_find(enum pend_kind kind, const struct agent_tuple *t);

/* Forget p (its source's count goes down). */
void pending_del(struct pending *p);

/* Forget the entries past their lifetime, calling gone(p) for each first;
 * how many. */
unsigned pending_expire(uint64_t now_ms, void (*gone)(const struct pending *p));

/* Entries held of kind. */
unsigned pending_count(enum pend_kind kind);

/* Forget everything (at exit). */
void pending_clear(void);

#endif
