#include "waiter.h"
#include "common.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static const char *const mode_names[W_NMODES] = {
	"poll", "ppoll", "select", "pselect", "epoll", "epoll-et",
	"epoll-oneshot", "epoll-pwait", "epoll-pwait2",
};

int wait_mode_parse(const char *name)
{
	for (int i = 0; i < W_NMODES; i++)
		if (strcmp(name, mode_names[i]) == 0)
			return i;
	return -1;
}

const char *wait_mode_name(int mode) { return mode_names[mode]; }

struct slot {
	int fd;          /* -1 when free */
	uint32_t tag;
	int in, out;
	int armed;       /* epoll: registered; oneshot: needs re-arm when 0 */
};

struct waiter {
	int mode;
	int max;
	int epfd;
	struct slot *s;   /* indexed by fd for simplicity */
	int nfd;          /* highest fd + 1 in use */
};

static int is_epoll(int mode) { return mode >= W_EPOLL; }

struct waiter *waiter_new(int mode, int maxfds)
{
	struct waiter *w = calloc(1, sizeof *w);
	if (!w)
		fail("oom");
	w->mode = mode;
	w->max = maxfds;
	w->s = calloc((size_t)maxfds, sizeof *w->s);
	if (!w->s)
		fail("oom");
	for (int i = 0; i < maxfds; i++)
		w->s[i].fd = -1;
	w->epfd = -1;
	if (is_epoll(mode)) {
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (w->epfd < 0)
			fail_errno("epoll_create1");
	}
	if ((mode == W_SELECT || mode == W_PSELECT) && maxfds > FD_SETSIZE)
		w->max = FD_SETSIZE;
	return w;
}

static uint32_t ev_mask(struct waiter *w, struct slot *s)
{
	uint32_t m = 0;
	if (w->mode == W_EPOLL_ET)
		return EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	if (s->in)
		m |= EPOLLIN | EPOLLRDHUP;
	if (s->out)
		m |= EPOLLOUT;
	if (w->mode == W_EPOLL_ONESHOT)
		m |= EPOLLONESHOT;
	return m;
}

static void ep_apply(struct waiter *w, struct slot *s, int first)
{
	struct epoll_event ev;
	memset(&ev, 0, sizeof ev);
	ev.events = ev_mask(w, s);
	ev.data.fd = s->fd;
	if (epoll_ctl(w->epfd, first ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, s->fd, &ev) < 0)
		fail_errno("epoll_ctl(%s, fd %d)", first ? "ADD" : "MOD", s->fd);
	s->armed = 1;
}

void waiter_set(struct waiter *w, int fd, uint32_t tag, int want_in, int want_out)
{
	if (fd < 0 || fd >= w->max)
		fail("fd %d out of waiter range %d", fd, w->max);
	struct slot *s = &w->s[fd];
	int first = s->fd < 0;
	int changed = first || s->in != !!want_in || s->out != !!want_out;
	s->fd = fd;
	s->tag = tag;
	s->in = !!want_in;
	s->out = !!want_out;
	if (fd + 1 > w->nfd)
		w->nfd = fd + 1;
	if (is_epoll(w->mode)) {
		if (first)
			ep_apply(w, s, 1);
		else if (w->mode == W_EPOLL_ONESHOT ? (changed || !s->armed) :
			 (changed && w->mode != W_EPOLL_ET))
			ep_apply(w, s, 0);
	}
}

void waiter_del(struct waiter *w, int fd)
{
	struct slot *s = &w->s[fd];
	if (s->fd < 0)
		return;
	if (is_epoll(w->mode) && epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
		fail_errno("epoll_ctl(DEL, fd %d)", fd);
	s->fd = -1;
	while (w->nfd > 0 && w->s[w->nfd - 1].fd < 0)
		w->nfd--;
}

int waiter_wait(struct waiter *w, int timeout_ms,
		void (*cb)(void *arg, uint32_t tag, int in, int out, int err),
		void *arg)
{
	int n, ready = 0;
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
	sigset_t empty;
	sigemptyset(&empty);

	if (is_epoll(w->mode)) {
		struct epoll_event ev[64];
		do {
			switch (w->mode) {
			case W_EPOLL_PWAIT:
				n = epoll_pwait(w->epfd, ev, 64, timeout_ms, &empty);
				break;
			case W_EPOLL_PWAIT2:
				n = epoll_pwait2(w->epfd, ev, 64, &ts, &empty);
				break;
			default:
				n = epoll_wait(w->epfd, ev, 64, timeout_ms);
			}
		} while (n < 0 && errno == EINTR);
		if (n < 0)
			fail_errno("%s", mode_names[w->mode]);
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			if (fd < 0 || fd >= w->max || w->s[fd].fd != fd)
				fail("%s returned event for unknown fd %d", mode_names[w->mode], fd);
			if (w->mode == W_EPOLL_ONESHOT)
				w->s[fd].armed = 0;
			uint32_t e = ev[i].events;
			cb(arg, w->s[fd].tag, !!(e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)),
			   !!(e & EPOLLOUT), !!(e & EPOLLERR));
		}
		/* Re-arm one-shot entries that fired and are still registered. */
		if (w->mode == W_EPOLL_ONESHOT)
			for (int fd = 0; fd < w->nfd; fd++)
				if (w->s[fd].fd >= 0 && !w->s[fd].armed)
					ep_apply(w, &w->s[fd], 0);
		return n;
	}

	if (w->mode == W_POLL || w->mode == W_PPOLL) {
		struct pollfd *p = calloc((size_t)w->nfd + 1, sizeof *p);
		int np = 0;
		for (int fd = 0; fd < w->nfd; fd++) {
			struct slot *s = &w->s[fd];
			if (s->fd < 0)
				continue;
			p[np].fd = fd;
			p[np].events = (short)((s->in ? POLLIN | POLLRDHUP : 0) | (s->out ? POLLOUT : 0));
			np++;
		}
		do {
			n = w->mode == W_POLL ? poll(p, (nfds_t)np, timeout_ms) :
						ppoll(p, (nfds_t)np, &ts, &empty);
		} while (n < 0 && errno == EINTR);
		if (n < 0)
			fail_errno("%s", mode_names[w->mode]);
		for (int i = 0; i < np; i++) {
			short r = p[i].revents;
			if (!r)
				continue;
			if (r & POLLNVAL)
				fail("%s: POLLNVAL on fd %d", mode_names[w->mode], p[i].fd);
			ready++;
			cb(arg, w->s[p[i].fd].tag, !!(r & (POLLIN | POLLRDHUP | POLLHUP)),
			   !!(r & POLLOUT), !!(r & POLLERR));
		}
		free(p);
		return ready;
	}

	fd_set rs, ws, es;
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_ZERO(&es);
	for (int fd = 0; fd < w->nfd; fd++) {
		struct slot *s = &w->s[fd];
		if (s->fd < 0)
			continue;
		if (s->in)
			FD_SET(fd, &rs);
		if (s->out)
			FD_SET(fd, &ws);
		FD_SET(fd, &es);
	}
	do {
		struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
		n = w->mode == W_SELECT ? select(w->nfd, &rs, &ws, &es, &tv) :
					  pselect(w->nfd, &rs, &ws, &es, &ts, &empty);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		fail_errno("%s", mode_names[w->mode]);
	for (int fd = 0; fd < w->nfd; fd++) {
		struct slot *s = &w->s[fd];
		if (s->fd < 0)
			continue;
		int in = FD_ISSET(fd, &rs), out = FD_ISSET(fd, &ws), err = FD_ISSET(fd, &es);
		if (in || out || err) {
			ready++;
			cb(arg, s->tag, !!in, !!out, !!err);
		}
	}
	return ready;
}

void waiter_free(struct waiter *w)
{
	if (w->epfd >= 0)
		close(w->epfd);
	free(w->s);
	free(w);
}
