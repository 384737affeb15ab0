/* How busy the machine is (shunt_waitload.h). */
#include "shunt_waitload.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shunt_clock.h"
#include "shunt_core.h"
#include "shunt_ownfd.h"
#include "shunt_waitpolicy.h"

static int loadavg_open(void *arg)
{
	(void)arg;
	return open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
}

/* Tasks runnable on the machine now (the 4th field of /proc/loadavg,
 * "running/total"), or -1. */
static int runnable_now(void)
{
	static struct shunt_proc_fd lfd = SHUNT_PROC_FD_INIT;
	int fd = shunt_proc_fd(&lfd, shunt_pid(), loadavg_open, NULL);
	char b[128];
	ssize_t n = fd < 0 ? -1 : pread(fd, b, sizeof b - 1, 0);
	if (n <= 0)
		return -1;
	b[n] = 0;
	/* "0.50 1.20 2.28 3/250 12345" */
	const char *p = b;
	for (int f = 0; f < 3 && p; f++)
		p = strchr(p + 1, ' ');
	return p ? atoi(p + 1) : -1;
}

int shunt_runnable_sample(unsigned *ncpus, uint64_t now)
{
	static uint64_t next;
	static int last = -1;
	static unsigned n;
	if (!__atomic_load_n(&n, __ATOMIC_RELAXED)) {
		long k = sysconf(_SC_NPROCESSORS_ONLN);
		__atomic_store_n(&n, k > 0 ? (unsigned)k : 1u, __ATOMIC_RELAXED);
	}
	*ncpus = __atomic_load_n(&n, __ATOMIC_RELAXED);
	if (!now)
		now = shunt_now_ns();
	if (now < __atomic_load_n(&next, __ATOMIC_RELAXED))
		return __atomic_load_n(&last, __ATOMIC_RELAXED);
	__atomic_store_n(&next, now + SHUNT_CROWD_SAMPLE_NS, __ATOMIC_RELAXED);
	int r = runnable_now();
	__atomic_store_n(&last, r, __ATOMIC_RELAXED);
	return r;
}

int shunt_spin_crowded_now(int peer_running)
{
	unsigned ncpus;
	int r = shunt_runnable_sample(&ncpus, 0);
	return r >= 0 && shunt_spin_crowded((unsigned)r, ncpus, peer_running);
}

int shunt_spin_oversubscribed_now(uint64_t now)
{
	unsigned ncpus;
	int r = shunt_runnable_sample(&ncpus, now);
	return shunt_spin_oversubscribed(r, ncpus);
}
