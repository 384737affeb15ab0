/* The asking side of the agent protocol (agent/agent_client.c): frames
 * taken from a byte stream, and the challenge-response against an agent
 * played here: the same secret, another one, an impostor, silence and
 * garbage. */
#include <criterion/criterion.h>
#include <string.h>

#include "agent/agent_client.h"
#include "agent/agent_hmac.h"
#include "agent/agent_proto.h"

static const char key[] = "0123456789abcdef-the-secret";

/* The agent: it answers each message as shuntd_client.c does, with its
 * own key, or as told. */
enum play { HONEST, IMPOSTOR, SILENT, GARBAGE };

struct agent {
	const char *key;
	enum play play;
	uint8_t cnonce[AGENT_NONCE_LEN], snonce[AGENT_NONCE_LEN];
	struct agent_msg answer;
	int has_answer;
	int auth_right; /* the AUTH it got was our key's */
};

static int agent_send(void *link, const struct agent_msg *m)
{
	struct agent *a = link;
	uint8_t mac[AGENT_MAC_LEN];
	a->has_answer = 1;
	switch (m->type) {
	case AGENT_HELLO:
		memcpy(a->cnonce, m->u.nonce, AGENT_NONCE_LEN);
		memset(a->snonce, 0x5a, AGENT_NONCE_LEN);
		a->answer.type = AGENT_CHALLENGE;
		memcpy(a->answer.u.nonce, a->snonce, AGENT_NONCE_LEN);
		return 0;
	case AGENT_AUTH:
		agent_auth_mac(key, strlen(key), 1, a->cnonce, a->snonce, mac);
		a->auth_right = !memcmp(mac, m->u.mac, AGENT_MAC_LEN);
		agent_auth_mac(a->key, strlen(a->key), 1, a->cnonce, a->snonce, mac);
		if (memcmp(mac, m->u.mac, AGENT_MAC_LEN) && a->play != IMPOSTOR) {
			a->answer.type = AGENT_ERROR;
			a->answer.u.code = AGENT_E_AUTH;
			return 0;
		}
		a->answer.type = AGENT_AUTH_OK;
		agent_auth_mac(a->key, strlen(a->key), 0, a->cnonce, a->snonce, a->answer.u.mac);
		return 0;
	default:
		return -1;
	}
}

static int agent_recv(void *link, struct agent_msg *m)
{
	struct agent *a = link;
	if (a->play == SILENT)
		return 0;
	if (a->play == GARBAGE)
		return -1;
	if (!a->has_answer)
		return 0;
	a->has_answer = 0;
	*m = a->answer;
	return 1;
}

static enum agent_auth_result run(struct agent *a, struct agent_msg *last, int *after)
{
	struct agent_io io = {agent_send, agent_recv, a};
	return agent_authenticate(&io, key, strlen(key), last, after);
}

Test(agent_client, same_secret)
{
	struct agent a = {.key = key, .play = HONEST};
	int after;
	cr_assert_eq(run(&a, NULL, &after), AGENT_AUTHED);
	cr_assert(a.auth_right);
	cr_assert_eq(after, 1);
}

Test(agent_client, another_secret)
{
	struct agent a = {.key = "another-secret-0123456789", .play = HONEST};
	struct agent_msg last;
	int after;
	cr_assert_eq(run(&a, &last, &after), AGENT_AUTH_ANSWER);
	cr_assert_eq(after, 1);
	cr_assert_eq(last.type, AGENT_ERROR);
	cr_assert_eq(last.u.code, AGENT_E_AUTH);
}

Test(agent_client, impostor)
{
	/* It takes any proof, but cannot make ours. */
	struct agent a = {.key = "the-impostor-does-not-know", .play = IMPOSTOR};
	cr_assert_eq(run(&a, NULL, NULL), AGENT_AUTH_FORGED);
}

Test(agent_client, silence_and_garbage)
{
	struct agent a = {.key = key, .play = SILENT};
	int after = -1;
	cr_assert_eq(run(&a, NULL, &after), AGENT_AUTH_SILENT);
	cr_assert_eq(after, 0);
	a.play = GARBAGE;
	cr_assert_eq(run(&a, NULL, NULL), AGENT_AUTH_GARBAGE);
}

Test(agent_client, frames_from_a_stream)
{
	uint8_t in[3 * AGENT_FRAME_MAX];
	size_t nin = 0;
	struct agent_msg m = {.type = AGENT_QUERY_ANSWER, .u.status = AGENT_ST_NO_LISTENER}, got;
	nin += agent_encode(&m, in + nin);
	m.type = AGENT_ERROR;
	m.u.code = AGENT_E_BUSY;
	uint8_t two[AGENT_FRAME_MAX];
	size_t second = agent_encode(&m, two);
	memcpy(in + nin, two, second - 2); /* the second one cut short */
	nin += second - 2;
	cr_assert_eq(agent_next_frame(in, &nin, &got, NULL), 1);
	cr_assert_eq(got.type, AGENT_QUERY_ANSWER);
	cr_assert_eq(got.u.status, AGENT_ST_NO_LISTENER);
	cr_assert_eq(nin, second - 2);
	cr_assert_eq(agent_next_frame(in, &nin, &got, NULL), 0);
	memcpy(in + nin, two + second - 2, 2); /* the rest arrives */
	nin += 2;
	cr_assert_eq(agent_next_frame(in, &nin, &got, NULL), 1);
	cr_assert_eq(got.u.code, AGENT_E_BUSY);
	cr_assert_eq(nin, 0);
	memcpy(in, "GET / HTTP/1.0\r\n", 16);
	nin = 16;
	int why = 0;
	cr_assert_eq(agent_next_frame(in, &nin, &got, &why), -1);
	cr_assert_eq(why, AGENT_E_MALFORMED);
}
