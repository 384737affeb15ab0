/* Listens on 127.0.0.1 (any port) and exits.  Under shunt, a listen()
 * is a process's first use of shm: it sweeps what dead processes left in
 * the runtime directory.  Tests run it to be "the next process". */
#include <stdio.h>
#include <unistd.h>

#include "common.h"

int main(void)
{
	prog_name = "listen_once";
	int port;
	int l = tcp_listen("127.0.0.1", 0, 1, &port);
	if (l < 0)
		fail_errno("listen");
	close(l);
	return 0;
}
