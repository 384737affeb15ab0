/* shuntd's event loop, in the manner of Redis's ae.c: file events on fds
 * (epoll underneath) and a few periodic timers, one thread, no callbacks
 * that block. */
#ifndef SHUNTD_EV_H
#define SHUNTD_EV_H

#include <stdint.h>

#define EV_READ 1
#define EV_WRITE 2
#define EV_MAX_FDS 65536
#define EV_MAX_TIMERS 8

struct ev_loop;
typedef void ev_file_fn(struct ev_loop *el, int fd, void *data, int mask);
typedef void ev_timer_fn(struct ev_loop *el, void *data);

struct ev_loop *ev_create(void);
void ev_free(struct ev_loop *el);

/* Watch fd for mask (EV_READ|EV_WRITE; 0 keeps it registered but idle),
 * replacing what was watched.  0, or -1 with errno. */
int ev_watch(struct ev_loop *el, int fd, int mask, ev_file_fn *fn, void *data);
void ev_unwatch(struct ev_loop *el, int fd);

/* Call fn every period_ms (first after one period). */
int ev_every(struct ev_loop *el, unsigned period_ms, ev_timer_fn *fn, void *data);

/* Run until ev_stop(); 0, or -1 with errno if epoll fails. */
int ev_run(struct ev_loop *el);
/* One turn: wait at most timeout_ms (-1: until the next timer) for file
 * events, handle them and the timers due.  The events handled, or -1. */
int ev_once(struct ev_loop *el, int timeout_ms);
void ev_stop(struct ev_loop *el);

uint64_t ev_now_ms(void);

#endif
