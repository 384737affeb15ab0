/* Countersigning fabric offers (shuntd_sign.h).  What the signature
 * vouches for is the fd check: the socket is in the asking process's hands
 * (SCM_RIGHTS passes only what the sender holds) and bound to the offer's
 * client address:port, which the kernel lets one socket hold (SO_REUSEPORT
 * shares it only within one uid; SO_REUSEADDR only between sockets that
 * both set it, none listening: docs/DEPLOY.md says what that leaves). */
#include "shuntd_sign.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "agent_hmac.h"
#include "core/shunt_tuple.h"

static int sockopt_int(int fd, int level, int name, int *v)
{
	socklen_t len = sizeof *v;
	return getsockopt(fd, level, name, v, &len) == 0 && len == sizeof *v ? 0 : -1;
}

static int no(const char **why, const char *what)
{
	*why = what;
	return -1;
}

int sign_socket_holds(int fd, const struct agent_tuple *t, const char **why)
{
	struct stat st;
	int type = 0, proto = 0, dom = 0;
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	uint8_t a[16];
	uint16_t port;
	if (fd < 0)
		return no(why, "no socket passed");
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return no(why, "not a socket");
	if (sockopt_int(fd, SOL_SOCKET, SO_DOMAIN, &dom) < 0 ||
	    (dom != AF_INET && dom != AF_INET6) ||
	    sockopt_int(fd, SOL_SOCKET, SO_TYPE, &type) < 0 || type != SOCK_STREAM ||
	    sockopt_int(fd, SOL_SOCKET, SO_PROTOCOL, &proto) < 0 || proto != IPPROTO_TCP)
		return no(why, "not a TCP socket");
	/* (Bound to the port on the wildcard, it holds the port on every
	 * address: the shim leaves a socket the application bound so.) */
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    shunt_addr16((const struct sockaddr *)&ss, a, &port) < 0 || port == 0 ||
	    port != t->cport || (memcmp(a, t->caddr, 16) && !shunt_addr16_any(a)))
		return no(why, "not bound to the offer's client address and port");
	/* Connected already: to the offer's server, or it is some other
	 * connection of that port's. */
	len = sizeof ss;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0 &&
	    (shunt_addr16((const struct sockaddr *)&ss, a, &port) < 0 || port != t->sport ||
	     memcmp(a, t->saddr, 16)))
		return no(why, "connected elsewhere than the offer's server");
	return 0;
}

void sign_offer(const uint8_t *key, size_t klen, const struct agent_offer *o,
		uint8_t csig[AGENT_MAC_LEN])
{
	agent_countersig(key, klen, o, csig);
}

enum sign_verdict sign_verify(const uint8_t *key, size_t klen, const struct agent_offer *o)
{
	static const uint8_t none[AGENT_MAC_LEN];
	uint8_t want[AGENT_MAC_LEN];
	if (!hmac_equal(o->csig, none, AGENT_MAC_LEN))
		return SIGN_NONE;
	agent_countersig(key, klen, o, want);
	int bad = hmac_equal(want, o->csig, AGENT_MAC_LEN);
	memset(want, 0, sizeof want);
	return bad ? SIGN_BAD : SIGN_OK;
}
