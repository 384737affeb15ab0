/* Per-process connection counters in shared memory, for `shunt stat`.
 *
 * Each process that makes a decision creates <rundir>/s/<pid>: a header
 * (program, totals by transport and by fallback reason) and a table of
 * slots, one per open connection.  Only the owning process writes its file,
 * and each connection end writes only its own slot, so counting costs no
 * system call and shares no cache line with the peer.  Readers (shunt stat)
 * map the file read-only; the process holds flock(LOCK_SH) on it for its
 * life, so a reader that can take LOCK_EX knows the file is stale. */
#ifndef SHUNT_STATS_H
#define SHUNT_STATS_H

#include <stdint.h>
#include <sys/socket.h>

#define SHUNT_STATS_MAGIC 0x54415453u /* "STAT" */
#define SHUNT_STATS_VERSION 1u
#define SHUNT_STATS_SLOTS 4096u
#define SHUNT_STATS_REASONS 32u

struct shunt_stat_slot {
	uint32_t used;       /* 0 free, 1 in use; CAS by the owner */
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
} __attribute__((aligned(64)));

struct shunt_stats_file {
	uint32_t magic, version;
	int32_t pid;
	uint32_t uid;
	char prog[64];
	uint64_t start_ns;                        /* CLOCK_REALTIME */
	uint32_t nslots, slot_size;
	uint64_t conns[4];                        /* decided, by enum shunt_transport */
	uint64_t fallbacks[SHUNT_STATS_REASONS];  /* kernel path, by reason */
	struct shunt_stat_slot slots[] __attribute__((aligned(64)));
};

/* A slot for a connection just decided, or a process-private dummy when no
 * stats file can be had (counters then go nowhere).  Never NULL. */
struct shunt_stat_slot *shunt_stats_open(int fd, int role, int transport, int reason,
					 const struct sockaddr *peer, socklen_t plen);
void shunt_stats_close(struct shunt_stat_slot *s);
/* A demoted connection: the slot now says kernel, with the reason. */
void shunt_stats_demoted(struct shunt_stat_slot *s, int reason);

#endif
