/* Resolution of the real libc functions (see shunt_real.h). */
#include "shunt_real.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>

/* A symbol this libc lacks (older glibc: closefrom, epoll_pwait2, execveat)
 * answers ENOSYS, as the kernel would for a missing system call. */
#define SHUNT_MISSING(ret, name, params, args)                                  \
	static ret missing_##name params                                        \
	{                                                                       \
		errno = ENOSYS;                                                 \
		return (ret)-1;                                                 \
	}
SHUNT_REAL_FUNCS(SHUNT_MISSING)
#undef SHUNT_MISSING

#define SHUNT_RESOLVER(ret, name, params, args)                                 \
	static ret resolve_##name params                                        \
	{                                                                       \
		shunt_real_init();                                              \
		return REAL(name) args;                                         \
	}
SHUNT_REAL_FUNCS(SHUNT_RESOLVER)
#undef SHUNT_RESOLVER

static void missing_closefrom(int lo)
{
	(void)lo;
}
static void resolve_closefrom(int lo)
{
	shunt_real_init();
	REAL(closefrom)(lo);
}
static int resolve_fclose(FILE *fp)
{
	shunt_real_init();
	return REAL(fclose)(fp);
}
static FILE *resolve_fdopen(int fd, const char *mode)
{
	shunt_real_init();
	return REAL(fdopen)(fd, mode);
}
static FILE *resolve_popen(const char *cmd, const char *mode)
{
	shunt_real_init();
	return REAL(popen)(cmd, mode);
}
static int resolve_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	shunt_real_init();
	return REAL(fcntl)(fd, cmd, arg);
}
static int resolve_fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	shunt_real_init();
	return REAL(fcntl64)(fd, cmd, arg);
}
static int resolve_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	shunt_real_init();
	return REAL(ioctl)(fd, req, arg);
}

static long resolve_syscall(long n, ...)
{
	va_list ap;
	va_start(ap, n);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	shunt_real_init();
	return REAL(syscall)(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

struct shunt_real shunt_real = {
#define SHUNT_RESOLVER_INIT(ret, name, params, args) .name = resolve_##name,
	SHUNT_REAL_FUNCS(SHUNT_RESOLVER_INIT)
#undef SHUNT_RESOLVER_INIT
	.closefrom = resolve_closefrom,
	.fclose = resolve_fclose,
	.fdopen = resolve_fdopen,
	.popen = resolve_popen,
	.fcntl = resolve_fcntl,
	.fcntl64 = resolve_fcntl64,
	.ioctl = resolve_ioctl,
	.syscall = resolve_syscall,
};

static void *lookup(const char *name, void *fallback)
{
	void *p = dlsym(RTLD_NEXT, name);
	return p ? p : fallback;
}

#define STORE(name, fallback)                                                   \
	__atomic_store_n(&shunt_real.name,                                      \
			 (__typeof__(shunt_real.name))lookup(#name, (void *)(fallback)), \
			 __ATOMIC_RELAXED)

void shunt_real_init(void)
{
	static int done;
	if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		return;
	/* Racing threads store the same values; no lock needed. */
#define SHUNT_STORE(ret, name, params, args) STORE(name, missing_##name);
	SHUNT_REAL_FUNCS(SHUNT_STORE)
#undef SHUNT_STORE
	STORE(closefrom, missing_closefrom);
	STORE(fclose, NULL);
	STORE(fdopen, NULL);
	STORE(popen, NULL);
	STORE(fcntl, NULL);
	STORE(fcntl64, REAL(fcntl));
	STORE(ioctl, NULL);
	STORE(syscall, NULL);
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}
