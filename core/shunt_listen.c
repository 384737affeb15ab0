/* Registered listeners (shunt_listen.h). */
#include "shunt_listen.h"

#include <stdlib.h>

#include "shunt_core.h"
#include "shunt_log.h"
#include "shunt_rundir.h"

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
	shunt_fd_foreach(SHUNT_FD_LISTEN, forget, NULL);
}
