/* Internals shared by the files of the shm transport. */
#ifndef SHM_INTERNAL_H
#define SHM_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "core/shunt_bulk.h"
#include "core/shunt_conn.h"
#include "core/shunt_rundir.h"
#include "core/shunt_rundir_open.h"
#include "shm_proto.h"

/* ---- shm_files.c: the transport's files in <rundir>/o -------------------- */

/* <rundir>/o/<key><suffix> into buf: 0, or -1 when it does not fit. */
int shm_path(char *buf, size_t len, const char *key, const char *suffix);
/* <rundir>/o/<name>, len bytes shared by every process of the rundir,
 * mapped once per process (made and reserved by the first): NULL when it
 * cannot be (then, or while another thread maps it). */
void *shm_map_once(struct shunt_map_once *m, const char *name, size_t len);
/* The arena file name in the rundir, opened read-write (no checks). */
int shm_arena_open(const char *name);
/* 1 when a file owned by uid:gid may be trusted as an offer from a peer:
 * our own uid, or with shm_group a file of the group (see
 * shunt_rundir_group).  Otherwise the connection falls back: peer-cred. */
int shm_offer_uid_ok(uid_t uid, gid_t gid);
/* Files and sockets shunt makes in the rundir: private to the user, or with
 * shm_group readable and writable by the group (the umask would narrow the
 * mode given at creation, so it is set again by descriptor or path). */
void shm_share_fd(int fd);
void shm_share_path(const char *path);

/* One connection end's hold on its slot of ring memory (shm_arena.c). */
struct shm_slot {
	struct shm_hdr *hdr;
	uint64_t len;             /* SHM_HDR_SIZE + 2 rings */
	int lockfd;               /* this process's description of the arena,
				     its tag published there (or, own_fd, one
				     of this end's own); asks about the peer */
	int own_fd;               /* lockfd is this end's: closed with it */
	int fork_fd;              /* before a fork: the child's own lock */
	uint32_t tag;             /* this process's tag (ring locks, the
				     slot's hold), published on lockfd */
	unsigned slot;
	uint8_t side;             /* enum shm_side of this end */
	uint8_t held;             /* the header names this end's tag (the
				     client's ctag, the server's claim) */
	uint8_t by_lock;          /* a forked child's end: it holds the slot
				     by an OFD lock on lockfd instead */
	struct shm_arena *arena;  /* the mapping it lives in, kept across
				     connections; NULL with map set when it
				     could not be kept */
	void *map;
	size_t map_len;
};

/* Client: a slot no end anywhere still holds, held, its header zeroed but
 * for use and ctag; target ("<arena>:<slot>:<ring>:<inode>") is what the
 * offer names.  -1 if none can be had. */
int shm_arena_alloc(uint64_t ring, struct shm_slot *s, char *target, size_t tlen);
/* Server: map the slot an offer's target names (not held yet: see
 * shm_arena_claim); its file checked (owner, size).  sock: the accepted connection (-1: none), which a process
 * that dropped privileges shows its broker.  -1 with *why when it cannot be. */
int shm_arena_attach(const char *target, int sock, struct shm_slot *s,
		     enum shunt_reason *why);

/* ---- shm_broker.c: arenas for processes that dropped privileges --------- */

/* listen() ran in this process: a root one starts a broker at its first
 * fork. */
void shm_broker_listened(void);
/* The transport's fork and setid ops (core/shunt_transport.h). */
void shm_broker_fork(int phase);
int shm_broker_setid(int phase);
/* 1 when this process lost the rundir and opens offers through a broker. */
int shm_broker_active(void);
/* The arena target names, for the accepted connection on sock, from the
 * broker: an fd (checked there: owner, 4-tuple), or -1 with *why. */
int shm_broker_open(const char *target, int sock, enum shunt_reason *why);
/* Server: hold the attached slot, if its use is still use (read before
 * the header was checked): 1, or 0 when the owner handed it out again. */
int shm_arena_claim(struct shm_slot *s, uint64_t use);
/* Let go of a slot (last: after it the owner may reuse it). */
void shm_arena_release(struct shm_slot *s);
/* 1 while an end of side holds the slot (the peer lives, in whatever
 * process or PID namespace), 0 when none does (it is gone). */
int shm_arena_side_held(const struct shm_slot *s, int side);
/* shm_lock_owner.alive for an end on slot arg: 0 only when no process
 * holds a description of the arena with tag published (the holder of a
 * ring lock that stays held is gone). */
int shm_arena_tag_alive(void *arg, uint32_t tag);
/* Before a fork: a lock on the slot through a description of this end's
 * own, for the child.  0, or -1 (the child then shares the parent's). */
int shm_arena_fork(struct shm_slot *s);
/* After the fork: the child takes that lock as its own, the parent drops
 * its copy of the description. */
void shm_arena_forked(struct shm_slot *s, int child);
/* At exit: remove the names of the arenas this process owns. */
void shm_arena_exit(void);

/* An accelerated connection, one end's private view. */
struct shm_conn {
	struct shunt_conn base;
	struct shm_hdr *hdr;
	struct shm_slot slot;
	int side;                 /* enum shm_side */
	/* Bound datagram sockets the peer wakes us through, one per role so
	 * a reader thread never drains a wakeup meant for a writer thread:
	 * [SHM_WAKE_RX] data arrived (or the state moved), [SHM_WAKE_TX]
	 * space freed.  TX is bound on first need. */
	int wake[2];
	uint64_t wake_id[2];      /* their ids, when abstract */
	int wake_abs;             /* both ends' wake sockets are in the abstract
				     namespace (shm_wake_abstract), else named
				     in o/; decided once, with the tuple */
	struct sockaddr_un peer[2]; /* the peer's names, same roles (named) */
	socklen_t peer_len[2];
	struct shm_ring tx, rx;
	struct shunt_bulk bulk;   /* the copy bulk sends use (core/shunt_bulk.h) */
	struct shm_lock_owner lk; /* how this end takes its ring locks */
	int8_t cma_ok;            /* single copy (shm_cma.c): 1 possible, -1
				     not, 0 not asked yet */
	uint8_t cma_tx_off;       /* the kernel refused this end's copies */
	uint8_t cma_posted;       /* a read of this process posted its buffer */
	uint8_t cma_said;         /* bits 1 in, 2 out: the first single copy
				     of this end was logged */
	uint64_t cma_in, cma_out; /* bytes moved so, by this process */
	int demoted;              /* this end has replayed: it moves bytes over TCP */
	/* What the socket brought while our replay waited for room: the
	 * peer's replay, read so that two ends replaying at once never wait
	 * on each other (shm_demote.c).  Served before the socket's bytes;
	 * the connection stays on these ops until it is drained. */
	char *stash;
	size_t stash_len, stash_off, stash_cap;
	int why;                  /* enum shunt_reason of the demotion */
	int committed;            /* the state was seen COMMITTED */
	int forked;               /* shared with a child: keep the wake name */
	int wake_at_closed;       /* close() hints and wakes after the FIN */
	int pending;              /* client: the announced bucket, until the
				     offer is named (-1: none) */
	int named;                /* client: 1 named in the table, 2 by a
				     symlink in o/ (shm_names.c) */
	char key[96];
	char target[96];          /* client: what the offer names */
};

/* The tables of an shm end: its life (shm_conn.c), data and waits
 * (shm_data.c), and all three with the transport (shm_offer.c). */
extern const struct shunt_conn_life_ops shm_life_ops;
extern const struct shunt_conn_data_ops shm_data_ops;
extern const struct shunt_conn_wait_ops shm_wait_ops;
extern const struct shunt_conn_ops shm_conn_ops;

enum { SHM_WAKE_RX = 0, SHM_WAKE_TX = 1 };

/* ---- shm_conn.c: the object ------------------------------------------------ */

/* A connection end with ops (shm_conn_ops) on slot (which it takes over),
 * with rings of ring bytes (the size this end chose or checked, never
 * re-read from the header), or NULL. */
struct shm_conn *shm_conn_new(const struct shunt_conn_ops *ops, const struct shm_slot *slot,
			      int side, uint64_t ring);
/* Point c's header and rings at h (side's view): for a connection object,
 * or a stack view that only wakes the peer (a refusal). */
void shm_conn_view(struct shm_conn *c, struct shm_hdr *h, int side, uint64_t ring);
/* Release everything c holds and recycle it. */
void shm_conn_free(struct shm_conn *c);

/* ---- shm_cma.c: single copy for large transfers --------------------------- */

/* Reader, about to wait in a read of len bytes into buf with the ring
 * empty: post the buffer (1), or not (0: too small, not possible here,
 * another read's post outstanding).  After a post the wait, however it
 * ends, is followed by shm_cma_settle(c, *cancel_state). */
int shm_cma_post(struct shm_conn *c, void *buf, size_t len, int *cancel_state);
/* Reader: take the post back; the bytes a writer copied into the buffer
 * (0: none, read the ring; *fault: none because the buffer is not all
 * mapped, and the read fails with EFAULT).  Keeps errno. */
size_t shm_cma_settle(struct shm_conn *c, int cancel_state, int *fault);
/* The connection's last close here: what went by single copy, logged. */
void shm_cma_close(struct shm_conn *c);
/* Reader: a writer finished with the post (its wait may end). */
int shm_cma_done(struct shm_conn *c);
/* Writer: copy up to the iovecs' length into the reader's posted buffer,
 * when there is one and the ring is empty: the bytes moved (0: none; the
 * ring takes them). */
size_t shm_cma_push(struct shm_conn *c, const struct iovec *v, size_t k);

/* ---- shm_wake.c: wake sockets --------------------------------------------- */

/* Wake the peer's poll/epoll waiters of one role: one datagram per sleep. */
void shm_wake_role(struct shm_conn *c, int role);
/* shm_wake_data and shm_wake_space when a count says someone waits. */
void shm_wake_data_slow(struct shm_conn *c);
void shm_wake_space_slow(struct shm_conn *c);
/* This end published data on its tx ring and then made a full fence
 * (shm_unlock_fence): wake the peer's readers that sleep, if any.  Inline:
 * after every write, and nobody sleeps while the ends exchange. */
static inline void shm_wake_data(struct shm_conn *c)
{
	const struct shm_ring_ctl *t = c->tx.ctl;
	if (__atomic_load_n(&t->reader_sleep, __ATOMIC_RELAXED) |
	    __atomic_load_n(&t->reader_fd, __ATOMIC_RELAXED))
		shm_wake_data_slow(c);
}
/* This end freed space in its rx ring and then made a full fence
 * (shm_unlock_fence): wake the peer's writers that sleep, if any. */
static inline void shm_wake_space(struct shm_conn *c)
{
	const struct shm_ring_ctl *r = c->rx.ctl;
	if (__atomic_load_n(&r->writer_sleep, __ATOMIC_RELAXED) |
	    __atomic_load_n(&r->writer_fd, __ATOMIC_RELAXED))
		shm_wake_space_slow(c);
}
/* The state moved: wake every sleeper of the peer. */
void shm_wake_peer(struct shm_conn *c);
/* The process's socket for sending wakeups. */
int shm_wake_sender(void);
/* Our wake fd for a role, binding it on first use; -1 if it cannot be. */
int shm_wake_fd(struct shm_conn *c, int role);
/* The connection's wake sockets are bound in the abstract namespace (1)
 * or by a name in o/ (0): abstract when its route stays inside one network
 * namespace (a loopback destination, or the client's own address), which
 * the other end can then check against the namespaces in the header. */
int shm_wake_abstract(const struct shunt_tuple *t);
/* The abstract name "\0" SHM_WAKE_ABSTRACT_PREFIX "<16 hex>" of id into
 * a; its length. */
#define SHM_WAKE_ABSTRACT_PREFIX "shunt-w-"
socklen_t shm_wake_abstract_addr(struct sockaddr_un *a, uint64_t id);
/* Decide how c's wake sockets are found (shm_wake_abstract(t)) and, when
 * named, the peer's names (c->key set).  0, or -1 when they do not fit. */
int shm_wake_bind_peer(struct shm_conn *c, const struct shunt_tuple *t);
/* Let go of c's wake sockets (kept for later connections when possible). */
void shm_wake_release(struct shm_conn *c);
/* At exit: remove the names of the sockets this process keeps. */
void shm_wake_exit(void);

/* ---- shm_pending.c: offers announced before the 4-tuple is known ---------- */

/* The bucket of a destination (16-byte address, host-order port). */
int shm_pending_bucket(const uint8_t addr[16], uint16_t port);
/* Client, before connect(): announce an offer to dst.  Its bucket, or -1
 * when none can be announced (then the 4-tuple must be known first). */
int shm_pending_begin(const struct sockaddr *dst);
/* Map the page and open this process's description of it now (before a
 * set*id call that may take the rundir out of reach). */
void shm_pending_prepare(void);
/* The offer announced in bucket b is named, or will never be: wake the
 * accept()s waiting for it.  Nothing for b < 0. */
void shm_pending_end(int b);
/* Bucket b's sequence number: read before looking for an offer. */
uint32_t shm_pending_seq(int b);
/* 1 while some client, in any process, has announced an offer in b. */
int shm_pending_held(int b);
/* Sleep until b's sequence number moves from seq (or timeout_ms, at most
 * a few ms: a client killed mid-connect bumps nothing). */
void shm_pending_sleep(int b, uint32_t seq, int timeout_ms);

/* ---- shm_names.c: where a client names its offer ------------------------- */

/* Client: name the offer for t as target in the rundir's table.  0, or -1
 * (no room where t hashes, no table, a target too long): name it in o/. */
int shm_names_put(const struct shunt_tuple *t, const char *target);
/* Server: take the offer named for t: 1 with target filled (empty when it
 * was not a string that fits), 0 when the table has none. */
int shm_names_take(const struct shunt_tuple *t, char *target, size_t len);
/* Client: forget the name for t with target, never taken. */
void shm_names_drop(const struct shunt_tuple *t, const char *target);
/* 1 when this process has the table (a client without it does not offer:
 * servers look for symlinks only while the table counts some). */
int shm_names_ready(void);
/* A symlink offer was made (+1) or removed (-1). */
void shm_names_link(int delta);
/* 1 when some offer may be named by a symlink (or there is no table). */
int shm_names_links(void);
/* Remove an offer's symlink (and its count, once: only the unlink that
 * succeeds counts).  0, or -1 with errno. */
int shm_names_unlink(const char *path);

/* Remove what dead processes left in <rundir>/o (once per process). */
void shm_sweep(void);

/* ---- shm_demote.c: leaving the rings --------------------------------------- */

/* The demote op: this end asks for TCP (state DEMOTING) and replays; the
 * peer follows when it sees the state.  Unread bytes nobody is left to
 * replay go to a spill. */
void shm_demote(struct shunt_conn *c, enum shunt_reason why);
/* A client closing while its offer looked untaken: shm_demote, the header
 * saying so first (a server that found the offer reports client-closed,
 * not offer-timeout).  0, and nothing done, when a server committed in
 * the meantime: the connection closes as a committed one. */
int shm_withdraw(struct shunt_conn *c);
/* This end's replay, once, after the state left OFFERED/COMMITTED (the peer
 * demoted, or refused the offer): from then on it uses the socket. */
void shm_replay(struct shm_conn *c);
/* Bytes of the stash not yet read. */
static inline size_t shm_stash_left(const struct shm_conn *c)
{
	return c->stash_len - c->stash_off;
}
/* A read of total bytes (m begun by shunt_recv_begin) of a demoted end
 * while its stash holds bytes: from the stash (and, with MSG_WAITALL, then
 * the socket), as the socket would answer; SHM_STASH_GONE when another
 * thread took the last bytes first. */
#define SHM_STASH_GONE (-2)
ssize_t shm_stash_recv(struct shm_conn *c, struct msghdr *m, int flags, size_t total);
/* Readiness of a demoted end with a stash: readable, writable as the socket. */
short shm_stash_poll(struct shm_conn *c, short events);
/* Drop the stash (the connection closes). */
void shm_stash_free(struct shm_conn *c);

/* Data path (shm_data.c). */
ssize_t shm_recvmsg(struct shunt_conn *c, struct msghdr *m, int flags);
ssize_t shm_sendmsg(struct shunt_conn *c, const struct msghdr *m, int flags);
ssize_t shm_recv(struct shunt_conn *c, void *b, size_t n, int flags);
ssize_t shm_send(struct shunt_conn *c, const void *b, size_t n, int flags);
int shm_shutdown(struct shunt_conn *c, int how);
int shm_ioctl(struct shunt_conn *c, unsigned long req, void *arg);
short shm_poll(struct shunt_conn *c, short events);
int shm_arm(struct shunt_conn *c, short events, struct pollfd out[], int *timeout_ms);
void shm_disarm(struct shunt_conn *c, short events, const struct pollfd *fds, int n);
uint64_t shm_progress(struct shunt_conn *c);
const struct shunt_presence *shm_presence(struct shunt_conn *c, struct shunt_presence **mine);
int shm_sleep(struct shunt_conn *c, short ev, int timeout_ms);

#endif
