/* Spilled connections: unread bytes kept in a shared memfd (shunt_spill.h).
 *
 * A spill is itself a small transport: reads are served from the memfd
 * until it is drained, then the connection is finished and the kernel
 * answers (the peer is gone, so that is its EOF or reset); writes,
 * shutdown and everything else go to the socket at once.  The memfd holds
 * a header and the bytes; every process that holds the socket maps the
 * same file (fork shares the mapping, exec passes the fd), and the read
 * position lives in the header, so each byte is delivered once whichever
 * process reads it. */
#include "shunt_spill.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shunt_copy.h"
#include "shunt_forklock.h"
#include "shunt_log.h"
#include "shunt_ownfd.h"
#include "shunt_real.h"
#include "shunt_reserve.h"

#define SPILL_MAGIC 0x50534853u /* "SHSP" */
#define SPILL_DATA 64
#define SPILL_MAX_EXEC 64

struct spill_hdr {
	uint32_t magic;
	uint32_t lock;     /* shared by every process mapping the file */
	uint64_t len;
	uint64_t consumed;
	uint64_t ino;      /* the socket's inode: an exec'd image checks it */
};

struct spill_conn {
	struct shunt_conn base;
	struct spill_hdr *h;
	size_t map_len;
	int memfd;
};

/* Held for a copy only; a process killed inside it would leave the bytes
 * to nobody, as a killed reader of a kernel socket would. */
static void hlock(struct spill_hdr *h)
{
	unsigned spins = 0;
	while (__atomic_exchange_n(&h->lock, 1, __ATOMIC_ACQUIRE))
		if (++spins > 64)
			sched_yield();
}

static void hunlock(struct spill_hdr *h)
{
	__atomic_store_n(&h->lock, 0, __ATOMIC_RELEASE);
}

static uint64_t avail(struct spill_conn *c)
{
	return __atomic_load_n(&c->h->len, __ATOMIC_RELAXED) -
	       __atomic_load_n(&c->h->consumed, __ATOMIC_ACQUIRE);
}

/* ---- objects -------------------------------------------------------------- */

static const struct shunt_conn_ops spill_ops;
static struct shunt_conn_pool pool = SHUNT_CONN_POOL(struct spill_conn);
SHUNT_FORK_MUTEX(pool.mu, SHUNT_RANK_POOL)

static struct spill_conn *conn_new(void)
{
	struct spill_conn *c = shunt_conn_alloc(&pool);
	if (!c)
		return NULL;
	c->base.ops = &spill_ops;
	c->memfd = -1;
	return c;
}

static void conn_release(struct spill_conn *c)
{
	if (c->h)
		munmap(c->h, c->map_len);
	c->h = NULL;
	if (c->memfd >= 0)
		shunt_fd_release(c->memfd);
	c->memfd = -1;
	shunt_conn_recycle(&pool, &c->base);
}

/* ---- the data path --------------------------------------------------------- */

static ssize_t sp_recvmsg(struct shunt_conn *b, struct msghdr *m, int flags)
{
	struct spill_conn *c = (struct spill_conn *)b;
	size_t total = 0, done = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		total += m->msg_iov[i].iov_len;
	if (!(flags & MSG_OOB) && total && avail(c)) {
		hlock(c->h);
		uint64_t pos = c->h->consumed, left = c->h->len - pos;
		const uint8_t *src = (const uint8_t *)c->h + SPILL_DATA + pos;
		for (size_t i = 0; i < m->msg_iovlen && done < left; i++) {
			size_t k = m->msg_iov[i].iov_len;
			if (k > left - done)
				k = (size_t)(left - done);
			shunt_copy(m->msg_iov[i].iov_base, src + done, k);
			done += k;
		}
		if (!(flags & MSG_PEEK))
			__atomic_store_n(&c->h->consumed, pos + done, __ATOMIC_RELEASE);
		hunlock(c->h);
	}
	if (done) {
		m->msg_flags = 0;
		m->msg_controllen = 0;
		if (m->msg_name)
			m->msg_namelen = 0;
		done = shunt_recv_rest(__atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE), m, flags,
				       done, total);
		if (!(flags & MSG_PEEK)) {
			SHUNT_STAT_ADD(&c->base, bytes_in, done);
			SHUNT_STAT_ADD(&c->base, calls_in, 1);
		}
		return (ssize_t)done;
	}
	/* Drained (by this process or another): the socket from now on. */
	if (!(flags & MSG_OOB) && total)
		shunt_conn_finish(&c->base, (enum shunt_reason)c->base.reason);
	return REAL(recvmsg)(__atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE), m, flags);
}

static ssize_t sp_sendmsg(struct shunt_conn *b, const struct msghdr *m, int flags)
{
	return REAL(sendmsg)(__atomic_load_n(&b->fd, __ATOMIC_ACQUIRE), m, flags);
}

static int sp_shutdown(struct shunt_conn *b, int how)
{
	(void)b;
	(void)how;
	return 0;
}

static int sp_ioctl(struct shunt_conn *b, unsigned long req, void *arg)
{
	struct spill_conn *c = (struct spill_conn *)b;
	uint64_t n = avail(c);
	if (req != FIONREAD || !arg || !n) {
		errno = ENOTTY;
		return -1;
	}
	*(int *)arg = n > 0x7fffffff ? 0x7fffffff : (int)n;
	return 0;
}

static short sp_poll(struct shunt_conn *b, short events)
{
	struct spill_conn *c = (struct spill_conn *)b;
	if (!avail(c)) {
		shunt_conn_finish(b, (enum shunt_reason)b->reason);
		return 0; /* the caller asks the kernel now */
	}
	struct pollfd p = {__atomic_load_n(&b->fd, __ATOMIC_ACQUIRE),
			   (short)(events & ~(POLLIN | POLLRDNORM)), 0};
	if (p.fd >= 0 && p.events)
		REAL(poll)(&p, 1, 0);
	return (short)((p.revents | POLLIN | POLLRDNORM) & (events | POLLERR | POLLHUP));
}

/* Only asked when poll() found nothing, i.e. the bytes are gone: the
 * socket is what to wait for. */
static int sp_arm(struct shunt_conn *b, short events, struct pollfd out[], int *timeout_ms)
{
	(void)timeout_ms;
	out[0] = (struct pollfd){__atomic_load_n(&b->fd, __ATOMIC_ACQUIRE),
				 (short)(events | POLLRDHUP), 0};
	return 1;
}

static void sp_disarm(struct shunt_conn *b, short events, const struct pollfd *fds, int n)
{
	(void)b;
	(void)events;
	(void)fds;
	(void)n;
}

static uint64_t sp_progress(struct shunt_conn *b)
{
	return __atomic_load_n(&((struct spill_conn *)b)->h->consumed, __ATOMIC_ACQUIRE);
}

static void sp_close(struct shunt_conn *b)
{
	__atomic_store_n(&b->fd, -1, __ATOMIC_RELEASE);
}

static void sp_free(struct shunt_conn *b)
{
	SHUNT_GUARD_ENTER();
	conn_release((struct spill_conn *)b);
	SHUNT_GUARD_LEAVE();
}

/* On no transport.  Nothing to do at fork: the mapping is shared and the
 * memfd inherited.  No demote: the bytes have nowhere else to go (an exec
 * passes them on, see shunt_spill_exec_env). */
static const struct shunt_conn_life_ops spill_life_ops = {
	.close = sp_close,
	.free = sp_free,
};
static const struct shunt_conn_data_ops spill_data_ops = {
	.recvmsg = sp_recvmsg,
	.sendmsg = sp_sendmsg,
	.shutdown = sp_shutdown,
	.ioctl = sp_ioctl,
};
static const struct shunt_conn_wait_ops spill_wait_ops = {
	.poll = sp_poll,
	.arm = sp_arm,
	.disarm = sp_disarm,
	.progress = sp_progress,
};
static const struct shunt_conn_ops spill_ops = {
	.transport = NULL,
	.life = &spill_life_ops,
	.data = &spill_data_ops,
	.wait = &spill_wait_ops,
};

/* ---- making one --------------------------------------------------------------- */

static int map_file(struct spill_conn *c, size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
	if (p == MAP_FAILED)
		return -1;
	c->h = p;
	c->map_len = size;
	return 0;
}

struct shunt_conn *shunt_spill_new(struct shunt_conn *old, const struct iovec *v, int n,
				   enum shunt_reason why)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += v[i].iov_len;
	int fd = __atomic_load_n(&old->fd, __ATOMIC_ACQUIRE);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	SHUNT_GUARD_ENTER();
	struct spill_conn *c = conn_new();
	int rc = -1;
	if (!c)
		goto out;
	int mfd = memfd_create("shunt-spill", MFD_CLOEXEC);
	if (mfd < 0)
		goto out;
	c->memfd = shunt_fd_own(mfd, &c->memfd);
	if (shunt_reserve(c->memfd, 0, (off_t)(SPILL_DATA + len)) < 0 ||
	    map_file(c, SPILL_DATA + len) < 0)
		goto out;
	uint8_t *dst = (uint8_t *)c->h + SPILL_DATA;
	for (int i = 0; i < n; i++) {
		shunt_copy(dst, v[i].iov_base, v[i].iov_len);
		dst += v[i].iov_len;
	}
	c->h->len = len;
	c->h->ino = st.st_ino;
	c->h->magic = SPILL_MAGIC;
	c->base.reason = (uint8_t)why;
	c->base.nonblock = old->nonblock;
	rc = 0;
out:
	if (rc < 0 && c)
		conn_release(c);
	SHUNT_GUARD_LEAVE();
	return rc < 0 ? NULL : &c->base;
}

void shunt_spill_install(struct shunt_conn *old, struct shunt_conn *sp)
{
	struct spill_conn *c = (struct spill_conn *)sp;
	enum shunt_reason why = (enum shunt_reason)sp->reason;
	/* The stats slot now counts what the application reads from here; it
	 * is on the kernel path as far as anyone watching is concerned. */
	shunt_stats_demoted(old->stat, why);
	SHUNT_INFO("moved fd=%d from=%s transport=kernel reason=%s", old->fd, shunt_conn_name(old),
		   shunt_reason_name(why));
	SHUNT_DEBUG("fd=%d: %llu unread bytes kept for the application",
		    old->fd, (unsigned long long)c->h->len);
	shunt_conn_replace(old, sp);
}

/* ---- exec ------------------------------------------------------------------------ */

struct exec_arg {
	char buf[SPILL_MAX_EXEC * 48];
	size_t used;
	int memfds[SPILL_MAX_EXEC];
	int n;
};

static void exec_one(int fd, struct shunt_fd *e, void *p)
{
	struct exec_arg *a = p;
	struct shunt_conn *b = e->conn;
	if (shunt_fd_kind(e) != SHUNT_FD_ACCEL || !b || b->ops != &spill_ops || !avail((void *)b) ||
	    a->n == SPILL_MAX_EXEC)
		return;
	struct spill_conn *c = (struct spill_conn *)b;
	int fl = REAL(fcntl)(fd, F_GETFD, 0);
	if (fl < 0 || (fl & FD_CLOEXEC))
		return;
	int k = snprintf(a->buf + a->used, sizeof a->buf - a->used, "%s%d:%d:%llu",
			 a->used ? "," : "", fd, c->memfd, (unsigned long long)c->h->ino);
	if (k < 0 || (size_t)k >= sizeof a->buf - a->used)
		return;
	a->used += (size_t)k;
	/* Several numbers may share one memfd: clear its flag once. */
	for (int i = 0; i < a->n; i++)
		if (a->memfds[i] == c->memfd)
			return;
	if (REAL(fcntl)(c->memfd, F_SETFD, 0) == 0)
		a->memfds[a->n++] = c->memfd;
}

static struct exec_arg *exec_pending;

char *const *shunt_spill_exec_env(char *const *env)
{
	if (!shunt_any_accel())
		return env;
	struct exec_arg *a = calloc(1, sizeof *a);
	if (!a)
		return env;
	shunt_fd_foreach(SHUNT_FD_ACCEL, exec_one, a);
	if (!a->used) {
		free(a);
		return env;
	}
	char *const *src = env ? env : (char *const *)environ;
	size_t n = 0;
	while (src && src[n])
		n++;
	char **ne = calloc(n + 2, sizeof *ne);
	char *var = malloc(sizeof "SHUNT_SPILL=" + a->used);
	if (!ne || !var) {
		free(ne);
		free(var);
		free(a);
		return env;
	}
	sprintf(var, "SHUNT_SPILL=%s", a->buf);
	size_t j = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(src[i], "SHUNT_SPILL=", 12))
			ne[j++] = src[i];
	ne[j++] = var;
	ne[j] = NULL;
	exec_pending = a;
	return ne;
}

void shunt_spill_exec_done(char *const *env, char *const *orig)
{
	struct exec_arg *a = exec_pending;
	if (env == orig || !a)
		return;
	exec_pending = NULL;
	for (int i = 0; i < a->n; i++)
		REAL(fcntl)(a->memfds[i], F_SETFD, FD_CLOEXEC);
	for (size_t i = 0; env[i]; i++)
		if (!strncmp(env[i], "SHUNT_SPILL=", 12)) {
			free(env[i]);
			break;
		}
	free((void *)env);
	free(a);
}

/* Mapping a memfd an earlier image of this process left: memory, no I/O,
 * and only when that image passed one on. */
void shunt_spill_inherit(const char *list)
{
	struct spill_conn *byfd[SPILL_MAX_EXEC] = {0};
	int memfds[SPILL_MAX_EXEC], nm = 0;
	while (list && *list) {
		int fd, mfd;
		unsigned long long ino;
		int used = 0;
		if (sscanf(list, "%d:%d:%llu%n", &fd, &mfd, &ino, &used) != 3)
			break;
		list += used;
		if (*list == ',')
			list++;
		struct stat st, ms;
		struct shunt_fd *e = shunt_fd_get(fd);
		if (!e || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_ino != ino ||
		    fstat(mfd, &ms) < 0 || ms.st_size < SPILL_DATA)
			continue;
		/* One object per memfd, shared by the numbers that name it. */
		struct spill_conn *c = NULL;
		for (int i = 0; i < nm; i++)
			if (memfds[i] == mfd)
				c = byfd[i];
		if (!c) {
			if (nm == SPILL_MAX_EXEC || !(c = conn_new()))
				continue;
			c->memfd = mfd;
			if (map_file(c, (size_t)ms.st_size) < 0 || c->h->magic != SPILL_MAGIC ||
			    c->h->len > (uint64_t)ms.st_size - SPILL_DATA || c->h->ino != ino) {
				c->memfd = -1; /* not ours to close */
				conn_release(c);
				continue;
			}
			c->memfd = shunt_fd_own(mfd, &c->memfd);
			c->base.fd = fd;
			c->base.reason = SHUNT_R_EXEC;
			__atomic_add_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
			memfds[nm] = mfd;
			byfd[nm++] = c;
		}
		c->base.refs++;
		c->base.fds++;
		e->conn = &c->base;
		e->role = SHUNT_ROLE_ANY;
		e->reason = SHUNT_R_EXEC;
		__atomic_store_n(&e->kind, SHUNT_FD_ACCEL, __ATOMIC_RELEASE);
	}
	/* Not for the programs this one runs: their fds are their own. */
	unsetenv("SHUNT_SPILL");
}
