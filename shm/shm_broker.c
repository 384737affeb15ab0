/* The broker: ring arenas opened for processes that dropped privileges.
 *
 * A prefork server started by root (nginx's default: master root, workers
 * nobody) registers its listeners as root, and its workers accept as a user
 * that can no longer open the client's arena in root's rundir.  Before this,
 * such a listener was marked refusing and every local client took TCP.
 *
 * A root process with listeners that forks keeps a thread, the broker, at
 * one end of a SOCK_SEQPACKET pair; its children inherit the other end
 * (CLOEXEC: an exec'd program starts without it).  A child that lost the
 * rundir asks the broker for an offer's arena, passing the accepted TCP
 * socket itself with SCM_RIGHTS and a fresh socket for the answer (the
 * channel is shared by every child, so answers cannot travel on it).  The
 * broker opens the arena only if the offer is one that connection's client
 * made: the file is the broker's user's (or, with shm_group, the group's),
 * and the slot's header names the socket's own 4-tuple, as read by
 * getsockname/getpeername.  So a worker obtains exactly the rings of the
 * connections it accepted, as if it had kept its privileges for them, and
 * nothing else: no name, no other file, no other user's ring.
 *
 * Costs: one round trip to the broker per client arena a worker has not
 * mapped yet (an arena serves every later connection of that client
 * process, compared by inode); none on the data path, none for a process
 * that never dropped privileges (no thread unless a root listener forks). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <unistd.h>

#include "core/shunt_core.h"
#include "core/shunt_fdpass.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_registry.h"
#include "core/shunt_stats.h"
#include "core/shunt_transport.h"
#include "core/shunt_tuple.h"
#include "shm_internal.h"

#define BROKER_MAGIC 0x53484252u /* "SHBR" */

enum { BROKER_PING = 1, BROKER_OPEN = 2 };

struct broker_req {
	uint32_t magic;
	uint32_t op;
	char target[128]; /* BROKER_OPEN: the offer's target, NUL-terminated */
};

struct broker_ans {
	uint32_t magic;
	int32_t status; /* 0 (BROKER_OPEN: an arena fd attached), or a reason */
};

/* This process's end of the channel to a broker (inherited from the
 * process that runs it), and whose broker it is. */
static int chan_fd = -1;
static pid_t chan_pid;   /* the broker's process */
static pid_t chan_holder; /* the process that holds chan_fd as its own */
/* The broker this process runs (a thread), if any. */
static pid_t serving_pid;
/* Made before a fork, put to use after it. */
static int fork_pair[2] = {-1, -1};
static pid_t fork_parent;
/* Set when this process lost the rundir and its broker answered (a forked
 * child has its credentials, and the channel). */
static int brokered;
/* A root process that listens (shm_on_listen) may fork workers that drop
 * privileges. */
static int listened;

void shm_broker_listened(void)
{
	__atomic_store_n(&listened, 1, __ATOMIC_RELAXED);
}

int shm_broker_active(void)
{
	return brokered && chan_holder == shunt_pid() && chan_fd >= 0;
}

/* ---- the broker (a thread of the process that registered) --------------- */

static void close_all(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		REAL(close)(fds[i]);
}

static void answer(int to, int status, int fd)
{
	struct broker_ans a = {.magic = BROKER_MAGIC, .status = status};
	shunt_send_fds(to, &a, sizeof a, &fd, fd >= 0, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The arena of target for the connection on sock, checked: an fd, or -1
 * with *why. */
static int open_for(const char *target, int sock, int *why)
{
	struct stat st;
	int v, t2;
	socklen_t vl = sizeof v, tl = sizeof t2;
	struct sockaddr_storage peer;
	socklen_t pl = sizeof peer;
	struct shunt_tuple t, ht;
	*why = SHUNT_R_BAD_OFFER;
	if (fstat(sock, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    REAL(getsockopt)(sock, SOL_SOCKET, SO_TYPE, &t2, &tl) < 0 || t2 != SOCK_STREAM ||
	    REAL(getsockopt)(sock, SOL_SOCKET, SO_PROTOCOL, &v, &vl) < 0 || v != IPPROTO_TCP ||
	    getpeername(sock, (struct sockaddr *)&peer, &pl) < 0 ||
	    shunt_tuple_accepted(&t, sock, (struct sockaddr *)&peer) < 0)
		return -1;
	char name[48];
	unsigned k;
	uint64_t ring, ino;
	if (shm_target_parse(target, name, sizeof name, &k, &ring, &ino) < 0)
		return -1;
	*why = SHUNT_R_NO_PEER_SHIM;
	int fd = shm_arena_open(name);
	if (fd < 0)
		return -1;
	uint64_t slot_size = SHM_HDR_SIZE + 2 * ring, off = (uint64_t)k * slot_size;
	*why = SHUNT_R_PEER_CRED;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !shm_offer_uid_ok(st.st_uid, st.st_gid))
		goto fail;
	*why = SHUNT_R_BAD_OFFER;
	if ((ino && (uint64_t)st.st_ino != ino) || (uint64_t)st.st_size < off + slot_size ||
	    pread(fd, &ht, sizeof ht, (off_t)(off + offsetof(struct shm_hdr, tuple))) !=
		    (ssize_t)sizeof ht ||
	    memcmp(&ht, &t, sizeof t))
		goto fail;
	return fd;
fail:
	REAL(close)(fd);
	return -1;
}

static void serve_one(int ch)
{
	struct broker_req r;
	int fds[SHUNT_FDPASS_MAX], nfd, cut;
	ssize_t n = shunt_recv_fds(ch, &r, sizeof r, 0, fds, SHUNT_FDPASS_MAX, &nfd, &cut);
	if (n <= 0) {
		close_all(fds, nfd);
		return;
	}
	/* Every descriptor that came is closed whatever the request: a
	 * child can send anything. */
	int want = n == (ssize_t)sizeof r && r.magic == BROKER_MAGIC
			   ? r.op == BROKER_PING ? 1 : r.op == BROKER_OPEN ? 2 : 0
			   : 0;
	if (!want || nfd != want || cut) {
		close_all(fds, nfd);
		return;
	}
	if (r.op == BROKER_PING) {
		answer(fds[0], 0, -1);
	} else {
		int why = 0;
		r.target[sizeof r.target - 1] = 0;
		int a = open_for(r.target, fds[1], &why);
		answer(fds[0], a >= 0 ? 0 : why, a);
		if (a >= 0)
			REAL(close)(a);
	}
	close_all(fds, nfd);
}

static void *serve(void *arg)
{
	int ch = (int)(intptr_t)arg;
	/* Everything this thread calls is shunt's own. */
	SHUNT_GUARD_ENTER();
	for (;;) {
		struct pollfd p = {.fd = ch, .events = POLLIN};
		if (REAL(poll)(&p, 1, -1) < 0 && errno != EINTR)
			break;
		if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
			break;
		if (p.revents & POLLIN)
			serve_one(ch);
	}
	return NULL;
}

static int start(int ch)
{
	pthread_attr_t at;
	pthread_t th;
	sigset_t all, old;
	if (pthread_attr_init(&at))
		return -1;
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	/* (The default stack: a small one must still hold every library's
	 * static TLS, which glibc puts there, and fails where that is big.
	 * Only the pages it touches are memory.) */
	/* The application's signals go to its own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&th, &at, serve, (void *)(intptr_t)ch);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (rc)
		errno = rc;
	return rc ? -1 : 0;
}

/* ---- fork: the broker starts at the first fork of a root listener -------- */

void shm_broker_fork(int phase)
{
	pid_t me = shunt_pid();
	switch (phase) {
	case SHUNT_FORK_PREPARE:
		fork_pair[0] = fork_pair[1] = -1;
		if (!__atomic_load_n(&listened, __ATOMIC_RELAXED) || serving_pid == me ||
		    shunt_euid() != 0 || !shunt_rundir())
			return;
		SHUNT_GUARD_ENTER();
		int p[2];
		if (REAL(socketpair)(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) == 0) {
			fork_pair[0] = shunt_fd_own(p[0], NULL);
			fork_pair[1] = shunt_fd_own(p[1], NULL);
			if (fork_pair[0] < 0 || fork_pair[1] < 0) {
				if (fork_pair[0] >= 0)
					shunt_fd_release(fork_pair[0]);
				if (fork_pair[1] >= 0)
					shunt_fd_release(fork_pair[1]);
				fork_pair[0] = fork_pair[1] = -1;
			}
		}
		fork_parent = me;
		SHUNT_GUARD_LEAVE();
		return;
	case SHUNT_FORK_PARENT:
		if (fork_pair[0] < 0)
			return;
		SHUNT_GUARD_ENTER();
		if (start(fork_pair[0]) < 0) {
			/* The child finds the channel closed and refuses. */
			shunt_fd_release(fork_pair[0]);
			shunt_fd_release(fork_pair[1]);
			SHUNT_INFO("no broker thread for workers that drop privileges: %s",
				   strerror(errno));
		} else {
			if (chan_fd >= 0 && chan_holder == me)
				shunt_fd_release(chan_fd);
			chan_fd = fork_pair[1];
			chan_pid = chan_holder = me;
			serving_pid = me;
		}
		fork_pair[0] = fork_pair[1] = -1;
		SHUNT_GUARD_LEAVE();
		return;
	case SHUNT_FORK_CHILD:
		/* The broker is the parent's thread; the child keeps only the
		 * channel's far end (the parent's answer end would keep the
		 * channel open after the parent died). */
		if (fork_pair[0] >= 0) {
			SHUNT_GUARD_ENTER();
			shunt_fd_release(fork_pair[0]);
			chan_fd = fork_pair[1];
			chan_pid = fork_parent;
			fork_pair[0] = fork_pair[1] = -1;
			SHUNT_GUARD_LEAVE();
		}
		if (chan_fd >= 0)
			chan_holder = me;
		serving_pid = 0;
		return;
	}
}

/* ---- a process that dropped privileges --------------------------------- */

/* Send op (with sock for BROKER_OPEN) and wait for the answer, at most
 * timeout_ms: the status, *fd the arena (BROKER_OPEN); -1 on no answer. */
static int ask(int op, const char *target, int sock, int *fd, int timeout_ms)
{
	int p[2];
	*fd = -1;
	if (REAL(socketpair)(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) < 0)
		return -1;
	struct broker_req r = {.magic = BROKER_MAGIC, .op = (uint32_t)op};
	if (target)
		snprintf(r.target, sizeof r.target, "%s", target);
	int send_fds[2] = {p[1], sock};
	int nsend = op == BROKER_OPEN ? 2 : 1;
	int status = -1;
	ssize_t n = shunt_send_fds(chan_fd, &r, sizeof r, send_fds, nsend, MSG_NOSIGNAL);
	REAL(close)(p[1]);
	if (n != (ssize_t)sizeof r)
		goto out;
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	int pr;
	while ((pr = REAL(poll)(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (pr <= 0 || !(pf.revents & POLLIN))
		goto out;
	struct broker_ans a;
	int got[SHUNT_FDPASS_MAX], ngot;
	n = shunt_recv_fds(p[0], &a, sizeof a, MSG_DONTWAIT, got, SHUNT_FDPASS_MAX, &ngot, NULL);
	if (n != (ssize_t)sizeof a || a.magic != BROKER_MAGIC || ngot > 1) {
		for (int i = 0; i < ngot; i++)
			REAL(close)(got[i]);
		goto out;
	}
	if (ngot == 1)
		*fd = got[0];
	status = a.status;
	if (status != 0 && *fd >= 0) {
		REAL(close)(*fd);
		*fd = -1;
	}
out:
	REAL(close)(p[0]);
	return status;
}

int shm_broker_open(const char *target, int sock, enum shunt_reason *why)
{
	*why = SHUNT_R_PEER_CRED;
	if (sock < 0 || !shm_broker_active())
		return -1;
	int fd;
	int st = ask(BROKER_OPEN, target, sock, &fd, (int)shunt_config()->offer_timeout_ms);
	if (st == 0 && fd >= 0)
		return fd;
	*why = st > 0 ? (enum shunt_reason)st : SHUNT_R_PEER_CRED;
	return -1;
}

int shm_broker_setid(int phase)
{
	if (phase == SHUNT_SETID_BEFORE) {
		/* What the process maps or opens once and may not be able to
		 * open after the call. */
		shm_names_ready();
		shm_pending_prepare();
		shunt_stats_prepare();
		(void)shunt_netns(); /* published in offers' headers */
		return 0;
	}
	pid_t me = shunt_pid();
	if (chan_fd < 0 || chan_holder != me || chan_pid == me)
		return 0;
	int fd;
	if (ask(BROKER_PING, NULL, -1, &fd, 1000) != 0)
		return 0;
	brokered = 1;
	return 1;
}
