#include "shuntd_ev.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct ev_file {
	int mask;        /* -1: not watched */
	ev_file_fn *fn;
	void *data;
};

struct ev_timer {
	unsigned period_ms;
	uint64_t next_ms;
	ev_timer_fn *fn;
	void *data;
};

struct ev_loop {
	int epfd;
	int stop;
	int ntimers;
	struct ev_timer timers[EV_MAX_TIMERS];
	struct ev_file files[EV_MAX_FDS];
};

uint64_t ev_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct ev_loop *ev_create(void)
{
	struct ev_loop *el = calloc(1, sizeof *el);
	if (!el)
		return NULL;
	el->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (el->epfd < 0) {
		free(el);
		return NULL;
	}
	for (int i = 0; i < EV_MAX_FDS; i++)
		el->files[i].mask = -1;
	return el;
}

void ev_free(struct ev_loop *el)
{
	if (!el)
		return;
	close(el->epfd);
	free(el);
}

int ev_watch(struct ev_loop *el, int fd, int mask, ev_file_fn *fn, void *data)
{
	if (fd < 0 || fd >= EV_MAX_FDS) {
		errno = EMFILE;
		return -1;
	}
	struct ev_file *f = &el->files[fd];
	struct epoll_event ev = {.data.fd = fd};
	if (mask & EV_READ)
		ev.events |= EPOLLIN;
	if (mask & EV_WRITE)
		ev.events |= EPOLLOUT;
	int op = f->mask < 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
	if (epoll_ctl(el->epfd, op, fd, &ev) < 0)
		return -1;
	f->mask = mask;
	f->fn = fn;
	f->data = data;
	return 0;
}

void ev_unwatch(struct ev_loop *el, int fd)
{
	if (fd < 0 || fd >= EV_MAX_FDS || el->files[fd].mask < 0)
		return;
	epoll_ctl(el->epfd, EPOLL_CTL_DEL, fd, NULL);
	el->files[fd].mask = -1;
}

int ev_every(struct ev_loop *el, unsigned period_ms, ev_timer_fn *fn, void *data)
{
	if (el->ntimers == EV_MAX_TIMERS || !period_ms)
		return -1;
	el->timers[el->ntimers++] =
		(struct ev_timer){period_ms, ev_now_ms() + period_ms, fn, data};
	return 0;
}

void ev_stop(struct ev_loop *el)
{
	el->stop = 1;
}

static int next_timeout(struct ev_loop *el)
{
	if (!el->ntimers)
		return -1;
	uint64_t now = ev_now_ms(), next = UINT64_MAX;
	for (int i = 0; i < el->ntimers; i++)
		if (el->timers[i].next_ms < next)
			next = el->timers[i].next_ms;
	return next <= now ? 0 : (int)(next - now);
}

static void run_timers(struct ev_loop *el)
{
	uint64_t now = ev_now_ms();
	for (int i = 0; i < el->ntimers && !el->stop; i++) {
		struct ev_timer *t = &el->timers[i];
		if (t->next_ms > now)
			continue;
		/* No catching up after a stall: once, then a period later. */
		t->next_ms = now + t->period_ms;
		t->fn(el, t->data);
	}
}

int ev_run(struct ev_loop *el)
{
	while (!el->stop)
		if (ev_once(el, -1) < 0)
			return -1;
	return 0;
}

int ev_once(struct ev_loop *el, int timeout_ms)
{
	struct epoll_event evs[64];
	int t = next_timeout(el);
	if (timeout_ms >= 0 && (t < 0 || timeout_ms < t))
		t = timeout_ms;
	int n = epoll_wait(el->epfd, evs, 64, t);
	if (n < 0)
		return errno == EINTR ? 0 : -1;
	for (int i = 0; i < n && !el->stop; i++) {
		int fd = evs[i].data.fd;
		struct ev_file *f = &el->files[fd];
		/* A handler earlier in this batch may have closed it. */
		if (f->mask < 0)
			continue;
		int mask = 0;
		if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			mask |= EV_READ;
		if (evs[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
			mask |= EV_WRITE;
		f->fn(el, fd, f->data, mask);
	}
	run_timers(el);
	return n;
}
