/* shunt doctor speaking to an agent (shuntd) as a shim would: the agent
 * protocol (agent/agent_proto.h) with the challenge-response when there is
 * a secret, and the HTTP side of the same port.  Blocking, each exchange
 * bounded as a whole by its timeout.  Nothing is filed: the only request
 * is QUERY, which reads the registry. */
#ifndef SHUNT_DOCTOR_LINK_H
#define SHUNT_DOCTOR_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum agent_ask_result {
	ASK_ANSWERED,      /* QUERY answered: status */
	ASK_NO_AGENT,      /* no connection, or no answer in time */
	ASK_AUTH_REFUSED,  /* the agent refused our proof of the secret */
	ASK_AUTH_REQUIRED, /* the agent wants a proof; we have no secret */
	ASK_IMPOSTOR,      /* the agent's proof is wrong */
	ASK_PROTOCOL,      /* an error frame, garbage, or a message out of turn */
};

struct agent_ask {
	enum agent_ask_result res;
	int status;         /* enum agent_status, when answered */
	int authed;         /* the secret was proven both ways */
	int connect_errno;  /* the connection could not be made: why (0: it was) */
	char detail[160];   /* what went wrong, for a message */
};

/* QUERY whether a16:port (IPv4 as mapped IPv6) is a live shunt listener,
 * to the agent at agent (address and port, TCP or a Unix socket), proving
 * the secret first when klen > 0, within timeout_ms. */
void doctor_agent_ask(const struct sockaddr *agent, socklen_t len, const char *secret, int klen,
		      const uint8_t a16[16], uint16_t port, int timeout_ms, struct agent_ask *out);

/* GET path from the HTTP side of the agent at a: the status code with the
 * body at *body (*blen bytes, in buf), or -1 with a message in buf. */
int doctor_http_get(const struct sockaddr *a, socklen_t len, const char *path, int timeout_ms,
		    char *buf, size_t cap, const char **body, size_t *blen);

#endif
