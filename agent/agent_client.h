/* The client's side of an exchange with an agent, without the I/O: frames
 * taken from the bytes that arrived, and the challenge-response.  Those
 * who talk to agents (the fabric transport through REAL(), shunt doctor
 * through libc) move the bytes; the protocol's steps are written once,
 * here. */
#ifndef AGENT_CLIENT_H
#define AGENT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "agent_proto.h"

/* The next frame of a stream: in[0..*nin) holds the bytes that arrived.
 * 1 with *m, the frame's bytes taken out of in; 0 when more bytes are
 * needed; -1 when they can never make a frame (*why, may be NULL: enum
 * agent_error). */
int agent_next_frame(uint8_t *in, size_t *nin, struct agent_msg *m, int *why);

/* How the challenge-response ended. */
enum agent_auth_result {
	AGENT_AUTHED = 0,    /* both sides proved the secret */
	AGENT_AUTH_SILENT,   /* a send failed, or no answer came (closed, timed out) */
	AGENT_AUTH_GARBAGE,  /* an answer that is not a frame */
	AGENT_AUTH_ANSWER,   /* another answer than the step wants (*last: an
				ERROR auth after AUTH is a refused proof) */
	AGENT_AUTH_FORGED,   /* AUTH_OK with a proof that is not of our secret */
	AGENT_AUTH_NO_RANDOM, /* no random bytes for the nonce */
};

/* The caller's link: send m (0, or -1), and receive the next frame (1
 * with *m, 0 nothing came in time, -1 not a frame). */
struct agent_io {
	int (*send)(void *link, const struct agent_msg *m);
	int (*recv)(void *link, struct agent_msg *m);
	void *link;
};

/* HELLO, CHALLENGE, AUTH, AUTH_OK over io with the secret key[0..klen):
 * AGENT_AUTHED when the agent proved it knows the key too (a token is
 * never handed to an impostor).  *last (may be NULL) gets the last frame
 * received, and *after_auth (may be NULL) whether AUTH had been sent. */
enum agent_auth_result agent_authenticate(const struct agent_io *io, const char *key, size_t klen,
					  struct agent_msg *last, int *after_auth);

#endif
