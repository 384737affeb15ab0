/* Rendezvous steps both transports take the same way (shunt_rendezvous.h). */
#include "shunt_rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shunt_clock.h"
#include "shunt_forklock.h"
#include "shunt_conn.h"
#include "shunt_real.h"
#include "shunt_tuple.h"

/* The source address the kernel will pick for dst: a connected UDP socket
 * is routed without sending anything.  Four system calls, so the answer
 * is kept a second per destination address: a route that changes within
 * it names an offer the server will not find (it declines, nothing lost). */
#define ROUTE_CACHE 16
#define ROUTE_TTL_MS 1000
static struct {
	uint8_t dst[16];
	struct sockaddr_storage src;
	socklen_t slen;
	uint64_t until;
} route_cache[ROUTE_CACHE];
static unsigned route_next;
static pthread_mutex_t route_mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(route_mu, SHUNT_RANK_ROUTE)

static int route_source(const struct sockaddr *dst, socklen_t len,
			struct sockaddr_storage *src, socklen_t *slen)
{
	uint8_t a[16];
	uint16_t port;
	if (shunt_addr16(dst, a, &port) < 0)
		return -1;
	uint64_t now = shunt_now_ms();
	pthread_mutex_lock(&route_mu);
	for (unsigned i = 0; i < ROUTE_CACHE; i++) {
		if (route_cache[i].until > now && route_cache[i].src.ss_family == dst->sa_family &&
		    !memcmp(route_cache[i].dst, a, 16) && route_cache[i].slen <= *slen) {
			memcpy(src, &route_cache[i].src, route_cache[i].slen);
			*slen = route_cache[i].slen;
			pthread_mutex_unlock(&route_mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&route_mu);
	int s = REAL(socket)(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int rc = REAL(connect)(s, dst, len);
	if (rc == 0)
		rc = getsockname(s, (struct sockaddr *)src, slen);
	REAL(close)(s);
	if (rc == 0 && *slen <= sizeof route_cache[0].src) {
		pthread_mutex_lock(&route_mu);
		unsigned i = route_next++ % ROUTE_CACHE;
		memcpy(route_cache[i].dst, a, 16);
		memcpy(&route_cache[i].src, src, *slen);
		route_cache[i].slen = *slen;
		route_cache[i].until = now + ROUTE_TTL_MS;
		pthread_mutex_unlock(&route_mu);
	}
	return rc;
}

static int addr_unspecified(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == 0;
	const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	return IN6_IS_ADDR_UNSPECIFIED(a);
}

static in_port_t port_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					: ((const struct sockaddr_in6 *)ss)->sin6_port;
}

static void set_port(struct sockaddr_storage *ss, in_port_t p)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = p;
	else
		((struct sockaddr_in6 *)ss)->sin6_port = p;
}

/* The ephemeral range, for choosing a port ourselves; {0, 0} when we
 * should not (unreadable, or ports reserved out of it: bind(0) knows to
 * skip those, a port we choose would not). */
static void port_range(unsigned *lo, unsigned *hi)
{
	static unsigned r[2] = {1, 0}; /* {1, 0}: not read yet */
	if (__atomic_load_n(&r[0], __ATOMIC_ACQUIRE) != 1 || __atomic_load_n(&r[1], __ATOMIC_ACQUIRE)) {
		*lo = r[0];
		*hi = r[1];
		return;
	}
	unsigned a = 0, b = 0;
	char buf[64];
	int fd = open("/proc/sys/net/ipv4/ip_local_reserved_ports", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? REAL(read)(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		REAL(close)(fd);
	if (n == 1 && buf[0] == '\n') {
		fd = open("/proc/sys/net/ipv4/ip_local_port_range", O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? REAL(read)(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			REAL(close)(fd);
		if (n > 0) {
			buf[n] = 0;
			if (sscanf(buf, "%u %u", &a, &b) != 2 || a < 1024 || b > 65535 || a + 64 > b)
				a = b = 0;
		}
	}
	__atomic_store_n(&r[1], b, __ATOMIC_RELEASE);
	__atomic_store_n(&r[0], a, __ATOMIC_RELEASE);
	*lo = a;
	*hi = b;
}

/* Bind fd to src (port 0) on a free ephemeral port.  bind(port 0) searches
 * from a random point, odd ports first, for a port no socket holds; the
 * connections shunt offers leave their TIME_WAIT there, so under churn that
 * search walks thousands of held ports (milliseconds per connect with 18k
 * sockets in TIME_WAIT, measured).  A few random ports over the whole
 * range, each one hash lookup, find a free one at once while a fair share
 * is free; then the kernel's search as before. */
#define PORT_TRIES 8
static int bind_ephemeral(int fd, struct sockaddr_storage *src, socklen_t sl)
{
	unsigned lo, hi;
	port_range(&lo, &hi);
	if (hi) {
		static __thread uint32_t x;
		if (!x)
			x = (uint32_t)getpid() * 2654435761u ^ (uint32_t)shunt_now_ms() ^ (uint32_t)(uintptr_t)&x;
		for (int i = 0; i < PORT_TRIES; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			set_port(src, htons((in_port_t)(lo + x % (hi - lo + 1))));
			if (REAL(bind)(fd, (struct sockaddr *)src, sl) == 0)
				return 0;
			if (errno != EADDRINUSE)
				break;
		}
		set_port(src, 0);
	}
	return REAL(bind)(fd, (struct sockaddr *)src, sl);
}

int shunt_bind_local(int fd, const struct sockaddr *dst, socklen_t dlen,
		     struct sockaddr_storage *local, socklen_t *llen)
{
	*llen = sizeof *local;
	if (getsockname(fd, (struct sockaddr *)local, llen) < 0)
		return -1;
	in_port_t port = port_of(local);
	if (addr_unspecified(local)) {
		struct sockaddr_storage src;
		socklen_t sl = sizeof src;
		if (route_source(dst, dlen, &src, &sl) < 0 || src.ss_family != local->ss_family)
			return -1;
		if (!port) {
			/* bind() picks a port before the destination is known,
			 * so ports in TIME_WAIT stay off limits where connect()
			 * would reuse them: under heavy churn this fails first
			 * (bind-failed) and the connection takes the kernel
			 * path.  (SO_REUSEADDR would let bind pick a port whose
			 * 4-tuple is still in TIME_WAIT: connect would fail.) */
			if (bind_ephemeral(fd, &src, sl) < 0)
				return -1;
			*llen = sizeof *local;
			return getsockname(fd, (struct sockaddr *)local, llen);
		}
		/* Bound to a port on the wildcard: binding again would fail
		 * (EINVAL); the kernel fills in the address at connect from
		 * the same route. */
		*local = src;
		*llen = sl;
		set_port(local, port);
		return 0;
	}
	if (!port) {
		if (bind_ephemeral(fd, local, *llen) < 0)
			return -1;
		*llen = sizeof *local;
		return getsockname(fd, (struct sockaddr *)local, llen);
	}
	return 0;
}

void shunt_offer_start(struct shunt_conn *c)
{
	c->offer_deadline = shunt_now_ms() + shunt_config()->offer_timeout_ms;
}

int shunt_offer_over(struct shunt_conn *c)
{
	int t = c->tcp_hint || c->tcp_eof ? shunt_tcp_peek(c) : -2;
	c->tcp_hint = 0;
	return t != -2 || shunt_now_ms() >= c->offer_deadline;
}

int shunt_offer_ms_left(const struct shunt_conn *c)
{
	uint64_t now = shunt_now_ms();
	return c->offer_deadline > now ? (int)(c->offer_deadline - now) : 0;
}
