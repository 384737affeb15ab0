#include "shunt_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shunt_fdtab.h"
#include "shunt_real.h"
#include "shunt_ownfd.h"

static struct shunt_proc_fd log_file = SHUNT_PROC_FD_INIT;

static const char *level_name[] = {"error", "warn", "info", "debug"};

/* The file of log_file's pattern for this process; a new fd or -1. */
static int open_log(void *arg)
{
	const char *pattern = arg;
	pid_t pid = getpid();
	char path[PATH_MAX];
	size_t o = 0;
	for (const char *p = pattern; *p && o + 1 < sizeof path; p++) {
		if (p[0] == '%' && p[1] == '%') {
			path[o++] = '%';
			p++;
		} else if (p[0] == '%' && p[1] == 'p') {
			int n = snprintf(path + o, sizeof path - o, "%d", (int)pid);
			if (n < 0 || (size_t)n >= sizeof path - o)
				return -1;
			o += (size_t)n;
			p++;
		} else {
			path[o++] = *p;
		}
	}
	path[o] = 0;
	return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* stderr is only written when it is not a socket (an inetd-style server has
 * its connection on fds 0-2). */
static int stderr_usable(void)
{
	struct shunt_fd *e = shunt_fd_peek(2);
	if (e && shunt_fd_kind(e) != SHUNT_FD_UNKNOWN)
		return 0;
	struct stat st;
	return fstat(2, &st) == 0 && !S_ISSOCK(st.st_mode);
}

static int target(void)
{
	const struct shunt_config *c = shunt_config();
	if (!c->log_file[0])
		return stderr_usable() ? 2 : -1;
	/* One of shunt's own: out of the low numbers (some daemons expect
	 * open() to return 0-2 after closing stdio) and out of the
	 * application's reach; a child after fork opens its own file. */
	int fd = shunt_proc_fd(&log_file, getpid(), open_log, (void *)c->log_file);
	return fd >= 0 ? fd : stderr_usable() ? 2 : -1;
}

void shunt_log(enum shunt_log_level lvl, const char *fmt, ...)
{
	int saved = errno;
	SHUNT_GUARD_ENTER();
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "shunt[%d] %s: %s: ", (int)getpid(),
			 shunt_prog(), level_name[lvl]);
	if (n > 0 && (size_t)n < sizeof buf) {
		va_list ap;
		va_start(ap, fmt);
		int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
		va_end(ap);
		if (m > 0)
			n += m;
		if ((size_t)n >= sizeof buf - 1)
			n = sizeof buf - 2;
		buf[n++] = '\n';
		int fd = target();
		if (fd >= 0) {
			/* One write: lines from several processes sharing a
			 * file do not interleave (O_APPEND). */
			ssize_t w = REAL(write)(fd, buf, (size_t)n);
			(void)w;
		}
	}
	SHUNT_GUARD_LEAVE();
	errno = saved;
}

void shunt_format_addr(const struct sockaddr *sa, socklen_t len, char *buf,
		       size_t size)
{
	char a[INET6_ADDRSTRLEN];
	if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
		snprintf(buf, size, "%s:%u", a, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof a);
		snprintf(buf, size, "[%s]:%u", a, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, size, "?");
	}
}
