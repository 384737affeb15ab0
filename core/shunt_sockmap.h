/* The sockmap path's pinned objects, as the shim, shuntd and the shunt tool
 * reach them: by path, with the bpf(2) system call itself (no libbpf in the
 * library).  The programs and the objects' names: shunt_sockmap_abi.h. */
#ifndef SHUNT_SOCKMAP_H
#define SHUNT_SOCKMAP_H

#include <stddef.h>
#include <stdint.h>

#include "shunt_sockmap_abi.h"

/* A pinned object: BPF_OBJ_GET of dir/name with flags (BPF_F_RDONLY,
 * BPF_F_WRONLY or 0), close-on-exec.  The fd, or -1 with errno. */
int shunt_sm_obj_get(const char *dir, const char *name, unsigned flags);

/* The counters' map (fd): each summed over the CPUs into out.  0, or -1
 * with errno. */
int shunt_sm_counters_read(int fd, uint64_t out[SHUNT_SM_NCOUNTERS]);

/* Put key (value 1) into the map fd.  0, or -1 with errno. */
int shunt_sm_map_put(int fd, const void *key);

/* The pin directory holds an attached sockops link: 1, 0 when not, -1 when
 * the directory cannot be read (errno). */
int shunt_sm_attached(const char *dir);

/* Can this kernel run the path, as far as a sockhash can be made: 1; 0
 * when it lacks something, -1 when this process may not tell (no
 * privilege); why says it. */
int shunt_sm_probe(char *why, size_t len);

/* The first cgroup2 mount (the root of the cgroup v2 hierarchy, where the
 * path attaches by default) into buf.  0, or -1 when none or too long. */
int shunt_sm_cgroup2_root(char *buf, size_t len);

/* Whether the directory open as fd is one the path can attach to (of a
 * cgroup v2 hierarchy): 0; otherwise -1 and why says so, naming path and
 * where cgroup v2 is mounted.  A v1 controller's directory, or a plain
 * one, fails only at attach, as EBADF, which names nothing. */
int shunt_sm_cgroup_check(int fd, const char *path, char *why, size_t len);

#ifndef SHUNT_NO_INTERPOSE
/* The shim: keep socket fd (a client about to connect) off the sockmap
 * path, when a shuntd runs it (a connection offered to shm).  Costs two
 * system calls; one failed lookup a second while no shuntd runs it. */
void shunt_sm_keep_off(int fd);
#endif

#endif
