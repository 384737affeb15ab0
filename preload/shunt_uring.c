/* liburing's entry points.  liburing (2.3, as Debian builds it) makes its
 * system calls with inline `syscall` instructions, never through libc, so
 * a ring it creates is seen only here: the process is marked as an io_uring
 * user (core/shunt_uring.h) before the ring exists, then liburing's own
 * function runs.  Only the calls that create a ring or drive one shunt did
 * not see created (io_uring_queue_init_mem from liburing 2.5, for programs
 * built against a newer one); io_uring_get_probe's ring lives inside the
 * call.  These
 * names carry liburing's version nodes (preload/interposed.txt), so they
 * interpose only programs linked against liburing; a static liburing is
 * found by the descriptor scan at the first decision. */
#include <dlfcn.h>
#include <errno.h>

#include "core/shunt_core.h"
#include "core/shunt_uring.h"

/* liburing's function, or NULL (then -ENOSYS, liburing's error style). */
static void *next(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_RELAXED);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELAXED);
	}
	return f;
}

/* Declared here with opaque pointers: shunt does not build against
 * liburing's headers, and passes every argument through untouched. */
#define SHUNT_URING_FUNCS(X)                                                        \
	X(io_uring_queue_init, (unsigned entries, void *ring, unsigned flags),       \
	  (entries, ring, flags))                                                    \
	X(io_uring_queue_init_params, (unsigned entries, void *ring, void *p),       \
	  (entries, ring, p))                                                        \
	X(io_uring_queue_mmap, (int fd, void *p, void *ring), (fd, p, ring))         \
	X(io_uring_queue_init_mem, (unsigned entries, void *ring, void *p, void *buf, \
				    unsigned long size),                              \
	  (entries, ring, p, buf, size))                                             \
	X(io_uring_setup, (unsigned entries, void *p), (entries, p))                 \
	X(io_uring_enter, (unsigned fd, unsigned sub, unsigned wait, unsigned fl,    \
			   void *sig),                                               \
	  (fd, sub, wait, fl, sig))                                                  \
	X(io_uring_enter2, (unsigned fd, unsigned sub, unsigned wait, unsigned fl,   \
			    void *sig, unsigned long sz),                            \
	  (fd, sub, wait, fl, sig, sz))                                              \
	X(io_uring_register, (unsigned fd, unsigned op, const void *arg, unsigned n), \
	  (fd, op, arg, n))

#define SHUNT_URING_WRAP(name, params, args)                                    \
	SHUNT_EXPORT int name params;                                           \
	SHUNT_EXPORT int name params                                            \
	{                                                                       \
		static void *slot;                                              \
		shunt_uring_seen("liburing's " #name);                          \
		int (*f) params = (int(*) params)next(&slot, #name);            \
		return f ? f args : -ENOSYS;                                    \
	}
SHUNT_URING_FUNCS(SHUNT_URING_WRAP)
#undef SHUNT_URING_WRAP
