/* libFuzzer target for the agent protocol decoder (agent/agent_proto.c).
 *
 * Decoding must be total: for any bytes, agent_decode() returns a frame
 * length within the input, 0 (a valid prefix), or -1 with a known reason,
 * and reads nothing past the input (ASan).  A decoded frame must encode back
 * to exactly the bytes it came from (no field accepted that encoding would
 * refuse or normalise), and every proper prefix of it must be "need more".
 * The input is also tried as a stream of frames, as the agent reads it. */
#include "agent/agent_proto.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static int one(const uint8_t *data, size_t size)
{
	struct agent_msg m;
	int why = 0;
	int r = agent_decode(data, size, &m, &why);
	CHECK(r >= -1 && r <= (int)size);
	if (r < 0) {
		CHECK(why > 0 && why < AGENT_E_END);
		return -1;
	}
	if (r == 0) {
		CHECK(size < AGENT_FRAME_MAX);
		return 0;
	}
	uint8_t again[AGENT_FRAME_MAX];
	CHECK((size_t)r >= AGENT_HDR_LEN && (size_t)r <= AGENT_FRAME_MAX);
	CHECK(m.type > 0 && m.type < AGENT_TYPE_END);
	CHECK(agent_encode(&m, again) == (size_t)r);
	CHECK(memcmp(again, data, (size_t)r) == 0);
	if (m.type == AGENT_OFFER)
		CHECK(agent_offer_check(&m.u.offer) == 0);
	if (m.type == AGENT_TAKE_ANSWER && m.u.taken.status == AGENT_ST_OK)
		CHECK(agent_offer_check(&m.u.taken.offer) == 0);
	if (m.type == AGENT_SIGN) {
		/* A request to sign carries no signature; what would be signed
		 * is the same whatever the frame's bytes past it. */
		static const uint8_t zero[AGENT_MAC_LEN];
		uint8_t a[AGENT_MAC_LEN], b[AGENT_MAC_LEN];
		CHECK(agent_offer_check(&m.u.sign) == 0);
		CHECK(memcmp(m.u.sign.csig, zero, AGENT_MAC_LEN) == 0);
		agent_countersig((const uint8_t *)"k", 1, &m.u.sign, a);
		memset(m.u.sign.csig, 0xa5, AGENT_MAC_LEN);
		agent_countersig((const uint8_t *)"k", 1, &m.u.sign, b);
		CHECK(memcmp(a, b, AGENT_MAC_LEN) == 0);
	}
	if (m.type == AGENT_SIGN_ANSWER && m.u.signed_.status != AGENT_ST_OK) {
		static const uint8_t zero[AGENT_MAC_LEN];
		CHECK(memcmp(m.u.signed_.csig, zero, AGENT_MAC_LEN) == 0);
	}
	struct agent_msg p;
	for (int k = 0; k < r; k += 1 + k / 8)
		CHECK(agent_decode(data, (size_t)k, &p, &why) == 0);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	while (off < size) {
		int r = one(data + off, size - off);
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	return 0;
}
