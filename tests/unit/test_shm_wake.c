/* Wake sockets (shm_wake.c) against core alone: where a connection binds
 * them (the abstract namespace inside one network namespace, names in o/
 * between namespaces), that the id a sleeper publishes is the one its
 * socket has, that a waker's datagram reaches it with no file anywhere,
 * that a kept socket keeps its id, and that a server refuses an offer
 * whose abstract names could not reach it.  Both ends live in the test
 * process, on a private rundir (scratch_rundir.c). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn_pair.h"
#include "core/shunt_fdtab.h"
#include "core/shunt_registry.h"
#include "core/shunt_rundir.h"
#include "core/shunt_transport.h"
#include "core/shunt_tuple.h"
#include "shm/shm_internal.h"

const struct shunt_transport_ops *const shunt_transports[] = {&shunt_transport_shm, NULL};

static struct shm_conn *conn_of(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	cr_assert(e && e->conn, "fd %d is not accelerated", fd);
	return (struct shm_conn *)e->conn;
}

static struct shunt_tuple tuple(int family, const char *c, const char *s)
{
	struct sockaddr_storage a = {0}, b = {0};
	if (family == AF_INET) {
		struct sockaddr_in *x = (struct sockaddr_in *)&a, *y = (struct sockaddr_in *)&b;
		x->sin_family = y->sin_family = AF_INET;
		x->sin_port = htons(40000);
		y->sin_port = htons(80);
		cr_assert(inet_pton(AF_INET, c, &x->sin_addr) == 1);
		cr_assert(inet_pton(AF_INET, s, &y->sin_addr) == 1);
	} else {
		struct sockaddr_in6 *x = (struct sockaddr_in6 *)&a, *y = (struct sockaddr_in6 *)&b;
		x->sin6_family = y->sin6_family = AF_INET6;
		x->sin6_port = htons(40000);
		y->sin6_port = htons(80);
		cr_assert(inet_pton(AF_INET6, c, &x->sin6_addr) == 1);
		cr_assert(inet_pton(AF_INET6, s, &y->sin6_addr) == 1);
	}
	struct shunt_tuple t;
	cr_assert(shunt_tuple_make(&t, (struct sockaddr *)&a, (struct sockaddr *)&b) == 0);
	return t;
}

/* One decision per connection, from its route: a loopback destination or
 * the client's own address stays inside the namespace; any other route
 * may cross to another one (two namespaces sharing a rundir). */
Test(shm_wake, the_route_decides_abstract_or_named)
{
	struct shunt_tuple t;
	t = tuple(AF_INET, "127.0.0.1", "127.0.0.1");
	cr_expect(shm_wake_abstract(&t));
	t = tuple(AF_INET, "127.0.0.2", "127.0.0.1");
	cr_expect(shm_wake_abstract(&t));
	t = tuple(AF_INET, "198.18.0.5", "198.18.0.5");
	cr_expect(shm_wake_abstract(&t), "a connection to the namespace's own address");
	t = tuple(AF_INET, "198.18.0.2", "198.18.0.1");
	cr_expect_not(shm_wake_abstract(&t), "a route through a veth");
	t = tuple(AF_INET6, "::1", "::1");
	cr_expect(shm_wake_abstract(&t));
	t = tuple(AF_INET6, "2001:db8::1", "2001:db8::1");
	cr_expect(shm_wake_abstract(&t));
	t = tuple(AF_INET6, "2001:db8::2", "2001:db8::1");
	cr_expect_not(shm_wake_abstract(&t));
}

Test(shm_wake, the_abstract_name_is_the_id_in_hex)
{
	struct sockaddr_un a;
	socklen_t len = shm_wake_abstract_addr(&a, 0x0123456789abcdefull);
	const char want[] = "shunt-w-0123456789abcdef";
	cr_assert_eq(len, offsetof(struct sockaddr_un, sun_path) + 1 + sizeof want - 1);
	cr_assert_eq(a.sun_family, AF_UNIX);
	cr_assert_eq(a.sun_path[0], 0, "abstract: no file");
	cr_assert(!memcmp(a.sun_path + 1, want, sizeof want - 1));
}

/* The socket's own address, which must be the published id's name. */
static uint64_t bound_id(int fd)
{
	struct sockaddr_un a, want;
	socklen_t len = sizeof a;
	cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	cr_assert_gt(len, offsetof(struct sockaddr_un, sun_path) + 1);
	cr_assert_eq(a.sun_path[0], 0, "wake socket %d is not abstract: %s", fd, a.sun_path);
	unsigned long long id;
	cr_assert(sscanf(a.sun_path + 1, SHM_WAKE_ABSTRACT_PREFIX "%16llx", &id) == 1);
	cr_assert_eq(len, shm_wake_abstract_addr(&want, id));
	cr_assert(!memcmp(&a, &want, len));
	return id;
}

static int sockets_in_o(void)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/o", shunt_rundir());
	DIR *d = opendir(dir);
	cr_assert(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISSOCK(st.st_mode))
			n++;
	}
	closedir(d);
	return n;
}

Test(shm_wake, inside_one_namespace_wake_sockets_are_abstract_and_published)
{
	struct conn_pair p;
	pair_open(&p);
	struct shm_conn *c = conn_of(p.cfd), *s = conn_of(p.sfd);
	cr_assert(c->wake_abs && s->wake_abs);
	cr_assert_neq(shunt_netns(), 0);
	cr_assert_eq(c->hdr->netns[SHM_CLIENT], shunt_netns());
	cr_assert_eq(c->hdr->netns[SHM_SERVER], shunt_netns());
	uint64_t ids[4];
	struct shm_conn *end[2] = {c, s};
	for (int side = 0; side < 2; side++)
		for (int role = 0; role < 2; role++) {
			int fd = shm_wake_fd(end[side], role);
			cr_assert_geq(fd, 0);
			uint64_t id = bound_id(fd);
			cr_assert_neq(id, 0);
			cr_assert_eq(c->hdr->wake_id[side][role], id, "published id, side %d role %d",
				     side, role);
			ids[side * 2 + role] = id;
		}
	for (int i = 0; i < 4; i++)
		for (int j = i + 1; j < 4; j++)
			cr_assert_neq(ids[i], ids[j]);
	cr_assert_eq(sockets_in_o(), 0, "a wake socket has a file in o/");
	pair_close(&p);
}

/* A waiter armed on its wake socket is woken by the peer's datagram to the
 * abstract name, though the rundir holds no name at all any more. */
Test(shm_wake, a_sleeper_hears_the_peer_with_no_name_in_the_rundir)
{
	struct conn_pair p;
	pair_open(&p);
	struct shm_conn *s = conn_of(p.sfd);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'/*", shunt_rundir());
	cr_assert(system(cmd) == 0);
	struct pollfd w[SHUNT_ARM_MAX];
	int ms = -1;
	int n = s->base.ops->wait->arm(&s->base, POLLIN, w, &ms);
	cr_assert_eq(n, 2, "the wake socket and the TCP socket");
	cr_assert_neq(w[0].fd, p.sfd);
	cr_assert_eq(poll(w, (nfds_t)n, 0), 0, "nothing to hear yet");
	t_send_all(p.cfd, "ping", 4);
	/* Bounded only to turn a lost wakeup into a failure. */
	cr_assert_eq(poll(w, 1, 20000), 1, "no wakeup reached the abstract wake socket");
	cr_assert(w[0].revents & POLLIN);
	s->base.ops->wait->disarm(&s->base, POLLIN, w, n);
	char b[4];
	t_recv_all(p.sfd, b, 4);
	cr_assert(!memcmp(b, "ping", 4));
	pair_close(&p);
}

/* A waker sends nothing while nobody sleeps, and one datagram a sleep. */
Test(shm_wake, no_datagram_without_a_sleeper)
{
	struct conn_pair p;
	pair_open(&p);
	struct shm_conn *s = conn_of(p.sfd);
	int fd = shm_wake_fd(s, SHM_WAKE_RX);
	cr_assert_geq(fd, 0);
	t_send_all(p.cfd, "abc", 3);
	char b[8];
	cr_assert_eq(recv(fd, b, sizeof b, MSG_DONTWAIT), -1, "a datagram with nobody armed");
	cr_assert_eq(errno, EAGAIN);
	t_recv_all(p.sfd, b, 3);
	pair_close(&p);
}

/* A socket a closed connection gave back serves the next one with its id:
 * no bind, no name. */
Test(shm_wake, a_kept_socket_keeps_its_id)
{
	struct conn_pair p;
	pair_open(&p);
	uint64_t id = bound_id(shm_wake_fd(conn_of(p.sfd), SHM_WAKE_RX));
	pair_close(&p);
	pair_open(&p);
	struct shm_conn *s = conn_of(p.sfd);
	uint64_t again = bound_id(shm_wake_fd(s, SHM_WAKE_RX));
	cr_assert_eq(again, id, "the kept socket was not reused");
	cr_assert_eq(s->hdr->wake_id[SHM_SERVER][SHM_WAKE_RX], id);
	pair_close(&p);
}

/* Between namespaces (a route through another address) the wake sockets
 * are named in o/, as before: a name crosses namespaces.  Forced here on
 * a loopback pair before either end binds one. */
Test(shm_wake, between_namespaces_wake_sockets_are_named)
{
	struct conn_pair p;
	pair_open(&p);
	struct shunt_tuple far = tuple(AF_INET, "198.18.0.2", "198.18.0.1");
	struct shm_conn *c = conn_of(p.cfd), *s = conn_of(p.sfd);
	cr_assert(shm_wake_bind_peer(c, &far) == 0 && shm_wake_bind_peer(s, &far) == 0);
	cr_assert(!c->wake_abs && !s->wake_abs);
	/* The server's name of the role, <key>.s, as the client sends to it. */
	char want[128];
	snprintf(want, sizeof want, "/%s.s", s->key);
	const char *peer = c->peer[SHM_WAKE_RX].sun_path;
	cr_assert(strlen(peer) > strlen(want) && !strcmp(peer + strlen(peer) - strlen(want), want),
		  "%s", peer);
	struct pollfd w[SHUNT_ARM_MAX];
	int ms = -1;
	int n = c->base.ops->wait->arm(&c->base, POLLIN, w, &ms);
	cr_assert_eq(n, 2);
	struct sockaddr_un a;
	socklen_t len = sizeof a;
	cr_assert(getsockname(w[0].fd, (struct sockaddr *)&a, &len) == 0);
	cr_assert_neq(a.sun_path[0], 0, "named, not abstract");
	struct stat st;
	cr_assert(stat(a.sun_path, &st) == 0 && S_ISSOCK(st.st_mode), "%s", a.sun_path);
	cr_assert_eq(c->hdr->wake_id[SHM_CLIENT][SHM_WAKE_RX], 0, "no id for a named socket");
	t_send_all(p.sfd, "pong", 4);
	cr_assert_eq(poll(w, 1, 20000), 1, "no wakeup reached the named wake socket");
	c->base.ops->wait->disarm(&c->base, POLLIN, w, n);
	char b[4];
	t_recv_all(p.cfd, b, 4);
	cr_assert(!memcmp(b, "pong", 4));
	pair_close(&p);
	/* Kept, under a name of the process's own (w-<pid>-<n>). */
	cr_assert_eq(sockets_in_o(), 1);
	cr_assert(stat(a.sun_path, &st) < 0 && errno == ENOENT, "the connection's name stayed");
}

/* A client whose route looks local but whose namespace is not ours (a NAT
 * between namespaces) would bind abstract names our wakeups cannot reach:
 * refused, and its bytes replayed over TCP. */
Test(shm_wake, an_offer_from_another_namespace_with_abstract_names_is_refused)
{
	struct conn_pair p;
	pair_listen(&p, 1);
	pair_connect(&p);
	struct shm_conn *c = conn_of(p.cfd);
	c->hdr->netns[SHM_CLIENT] = shunt_netns() + 1;
	uint8_t out[1000], in[1000];
	pattern(out, sizeof out, 0, 9);
	t_send_all(p.cfd, out, sizeof out);
	pair_accept(&p, 1);
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.sfd), "bad-offer");
	/* The client's next call sees the refusal and replays. */
	char b;
	cr_assert_eq(t_recv(p.cfd, &b, 1, MSG_DONTWAIT), -1);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_KERNEL);
	t_recv_all(p.sfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 9));
	pair_close(&p);
}
