/* Single copy for large transfers (Cross Memory Attach).
 *
 * Through the ring every byte is copied twice, once in by the writer and
 * once out by the reader.  When a reader waits in a large read on an empty
 * ring, it posts its buffer in the ring header (struct shm_cma); a writer
 * with a large write that finds the post, and the ring still empty, claims
 * it under its ring's write lock and copies straight into the reader's
 * buffer with process_vm_writev: one copy, on one CPU, while the reader
 * sleeps.  The reader takes what came as the bytes of its read.
 *
 * Order: a claim needs the ring empty and holds the write lock until the
 * post is DONE, so no ring byte can be ahead of the copied ones, and none
 * written after them is read before them (the reader settles its post
 * before it looks at the ring again).  A demotion replays under the same
 * lock: a copy is over, or not begun, when it takes its snapshot.
 *
 * Falling back: a copy the kernel refuses leaves the bytes where they were,
 * and the writer puts them in the ring.  EPERM (no ptrace right over the
 * reader: another uid, a non-dumpable process, Yama, a container) stops
 * the claims for the connection's direction (shm_cma.off tells the reader
 * to stop posting too); EFAULT (the buffer unmapped, or smaller than
 * posted) counts the bytes that did arrive, the rest goes by the ring; a
 * writer killed in a copy leaves a CLAIMED post whose write lock no live
 * holder has, which the reader gives up as "nothing came" (the writer's
 * send never returned: nothing was promised).
 *
 * Trust: the post names a process and an address, and the writer writes
 * there.  So it is used only where whoever can write the header could
 * ptrace this process anyway: a ring arena owned by this user, open to no
 * one else (no shm_group), both ends in one PID namespace (a pid is
 * meaningful only there).  Checked once per connection, at its first large
 * transfer; nothing here runs on a small one. */
#include <errno.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "core/shunt_core.h"
#include "core/shunt_iov.h"
#include "core/shunt_log.h"
#include "core/shunt_rundir.h"
#include "core/shunt_signal.h"
#include "shm_internal.h"

/* The inode of this process's PID namespace (0: unknown), read once per
 * process (a child of fork may be in another: see shunt_netns). */
static uint64_t pidns(void)
{
	static uint64_t ino;
	static pid_t at;
	pid_t me = shunt_pid();
	if (__atomic_load_n(&at, __ATOMIC_ACQUIRE) != me) {
		struct stat st;
		uint64_t v = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
		__atomic_store_n(&ino, v, __ATOMIC_RELAXED);
		__atomic_store_n(&at, me, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&ino, __ATOMIC_RELAXED);
}

/* May this end take part at all?  Decided at its first large transfer. */
static int allowed(struct shm_conn *c)
{
	if (__builtin_expect(c->cma_ok != 0, 1))
		return c->cma_ok > 0;
	int ok = shunt_config()->cma_min != 0 && !shunt_rundir_group(NULL) && pidns() != 0;
	struct stat st;
	/* The arena: this user's, and no one else's to open. */
	if (ok)
		ok = c->slot.lockfd >= 0 && fstat(c->slot.lockfd, &st) == 0 &&
		     st.st_uid == shunt_euid() && (st.st_mode & 077) == 0;
	c->cma_ok = ok ? 1 : -1;
	SHUNT_DEBUG("fd=%d single copy %s", c->base.fd, ok ? "possible" : "off");
	return ok;
}

static inline struct shm_cma *rx_post(struct shm_conn *c)
{
	return &c->hdr->cma[!c->side];
}

static inline struct shm_cma *tx_post(struct shm_conn *c)
{
	return &c->hdr->cma[c->side];
}

/* A post the reader can no longer settle itself (a handler that may not
 * return to the read): withdraw it now, or let a copy under way end. */
static void withdraw(void *arg);

int shm_cma_post(struct shm_conn *c, void *buf, size_t len, int *cancel_state)
{
	if (len < shunt_config()->cma_min || !shunt_config()->cma_min || c->demoted ||
	    !allowed(c))
		return 0;
	struct shm_cma *p = rx_post(c);
	if (__atomic_load_n(&p->off, __ATOMIC_RELAXED))
		return 0;
	uint32_t st = SHM_CMA_IDLE;
	/* POSTED needs every field: POSTING keeps two readers of one end
	 * (threads, a forked child) from mixing theirs. */
	if (!__atomic_compare_exchange_n(&p->state, &st, SHM_CMA_POSTING, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return 0;
	p->pid = shunt_pid();
	p->pidns = pidns();
	p->addr = (uint64_t)(uintptr_t)buf;
	p->len = len;
	p->got = 0;
	p->fault = 0;
	/* A cancelled thread or a handler that jumps out of the read must
	 * not leave a buffer posted that the writer would later fill. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, cancel_state);
	shunt_sig_guard(withdraw, c);
	c->cma_posted = 1;
	__atomic_store_n(&p->state, SHM_CMA_POSTED, __ATOMIC_RELEASE);
	return 1;
}

/* Wait for a claim to end: DONE, or its claimer gone (CLAIMED with the
 * write lock free or held by the dead).  0 when it ended DONE. */
static int claim_end(struct shm_conn *c, struct shm_cma *p)
{
	for (;;) {
		uint32_t st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
		if (st != SHM_CMA_CLAIMED)
			return st == SHM_CMA_DONE ? 0 : -1;
		/* A live claimer holds the lock until the post is DONE. */
		shm_lock_wait_free(&c->rx.ctl->wlock, &c->lk);
		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != SHM_CMA_CLAIMED)
			continue;
		uint32_t cl = SHM_CMA_CLAIMED;
		if (__atomic_compare_exchange_n(&p->state, &cl, SHM_CMA_IDLE, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			SHUNT_DEBUG("fd=%d single copy: the writer died in it", c->base.fd);
			return -1;
		}
	}
}

static void withdraw(void *arg)
{
	struct shm_conn *c = arg;
	struct shm_cma *p = rx_post(c);
	uint32_t st = SHM_CMA_POSTED;
	if (__atomic_compare_exchange_n(&p->state, &st, SHM_CMA_IDLE, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		c->cma_posted = 0;
		return;
	}
	/* Claimed: let the copy end (bounded by one copy; its bytes are then
	 * the read's, settled if the handler returns). */
	if (st == SHM_CMA_CLAIMED)
		claim_end(c, p);
}

size_t shm_cma_settle(struct shm_conn *c, int cancel_state, int *fault)
{
	*fault = 0;
	int err = errno;
	struct shm_cma *p = rx_post(c);
	size_t got = 0;
	for (;;) {
		uint32_t st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
		if (st == SHM_CMA_POSTED) {
			if (__atomic_compare_exchange_n(&p->state, &st, SHM_CMA_IDLE, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				break;
			continue;
		}
		if (st == SHM_CMA_CLAIMED) {
			if (claim_end(c, p) < 0)
				break;
			continue;
		}
		if (st == SHM_CMA_DONE) {
			uint64_t n = __atomic_load_n(&p->got, __ATOMIC_RELAXED);
			/* Never more than posted, whatever the peer says. */
			got = n <= p->len ? (size_t)n : (size_t)p->len;
			*fault = __atomic_load_n(&p->fault, __ATOMIC_RELAXED) != 0;
			__atomic_store_n(&p->state, SHM_CMA_IDLE, __ATOMIC_RELEASE);
		}
		/* IDLE: withdrawn by a handler (or a peer that broke it). */
		break;
	}
	c->cma_posted = 0;
	shunt_sig_guard(NULL, NULL);
	int ignored;
	pthread_setcancelstate(cancel_state, &ignored);
	if (got) {
		c->base.bytes_in += got;
		SHUNT_STAT_ADD(&c->base, bytes_in, got);
		SHUNT_STAT_ADD(&c->base, calls_in, 1);
		SHUNT_STAT_ADD(&c->base, cma_in, got);
		c->cma_in += got;
		if (!(c->cma_said & 1)) {
			c->cma_said |= 1;
			SHUNT_DEBUG("fd=%d single copy in: %zu bytes", c->base.fd, got);
		}
	}
	errno = err;
	return got;
}

int shm_cma_done(struct shm_conn *c)
{
	return __atomic_load_n(&rx_post(c)->state, __ATOMIC_ACQUIRE) == SHM_CMA_DONE;
}

size_t shm_cma_push(struct shm_conn *c, const struct iovec *v, size_t k)
{
	struct shm_cma *p = tx_post(c);
	size_t min = shunt_config()->cma_min;
	if (__atomic_load_n(&p->state, __ATOMIC_RELAXED) != SHM_CMA_POSTED || c->cma_tx_off ||
	    !min || shunt_iov_total(v, k) < min || !allowed(c))
		return 0;
	shm_lock(&c->tx.ctl->wlock, &c->lk);
	uint64_t head = __atomic_load_n(&c->tx.ctl->head, __ATOMIC_RELAXED);
	uint32_t st = SHM_CMA_POSTED;
	/* The ring empty (no byte may be ahead of the copied ones), the
	 * connection on the rings (a demotion's snapshot waits for this
	 * lock). */
	if (c->demoted || __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE) != SHM_COMMITTED ||
	    __atomic_load_n(&c->tx.ctl->tail, __ATOMIC_ACQUIRE) != head) {
		shm_unlock(&c->tx.ctl->wlock);
		return 0;
	}
	__atomic_store_n(&p->wtag, c->lk.tag, __ATOMIC_RELAXED);
	if (!__atomic_compare_exchange_n(&p->state, &st, SHM_CMA_CLAIMED, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED)) {
		shm_unlock(&c->tx.ctl->wlock);
		return 0;
	}
	pid_t pid = p->pid;
	uint64_t ns = p->pidns, len = p->len;
	struct iovec remote = {(void *)(uintptr_t)p->addr, 0};
	struct iovec local[SHUNT_IOV_MAX];
	size_t nl = 0;
	for (size_t i = 0; i < k && remote.iov_len < len; i++) {
		size_t l = v[i].iov_len;
		if (l > len - remote.iov_len)
			l = (size_t)(len - remote.iov_len);
		local[nl].iov_base = v[i].iov_base;
		local[nl++].iov_len = l;
		remote.iov_len += l;
	}
	size_t got = 0;
	if (pid > 0 && ns == pidns() && remote.iov_len) {
		ssize_t r = process_vm_writev(pid, local, nl, &remote, 1, 0);
		if (r > 0) {
			got = (size_t)r;
		} else if (errno == EFAULT) {
			/* The buffer is not there (our own would fault in the
			 * ring's copy too): the read says EFAULT, as the
			 * kernel's would, and the bytes wait in the ring. */
			__atomic_store_n(&p->fault, 1, __ATOMIC_RELAXED);
		} else if (errno == EPERM || errno == ENOSYS || errno == EACCES) {
			/* Never will: the ring for this direction. */
			c->cma_tx_off = 1;
			__atomic_store_n(&p->off, 1, __ATOMIC_RELAXED);
			SHUNT_DEBUG("fd=%d single copy refused (%s): by the ring", c->base.fd,
				    strerror(errno));
		}
	}
	__atomic_store_n(&p->got, got, __ATOMIC_RELAXED);
	__atomic_store_n(&p->state, SHM_CMA_DONE, __ATOMIC_RELEASE);
	shm_unlock_fence(&c->tx.ctl->wlock);
	if (got) {
		c->base.bytes_out += got;
		SHUNT_STAT_ADD(&c->base, bytes_out, got);
		SHUNT_STAT_ADD(&c->base, calls_out, 1);
		SHUNT_STAT_ADD(&c->base, cma_out, got);
		c->cma_out += got;
		if (!(c->cma_said & 2)) {
			c->cma_said |= 2;
			SHUNT_DEBUG("fd=%d single copy out: %zu bytes", c->base.fd, got);
		}
	}
	/* The reader waits for this as for data (shm_poll asks shm_cma_done). */
	shm_wake_data(c);
	return got;
}

void shm_cma_close(struct shm_conn *c)
{
	if (c->cma_in || c->cma_out)
		SHUNT_DEBUG("shm single copy fd=%d in=%llu out=%llu", c->base.fd,
			    (unsigned long long)c->cma_in, (unsigned long long)c->cma_out);
}
