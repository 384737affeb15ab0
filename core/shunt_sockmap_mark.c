/* The shim's side of the sockmap path: a client socket offered to shm is
 * marked, by its cookie, in the map shuntd pins (skip_cookie), before its
 * connect, so the sockops program keeps both ends of the connection off
 * the sockhash.  Marks are one-shot (the program removes them) and the
 * map is an LRU: anyone may write it (it only keeps connections on TCP),
 * and a flood of marks forgets old ones, never blocks. */
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/bpf.h>

#include "shunt_clock.h"
#include "shunt_core.h"
#include "shunt_real.h"
#include "shunt_sockmap.h"
#include "config/shunt_config.h"

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

/* No shuntd runs the path (no pin): asked again after this long. */
#define ABSENT_RETRY_NS 1000000000ull

static uint64_t absent_until;

void shunt_sm_keep_off(int fd)
{
	uint64_t now = shunt_now_ns();
	if (__atomic_load_n(&absent_until, __ATOMIC_RELAXED) > now)
		return;
	/* Opened per connection, not kept: a restarted shuntd pins a new
	 * map, and an fd kept would fill the old one. */
	int mfd = shunt_sm_obj_get(shunt_config()->sockmap_pin, SHUNT_SM_PIN_SKIP, BPF_F_WRONLY);
	if (mfd < 0) {
		__atomic_store_n(&absent_until, now + ABSENT_RETRY_NS, __ATOMIC_RELAXED);
		return;
	}
	uint64_t cookie = 0;
	socklen_t len = sizeof cookie;
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) == 0)
		shunt_sm_map_put(mfd, &cookie);
	REAL(close)(mfd);
}
