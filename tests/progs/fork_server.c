/* fork_server: the classic forking server: accept, fork, the child serves the
 * connection (echo until EOF) and exits, the parent closes its copy at once
 * and accepts the next one.
 *
 *   fork_server --port-file F --conns K [--host 127.0.0.1]
 *
 * Each child prints one line when its connection ends (the test sorts them):
 *   conn bytes=N sha256=X
 * The parent, after K connections, reaps every child (each must exit 0) and
 * prints "PASS fork_server conns=K". */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void serve(int fd)
{
	static char buf[1 << 16];
	struct sha256 s;
	char hex[65], line[128];
	sha256_init(&s);
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail_errno("child: read");
		if (r == 0)
			break;
		sha256_update(&s, buf, (size_t)r);
		if (write_full(fd, buf, (size_t)r) != r)
			fail_errno("child: write");
	}
	sha256_hex(&s, hex);
	int n = snprintf(line, sizeof line, "conn bytes=%llu sha256=%s\n",
			 (unsigned long long)s.len, hex);
	if (write(1, line, (size_t)n) != n)
		fail_errno("child: stdout");
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "port-file", 1, 0, 'f' }, { "conns", 1, 0, 'c' },
		{ 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1", *port_file = NULL;
	int conns = 4, o;
	prog_name = "fork_server";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'f': port_file = optarg; break;
		case 'c': conns = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: fork_server --port-file F --conns K [--host H]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(100);
	int port;
	int l = tcp_listen(host, 0, 64, &port);
	if (port_file) {
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) || rename(tmp, port_file))
			fail_errno("port file");
	}
	pid_t *kids = calloc((size_t)conns, sizeof *kids);
	for (int i = 0; i < conns; i++) {
		int fd = accept(l, NULL, NULL);
		if (fd < 0 && errno == EINTR) {
			i--;
			continue;
		}
		if (fd < 0)
			fail_errno("accept");
		fflush(stdout);
		pid_t p = fork();
		if (p < 0)
			fail_errno("fork");
		if (p == 0) {
			prog_name = "fork_server child";
			close(l);
			serve(fd);
			_exit(0);
		}
		kids[i] = p;
		close(fd);
	}
	close(l);
	for (int i = 0; i < conns; i++) {
		int st;
		if (waitpid(kids[i], &st, 0) < 0)
			fail_errno("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail("child %d exited with %s %d", (int)kids[i],
			     WIFEXITED(st) ? "status" : "signal",
			     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
	printf("PASS fork_server conns=%d\n", conns);
	return 0;
}
