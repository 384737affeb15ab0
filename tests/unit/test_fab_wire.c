/* What a fabric peer sees, without a provider: CQ data (types, positions
 * rebuilt from a lower bound, across the 2^29 wrap), the positions a peer
 * may name, credits and room, the connection data, and the replay's
 * exactness argument on ring positions. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <string.h>

#include "fabric/fab_wire.h"

Test(fab_wire, cq_data_carries_type_and_position)
{
	const enum fab_imm types[] = {FAB_IMM_DATA, FAB_IMM_CREDIT, FAB_IMM_SHUT, FAB_IMM_CLOSE,
				      FAB_IMM_DEMOTE};
	const uint64_t pos[] = {0, 1, FAB_IMM_POS_MASK, (uint64_t)FAB_IMM_POS_MASK + 1,
				123456789012345ull};
	for (unsigned t = 0; t < 5; t++)
		for (unsigned p = 0; p < 5; p++) {
			uint64_t d = fab_imm_make(types[t], pos[p]);
			cr_assert_lt(d, (uint64_t)1 << 32, "fits the 4 bytes verbs carries");
			cr_assert_eq(fab_imm_type(d), types[t]);
			cr_assert_eq(fab_imm_pos(d), pos[p] & FAB_IMM_POS_MASK);
		}
}

Test(fab_wire, positions_are_rebuilt_from_a_lower_bound)
{
	const uint64_t bases[] = {0, 1000, FAB_IMM_POS_MASK - 10, (uint64_t)5 << 40,
				  ((uint64_t)7 << 40) + FAB_IMM_POS_MASK};
	for (unsigned i = 0; i < 5; i++)
		for (uint64_t ahead = 0; ahead <= FAB_MAX_RING; ahead += FAB_MAX_RING / 4) {
			uint64_t p = bases[i] + ahead;
			cr_assert_eq(fab_pos_recon(bases[i], fab_imm_pos(fab_imm_make(FAB_IMM_DATA, p))),
				     p, "base %llu + %llu", (unsigned long long)bases[i],
				     (unsigned long long)ahead);
		}
}

Test(fab_wire, a_peer_names_only_positions_it_can_mean)
{
	/* DATA ends at most a ring past what the reader consumed. */
	cr_assert(fab_data_pos_ok(5000, 1000, 4096));
	cr_assert(fab_data_pos_ok(5096, 1000, 4096));
	cr_assert(!fab_data_pos_ok(5097, 1000, 4096));
	cr_assert(!fab_data_pos_ok(999, 1000, 4096), "behind what was consumed");
	/* A credit or DEMOTE: within [acked, posted]. */
	cr_assert(fab_peer_pos_ok(100, 100, 200));
	cr_assert(fab_peer_pos_ok(200, 100, 200));
	cr_assert(!fab_peer_pos_ok(99, 100, 200));
	cr_assert(!fab_peer_pos_ok(201, 100, 200), "a position we never posted");
}

Test(fab_wire, credits_every_eighth_and_room_until_covered)
{
	cr_assert(!fab_credit_due(1000 + 8191, 1000, 65536));
	cr_assert(fab_credit_due(1000 + 8192, 1000, 65536));
	cr_assert_eq(fab_tx_room(65536, 70000, 70000), 65536);
	cr_assert_eq(fab_tx_room(65536, 70000 + 65536, 70000), 0);
	cr_assert_eq(fab_tx_room(65536, 70000 + 100, 70000), 65436);
}

static void a_key(uint8_t key[FAB_KEY_LEN], unsigned seed)
{
	for (unsigned i = 0; i < FAB_KEY_LEN; i++)
		key[i] = (uint8_t)(i * 7 + seed);
}

Test(fab_wire, connection_data_both_ways)
{
	uint8_t key[FAB_KEY_LEN], id[FAB_ID_LEN];
	a_key(key, 1);
	fab_offer_id(key, id);
	const uint64_t rings[] = {FAB_MIN_RING, 65536, 1u << 20, FAB_MAX_RING};
	for (unsigned i = 0; i < 4; i++) {
		struct fab_cm_req r, back;
		uint8_t raw[FAB_CM_REQ_LEN];
		fab_cm_req_make(&r, raw, key, rings[i], 0x1234, 0x5678, i & 1);
		cr_assert_eq(fab_cm_req_parse(&back, raw, sizeof raw), 0);
		cr_assert_eq(fab_cm_req_verify(&back, key), 0);
		cr_assert_eq(fab_cm_req_ring(&back), rings[i]);
		cr_assert_eq(back.decline, i & 1);
		cr_assert(!memcmp(back.id, id, sizeof id), "names the offer by its id");
		cr_assert_eq(back.rx_addr, 0x1234);
		cr_assert_eq(back.rx_key, 0x5678);
		/* The id is not the key: the key never travels. */
		cr_assert(memmem(raw, sizeof raw, key, 8) == NULL);

		struct fab_cm_rep rep, got;
		uint8_t rraw[FAB_CM_REP_LEN];
		fab_cm_rep_make(&rep, rraw, key, &back, 7, 9);
		cr_assert_eq(fab_cm_rep_check(&got, rraw, sizeof rraw, key, &r), 0);
		cr_assert_eq(got.rx_addr, 7);
		cr_assert_eq(got.rx_key, 9);
	}
}

Test(fab_wire, connection_data_from_a_stranger_is_refused)
{
	uint8_t key[FAB_KEY_LEN], other[FAB_KEY_LEN];
	a_key(key, 0);
	a_key(other, 3);
	struct fab_cm_req r, back;
	uint8_t raw[FAB_CM_REQ_LEN], bad[FAB_CM_REQ_LEN];
	fab_cm_req_make(&r, raw, key, 65536, 0, 0, 0);
	cr_assert_eq(fab_cm_req_parse(&back, raw, sizeof raw - 1), -1, "short");
	const struct {
		unsigned at;
		uint8_t v;
		const char *what;
	} form[] = {{0, 'X', "magic"}, {4, 1, "version"}, {5, 2, "decline flag"},
		    {6, 200, "a shift past 63"}, {6, 11, "a ring below the least"},
		    {6, 29, "a ring above the most"}, {7, 1, "reserved byte"}};
	for (unsigned i = 0; i < sizeof form / sizeof form[0]; i++) {
		memcpy(bad, raw, sizeof raw);
		bad[form[i].at] = form[i].v;
		cr_assert_eq(fab_cm_req_parse(&back, bad, sizeof bad), -1, "%s", form[i].what);
	}
	/* Well formed, but made without the key: any field changed, or a
	 * request made with another key for this offer's id. */
	for (unsigned at = 8; at < FAB_CM_REQ_LEN; at++) {
		memcpy(bad, raw, sizeof raw);
		bad[at] ^= 0x40;
		cr_assert_eq(fab_cm_req_parse(&back, bad, sizeof bad), 0);
		cr_assert_eq(fab_cm_req_verify(&back, key), -1, "byte %u changed", at);
	}
	struct fab_cm_req forged;
	fab_cm_req_make(&forged, bad, other, 65536, 0, 0, 0);
	uint8_t id[FAB_ID_LEN];
	fab_offer_id(key, id);
	memcpy(forged.id, id, sizeof id); /* the id seen on the wire */
	cr_assert_eq(fab_cm_req_verify(&forged, key), -1, "another key");
	/* An answer: its MAC, and bound to the request it answers. */
	struct fab_cm_rep rep, got;
	uint8_t rraw[FAB_CM_REP_LEN], rbad[FAB_CM_REP_LEN];
	fab_cm_rep_make(&rep, rraw, key, &r, 1, 2);
	cr_assert_eq(fab_cm_rep_check(&got, rraw, sizeof rraw - 1, key, &r), -1, "short");
	cr_assert_eq(fab_cm_rep_check(&got, rraw, sizeof rraw, other, &r), -1, "another key");
	cr_assert_eq(fab_cm_rep_check(&got, rraw, sizeof rraw, key, &forged), -1,
		     "an answer to another request");
	for (unsigned at = 0; at < FAB_CM_REP_LEN; at++) {
		memcpy(rbad, rraw, sizeof rraw);
		rbad[at] ^= 0x01;
		cr_assert_eq(fab_cm_rep_check(&got, rbad, sizeof rbad, key, &r), -1, "byte %u", at);
	}
}

Test(fab_wire, relayed_positions_carry_a_proof)
{
	uint8_t key[FAB_KEY_LEN], other[FAB_KEY_LEN];
	a_key(key, 5);
	a_key(other, 6);
	struct agent_relay r = {.tuple = {.cport = 1000, .sport = 80}, .pos = 123456, .to_client = 1};
	r.tuple.caddr[15] = 1;
	fab_relay_proof(key, &r, r.token);
	cr_assert_eq(fab_relay_verify(key, &r), 0);
	cr_assert_eq(fab_relay_verify(other, &r), -1, "another key");
	struct agent_relay bad = r;
	bad.pos++;
	cr_assert_eq(fab_relay_verify(key, &bad), -1, "another position");
	bad = r;
	bad.to_client = 0;
	cr_assert_eq(fab_relay_verify(key, &bad), -1, "the other end");
	bad = r;
	bad.tuple.sport = 81;
	cr_assert_eq(fab_relay_verify(key, &bad), -1, "another connection");
}

/* Copy the spans into out: how many bytes. */
static size_t gather(uint8_t *out, const struct iovec *v, int nv)
{
	size_t n = 0;
	for (int i = 0; i < nv; i++) {
		memcpy(out + n, v[i].iov_base, v[i].iov_len);
		n += v[i].iov_len;
	}
	return n;
}

/* The demotion's argument, on positions: the reader stops at what its
 * application consumed (k) and says so (DEMOTE(k)); the writer, whose
 * credits never ran ahead of k, still holds [k, head) and replays exactly
 * that.  The reader's ring gives [0, k), the socket [k, head): each byte
 * once, in order, whatever the credits said. */
Test(fab_wire, the_replay_starts_where_the_reader_stopped)
{
	enum { RING = 4096 };
	static uint8_t stream[20000], wring[RING], rring[RING], got[20000];
	for (unsigned i = 0; i < sizeof stream; i++)
		stream[i] = (uint8_t)(i * 131 + (i >> 8));
	const uint64_t cases[][3] = {
		/* head, consumed by the reader, acked by a (lagging) credit */
		{4000, 1500, 1024}, {10000, 9000, 8192}, {12345, 12345, 12000}, {8192, 4096, 4096},
		{19000, 16000, 15000},
	};
	for (unsigned t = 0; t < sizeof cases / sizeof cases[0]; t++) {
		uint64_t head = cases[t][0], k = cases[t][1], acked = cases[t][2];
		/* The writer's tx ring and the reader's rx ring hold the last
		 * RING bytes up to head, at their stream offsets. */
		for (uint64_t p = head > RING ? head - RING : 0; p < head; p++)
			wring[p & (RING - 1)] = rring[p & (RING - 1)] = stream[p];
		cr_assert(fab_peer_pos_ok(k, acked, head), "DEMOTE(%llu) accepted",
			  (unsigned long long)k);
		struct iovec v[2];
		/* What the reader consumed came out of its ring (the part of it
		 * still there is read back from the ring here). */
		uint64_t from = head > RING ? head - RING : 0;
		if (from > k)
			from = k;
		memcpy(got, stream, from);
		int nv = fab_ring_spans(rring, RING, from, k, v);
		cr_assert_eq(gather(got + from, v, nv), k - from);
		/* The replay: the writer's [k, head). */
		nv = fab_ring_spans(wring, RING, k, head, v);
		cr_assert_eq(gather(got + k, v, nv), head - k);
		cr_assert(!memcmp(got, stream, head), "case %u: the stream differs", t);
	}
}

/* Issue 14 item 3: the server's end connects only to an endpoint at the
 * TCP peer's address. */
Test(fab_wire, the_offers_endpoint_is_the_tcp_peers)
{
	struct agent_offer o;
	memset(&o, 0, sizeof o);
	struct sockaddr_in ep = {.sin_family = AF_INET, .sin_port = htons(5000)};
	inet_pton(AF_INET, "198.18.0.1", &ep.sin_addr);
	o.addr_format = 2; /* FI_SOCKADDR_IN */
	o.addrlen = sizeof ep;
	memcpy(o.addr, &ep, sizeof ep);
	struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(40000)};
	inet_pton(AF_INET, "198.18.0.1", &peer.sin_addr);
	cr_expect(fab_offer_addr_is_peer(&o, (struct sockaddr *)&peer), "same address, any port");
	struct sockaddr_in6 p6 = {.sin6_family = AF_INET6, .sin6_port = htons(40000)};
	inet_pton(AF_INET6, "::ffff:198.18.0.1", &p6.sin6_addr);
	cr_expect(fab_offer_addr_is_peer(&o, (struct sockaddr *)&p6), "a v4-mapped peer");
	inet_pton(AF_INET, "198.18.0.77", &peer.sin_addr);
	cr_expect_not(fab_offer_addr_is_peer(&o, (struct sockaddr *)&peer), "an endpoint elsewhere");
	o.addrlen = 4;
	cr_expect_not(fab_offer_addr_is_peer(&o, (struct sockaddr *)&peer), "an address cut short");
	o.addr_format = 5; /* not an IP format (FI_ADDR_PSMX, ...): nothing to compare */
	cr_expect(fab_offer_addr_is_peer(&o, (struct sockaddr *)&peer));
}
