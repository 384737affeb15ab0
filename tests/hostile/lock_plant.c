/* Issue 14 item 6: a ring lock left held (its holder killed inside it, or
 * a peer that wrote anything there) must not park the other end.  Run
 * under libshunt.so with ring_size=64k; plants a value no live end holds
 * in the server's read lock of a connection that is on shm, then:
 *   1. the server's recv() must still get the bytes the client sent;
 *   2. on a second connection, the client's demotion (fdopen) must not
 *      wait for that lock, must not write it, and the bytes must arrive
 *      over TCP, both ways.
 * Prints "PASS lock_plant" or "FAIL: ..." (exit 1); a hang ends in FAIL. */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/shm_proto.h"

#define RING 65536u
#define PLANT 0xdeadbeefu

static const char *phase = "start";

static void fail(const char *what)
{
	printf("FAIL: %s (%s)\n", what, phase);
	fflush(stdout);
	_exit(1);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: hung: a planted ring lock parked this end\n";
	if (write(1, m, sizeof m - 1) < 0) {
	}
	_exit(1);
}

static void pair(int *cli, int *srv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof a;
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &l) < 0)
		fail("listen");
	*cli = socket(AF_INET, SOCK_STREAM, 0);
	if (*cli < 0 || connect(*cli, (struct sockaddr *)&a, sizeof a) < 0)
		fail("connect");
	*srv = accept(ls, NULL, NULL);
	if (*srv < 0)
		fail("accept");
	close(ls);
}

/* The header of the connection whose client port is cli's, among this
 * process's arenas in <rundir>/o; NULL if it is not on shm. */
static struct shm_hdr *find_hdr(const char *rundir, int cli)
{
	struct sockaddr_in me;
	socklen_t l = sizeof me;
	if (getsockname(cli, (struct sockaddr *)&me, &l) < 0)
		fail("getsockname");
	char dir[4096], prefix[64];
	snprintf(dir, sizeof dir, "%s/o", rundir);
	snprintf(prefix, sizeof prefix, "a-%d-", (int)getpid());
	DIR *d = opendir(dir);
	if (!d)
		fail("opendir <rundir>/o");
	struct dirent *e;
	struct shm_hdr *found = NULL;
	while (!found && (e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDWR);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			fail("open an arena");
		uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			fail("map an arena");
		uint64_t slot = SHM_HDR_SIZE + 2ull * RING;
		for (uint64_t off = 0; off + slot <= (uint64_t)st.st_size; off += slot) {
			struct shm_hdr *h = (struct shm_hdr *)(m + off);
			if (h->magic == SHM_MAGIC && h->ring_size == RING &&
			    h->tuple.cport == ntohs(me.sin_port) &&
			    __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == SHM_COMMITTED)
				found = h;
		}
	}
	closedir(d);
	return found;
}

static void recv_exact(int fd, const char *want, size_t n)
{
	char buf[64] = {0};
	ssize_t r = recv(fd, buf, n, MSG_WAITALL);
	if (r != (ssize_t)n || memcmp(buf, want, n))
		fail("wrong bytes");
}

int main(int argc, char **argv)
{
	if (argc != 2)
		fail("usage: lock_plant RUNDIR");
	signal(SIGALRM, on_alarm);
	alarm(30);
	int cli, srv;

	phase = "recv with its own read lock planted";
	pair(&cli, &srv);
	struct shm_hdr *h = find_hdr(argv[1], cli);
	if (!h)
		fail("the connection is not on shm");
	__atomic_store_n(&h->ring[0].rlock, PLANT, __ATOMIC_SEQ_CST);
	if (send(cli, "0123456789", 10, 0) != 10)
		fail("send");
	recv_exact(srv, "0123456789", 10);
	if (__atomic_load_n(&h->ring[0].rlock, __ATOMIC_SEQ_CST) != 0)
		fail("the planted lock was not taken over and let go");
	if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != SHM_COMMITTED)
		fail("the connection left shm");
	printf("recv: planted lock broken, 10 bytes over shm\n");
	close(cli);
	close(srv);

	phase = "demotion with the peer's read lock planted";
	pair(&cli, &srv);
	h = find_hdr(argv[1], cli);
	if (!h)
		fail("the second connection is not on shm");
	if (send(cli, "abcdefghij", 10, 0) != 10)
		fail("send");
	__atomic_store_n(&h->ring[0].rlock, PLANT, __ATOMIC_SEQ_CST);
	FILE *f = fdopen(cli, "r+"); /* stdio: the connection goes to TCP */
	if (!f)
		fail("fdopen");
	if (__atomic_load_n(&h->ring[0].rlock, __ATOMIC_SEQ_CST) != PLANT)
		fail("the demotion wrote the peer's lock");
	if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != SHM_DEMOTING)
		fail("the client did not demote");
	recv_exact(srv, "abcdefghij", 10);
	if (send(srv, "hello", 5, 0) != 5)
		fail("send back");
	char back[8] = {0};
	if (fread(back, 1, 5, f) != 5 || memcmp(back, "hello", 5))
		fail("wrong bytes back over TCP");
	printf("demotion: the peer's planted lock looked at, not taken; bytes over TCP both ways\n");
	fclose(f);
	close(srv);
	printf("PASS lock_plant\n");
	return 0;
}
