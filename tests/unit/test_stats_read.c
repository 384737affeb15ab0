/* The stats reader (core/shunt_stats_read.c) on files made here the way
 * libshunt.so makes them, and the rundir location rules
 * (config/shunt_rundir_path.c). */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "config/shunt_config.h"
#include "config/shunt_rundir_path.h"
#include "core/shunt_reason.h"
#include "core/shunt_stats_read.h"

#define NSLOTS 16u
#define BYTES (sizeof(struct shunt_stats_file) + NSLOTS * sizeof(struct shunt_stat_slot))

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/shunt-unit-stats.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	char s[300];
	snprintf(s, sizeof s, "%s/s", dir);
	cr_assert_eq(mkdir(s, 0700), 0);
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* A file for pid, mapped; *fd holds LOCK_SH when lock (a live owner). */
static struct shunt_stats_file *make(int pid, int lock, int *fd, uint32_t version)
{
	char path[300];
	snprintf(path, sizeof path, "%s/s/%d", dir, pid);
	*fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(*fd, 0);
	cr_assert_eq(ftruncate(*fd, BYTES), 0);
	if (lock)
		cr_assert_eq(flock(*fd, LOCK_SH), 0);
	struct shunt_stats_file *f = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	cr_assert_neq(f, MAP_FAILED);
	f->version = version;
	f->pid = pid;
	snprintf(f->prog, sizeof f->prog, "prog%d", pid);
	f->nslots = NSLOTS;
	f->slot_size = sizeof(struct shunt_stat_slot);
	f->magic = SHUNT_STATS_MAGIC;
	return f;
}

/* Versions 2 and 3 (libraries before version 4): 32 reasons, the slots
 * at 576; what a file of theirs holds where they put it. */
struct v3_tail {
	uint64_t fallbacks[32];
	struct shunt_stat_sum closed[SHUNT_STATS_TRANSPORTS];
	uint64_t ring_reserved, ring_mapped;
};

static struct v3_tail *v3_tail(struct shunt_stats_file *f)
{
	return (struct v3_tail *)((char *)f + offsetof(struct shunt_stats_file, fallbacks));
}

static struct shunt_stat_slot *slot_of(struct shunt_stats_file *f, unsigned i)
{
	if (f->version >= SHUNT_STATS_VERSION_REASONS64)
		return &f->slots[i];
	return (struct shunt_stat_slot *)((char *)f + 576) + i;
}

static void conn(struct shunt_stats_file *f, unsigned i, int tp, int reason, uint64_t in,
		 uint64_t out)
{
	struct shunt_stat_slot *s = slot_of(f, i);
	s->used = 1;
	s->gen = 2;
	s->fd = 10 + (int)i;
	s->transport = (uint8_t)tp;
	s->reason = (uint8_t)reason;
	s->local[10] = s->local[11] = 0xff;
	s->local[12] = 127;
	s->local[15] = 1;
	s->lport = 1000 + (uint16_t)i;
	s->bytes_in = in;
	s->bytes_out = out;
	s->calls_in = 1;
	s->calls_out = 2;
}

struct seen {
	int n;
	int pid[8];
	int rings[8]; /* shunt_stats_has_rings */
	uint64_t reserved[8], mapped[8];
	unsigned nconns[8];
	struct shunt_conn_snap c[8][4];
	struct shunt_stat_sum tot[8][SHUNT_STATS_TRANSPORTS];
	char prog[8][64];
};

static int collect(const struct shunt_proc_snap *p, void *arg)
{
	struct seen *s = arg;
	int k = s->n++;
	s->pid[k] = p->hdr.pid;
	s->rings[k] = shunt_stats_has_rings(p);
	s->reserved[k] = p->hdr.ring_reserved;
	s->mapped[k] = p->hdr.ring_mapped;
	s->nconns[k] = p->nconns;
	for (unsigned i = 0; i < p->nconns && i < 4; i++)
		s->c[k][i] = p->conns[i];
	shunt_stats_totals(p, s->tot[k]);
	snprintf(s->prog[k], sizeof s->prog[k], "%s", p->hdr.prog);
	return 0;
}

static int exists(int pid)
{
	char path[300];
	snprintf(path, sizeof path, "%s/s/%d", dir, pid);
	return access(path, F_OK) == 0;
}

TestSuite(stats_read, .init = setup, .fini = teardown);

Test(stats_read, live_files_in_pid_order_with_their_open_connections)
{
	int fa, fb;
	struct shunt_stats_file *b = make(300, 1, &fb, SHUNT_STATS_VERSION);
	struct shunt_stats_file *a = make(20, 1, &fa, SHUNT_STATS_VERSION);
	conn(a, 3, SHUNT_TP_SHM, SHUNT_R_NONE, 100, 200);
	conn(a, 7, SHUNT_TP_KERNEL, SHUNT_R_RULE_KERNEL, 5, 6);
	a->closed[SHUNT_TP_SHM].conns = 2;
	a->closed[SHUNT_TP_SHM].bytes_in = 1000;
	conn(b, 0, SHUNT_TP_SHM, SHUNT_R_NONE, 1, 1);
	b->slots[0].gen = 3; /* being changed: not shown */
	struct seen s = {0};
	unsigned removed = 9;
	cr_assert_eq(shunt_stats_scan(dir, SHUNT_SCAN_CLEAN, collect, &s, &removed), 2);
	cr_assert_eq(removed, 0);
	cr_assert_eq(s.pid[0], 20);
	cr_assert_eq(s.pid[1], 300);
	cr_assert_str_eq(s.prog[0], "prog20");
	cr_assert_eq(s.nconns[0], 2);
	cr_assert_eq(s.c[0][0].slot, 3);
	cr_assert_eq(s.c[0][0].s.bytes_out, 200);
	cr_assert_eq(s.c[0][1].slot, 7);
	cr_assert_eq(s.c[0][1].s.reason, SHUNT_R_RULE_KERNEL);
	cr_assert_eq(s.nconns[1], 0);
	/* Totals: closed plus open, by transport. */
	cr_assert_eq(s.tot[0][SHUNT_TP_SHM].conns, 3);
	cr_assert_eq(s.tot[0][SHUNT_TP_SHM].bytes_in, 1100);
	cr_assert_eq(s.tot[0][SHUNT_TP_KERNEL].conns, 1);
	cr_assert_eq(s.tot[0][SHUNT_TP_KERNEL].bytes_out, 6);
	char addr[64];
	shunt_stats_format_addr(s.c[0][0].s.local, s.c[0][0].s.lport, addr, sizeof addr);
	cr_assert_str_eq(addr, "127.0.0.1:1003");
	close(fa);
	close(fb);
}

Test(stats_read, stale_files_are_skipped_and_removed_only_when_asked)
{
	int fa, fb, fc;
	make(41, 0, &fa, SHUNT_STATS_VERSION);  /* owner died: stale */
	make(42, 0, &fb, 1);                    /* an older layout, owner died */
	make(43, 1, &fc, 1);                    /* an older layout, alive: kept */
	close(fa);
	close(fb);
	struct seen s = {0};
	unsigned removed = 0;
	cr_assert_eq(shunt_stats_scan(dir, 0, collect, &s, &removed), 0);
	cr_assert_eq(removed, 0);
	cr_assert(exists(41) && exists(42) && exists(43));
	cr_assert_eq(shunt_stats_scan(dir, SHUNT_SCAN_CLEAN, collect, &s, &removed), 0);
	cr_assert_eq(removed, 2);
	cr_assert(!exists(41) && !exists(42) && exists(43));
	close(fc);
}

Test(stats_read, ring_memory_and_the_versions_read)
{
	int fa, fb, fc, fd;
	struct shunt_stats_file *a = make(51, 1, &fa, SHUNT_STATS_VERSION);
	a->ring_reserved = 3 * (4096 + 2 * 65536);
	a->ring_mapped = 7;
	/* Version 2: the layout of 3 without the ring figures (its padding,
	 * never written). */
	struct shunt_stats_file *b = make(52, 1, &fb, 2);
	conn(b, 1, SHUNT_TP_SHM, SHUNT_R_NONE, 9, 8);
	make(53, 1, &fc, SHUNT_STATS_VERSION + 1); /* newer than this reader */
	make(54, 1, &fd, 1);
	struct seen s = {0};
	cr_assert_eq(shunt_stats_scan(dir, 0, collect, &s, NULL), 2);
	cr_assert_eq(s.pid[0], 51);
	cr_assert(s.rings[0]);
	cr_assert_eq(s.reserved[0], 3 * (4096 + 2 * 65536));
	cr_assert_eq(s.mapped[0], 7);
	cr_assert_eq(s.pid[1], 52);
	cr_assert(!s.rings[1]);
	cr_assert_eq(s.nconns[1], 1);
	cr_assert_eq(s.c[1][0].s.bytes_in, 9);
	close(fa);
	close(fb);
	close(fc);
	close(fd);
}

static int grab(const struct shunt_proc_snap *p, void *arg)
{
	struct shunt_proc_snap *out = arg;
	out[p->hdr.pid == 62] = *p;
	out[p->hdr.pid == 62].conns = NULL;
	return 0;
}

Test(stats_read, version_3_files_and_reasons_past_32)
{
	int fa, fb;
	/* A library of version 3 still running: its reasons, closed totals and
	 * ring figures where it put them, a connection in its slots. */
	struct shunt_stats_file *a = make(61, 1, &fa, 3);
	v3_tail(a)->fallbacks[5] = 2;
	v3_tail(a)->closed[SHUNT_TP_SHM].conns = 4;
	v3_tail(a)->ring_reserved = 11;
	v3_tail(a)->ring_mapped = 12;
	conn(a, 2, SHUNT_TP_KERNEL, 5, 7, 6);
	/* This version: a reason numbered past 32 is counted. */
	struct shunt_stats_file *b = make(62, 1, &fb, SHUNT_STATS_VERSION);
	b->fallbacks[40] = 3;
	b->closed[SHUNT_TP_SHM].conns = 9;
	struct shunt_proc_snap got[2];
	memset(got, 0, sizeof got);
	cr_assert_eq(shunt_stats_scan(dir, 0, grab, got, NULL), 2);
	cr_assert_eq(got[0].hdr.pid, 61);
	cr_assert_eq(got[0].hdr.fallbacks[5], 2);
	cr_assert_eq(got[0].hdr.fallbacks[32], 0);
	cr_assert_eq(got[0].hdr.closed[SHUNT_TP_SHM].conns, 4);
	cr_assert_eq(got[0].hdr.ring_reserved, 11);
	cr_assert_eq(got[0].hdr.ring_mapped, 12);
	cr_assert_eq(got[0].nconns, 1);
	cr_assert_eq(got[1].hdr.pid, 62);
	cr_assert_eq(got[1].hdr.fallbacks[40], 3);
	cr_assert_eq(got[1].hdr.closed[SHUNT_TP_SHM].conns, 9);
	close(fa);
	close(fb);
}

Test(stats_read, a_file_in_creation_is_left_alone)
{
	/* Created, not locked yet, no magic: a process is making it. */
	char path[300];
	snprintf(path, sizeof path, "%s/s/77", dir);
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, BYTES), 0);
	struct seen s = {0};
	unsigned removed = 0;
	cr_assert_eq(shunt_stats_scan(dir, SHUNT_SCAN_CLEAN, collect, &s, &removed), 0);
	cr_assert_eq(removed, 0);
	cr_assert(exists(77));
	/* Long abandoned (no header after the grace time): stale. */
	struct timeval old[2] = {{time(NULL) - 60, 0}, {time(NULL) - 60, 0}};
	cr_assert_eq(utimes(path, old), 0);
	cr_assert_eq(shunt_stats_scan(dir, SHUNT_SCAN_CLEAN, collect, &s, &removed), 0);
	cr_assert_eq(removed, 1);
	cr_assert(!exists(77));
	close(fd);
}

Test(stats_read, missing_stats_directory_is_no_process)
{
	char other[300];
	snprintf(other, sizeof other, "%s/none", dir);
	struct seen s = {0};
	cr_assert_eq(shunt_stats_scan(other, SHUNT_SCAN_CLEAN, collect, &s, NULL), 0);
}

Test(stats_read, names)
{
	cr_assert_str_eq(shunt_stats_transport_name(SHUNT_TP_SHM), "shm");
	cr_assert_str_eq(shunt_stats_transport_name(SHUNT_TP_FABRIC), "fabric");
	cr_assert_str_eq(shunt_stats_transport_name(SHUNT_TP_KERNEL), "kernel");
	cr_assert_str_eq(shunt_stats_transport_name(9), "?");
	cr_assert_str_eq(shunt_stats_reason_name(SHUNT_R_NO_PEER_SHIM), "no-peer-shim");
	cr_assert_str_eq(shunt_stats_reason_name(200), "?");
	uint8_t v6[16] = {0};
	v6[15] = 1;
	char addr[64];
	shunt_stats_format_addr(v6, 80, addr, sizeof addr);
	cr_assert_str_eq(addr, "[::1]:80");
}

Test(rundir_path, candidates_follow_the_library_rules)
{
	char c[SHUNT_RUNDIR_CANDIDATES][SHUNT_RUNDIR_MAX + 1];
	cr_assert_eq(shunt_rundir_candidates("/srv/rd", 0, 1, c), 1);
	cr_assert_str_eq(c[0], "/srv/rd");
	cr_assert_eq(shunt_rundir_candidates("", 0, 1, c), 3);
	cr_assert_str_eq(c[0], "/run/shunt");
	cr_assert_str_eq(c[1], "/dev/shm/shunt-0");
	cr_assert_str_eq(c[2], "/tmp/shunt-0");
	cr_assert_eq(shunt_rundir_candidates(NULL, 0, 0, c), 2);
	cr_assert_str_eq(c[0], "/dev/shm/shunt-0");
	cr_assert_eq(shunt_rundir_candidates(NULL, 1000, 1, c), 2);
	cr_assert_str_eq(c[0], "/dev/shm/shunt-1000");
	cr_assert_str_eq(c[1], "/tmp/shunt-1000");
	char longp[SHUNT_RUNDIR_MAX + 2];
	memset(longp, 'a', sizeof longp - 1);
	longp[0] = '/';
	longp[sizeof longp - 1] = 0;
	cr_assert_eq(shunt_rundir_candidates(longp, 0, 1, c), 0);
	struct stat st = {.st_mode = S_IFDIR | 0700, .st_uid = 5};
	cr_assert(shunt_rundir_acceptable(&st, 5, 0));
	cr_assert(!shunt_rundir_acceptable(&st, 6, 0));
	st.st_mode = S_IFDIR | 0777;
	cr_assert(!shunt_rundir_acceptable(&st, 5, 1));
	/* Group-writable: a shared rundir's, never a private one's. */
	st.st_mode = S_IFDIR | 02770;
	cr_assert(shunt_rundir_acceptable(&st, 5, 1));
	cr_assert(!shunt_rundir_acceptable(&st, 5, 0));
	cr_assert_str_eq(shunt_rundir_refusal(&st, 5, 0),
			 "writable by its group, and shm_group is not set");
	st.st_mode = S_IFREG | 0700;
	cr_assert(!shunt_rundir_acceptable(&st, 5, 1));
}
