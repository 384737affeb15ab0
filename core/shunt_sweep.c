/* Sweeping the runtime directory (shunt_sweep.h). */
#include "shunt_sweep.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "shunt_real.h"
#include "shunt_rundir_layout.h"
#include "shunt_rundir_open.h"

void shunt_sweep_dir(const char *dir, unsigned max,
		     int (*fn)(const char *path, const char *name, void *arg), void *arg)
{
	DIR *d = shunt_rundir_opendir(dir);
	if (!d)
		return;
	char path[2 * SHUNT_PATH_MAX];
	for (unsigned n = 0; n < max; n++) {
		struct dirent *de = readdir(d);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path)
			continue;
		if (fn(path, de->d_name, arg))
			break;
	}
	closedir(d);
}

int shunt_socket_stale(int sender, const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char b = 0;
	if (sender < 0 || strlen(path) >= sizeof a.sun_path)
		return 0;
	strcpy(a.sun_path, path);
	return REAL(sendto)(sender, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a,
			    sizeof a) < 0 &&
	       errno == ECONNREFUSED;
}
