/* The fd table: what shunt knows about each fd number.
 *
 * Indexed by fd number through a two-level table: a static top level (all of
 * it in .bss, so untouched pages cost nothing) of pointers to chunks of
 * entries mapped on first use and never freed.  Lookup is two loads, no lock,
 * no bound below the kernel's own fd limit (fs.nr_open <= 2^30).  Because
 * chunks are never unmapped, an entry read by one thread while another closes
 * the fd is stale but never dangling.
 *
 * An entry is reset whenever the kernel can have reused its fd number: close,
 * dup2/dup3 over it, close_range, and every call shunt sees return a new fd. */
#ifndef SHUNT_FDTAB_H
#define SHUNT_FDTAB_H

#include <stdint.h>

#define SHUNT_FDTAB_SHIFT 10
#define SHUNT_FDTAB_CHUNK (1u << SHUNT_FDTAB_SHIFT)
#define SHUNT_FDTAB_MAX_FD (1u << 30)
#define SHUNT_FDTAB_TOP (SHUNT_FDTAB_MAX_FD >> SHUNT_FDTAB_SHIFT)

enum shunt_fd_kind {
	SHUNT_FD_UNKNOWN = 0, /* not seen, or reset: libc decides everything */
	SHUNT_FD_OTHER,       /* a socket shunt will never touch (UDP, raw, ...) */
	SHUNT_FD_TCP,         /* TCP socket, neither connected nor listening yet */
	SHUNT_FD_LISTEN,      /* TCP listener */
	SHUNT_FD_KERNEL,      /* TCP connection on the kernel path (see reason) */
	SHUNT_FD_ACCEL,       /* TCP connection on an accelerated transport */
	SHUNT_FD_INTERNAL,    /* shunt's own (wake sockets, locks, log file) */
};

struct shunt_conn;
struct shunt_listener;
struct shunt_stat_slot;

struct shunt_fd {
	uint8_t kind;      /* enum shunt_fd_kind; atomic access */
	uint8_t role;      /* enum shunt_role */
	uint8_t reason;    /* enum shunt_reason, for SHUNT_FD_KERNEL */
	uint8_t flags;     /* SHUNT_FDF_* */
	uint32_t pad;
	union {
		struct shunt_conn *conn;         /* ACCEL; KERNEL after a demotion,
						    until the last close */
		struct shunt_listener *listener; /* LISTEN, when registered */
	};
	struct shunt_stat_slot *stat; /* counters of the connection decided on
					 this number (not copied by dup) */
	int *owner;        /* SHUNT_FD_INTERNAL: where shunt keeps the number */
};
_Static_assert(sizeof(struct shunt_fd) == 32, "an fd entry is 32 bytes");

#define SHUNT_FDF_NONBLOCK 0x01
/* An epoll fd (epoll_create*): nested epoll needs to know one when it is
 * added to another set or polled (kind stays UNKNOWN). */
#define SHUNT_FDF_EPOLL 0x02
/* SHUNT_FD_INTERNAL, made by a dependency (libfabric) under the guard: it
 * keeps the number, so it cannot be moved (see shunt_ownfd.h). */
#define SHUNT_FDF_BORROWED 0x04
/* A receive or send timeout may be set on the socket: set through
 * setsockopt here, inherited from a listener that had one, or a socket this
 * process did not make.  Without it a blocking wait asks no SO_RCVTIMEO. */
#define SHUNT_FDF_TIMEO 0x08
/* A kernel-only feature was set on this undecided socket or listener
 * (shunt_kernel_only.h): its connections stay on the kernel path, for the
 * reason in the entry's reason. */
#define SHUNT_FDF_KERNEL_ONLY 0x10

extern struct shunt_fd *shunt_fdtab_top[SHUNT_FDTAB_TOP];

/* The entry of fd if its chunk exists, else NULL.  Never allocates. */
static inline struct shunt_fd *shunt_fd_peek(int fd)
{
	if ((unsigned)fd >= SHUNT_FDTAB_MAX_FD)
		return 0;
	struct shunt_fd *chunk = __atomic_load_n(
		&shunt_fdtab_top[(unsigned)fd >> SHUNT_FDTAB_SHIFT], __ATOMIC_ACQUIRE);
	return chunk ? &chunk[(unsigned)fd & (SHUNT_FDTAB_CHUNK - 1)] : 0;
}

static inline enum shunt_fd_kind shunt_fd_kind(const struct shunt_fd *e)
{
	return (enum shunt_fd_kind)__atomic_load_n(&e->kind, __ATOMIC_ACQUIRE);
}

/* The hot-path question: is fd on an accelerated transport?  One bounds test
 * and two loads for every fd; NULL sends the call straight to libc. */
static inline struct shunt_fd *shunt_fd_accel(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	return e && shunt_fd_kind(e) == SHUNT_FD_ACCEL ? e : 0;
}

/* The entry of fd, mapping its chunk if needed.  NULL only if fd is out of
 * range or memory is exhausted.  Async-signal-safe (mmap, CAS). */
struct shunt_fd *shunt_fd_get(int fd);

/* Forget fd: the kernel may hand its number out again.  Never allocates. */
void shunt_fd_reset(int fd);

/* Reset every fd in [lo, hi] but shunt's own: close_range, closefrom. */
void shunt_fd_reset_range(unsigned lo, unsigned hi);

/* Calls fn for every entry with kind >= min_kind, lowest fd first. */
void shunt_fd_foreach(enum shunt_fd_kind min_kind,
		      void (*fn)(int fd, struct shunt_fd *e, void *arg), void *arg);

/* One past the highest fd number that can have an entry. */
unsigned shunt_fdtab_limit(void);

/* Number of chunks mapped so far (tests, stats). */
unsigned shunt_fdtab_chunks(void);

#endif
