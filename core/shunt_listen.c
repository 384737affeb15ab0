/* Registered listeners (shunt_listen.h). */
#include "shunt_listen.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "shunt_core.h"
#include "shunt_forklock.h"
#include "shunt_log.h"
#include "shunt_real.h"
#include "shunt_rundir.h"
#include "shunt_transport.h"

void shunt_listen_register(int fd, struct shunt_fd *e)
{
	const char *rd = shunt_rundir();
	if (!rd || e->listener)
		return;
	struct shunt_listener *l = calloc(1, sizeof *l);
	if (!l)
		return;
	SHUNT_GUARD_ENTER();
	int rc = shunt_registry_add(rd, fd, &l->reg);
	SHUNT_GUARD_LEAVE();
	if (rc < 0) {
		free(l);
		return;
	}
	l->fds = 1;
	l->pid = shunt_pid();
	e->listener = l;
	SHUNT_DEBUG("listen fd=%d registered (%d names)", fd, l->reg.nlocks);
}

void shunt_listen_dup(struct shunt_listener *l)
{
	__atomic_add_fetch(&l->fds, 1, __ATOMIC_RELAXED);
}

void shunt_listen_unref(struct shunt_listener *l)
{
	if (__atomic_sub_fetch(&l->fds, 1, __ATOMIC_ACQ_REL))
		return;
	const char *rd = shunt_rundir();
	if (rd)
		shunt_registry_remove(rd, &l->reg);
	free(l);
}

static void reown(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	struct shunt_listener *l = e->listener;
	const char *rd = shunt_rundir();
	if (shunt_fd_kind(e) != SHUNT_FD_LISTEN || !l || l->pid == shunt_pid() || !rd)
		return;
	shunt_registry_reown(rd, &l->reg);
	l->pid = shunt_pid();
}

void shunt_listen_after_fork_child(void)
{
	shunt_fd_foreach(SHUNT_FD_LISTEN, reown, NULL);
}

static void forget(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	struct shunt_listener *l = e->listener;
	if (shunt_fd_kind(e) != SHUNT_FD_LISTEN || !l || l->pid != shunt_pid())
		return;
	const char *rd = shunt_rundir();
	if (rd)
		shunt_registry_remove(rd, &l->reg);
}

/* A listener that exits without closing (the usual way) leaves its names;
 * the lock is gone, so clients would skip them, but the process that
 * registered them removes them.  Forked children, which share the lock's
 * open file, leave them to their parent. */
void shunt_listen_at_exit(void)
{
	shunt_listen_withdraw();
}

void shunt_listen_withdraw(void)
{
	shunt_fd_foreach(SHUNT_FD_LISTEN, forget, NULL);
}

/* Credentials: descriptions of this process's registry entries, opened for
 * writing before a set*id call while the process still may, to mark the
 * entries after it if the call took away its access to the rundir. */
#define SETID_MARKS 64
static int marks[SETID_MARKS];
static int nmarks;
static pthread_mutex_t setid_mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(setid_mu, SHUNT_RANK_SETID)

static void open_marks(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	const char *rd = arg;
	struct shunt_listener *l = e->listener;
	if (shunt_fd_kind(e) != SHUNT_FD_LISTEN || !l || l->pid != shunt_pid())
		return;
	nmarks += shunt_registry_open_marks(rd, &l->reg, marks + nmarks, SETID_MARKS - nmarks);
}

static int transports_setid(int phase)
{
	int any = 0;
	for (const struct shunt_transport_ops *const *t = shunt_transports; *t; t++)
		if ((*t)->setid)
			any |= (*t)->setid(phase);
	return any;
}

void shunt_listen_before_setid(void)
{
	const char *rd = shunt_rundir();
	pthread_mutex_lock(&setid_mu);
	nmarks = 0;
	if (rd) {
		SHUNT_GUARD_ENTER();
		shunt_fd_foreach(SHUNT_FD_LISTEN, open_marks, (void *)rd);
		if (nmarks)
			transports_setid(SHUNT_SETID_BEFORE);
		SHUNT_GUARD_LEAVE();
	}
}

void shunt_listen_after_setid(int changed)
{
	const char *rd = shunt_rundir();
	char dir[SHUNT_PATH_MAX];
	SHUNT_GUARD_ENTER();
	/* Effective ids (AT_EACCESS): what opening an offer will be checked
	 * against. */
	if (changed && nmarks && rd &&
	    shunt_rundir_path(dir, sizeof dir, rd, SHUNT_ROOM_OFFER, NULL) == 0 &&
	    faccessat(AT_FDCWD, dir, R_OK | W_OK | X_OK, AT_EACCESS) < 0) {
		int local = transports_setid(SHUNT_SETID_LOST);
		for (int i = 0; i < nmarks; i++)
			shunt_registry_mark(marks[i], local ? SHUNT_REG_LOCAL : SHUNT_REG_REFUSES);
		if (local)
			SHUNT_INFO("credentials changed: %s is out of reach; offers from this host "
				   "are opened by the process that registered the listeners, clients "
				   "on other hosts stay on TCP",
				   dir);
		else
			SHUNT_INFO("credentials changed: %s is out of reach, clients of this "
				   "process's listeners stay on TCP (server-cred)",
				   dir);
	}
	for (int i = 0; i < nmarks; i++)
		REAL(close)(marks[i]);
	nmarks = 0;
	SHUNT_GUARD_LEAVE();
	pthread_mutex_unlock(&setid_mu);
}
