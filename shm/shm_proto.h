/* The shared-memory connection file: what both processes map.
 *
 *   offset 0           struct shm_hdr (one page)
 *   SHM_HDR_SIZE       client -> server ring data (ring_size bytes)
 *   + ring_size        server -> client ring data
 *
 * It is a slot of one of the client's ring arenas (shm_arena.c), named by
 * the offer <rundir>/o/<key> once the client's connect() has started; the
 * accepting process finds it by the 4-tuple accept() returned, validates it
 * (shm_hdr_check) and commits by CAS on state.  Every field is treated as
 * hostile by the side that did not write it. */
#ifndef SHM_PROTO_H
#define SHM_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config/shunt_config.h"
#include "core/shunt_presence.h"
#include "core/shunt_tuple.h"
#include "shm_ring.h"

#define SHM_MAGIC 0x544e4853u /* "SHNT" */
#define SHM_VERSION 6u /* 3: ring locks hold the holder's tag; 4: wake
				  sockets in the abstract namespace (netns,
				  wake_id); 5: each ring lock on a line of
				  its own; 6: ends hold their slot by their
				  process's tag (use, ctag, fork_locks) */
#define SHM_HDR_SIZE 4096u
#define SHM_MIN_RING SHUNT_RING_MIN
#define SHM_MAX_RING SHUNT_RING_MAX

enum shm_state {
	SHM_OFFERED = 1,   /* client waits; it may already write into c2s */
	SHM_COMMITTED,     /* both ends use the rings */
	SHM_DECLINED,      /* never accelerated: client replays c2s over TCP */
	SHM_DEMOTING,      /* an end asked for TCP: each end resends what the
			      other has not consumed, then uses the socket */
};

enum shm_side { SHM_CLIENT = 0, SHM_SERVER = 1 };

/* A posted buffer's life (struct shm_cma.state, CAS): the reader posts
 * (IDLE -> POSTED) and takes it back (POSTED -> IDLE), or the writer claims
 * it (POSTED -> CLAIMED, under its ring's write lock, with the ring empty),
 * copies, and hands it back (CLAIMED -> DONE, got set); the reader takes
 * what came (DONE -> IDLE).  A claim whose writer died is given up by the
 * reader (CLAIMED -> IDLE, nothing came). */
enum shm_cma_state {
	SHM_CMA_IDLE = 0,
	SHM_CMA_POSTED,
	SHM_CMA_CLAIMED,
	SHM_CMA_DONE,
	SHM_CMA_POSTING, /* a reader fills the fields in */
};

struct shm_cma {
	uint32_t state;     /* enum shm_cma_state */
	uint32_t off;       /* the writer will claim no more (it was refused:
			       EPERM); written by the writer */
	/* Written by the reader before it posts (release on state): */
	int32_t pid;        /* the reader's process, in its PID namespace */
	uint32_t pad;
	uint64_t pidns;     /* that namespace (inode of /proc/self/ns/pid) */
	uint64_t addr, len; /* its buffer */
	/* Written by the writer: */
	uint32_t wtag;      /* the claimer's tag (its ring lock's), before
			       the claim */
	uint32_t fault;     /* the buffer was not all there (EFAULT) */
	uint64_t got;       /* bytes copied into the buffer, before DONE */
};

struct shm_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t ring_size;
	uint64_t file_size;
	uint32_t state;     /* enum shm_state; CAS */
	uint32_t let_go;    /* bit 1 << side: that side's first end (the one
			       whose tag is below) let go of the slot */
	/* An end holds its slot by its process's tag (shm_arena.c): the
	 * client's in ctag, written before the offer is named; the server's
	 * in use's low half, claimed by CAS against the use it read before
	 * checking the header.  use's high half counts the slot's uses: the
	 * owner bumps it by CAS when it hands the slot out again, so a server
	 * that found a stale offer cannot claim the next connection's. */
	uint64_t use;
	uint32_t ctag;
	uint32_t fork_locks; /* bit 1 << side: an end of that side was shared
				with a forked child, which holds the slot by an
				OFD lock on its first byte instead */
	int32_t pid[2];     /* informational */
	uint32_t uid[2];
	uint32_t wake_pending[2][2]; /* [side][role]: a wakeup is on its way
					there; one datagram per sleep is enough */
	/* [side]: that end's network namespace (inode of /proc/self/ns/net,
	 * 0 unknown), written by the client before it names the offer, by the
	 * server before it commits: whether abstract names reach it. */
	uint64_t netns[2];
	/* [side][role]: the random id of that end's wake socket in the
	 * abstract namespace ("\0shunt-w-<16 hex>", shm_wake.c), 0 while it
	 * has none; written before that end counts itself a waiter (release,
	 * the waiter count's increment publishes it).  Used only by a
	 * connection whose wake sockets are abstract (shm_wake_abstract). */
	uint64_t wake_id[2][2];
	struct shunt_tuple tuple;
	/* ring[0]: client -> server; ring[1]: server -> client */
	struct shm_ring_ctl ring[2] __attribute__((aligned(SHM_CACHELINE)));
	/* [side]: where each end is (core/shunt_presence.h), written by that end,
	 * read by the other to decide whether to spin. */
	struct shunt_presence pres[2];
	/* Why the client left an offer no server took (enum shunt_reason;
	 * 0: its deadline passed, or a build that does not say), written
	 * before its CAS OFFERED -> DEMOTING: what a server whose commit
	 * lost that race reports.  Last, so the fields above keep their
	 * places. */
	uint32_t left_why;
	/* Single copy (shm_cma.c), [ring] as ring[]: the buffer a reader of
	 * that ring posts while it waits in a large read, which the ring's
	 * writer may fill with one process_vm_writev.  Last, so the fields
	 * above keep their places; a peer of a build without it leaves it as
	 * the client's zeroed header has it (IDLE: never posted, never
	 * claimed). */
	struct shm_cma cma[2] __attribute__((aligned(SHM_CACHELINE)));
};

_Static_assert(sizeof(struct shm_hdr) <= SHM_HDR_SIZE, "header fits its page");

/* Slots per ring arena.  A process's first arenas are small (most make a
 * few connections); later ones hold more, so a thousand concurrent
 * connections need a few dozen arenas, not hundreds. */
#define SHM_ARENA_SLOTS 64u

/* What an offer names, "a-<pid>-<n>:<slot>:<ring>[:<inode>]" (as
 * shm_arena_alloc writes it), parsed: the arena's name (a safe alphabet,
 * shorter than nlen) into name, the slot below SHM_ARENA_SLOTS, the ring
 * size (a power of two in bounds), the inode (*ino 0 when not given).  0,
 * or -1 for anything else. */
int shm_target_parse(const char *t, char *name, size_t nlen, unsigned *slot, uint64_t *ring,
		     uint64_t *ino);

/* 0 when a mapping of file_size bytes is a valid offer for tuple, with
 * *ring its ring size as read once (use only that copy), else -1.  Reads
 * only within the first SHM_HDR_SIZE bytes. */
int shm_hdr_check(const struct shm_hdr *h, uint64_t file_size,
		  const struct shunt_tuple *tuple, uint64_t *ring);

#endif
