#include "shunt_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shunt_core.h"
#include "shunt_real.h"
#include "shunt_ownfd.h"
#include "shunt_rundir.h"

#define FILE_BYTES (sizeof(struct shunt_stats_file) + \
		    SHUNT_STATS_SLOTS * sizeof(struct shunt_stat_slot))

static struct shunt_stats_file *file;
static pid_t file_pid;
static int file_state; /* 0 not tried, 1 mapped, -1 unavailable */
static struct shunt_stat_slot dummy;
static int lock_fd = -1; /* holds the flock that says we are alive */

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Files of processes that died (their lock is gone) are removed by the next
 * process that creates its own: a bounded sweep, once per process. */
static void sweep(const char *rd)
{
	char dir[SHUNT_PATH_MAX], path[SHUNT_PATH_MAX];
	snprintf(dir, sizeof dir, "%s/s", rd);
	DIR *d = opendir(dir);
	if (!d)
		return;
	int removed = 0;
	for (struct dirent *de; removed < 64 && (de = readdir(d));) {
		if (de->d_name[0] == '.' ||
		    snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			unlink(path);
			removed++;
		}
		REAL(close)(fd);
	}
	closedir(d);
}

/* The file of this process; a child after fork makes its own. */
static struct shunt_stats_file *mine(void)
{
	pid_t pid = getpid();
	if (__atomic_load_n(&file_state, __ATOMIC_ACQUIRE) != 0 &&
	    __atomic_load_n(&file_pid, __ATOMIC_RELAXED) == pid)
		return file_state > 0 ? file : NULL;
	static int busy;
	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return NULL; /* another thread is creating it */
	const char *rd = shunt_rundir();
	struct shunt_stats_file *f = MAP_FAILED;
	char path[SHUNT_PATH_MAX];
	if (rd && snprintf(path, sizeof path, "%s/s/%d", rd, (int)pid) < (int)sizeof path) {
		SHUNT_GUARD_ENTER();
		unlink(path); /* left by a dead process with our pid */
		int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0 && ftruncate(fd, FILE_BYTES) == 0 && flock(fd, LOCK_SH) == 0)
			f = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		/* The lock lives as long as the fd: kept, above the low numbers. */
		if (fd >= 0 && f == MAP_FAILED)
			REAL(close)(fd);
		else if (fd >= 0)
			shunt_fd_own(fd, &lock_fd);
		if (f != MAP_FAILED)
			sweep(rd);
		SHUNT_GUARD_LEAVE();
	}
	if (f != MAP_FAILED) {
		f->magic = SHUNT_STATS_MAGIC;
		f->version = SHUNT_STATS_VERSION;
		f->pid = pid;
		f->uid = geteuid();
		snprintf(f->prog, sizeof f->prog, "%s", shunt_prog());
		f->start_ns = realtime_ns();
		f->nslots = SHUNT_STATS_SLOTS;
		f->slot_size = sizeof(struct shunt_stat_slot);
		file = f;
	}
	__atomic_store_n(&file_pid, pid, __ATOMIC_RELAXED);
	__atomic_store_n(&file_state, f != MAP_FAILED ? 1 : -1, __ATOMIC_RELEASE);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	return f != MAP_FAILED ? f : NULL;
}

static void put_addr(const struct sockaddr *sa, uint8_t a[16], uint16_t *port)
{
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		memset(a, 0, 10);
		a[10] = a[11] = 0xff;
		memcpy(a + 12, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		memcpy(a, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
	}
}

struct shunt_stat_slot *shunt_stats_open(int fd, int role, int transport, int reason,
					 const struct sockaddr *peer, socklen_t plen)
{
	struct shunt_stats_file *f = mine();
	(void)plen;
	if (!f)
		return &dummy;
	__atomic_add_fetch(&f->conns[transport & 3], 1, __ATOMIC_RELAXED);
	if (transport == SHUNT_TP_KERNEL && (unsigned)reason < SHUNT_STATS_REASONS)
		__atomic_add_fetch(&f->fallbacks[reason], 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < f->nslots; i++) {
		struct shunt_stat_slot *s = &f->slots[i];
		uint32_t free_ = 0;
		if (__atomic_load_n(&s->used, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&s->used, &free_, 1, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		uint32_t used = s->used;
		memset((char *)s + sizeof s->used, 0, sizeof *s - sizeof s->used);
		s->used = used;
		s->fd = fd;
		s->transport = (uint8_t)transport;
		s->role = (uint8_t)role;
		s->reason = (uint8_t)reason;
		struct sockaddr_storage ls;
		socklen_t ll = sizeof ls;
		if (getsockname(fd, (struct sockaddr *)&ls, &ll) == 0)
			put_addr((struct sockaddr *)&ls, s->local, &s->lport);
		put_addr(peer, s->peer, &s->pport);
		s->opened_ns = realtime_ns();
		return s;
	}
	return &dummy;
}

void shunt_stats_close(struct shunt_stat_slot *s)
{
	if (s && s != &dummy)
		__atomic_store_n(&s->used, 0, __ATOMIC_RELEASE);
}

void shunt_stats_demoted(struct shunt_stat_slot *s, int reason)
{
	if (!s || s == &dummy)
		return;
	s->transport = SHUNT_TP_KERNEL;
	s->reason = (uint8_t)reason;
	s->state = 1;
	struct shunt_stats_file *f = mine();
	if (f && (unsigned)reason < SHUNT_STATS_REASONS)
		__atomic_add_fetch(&f->fallbacks[reason], 1, __ATOMIC_RELAXED);
}
