/* sockperf's message-rate window (see shunt_ab_sockperf.h). */
#include "shunt_ab_sockperf.h"

#include <stdio.h>
#include <string.h>

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

/* The word at p (up to a blank or a shell separator), its length. */
static size_t word_len(const char *p)
{
	size_t n = 0;
	while (p[n] && !is_space(p[n]) && !strchr(";&|()<>", p[n]))
		n++;
	return n;
}

static int word_is(const char *w, size_t n, const char *s)
{
	return n == strlen(s) && !strncmp(w, s, n);
}

int ab_sockperf_mps(const char *cmd, char *out, size_t len)
{
	const char *insert = NULL;
	for (const char *p = cmd; *p;) {
		if (is_space(*p) || strchr(";&|()<>", *p)) {
			p++;
			continue;
		}
		size_t n = word_len(p);
		/* sockperf, or a path ending in /sockperf, then its subcommand */
		const char *base = p;
		for (const char *q = p; q < p + n; q++)
			if (*q == '/')
				base = q + 1;
		if (!insert && word_is(base, (size_t)(p + n - base), "sockperf")) {
			const char *sub = p + n;
			while (is_space(*sub))
				sub++;
			size_t sn = word_len(sub);
			if (word_is(sub, sn, "ping-pong") || word_is(sub, sn, "pp"))
				insert = sub + sn;
		}
		if (!strncmp(p, "--mps", 5) || !strncmp(p, "--pps", 5))
			return snprintf(out, len, "%s", cmd) < (int)len ? 0 : -1;
		p += n;
	}
	if (!insert)
		return snprintf(out, len, "%s", cmd) < (int)len ? 0 : -1;
	int w = snprintf(out, len, "%.*s %s%s", (int)(insert - cmd), cmd, AB_SOCKPERF_MPS, insert);
	return w >= 0 && w < (int)len ? 1 : -1;
}

int ab_sockperf_overflowed(const char *output)
{
	return strstr(output, "_seqN > m_maxSequenceNo") != NULL;
}
