/* What an agent answers shunt doctor over HTTP (GET /healthz, GET
 * /metrics), read by tools/shunt_doctor_judge.c: any bytes are an answer
 * with a body inside the input, or no answer; a version found is short
 * printable ASCII. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/shunt_doctor_judge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes: a read past it is caught. */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	const char *body = NULL;
	size_t blen = 0;
	int status = doctor_http_parse(buf, size, &body, &blen);
	if (status >= 0) {
		if (status < 100 || status > 999 || body < buf || body + blen > buf + size)
			abort();
	} else {
		body = buf;
		blen = size;
	}
	char v[32];
	if (doctor_metrics_version(body, blen, v, sizeof v) == 0) {
		size_t n = strlen(v);
		if (n == 0 || n > 31)
			abort();
		for (size_t i = 0; i < n; i++)
			if (v[i] <= ' ' || v[i] >= 0x7f || v[i] == '"')
				abort();
	}
	free(buf);
	return 0;
}
