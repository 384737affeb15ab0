/* Demoting shm connections against core alone: every byte exactly once,
 * in order, whichever end leaves and whatever each had not read; bytes
 * nobody is left to replay go to a spill; a deferred FIN follows the
 * replay.  Both ends live in the test process (conn_pair.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn_pair.h"
#include "core/shunt_conn.h"
#include "core/shunt_transport.h"

const struct shunt_transport_ops *const shunt_transports[] = {&shunt_transport_shm, NULL};

static void demote(int fd, enum shunt_reason why)
{
	shunt_conn_demote(fd, shunt_fd_peek(fd), why);
}

/* The client wrote n, the server read k of them; the client leaves: the
 * server reads the rest, then what the client writes after, all in order. */
Test(shm_demote, the_peer_reads_what_it_had_not_and_then_the_socket)
{
	struct conn_pair p;
	pair_open(&p);
	enum { N = 40000, K = 15000, MORE = 7000 };
	uint8_t *out = malloc(N + MORE), *in = malloc(N + MORE);
	pattern(out, N + MORE, 0, 11);
	t_send_all(p.cfd, out, N);
	t_recv_all(p.sfd, in, K);
	cr_assert(pattern_ok(in, K, 0, 11));

	demote(p.cfd, SHUNT_R_EXEC);
	cr_assert_eq(fd_kind(p.cfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.cfd), "exec");
	t_send_all(p.cfd, out + N, MORE); /* the socket, after the replay */

	t_recv_all(p.sfd, in + K, N + MORE - K);
	cr_assert(pattern_ok(in + K, N + MORE - K, K, 11), "a byte lost, repeated or moved");
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_KERNEL);
	cr_assert_str_eq(fd_reason(p.sfd), "peer-demoted");
	char b;
	cr_assert_eq(t_recv(p.sfd, &b, 1, MSG_DONTWAIT), -1, "a byte too many");
	free(out);
	free(in);
	pair_close(&p);
}

/* Both ends leave at once, each with bytes the other had not read. */
Test(shm_demote, both_ends_at_once_lose_nothing)
{
	struct conn_pair p;
	pair_open(&p);
	enum { N = 30000, K = 1000 };
	uint8_t *a = malloc(N), *b = malloc(N), *in = malloc(N);
	pattern(a, N, 0, 21);
	pattern(b, N, 0, 22);
	t_send_all(p.cfd, a, N);
	t_send_all(p.sfd, b, N);
	t_recv_all(p.sfd, in, K);
	t_recv_all(p.cfd, in, K);

	demote(p.cfd, SHUNT_R_EXEC);
	demote(p.sfd, SHUNT_R_EXEC);
	t_recv_all(p.sfd, in, N - K);
	cr_assert(pattern_ok(in, N - K, K, 21));
	t_recv_all(p.cfd, in, N - K);
	cr_assert(pattern_ok(in, N - K, K, 22));
	free(a);
	free(b);
	free(in);
	pair_close(&p);
}

/* The peer has gone after its last bytes reached the ring: nobody can
 * replay them, so the end that must leave (exec) keeps them in a spill,
 * read once, before the socket's EOF. */
Test(shm_demote, unread_bytes_of_a_peer_gone_are_spilled)
{
	struct conn_pair p;
	pair_open(&p);
	uint8_t out[3000], in[3000];
	pattern(out, sizeof out, 0, 31);
	t_send_all(p.cfd, out, sizeof out);
	pair_close_fd(p.cfd);

	demote(p.sfd, SHUNT_R_EXEC);
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_ACCEL);
	cr_assert_str_eq(fd_transport(p.sfd), "spill");
	t_recv_all(p.sfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 31));
	char b;
	cr_assert_eq(t_recv(p.sfd, &b, 1, 0), 0, "EOF after the spill");
	cr_assert_eq(fd_kind(p.sfd), SHUNT_FD_KERNEL);
	pair_close_fd(p.sfd);
	pair_close_fd(p.lfd);
}

/* shutdown(SHUT_WR) while on the rings defers the FIN; a demotion sends it
 * after the replayed bytes, never before. */
Test(shm_demote, a_deferred_fin_follows_the_replay)
{
	struct conn_pair p;
	pair_open(&p);
	uint8_t out[5000], in[5000];
	pattern(out, sizeof out, 0, 41);
	t_send_all(p.cfd, out, sizeof out);
	struct shunt_conn *c = shunt_conn_get(shunt_fd_peek(p.cfd));
	cr_assert_eq(c->ops->data->shutdown(c, SHUT_WR), 1, "the FIN waits");
	shunt_conn_put(c);

	demote(p.cfd, SHUNT_R_EXEC);
	t_recv_all(p.sfd, in, sizeof in);
	cr_assert(pattern_ok(in, sizeof in, 0, 41));
	char b;
	cr_assert_eq(t_recv(p.sfd, &b, 1, 0), 0, "EOF after the replayed bytes");
	pair_close(&p);
}
