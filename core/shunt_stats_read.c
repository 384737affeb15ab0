/* Reading <rundir>/s/<pid> (see shunt_stats_read.h). */
#include "shunt_stats_read.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "config/shunt_config.h"
#include "config/shunt_rundir_path.h"
#include "shunt_reason.h"
#include "shunt_rundir_layout.h"
#include "shunt_rundir_open.h"

/* A file without a header this old is not one being created: stale. */
#define CREATING_GRACE_S 10
/* A slot changing under the reader this many times in a row is skipped for
 * this sample rather than waited for. */
#define COPY_TRIES 1000

typedef uint64_t __attribute__((may_alias)) word_t;

static const char *getenv_const(const char *name)
{
	return getenv(name);
}

/* " (why)" appended to why[0..len), as far as it fits. */
__attribute__((format(printf, 3, 4)))
static void add_why(char *why, size_t len, const char *fmt, ...)
{
	if (!why || !len)
		return;
	size_t n = strlen(why);
	if (n + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why + n, len - n, fmt, ap);
	va_end(ap);
}

int shunt_stats_rundir_why(const char *override, char *out, size_t outlen, char *why,
			   size_t whylen, char *err, size_t errlen)
{
	struct stat st;
	if (why && whylen)
		why[0] = '\0';
	if (override) {
		/* Named by the user (root looking at another user's rundir
		 * included): only that it is there. */
		if (stat(override, &st) < 0 || !S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "rundir %s: %s", override,
				 errno ? strerror(errno) : "not a directory");
			return -1;
		}
		snprintf(out, outlen, "%s", override);
		add_why(why, whylen, "named on the command line");
		return 0;
	}
	static struct shunt_config c;
	char cerr[SHUNT_ERR_MAX];
	if (shunt_config_load(&c, getenv_const, cerr, sizeof cerr) < 0) {
		snprintf(err, errlen, "%s", cerr);
		return -1;
	}
	struct statfs fs;
	int run_mem = statfs("/run", &fs) == 0 && shunt_fs_in_memory((unsigned long)fs.f_type);
	char cand[SHUNT_RUNDIR_CANDIDATES][SHUNT_RUNDIR_MAX + 1];
	unsigned euid = (unsigned)geteuid();
	int n = shunt_rundir_candidates(c.rundir, euid, run_mem, cand);
	if (n == 0) {
		snprintf(err, errlen, "rundir %s is longer than %d bytes", c.rundir,
			 SHUNT_RUNDIR_MAX);
		return -1;
	}
	if (c.rundir[0])
		add_why(why, whylen, "the rundir setting");
	else
		add_why(why, whylen, "the default for uid %u%s: the first of", euid,
			euid == 0 && !run_mem ? " (/run is not memory-backed)" : "");
	/* The library takes the first candidate it can make its own; the
	 * ones before it are absent or not acceptable, so the first one that
	 * exists and is acceptable is the library's. */
	for (int i = 0; i < n; i++) {
		char sub[SHUNT_STATS_DIR_MAX + 4];
		snprintf(sub, sizeof sub, "%s/%s", cand[i], shunt_room_dir(SHUNT_ROOM_STATS));
		int exists = lstat(cand[i], &st) == 0;
		int shared = c.shm_group[0] != 0;
		if (exists && shunt_rundir_acceptable(&st, euid, shared) && lstat(sub, &st) == 0 &&
		    shunt_rundir_acceptable(&st, euid, shared)) {
			snprintf(out, outlen, "%s", cand[i]);
			if (!c.rundir[0])
				add_why(why, whylen, " %s (exists and is this user's)", cand[i]);
			return 0;
		}
		if (!c.rundir[0])
			add_why(why, whylen, " %s (%s),", cand[i],
				exists ? "not this user's, or writable by others or its group"
				       : "absent");
	}
	/* None yet: no process has counters; the first is where they will be. */
	snprintf(out, outlen, "%s", cand[0]);
	add_why(why, whylen, "%s none is there yet: the library makes %s at its first decision",
		c.rundir[0] ? ";" : "", cand[0]);
	return 0;
}

int shunt_stats_rundir(const char *override, char *out, size_t outlen, char *err,
		       size_t errlen)
{
	return shunt_stats_rundir_why(override, out, outlen, NULL, 0, err, errlen);
}

static void copy_words(void *dst, const void *src, size_t bytes)
{
	word_t *d = dst;
	const word_t *s = src;
	for (size_t i = 0; i < bytes / sizeof(word_t); i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

/* A consistent copy of one slot: 1 when it holds an open connection. */
static int copy_slot(const struct shunt_stat_slot *src, struct shunt_stat_slot *dst)
{
	for (int t = 0; t < COPY_TRIES; t++) {
		uint32_t g = __atomic_load_n(&src->gen, __ATOMIC_ACQUIRE);
		if (g == 0)
			return 0; /* never set up */
		if (g & 1) {
			/* Being changed, or free since its close. */
			if (!__atomic_load_n(&src->used, __ATOMIC_RELAXED))
				return 0;
			continue;
		}
		if (!__atomic_load_n(&src->used, __ATOMIC_RELAXED))
			return 0;
		copy_words(dst, src, sizeof *dst);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&src->gen, __ATOMIC_RELAXED) == g)
			return dst->used != 0 && dst->gen == g;
	}
	return 0;
}

/* 1 stale (owner gone), 0 live, -1 neither (not readable, being created). */
static int staleness(int fd, const struct stat *st)
{
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? 0 : -1;
	/* Free lock: the owner died, or is between creating the file and
	 * locking it.  The magic is written after the lock is taken. */
	uint32_t magic = 0;
	if (pread(fd, &magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
	    magic == SHUNT_STATS_MAGIC)
		return 1;
	return time(NULL) - st->st_mtime > CREATING_GRACE_S ? 1 : -1;
}

static int remove_stale(const char *path, int fd, const struct stat *st)
{
	/* Only the file we found stale: a new process with the same pid may
	 * have replaced it since. */
	struct stat now;
	if (lstat(path, &now) == 0 && now.st_ino == st->st_ino && now.st_dev == st->st_dev)
		return unlink(path) == 0;
	(void)fd;
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- local addresses of kernel-path connections ---------------------------
 * The library does not ask for them (shunt_stats.c): the kernel keeps them,
 * in /proc/PID/net/tcp{,6}, found by the socket's inode from
 * /proc/PID/fd/FD.  The fd may be another socket by now: the line must
 * also have the slot's peer as its remote end. */

/* The inode of PID's fd, if it is a socket: 0 otherwise. */
static unsigned long sock_inode(int pid, int fd)
{
	char path[64], link[64];
	snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
	ssize_t n = readlink(path, link, sizeof link - 1);
	unsigned long ino = 0;
	if (n > 0) {
		link[n] = 0;
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			ino = 0;
	}
	return ino;
}

/* "0100007F:1F90" (words as the kernel prints them: each 32-bit word of
 * the address in host order) into a mapped address and a port. */
static int parse_tcp_addr(const char *s, uint8_t a[16], uint16_t *port)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	size_t hex = strcspn(s, ":");
	if (hex != 8 && hex != 32)
		return -1;
	memset(a, 0, 16);
	if (hex == 8)
		memcpy(a, mapped, sizeof mapped);
	for (size_t w = 0; w < hex / 8; w++) {
		char word[9];
		memcpy(word, s + 8 * w, 8);
		word[8] = 0;
		uint32_t v = (uint32_t)strtoul(word, NULL, 16);
		memcpy(a + (hex == 8 ? 12 : 4 * w), &v, 4);
	}
	*port = (uint16_t)strtoul(s + hex + 1, NULL, 16);
	return 0;
}

struct want {
	unsigned long ino;
	struct shunt_stat_slot *s;
};

static int by_ino(const void *a, const void *b)
{
	unsigned long x = ((const struct want *)a)->ino, y = ((const struct want *)b)->ino;
	return (x > y) - (x < y);
}

/* Fill in the local addresses of p's kernel-path connections from the
 * kernel's tables, where they can be found: one pass over each table. */
static void find_locals(struct shunt_proc_snap *p)
{
	struct want *w = NULL;
	unsigned n = 0;
	for (unsigned i = 0; i < p->nconns; i++) {
		struct shunt_stat_slot *s = &p->conns[i].s;
		if (s->lport || s->transport != SHUNT_TP_KERNEL)
			continue;
		unsigned long ino = sock_inode(p->hdr.pid, s->fd);
		if (!ino)
			continue;
		if (!w && !(w = malloc(p->nconns * sizeof *w)))
			return;
		w[n++] = (struct want){ino, s};
	}
	if (!n)
		return;
	qsort(w, n, sizeof *w, by_ino);
	for (int v6 = 0; v6 < 2; v6++) {
		char path[64], line[512];
		snprintf(path, sizeof path, "/proc/%d/net/tcp%s", p->hdr.pid, v6 ? "6" : "");
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof line, f)) {
			char la[64], ra[64];
			struct want key = {0, NULL}, *hit;
			uint8_t l16[16], r16[16];
			uint16_t lp, rp;
			/* sl local rem st tx:rx tr:tm retrnsmt uid timeout inode */
			if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", la, ra,
				   &key.ino) != 3 ||
			    !(hit = bsearch(&key, w, n, sizeof *w, by_ino)) ||
			    parse_tcp_addr(la, l16, &lp) || parse_tcp_addr(ra, r16, &rp))
				continue;
			if (rp == hit->s->pport && !memcmp(r16, hit->s->peer, 16)) {
				memcpy(hit->s->local, l16, 16);
				hit->s->lport = lp;
			}
		}
		fclose(f);
	}
	free(w);
}

/* The layout of versions 2 and 3 (a library of before version 4 may still
 * run): 32 reasons, the slots at 576.  The fields up to conns are where
 * version 4 has them. */
#define V3_REASONS 32u
struct stats_file_v3 {
	uint32_t magic, version;
	int32_t pid;
	uint32_t uid;
	char prog[64];
	uint64_t start_ns;
	uint32_t nslots, slot_size;
	uint64_t conns[SHUNT_STATS_TRANSPORTS];
	uint64_t fallbacks[V3_REASONS];
	struct shunt_stat_sum closed[SHUNT_STATS_TRANSPORTS];
	uint64_t ring_reserved, ring_mapped;
	struct shunt_stat_slot slots[] __attribute__((aligned(64)));
};
_Static_assert(offsetof(struct stats_file_v3, slots) == 576, "version 3's slots");
_Static_assert(offsetof(struct stats_file_v3, fallbacks) ==
		       offsetof(struct shunt_stats_file, fallbacks),
	       "the fields before the reasons are shared");

/* The header of f, whatever its version, into p->hdr; its slots, or NULL
 * when f is not a file this reader takes. */
static const struct shunt_stat_slot *read_header(const void *f, size_t size,
						 struct shunt_proc_snap *p)
{
	const struct shunt_stats_file *n = f;
	size_t hdr;
	if (size < offsetof(struct stats_file_v3, slots) || n->magic != SHUNT_STATS_MAGIC ||
	    n->version < SHUNT_STATS_VERSION_MIN || n->version > SHUNT_STATS_VERSION ||
	    n->slot_size != sizeof(struct shunt_stat_slot))
		return NULL;
	const struct shunt_stat_slot *slots;
	if (n->version >= SHUNT_STATS_VERSION_REASONS64) {
		hdr = offsetof(struct shunt_stats_file, slots);
		if (size < hdr)
			return NULL;
		copy_words(&p->hdr, n, hdr);
		slots = n->slots;
	} else {
		const struct stats_file_v3 *o = f;
		struct stats_file_v3 h;
		hdr = offsetof(struct stats_file_v3, slots);
		copy_words(&h, o, hdr);
		memset(&p->hdr, 0, offsetof(struct shunt_stats_file, slots));
		memcpy(&p->hdr, &h, offsetof(struct stats_file_v3, fallbacks));
		memcpy(p->hdr.fallbacks, h.fallbacks, sizeof h.fallbacks);
		memcpy(p->hdr.closed, h.closed, sizeof h.closed);
		p->hdr.ring_reserved = h.ring_reserved;
		p->hdr.ring_mapped = h.ring_mapped;
		slots = o->slots;
	}
	if ((size - hdr) / sizeof(struct shunt_stat_slot) < p->hdr.nslots)
		return NULL;
	return slots;
}

/* Reads one mapped file into p (p->conns has room for nslots). */
static int read_file(const void *f, size_t size, struct shunt_proc_snap *p, size_t room)
{
	const struct shunt_stat_slot *slots = read_header(f, size, p);
	if (!slots)
		return -1;
	p->hdr.prog[sizeof p->hdr.prog - 1] = 0;
	p->nconns = 0;
	unsigned n = p->hdr.nslots;
	for (unsigned i = 0; i < n && p->nconns < room; i++) {
		if (!__atomic_load_n(&slots[i].used, __ATOMIC_RELAXED))
			continue;
		struct shunt_conn_snap *c = &p->conns[p->nconns];
		if (copy_slot(&slots[i], &c->s)) {
			c->slot = i;
			p->nconns++;
		}
	}
	find_locals(p);
	p->mono_ns = mono_ns();
	return 0;
}

static int by_pid(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

int shunt_stats_scan(const char *rundir, int flags,
		     int (*fn)(const struct shunt_proc_snap *p, void *arg), void *arg,
		     unsigned *removed)
{
	char dir[SHUNT_STATS_DIR_MAX + 4], path[SHUNT_STATS_DIR_MAX + 32];
	if (removed)
		*removed = 0;
	snprintf(dir, sizeof dir, "%s/%s", rundir, shunt_room_dir(SHUNT_ROOM_STATS));
	DIR *d = shunt_rundir_opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -1;
	/* Names first, then files in pid order: stable output. */
	size_t n = 0, cap = 0;
	long *pids = NULL;
	for (struct dirent *de; (de = readdir(d));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end || pid <= 0)
			continue;
		if (n == cap) {
			long *np = realloc(pids, (cap = cap ? cap * 2 : 64) * sizeof *pids);
			if (!np)
				break;
			pids = np;
		}
		pids[n++] = pid;
	}
	closedir(d);
	if (n) /* qsort(NULL, 0) is undefined */
		qsort(pids, n, sizeof *pids, by_pid);

	struct shunt_proc_snap p;
	size_t room = SHUNT_STATS_SLOTS;
	p.conns = malloc(room * sizeof *p.conns);
	if (!p.conns) {
		free(pids);
		errno = ENOMEM;
		return -1;
	}
	int count = 0;
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%ld", dir, pids[i]);
		struct stat st;
		int fd = shunt_rundir_open(path, O_RDONLY, 0, S_IFREG, SHUNT_ANY_OWNER, &st);
		if (fd < 0)
			continue;
		int stale = staleness(fd, &st);
		if (stale > 0 && (flags & SHUNT_SCAN_ENDED))
			stale = 0;
		if (stale != 0) {
			if (stale > 0 && (flags & SHUNT_SCAN_CLEAN) && remove_stale(path, fd, &st) &&
			    removed)
				(*removed)++;
			close(fd);
			continue;
		}
		size_t size = (size_t)st.st_size;
		const struct shunt_stats_file *f =
			size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
		close(fd);
		if (f == MAP_FAILED)
			continue;
		if (f->nslots > room) {
			struct shunt_conn_snap *nc = realloc(p.conns, f->nslots * sizeof *nc);
			if (nc) {
				p.conns = nc;
				room = f->nslots;
			}
		}
		int ok = read_file(f, size, &p, room) == 0;
		munmap((void *)f, size);
		if (ok) {
			count++;
			if (fn(&p, arg))
				break;
		}
	}
	free(p.conns);
	free(pids);
	return count;
}

void shunt_stats_totals(const struct shunt_proc_snap *p,
			struct shunt_stat_sum out[SHUNT_STATS_TRANSPORTS])
{
	memcpy(out, p->hdr.closed, sizeof p->hdr.closed);
	for (unsigned i = 0; i < p->nconns; i++) {
		const struct shunt_stat_slot *s = &p->conns[i].s;
		struct shunt_stat_sum *t = &out[s->transport % SHUNT_STATS_TRANSPORTS];
		t->conns++;
		t->bytes_in += s->bytes_in;
		t->bytes_out += s->bytes_out;
		t->calls_in += s->calls_in;
		t->calls_out += s->calls_out;
	}
}

const char *shunt_stats_reason_name(unsigned reason)
{
	return shunt_reason_name(reason);
}

const char *shunt_stats_transport_name(unsigned transport)
{
	return transport <= SHUNT_TP_KERNEL ? shunt_transport_name((enum shunt_transport)transport)
					    : "?";
}

const char *shunt_stats_role_name(unsigned role)
{
	return role <= SHUNT_ROLE_SERVER ? shunt_role_name((enum shunt_role)role) : "?";
}

void shunt_stats_format_addr(const uint8_t a[16], uint16_t port, char *buf, size_t len)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	char ip[INET6_ADDRSTRLEN];
	if (!memcmp(a, mapped, sizeof mapped)) {
		inet_ntop(AF_INET, a + 12, ip, sizeof ip);
		snprintf(buf, len, "%s:%u", ip, port);
	} else {
		inet_ntop(AF_INET6, a, ip, sizeof ip);
		snprintf(buf, len, "[%s]:%u", ip, port);
	}
}
