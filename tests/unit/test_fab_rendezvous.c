/* The fabric transport's rendezvous steps that need no provider: how the
 * accepting shim takes the offer its agent holds (TAKE on agent.sock, here
 * answered by a scripted agent), what it takes from a relayed DEMOTE
 * position filed in r/, and the tuple's two forms. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/shunt_rundir_layout.h"
#include "core/shunt_transport.h"
#include "fabric/fab_rdv.h"
#include "fabric/fab_wire.h"

/* No transport decides connections in this program. */
const struct shunt_transport_ops *const shunt_transports[] = {NULL};

static const char *rundir(void)
{
	const char *d = getenv("SHUNT_RUNDIR");
	char sub[SHUNT_PATH_MAX];
	cr_assert(shunt_rundir_path(sub, sizeof sub, d, SHUNT_ROOM_RELAY, NULL) == 0);
	mkdir(sub, 0700);
	return d;
}

static struct shunt_tuple tuple(uint16_t cport)
{
	struct sockaddr_in c = {.sin_family = AF_INET, .sin_port = htons(cport),
				.sin_addr.s_addr = htonl(0xc6120001)}; /* 198.18.0.1 */
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(6379),
				.sin_addr.s_addr = htonl(0xc6120002)};
	struct shunt_tuple t;
	cr_assert(shunt_tuple_make(&t, (struct sockaddr *)&c, (struct sockaddr *)&s) == 0);
	return t;
}

/* File m as room/name (name made from t's key and suffix). */
static void file_frame(enum shunt_room room, const struct shunt_tuple *t, const char *suffix,
		       const struct agent_msg *m, char *path, size_t plen)
{
	uint8_t buf[AGENT_FRAME_MAX];
	char key[32];
	size_t n = agent_encode(m, buf);
	cr_assert(n > 0);
	shunt_tuple_key(t, key, sizeof key);
	cr_assert(shunt_rundir_path(path, plen, rundir(), room, "%s%s", key, suffix) == 0);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	cr_assert(write(fd, buf, n) == (ssize_t)n);
	close(fd);
}

static struct agent_offer offer_for(const struct shunt_tuple *t)
{
	struct agent_offer o;
	memset(&o, 0, sizeof o);
	fab_tuple_to_wire(&o.tuple, t);
	memcpy(o.token, "token-of-sixteen", AGENT_TOKEN_LEN);
	strcpy(o.provider, "tcp");
	o.addr_format = 2;
	o.addrlen = 16;
	memset(o.addr, 7, 16);
	o.ring_size = 65536;
	return o;
}

/* ---- a scripted agent on agent.sock: one client, one answer ------------- */

struct agent {
	int lfd;
	pthread_t th;
	uint8_t answer[AGENT_FRAME_MAX]; /* sent as is, after the request */
	size_t alen;                     /* 0: never answers */
	struct agent_msg got;            /* the request it read */
};

static void *agent_run(void *arg)
{
	struct agent *a = arg;
	int fd = accept(a->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	uint8_t in[AGENT_FRAME_MAX];
	size_t n = 0;
	int why, r;
	while ((r = agent_decode(in, n, &a->got, &why)) == 0) {
		ssize_t k = recv(fd, in + n, sizeof in - n, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	if (r > 0 && a->alen)
		send(fd, a->answer, a->alen, MSG_NOSIGNAL);
	while (recv(fd, in, sizeof in, 0) > 0) /* until the shim hangs up */
		;
	close(fd);
	return NULL;
}

static void agent_start(struct agent *a)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", rundir(), SHUNT_AGENT_SOCK);
	unlink(sa.sun_path);
	a->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(a->lfd >= 0 && bind(a->lfd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
		  listen(a->lfd, 4) == 0);
	cr_assert(pthread_create(&a->th, NULL, agent_run, a) == 0);
}

static void agent_stop(struct agent *a)
{
	pthread_join(a->th, NULL);
	close(a->lfd);
}

static void answer(struct agent *a, int status, const struct agent_offer *o)
{
	struct agent_msg m = {.type = AGENT_TAKE_ANSWER};
	m.u.taken.status = (uint8_t)status;
	if (o)
		m.u.taken.offer = *o;
	a->alen = agent_encode(&m, a->answer);
	cr_assert(a->alen > 0);
}

Test(fab_rendezvous, the_tuple_has_the_same_fields_on_the_wire)
{
	struct shunt_tuple t = tuple(40000), back;
	struct agent_tuple w;
	fab_tuple_to_wire(&w, &t);
	fab_tuple_from_wire(&back, &w);
	cr_assert(!memcmp(&t, &back, sizeof t));
}

Test(fab_rendezvous, the_offer_the_agent_holds_is_taken)
{
	struct shunt_tuple t = tuple(40001);
	struct agent_offer want = offer_for(&t), o;
	struct agent a = {0};
	answer(&a, AGENT_ST_OK, &want);
	agent_start(&a);
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), 0);
	agent_stop(&a);
	struct shunt_tuple asked;
	cr_assert_eq(a.got.type, AGENT_TAKE);
	fab_tuple_from_wire(&asked, &a.got.u.take);
	cr_assert(!memcmp(&asked, &t, sizeof t), "asked for the accepted connection's tuple");
	cr_assert(!memcmp(o.token, "token-of-sixteen", AGENT_TOKEN_LEN));
	cr_assert_str_eq(o.provider, "tcp");
	cr_assert_eq(o.ring_size, 65536);
}

Test(fab_rendezvous, an_offer_for_another_connection_is_not_taken)
{
	struct shunt_tuple t = tuple(40002), other = tuple(40003);
	struct agent_offer wrong = offer_for(&other), o;
	struct agent a = {0};
	answer(&a, AGENT_ST_OK, &wrong);
	agent_start(&a);
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
	agent_stop(&a);
}

Test(fab_rendezvous, none_refused_garbage_or_silence_is_no_offer)
{
	struct shunt_tuple t = tuple(40004);
	struct agent_offer o;
	for (int i = 0; i < 4; i++) {
		struct agent a = {0};
		if (i == 0)
			answer(&a, AGENT_ST_NO_OFFER, NULL);
		else if (i == 1)
			answer(&a, AGENT_ST_REFUSED, NULL);
		else if (i == 2)
			a.alen = (size_t)snprintf((char *)a.answer, sizeof a.answer,
						  "SD\001\015 not a frame");
		/* i == 3: it reads the request and never answers (the bound
		 * is agent_timeout_ms). */
		agent_start(&a);
		cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1, "case %d", i);
		agent_stop(&a);
	}
}

Test(fab_rendezvous, no_agent_is_no_offer_at_once)
{
	struct shunt_tuple t = tuple(40005);
	struct agent_offer o;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *path = sa.sun_path;
	snprintf(path, sizeof sa.sun_path, "%s/%s", rundir(), SHUNT_AGENT_SOCK);
	unlink(path);
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
	/* A socket nobody listens on any more, a FIFO in its place. */
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
	close(s);
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
	unlink(path);
	cr_assert(mkfifo(path, 0600) == 0);
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
	unlink(path);
	cr_assert_eq(fab_rdv_take(NULL, &t, &o), -1);
}

Test(fab_rendezvous, a_relayed_position_needs_the_connections_key)
{
	struct shunt_tuple t = tuple(40006);
	struct agent_msg m = {.type = AGENT_RELAY};
	const uint8_t *key = (const uint8_t *)"key-of-sixteen-b";
	fab_tuple_to_wire(&m.u.relay.tuple, &t);
	m.u.relay.pos = 123456789;
	m.u.relay.to_client = 1;
	/* The key itself as the proof, as a peer that knew it might send. */
	memcpy(m.u.relay.token, key, AGENT_TOKEN_LEN);
	char path[SHUNT_PATH_MAX];
	file_frame(SHUNT_ROOM_RELAY, &t, ".c", &m, path, sizeof path);
	uint64_t pos = 0;
	cr_assert_eq(fab_rdv_relay_take(rundir(), &t, 1, key, &pos), -1, "the key is not the proof");
	cr_assert_eq(access(path, F_OK), 0, "left for the agent's sweep");
	fab_relay_proof(key, &m.u.relay, m.u.relay.token);
	file_frame(SHUNT_ROOM_RELAY, &t, ".c", &m, path, sizeof path);
	cr_assert_eq(fab_rdv_relay_take(rundir(), &t, 1, (const uint8_t *)"someone-elses-ky", &pos),
		     -1);
	cr_assert_eq(access(path, F_OK), 0, "left for the agent's sweep");
	cr_assert_eq(fab_rdv_relay_take(rundir(), &t, 0, key, &pos), -1,
		     "the server end's name is another file");
	cr_assert_eq(fab_rdv_relay_take(rundir(), &t, 1, key, &pos), 0);
	cr_assert_eq(pos, 123456789);
	cr_assert_eq(access(path, F_OK), -1, "taken");
}
