/* sys_calls: a connected pair in one process, driven through syscall() by
 * number and through preadv2/pwritev2, printing each call's result and
 * errno, so a plain run and a run under an accelerating library can be
 * compared line for line (the kernel's answers are the reference).
 *
 *   sys_calls [--host 127.0.0.1]
 * Output: one line per step, then PASS sys_calls. */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static void say(const char *step, long r, const char *data)
{
	int e = errno;
	printf("%s r=%ld errno=%s%s%s\n", step, r, r < 0 ? strerrorname_np(e) : "-",
	       data ? " data=" : "", data ? data : "");
	errno = 0;
}

/* Reads exactly n bytes with read(2) by number, so every step starts from
 * a known stream position. */
static void sys_read_full(int fd, char *b, size_t n)
{
	size_t got = 0;
	while (got < n) {
		long r = syscall(SYS_read, fd, b + got, n - got);
		if (r <= 0)
			fail_errno("read by number: %ld", r);
		got += (size_t)r;
	}
	b[n] = 0;
}

int main(int argc, char **argv)
{
	prog_name = "sys_calls";
	const char *host = argc > 2 && !strcmp(argv[1], "--host") ? argv[2] : "127.0.0.1";
	watchdog(60);
	int c, s;
	tcp_pair(host, &c, &s);
	char b[64];
	struct iovec v = {b, 5};

	/* Data by number, both ways. */
	say("write", syscall(SYS_write, c, "hello", 5), NULL);
	sys_read_full(s, b, 5);
	say("read", 5, b);
	say("sendto", syscall(SYS_sendto, s, "world", 5, MSG_NOSIGNAL, NULL, 0), NULL);
	long r = syscall(SYS_recvfrom, c, b, 5, MSG_WAITALL, NULL, NULL);
	b[r > 0 ? r : 0] = 0;
	say("recvfrom", r, b);
	struct iovec w[2] = {{"ab", 2}, {"cde", 3}};
	say("writev", syscall(SYS_writev, c, w, 2), NULL);
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	r = syscall(SYS_recvmsg, s, &m, MSG_WAITALL);
	b[r > 0 ? r : 0] = 0;
	say("recvmsg", r, b);
	struct msghdr mo = {.msg_iov = w, .msg_iovlen = 2};
	say("sendmsg", syscall(SYS_sendmsg, s, &mo, MSG_NOSIGNAL), NULL);
	struct iovec rv[2] = {{b, 3}, {b + 3, 2}};
	size_t got = 0;
	while (got < 5) {
		struct iovec part[2];
		int np = 0;
		for (int i = 0; i < 2; i++) {
			size_t lo = i ? 3 : 0, hi = i ? 5 : 3;
			if (got < hi) {
				part[np].iov_base = (char *)rv[i].iov_base + (got > lo ? got - lo : 0);
				part[np].iov_len = hi - (got > lo ? got : lo);
				np++;
			}
		}
		r = syscall(SYS_readv, c, part, np);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	b[5] = 0;
	say("readv", (long)got, b);

	/* preadv2/pwritev2 at offset -1: the stream. */
	struct iovec pw = {"PQRST", 5};
	say("pwritev2", pwritev2(c, &pw, 1, -1, 0), NULL);
	got = 0;
	while (got < 5 && (r = preadv2(s, &(struct iovec){b + got, 5 - got}, 1, -1, 0)) > 0)
		got += (size_t)r;
	b[5] = 0;
	say("preadv2", (long)got, b);
	say("sys-pwritev2", syscall(SYS_pwritev2, s, &pw, 1, -1L, 0L, 0), NULL);
	got = 0;
	while (got < 5 &&
	       (r = syscall(SYS_preadv2, c, &(struct iovec){b + got, 5 - got}, 1, -1L, 0L, 0)) > 0)
		got += (size_t)r;
	b[5] = 0;
	say("sys-preadv2", (long)got, b);

	/* Several messages by number; a wait and the byte count by number. */
	struct iovec m1 = {"abc", 3}, m2 = {"def", 3};
	struct mmsghdr mm[2] = {{.msg_hdr = {.msg_iov = &m1, .msg_iovlen = 1}},
				{.msg_hdr = {.msg_iov = &m2, .msg_iovlen = 1}}};
	say("sendmmsg", syscall(SYS_sendmmsg, c, mm, 2, MSG_NOSIGNAL), NULL);
	struct iovec mr = {b, 6};
	struct mmsghdr rm = {.msg_hdr = {.msg_iov = &mr, .msg_iovlen = 1}};
	r = syscall(SYS_recvmmsg, s, &rm, 1, MSG_WAITALL, NULL);
	b[r == 1 ? rm.msg_len : 0] = 0;
	say("recvmmsg", r, b);
	say("write4", syscall(SYS_write, s, "wxyz", 4), NULL);
	struct pollfd pf = {.fd = c, .events = POLLIN};
	r = syscall(SYS_ppoll, &pf, 1, NULL, NULL, 8);
	say("ppoll", r, pf.revents == POLLIN ? "POLLIN" : "other");
	int avail = -1;
	r = syscall(SYS_ioctl, c, FIONREAD, &avail);
	snprintf(b, sizeof b, "%d", avail);
	say("fionread", r, b);
	sys_read_full(c, b, 4);
	say("read4", 4, b);

	/* An offset on a socket: the kernel refuses before a byte moves. */
	say("pread", pread(s, b, 5, 0), NULL);
	say("pwrite", pwrite(c, "x", 1, 0), NULL);
	say("preadv@0", preadv(s, &v, 1, 0), NULL);
	say("preadv@-1", preadv(s, &v, 1, -1), NULL);
	say("pwritev@0", pwritev(c, &v, 1, 0), NULL);
	say("preadv2@0", preadv2(s, &v, 1, 0, 0), NULL);
	say("pwritev2@0", pwritev2(c, &v, 1, 0, 0), NULL);
	say("sys-pread64", syscall(SYS_pread64, s, b, 5, 0L), NULL);

	/* Nothing to read: the non-blocking answers. */
	say("recvfrom-dontwait", syscall(SYS_recvfrom, s, b, 5, MSG_DONTWAIT, NULL, NULL), NULL);
	say("recvmsg-dontwait", syscall(SYS_recvmsg, s, &m, MSG_DONTWAIT), NULL);

	/* errno and other numbers untouched. */
	say("read-badf", syscall(SYS_read, -1, b, 1), NULL);
	say("getpid", syscall(SYS_getpid) == getpid() ? 0 : -1, NULL);
	say("unknown", syscall(100000), NULL);

	/* A flag only the kernel can judge: the same answer either way, then
	 * the stream goes on. */
	say("preadv2-nowait", preadv2(s, &v, 1, -1, RWF_NOWAIT), NULL);
	say("write-after", syscall(SYS_write, c, "after", 5), NULL);
	sys_read_full(s, b, 5);
	say("read-after", 5, b);

	/* close by number: the peer sees EOF. */
	say("close", syscall(SYS_close, s), NULL);
	say("read-eof", syscall(SYS_read, c, b, 5), NULL);
	close(c);
	printf("PASS sys_calls\n");
	return 0;
}
