/* The shm transport's rendezvous against core alone (no interposers):
 * offer and commit, a listener that is not registered, a server that
 * refuses, a server without shunt, an offer nobody can read.  Both ends
 * live in the test process, on a private rundir (scratch_rundir.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn_pair.h"
#include "core/shunt_reason.h"
#include "core/shunt_rundir.h"
#include "core/shunt_transport.h"
#include "core/shunt_tuple.h"
#include "shm/shm_internal.h"

/* The transports of this program: shm alone. */
const struct shunt_transport_ops *const shunt_transports[] = {&shunt_transport_shm, NULL};

Test(shm_offer, commit_moves_bytes_both_ways_on_shm)
{
	struct conn_pair p;
	pair_open(&p);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_ACCEL, "client: %s", fd_reason(p.cfd));
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_ACCEL, "server: %s", fd_reason(p.sfd));
	cr_assert_str_eq(fd_transport(p.cfd), "shm");
	cr_assert_str_eq(fd_transport(p.sfd), "shm");

	uint8_t out[5000], in[5000];
	pattern(out, sizeof out, 0, 1);
	t_send_all(p.cfd, out, sizeof out);
	t_recv_all(p.sfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 1));
	pattern(out, sizeof out, 0, 2);
	t_send_all(p.sfd, out, sizeof out);
	t_recv_all(p.cfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 2));
	/* Nothing of it went over TCP. */
	char b;
	cr_assert_eq(recv(p.sfd, &b, 1, MSG_DONTWAIT | MSG_PEEK), -1);
	pair_close(&p);
}

Test(shm_offer, a_listener_not_registered_gets_no_offer)
{
	struct conn_pair p;
	pair_listen(&p, 0);
	pair_connect(&p);
	pair_accept(&p, 1);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.cfd), "no-peer-shim");
	cr_assert_str_eq(fd_reason(p.sfd), "no-peer-shim");
	pair_close(&p);
}

/* A server that took the kernel path (its rule, its config) refuses: the
 * client replays what it wrote meanwhile over TCP, at once. */
Test(shm_offer, a_refusal_replays_what_the_client_wrote)
{
	struct conn_pair p;
	pair_listen(&p, 1);
	pair_connect(&p);
	uint8_t out[3000], in[3000];
	pattern(out, sizeof out, 0, 3);
	t_send_all(p.cfd, out, sizeof out); /* into the ring: nobody took it yet */
	pair_accept(&p, 0);
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	cr_assert(getpeername(p.sfd, (struct sockaddr *)&peer, &plen) == 0);
	shunt_transport_shm.decline(p.sfd, (struct sockaddr *)&peer, plen);

	/* The client's next call sees the refusal. */
	char b;
	cr_assert_eq(t_recv(p.cfd, &b, 1, MSG_DONTWAIT), -1);
	cr_assert_eq(errno, EAGAIN);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.cfd), "declined");
	t_recv_all(p.sfd, in, sizeof in); /* the plain socket */
	cr_assert(pattern_ok(in, sizeof in, 0, 3));
	pair_close(&p);
}

/* A server without shunt behind a registered address answers on TCP: the
 * client leaves its offer when the socket speaks, not at its deadline. */
Test(shm_offer, a_server_without_shunt_ends_the_offer)
{
	struct conn_pair p;
	pair_listen(&p, 1);
	pair_connect(&p);
	uint8_t out[2000], in[2000];
	pattern(out, sizeof out, 0, 4);
	t_send_all(p.cfd, out, sizeof out);
	pair_accept(&p, 0);
	cr_assert(send(p.sfd, "hello", 5, 0) == 5);
	char h[5];
	t_recv_all(p.cfd, h, sizeof h);
	cr_assert(!memcmp(h, "hello", 5));
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.cfd), "offer-timeout");
	t_recv_all(p.sfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 4));
	pair_close(&p);
}

/* A client that leaves its offer while a server's accept() holds it (the
 * name still there: found before the client dropped it) makes that
 * server's commit fail; the server says why: the client closed
 * (client-closed), or its deadline passed (offer-timeout).  Either way
 * the connection goes on over TCP. */
static void left_offer(int closing, const char *want)
{
	struct conn_pair p;
	pair_listen(&p, 1);
	pair_connect(&p);
	struct shunt_fd *e = shunt_fd_peek(p.cfd);
	cr_assert(e && e->conn);
	if (closing)
		shm_withdraw(e->conn); /* what close() does first */
	else
		shm_demote(e->conn, SHUNT_R_OFFER_TIMEOUT); /* the deadline */
	pair_accept(&p, 1);
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.sfd), want);
	cr_assert(send(p.cfd, "x", 1, 0) == 1);
	char b;
	cr_assert_eq(t_recv(p.sfd, &b, 1, 0), 1);
	cr_assert_eq(b, 'x');
	pair_close(&p);
}

Test(shm_offer, an_offer_left_by_a_closing_client_is_client_closed)
{
	left_offer(1, "client-closed");
}

Test(shm_offer, an_offer_left_at_its_deadline_is_offer_timeout)
{
	left_offer(0, "offer-timeout");
}

/* The other order of that race: the client's close looked at the state
 * while it was still OFFERED, and the server committed before the client
 * withdrew.  The connection is then closed as a committed one: the
 * server reads what the client wrote, then EOF, all on shm, and never
 * hears of a demotion. */
Test(shm_offer, a_close_that_loses_the_race_to_a_commit_closes_the_connection)
{
	struct conn_pair p;
	pair_open(&p);
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_ACCEL, "server: %s", fd_reason(p.sfd));
	struct shunt_fd *e = shunt_fd_peek(p.cfd);
	cr_assert(e && e->conn);
	struct shm_conn *c = (struct shm_conn *)e->conn;
	cr_assert(t_send(p.cfd, "x", 1, 0) == 1);
	cr_assert_eq(shm_withdraw(e->conn), 0, "withdrew a committed connection");
	cr_assert_eq(__atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE), SHM_COMMITTED);
	pair_close_fd(p.cfd); /* the rest of close() */
	p.cfd = -1;
	char b[2];
	cr_assert_eq(t_recv(p.sfd, b, 1, 0), 1);
	cr_assert_eq(b[0], 'x');
	cr_assert_eq(t_recv(p.sfd, b, 1, 0), 0, "EOF after the client's byte");
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_ACCEL, "server: %s", fd_reason(p.sfd));
	cr_assert_str_eq(fd_transport(p.sfd), "shm");
	pair_close(&p);
}

/* Bad handshake input: the connection falls back, nothing breaks.  The
 * offer names no slot, planted in the table (how clients name offers), as
 * a counted symlink (their fallback, which servers look for while the
 * table counts one), or as an uncounted one (how a client of a build from
 * before the table names offers: found by the server's last look, so that
 * client is declined at once instead of waiting out its deadline). */
static void bad_target(int as_link)
{
	struct conn_pair p;
	pair_listen(&p, 1);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	p.cfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(bind(p.cfd, (struct sockaddr *)&a, sizeof a) == 0);
	struct sockaddr_storage local;
	socklen_t ll = sizeof local;
	cr_assert(getsockname(p.cfd, (struct sockaddr *)&local, &ll) == 0);
	struct shunt_tuple t;
	char key[32], path[SHUNT_PATH_MAX];
	cr_assert(shunt_tuple_make(&t, (struct sockaddr *)&local, (struct sockaddr *)&p.dst) == 0);
	shunt_tuple_key(&t, key, sizeof key);
	cr_assert(shunt_rundir_path(path, sizeof path, getenv("SHUNT_RUNDIR"), SHUNT_ROOM_OFFER,
				    "%s", key) == 0);
	if (as_link) {
		if (as_link == 1)
			shm_names_link(1);
		cr_assert(symlink("../../etc/passwd:0:4096", path) == 0);
	} else {
		cr_assert(shm_names_put(&t, "../../etc/passwd:0:4096") == 0);
	}
	cr_assert(connect(p.cfd, (struct sockaddr *)&p.dst, p.dlen) == 0);
	pair_accept(&p, 1);
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.sfd), "bad-offer");
	cr_assert(send(p.cfd, "x", 1, 0) == 1);
	char b;
	cr_assert_eq(t_recv(p.sfd, &b, 1, 0), 1);
	if (as_link == 1)
		cr_assert(shm_names_unlink(path) == 0);
	else if (as_link == 2)
		cr_assert(unlink(path) == 0);
	cr_assert_not(shm_names_links(), "the symlink count went back to 0");
	pair_close(&p);
}

Test(shm_offer, an_offer_that_names_no_slot_is_a_bad_offer)
{
	bad_target(0);
}

Test(shm_offer, a_symlink_offer_that_names_no_slot_is_a_bad_offer)
{
	bad_target(1);
}

Test(shm_offer, an_uncounted_symlink_offer_is_found_too)
{
	bad_target(2);
}

/* An offer named in the table is taken with it: no name is made in o/, and
 * none is left after the commit. */
Test(shm_offer, offers_are_named_in_the_table)
{
	struct conn_pair p;
	char dir[512];
	pair_listen(&p, 1);
	snprintf(dir, sizeof dir, "%s/o", shunt_rundir());
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	cr_assert(in >= 0);
	cr_assert(inotify_add_watch(in, dir, IN_CREATE) >= 0);
	pair_connect(&p);
	pair_accept(&p, 1);
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_ACCEL, "server: %s", fd_reason(p.sfd));
	/* Nothing named after the connection was made in o/ (an arena or the
	 * tables may be, once). */
	char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n = read(in, ev, sizeof ev);
	for (ssize_t o = 0; n > 0 && o < n;) {
		const struct inotify_event *ie = (const struct inotify_event *)(ev + o);
		if (ie->len)
			cr_expect(ie->name[0] == '.' || !strncmp(ie->name, "a-", 2) ||
					  !strncmp(ie->name, "t-", 2),
				  "made in o/ for one connection: %s", ie->name);
		o += (ssize_t)(sizeof *ie + ie->len);
	}
	close(in);
	DIR *d = opendir(dir);
	cr_assert(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		cr_assert(fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0);
		cr_expect_not(S_ISLNK(st.st_mode), "a symlink offer in o/: %s", e->d_name);
	}
	closedir(d);
	cr_assert_not(shm_names_links());
	pair_close(&p);
}

/* A ring arena appears under its name already locked by its owner (made
 * under another name, locked, then renamed): a sweeper that found it
 * unlocked would take it for a dead process's and remove it, and every
 * offer naming it would go unanswered (seen with several clients starting
 * at once).  The name must come by rename, never by creation. */
Test(shm_offer, an_arena_is_named_only_once_it_is_locked)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/o", shunt_rundir());
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	cr_assert(in >= 0);
	cr_assert(inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO) >= 0, "%s: %s", dir,
		  strerror(errno));
	struct conn_pair p;
	pair_open(&p);
	cr_assert_str_eq(fd_transport(p.cfd), "shm");
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n = read(in, buf, sizeof buf);
	cr_assert_gt(n, 0, "no event in %s", dir);
	int named = 0;
	for (char *q = buf; q < buf + n;) {
		struct inotify_event *ev = (struct inotify_event *)q;
		if (ev->len && !strncmp(ev->name, "a-", 2)) {
			cr_assert(!(ev->mask & IN_CREATE), "arena %s created under its name",
				  ev->name);
			named += (ev->mask & IN_MOVED_TO) != 0;
		}
		q += sizeof *ev + ev->len;
	}
	cr_assert_geq(named, 1, "no arena named");
	pair_close(&p);
	close(in);
}
