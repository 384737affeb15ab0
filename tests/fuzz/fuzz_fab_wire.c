/* libFuzzer target for what a fabric peer hands the other end before and
 * around the data (fabric/fab_wire.c): the connection data of fi_connect
 * and fi_accept, and the proof of a relayed DEMOTE position.
 *
 * Every parse is total and reads nothing past its input (ASan).  A request
 * that parses has a ring size in bounds and a flag that is 0 or 1, and its
 * MAC holds under no key but by chance; an answer is accepted only with
 * its MAC.  Requests and answers made from the input's own fields and key
 * parse back to those fields and verify, and verify under no other key. */
#include "fabric/fab_wire.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static const uint8_t key0[FAB_KEY_LEN] = "fuzz-fixed-key!";

/* Whatever arrives as connection data. */
static void as_received(const uint8_t *data, size_t size)
{
	struct fab_cm_req r, made;
	if (fab_cm_req_parse(&r, data, size) == 0) {
		CHECK(size >= FAB_CM_REQ_LEN);
		CHECK(r.decline <= 1);
		uint64_t ring = fab_cm_req_ring(&r);
		CHECK(ring >= FAB_MIN_RING && ring <= FAB_MAX_RING);
		(void)fab_cm_req_verify(&r, key0);
	}
	uint8_t raw[FAB_CM_REQ_LEN];
	fab_cm_req_make(&made, raw, key0, 65536, 1, 2, 0);
	struct fab_cm_rep rep;
	if (fab_cm_rep_check(&rep, data, size, key0, &made) == 0)
		CHECK(size >= FAB_CM_REP_LEN);
	struct agent_relay rl;
	if (size >= sizeof rl) {
		memcpy(&rl, data, sizeof rl);
		(void)fab_relay_verify(key0, &rl);
	}
}

static uint64_t take64(const uint8_t **p, size_t *n)
{
	uint64_t v = 0;
	for (int i = 0; i < 8 && *n; i++, (*p)++, (*n)--)
		v = v << 8 | **p;
	return v;
}

/* The input as the fields and key of a request, an answer and a relay. */
static void as_fields(const uint8_t *p, size_t n)
{
	uint8_t key[FAB_KEY_LEN] = {0}, other[FAB_KEY_LEN];
	size_t k = n < FAB_KEY_LEN ? n : FAB_KEY_LEN;
	memcpy(key, p, k);
	p += k;
	n -= k;
	memcpy(other, key, sizeof other);
	other[0] ^= 1;
	uint64_t ring = (uint64_t)1 << (12 + take64(&p, &n) % 17);
	uint64_t addr = take64(&p, &n), mkey = take64(&p, &n), flags = take64(&p, &n);
	struct fab_cm_req r, back;
	uint8_t raw[FAB_CM_REQ_LEN];
	fab_cm_req_make(&r, raw, key, ring, addr, mkey, (int)(flags & 1));
	CHECK(fab_cm_req_parse(&back, raw, sizeof raw) == 0);
	CHECK(fab_cm_req_ring(&back) == ring && back.rx_addr == addr && back.rx_key == mkey &&
	      back.decline == (flags & 1));
	CHECK(fab_cm_req_verify(&back, key) == 0);
	CHECK(fab_cm_req_verify(&back, other) != 0);
	struct fab_cm_rep rep, got;
	uint8_t rraw[FAB_CM_REP_LEN];
	fab_cm_rep_make(&rep, rraw, key, &back, mkey, addr);
	CHECK(fab_cm_rep_check(&got, rraw, sizeof rraw, key, &r) == 0);
	CHECK(got.rx_addr == mkey && got.rx_key == addr);
	CHECK(fab_cm_rep_check(&got, rraw, sizeof rraw, other, &r) != 0);
	struct agent_relay rl = {.pos = addr, .to_client = (uint8_t)(flags >> 1 & 1)};
	rl.tuple.cport = (uint16_t)mkey;
	rl.tuple.sport = (uint16_t)(mkey >> 16);
	memcpy(rl.tuple.caddr, &addr, sizeof addr);
	fab_relay_proof(key, &rl, rl.token);
	if (rl.tuple.cport && rl.tuple.sport) {
		/* (A relay the protocol could carry: ports set.) */
		CHECK(fab_relay_verify(key, &rl) == 0);
		CHECK(fab_relay_verify(other, &rl) != 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	as_received(data, size);
	as_fields(data, size);
	return 0;
}
