/* libFuzzer target for shuntd's HTTP side (agent/shuntd_http.c): what any
 * TCP client can send before its request head is complete.
 *
 * http_answer() must be total: "not yet" only while no head end has come
 * and there is room for more; otherwise one whole response, whose status
 * line is HTTP/1.1, whose head ends where it should and whose
 * Content-Length is the body's length, 200 or 503 only for the requests it
 * serves.  Nothing is read past the input (ASan). */
#include <stdlib.h>
#include <string.h>

#include "agent/shuntd.h"
#include "agent/shuntd_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)
#define IN_MAX 1024 /* shuntd_client.c's request buffer */

struct shuntd shuntd;
static int healthy;

/* What http_answer() asks of the rest of the agent. */
int rundir_check(const char *rundir, char *err, size_t errlen)
{
	(void)rundir;
	if (healthy)
		return 0;
	strncpy(err, "rundir /x: r/ is missing or not usable", errlen - 1);
	err[errlen - 1] = 0;
	return -1;
}

char *metrics_render(size_t *len)
{
	static const char body[] = "# HELP x x\n# TYPE x gauge\nx 1\n";
	char *b = malloc(sizeof body);
	if (b) {
		memcpy(b, body, sizeof body);
		*len = sizeof body - 1;
	}
	return b;
}

static void check_response(const char *r, size_t len, int rc)
{
	CHECK(len > 12 && !memcmp(r, "HTTP/1.1 ", 9));
	int code = atoi(r + 9);
	CHECK(code == 200 || code == 400 || code == 404 || code == 405 || code == 503);
	CHECK((code == 200 || code == 503) == (rc == 1));
	const char *end = memmem(r, len, "\r\n\r\n", 4);
	CHECK(end);
	size_t head = (size_t)(end - r) + 4;
	const char *cl = memmem(r, head, "Content-Length: ", 16);
	CHECK(cl);
	CHECK((size_t)strtoul(cl + 16, NULL, 10) == len - head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	healthy = data[0] & 1;
	data++;
	size--;
	if (size > IN_MAX)
		size = IN_MAX;
	/* As the agent calls it: with what has arrived, against the room it
	 * has (full or not). */
	size_t caps[2] = {IN_MAX, size};
	for (int i = 0; i < 2; i++) {
		char *resp = NULL;
		size_t len = 0;
		int rc = http_answer(data, size, caps[i], &resp, &len);
		CHECK(rc >= -1 && rc <= 1);
		if (rc == 0) {
			CHECK(!resp && size < caps[i] && !memmem(data, size, "\r\n\r\n", 4));
			continue;
		}
		if (resp)
			check_response(resp, len, rc);
		free(resp);
	}
	return 0;
}
