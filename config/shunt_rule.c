/* shunt transport rules: parsing and matching.
 *
 *   [rule] <shm|fabric|auto|kernel> <client|server|*> <program-glob> <addr-spec>
 *
 * addr-spec:
 *   *                      any address, any port
 *   *:PORTS                any address
 *   A.B.C.D[/N][:PORTS]    IPv4, N = 0..32 (default 32)
 *   [V6][/N][:PORTS]       IPv6, N = 0..128 (default 128); the prefix may also
 *   [V6/N][:PORTS]         be written inside the brackets
 *   V6[/N]                 bare IPv6 (two or more ':'), no port possible
 * PORTS: `*` (0..65535), `P` or `LO-HI` with 1 <= LO <= HI <= 65535.
 *
 * A prefix with host bits set (10.0.0.1/8) is an error, as in `ip route`.
 * An IPv6 rule inside ::ffff:0:0/96 with a prefix >= 96 is stored as the IPv4
 * rule it denotes; IPv4-mapped IPv6 peers are matched as IPv4 peers.
 *
 * Pure code: no globals, no allocation, no I/O.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "shunt_config.h"
#include "shunt_config_int.h"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define ADDR_TOKEN_MAX 128     /* longest addr-spec we look at */

static int is_ws(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' ||
	       ch == '\v' || ch == '\f';
}

static int is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* Strict unsigned decimal of s[0..n): digits only, value <= max. */
static int parse_uint(const char *s, size_t n, unsigned long max,
		      unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return -1;
		if (v > (max - (unsigned long)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	*out = v;
	return 0;
}

static int parse_ports(struct shunt_rule *r, const char *s, size_t n,
		       char *err, size_t errlen)
{
	char q[QUOTE_MAX + 4];
	const char *dash;
	unsigned long lo, hi;

	if (n == 1 && s[0] == '*') {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	dash = memchr(s, '-', n);
	if (!dash) {
		if (parse_uint(s, n, 65535, &lo) == 0 && lo >= 1) {
			r->port_lo = r->port_hi = (uint16_t)lo;
			return 0;
		}
	} else if (parse_uint(s, (size_t)(dash - s), 65535, &lo) == 0 &&
		   parse_uint(dash + 1, n - (size_t)(dash - s) - 1, 65535,
			      &hi) == 0 && lo >= 1 && hi >= 1) {
		if (lo > hi) {
			shunt_config_quote(q, sizeof(q), s, n);
			return shunt_config_fail(err, errlen, "rule",
				    "bad port range '%s' (low port above high port)",
				    q);
		}
		r->port_lo = (uint16_t)lo;
		r->port_hi = (uint16_t)hi;
		return 0;
	}
	shunt_config_quote(q, sizeof(q), s, n);
	return shunt_config_fail(err, errlen, "rule",
		    "bad port '%s' (expected 1..65535, LO-HI or *)", q);
}

/* s[0..n) is "/N" */
static int parse_prefix(struct shunt_rule *r, const char *s, size_t n,
			char *err, size_t errlen)
{
	char q[QUOTE_MAX + 4];
	unsigned max = r->family == AF_INET ? 32 : 128;
	unsigned long v;

	if (n < 2 || n > 4 || parse_uint(s + 1, n - 1, max, &v) != 0) {
		shunt_config_quote(q, sizeof(q), s, n);
		return shunt_config_fail(err, errlen, "rule",
			    "bad prefix '%s' for %s address (expected 0..%u)",
			    q, r->family == AF_INET ? "IPv4" : "IPv6", max);
	}
	r->prefix = (unsigned)v;
	return 0;
}

/* The address text a[0..n) for family r->family into r->addr. */
static int parse_ip(struct shunt_rule *r, const char *a, size_t n,
		    char *err, size_t errlen)
{
	char buf[ADDR_TOKEN_MAX];
	char q[QUOTE_MAX + 4];

	if (n < sizeof(buf)) {
		memcpy(buf, a, n);
		buf[n] = '\0';
		if (inet_pton(r->family, buf, r->addr) == 1)
			return 0;
	}
	shunt_config_quote(q, sizeof(q), a, n);
	return shunt_config_fail(err, errlen, "rule", "bad %s address '%s'",
		    r->family == AF_INET ? "IPv4" : "IPv6", q);
}

/* Error if any bit beyond the prefix is set. */
static int check_host_bits(const struct shunt_rule *r, const char *spec,
			   size_t n, char *err, size_t errlen)
{
	unsigned bytes = r->family == AF_INET ? 4 : 16;
	unsigned i;
	uint8_t net[16];
	char q[QUOTE_MAX + 4], txt[INET6_ADDRSTRLEN];
	int bad = 0;

	memcpy(net, r->addr, sizeof(net));
	for (i = 0; i < bytes; i++) {
		unsigned bit0 = i * 8;
		uint8_t mask;

		if (bit0 + 8 <= r->prefix)
			mask = 0xff;
		else if (bit0 >= r->prefix)
			mask = 0;
		else
			mask = (uint8_t)(0xff << (8 - (r->prefix - bit0)));
		if (net[i] & (uint8_t)~mask)
			bad = 1;
		net[i] &= mask;
	}
	if (!bad)
		return 0;
	shunt_config_quote(q, sizeof(q), spec, n);
	if (!inet_ntop(r->family, net, txt, sizeof(txt)))
		txt[0] = '\0';
	return shunt_config_fail(err, errlen, "rule",
		    "host bits set in '%s' (the network is %s/%u)",
		    q, txt, r->prefix);
}

/* ::ffff:a.b.c.d/N (N >= 96) is the IPv4 rule a.b.c.d/(N-96). */
static void normalize_mapped(struct shunt_rule *r)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff };

	if (r->family != AF_INET6 || r->prefix < 96 ||
	    memcmp(r->addr, pfx, sizeof(pfx)) != 0)
		return;
	memmove(r->addr, r->addr + 12, 4);
	memset(r->addr + 4, 0, 12);
	r->family = AF_INET;
	r->prefix -= 96;
}

static int parse_addrspec(struct shunt_rule *r, const char *s, size_t n,
			  char *err, size_t errlen)
{
	char q[QUOTE_MAX + 4];
	const char *end = s + n, *p, *slash, *colon;
	size_t ncolons = 0;
	int dot_first = 0;
	size_t i;

	r->family = 0;
	r->prefix = 0;
	memset(r->addr, 0, sizeof(r->addr));
	r->port_lo = 0;
	r->port_hi = 65535;

	if (n >= ADDR_TOKEN_MAX) {
		shunt_config_quote(q, sizeof(q), s, n);
		return shunt_config_fail(err, errlen, "rule", "bad address '%s' (too long)", q);
	}

	if (s[0] == '*') {
		if (n == 1)
			return 0;
		if (s[1] == ':')
			return parse_ports(r, s + 2, n - 2, err, errlen);
		shunt_config_quote(q, sizeof(q), s, n);
		return shunt_config_fail(err, errlen, "rule",
			    "bad address '%s' (expected * or *:PORTS)", q);
	}

	if (s[0] == '[') {
		const char *close = memchr(s, ']', n);
		const char *in = s + 1;
		size_t inlen;
		int have_prefix = 0;

		if (!close) {
			shunt_config_quote(q, sizeof(q), s, n);
			return shunt_config_fail(err, errlen, "rule", "bad address '%s' (missing ']')",
				    q);
		}
		inlen = (size_t)(close - in);
		r->family = AF_INET6;
		r->prefix = 128;
		slash = memchr(in, '/', inlen);
		if (parse_ip(r, in, slash ? (size_t)(slash - in) : inlen,
			     err, errlen))
			return -1;
		if (slash) {
			if (parse_prefix(r, slash, (size_t)(close - slash),
					 err, errlen))
				return -1;
			have_prefix = 1;
		}
		p = close + 1;
		if (p < end && *p == '/') {
			const char *pe = memchr(p, ':', (size_t)(end - p));

			if (!pe)
				pe = end;
			if (have_prefix) {
				shunt_config_quote(q, sizeof(q), s, n);
				return shunt_config_fail(err, errlen, "rule",
					    "bad address '%s' (two prefixes)", q);
			}
			if (parse_prefix(r, p, (size_t)(pe - p), err, errlen))
				return -1;
			p = pe;
		}
		if (check_host_bits(r, s, n, err, errlen))
			return -1;
		if (p < end) {
			if (*p != ':') {
				shunt_config_quote(q, sizeof(q), s, n);
				return shunt_config_fail(err, errlen, "rule",
					    "bad address '%s' (expected ':PORTS' after ']')",
					    q);
			}
			if (parse_ports(r, p + 1, (size_t)(end - p - 1),
					err, errlen))
				return -1;
		}
		normalize_mapped(r);
		return 0;
	}

	for (i = 0; i < n; i++) {
		if (s[i] == ':')
			ncolons++;
		else if (s[i] == '.' && ncolons == 0)
			dot_first = 1;
	}

	/* bare IPv6 has two or more ':' and no '.' before the first one (an
	 * embedded IPv4 part comes last: ::ffff:1.2.3.4) */
	if (ncolons >= 2 && !dot_first) {
		/* bare IPv6, no port */
		r->family = AF_INET6;
		r->prefix = 128;
		slash = memchr(s, '/', n);
		if (parse_ip(r, s, slash ? (size_t)(slash - s) : n, err, errlen))
			return -1;
		if (slash && parse_prefix(r, slash, (size_t)(end - slash),
					  err, errlen))
			return -1;
		if (check_host_bits(r, s, n, err, errlen))
			return -1;
		normalize_mapped(r);
		return 0;
	}

	/* IPv4[/N][:PORTS] */
	r->family = AF_INET;
	r->prefix = 32;
	colon = memchr(s, ':', n);
	p = colon ? colon : end;
	slash = memchr(s, '/', (size_t)(p - s));
	if (parse_ip(r, s, (size_t)((slash ? slash : p) - s), err, errlen))
		return -1;
	if (slash && parse_prefix(r, slash, (size_t)(p - slash), err, errlen))
		return -1;
	if (check_host_bits(r, s, (size_t)(p - s), err, errlen))
		return -1;
	if (colon && parse_ports(r, colon + 1, (size_t)(end - colon - 1),
				 err, errlen))
		return -1;
	return 0;
}

static int word_is(const char *s, size_t n, const char *w)
{
	return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

int shunt_config_parse_rule(struct shunt_rule *r, const char *text,
			    char *err, size_t errlen)
{
	static const char usage[] =
		"<shm|fabric|auto|kernel> <client|server|*> <program> <address>";
	const char *tok[5];
	size_t len[5];
	unsigned ntok = 0;
	int first = 1;
	const char *p = text;
	char q[QUOTE_MAX + 4];

	if (err && errlen)
		err[0] = '\0';
	if (!r)
		return shunt_config_fail(err, errlen, "rule", "no rule");
	memset(r, 0, sizeof(*r));
	if (!text)
		text = p = "";

	/* split into at most 5 words (the 5th only to report it) */
	for (;;) {
		const char *start;

		while (*p && is_ws(*p))
			p++;
		if (!*p)
			break;
		start = p;
		while (*p && !is_ws(*p))
			p++;
		if (first && word_is(start, (size_t)(p - start), "rule")) {
			first = 0;
			continue;
		}
		first = 0;
		tok[ntok] = start;
		len[ntok] = (size_t)(p - start);
		if (++ntok == 5)
			break;
	}
	if (ntok == 0)
		return shunt_config_fail(err, errlen, "rule", "empty rule (expected '%s')", usage);

	if (word_is(tok[0], len[0], "auto"))
		r->transport = SHUNT_TP_AUTO;
	else if (word_is(tok[0], len[0], "shm"))
		r->transport = SHUNT_TP_SHM;
	else if (word_is(tok[0], len[0], "fabric"))
		r->transport = SHUNT_TP_FABRIC;
	else if (word_is(tok[0], len[0], "kernel"))
		r->transport = SHUNT_TP_KERNEL;
	else {
		shunt_config_quote(q, sizeof(q), tok[0], len[0]);
		return shunt_config_fail(err, errlen, "rule",
			    "bad transport '%s' (expected shm|fabric|auto|kernel)",
			    q);
	}
	if (ntok < 4)
		return shunt_config_fail(err, errlen, "rule", "missing %s (expected '%s')",
			    ntok == 1 ? "role" : ntok == 2 ? "program" : "address",
			    usage);
	if (ntok > 4) {
		shunt_config_quote(q, sizeof(q), tok[4], len[4]);
		return shunt_config_fail(err, errlen, "rule",
			    "unexpected '%s' after the address (expected '%s')",
			    q, usage);
	}

	if (word_is(tok[1], len[1], "*"))
		r->role = SHUNT_ROLE_ANY;
	else if (word_is(tok[1], len[1], "client"))
		r->role = SHUNT_ROLE_CLIENT;
	else if (word_is(tok[1], len[1], "server"))
		r->role = SHUNT_ROLE_SERVER;
	else {
		shunt_config_quote(q, sizeof(q), tok[1], len[1]);
		return shunt_config_fail(err, errlen, "rule", "bad role '%s' (expected client|server|*)",
			    q);
	}

	if (len[2] >= SHUNT_PROG_GLOB_MAX) {
		shunt_config_quote(q, sizeof(q), tok[2], len[2]);
		return shunt_config_fail(err, errlen, "rule",
			    "program pattern '%s' too long (at most %d characters)",
			    q, SHUNT_PROG_GLOB_MAX - 1);
	}
	memcpy(r->prog, tok[2], len[2]);
	r->prog[len[2]] = '\0';

	return parse_addrspec(r, tok[3], len[3], err, errlen);
}

/* ---- matching ---------------------------------------------------------- */

static int prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, b, full) != 0)
		return 0;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		if ((a[full] ^ b[full]) & mask)
			return 0;
	}
	return 1;
}

const struct shunt_rule *shunt_config_match(const struct shunt_config *c,
					    enum shunt_role role,
					    const char *prog,
					    const struct sockaddr *sa,
					    socklen_t salen)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff };
	int family = 0;           /* 0: address unknown */
	uint8_t addr[16] = { 0 };
	unsigned port = 0;
	unsigned i, n;

	if (!c)
		return NULL;
	if (!prog)
		prog = "";
	if (sa && salen >= (socklen_t)sizeof(sa_family_t)) {
		if (sa->sa_family == AF_INET &&
		    salen >= (socklen_t)sizeof(struct sockaddr_in)) {
			const struct sockaddr_in *sin = (const void *)sa;

			family = AF_INET;
			memcpy(addr, &sin->sin_addr, 4);
			port = ntohs(sin->sin_port);
		} else if (sa->sa_family == AF_INET6 &&
			   salen >= (socklen_t)sizeof(struct sockaddr_in6)) {
			const struct sockaddr_in6 *sin6 = (const void *)sa;

			family = AF_INET6;
			memcpy(addr, &sin6->sin6_addr, 16);
			port = ntohs(sin6->sin6_port);
			if (memcmp(addr, mapped, sizeof(mapped)) == 0) {
				family = AF_INET;
				memmove(addr, addr + 12, 4);
				memset(addr + 4, 0, 12);
			}
		}
	}

	n = c->nrules < SHUNT_MAX_RULES ? c->nrules : SHUNT_MAX_RULES;
	for (i = 0; i < n; i++) {
		const struct shunt_rule *r = &c->rules[i];

		if (r->role != SHUNT_ROLE_ANY && r->role != role)
			continue;
		if (family == 0) {
			/* unknown peer: only rules for any address and port */
			if (r->family != 0 || r->port_lo != 0 ||
			    r->port_hi != 65535)
				continue;
		} else {
			if (r->family != 0 &&
			    (r->family != family ||
			     !prefix_eq(r->addr, addr,
					r->prefix > (family == AF_INET ? 32u : 128u)
						? (family == AF_INET ? 32u : 128u)
						: r->prefix)))
				continue;
			if (port < r->port_lo || port > r->port_hi)
				continue;
		}
		if (!(r->prog[0] == '*' && r->prog[1] == '\0') &&
		    fnmatch(r->prog, prog, 0) != 0)
			continue;
		return r;
	}
	return NULL;
}

enum shunt_transport shunt_config_decide(const struct shunt_config *c,
					 enum shunt_role role, const char *prog,
					 const struct sockaddr *sa,
					 socklen_t salen)
{
	const struct shunt_rule *r = shunt_config_match(c, role, prog, sa, salen);

	if (r)
		return r->transport;
	return c ? c->default_transport : SHUNT_TP_AUTO;
}
