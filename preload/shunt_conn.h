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

#include <sys/socket.h>
#include <sys/uio.h>

#include "shunt_core.h"
#include "shunt_fdtab.h"

/* Why a connection is on the kernel path.  Stable names: they appear in logs,
 * `shunt stat` and metrics.  Append only. */
#define SHUNT_REASONS(X)                                                         \
	X(NONE, "")                  /* accelerated, or not decided yet */       \
	X(NOT_TCP, "not-tcp")        /* not an IPv4/IPv6 TCP socket */           \
	X(DISABLED, "disabled")      /* enable=no, or a configuration error */   \
	X(RULE_KERNEL, "rule-kernel") /* a rule or default_transport said so */  \
	X(NO_TRANSPORT, "no-transport") /* no transport the rule allows exists */ \
	X(NO_PEER_SHIM, "no-peer-shim") /* the peer does not run shunt */        \
	X(NO_AGENT, "no-agent")      /* no shuntd answered for the peer host */  \
	X(NO_ROUTE, "no-route")      /* no fabric route to the peer */           \
	X(PROVIDER_ERROR, "provider-error") /* libfabric failed */               \
	X(RING_ALLOC, "ring-alloc")  /* shared memory could not be set up */     \
	X(FORK_SHARED, "fork-shared") /* used by several processes after fork */ \
	X(EXEC, "exec")              /* demoted so an exec'd program can use it */ \
	X(STDIO, "stdio")            /* wrapped in a FILE by fdopen */            \
	X(UNSUPPORTED, "unsupported") /* a call shunt cannot serve (splice...) */ \
	X(INTERNAL, "internal")      /* shunt's own socket or a nested call */

enum shunt_reason {
#define SHUNT_REASON_ENUM(id, name) SHUNT_R_##id,
	SHUNT_REASONS(SHUNT_REASON_ENUM)
#undef SHUNT_REASON_ENUM
	SHUNT_R_COUNT
};

const char *shunt_reason_name(enum shunt_reason r);

/* A transport: shm and fabric each provide one of these, as libfabric
 * providers do.  The preload layer calls them only for fds whose entry is
 * SHUNT_FD_ACCEL (data path) or during the decision (control path).
 *
 * Decision hooks return 0 when the transport takes the connection (having
 * set e->conn), or a reason code explaining why not. */
struct shunt_transport_ops {
	const char *name;
	enum shunt_transport id;

	/* Control path. */
	int (*on_listen)(int fd, struct shunt_fd *e);
	enum shunt_reason (*connect)(int fd, struct shunt_fd *e,
				     const struct sockaddr *dst, socklen_t len);
	enum shunt_reason (*accept)(int lfd, int fd, struct shunt_fd *e,
				    const struct sockaddr *peer, socklen_t len);
	void (*close)(struct shunt_conn *c);
	/* Give the connection back to TCP, replaying unconsumed bytes. */
	int (*demote)(struct shunt_conn *c, enum shunt_reason why);

	/* Data path: all read and write calls funnel into these two. */
	ssize_t (*recvmsg)(struct shunt_conn *c, struct msghdr *m, int flags);
	ssize_t (*sendmsg)(struct shunt_conn *c, const struct msghdr *m, int flags);
	int (*shutdown)(struct shunt_conn *c, int how);
	/* Readiness as poll(2) events, without blocking. */
	short (*poll)(struct shunt_conn *c, short events);
	/* An fd that becomes readable when poll() may have changed. */
	int (*wait_fd)(struct shunt_conn *c);
	/* FIONREAD, SIOCOUTQ; -1/ENOTTY to let the kernel answer. */
	int (*ioctl)(struct shunt_conn *c, unsigned long req, void *arg);
};

/* The transport that owns an accelerated connection; first member of every
 * transport's connection object. */
struct shunt_conn {
	const struct shunt_transport_ops *ops;
	unsigned refs; /* fd numbers that refer to it (dup); atomic */
};

/* Decisions: called by the interposed calls after classifying the fd. */
void shunt_conn_on_listen(int fd, struct shunt_fd *e);
void shunt_conn_on_connect(int fd, struct shunt_fd *e,
			   const struct sockaddr *dst, socklen_t len);
void shunt_conn_on_accept(int lfd, int fd, struct shunt_fd *e,
			  const struct sockaddr *peer, socklen_t len);
/* The log=debug line for a decision; for connect, once the local address
 * is bound. */
void shunt_conn_log_decision(int fd, struct shunt_fd *e, const struct sockaddr *peer,
			     socklen_t plen);
void shunt_conn_on_close(int fd, struct shunt_fd *e);
/* nfd is a new number for fd's socket (dup, dup2, F_DUPFD). */
void shunt_conn_dup(int fd, int nfd);
/* Before exec: demote what the new program would inherit. */
void shunt_conn_before_exec(void);
/* Demote one connection to the kernel path. */
void shunt_conn_demote(int fd, struct shunt_fd *e, enum shunt_reason why);

/* Classify an fd shunt has not seen created (inherited, received by
 * SCM_RIGHTS, created while the guard was held): TCP, LISTEN or OTHER. */
struct shunt_fd *shunt_conn_classify(int fd);

/* Mark a freshly created TCP socket (socket(), accept()). */
void shunt_conn_new_tcp(int fd, int nonblock);

#endif
