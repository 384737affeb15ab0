/* The client's side of an agent exchange, without the I/O (agent_client.h). */
#include "agent_client.h"

#include <string.h>
#include <sys/random.h>

#include "agent_hmac.h"

int agent_next_frame(uint8_t *in, size_t *nin, struct agent_msg *m, int *why)
{
	int n = agent_decode(in, *nin, m, why);
	if (n <= 0)
		return n < 0 ? -1 : 0;
	memmove(in, in + n, *nin - (size_t)n);
	*nin -= (size_t)n;
	return 1;
}

/* One step: send m, receive the answer into *a, which must be of type
 * want. */
static enum agent_auth_result step(const struct agent_io *io, const struct agent_msg *m,
				   struct agent_msg *a, int want)
{
	if (io->send(io->link, m) < 0)
		return AGENT_AUTH_SILENT;
	int r = io->recv(io->link, a);
	if (r <= 0)
		return r < 0 ? AGENT_AUTH_GARBAGE : AGENT_AUTH_SILENT;
	return a->type == want ? AGENT_AUTHED : AGENT_AUTH_ANSWER;
}

enum agent_auth_result agent_authenticate(const struct agent_io *io, const char *key, size_t klen,
					  struct agent_msg *last, int *after_auth)
{
	struct agent_msg m = {.type = AGENT_HELLO}, a = {0};
	uint8_t cnonce[AGENT_NONCE_LEN], proof[AGENT_MAC_LEN];
	enum agent_auth_result r;
	if (after_auth)
		*after_auth = 0;
	if (getrandom(cnonce, sizeof cnonce, 0) != (ssize_t)sizeof cnonce)
		return AGENT_AUTH_NO_RANDOM;
	memcpy(m.u.nonce, cnonce, sizeof cnonce);
	r = step(io, &m, &a, AGENT_CHALLENGE);
	if (r == AGENT_AUTHED) {
		m.type = AGENT_AUTH;
		agent_auth_mac(key, klen, 1, cnonce, a.u.nonce, m.u.mac);
		agent_auth_mac(key, klen, 0, cnonce, a.u.nonce, proof);
		if (after_auth)
			*after_auth = 1;
		r = step(io, &m, &a, AGENT_AUTH_OK);
		if (r == AGENT_AUTHED && hmac_equal(a.u.mac, proof, AGENT_MAC_LEN))
			r = AGENT_AUTH_FORGED;
	}
	if (last)
		*last = a;
	memset(proof, 0, sizeof proof);
	return r;
}
