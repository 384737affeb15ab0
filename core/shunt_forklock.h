/* The library's own locks across fork().
 *
 * fork() copies one thread; a lock another thread held at that moment stays
 * held in the child for ever, and the child's first connection that needs
 * it hangs.  So every lock a process's threads share (its mutexes, and the
 * byte locks of fab_rdv.c) is registered here, and pthread_atfork handlers
 * take them all before any fork, release them in the parent and set them
 * free in the child (the thread that took them is not the child's).  What
 * they guard is then consistent in both: no thread was inside.
 *
 * pthread_atfork rather than shunt's fork() wrapper: the handlers also run
 * for forks shunt does not see (glibc's own, in daemon()), and for vfork(),
 * which shunt makes a fork.  posix_spawn(), system() and popen() clone a
 * child that only execs and touches no shunt state: no handlers, none
 * needed.  A raw clone() system call without CLONE_VM runs no handlers and
 * is not seen: its child may find a lock held (a known limit).  A fork from
 * a signal handler that interrupted this thread inside one of these locks
 * waits for itself, as glibc's own fork would on its locks.
 *
 * Rank: outermost first.  A lock taken while another is held must rank
 * after it (the fabric watcher releases a connection under its lock, which
 * can take the buffer, offer and provider locks), so that the handlers take
 * them in an order no thread contradicts. */
#ifndef SHUNT_FORKLOCK_H
#define SHUNT_FORKLOCK_H

#include <pthread.h>
#include <stdint.h>

enum shunt_lock_rank {
	SHUNT_RANK_SETID,       /* shunt_listen.c: held across a set*id call */
	SHUNT_RANK_FAB_WATCH,   /* fab_watch.c: the watcher's set */
	SHUNT_RANK_FAB_PROV,    /* fab_prov.c: fabric, domain, endpoints */
	SHUNT_RANK_FAB_OFFERS,  /* fab_offer.c: offers awaiting connect-back */
	SHUNT_RANK_FAB_BUFS,    /* fab_conn.c: kept buffers */
	SHUNT_RANK_FAB_AGENTS,  /* fab_rdv.c: agent cache, kept links */
	SHUNT_RANK_SHM_ARENA,   /* shm_arena.c */
	SHUNT_RANK_SHM_WAKE,    /* shm_wake.c: kept wake sockets */
	SHUNT_RANK_SHM_PENDING, /* shm_pending.c: announced offers */
	SHUNT_RANK_REGISTRY,    /* shunt_registry.c: entries kept open */
	SHUNT_RANK_ROUTE,       /* shunt_rendezvous.c: source addresses */
	SHUNT_RANK_POOL,        /* shunt_conn.c pools: leaves */
};

/* Register a mutex (a byte lock: 0 free, 1 held) with its rank and a name
 * for tests and messages.  From constructors only (SHUNT_FORK_MUTEX). */
void shunt_fork_mutex(pthread_mutex_t *mu, enum shunt_lock_rank rank, const char *name);
void shunt_fork_bytelock(uint8_t *lock, enum shunt_lock_rank rank, const char *name);

#define SHUNT_FORK_CAT2(a, b) a##b
#define SHUNT_FORK_CAT(a, b) SHUNT_FORK_CAT2(a, b)
/* At file scope, after the lock's definition. */
#define SHUNT_FORK_MUTEX(mu, rank)                                                        \
	__attribute__((constructor)) static void SHUNT_FORK_CAT(shunt_fork_reg_, __LINE__)(void) \
	{                                                                                 \
		shunt_fork_mutex(&(mu), (rank), __FILE__ ":" #mu);                         \
	}
/* A mutex whose file takes it across fork() itself (its own pthread_atfork
 * handlers, because it must also wait for something under it): named so
 * that tests/check_forklocks.sh knows it is not forgotten. */
#define SHUNT_FORK_OWN(mu) _Static_assert(sizeof(mu) == sizeof(pthread_mutex_t), #mu " is a mutex")
#define SHUNT_FORK_BYTELOCK(lock, rank)                                                   \
	__attribute__((constructor)) static void SHUNT_FORK_CAT(shunt_fork_reg_, __LINE__)(void) \
	{                                                                                 \
		shunt_fork_bytelock(&(lock), (rank), __FILE__ ":" #lock);                  \
	}

/* The registered locks, outermost first: how many, and each one's name;
 * lock or unlock one (tests: tests/hostile/fork_hook.c). */
int shunt_fork_lock_count(void);
const char *shunt_fork_lock_name(int i);
void shunt_fork_lock_take(int i);
int shunt_fork_lock_try(int i);
void shunt_fork_lock_give(int i);
/* 1 from the start of a fork's prepare handler until its parent or child
 * handler. */
int shunt_fork_preparing(void);

#endif
