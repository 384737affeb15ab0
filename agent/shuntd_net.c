#include "shuntd_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *what, const char *where)
{
	snprintf(err, errlen, "%s %s: %s", what, where, strerror(errno));
	return -1;
}

static int bind_listen(int fd, const struct sockaddr *sa, socklen_t len, char *err,
		       size_t errlen, const char *where)
{
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, sa, len) < 0 || listen(fd, 511) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return fail(err, errlen, "cannot listen on", where);
	}
	return fd;
}

int net_tcp_listen(const char *addr, uint16_t port, char *err, size_t errlen)
{
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	char where[80];
	snprintf(where, sizeof where, "%s port %u", addr ? addr : "every address",
		 (unsigned)port);
	if (addr && inet_pton(AF_INET, addr, &in.sin_addr) == 1) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return fail(err, errlen, "socket for", where);
		return bind_listen(fd, (struct sockaddr *)&in, sizeof in, err, errlen, where);
	}
	if (addr && inet_pton(AF_INET6, addr, &in6.sin6_addr) != 1) {
		snprintf(err, errlen, "--listen %s: not an IPv4 or IPv6 address", addr);
		return -1;
	}
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 && !addr && (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) {
		/* A host without IPv6: every IPv4 address. */
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return fail(err, errlen, "socket for", where);
		return bind_listen(fd, (struct sockaddr *)&in, sizeof in, err, errlen, where);
	}
	if (fd < 0)
		return fail(err, errlen, "socket for", where);
	int zero = 0;
	if (!addr)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	return bind_listen(fd, (struct sockaddr *)&in6, sizeof in6, err, errlen, where);
}

int net_unix_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof un.sun_path) {
		snprintf(err, errlen, "unix socket path %s is too long", path);
		return -1;
	}
	strcpy(un.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(err, errlen, "socket for", path);
	struct stat st;
	/* Only ever replace a socket: a file of another kind is a mistake. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	return bind_listen(fd, (struct sockaddr *)&un, sizeof un, err, errlen, path);
}

int net_accept(int lfd, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof *ss;
	for (;;) {
		int fd = accept4(lfd, (struct sockaddr *)ss, ss ? &len : NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			int one = 1;
			if (ss && ss->ss_family != AF_UNIX)
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			return fd;
		}
		if (errno != EINTR && errno != ECONNABORTED)
			return -1;
	}
}
