/* Paths in the runtime directory (shunt_rundir_layout.h). */
#include "shunt_rundir_layout.h"

#include <stdarg.h>
#include <stdio.h>

int shunt_rundir_path(char *buf, size_t len, const char *rundir, enum shunt_room room,
		      const char *fmt, ...)
{
	int n = snprintf(buf, len, "%s/%s%s", rundir, shunt_room_dir(room), fmt ? "/" : "");
	if (n < 0 || (size_t)n >= len)
		return -1;
	if (!fmt)
		return 0;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return m < 0 || (size_t)m >= len - (size_t)n ? -1 : 0;
}
