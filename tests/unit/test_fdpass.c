/* Descriptors over a Unix socket (core/shunt_fdpass.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/shunt_fdpass.h"

static int same_file(int a, int b)
{
	struct stat x, y;
	return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
	       x.st_ino == y.st_ino;
}

Test(fdpass, bytes_and_descriptors_arrive_close_on_exec)
{
	int sv[2], p[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(shunt_send_fds(sv[0], "abc", 3, p, 2, 0), 3);
	char b[8];
	int fds[SHUNT_FDPASS_MAX], n, cut;
	cr_assert_eq(shunt_recv_fds(sv[1], b, sizeof b, 0, fds, SHUNT_FDPASS_MAX, &n, &cut), 3);
	cr_assert_eq(memcmp(b, "abc", 3), 0);
	cr_assert_eq(n, 2);
	cr_assert(!cut);
	cr_assert(same_file(fds[0], p[0]) && same_file(fds[1], p[1]));
	cr_assert(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	for (int i = 0; i < 2; i++)
		close(fds[i]), close(p[i]), close(sv[i]);
}

Test(fdpass, too_many_to_send_is_refused_and_sends_nothing)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	int fds[SHUNT_FDPASS_MAX + 1];
	for (int i = 0; i <= SHUNT_FDPASS_MAX; i++)
		fds[i] = sv[0];
	errno = 0;
	cr_assert_eq(shunt_send_fds(sv[0], "x", 1, fds, SHUNT_FDPASS_MAX + 1, 0), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(shunt_send_fds(sv[0], "x", 1, fds, -1, 0), -1);
	char b;
	cr_assert_eq(recv(sv[1], &b, 1, MSG_DONTWAIT), -1, "nothing was sent");
	cr_assert_eq(errno, EAGAIN);
	close(sv[0]);
	close(sv[1]);
}

/* Beyond what the caller takes, descriptors are closed, not leaked. */
Test(fdpass, descriptors_beyond_max_are_closed)
{
	int sv[2], p[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(shunt_send_fds(sv[0], "y", 1, p, 2, 0), 1);
	close(p[1]); /* only the received copy of the write end is left */
	char b;
	int fds[1], n, cut;
	cr_assert_eq(shunt_recv_fds(sv[1], &b, 1, 0, fds, 1, &n, &cut), 1);
	cr_assert_eq(n, 1);
	cr_assert(same_file(fds[0], p[0]));
	/* The write end went with the message and was closed: EOF. */
	cr_assert_eq(read(p[0], &b, 1), 0);
	close(fds[0]);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}
