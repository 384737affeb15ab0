#include "shuntd_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shuntd.h"

static const char *reason(int code)
{
	return code == 200 ? "OK" : code == 404 ? "Not Found" : code == 405 ? "Method Not Allowed"
						    : "Bad Request";
}

/* Head and body in one buffer; body (may be NULL) is freed. */
static char *respond(int code, char *body, size_t blen, size_t *len)
{
	char head[256];
	int hn = snprintf(head, sizeof head,
			  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			  "Connection: close\r\n\r\n",
			  code, reason(code),
			  code == 200 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain",
			  blen);
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

int http_answer(const uint8_t *in, size_t n, size_t cap, char **resp, size_t *len)
{
	*resp = NULL;
	*len = 0;
	if (!memmem(in, n, "\r\n\r\n", 4)) {
		if (n < cap)
			return 0;
		*resp = respond(400, NULL, 0, len); /* a head larger than we take */
		return -1;
	}
	char line[128], method[8], path[64], version[16];
	const uint8_t *eol = memmem(in, n, "\r\n", 2);
	size_t ln = (size_t)(eol - in);
	if (ln >= sizeof line) {
		*resp = respond(400, NULL, 0, len);
		return -1;
	}
	memcpy(line, in, ln);
	line[ln] = 0;
	if (sscanf(line, "%7s %63s %15s", method, path, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7)) {
		*resp = respond(400, NULL, 0, len);
		return -1;
	}
	if (strcmp(method, "GET")) {
		*resp = respond(405, NULL, 0, len);
		return -1;
	}
	if (strcmp(path, "/metrics")) {
		*resp = respond(404, NULL, 0, len);
		return -1;
	}
	shuntd.n.requests[SR_METRICS]++; /* this one included */
	size_t blen = 0;
	char *body = metrics_render(&blen);
	if (!body) {
		*resp = respond(400, NULL, 0, len);
		return -1;
	}
	*resp = respond(200, body, blen, len);
	return 1;
}
