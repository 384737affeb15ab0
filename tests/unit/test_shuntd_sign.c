/* Unit tests for agent/shuntd_sign.c: which passed sockets prove an
 * offer's client end, and the countersignature's verdicts (wrong tuple,
 * wrong endpoint, wrong key, cut short, none). */
#include "agent/shuntd_sign.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void mapped4(uint8_t a[16], const char *ip)
{
	memset(a, 0, 16);
	a[10] = a[11] = 0xff;
	cr_assert_eq(inet_pton(AF_INET, ip, a + 12), 1);
}

/* A TCP (or type) socket bound to ip on a free port; *port gets it. */
static int bound(int type, const char *ip, uint16_t *port)
{
	int fd = socket(AF_INET, type, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	inet_pton(AF_INET, ip, &sa.sin_addr);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	socklen_t len = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &len);
	*port = ntohs(sa.sin_port);
	return fd;
}

static struct agent_tuple tuple(const char *cip, uint16_t cport, const char *sip, uint16_t sport)
{
	struct agent_tuple t;
	memset(&t, 0, sizeof t);
	mapped4(t.caddr, cip);
	mapped4(t.saddr, sip);
	t.cport = cport;
	t.sport = sport;
	return t;
}

Test(socket, bound_tcp_socket_proves_its_port)
{
	const char *why = NULL;
	uint16_t port;
	int fd = bound(SOCK_STREAM, "127.0.0.1", &port);
	struct agent_tuple t = tuple("127.0.0.1", port, "127.0.0.2", 6379);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), 0, "%s", why);
	/* Another port, another address: not this socket's. */
	t.cport = (uint16_t)(port + 1);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), -1);
	cr_assert(strstr(why, "not bound"));
	t = tuple("127.0.0.3", port, "127.0.0.2", 6379);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), -1);
	close(fd);
	/* Bound on the wildcard: the port on every address. */
	fd = bound(SOCK_STREAM, "0.0.0.0", &port);
	t = tuple("127.0.0.3", port, "127.0.0.2", 6379);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), 0, "%s", why);
	close(fd);
	/* Not bound at all: port 0 is nobody's. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	t = tuple("0.0.0.0", 0, "127.0.0.2", 6379);
	t.cport = 0;
	cr_assert_eq(sign_socket_holds(fd, &t, &why), -1);
	close(fd);
}

Test(socket, connected_socket_must_be_to_the_server)
{
	const char *why = NULL;
	uint16_t lport, cport;
	int l = bound(SOCK_STREAM, "127.0.0.1", &lport);
	cr_assert_eq(listen(l, 1), 0);
	int fd = bound(SOCK_STREAM, "127.0.0.1", &cport);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(lport)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	struct agent_tuple t = tuple("127.0.0.1", cport, "127.0.0.1", lport);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), 0, "%s", why);
	t.sport = (uint16_t)(lport + 1);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), -1);
	cr_assert(strstr(why, "connected elsewhere"));
	close(fd);
	close(l);
}

Test(socket, only_tcp_sockets)
{
	const char *why = NULL;
	uint16_t port;
	struct agent_tuple t;
	int fd = bound(SOCK_DGRAM, "127.0.0.1", &port);
	t = tuple("127.0.0.1", port, "127.0.0.2", 6379);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), -1);
	cr_assert(strstr(why, "not a TCP"));
	close(fd);
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_eq(sign_socket_holds(sv[0], &t, &why), -1);
	cr_assert(strstr(why, "not a TCP"));
	close(sv[0]);
	close(sv[1]);
	fd = open("/dev/null", O_RDONLY);
	cr_assert_eq(sign_socket_holds(fd, &t, &why), -1);
	cr_assert(strstr(why, "not a socket"));
	close(fd);
	cr_assert_eq(sign_socket_holds(-1, &t, &why), -1);
	cr_assert(strstr(why, "no socket"));
}

static struct agent_offer offer(void)
{
	struct agent_offer o;
	memset(&o, 0, sizeof o);
	o.tuple = tuple("198.18.0.1", 40000, "198.18.0.2", 6379);
	memcpy(o.token, "0123456789abcdef", 16);
	strcpy(o.provider, "tcp");
	o.addr_format = 2;
	o.addrlen = 16;
	memset(o.addr, 7, 16);
	o.ring_size = 1 << 20;
	return o;
}

static const uint8_t key[] = "agents-countersign-key-0123";
#define KLEN (sizeof key - 1)

Test(verify, verdicts)
{
	struct agent_offer o = offer(), x;
	cr_assert_eq(sign_verify(key, KLEN, &o), SIGN_NONE);
	sign_offer(key, KLEN, &o, o.csig);
	cr_assert_eq(sign_verify(key, KLEN, &o), SIGN_OK);
	/* The signature of one tuple does not serve another. */
	x = o;
	x.tuple.cport = 40001;
	cr_assert_eq(sign_verify(key, KLEN, &x), SIGN_BAD);
	x = o;
	x.tuple.sport = 6380;
	cr_assert_eq(sign_verify(key, KLEN, &x), SIGN_BAD);
	x = o;
	x.tuple.caddr[15] = 9;
	cr_assert_eq(sign_verify(key, KLEN, &x), SIGN_BAD);
	/* Nor another endpoint, nor another token. */
	x = o;
	x.addr[2] ^= 0x10;
	cr_assert_eq(sign_verify(key, KLEN, &x), SIGN_BAD);
	x = o;
	x.token[15] ^= 1;
	cr_assert_eq(sign_verify(key, KLEN, &x), SIGN_BAD);
	/* Another key, the key cut short. */
	cr_assert_eq(sign_verify((const uint8_t *)"another-agents-key-0123", 23, &o), SIGN_BAD);
	cr_assert_eq(sign_verify(key, KLEN - 1, &o), SIGN_BAD);
	/* A signature cut short (its tail zeroed), or one bit off. */
	x = o;
	memset(x.csig + 16, 0, 16);
	cr_assert_eq(sign_verify(key, KLEN, &x), SIGN_BAD);
	x = o;
	x.csig[0] ^= 0x80;
	cr_assert_eq(sign_verify(key, KLEN, &x), SIGN_BAD);
}
