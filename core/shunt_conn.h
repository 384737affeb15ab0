/* A connection on an accelerated path, and its life after the decision
 * (shunt_decide.h).
 *
 *   ACCEL ---- demote: replay, then finish ----> KERNEL + reason
 *     |                                            |
 *     +------ last close: ops->life->close ---+----------+
 *                                       v
 *               last reference: ops->life->free (the object is recycled)
 *
 * The kernel TCP socket exists in every state and is what the application
 * holds: a connection only says who moves the bytes.  Two kinds of
 * connection stand behind an ACCEL fd entry: one on a transport
 * (shunt_transport.h: shm, fabric) and a spill (shunt_spill.h: bytes read
 * from a memfd, on no transport).  Both are a struct shunt_conn with its
 * ops.
 *
 * Leaving an accelerated path, in one vocabulary:
 *   demote  the whole move to TCP, whichever end starts it;
 *   replay  resend over TCP the bytes the peer has not consumed;
 *   finish  hand the fd numbers to the kernel path (shunt_conn_finish);
 *   spill   keep unread bytes nobody is left to replay (shunt_spill.h). */
#ifndef SHUNT_CONN_H
#define SHUNT_CONN_H

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "shunt_core.h"
#include "shunt_waitpolicy.h"
#include "shunt_fdtab.h"
#include "shunt_reason.h"
#include "shunt_refs.h"
#include "shunt_stats.h"

struct shunt_conn;
struct shunt_transport_ops;

/* What a connection does, in three tables by concern, as libfabric splits
 * an endpoint's fi_ops_msg from its fi_ops_cm: its life (close, free,
 * demote, fork), its data (the read and write calls) and its waits
 * (readiness for poll/select/epoll, and a blocking call's sleep).  A
 * transport shows at a glance what it implements; each table is defined
 * in the file of its concern.  The interposed calls use these only for fds
 * whose entry is SHUNT_FD_ACCEL; a call holds a reference for its length
 * (shunt_conn_get), so close() in another thread frees nothing under it. */
struct shunt_conn_life_ops {
	/* The last fd number referring to c in this process is closing (the
	 * socket is still open): say goodbye to the peer.  Calls in flight in
	 * other threads may go on; c->fd is -1 afterwards. */
	void (*close)(struct shunt_conn *c);
	/* After the real close() of that number, when c->after_close was set
	 * for close (NULL: never deferred): what close left for after the FIN,
	 * such as waking a peer asleep on a futex, who only looks at the
	 * socket once woken.  c is still held. */
	void (*closed)(struct shunt_conn *c);
	/* The last reference is gone (no fd number, no call in flight):
	 * release everything.  The object itself must stay readable memory
	 * (recycled, never unmapped): shunt_conn_get() may still touch it. */
	void (*free)(struct shunt_conn *c);
	/* Demote now, nothing lost: on return this end reads and writes the
	 * socket; the caller then finishes.  NULL: nowhere to go (a spill,
	 * whose bytes have no other home). */
	void (*demote)(struct shunt_conn *c, enum shunt_reason why);
	/* The process is about to fork with c open (NULL: nothing to do). */
	void (*fork)(struct shunt_conn *c);
	/* After that fork, in the parent (child 0: also when it failed) and in
	 * the child (child 1).  May be NULL. */
	void (*forked)(struct shunt_conn *c, int child);
};

struct shunt_conn_data_ops {
	/* All read and write calls funnel into these two.  flags has
	 * MSG_DONTWAIT when the call must not block (either cause). */
	ssize_t (*recvmsg)(struct shunt_conn *c, struct msghdr *m, int flags);
	ssize_t (*sendmsg)(struct shunt_conn *c, const struct msghdr *m, int flags);
	/* The same for one buffer (read, recv, write, send: most calls), where
	 * a transport can spare the iovec walk.  May be NULL: recvmsg and
	 * sendmsg then take them. */
	ssize_t (*recv)(struct shunt_conn *c, void *b, size_t n, int flags);
	ssize_t (*send)(struct shunt_conn *c, const void *b, size_t n, int flags);
	/* 0: now shut the socket down too; 1: the FIN waits (bytes may still
	 * have to be replayed before it, see shunt_conn_send_fin); -1: error. */
	int (*shutdown)(struct shunt_conn *c, int how);
	/* FIONREAD, SIOCOUTQ; -1/ENOTTY lets the kernel answer. */
	int (*ioctl)(struct shunt_conn *c, unsigned long req, void *arg);
};

struct shunt_conn_wait_ops {
	/* Readiness, for poll/select/epoll.  poll() answers from user space
	 * without blocking; 0 after it finished the connection means "ask the
	 * kernel".  To sleep, the caller arm()s (up to SHUNT_ARM_MAX kernel
	 * fds whose readiness means "ask poll() again"; *timeout_ms may
	 * shrink), calls poll() once more (the peer may have moved in
	 * between), sleeps in the kernel, then disarm()s with the same events
	 * and the kernel's answer (n = 0: none). */
	short (*poll)(struct shunt_conn *c, short events);
	int (*arm)(struct shunt_conn *c, short events, struct pollfd out[], int *timeout_ms);
	void (*disarm)(struct shunt_conn *c, short events, const struct pollfd *fds, int n);
	/* A counter that moves whenever bytes arrive or space frees: the
	 * edges of EPOLLET. */
	uint64_t (*progress)(struct shunt_conn *c);
	/* Where the two ends are (core/shunt_presence.h): the peer's presence,
	 * with *mine this end's, both in memory the two ends share; NULL when
	 * the transport cannot know (a remote peer: the spin budget alone
	 * decides).  May be NULL. */
	const struct shunt_presence *(*presence)(struct shunt_conn *c,
						 struct shunt_presence **mine);
	/* A blocking call's sleep without arming fds (a futex): sleep until
	 * poll() may say ev, the peer moves, or timeout_ms passes.  0 to look
	 * again (woken, or the time ran out and something may have
	 * happened), SHUNT_SLEEP_AGAIN (the time ran out, nothing happened),
	 * -1 with errno (EINTR), or SHUNT_SLEEP_ARM when only armed fds can
	 * wait for what may come now (the socket may speak first).  May be
	 * NULL: always arm. */
	int (*sleep)(struct shunt_conn *c, short ev, int timeout_ms);
};

struct shunt_conn_ops {
	/* The transport the connection is on; NULL for a spill. */
	const struct shunt_transport_ops *transport;
	const struct shunt_conn_life_ops *life;
	const struct shunt_conn_data_ops *data;
	const struct shunt_conn_wait_ops *wait;
};

#define SHUNT_SLEEP_ARM 1
/* sleep() timed out and found nothing new: sleep on (longer). */
#define SHUNT_SLEEP_AGAIN 2

#define SHUNT_ARM_MAX 4

/* The first member of every connection object. */
struct shunt_conn {
	const struct shunt_conn_ops *ops;
	unsigned refs;     /* fd numbers + calls in flight + epoll items;
			      shunt_refs.h, or atomic builtins.
			      At 0 the object is dead until recycled. */
	unsigned fds;      /* fd numbers that refer to it (dup); atomic */
	int fd;            /* one of those numbers: the TCP socket, for the
			      connection's own kernel calls; -1 once all closed */
	uint8_t finished;  /* demoted, or its last number closed: entries are
			      KERNEL (or gone), resources kept until the last
			      reference */
	uint8_t left;      /* demoted (not closed): the socket is the path now,
			      so a wait on the transport must end */
	uint8_t reason;    /* why it was finished */
	uint8_t nonblock;  /* O_NONBLOCK of the open file (all its numbers) */
	uint8_t waits;     /* blocking waits so far, up to
			      SHUNT_SPIN_YOUNG_WAITS (shunt_wait.c) */
	uint8_t timeo;     /* SO_RCVTIMEO/SO_SNDTIMEO may be set (SHUNT_FDF_TIMEO;
			      and after a fork, which another process may set) */
	struct shunt_stat_slot *stat; /* its counters (shunt_stats.h), or NULL */

	/* State every transport keeps the same way, under its own lock. */
	int tcp_hint;      /* the socket was seen readable: FIN, RST or
			      replayed bytes may be waiting there */
	int tcp_eof;       /* the socket has returned EOF: stop asking */
	int rd_shut;       /* shutdown(SHUT_RD) here */
	int fin_pending;   /* shutdown(SHUT_WR)'s FIN waits until this end is
			      on TCP (atomic exchange) */
	uint64_t offer_deadline; /* client, offered: give up at (ms) */
	uint8_t local16[16]; /* the local address, when the transport */
	uint16_t lport;      /* learnt it (lport 0: not known) */
	uint8_t after_close; /* this close() runs ops->life->closed after the
				real close (set by core for close) */
	uint8_t woke;      /* this end woke a sleeping peer since its last
			      wait: the peer is not asleep for long */
	uint32_t gave_cpu; /* waits that gave the CPU away (a yield or a
			      sleep), racy: a bulk send that did so timed
			      the scheduler, not its copies (shunt_bulk.h) */
	int held;          /* 1 + an fd of shunt's own on the socket, kept
			      from the last close to the last reference while
			      calls were still in flight; 0: none */
	struct shunt_spin_state spin[2]; /* what this end's waits taught it:
					    [0] for input, [1] for output */
	uint64_t bytes_in, bytes_out; /* moved on the transport, for the close line */
	uint64_t wait_mark[2]; /* [0] bytes_out at the last wait for input, [1]
				  bytes_in at the last wait for output: the
				  same now, and the wait continues a one-way
				  stream (shunt_spin_yield_ok) */
	struct shunt_conn *pool_next; /* in its pool while dead */
};

/* Connection objects are recycled, never returned to malloc: a racing
 * shunt_conn_get() may touch one after it died, and finds refs 0 (memory
 * stays of its type, as with SLAB_TYPESAFE_BY_RCU).  One pool per kind of
 * object. */
struct shunt_conn_pool {
	struct shunt_conn *head;
	pthread_mutex_t mu;  /* taken by gets only: makes the pop safe from ABA */
	size_t size;         /* of the objects */
};
#define SHUNT_CONN_POOL(type) {NULL, PTHREAD_MUTEX_INITIALIZER, sizeof(type)}

/* An object of the pool's kind, zeroed but for its ops (refs is 0 until
 * the connection is settled), or NULL. */
void *shunt_conn_alloc(struct shunt_conn_pool *p);
/* Back to the pool (ops->life->free's last step).  Lock-free: the last put of a
 * connection may run in any thread, a signal handler's included. */
void shunt_conn_recycle(struct shunt_conn_pool *p, struct shunt_conn *c);

/* The transport's name, or "spill". */
const char *shunt_conn_name(const struct shunt_conn *c);

/* A counter of the connection's slot (see shunt_stat_add()). */
#define SHUNT_STAT_ADD(conn, field, n)                                          \
	do {                                                                    \
		struct shunt_stat_slot *s_ = (conn)->stat;                      \
		if (s_)                                                         \
			shunt_stat_add(&s_->field, (n));                        \
	} while (0)

/* A reference for one call on an accelerated fd, or NULL when the fd is
 * not (or no longer) accelerated: then the call goes to libc.  A thread
 * blocked in the transport keeps the connection alive across a close() in
 * another thread, as the kernel keeps a file alive for a blocked read. */
static inline struct shunt_conn *shunt_conn_get(struct shunt_fd *e)
{
	struct shunt_conn *c = __atomic_load_n(&e->conn, __ATOMIC_ACQUIRE);
	if (!c)
		return NULL;
	if (!shunt_refs_get(&c->refs))
		return NULL;
	/* Type-stable memory: the object may have died and been recycled
	 * between the load and the increment; the entry says. */
	if (__atomic_load_n(&e->conn, __ATOMIC_ACQUIRE) != c ||
	    shunt_fd_kind(e) != SHUNT_FD_ACCEL) {
		void shunt_conn_put(struct shunt_conn *);
		shunt_conn_put(c);
		return NULL;
	}
	return c;
}

/* Drop a reference; the last one frees the connection (ops->life->free). */
void shunt_conn_put(struct shunt_conn *c);
/* Like shunt_conn_get() for a connection already held (an epoll item). */
static inline void shunt_conn_hold(struct shunt_conn *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

/* The fd number fd (of a KERNEL or ACCEL entry e) is closing. */
void shunt_conn_on_close(int fd, struct shunt_fd *e);
/* The same for close(), which then closes the socket and calls
 * shunt_conn_closed(): what the transport leaves for after the real close
 * (its FIN) runs there. */
void shunt_conn_on_close_then(int fd, struct shunt_fd *e);
/* After the real close() that followed shunt_conn_on_close_then(). */
void shunt_conn_closed(void);
/* nfd is a new number for fd's socket (dup, dup2, F_DUPFD). */
void shunt_conn_dup(int fd, int nfd);

/* Demote one connection to the kernel path (exec, fdopen, sendfile...). */
void shunt_conn_demote(int fd, struct shunt_fd *e, enum shunt_reason why);
/* Finish: c is on TCP at this end; every fd number referring to it
 * becomes KERNEL.  c itself lives on until its last close.  Idempotent. */
void shunt_conn_finish(struct shunt_conn *c, enum shunt_reason why);
/* Hand every fd number that refers to old to nw (which takes old's
 * counters), then let go of old as those numbers closing would. */
void shunt_conn_replace(struct shunt_conn *old, struct shunt_conn *nw);

/* Before fork: connections that become shared are told (ops->life->fork). */
void shunt_conn_before_fork(void);
/* In the child after fork: counters move to the child's own file;
 * connections are told (ops->life->forked). */
void shunt_conn_after_fork_child(void);
/* In the parent after fork (or after a fork that failed). */
void shunt_conn_after_fork_parent(void);
/* Before exec: demote what the new program would inherit. */
void shunt_conn_before_exec(void);

/* exit(): c says goodbye as at its last close (ops->life->close, the close
 * line); its numbers stay as they are. */
void shunt_conn_close_at_exit(struct shunt_conn *c);
/* Call fn for each open connection of transport t in this process (fd
 * numbers that are the connection's own, c->fd). */
void shunt_conn_foreach(const struct shunt_transport_ops *t,
			void (*fn)(int fd, struct shunt_conn *c, void *arg), void *arg);

/* ---- helpers of the transports' data paths --------------------------------- */

/* What c's TCP socket says, without consuming it: 1 bytes waiting, 0 EOF
 * (c->tcp_eof is set), -1 an error (errno), -2 nothing yet or the number
 * was closed in another thread. */
int shunt_tcp_peek(struct shunt_conn *c);

/* The start of every recvmsg: m checked (more than SHUNT_IOV_MAX entries:
 * EMSGSIZE; MSG_OOB, which a ring does not carry: EINVAL), what a stream
 * never returns cleared (name, control, flags), *total bytes asked.  1: go
 * on; 0: return 0 (nothing asked, or SHUT_RD here); -1: return -1. */
int shunt_recv_begin(struct shunt_conn *c, struct msghdr *m, int flags, size_t *total);

/* A read that served done of its total bytes from memory (a spill, a
 * stash) and asked MSG_WAITALL (no MSG_PEEK): the rest from socket fd, as
 * one read of the socket would have waited for it.  Returns done plus
 * what came. */
size_t shunt_recv_rest(int fd, const struct msghdr *m, int flags, size_t done, size_t total);

/* A request of shunt's own for ops->data->ioctl: the bytes this end sent
 * that the peer has not consumed yet (a demotion would replay them). */
#define SHUNT_IOC_UNCONSUMED 0x53480001UL

/* An ioctl a transport answers from its own counts: FIONREAD (unread),
 * SIOCOUTQ (unacknowledged) and SHUNT_IOC_UNCONSUMED into *(int *)arg,
 * clamped; any other request -1/ENOTTY (the kernel answers it). */
int shunt_ioctl_counts(unsigned long req, void *arg, uint64_t unread, uint64_t unacked,
		       uint64_t unconsumed);

/* Send the FIN a shutdown(SHUT_WR) deferred, once (c is on TCP now). */
void shunt_conn_send_fin(struct shunt_conn *c);

/* A write on a connection this end can no longer write to: SIGPIPE unless
 * MSG_NOSIGNAL, then -1/EPIPE, as the kernel does. */
ssize_t shunt_broken_pipe(int flags);

#endif
