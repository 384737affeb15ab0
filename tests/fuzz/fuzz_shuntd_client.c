/* libFuzzer target for shuntd's client state machine (agent/shuntd_client.c)
 * with its event loop, its HTTP side, the agent protocol and the table of
 * held offers: any byte stream, cut anywhere, from a TCP or a Unix client,
 * with or without a secret.
 *
 * The input: one byte of flags (bit 0: the client came on agent.sock; bit
 * 1: a secret is configured; bit 2: a group's rundir; bit 3: a countersign
 * key is configured; bit 4: every piece carries an fd, a TCP socket bound
 * to 127.0.0.1:40000, and bit 5 a second one, /dev/null), one byte for the
 * size of the pieces the stream arrives in, then the stream.  After each
 * piece the loop turns until it is idle.  Then the client hangs up and the
 * agent must close its end.  Checked: no crash or leak (ASan), every byte
 * the agent sends an agent client is whole valid frames of an agent's
 * types, every client is gone once closed, the held offers stay within
 * their cap, and no fd passed is kept. */
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/shuntd.h"
#include "agent/shuntd_pending.h"
#include "core/shunt_fdpass.h"
#include "core/shunt_registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

struct shuntd shuntd;

/* ---- the rest of the agent, as stubs: no file system ---------------------- */

void shuntd_log(const char *fmt, ...)
{
	(void)fmt;
}

/* A live listener on even ports; its owner uid 0 on ports that are
 * multiples of 4, else 1000. */
int shunt_registry_lookup(const char *rundir, const struct sockaddr *dst)
{
	(void)rundir;
	return dst->sa_family == AF_INET6 ? !(ntohs(((const struct sockaddr_in6 *)dst)->sin6_port) & 1)
					  : !(ntohs(((const struct sockaddr_in *)dst)->sin_port) & 1);
}

int shunt_registry_lookup_uid(const char *rundir, const struct sockaddr *dst, unsigned *uid)
{
	int live = shunt_registry_lookup(rundir, dst);
	uint16_t port = dst->sa_family == AF_INET6
				? ntohs(((const struct sockaddr_in6 *)dst)->sin6_port)
				: ntohs(((const struct sockaddr_in *)dst)->sin_port);
	if (live && uid)
		*uid = port % 4 ? 1000 : 0;
	return live;
}

int rundir_file_relay(const char *rundir, const struct agent_relay *r, unsigned uid)
{
	(void)rundir;
	(void)uid;
	return r->pos & 1 ? -1 : 0;
}

int rundir_check(const char *rundir, char *err, size_t errlen)
{
	(void)rundir;
	(void)err;
	(void)errlen;
	return 0;
}

char *metrics_render(size_t *len)
{
	char *b = strdup("x 1\n");
	*len = b ? 4 : 0;
	return b;
}

/* ---- the harness ------------------------------------------------------------- */

static void turn_until_idle(void)
{
	for (int i = 0; i < 64 && ev_once(shuntd.el, 0) > 0; i++)
		;
}

/* Read what the agent sent; 1 once it closed. */
static int drain(int fd, uint8_t *out, size_t *n, size_t cap)
{
	for (;;) {
		uint8_t tmp[4096];
		ssize_t r = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
		if (r == 0)
			return 1;
		if (r < 0)
			return 0;
		size_t k = (size_t)r < cap - *n ? (size_t)r : cap - *n;
		memcpy(out + *n, tmp, k);
		*n += k;
	}
}

/* Everything an agent client got: frames an agent sends, whole. */
static void check_frames(const uint8_t *out, size_t n)
{
	size_t off = 0;
	while (off < n) {
		struct agent_msg m;
		int why, r = agent_decode(out + off, n - off, &m, &why);
		CHECK(r > 0);
		CHECK(m.type == AGENT_CHALLENGE || m.type == AGENT_AUTH_OK ||
		      m.type == AGENT_QUERY_ANSWER || m.type == AGENT_OFFER_ANSWER ||
		      m.type == AGENT_RELAY_ANSWER || m.type == AGENT_TAKE_ANSWER ||
		      m.type == AGENT_SIGN_ANSWER || m.type == AGENT_ERROR);
		off += (size_t)r;
	}
}

/* A piece of the stream, with fds when there are any (on a Unix stream
 * they go with its first byte). */
static ssize_t send_piece(int fd, const uint8_t *p, size_t k, const int *fds, int nfds)
{
	return shunt_send_fds(fd, p, k, fds, nfds, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The fds open (of the first 1024): an fd the agent kept is one more. */
static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) != -1;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int pass[2] = {-1, -1};
	if (size < 2)
		return 0;
	if (!shuntd.el) {
		shuntd.el = ev_create();
		CHECK(shuntd.el);
		shuntd.max_clients = 4;
		shuntd.client_timeout_ms = 1000;
		strcpy(shuntd.rundir, "/nonexistent/fuzz");
		memcpy(shuntd.secret, "a-secret-of-some-length", 24);
		memcpy(shuntd.csign_key, "a-countersign-key-of-some-length", 32);
		pass[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(40000),
					.sin_addr.s_addr = htonl(0x7f000001)};
		int one = 1;
		setsockopt(pass[0], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		(void)bind(pass[0], (struct sockaddr *)&a, sizeof a); /* unbound will do too */
		pass[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		CHECK(pass[0] >= 0 && pass[1] >= 0);
	}
	int nfds = data[0] & 16 ? (data[0] & 32 ? 2 : 1) : 0;
	shuntd.csign_len = data[0] & 8 ? 32 : 0;
	int is_unix = data[0] & 1;
	shuntd.secret_len = data[0] & 2 ? 23 : 0;
	shuntd.rundir_shared = (data[0] & 4) != 0;
	size_t piece = 1 + data[1] % 128;
	data += 2;
	size -= 2;

	int fds0 = open_fds();
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	struct sockaddr_storage peer;
	memset(&peer, 0, sizeof peer);
	if (is_unix) {
		peer.ss_family = AF_UNIX;
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&peer;
		in->sin_family = AF_INET;
		in->sin_port = htons(40000);
		in->sin_addr.s_addr = htonl(0x7f000001);
	}
	client_adopt(shuntd.el, sv[0], is_unix, &peer);

	static uint8_t out[1 << 20];
	size_t nout = 0;
	int closed = 0;
	for (size_t off = 0; off < size && !closed;) {
		size_t k = size - off < piece ? size - off : piece;
		ssize_t w = send_piece(sv[1], data + off, k, pass, is_unix ? nfds : 0);
		if (w > 0)
			off += (size_t)w;
		turn_until_idle();
		closed = drain(sv[1], out, &nout, sizeof out);
		if (w <= 0 && !closed && ev_once(shuntd.el, 0) == 0)
			break; /* the agent reads no more until its output is read */
	}
	shutdown(sv[1], SHUT_WR);
	for (int i = 0; i < 64 && !closed; i++) {
		turn_until_idle();
		closed = drain(sv[1], out, &nout, sizeof out);
	}
	if (size && data[0] == AGENT_MAGIC0 && nout < sizeof out)
		check_frames(out, nout);
	client_close_all();
	close(sv[1]);
	CHECK(shuntd.n.open_clients == 0);
	CHECK(open_fds() == fds0);
	CHECK(pending_count(PK_OFFER) <= 8192);
	return 0;
}
