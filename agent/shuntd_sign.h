/* The countersignature of fabric offers (docs/ARCHITECTURE.md, "Remote
 * rendezvous and the agent"): the client's own agent signs an offer its
 * local shim proves, with its TCP socket, to be for a connection it holds;
 * the server's agent files only offers so signed.  The key is the agents'
 * (countersign_key_file), never a shim's.  No global state: the caller
 * passes the key. */
#ifndef SHUNTD_SIGN_H
#define SHUNTD_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "agent_proto.h"

enum sign_verdict {
	SIGN_OK,   /* signed with the key, for exactly these fields */
	SIGN_NONE, /* no countersignature (all zero) */
	SIGN_BAD,  /* one that is not of this key, or not for this offer */
};

/* Whether fd (passed by a local shim) is a TCP socket whose local address
 * (or the wildcard) and port are t's client end and which, if connected, is
 * connected to t's server end: 0, or -1 with *why saying what is not so. */
int sign_socket_holds(int fd, const struct agent_tuple *t, const char **why);

/* Countersign o (its csig field is not looked at) with key[0..klen). */
void sign_offer(const uint8_t *key, size_t klen, const struct agent_offer *o,
		uint8_t csig[AGENT_MAC_LEN]);

/* Judge o's csig against key[0..klen), compared in constant time. */
enum sign_verdict sign_verify(const uint8_t *key, size_t klen, const struct agent_offer *o);

#endif
