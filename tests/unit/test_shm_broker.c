/* The broker (shm/shm_broker.c): a root listener forks a worker that
 * becomes nobody, as nginx's master and workers do.  The worker can no
 * longer open the rundir, yet takes its own connection on shm through the
 * broker; and the broker gives it nothing else: not a ring of a connection
 * it did not accept, not through a descriptor that is no TCP connection,
 * not a file outside the arenas, not an arena of another user.
 * Needs root (skipped otherwise). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn_pair.h"
#include "core/shunt_core.h"
#include "core/shunt_listen.h"
#include "core/shunt_reason.h"
#include "core/shunt_registry.h"
#include "core/shunt_rundir.h"
#include "core/shunt_transport.h"
#include "shm/shm_internal.h"

const struct shunt_transport_ops *const shunt_transports[] = {&shunt_transport_shm, NULL};

#define NOBODY 65534

/* The worker's checks, each a bit of its exit status when it fails. */
enum {
	F_DROP = 1 << 0,      /* setuid did not take the rundir away */
	F_ACTIVE = 1 << 1,    /* no broker after the drop */
	F_ACCEPT = 1 << 2,    /* its own connection not on shm */
	F_BYTES = 1 << 3,     /* wrong bytes */
	F_OTHER = 1 << 4,     /* a ring of a connection it did not accept */
	F_NOTSOCK = 1 << 5,   /* opened through a pipe */
	F_PATH = 1 << 6,      /* a name outside the arenas */
	F_FOREIGN = 1 << 7,   /* another user's file */
	F_OWN = 1 << 8,       /* its second connection's ring refused */
};

static int worker(struct conn_pair *p1, struct conn_pair *p2, int rfd)
{
	char t1[128], t2[128], bogus[128];
	int bad = 0;
	if (read(rfd, t1, sizeof t1) != sizeof t1 || read(rfd, t2, sizeof t2) != sizeof t2)
		return 0xff;
	shunt_listen_before_setid();
	int r = setuid(NOBODY);
	shunt_euid_forget();
	shunt_listen_after_setid(r == 0);
	char dir[SHUNT_PATH_MAX];
	if (r != 0 || shunt_rundir_path(dir, sizeof dir, shunt_rundir(), SHUNT_ROOM_OFFER, NULL) ||
	    access(dir, X_OK) == 0)
		bad |= F_DROP;
	if (!shm_broker_active())
		bad |= F_ACTIVE;

	/* Its own connection, as accept() takes it. */
	pair_accept(p1, 1);
	if (fd_kind(p1->sfd) != SHUNT_FD_ACCEL || strcmp(fd_transport(p1->sfd), "shm"))
		bad |= F_ACCEPT;
	uint8_t buf[3000];
	t_recv_all(p1->sfd, buf, sizeof buf);
	if (!pattern_ok(buf, sizeof buf, 0, 7))
		bad |= F_BYTES;
	t_send_all(p1->sfd, buf, sizeof buf);

	/* The second connection accepted without shunt: its offer stays,
	 * and it is a TCP connection whose tuple is not t1's. */
	pair_accept(p2, 0);
	enum shunt_reason why;
	int fd = shm_broker_open(t1, p2->sfd, &why);
	if (fd >= 0 || why != SHUNT_R_BAD_OFFER)
		bad |= F_OTHER;
	int pp[2];
	if (pipe(pp) == 0) {
		fd = shm_broker_open(t2, pp[0], &why);
		if (fd >= 0 || why != SHUNT_R_BAD_OFFER)
			bad |= F_NOTSOCK;
	}
	fd = shm_broker_open("../../../etc/passwd:0:65536", p2->sfd, &why);
	if (fd >= 0)
		bad |= F_PATH;
	/* A file made as an arena, owned by another user (see the parent). */
	snprintf(bogus, sizeof bogus, "a-999999-0:0:%s", strchr(strchr(t2, ':') + 1, ':') + 1);
	*strrchr(bogus, ':') = 0; /* no inode: the file is not the offer's */
	fd = shm_broker_open(bogus, p2->sfd, &why);
	if (fd >= 0 || why != SHUNT_R_PEER_CRED)
		bad |= F_FOREIGN;
	/* Its own second connection: yes. */
	fd = shm_broker_open(t2, p2->sfd, &why);
	if (fd < 0)
		bad |= F_OWN;
	return bad;
}

static const char *target_of(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	cr_assert(e && e->conn);
	return ((struct shm_conn *)e->conn)->target;
}

Test(shm_broker, a_worker_that_dropped_privileges_takes_its_own_rings_only)
{
	if (geteuid() != 0)
		cr_skip_test("needs root");
	struct conn_pair p1, p2;
	pair_listen(&p1, 1);
	p2 = p1;
	int pp[2];
	cr_assert(pipe(pp) == 0);
	/* The broker starts at the first fork of a root listener. */
	shunt_before_fork();
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		shunt_after_fork_child();
		close(pp[1]);
		int bad = worker(&p1, &p2, pp[0]);
		if (bad)
			fprintf(stderr, "worker's failed checks: %#x (see the enum)\n", bad);
		_exit(bad ? 1 : 0);
	}
	shunt_after_fork_parent();
	close(pp[0]);

	/* Another user's file where an arena would be. */
	char path[SHUNT_PATH_MAX];
	cr_assert(shm_path(path, sizeof path, "a-999999-0", "") == 0);
	int f = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert(f >= 0, "%s: %s", path, strerror(errno));
	cr_assert(ftruncate(f, 1 << 20) == 0 && fchown(f, 4242, 4242) == 0);
	close(f);

	pair_connect(&p1);
	pair_connect(&p2);
	cr_assert_str_eq(fd_transport(p1.cfd), "shm");
	cr_assert_str_eq(fd_transport(p2.cfd), "shm");
	char t[128] = "";
	snprintf(t, sizeof t, "%s", target_of(p1.cfd));
	cr_assert(write(pp[1], t, sizeof t) == sizeof t);
	snprintf(t, sizeof t, "%s", target_of(p2.cfd));
	cr_assert(write(pp[1], t, sizeof t) == sizeof t);

	uint8_t out[3000], in[3000];
	pattern(out, sizeof out, 0, 7);
	t_send_all(p1.cfd, out, sizeof out);
	t_recv_all(p1.cfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 7));

	int st;
	cr_assert(waitpid(pid, &st, 0) == pid);
	cr_assert(WIFEXITED(st), "worker died: status %d", st);
	cr_assert_eq(WEXITSTATUS(st), 0, "the worker failed (its checks are on stderr)");
	/* Local clients offer; the agent (remote clients) does not. */
	cr_assert_eq(shunt_registry_lookup(shunt_rundir(), (struct sockaddr *)&p1.dst),
		     SHUNT_REG_LOCAL);
	unlink(path);
	pair_close_fd(p1.cfd);
	pair_close_fd(p2.cfd);
	pair_close_fd(p1.lfd);
}
