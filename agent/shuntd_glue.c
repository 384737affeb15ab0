/* The shm registry code (shm/shm_registry.c) outside libshunt.so: in shuntd
 * nothing is interposed, so the "real" functions are libc's and shunt's own
 * fds are ordinary fds. */
#include <unistd.h>

#include "core/shunt_core.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"

struct shunt_real shunt_real = {.close = close, .getsockopt = getsockopt};

/* 0: shunt_pid() asks the kernel. */
pid_t shunt_self;

int shunt_fd_own(int fd, int *owner)
{
	if (owner && fd >= 0)
		*owner = fd;
	return fd;
}

void shunt_fd_release(int fd)
{
	if (fd >= 0)
		close(fd);
}
