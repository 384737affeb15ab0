/* Process-wide state of the preload library: configuration, the enabled
 * switch, the re-entrancy guard and the count of accelerated connections. */
#ifndef SHUNT_CORE_H
#define SHUNT_CORE_H

#include "config/shunt_config.h"
#include <unistd.h>

#define SHUNT_EXPORT __attribute__((visibility("default")))
static inline void shunt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Non-zero while this thread runs shunt's own code or a dependency called by
 * it (libfabric opens sockets of its own): interposed calls made then go
 * straight to libc and create no shunt state. */
extern __thread int shunt_guard __attribute__((tls_model("initial-exec")));

#define SHUNT_GUARD_ENTER() (shunt_guard++)
#define SHUNT_GUARD_LEAVE() (shunt_guard--)

/* Connections on an accelerated transport in this process.  While it is zero
 * the wait calls (poll, select, epoll) go straight to libc. */
extern unsigned shunt_naccel;

static inline int shunt_any_accel(void)
{
	return __atomic_load_n(&shunt_naccel, __ATOMIC_RELAXED) != 0;
}

/* The live configuration, loaded on first use (not in a constructor: loading
 * reads a file).  Never NULL.  When loading failed, ->enabled is 0. */
const struct shunt_config *shunt_config(void);

/* Called at every listen/connect/accept shunt decides: the first one in a
 * process prints the startup line (log=info), so that processes that
 * decide nothing stay quiet. */
void shunt_first_decision(void);

/* 1 when shunt may make decisions in this call: enabled and not re-entered. */
int shunt_active(void);

/* The program name rules are matched against. */
const char *shunt_prog(void);

/* geteuid(), asked on every connection (the offer's owner, the trust
 * check), kept until a set*id call through libc (preload/shunt_cred.c)
 * says it may have changed. */
uid_t shunt_euid(void);
/* The credentials may have changed: ask the kernel next time. */
void shunt_euid_forget(void);

#ifdef SHUNT_NO_INTERPOSE
/* A program of its own (shuntd, see shunt_real.h) has no fork wrapper. */
static inline pid_t shunt_pid(void)
{
	return getpid();
}
#else
/* getpid(), kept by the fork() wrapper: it is asked on every connection
 * and each call is a system call (a microsecond on these VMs).  A child
 * made behind shunt's back (a raw clone) asks the kernel. */
extern pid_t shunt_self;
static inline pid_t shunt_pid(void)
{
	pid_t p = __atomic_load_n(&shunt_self, __ATOMIC_RELAXED);
	return p ? p : getpid();
}
#endif

/* fork(): connections that become shared are told before it and after it
 * in both processes; in the child, every process-wide part of shunt becomes
 * the child's own (its pid, counters, listener registrations, a
 * dependency's fds). */
void shunt_before_fork(void);
void shunt_after_fork_parent(void);
void shunt_after_fork_child(void);

#endif
