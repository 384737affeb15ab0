/* The connection state machine: which path a TCP connection takes, and why.
 *
 *   socket()            -> TCP
 *   listen()            -> LISTEN           (transports may register it)
 *   connect()/accept()  -> decision:  ACCEL (a transport took it)
 *                                     KERNEL + reason
 *   demotion            -> ACCEL -> KERNEL + reason (bytes replayed over TCP)
 *   close()             -> UNKNOWN
 *
 * The kernel TCP socket exists in every state and is what the application
 * holds; the decision only says who moves the bytes. */
#ifndef SHUNT_CONN_H
#define SHUNT_CONN_H

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "shunt_core.h"
#include "shunt_fdtab.h"
#include "shunt_stats.h"
#include "shunt_reason.h"

/* A transport: shm and fabric each provide one of these, as libfabric
 * providers do.  The preload layer calls them only for fds whose entry is
 * SHUNT_FD_ACCEL (data path) or during the decision (control path).
 *
 * Decision hooks return SHUNT_R_NONE when the transport takes the
 * connection (having set e->conn), or a reason code explaining why not. */
struct shunt_transport_ops {
	const char *name;
	enum shunt_transport id;

	/* Control path. */
	void (*on_listen)(int fd, struct shunt_fd *e);
	enum shunt_reason (*connect)(int fd, struct shunt_fd *e,
				     const struct sockaddr *dst, socklen_t len);
	enum shunt_reason (*accept)(int lfd, int fd, struct shunt_fd *e,
				    const struct sockaddr *peer, socklen_t len);
	/* This end took the kernel path: refuse whatever the peer offered. */
	void (*decline)(int fd, const struct sockaddr *peer, socklen_t len);
	/* The last fd number referring to c in this process is closing (the
	 * socket is still open): say goodbye to the peer.  Calls in flight in
	 * other threads may go on; c->fd is -1 afterwards. */
	void (*close)(struct shunt_conn *c);
	/* The last reference is gone (no fd number, no call in flight):
	 * release everything.  The object itself must stay readable memory
	 * (recycled, never unmapped): shunt_conn_get() may still touch it. */
	void (*free)(struct shunt_conn *c);
	/* Hand the connection back to TCP, nothing lost: on return this end
	 * reads and writes the socket.  Then the caller calls
	 * shunt_conn_finish(). */
	void (*demote)(struct shunt_conn *c, enum shunt_reason why);
	/* The process is about to fork with c open. */
	void (*fork)(struct shunt_conn *c);
	/* In the child, just after fork. */
	void (*child)(struct shunt_conn *c);

	/* Data path: all read and write calls funnel into these two. */
	ssize_t (*recvmsg)(struct shunt_conn *c, struct msghdr *m, int flags);
	ssize_t (*sendmsg)(struct shunt_conn *c, const struct msghdr *m, int flags);
	/* 0: now shut the socket down too; 1: the transport will send the
	 * FIN itself later; -1: error. */
	int (*shutdown)(struct shunt_conn *c, int how);
	/* FIONREAD, SIOCOUTQ; -1/ENOTTY lets the kernel answer. */
	int (*ioctl)(struct shunt_conn *c, unsigned long req, void *arg);

	/* Readiness, for poll/select/epoll.  poll() answers from user space
	 * without blocking.  To sleep, the caller arm()s (the transport
	 * returns up to SHUNT_ARM_MAX kernel fds whose readiness means "ask
	 * poll() again", and may shorten *timeout_ms), calls poll() once more
	 * (the peer may have moved in between), sleeps in the kernel, then
	 * disarm()s with the same events and the kernel's answer. */
	short (*poll)(struct shunt_conn *c, short events);
	int (*arm)(struct shunt_conn *c, short events, struct pollfd out[3],
		   int *timeout_ms);
	void (*disarm)(struct shunt_conn *c, short events, const struct pollfd *fds,
		       int n);
	/* A counter that moves whenever bytes arrive or space frees: the
	 * edges of EPOLLET. */
	uint64_t (*progress)(struct shunt_conn *c);
};

#define SHUNT_ARM_MAX 4

/* The transport's per-connection object starts with this. */
struct shunt_conn {
	const struct shunt_transport_ops *ops;
	unsigned refs;     /* fd numbers + calls in flight + epoll items; atomic.
			      At 0 the object is dead until recycled. */
	unsigned fds;      /* fd numbers that refer to it (dup); atomic */
	int fd;            /* one of those numbers: the TCP socket, for the
			      transport's own kernel calls; -1 once all closed */
	uint8_t finished;  /* demoted, or its last number closed: entries are
			      KERNEL (or gone), resources kept until the last
			      reference */
	uint8_t left;      /* demoted (not closed): the socket is the path now,
			      so a wait on the transport must end */
	uint8_t reason;    /* why it was finished */
	uint8_t nonblock;  /* O_NONBLOCK of the open file (all its numbers) */
	struct shunt_stat_slot *stat; /* its counters (shunt_stats.h), or NULL */
};

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
	unsigned r = __atomic_load_n(&c->refs, __ATOMIC_RELAXED);
	do {
		if (r == 0)
			return NULL;
	} while (!__atomic_compare_exchange_n(&c->refs, &r, r + 1, 1, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
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

/* A write on a connection this end can no longer write to: SIGPIPE unless
 * MSG_NOSIGNAL, then -1/EPIPE, as the kernel does. */
ssize_t shunt_broken_pipe(int flags);

/* What c's TCP socket says, without consuming it: 1 bytes waiting, 0 EOF
 * (and *eof = 1), -1 an error (errno), -2 nothing yet or the number was
 * closed in another thread. */
int shunt_tcp_peek(struct shunt_conn *c, int *eof);

/* Drop a reference; the last one frees the transport's resources. */
void shunt_conn_put(struct shunt_conn *c);

/* Decisions: called by the interposed calls after classifying the fd. */
void shunt_conn_on_listen(int fd, struct shunt_fd *e);
void shunt_conn_on_connect(int fd, struct shunt_fd *e,
			   const struct sockaddr *dst, socklen_t len);
void shunt_conn_on_accept(int lfd, int fd, struct shunt_fd *e,
			  const struct sockaddr *peer, socklen_t len);
/* A decision is final (for connect, once the local address is bound): open
 * its counters and write the log=debug line. */
void shunt_conn_decided(int fd, struct shunt_fd *e, const struct sockaddr *peer,
			socklen_t plen);
void shunt_conn_on_close(int fd, struct shunt_fd *e);
/* nfd is a new number for fd's socket (dup, dup2, F_DUPFD). */
void shunt_conn_dup(int fd, int nfd);
/* Before exec: demote what the new program would inherit. */
void shunt_conn_before_exec(void);
/* Demote one connection to the kernel path (exec, fdopen, sendfile...). */
void shunt_conn_demote(int fd, struct shunt_fd *e, enum shunt_reason why);
/* The transport has handed c back to TCP: every fd number referring to it
 * becomes KERNEL.  c itself lives on until its last close.  Idempotent. */
void shunt_conn_finish(struct shunt_conn *c, enum shunt_reason why);
/* Hand every fd number that refers to old to nw (which takes old's
 * counters), then let go of old as those numbers closing would. */
void shunt_conn_replace(struct shunt_conn *old, struct shunt_conn *nw);
/* Before fork: tell transports which connections become shared. */
void shunt_conn_before_fork(void);
/* In the child after fork. */
void shunt_conn_after_fork_child(void);

/* Classify an fd shunt has not seen created (inherited, received by
 * SCM_RIGHTS, created while the guard was held): TCP, LISTEN or OTHER. */
struct shunt_fd *shunt_conn_classify(int fd);

/* Mark a freshly created TCP socket (socket(), accept()). */
void shunt_conn_new_tcp(int fd, int nonblock);

#endif
