/* The fabric transport's rendezvous steps that need no provider: what the
 * accepting shim takes from the frames the agent filed (an offer in f/, a
 * relayed DEMOTE position in r/), and the tuple's two forms.  Frames are
 * filed here as shuntd files them: whole, 0600, named by the tuple's key. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	for (int r = SHUNT_ROOM_FILED; r <= SHUNT_ROOM_RELAY; r++) {
		cr_assert(shunt_rundir_path(sub, sizeof sub, d, r, NULL) == 0);
		mkdir(sub, 0700);
	}
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

static struct agent_msg offer_for(const struct shunt_tuple *t)
{
	struct agent_msg m = {.type = AGENT_OFFER};
	fab_tuple_to_wire(&m.u.offer.tuple, t);
	memcpy(m.u.offer.token, "token-of-sixteen", AGENT_TOKEN_LEN);
	strcpy(m.u.offer.provider, "tcp");
	m.u.offer.addr_format = 2;
	m.u.offer.addrlen = 16;
	memset(m.u.offer.addr, 7, 16);
	m.u.offer.ring_size = 65536;
	return m;
}

Test(fab_rendezvous, the_tuple_has_the_same_fields_on_the_wire)
{
	struct shunt_tuple t = tuple(40000), back;
	struct agent_tuple w;
	fab_tuple_to_wire(&w, &t);
	fab_tuple_from_wire(&back, &w);
	cr_assert(!memcmp(&t, &back, sizeof t));
}

Test(fab_rendezvous, a_filed_offer_is_taken_once)
{
	struct shunt_tuple t = tuple(40001);
	struct agent_msg m = offer_for(&t);
	char path[SHUNT_PATH_MAX];
	file_frame(SHUNT_ROOM_FILED, &t, "", &m, path, sizeof path);
	struct agent_offer o;
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), 0);
	cr_assert(!memcmp(o.token, "token-of-sixteen", AGENT_TOKEN_LEN));
	cr_assert_str_eq(o.provider, "tcp");
	cr_assert_eq(o.ring_size, 65536);
	cr_assert_eq(access(path, F_OK), -1, "removed once read");
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
}

Test(fab_rendezvous, an_offer_for_another_connection_is_not_taken)
{
	struct shunt_tuple t = tuple(40002), other = tuple(40003);
	struct agent_msg m = offer_for(&other);
	char path[SHUNT_PATH_MAX];
	file_frame(SHUNT_ROOM_FILED, &t, "", &m, path, sizeof path); /* under t's name */
	struct agent_offer o;
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
	cr_assert_eq(access(path, F_OK), -1, "of no use to anyone: removed");
}

Test(fab_rendezvous, a_truncated_or_foreign_frame_is_not_an_offer)
{
	struct shunt_tuple t = tuple(40004);
	struct agent_msg m = offer_for(&t);
	char path[SHUNT_PATH_MAX];
	file_frame(SHUNT_ROOM_FILED, &t, "", &m, path, sizeof path);
	cr_assert(truncate(path, AGENT_HDR_LEN + 10) == 0);
	struct agent_offer o;
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
	/* A symlink in its place is not followed. */
	unlink(path);
	cr_assert(symlink("/etc/passwd", path) == 0);
	cr_assert_eq(fab_rdv_take(rundir(), &t, &o), -1);
	unlink(path);
}

Test(fab_rendezvous, a_relayed_position_needs_the_connections_key)
{
	struct shunt_tuple t = tuple(40005);
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
