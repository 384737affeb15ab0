/* Logging: one line per event, "shunt[PID] PROG: LEVEL: message", to stderr
 * or to log_file (with %p expanded, reopened in each child process).  Never
 * writes to a socket: a line on the application's stream would corrupt it. */
#ifndef SHUNT_LOG_H
#define SHUNT_LOG_H

#include "shunt_core.h"

void shunt_log(enum shunt_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline int shunt_log_on(enum shunt_log_level lvl)
{
	return lvl <= shunt_config()->log_level;
}

#define SHUNT_LOG(lvl, ...)                                                    \
	do {                                                                   \
		if (unlikely(shunt_log_on(lvl)))                               \
			shunt_log(lvl, __VA_ARGS__);                           \
	} while (0)
#define SHUNT_DEBUG(...) SHUNT_LOG(SHUNT_LOG_DEBUG, __VA_ARGS__)
#define SHUNT_INFO(...) SHUNT_LOG(SHUNT_LOG_INFO, __VA_ARGS__)
#define SHUNT_WARN(...) SHUNT_LOG(SHUNT_LOG_WARN, __VA_ARGS__)

/* "1.2.3.4:80" / "[::1]:80" / "?" */
void shunt_format_addr(const struct sockaddr *sa, socklen_t len, char *buf,
		       size_t size);

#endif
