/* The listener registry's entry names (see shunt_regname.h). */
#include "shunt_regname.h"
#include "shunt_tuple.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hex16(const uint8_t a[16], char out[33])
{
	static const char d[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = d[a[i] >> 4];
		out[2 * i + 1] = d[a[i] & 15];
	}
	out[32] = 0;
}

void shunt_regname_format(char *buf, size_t len, unsigned long netns, const uint8_t a[16],
			unsigned port)
{
	char h[33];
	if (shunt_addr16_any(a)) {
		snprintf(buf, len, "n%lu-any-%u", netns, port);
		return;
	}
	hex16(a, h);
	if (shunt_addr16_loopback(a))
		snprintf(buf, len, "n%lu-%s-%u", netns, h, port);
	else
		snprintf(buf, len, "g-%s-%u", h, port);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decimal digits up to end, at most max: 0, or -1. */
static int decimal(const char *s, const char *end, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;
	if (s == end || (*s == '0' && end - s > 1))
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || v > (max - (unsigned long)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	*out = v;
	return 0;
}

int shunt_regname_parse(const char *name, struct shunt_regname *out)
{
	memset(out, 0, sizeof(*out));
	const char *p, *dash;
	if (!strncmp(name, "g-", 2)) {
		out->host_wide = 1;
		p = name + 2;
	} else if (name[0] == 'n' && (dash = strchr(name, '-'))) {
		if (decimal(name + 1, dash, (unsigned long)-1, &out->netns))
			return -1;
		p = dash + 1;
	} else {
		return -1;
	}
	if (!out->host_wide && !strncmp(p, "any-", 4)) {
		out->any = 1;
		p += 4;
	} else {
		for (int i = 0; i < 16; i++) {
			int hi = hexval(p[2 * i]), lo = hi < 0 ? -1 : hexval(p[2 * i + 1]);
			if (lo < 0)
				return -1;
			out->addr[i] = (uint8_t)(hi << 4 | lo);
		}
		if (p[32] != '-')
			return -1;
		p += 33;
	}
	unsigned long port;
	if (decimal(p, p + strlen(p), 65535, &port) || !port)
		return -1;
	out->port = (unsigned)port;
	/* Only what format writes: a "g-" loopback or wildcard, an "n"
	 * address that is neither, is not an entry. */
	if (!out->any && (out->host_wide == shunt_addr16_loopback(out->addr) ||
			  shunt_addr16_any(out->addr)))
		return -1;
	return 0;
}
