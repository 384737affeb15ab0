/* Listeners made and closed in a loop, one connection each (a test suite
 * does this), then the process's open fds counted against its start:
 *
 *   listen_churn MAX_EXTRA
 *
 * Plainly nothing is left open.  Under shunt a few fds of its own stay
 * (the arena, the stats file, the offers' lock), but none per listener
 * that is gone: an application that leaves itself a small margin under
 * RLIMIT_NOFILE (CPython's test_selectors.test_above_fd_setsize leaves 32)
 * must still reach it.  Fails when more than MAX_EXTRA fds are left. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		fail_errno("opendir /proc/self/fd");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own */
}

int main(int argc, char **argv)
{
	prog_name = "listen_churn";
	int max = argc > 1 ? atoi(argv[1]) : 0;
	watchdog(60);
	int start = count_fds();
	for (int i = 0; i < 40; i++) {
		int c, s;
		tcp_pair("127.0.0.1", &c, &s); /* closes its listener */
		char b = 'x';
		if (write(c, &b, 1) != 1 || read(s, &b, 1) != 1)
			fail_errno("echo %d", i);
		close(c);
		close(s);
	}
	int extra = count_fds() - start;
	printf("listen_churn: 40 listeners closed, %d fds left over\n", extra > 0 ? extra : 0);
	if (extra > max)
		fail("%d fds left open after 40 listeners closed (at most %d)", extra, max);
	return 0;
}
