#include "shuntd_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shuntd.h"

#define PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"

static const char *reason(int code)
{
	return code == 200 ? "OK" : code == 404 ? "Not Found" : code == 405 ? "Method Not Allowed"
				  : code == 503 ? "Service Unavailable" : "Bad Request";
}

/* Head and body in one buffer; body (may be NULL) is freed. */
static char *respond(int code, const char *type, char *body, size_t blen, size_t *len)
{
	char head[256];
	int hn = snprintf(head, sizeof head,
			  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			  "Connection: close\r\n\r\n",
			  code, reason(code), type ? type : "text/plain", blen);
	char *out = malloc((size_t)hn + blen);
	if (out) {
		memcpy(out, head, (size_t)hn);
		if (blen)
			memcpy(out + hn, body, blen);
		*len = (size_t)hn + blen;
	}
	free(body);
	return out;
}

/* GET /healthz, for liveness and readiness probes.  It is answered from the
 * event loop itself, so an answer at all means the loop turns (a stuck loop
 * answers nothing and the probe's timeout fails it); what is left to check
 * is the rundir the agent files into.  No scan: a probe must stay cheap. */
static char *health(size_t *len, int *ok)
{
	char why[SHUNT_ERR_MAX];
	*ok = rundir_check(shuntd.rundir, why, sizeof why) == 0;
	if (*ok)
		snprintf(why, sizeof why, "ok");
	char *body = NULL;
	int n = asprintf(&body, "%s\n", why);
	if (n < 0)
		return respond(503, NULL, NULL, 0, len);
	return respond(*ok ? 200 : 503, NULL, body, (size_t)n, len);
}

int http_answer(const uint8_t *in, size_t n, size_t cap, char **resp, size_t *len)
{
	*resp = NULL;
	*len = 0;
	if (!memmem(in, n, "\r\n\r\n", 4)) {
		if (n < cap)
			return 0;
		*resp = respond(400, NULL, NULL, 0, len); /* a head larger than we take */
		return -1;
	}
	char line[128], method[8], path[64], version[16];
	const uint8_t *eol = memmem(in, n, "\r\n", 2);
	size_t ln = (size_t)(eol - in);
	if (ln >= sizeof line) {
		*resp = respond(400, NULL, NULL, 0, len);
		return -1;
	}
	memcpy(line, in, ln);
	line[ln] = 0;
	if (sscanf(line, "%7s %63s %15s", method, path, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7)) {
		*resp = respond(400, NULL, NULL, 0, len);
		return -1;
	}
	if (strcmp(method, "GET")) {
		*resp = respond(405, NULL, NULL, 0, len);
		return -1;
	}
	if (!strcmp(path, "/healthz")) {
		int ok;
		*resp = health(len, &ok);
		return 1; /* a 503 is an answer, not a bad request */
	}
	if (strcmp(path, "/metrics")) {
		*resp = respond(404, NULL, NULL, 0, len);
		return -1;
	}
	shuntd.n.requests[SR_METRICS]++; /* this one included */
	size_t blen = 0;
	char *body = metrics_render(&blen);
	if (!body) {
		*resp = respond(400, NULL, NULL, 0, len);
		return -1;
	}
	*resp = respond(200, PROMETHEUS_TYPE, body, blen, len);
	return 1;
}
