/* What dead processes leave in the runtime directory is removed by whoever
 * comes next: each process once (shm/shm_sweep.c, the stats files) and
 * shuntd periodically.  The walk and the tests they share. */
#ifndef SHUNT_SWEEP_H
#define SHUNT_SWEEP_H

/* Call fn(path, name, arg) for at most max entries of directory dir (not
 * "." and ".."), path being dir/name; fn returns 1 to stop early. */
void shunt_sweep_dir(const char *dir, unsigned max,
		     int (*fn)(const char *path, const char *name, void *arg), void *arg);

/* 1 when nobody has the Unix datagram socket at path bound any more (a
 * datagram to it, sent with sender, is refused): a wake socket of a dead
 * process.  A live one gets a datagram, which only makes a wait look once
 * more. */
int shunt_socket_stale(int sender, const char *path);

#endif
