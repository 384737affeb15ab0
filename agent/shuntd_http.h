/* The HTTP requests shuntd serves on its TCP port: GET /metrics and
 * GET /healthz. */
#ifndef SHUNTD_HTTP_H
#define SHUNTD_HTTP_H

#include <stddef.h>
#include <stdint.h>

/* in[0..n) is what a client sent so far, cap the most it can send.
 * 0: the request head is not complete yet.  Otherwise *resp (malloc'ed,
 * may be NULL when out of memory) and *len hold the whole response and the
 * connection closes after it: 1 for GET /metrics and GET /healthz (200, or
 * 503 when the agent is not healthy), -1 for anything else (400, 404,
 * 405). */
int http_answer(const uint8_t *in, size_t n, size_t cap, char **resp, size_t *len);

#endif
