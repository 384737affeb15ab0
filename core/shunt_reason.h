/* Reason codes: why a connection is on the kernel path.  A header of its own
 * so that the tools (shunt stat, shuntd) print the same names the library
 * logs. */
#ifndef SHUNT_REASON_H
#define SHUNT_REASON_H

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
	X(INTERNAL, "internal")      /* shunt's own socket or a nested call */ \
	X(PEER_CRED, "peer-cred")    /* the offer came from another user */   \
	X(BAD_OFFER, "bad-offer")    /* a malformed or foreign offer */       \
	X(OFFER_TIMEOUT, "offer-timeout") /* no answer from the server in time */ \
	X(DECLINED, "declined")      /* the server refused the offer (its rule, \
					its config, a check failed) */          \
	X(PEER_DEMOTED, "peer-demoted") /* the peer moved the connection to TCP */ \
	X(BIND_FAILED, "bind-failed") /* no local port to name the offer by */ \
	X(NO_RDMA_ROUTE, "no-rdma-route") /* fabric_provider=auto and no RDMA  \
					     device reaches the peer */        \
	X(FD_LIMIT, "fd-limit")      /* the process is near its fd limit: shunt \
					leaves the fds to the application */   \
	X(SERVER_CRED, "server-cred") /* the server dropped privileges and     \
					 cannot take this user's offers */     \
	X(PROVIDER_LOADING, "provider-loading") /* libfabric was still starting \
						   (in the background) */         \
	X(CLIENT_CLOSED, "client-closed") /* the client closed its socket   \
					     before the server took its offer */ \
	X(KTLS, "ktls")              /* TCP_ULP (kernel TLS): the kernel       \
					frames and ciphers the stream */       \
	X(ZEROCOPY, "zerocopy")      /* send(MSG_ZEROCOPY): completions come   \
					from the kernel's error queue */       \
	X(OOB, "oob")                /* send(MSG_OOB): urgent data */          \
	X(FASTOPEN, "fastopen")      /* TCP Fast Open from the client: data    \
					in the SYN, connect inside sendto */   \
	X(SOCK_FILTER, "sock-filter") /* SO_ATTACH_FILTER/_BPF: a filter sees  \
					 only the kernel's packets */          \
	X(TCP_REPAIR, "tcp-repair")  /* TCP_REPAIR: the kernel's queues are   \
					read and rebuilt (checkpoint/restore) */ \
	X(IO_URING, "io-uring")      /* the process uses io_uring, which reads \
					and writes sockets past shunt */

enum shunt_reason {
#define SHUNT_REASON_ENUM(id, name) SHUNT_R_##id,
	SHUNT_REASONS(SHUNT_REASON_ENUM)
#undef SHUNT_REASON_ENUM
	SHUNT_R_COUNT
};

/* The stable name of a reason ("" for NONE, "?" out of range). */
static inline const char *shunt_reason_name(unsigned r)
{
	static const char *const names[] = {
#define SHUNT_REASON_NAME(id, name) [SHUNT_R_##id] = name,
		SHUNT_REASONS(SHUNT_REASON_NAME)
#undef SHUNT_REASON_NAME
	};
	return r < SHUNT_R_COUNT ? names[r] : "?";
}

#endif
