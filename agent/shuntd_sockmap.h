/* shuntd's sockmap path (shuntd --sockmap, sockmap = on): the BPF programs
 * of bpf/shunt_sockmap.bpf.c loaded, attached to a cgroup, pinned under
 * sockmap_pin; detached at exit. */
#ifndef SHUNTD_SOCKMAP_H
#define SHUNTD_SOCKMAP_H

#include <stddef.h>
#include <stdio.h>

struct shunt_config;

/* Remove what a shuntd before this one left under cfg's sockmap_pin (its
 * link detached from its cgroup, its maps unpinned).  0, or -1 with err. */
int sockmap_clean(const struct shunt_config *cfg, char *err, size_t errlen);
/* Load, attach and pin.  0, or -1 with the reason in err (nothing left
 * attached). */
int sockmap_start(const struct shunt_config *cfg, char *err, size_t errlen);
/* Detach and unpin (at exit); nothing when not started. */
void sockmap_stop(void);
/* The sockmap lines of GET /metrics. */
void sockmap_metrics(FILE *f);

#endif
