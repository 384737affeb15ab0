/* The public API of <shunt/shunt.h>. */
#include <shunt/shunt.h>
#include <shunt/version.h>

#include "core/shunt_conn.h"

SHUNT_EXPORT const char *shunt_version(void)
{
	return SHUNT_VERSION;
}

SHUNT_EXPORT int shunt_enabled(void)
{
	return shunt_config()->enabled;
}

SHUNT_EXPORT const char *shunt_fd_transport(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	switch (e ? shunt_fd_kind(e) : SHUNT_FD_UNKNOWN) {
	case SHUNT_FD_ACCEL: {
		struct shunt_conn *c = shunt_conn_get(e);
		const char *name = c ? shunt_conn_name(c) : "kernel";
		if (c)
			shunt_conn_put(c);
		return name;
	}
	case SHUNT_FD_KERNEL:
		return "kernel";
	default:
		return NULL;
	}
}

SHUNT_EXPORT const char *shunt_fd_reason(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	switch (e ? shunt_fd_kind(e) : SHUNT_FD_UNKNOWN) {
	case SHUNT_FD_ACCEL:
		return "";
	case SHUNT_FD_KERNEL:
		return shunt_reason_name(e->reason);
	default:
		return NULL;
	}
}
