/* The shuntd wire protocol, spoken by client shims (fab_rdv.c) and the agent.
 *
 * Every message is one frame:
 *
 *   0  'S' 'D'   magic (never the start of an HTTP request: the agent's
 *                port also answers GET /metrics)
 *   2  version   AGENT_PROTO_VERSION
 *   3  type      enum agent_type
 *   4  length    body bytes, big endian, at most AGENT_BODY_MAX
 *   8  body      fixed layout per type, integers big endian
 *
 * Decoding is total: a byte string is a complete valid frame, a valid
 * prefix of one (more bytes needed), or rejected.  Each type has one exact
 * body length; padding bytes (addr past addrlen, provider past its NUL)
 * must be zero, so a decoded frame encodes back to the same bytes.
 *
 * Conversation (the client speaks first, so the same port can sniff HTTP):
 *   no secret:    OFFER -> OFFER_ANSWER, QUERY -> QUERY_ANSWER,
 *                 RELAY -> RELAY_ANSWER
 *   local only:   TAKE(tuple) -> TAKE_ANSWER(status, offer): the accepting
 *                 shim, on the agent's Unix socket, takes the offer held
 *                 for its accepted connection (its uid must be the
 *                 listener's, by SO_PEERCRED)
 *                 SIGN(offer) + its TCP socket (SCM_RIGHTS) ->
 *                 SIGN_ANSWER(status, csig): the client shim has its own
 *                 agent countersign the offer it is about to file; the
 *                 socket proves it holds the offer's client address:port
 *   with secret:  HELLO(cnonce) -> CHALLENGE(snonce)
 *                 AUTH(HMAC(secret, "shuntd-client" snonce cnonce))
 *                   -> AUTH_OK(HMAC(secret, "shuntd-agent" cnonce snonce))
 *                 then requests as above.  The secret never travels.
 * An agent that refuses sends ERROR(code) and closes. */
#ifndef AGENT_PROTO_H
#define AGENT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "config/shunt_config.h"

/* 2: the offer carries the client's agent's countersignature (csig). */
#define AGENT_PROTO_VERSION 2
#define AGENT_MAGIC0 'S'
#define AGENT_MAGIC1 'D'
#define AGENT_HDR_LEN 8u
#define AGENT_BODY_MAX 320u
#define AGENT_FRAME_MAX (AGENT_HDR_LEN + AGENT_BODY_MAX)
#define AGENT_NONCE_LEN 32u
#define AGENT_MAC_LEN 32u
#define AGENT_OFFER_LEN 260u /* encoded struct agent_offer */
#define AGENT_OFFER_SIGNED_LEN 228u /* its part the countersignature covers */
#define AGENT_SECRET_MIN SHUNT_AGENT_SECRET_MIN
#define AGENT_SECRET_MAX SHUNT_AGENT_SECRET_MAX
#define AGENT_ADDR_MAX 128
#define AGENT_TOKEN_LEN 16

/* A connection's 4-tuple: addresses as 16 bytes (IPv4 as IPv4-mapped
 * IPv6), ports in host order here and big endian on the wire.  The same
 * four fields as the library's struct shunt_tuple, whose key names the
 * files the agent makes for a connection. */
struct agent_tuple {
	uint8_t caddr[16];
	uint8_t saddr[16];
	uint16_t cport, sport;
};

/* A client's offer of a fabric connection, filed by the agent for the
 * listener it names. */
struct agent_offer {
	struct agent_tuple tuple;     /* client, server as the client sees them */
	uint8_t token[AGENT_TOKEN_LEN]; /* random; the accepting side presents it
					 as connection data when it connects
					 back, and the client refuses any
					 other */
	char provider[32];           /* libfabric provider of the client's
					passive endpoint, NUL-terminated */
	uint32_t addr_format;        /* FI_SOCKADDR_IN, FI_SOCKADDR_IN6, ... */
	uint32_t addrlen;            /* <= AGENT_ADDR_MAX */
	uint8_t addr[AGENT_ADDR_MAX]; /* the passive endpoint (fi_getname) */
	uint64_t ring_size;          /* bytes per direction the client asks */
	uint8_t csig[AGENT_MAC_LEN];  /* the client's agent's countersignature
					 (agent_countersig), all zero for none;
					 zero in a SIGN request */
};

enum agent_type {
	AGENT_HELLO = 1,     /* client: nonce */
	AGENT_CHALLENGE,     /* agent: nonce */
	AGENT_AUTH,          /* client: mac */
	AGENT_AUTH_OK,       /* agent: mac */
	AGENT_QUERY,         /* client: addr16, port */
	AGENT_QUERY_ANSWER,  /* agent: status */
	AGENT_OFFER,         /* client: struct agent_offer */
	AGENT_OFFER_ANSWER,  /* agent: status */
	AGENT_ERROR,         /* agent: code; it closes after */
	AGENT_RELAY,         /* client: a DEMOTE position for a shim here */
	AGENT_RELAY_ANSWER,  /* agent: status */
	AGENT_TAKE,          /* local client: tuple */
	AGENT_TAKE_ANSWER,   /* agent: status, and the offer when OK */
	AGENT_SIGN,          /* local client: struct agent_offer, csig zero,
				with its TCP socket (SCM_RIGHTS) */
	AGENT_SIGN_ANSWER,   /* agent: status, and csig when OK */
	AGENT_TYPE_END
};

enum agent_status {
	AGENT_ST_OK = 0,          /* live listener (and, for OFFER, held; for
				     TAKE, here it is) */
	AGENT_ST_NO_LISTENER = 1, /* no live shunt listener there */
	AGENT_ST_REFUSED = 2,     /* the offer cannot be held (owner, tuple,
				     full), or taken by this asker */
	AGENT_ST_NO_OFFER = 3,    /* TAKE: no offer held for that tuple */
	AGENT_ST_NO_KEY = 4,      /* SIGN: this agent has no countersign key */
	AGENT_ST_END
};

enum agent_error {
	AGENT_E_VERSION = 1,  /* frame version not spoken here */
	AGENT_E_MALFORMED,    /* bad magic, type, length or field */
	AGENT_E_OVERSIZED,    /* length above AGENT_BODY_MAX */
	AGENT_E_AUTH,         /* authentication required or failed */
	AGENT_E_UNEXPECTED,   /* a valid message out of turn */
	AGENT_E_BUSY,         /* too many clients */
	AGENT_E_END
};

/* A fabric connection whose endpoint failed both ways: each end's DEMOTE
 * position, which the fabric could not carry, goes to the agent of the
 * other end's host, which files it for that end (<rundir>/r/<key>.<c|s>).
 * The token is the connection's offer token, which only the two ends
 * know. */
#define AGENT_RELAY_LEN 61u
struct agent_relay {
	struct agent_tuple tuple;       /* client, server, as in the offer */
	uint8_t token[AGENT_TOKEN_LEN];
	uint64_t pos;                 /* the sender's rx_limit */
	uint8_t to_client;            /* 1: for the client end, 0: the server */
};

/* What the accepting shim gets for TAKE: the offer, all zero unless
 * status is AGENT_ST_OK. */
#define AGENT_TAKE_ANSWER_LEN (1u + AGENT_OFFER_LEN)
struct agent_take_answer {
	uint8_t status;               /* enum agent_status */
	struct agent_offer offer;
};

/* What the client's agent answers SIGN: the countersignature, all zero
 * unless status is AGENT_ST_OK. */
#define AGENT_SIGN_ANSWER_LEN (1u + AGENT_MAC_LEN)
struct agent_sign_answer {
	uint8_t status;               /* enum agent_status */
	uint8_t csig[AGENT_MAC_LEN];
};

struct agent_msg {
	uint8_t type; /* enum agent_type */
	union {
		uint8_t nonce[AGENT_NONCE_LEN]; /* HELLO, CHALLENGE */
		uint8_t mac[AGENT_MAC_LEN];     /* AUTH, AUTH_OK */
		struct {
			uint8_t addr[16];       /* IPv4 as mapped IPv6 */
			uint16_t port;
		} query;
		uint8_t status;                 /* *_ANSWER: enum agent_status */
		uint8_t code;                   /* ERROR: enum agent_error */
		struct agent_offer offer;
		struct agent_relay relay;
		struct agent_tuple take;        /* TAKE */
		struct agent_take_answer taken; /* TAKE_ANSWER */
		struct agent_offer sign;        /* SIGN */
		struct agent_sign_answer signed_; /* SIGN_ANSWER */
	} u;
};

/* Decode the frame at the start of buf[0..len).  Returns its length (> 0)
 * with *m filled, 0 when buf is a valid prefix (read more), or -1 with
 * *why (enum agent_error) when no continuation can make it valid. */
int agent_decode(const uint8_t *buf, size_t len, struct agent_msg *m, int *why);

/* Encode m into buf (at least AGENT_FRAME_MAX bytes).  Returns the frame's
 * length, 0 if m is not valid (the same checks decoding makes). */
size_t agent_encode(const struct agent_msg *m, uint8_t *buf);

/* Every field of o in bounds: provider a non-empty NUL-terminated name of
 * [a-z0-9_;-], 0 < addrlen <= AGENT_ADDR_MAX, 0 < addr_format <= 0xffff,
 * ring_size a power of two within SHUNT_RING_MIN..SHUNT_RING_MAX, ports non-zero.  0 if
 * so, else -1.  (Padding is not looked at: encoding zeroes it, decoding
 * requires it zero.) */
int agent_offer_check(const struct agent_offer *o);

/* Challenge-response MACs.  client: 1 for the client's proof, 0 for the
 * agent's. */
void agent_auth_mac(const char *secret, size_t slen, int client,
		    const uint8_t cnonce[AGENT_NONCE_LEN],
		    const uint8_t snonce[AGENT_NONCE_LEN], uint8_t mac[AGENT_MAC_LEN]);

/* The countersignature of offer o under key[0..klen) (the agents'
 * countersign key): HMAC-SHA256 over a label of its own and the offer's
 * encoded fields but csig (the 4-tuple, the token, the provider, the
 * fabric endpoint's format and address, the ring size), so it vouches for
 * this tuple, this endpoint and this token and nothing else. */
void agent_countersig(const uint8_t *key, size_t klen, const struct agent_offer *o,
		      uint8_t mac[AGENT_MAC_LEN]);

/* Read a secret file: at most AGENT_SECRET_MAX bytes, trailing newlines
 * dropped, at least AGENT_SECRET_MIN left, not readable or writable by
 * group or others.  Returns the length, or -1 with a message in err. */
int agent_secret_read(const char *path, char *out, size_t cap, char *err, size_t errlen);

/* Read the countersign key file (countersign_key_file): as a secret file,
 * and its owner must be us or root.  The length, or -1 with err. */
int agent_countersign_key_read(const char *path, char *out, size_t cap, char *err,
			       size_t errlen);

/* The secret a configuration names (agent_secret, else agent_secret_file):
 * length, 0 when none is configured, -1 with err on a bad file. */
int agent_secret_get(const struct shunt_config *c, char *out, size_t cap, char *err,
		     size_t errlen);

const char *agent_type_name(int type);
const char *agent_error_name(int code);

#endif
