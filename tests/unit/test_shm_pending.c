/* Announced offers (shm/shm_pending.c): a client announces its offer
 * before connect() and names it after; an accept() that finds no offer
 * waits only while an announcement is held, whoever holds it, and never
 * for a client that died.  Processes are forked where "another process"
 * matters: a lock test through one's own description does not see one's
 * own locks. */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn_pair.h"
#include "core/shunt_decide.h"
#include "core/shunt_transport.h"
#include "core/shunt_tuple.h"
#include "shm/shm_internal.h"

const struct shunt_transport_ops *const shunt_transports[] = {&shunt_transport_shm, NULL};

static struct sockaddr_in dst_of(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int bucket_of(const struct sockaddr_in *a)
{
	uint8_t a16[16];
	uint16_t port;
	cr_assert_eq(shunt_addr16((const struct sockaddr *)a, a16, &port), 0);
	return shm_pending_bucket(a16, port);
}

/* What another process sees of bucket b: 1 held, 0 not. */
static int held_elsewhere(int b)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0)
		_exit(shm_pending_held(b) ? 1 : 0);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

Test(shm_pending, an_announcement_is_seen_elsewhere_until_it_ends)
{
	struct sockaddr_in d = dst_of(20001);
	int b = shm_pending_begin((struct sockaddr *)&d);
	cr_assert_geq(b, 0, "no announcement could be made");
	cr_assert_eq(b, bucket_of(&d));
	cr_assert_eq(held_elsewhere(b), 1);
	/* Our own accept() sees it too (not through the lock). */
	cr_assert_eq(shm_pending_held(b), 1);
	uint32_t seq = shm_pending_seq(b);
	shm_pending_end(b);
	cr_assert_neq(shm_pending_seq(b), seq, "ending moves the sequence number");
	cr_assert_eq(held_elsewhere(b), 0);
	cr_assert_eq(shm_pending_held(b), 0);
}

Test(shm_pending, two_connects_of_one_process_hold_it_until_both_end)
{
	struct sockaddr_in d = dst_of(20002);
	int b1 = shm_pending_begin((struct sockaddr *)&d);
	int b2 = shm_pending_begin((struct sockaddr *)&d);
	cr_assert_geq(b1, 0);
	cr_assert_eq(b1, b2);
	shm_pending_end(b1);
	cr_assert_eq(held_elsewhere(b1), 1, "one connect still in flight");
	shm_pending_end(b2);
	cr_assert_eq(held_elsewhere(b1), 0);
}

/* A client killed between its announcement and its offer must not hold
 * accept()s up: the lock dies with it. */
Test(shm_pending, a_client_killed_mid_connect_holds_nobody_up)
{
	struct sockaddr_in d = dst_of(20003);
	int b = bucket_of(&d);
	int go[2];
	cr_assert_eq(pipe(go), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		char c = shm_pending_begin((struct sockaddr *)&d) == b ? 'y' : 'n';
		(void)!write(go[1], &c, 1);
		pause();
		_exit(0);
	}
	char c = 0;
	cr_assert_eq(read(go[0], &c, 1), 1);
	cr_assert_eq(c, 'y');
	cr_assert_eq(shm_pending_held(b), 1, "the child's announcement");
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	cr_assert_eq(shm_pending_held(b), 0);
}

/* The server accepts before the client has named its offer (the client's
 * connect() returned; it is preempted before the name): the accept waits
 * for the name, and both ends take shm. */
struct acceptor {
	struct conn_pair *p;
};

static void *accept_thread(void *arg)
{
	pair_accept(((struct acceptor *)arg)->p, 1);
	return NULL;
}

Test(shm_pending, an_accept_before_the_offer_is_named_waits_for_it)
{
	struct conn_pair p;
	pair_listen(&p, 1);
	p.cfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(p.cfd >= 0);
	shunt_conn_new_tcp(p.cfd, 0);
	struct shunt_fd *e = shunt_fd_get(p.cfd);
	shunt_conn_on_connect(p.cfd, e, (struct sockaddr *)&p.dst, p.dlen);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_ACCEL, "client: %s", fd_reason(p.cfd));
	cr_assert_eq(connect(p.cfd, (struct sockaddr *)&p.dst, p.dlen), 0);
	/* The connection is in the accept queue; its offer is not named. */
	struct acceptor a = {&p};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, accept_thread, &a), 0);
	/* Whether the accept is already waiting or not yet started, the
	 * outcome must be the same. */
	usleep(20000);
	shunt_conn_decided(p.cfd, e, (struct sockaddr *)&p.dst, p.dlen);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_ACCEL, "server: %s", fd_reason(p.sfd));
	cr_assert_str_eq(fd_transport(p.sfd), "shm");
	uint8_t out[3000], in[3000];
	pattern(out, sizeof out, 0, 5);
	t_send_all(p.cfd, out, sizeof out);
	t_recv_all(p.sfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 5));
	pair_close(&p);
}

/* A client that connected without binding first: the kernel picked its
 * port, as without shunt. */
Test(shm_pending, the_client_is_not_bound_before_it_connects)
{
	struct conn_pair p;
	pair_listen(&p, 1);
	p.cfd = socket(AF_INET, SOCK_STREAM, 0);
	shunt_conn_new_tcp(p.cfd, 0);
	struct shunt_fd *e = shunt_fd_get(p.cfd);
	shunt_conn_on_connect(p.cfd, e, (struct sockaddr *)&p.dst, p.dlen);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_ACCEL, "client: %s", fd_reason(p.cfd));
	struct sockaddr_in l;
	socklen_t ll = sizeof l;
	cr_assert_eq(getsockname(p.cfd, (struct sockaddr *)&l, &ll), 0);
	cr_assert_eq(l.sin_port, 0, "bound to port %u before connect()", ntohs(l.sin_port));
	cr_assert_eq(connect(p.cfd, (struct sockaddr *)&p.dst, p.dlen), 0);
	shunt_conn_decided(p.cfd, e, (struct sockaddr *)&p.dst, p.dlen);
	pair_accept(&p, 1);
	cr_assert_str_eq(fd_transport(p.cfd), "shm");
	cr_assert_str_eq(fd_transport(p.sfd), "shm");
	pair_close(&p);
}
