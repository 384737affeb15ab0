/* What a fabric peer sees besides RMA payload: the 32-bit remote CQ data of
 * each write (a type and a stream position), and the connection data of
 * fi_connect/fi_accept.  Every field is hostile to the side that did not
 * write it.  Pure arithmetic, no provider: the unit tests run it. */
#ifndef FAB_WIRE_H
#define FAB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "agent/agent_proto.h" /* AGENT_TOKEN_LEN, struct agent_relay */

#define FAB_MAGIC 0x53484642u /* "SHFB" */
#define FAB_VERSION 2u
#define FAB_MIN_RING 4096u
#define FAB_MAX_RING (1u << 28)

/* CQ data: verbs carries 4 bytes, so types and positions share 32 bits.
 * A position is reconstructed from a known lower bound it cannot be more
 * than FAB_MAX_RING past. */
#define FAB_IMM_POS_BITS 29
#define FAB_IMM_POS_MASK ((1u << FAB_IMM_POS_BITS) - 1)

enum fab_imm {
	FAB_IMM_DATA = 0,   /* payload written into the rx ring, ends at pos */
	FAB_IMM_CREDIT = 1, /* the peer consumed up to pos */
	FAB_IMM_SHUT = 2,   /* shutdown(SHUT_WR): EOF after pos */
	FAB_IMM_CLOSE = 3,  /* last close: EOF after pos, no reader any more */
	FAB_IMM_DEMOTE = 4, /* moving to TCP: the sender delivers its ring up
			       to pos and reads the rest from the socket */
};

/* The CQ data of a write of type t ending (or standing) at pos. */
static inline uint64_t fab_imm_make(enum fab_imm t, uint64_t pos)
{
	return ((uint64_t)t << FAB_IMM_POS_BITS) | (pos & FAB_IMM_POS_MASK);
}

static inline enum fab_imm fab_imm_type(uint64_t data)
{
	return (enum fab_imm)((data >> FAB_IMM_POS_BITS) & 7);
}

static inline uint32_t fab_imm_pos(uint64_t data)
{
	return (uint32_t)data & FAB_IMM_POS_MASK;
}

/* The stream position whose low FAB_IMM_POS_BITS are v, at or after base
 * and less than 2^FAB_IMM_POS_BITS past it. */
static inline uint64_t fab_pos_recon(uint64_t base, uint32_t v)
{
	return base + ((v - (uint32_t)base) & FAB_IMM_POS_MASK);
}

/* A DATA write may end at p when that is at most a ring past what the
 * reader consumed (the writer never has more than a ring unacked). */
static inline int fab_data_pos_ok(uint64_t p, uint64_t consumed, uint64_t ring)
{
	return p - consumed <= ring;
}

/* A credit, or the position of the peer's DEMOTE (where it stopped reading,
 * so where our replay starts): never behind what the peer already credited,
 * never past what we posted.  Anything else the peer cannot have meant. */
static inline int fab_peer_pos_ok(uint64_t p, uint64_t acked, uint64_t posted)
{
	return p >= acked && p <= posted;
}

/* The bytes of stream positions [from, to) in a ring of size bytes at
 * base, as one or two spans (the second when they wrap): how many spans. */
static inline int fab_ring_spans(uint8_t *base, uint64_t size, uint64_t from, uint64_t to,
				 struct iovec v[2])
{
	uint64_t len = to - from, off = from & (size - 1);
	uint64_t first = len < size - off ? len : size - off;
	v[0] = (struct iovec){base + off, first};
	v[1] = (struct iovec){base, len - first};
	return len > first ? 2 : 1;
}

/* A reader returns a credit once it has consumed an eighth of the ring
 * past its last one. */
static inline int fab_credit_due(uint64_t consumed, uint64_t credited, uint64_t ring)
{
	return consumed - credited >= ring / 8;
}

/* Room in a writer's tx ring: bytes are kept until a credit covers them. */
static inline uint64_t fab_tx_room(uint64_t ring, uint64_t head, uint64_t acked)
{
	return ring - (head - acked);
}

/* The connection data of fi_connect (server -> the client's passive
 * endpoint) and fi_accept (client -> server), as bytes: integers big
 * endian, every reserved byte zero.
 *
 * Both ends hold the connection's key (FAB_KEY_LEN bytes): the client the
 * one it offered with, the accepting end the one its agent handed it with
 * the offer.  That is the offer's token, which travelled to the server's
 * agent in the offer, in the clear (an agent secret authenticates the
 * link, it does not encrypt it); a key the agents derive from their secret,
 * which would never travel, is not done yet (docs/DEPLOY.md says what this
 * leaves open).  Without the key nobody can make a request or an answer:
 * the
 * request names the offer by an id the key hashes to, and carries a MAC
 * of itself under the key; the answer a MAC of itself and of the request
 * it answers.  A request a third party saw on the wire and sends again
 * finds the offer taken (the client accepts one request per offer) and
 * comes from an address that is not the server's. */
#define FAB_KEY_LEN AGENT_TOKEN_LEN
#define FAB_ID_LEN 16
#define FAB_MAC_LEN 16
#define FAB_CM_REQ_LEN 56 /* the private data an InfiniBand CM request carries */
#define FAB_CM_REP_LEN 40

struct fab_cm_req {
	uint8_t decline;     /* the accepting side took the kernel path */
	uint8_t ring_log2;   /* the offer's ring size */
	uint8_t id[FAB_ID_LEN]; /* the offer's: fab_offer_id(key) */
	uint64_t rx_addr;    /* server's rx ring, as the peer names it */
	uint64_t rx_key;
	uint8_t mac[FAB_MAC_LEN];
};

struct fab_cm_rep {
	uint64_t rx_addr;    /* client's rx ring */
	uint64_t rx_key;
	uint8_t mac[FAB_MAC_LEN];
};

/* The id a request names the offer of key by. */
void fab_offer_id(const uint8_t key[FAB_KEY_LEN], uint8_t id[FAB_ID_LEN]);

/* The server's request for the offer of key (ring: the offer's ring size),
 * naming its rx ring; decline: it took the kernel path.  Fills r (its MAC
 * too) and its bytes, out. */
void fab_cm_req_make(struct fab_cm_req *r, uint8_t out[FAB_CM_REQ_LEN],
		     const uint8_t key[FAB_KEY_LEN], uint64_t ring, uint64_t rx_addr,
		     uint64_t rx_key, int decline);
/* A request as it arrived (len bytes of connection data): 0 with *r when
 * it has our form (magic, version, reserved bytes zero, a ring size in
 * bounds), else -1.  Its MAC is not checked: that needs the key of the
 * offer it names. */
int fab_cm_req_parse(struct fab_cm_req *r, const void *data, size_t len);
/* 0 when r's MAC is right under key (constant time). */
int fab_cm_req_verify(const struct fab_cm_req *r, const uint8_t key[FAB_KEY_LEN]);
/* The ring size a request names. */
static inline uint64_t fab_cm_req_ring(const struct fab_cm_req *r)
{
	return (uint64_t)1 << r->ring_log2;
}

/* The client's answer to request req (made under key), naming its rx ring:
 * r and its bytes, out. */
void fab_cm_rep_make(struct fab_cm_rep *r, uint8_t out[FAB_CM_REP_LEN],
		     const uint8_t key[FAB_KEY_LEN], const struct fab_cm_req *req,
		     uint64_t rx_addr, uint64_t rx_key);
/* An answer as it arrived, to our request req: 0 with *r when it has our
 * form and its MAC is right under key, else -1. */
int fab_cm_rep_check(struct fab_cm_rep *r, const void *data, size_t len,
		     const uint8_t key[FAB_KEY_LEN], const struct fab_cm_req *req);

/* The proof a relayed DEMOTE position carries (agent_relay.token): a MAC of
 * the relay's fields under the connection's key. */
void fab_relay_proof(const uint8_t key[FAB_KEY_LEN], const struct agent_relay *r,
		     uint8_t proof[AGENT_TOKEN_LEN]);
/* 0 when relay r carries the right proof under key (constant time). */
int fab_relay_verify(const uint8_t key[FAB_KEY_LEN], const struct agent_relay *r);

/* 1 when offer o's endpoint is at the TCP peer's address (peer), or its
 * address is not an IP one (nothing to compare); 0 for one elsewhere, or
 * an IP format whose address is cut short.  The client binds its passive
 * endpoint to its end of the TCP connection: one elsewhere was named by
 * someone else (who shares the client's address, or the offer's path),
 * and the server's end would talk to it instead of the client. */
int fab_offer_addr_is_peer(const struct agent_offer *o, const struct sockaddr *peer);

#endif
