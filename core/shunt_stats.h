/* Per-process connection counters in shared memory, for `shunt stat`.
 *
 * Each process that makes a decision creates <rundir>/s/<pid>: a header
 * (program, decisions by transport, fallbacks by reason, totals of closed
 * connections) and a table of slots, one per open connection.  Only the owning process writes its file,
 * and each connection end writes only its own slot, so counting costs no
 * system call and shares no cache line with the peer.  Readers (shunt stat)
 * map the file read-only; the process holds flock(LOCK_SH) on it for its
 * life, so a reader that can take LOCK_EX knows the file is stale (the
 * magic is written after the lock is taken: a file without it may be in
 * creation).  A slot's gen is odd while the owner opens or demotes it and
 * while it is free; a reader copies the slot between two equal, even,
 * non-zero reads of gen (a seqlock), each counter with one atomic load.
 * shunt_stats_read.c is the reader.
 *
 * Version 3 added the ring memory fields in what was padding before the
 * slots: a version-2 file has the same layout, with them 0.  Version 4
 * counts 64 fallback reasons (32 before: the reason codes outgrew them),
 * so its slots start further on; the reader takes both layouts
 * (shunt_stats_read.c). */
#ifndef SHUNT_STATS_H
#define SHUNT_STATS_H

#include <stdint.h>
#include <sys/socket.h>

#define SHUNT_STATS_MAGIC 0x54415453u /* "STAT" */
#define SHUNT_STATS_VERSION 4u
#define SHUNT_STATS_VERSION_MIN 2u /* the oldest a reader takes */
#define SHUNT_STATS_VERSION_RINGS 3u /* the first with ring_reserved, ring_mapped */
#define SHUNT_STATS_VERSION_REASONS64 4u /* the first with 64 reasons */
#define SHUNT_STATS_SLOTS 4096u
#define SHUNT_STATS_REASONS 64u
#define SHUNT_STATS_TRANSPORTS 4u /* indexed by enum shunt_transport */

struct shunt_stat_slot {
	uint32_t used;       /* 0 free, 1 in use; CAS by the owner */
	uint32_t gen;        /* odd while the owner changes what the slot is
				(open, demotion) and while it is free;
				0 never used.  Readers take even, non-0. */
	int32_t fd;
	uint8_t transport;   /* enum shunt_transport of the path taken */
	uint8_t role;        /* enum shunt_role */
	uint8_t reason;      /* enum shunt_reason when on the kernel path */
	uint8_t state;       /* 0 open, 1 demoted */
	uint16_t lport, pport;
	uint8_t local[16], peer[16]; /* IPv4 as mapped IPv6 */
	uint64_t opened_ns;  /* CLOCK_REALTIME */
	uint64_t bytes_in, bytes_out;
	uint64_t calls_in, calls_out;
	uint64_t spin_hits;  /* waits that ended while spinning */
	uint64_t sleeps;     /* waits that went to sleep in the kernel */
	/* shm single copy (shm_cma.c): bytes of bytes_in a peer wrote into
	 * this end's buffer, bytes of bytes_out this end wrote into the
	 * peer's.  In what was padding (version 3 files without them read
	 * 0). */
	uint64_t cma_in, cma_out;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct shunt_stat_slot) == 128, "a slot keeps its size");

struct shunt_stats_file {
	uint32_t magic, version;
	int32_t pid;
	uint32_t uid;
	char prog[64];
	uint64_t start_ns;                        /* CLOCK_REALTIME */
	uint32_t nslots, slot_size;
	uint64_t conns[SHUNT_STATS_TRANSPORTS];   /* decided, by enum shunt_transport */
	uint64_t fallbacks[SHUNT_STATS_REASONS];  /* kernel path, by reason */
	/* Connections closed so far, by the transport they ended on, and what
	 * they moved: with the open slots, the process's totals. */
	struct shunt_stat_sum {
		uint64_t conns, bytes_in, bytes_out, calls_in, calls_out;
	} closed[SHUNT_STATS_TRANSPORTS];
	/* Shared memory the process holds for rings now (shm_arena.c), in
	 * bytes.  ring_reserved: slots of the arenas it made, reserved in
	 * the rundir's filesystem (what counts against a container's
	 * /dev/shm); ring_mapped: other processes' arenas mapped here (their
	 * makers count what they reserved). */
	uint64_t ring_reserved, ring_mapped;
	struct shunt_stat_slot slots[] __attribute__((aligned(64)));
};
_Static_assert(__builtin_offsetof(struct shunt_stats_file, slots) == 832,
	       "the slots moved: a new layout needs a new version and a reader of both");

/* Counters are written by their own process only: relaxed single-copy
 * updates, no locked instruction on the data path.  Two threads racing on
 * one connection may lose a count, never corrupt one. */
static inline void shunt_stat_add(uint64_t *p, uint64_t n)
{
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* A slot for a connection just decided, or a process-private dummy when no
 * stats file can be had (counters then go nowhere).  Never NULL.  local16
 * and lport: the local address when the transport knows it (NULL: asked
 * of the socket, for an accelerated connection only). */
struct shunt_stat_slot *shunt_stats_open(int fd, int role, int transport, int reason,
					 const struct sockaddr *peer, socklen_t plen,
					 const uint8_t *local16, uint16_t lport);
/* The connection is closed: its counters join the header's closed totals
 * and the slot is free.  A slot of another process (inherited by fork and
 * not re-homed) is left alone. */
void shunt_stats_close(struct shunt_stat_slot *s);
/* A demoted connection: the slot now says kernel, with the reason. */
void shunt_stats_demoted(struct shunt_stat_slot *s, int reason);
/* In a child after fork: the parent's file and its lock stay the parent's;
 * the child gets its own file when it needs one. */
void shunt_stats_after_fork_child(void);
/* At exit, with log=info: one line with what this program image did. */
void shunt_stats_summary(void);
/* Make this process's file now (before a set*id call that may take the
 * rundir out of reach: the file, once open, stays writable). */
void shunt_stats_prepare(void);
/* A connection inherited from the parent: a slot in this process's file with
 * the same identity and counters from zero (the parent keeps its slot). */
struct shunt_stat_slot *shunt_stats_inherit(struct shunt_stat_slot *parent);

/* The ring memory this process holds now (after a transport's arena was
 * made, reserved, mapped or unmapped: not on a data path), published in
 * the header if the file exists.  Callers serialise their calls. */
void shunt_stats_rings(uint64_t reserved, uint64_t mapped);
/* Set once by the transport that keeps ring memory: publish() calls
 * shunt_stats_rings with the current figures, for a file just made (a new
 * process's, or a child's after fork). */
void shunt_stats_rings_hook(void (*publish)(void));

#endif
