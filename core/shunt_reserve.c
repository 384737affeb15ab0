/* Memory reserved before it is touched (shunt_reserve.h). */
#include "shunt_reserve.h"

#include <errno.h>
#include <fcntl.h>

int shunt_reserve(int fd, off_t off, off_t len)
{
	int e;
	do
		e = posix_fallocate(fd, off, len);
	while (e == EINTR);
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}
