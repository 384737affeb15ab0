/* sendfile() on a non-blocking socket inside a one-thread event loop, as
 * asyncio's sock_sendfile does (CPython's
 * test_sock_sendfile_mix_with_regular_send): regular sends, then a file by
 * sendfile(), then regular sends again, while the same thread is the
 * reader.  The writer's socket has SO_SNDBUF 4096 and starts with a burst
 * that its reader has not read when sendfile() comes, so whatever is
 * buffered for the reader must not make sendfile() wait: a non-blocking
 * call never blocks.  The reader checks every byte of the stream at its
 * offset; the output is the same plainly and under shunt.
 *
 * With --reverse the reader also sends first (a stream the writer reads
 * only once its own is out; small buffers that way too), and the writer's
 * first call is sendfile():
 * nothing of the writer's waits for its peer, but the peer's bytes wait
 * for it, and moving the connection to TCP would have the peer replay them
 * in its next call, which this thread makes.
 *
 *   nb_sendfile [--reverse] [HOST] [TMPDIR] */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

#define SEED 7
#define PART_A (512u * 1024)   /* sent with send() */
#define PART_F (2048u * 1024)  /* with sendfile(), from a file */
#define PART_B (256u * 1024)   /* with send() again */
#define TOTAL (PART_A + PART_F + PART_B)

int main(int argc, char **argv)
{
	prog_name = "nb_sendfile";
	int reverse = argc > 1 && strcmp(argv[1], "--reverse") == 0;
	if (reverse) {
		argv++;
		argc--;
	}
	const char *host = argc > 1 ? argv[1] : "127.0.0.1";
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	watchdog(60);

	/* The file holds the stream's bytes [PART_A, PART_A + PART_F). */
	char path[4096];
	snprintf(path, sizeof path, "%s/nb_sendfile.XXXXXX", dir);
	int file = mkstemp(path);
	if (file < 0)
		fail_errno("mkstemp %s", path);
	unlink(path);
	static char buf[256 * 1024];
	for (uint64_t o = 0; o < PART_F; o += sizeof buf) {
		gen_bytes(SEED, PART_A + o, buf, sizeof buf);
		if (write_full(file, buf, sizeof buf) != (ssize_t)sizeof buf)
			fail_errno("write file");
	}

	int c, s;
	tcp_pair(host, &c, &s);
	int small = 4096;
	if (setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) < 0)
		fail_errno("SO_SNDBUF");
	if (reverse && (setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) < 0 ||
			setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) < 0))
		fail_errno("SO_RCVBUF/SO_SNDBUF");
	set_nonblock(s, 1);
	set_nonblock(c, 1);

	/* --reverse: the sendfile comes first, after the peer's own bytes. */
	uint64_t wpos = reverse ? PART_A : 0, rpos = wpos;
	uint64_t bpos = 0, bread = 0; /* the peer's stream (seed 8), sent and read */
	uint64_t back = reverse ? 512u * 1024 : 0;
	while (bpos < back) {
		size_t n = back - bpos < sizeof buf ? back - bpos : sizeof buf;
		gen_bytes(SEED + 1, bpos, buf, n);
		ssize_t r = send(c, buf, n, MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN)
			break; /* the rest once the writer reads */
		if (r <= 0)
			fail_errno("send back at %llu", (unsigned long long)bpos);
		bpos += (uint64_t)r;
	}
	off_t foff = 0;
	unsigned sendfiles = 0;
	int shut = 0;
	for (;;) {
		/* The writer first: before the reader has read anything, so
		 * sendfile() comes with the burst still unread. */
		while (wpos < TOTAL) {
			ssize_t r;
			if (wpos < PART_A || wpos >= PART_A + PART_F) {
				uint64_t end = wpos < PART_A ? PART_A : TOTAL;
				size_t n = end - wpos < sizeof buf ? end - wpos : sizeof buf;
				gen_bytes(SEED, wpos, buf, n);
				r = send(s, buf, n, MSG_DONTWAIT);
			} else {
				r = sendfile(s, file, &foff, PART_A + PART_F - wpos);
				sendfiles++;
				if (r > 0 && (uint64_t)foff != wpos + (uint64_t)r - PART_A)
					fail("sendfile moved the offset to %lld after %zd bytes at %llu",
					     (long long)foff, r, (unsigned long long)wpos);
			}
			if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (r <= 0)
				fail_errno("write at %llu: %zd", (unsigned long long)wpos, r);
			wpos += (uint64_t)r;
		}
		if (wpos == TOTAL && !shut) {
			if (shutdown(s, SHUT_WR) < 0)
				fail_errno("shutdown");
			shut = 1;
		}
		/* The peer's stream, once the writer's own is out. */
		while (shut && bread < back) {
			ssize_t r = recv(s, buf, sizeof buf, MSG_DONTWAIT);
			if (r < 0 && errno == EAGAIN)
				break;
			if (r <= 0)
				fail_errno("recv back at %llu", (unsigned long long)bread);
			long long bad = gen_check(SEED + 1, bread, buf, (size_t)r);
			if (bad >= 0)
				fail("back byte %llu differs", (unsigned long long)bread + (unsigned long long)bad);
			bread += (uint64_t)r;
		}
		while (bpos < back) {
			size_t n = back - bpos < sizeof buf ? back - bpos : sizeof buf;
			gen_bytes(SEED + 1, bpos, buf, n);
			ssize_t r = send(c, buf, n, MSG_DONTWAIT);
			if (r < 0 && errno == EAGAIN)
				break;
			if (r <= 0)
				fail_errno("send back at %llu", (unsigned long long)bpos);
			bpos += (uint64_t)r;
		}
		if (shut && rpos == TOTAL && bread == back)
			break;
		struct pollfd p[3] = {{c, POLLIN, 0}, {s, shut ? POLLIN : POLLOUT, 0}, {c, POLLOUT, 0}};
		int np = bpos < back ? 3 : 2;
		if (rpos == TOTAL) { /* only the peer's stream is left */
			p[0].events = 0;
		}
		if (poll(p, (nfds_t)np, 30000) <= 0)
			fail("poll: nothing ready after 30 s (read %llu, written %llu)",
			     (unsigned long long)rpos, (unsigned long long)wpos);
		if (p[0].revents && rpos < TOTAL) {
			ssize_t r = recv(c, buf, sizeof buf, MSG_DONTWAIT);
			if (r < 0 && errno == EAGAIN)
				continue;
			if (r < 0)
				fail_errno("recv at %llu", (unsigned long long)rpos);
			if (r == 0)
				fail("EOF at %llu", (unsigned long long)rpos);
			long long bad = gen_check(SEED, rpos, buf, (size_t)r);
			if (bad >= 0)
				fail("byte %llu differs", (unsigned long long)rpos + (unsigned long long)bad);
			rpos += (uint64_t)r;
		}
	}
	char eof;
	if (recv(c, &eof, 1, 0) != 0)
		fail("no EOF after %llu bytes", (unsigned long long)rpos);
	printf("nb_sendfile: %llu bytes (send %u, sendfile %u, send %u) checked, %llu back\n",
	       (unsigned long long)(TOTAL - (reverse ? PART_A : 0)), reverse ? 0 : PART_A, PART_F,
	       PART_B, (unsigned long long)back);
	fprintf(stderr, "nb_sendfile: %u sendfile calls\n", sendfiles);
	close(c);
	close(s);
	close(file);
	return 0;
}
