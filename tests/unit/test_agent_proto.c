/* Unit tests for agent/agent_proto.c and agent/agent_hmac.c: frames
 * encode and decode, every bound, every prefix, SHA-256 and HMAC against
 * published vectors, the secret file rules. */
#include "agent/agent_hmac.h"
#include "agent/agent_proto.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

static struct agent_offer good_offer(void)
{
	struct agent_offer o;
	memset(&o, 0, sizeof o);
	o.tuple.caddr[10] = o.tuple.caddr[11] = 0xff;
	o.tuple.caddr[12] = 198, o.tuple.caddr[13] = 18, o.tuple.caddr[15] = 1;
	o.tuple.saddr[10] = o.tuple.saddr[11] = 0xff;
	o.tuple.saddr[12] = 198, o.tuple.saddr[13] = 18, o.tuple.saddr[15] = 2;
	o.tuple.cport = 40000;
	o.tuple.sport = 6379;
	memcpy(o.token, "0123456789abcdef", 16);
	strcpy(o.provider, "tcp;ofi_rxm");
	o.addr_format = 2;
	o.addrlen = 16;
	memset(o.addr, 7, 16);
	o.ring_size = 1 << 20;
	return o;
}

/* ---- SHA-256 / HMAC ------------------------------------------------------ */

Test(sha256, fips_vectors)
{
	uint8_t d[32];
	char h[65];
	sha256("abc", 3, d);
	hex(d, 32, h);
	cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha256("", 0, d);
	hex(d, 32, h);
	cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha256(m, strlen(m), d);
	hex(d, 32, h);
	cr_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* One million 'a', fed in uneven pieces. */
	struct sha256 s;
	char a[997];
	memset(a, 'a', sizeof a);
	sha256_init(&s);
	size_t left = 1000000;
	for (size_t k = 1; left; k = k % 997 + 1) {
		size_t n = k < left ? k : left;
		sha256_update(&s, a, n);
		left -= n;
	}
	sha256_final(&s, d);
	hex(d, 32, h);
	cr_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

Test(hmac, rfc4231)
{
	uint8_t key[131], d[32];
	char h[65];
	memset(key, 0x0b, 20);
	const void *p1[] = {"Hi There"};
	const size_t l1[] = {8};
	hmac_sha256(key, 20, p1, l1, 1, d);
	hex(d, 32, h);
	cr_assert_str_eq(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	/* Test case 2, the message in two parts. */
	const void *p2[] = {"what do ya want ", "for nothing?"};
	const size_t l2[] = {16, 12};
	hmac_sha256("Jefe", 4, p2, l2, 2, d);
	hex(d, 32, h);
	cr_assert_str_eq(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	/* Test case 6: a key longer than the block. */
	memset(key, 0xaa, 131);
	const char *m = "Test Using Larger Than Block-Size Key - Hash Key First";
	const void *p6[] = {m};
	const size_t l6[] = {strlen(m)};
	hmac_sha256(key, 131, p6, l6, 1, d);
	hex(d, 32, h);
	cr_assert_str_eq(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	cr_assert_eq(hmac_equal(d, d, 32), 0);
	uint8_t e[32];
	memcpy(e, d, 32);
	e[31] ^= 1;
	cr_assert_neq(hmac_equal(d, e, 32), 0);
}

Test(auth, macs_differ_by_role_and_secret)
{
	uint8_t cn[32], sn[32], a[32], b[32], c[32];
	memset(cn, 1, 32);
	memset(sn, 2, 32);
	agent_auth_mac("0123456789abcdef", 16, 1, cn, sn, a);
	agent_auth_mac("0123456789abcdef", 16, 0, cn, sn, b);
	agent_auth_mac("0123456789abcdeF", 16, 1, cn, sn, c);
	cr_assert_neq(memcmp(a, b, 32), 0, "client and agent proofs must differ");
	cr_assert_neq(memcmp(a, c, 32), 0);
	/* The client's proof is HMAC(secret, "shuntd-client\0" snonce cnonce). */
	const void *parts[] = {"shuntd-client", sn, cn};
	const size_t lens[] = {14, 32, 32};
	hmac_sha256("0123456789abcdef", 16, parts, lens, 3, c);
	cr_assert_eq(memcmp(a, c, 32), 0);
}

/* ---- frames ----------------------------------------------------------------- */

static size_t enc(const struct agent_msg *m, uint8_t *buf)
{
	size_t n = agent_encode(m, buf);
	cr_assert_gt(n, 0, "type %d did not encode", m->type);
	return n;
}

/* Every proper prefix is "need more", the whole decodes to m. */
static void roundtrip(const struct agent_msg *m)
{
	uint8_t buf[AGENT_FRAME_MAX + 8], again[AGENT_FRAME_MAX];
	struct agent_msg d;
	int why;
	size_t n = enc(m, buf);
	for (size_t k = 0; k < n; k++)
		cr_assert_eq(agent_decode(buf, k, &d, &why), 0, "prefix %zu of type %d", k, m->type);
	memset(buf + n, 0xee, 8); /* the next frame's bytes are not ours */
	cr_assert_eq(agent_decode(buf, n + 8, &d, &why), (int)n);
	cr_assert_eq(d.type, m->type);
	cr_assert_eq(agent_encode(&d, again), n);
	cr_assert_eq(memcmp(buf, again, n), 0, "type %d does not re-encode", m->type);
}

Test(frames, roundtrip_every_type)
{
	struct agent_msg m;
	memset(&m, 0, sizeof m);
	m.type = AGENT_HELLO;
	memset(m.u.nonce, 0x5a, AGENT_NONCE_LEN);
	roundtrip(&m);
	m.type = AGENT_CHALLENGE;
	roundtrip(&m);
	m.type = AGENT_AUTH;
	roundtrip(&m);
	m.type = AGENT_AUTH_OK;
	roundtrip(&m);
	memset(&m, 0, sizeof m);
	m.type = AGENT_QUERY;
	m.u.query.addr[15] = 1;
	m.u.query.port = 6379;
	roundtrip(&m);
	m.type = AGENT_QUERY_ANSWER;
	m.u.status = AGENT_ST_NO_LISTENER;
	roundtrip(&m);
	m.type = AGENT_OFFER_ANSWER;
	m.u.status = AGENT_ST_REFUSED;
	roundtrip(&m);
	m.type = AGENT_ERROR;
	m.u.code = AGENT_E_OVERSIZED;
	roundtrip(&m);
	m.type = AGENT_OFFER;
	m.u.offer = good_offer();
	roundtrip(&m);
	struct agent_msg d;
	uint8_t buf[AGENT_FRAME_MAX];
	size_t n = enc(&m, buf);
	cr_assert_eq(n, AGENT_HDR_LEN + AGENT_OFFER_LEN);
	cr_assert_eq(agent_decode(buf, n, &d, NULL), (int)n);
	cr_assert_eq(memcmp(&d.u.offer, &m.u.offer, sizeof m.u.offer), 0);
}

Test(frames, relay)
{
	struct agent_msg m = {.type = AGENT_RELAY}, d;
	uint8_t buf[AGENT_FRAME_MAX];
	m.u.relay.tuple.caddr[15] = 1;
	m.u.relay.tuple.saddr[15] = 2;
	m.u.relay.tuple.cport = 40000;
	m.u.relay.tuple.sport = 6379;
	memset(m.u.relay.token, 0xa5, AGENT_TOKEN_LEN);
	m.u.relay.pos = 0x0102030405060708ull;
	m.u.relay.to_client = 1;
	roundtrip(&m);
	size_t n = enc(&m, buf);
	cr_assert_eq(n, AGENT_HDR_LEN + AGENT_RELAY_LEN);
	cr_assert_eq(buf[AGENT_HDR_LEN + 52], 0x01); /* big endian position */
	cr_assert_eq(buf[AGENT_HDR_LEN + 59], 0x08);
	cr_assert_eq(agent_decode(buf, n, &d, NULL), (int)n);
	cr_assert_eq(memcmp(&d.u.relay.tuple, &m.u.relay.tuple, sizeof m.u.relay.tuple), 0);
	cr_assert_eq(memcmp(d.u.relay.token, m.u.relay.token, AGENT_TOKEN_LEN), 0);
	cr_assert_eq(d.u.relay.pos, m.u.relay.pos);
	cr_assert_eq(d.u.relay.to_client, 1);
	/* A side that is neither end, and a zero port, are malformed. */
	int why = 0;
	buf[AGENT_HDR_LEN + 60] = 2;
	cr_assert_eq(agent_decode(buf, n, &d, &why), -1);
	cr_assert_eq(why, AGENT_E_MALFORMED);
	buf[AGENT_HDR_LEN + 60] = 0;
	buf[AGENT_HDR_LEN + 32] = buf[AGENT_HDR_LEN + 33] = 0;
	cr_assert_eq(agent_decode(buf, n, &d, &why), -1);
	m.u.relay.to_client = 3;
	cr_assert_eq(agent_encode(&m, buf), 0);
	m.type = AGENT_RELAY_ANSWER;
	m.u.status = AGENT_ST_OK;
	roundtrip(&m);
}

static int decode_err(const uint8_t *b, size_t n)
{
	struct agent_msg m;
	int why = 0;
	cr_assert_eq(agent_decode(b, n, &m, &why), -1);
	return why;
}

/* TAKE (a tuple) and its answer (a status, and the offer only with OK). */
Test(frames, take)
{
	struct agent_msg m = {.type = AGENT_TAKE}, d;
	uint8_t buf[AGENT_FRAME_MAX];
	int why = 0;
	m.u.take = good_offer().tuple;
	roundtrip(&m);
	size_t n = enc(&m, buf);
	cr_assert_eq(n, AGENT_HDR_LEN + 36);
	cr_assert_eq(buf[AGENT_HDR_LEN + 32], 40000 >> 8); /* big endian ports */
	buf[AGENT_HDR_LEN + 34] = buf[AGENT_HDR_LEN + 35] = 0;
	cr_assert_eq(agent_decode(buf, n, &d, &why), -1);
	cr_assert_eq(why, AGENT_E_MALFORMED);
	m.u.take.cport = 0;
	cr_assert_eq(agent_encode(&m, buf), 0);

	memset(&m, 0, sizeof m);
	m.type = AGENT_TAKE_ANSWER;
	m.u.taken.status = AGENT_ST_OK;
	m.u.taken.offer = good_offer();
	roundtrip(&m);
	n = enc(&m, buf);
	cr_assert_eq(n, AGENT_HDR_LEN + AGENT_TAKE_ANSWER_LEN);
	cr_assert_eq(agent_decode(buf, n, &d, NULL), (int)n);
	cr_assert_eq(memcmp(&d.u.taken.offer, &m.u.taken.offer, sizeof m.u.taken.offer), 0);
	/* OK with an offer out of bounds: refused both ways. */
	buf[AGENT_HDR_LEN + 1 + 88 + 3] = 200; /* addrlen */
	cr_assert_eq(decode_err(buf, n), AGENT_E_MALFORMED);
	m.u.taken.offer.ring_size = 3;
	cr_assert_eq(agent_encode(&m, buf), 0);
	/* Any other status: the offer is all zeros, whatever the struct held. */
	m.u.taken.status = AGENT_ST_NO_OFFER;
	roundtrip(&m);
	n = enc(&m, buf);
	for (size_t i = AGENT_HDR_LEN + 1; i < n; i++)
		cr_assert_eq(buf[i], 0);
	buf[n - 1] = 1;
	cr_assert_eq(decode_err(buf, n), AGENT_E_MALFORMED);
	m.u.taken.status = AGENT_ST_END;
	cr_assert_eq(agent_encode(&m, buf), 0);
}

/* SIGN (an offer, no signature yet) and its answer (a signature only with
 * OK); an OFFER carries one, any bytes, through TAKE_ANSWER too. */
Test(frames, sign)
{
	struct agent_msg m = {.type = AGENT_SIGN}, d;
	uint8_t buf[AGENT_FRAME_MAX];
	m.u.sign = good_offer();
	roundtrip(&m);
	size_t n = enc(&m, buf);
	cr_assert_eq(n, AGENT_HDR_LEN + AGENT_OFFER_LEN);
	cr_assert_eq(buf[3], AGENT_SIGN);
	cr_assert_eq(agent_decode(buf, n, &d, NULL), (int)n);
	cr_assert_eq(memcmp(&d.u.sign, &m.u.sign, sizeof m.u.sign), 0);
	/* A signature in a request: refused both ways; so is a bad offer. */
	buf[n - 1] = 1;
	cr_assert_eq(decode_err(buf, n), AGENT_E_MALFORMED);
	m.u.sign.csig[31] = 1;
	cr_assert_eq(agent_encode(&m, buf), 0);
	m.u.sign = good_offer();
	m.u.sign.addrlen = 0;
	cr_assert_eq(agent_encode(&m, buf), 0);

	memset(&m, 0, sizeof m);
	m.type = AGENT_SIGN_ANSWER;
	m.u.signed_.status = AGENT_ST_OK;
	memset(m.u.signed_.csig, 0xc5, AGENT_MAC_LEN);
	roundtrip(&m);
	n = enc(&m, buf);
	cr_assert_eq(n, AGENT_HDR_LEN + AGENT_SIGN_ANSWER_LEN);
	cr_assert_eq(agent_decode(buf, n, &d, NULL), (int)n);
	cr_assert_eq(memcmp(d.u.signed_.csig, m.u.signed_.csig, AGENT_MAC_LEN), 0);
	/* Not OK: no signature, all zeros. */
	m.u.signed_.status = AGENT_ST_NO_KEY;
	cr_assert_eq(agent_encode(&m, buf), 0);
	memset(m.u.signed_.csig, 0, AGENT_MAC_LEN);
	roundtrip(&m);
	n = enc(&m, buf);
	buf[n - 1] = 9;
	cr_assert_eq(decode_err(buf, n), AGENT_E_MALFORMED);
	m.u.signed_.status = AGENT_ST_END;
	cr_assert_eq(agent_encode(&m, buf), 0);

	/* The offer's signature travels as it is. */
	memset(&m, 0, sizeof m);
	m.type = AGENT_OFFER;
	m.u.offer = good_offer();
	memset(m.u.offer.csig, 0x3c, AGENT_MAC_LEN);
	roundtrip(&m);
	n = enc(&m, buf);
	cr_assert_eq(memcmp(buf + AGENT_HDR_LEN + AGENT_OFFER_SIGNED_LEN, m.u.offer.csig,
			    AGENT_MAC_LEN), 0);
	cr_assert_eq(agent_decode(buf, n, &d, NULL), (int)n);
	cr_assert_eq(memcmp(d.u.offer.csig, m.u.offer.csig, AGENT_MAC_LEN), 0);
}

/* The countersignature covers every field but itself, and the key. */
Test(countersig, binds_tuple_endpoint_token_key)
{
	static const uint8_t key[] = "countersign-key-0123456789";
	struct agent_offer o = good_offer(), x;
	uint8_t a[AGENT_MAC_LEN], b[AGENT_MAC_LEN];
	agent_countersig(key, sizeof key - 1, &o, a);
	/* Deterministic, and blind to csig and to padding. */
	x = o;
	memset(x.csig, 0x77, AGENT_MAC_LEN);
	memset(x.addr + x.addrlen, 0x55, AGENT_ADDR_MAX - x.addrlen);
	agent_countersig(key, sizeof key - 1, &x, b);
	cr_assert_eq(memcmp(a, b, AGENT_MAC_LEN), 0);
#define DIFFERS(stmt)                                                            \
	do {                                                                      \
		x = o;                                                            \
		stmt;                                                             \
		agent_countersig(key, sizeof key - 1, &x, b);                     \
		cr_assert_neq(memcmp(a, b, AGENT_MAC_LEN), 0, "same for: %s", #stmt); \
	} while (0)
	DIFFERS(x.tuple.cport++);
	DIFFERS(x.tuple.sport++);
	DIFFERS(x.tuple.caddr[15] ^= 1);
	DIFFERS(x.tuple.saddr[15] ^= 1);
	DIFFERS(x.addr[3] ^= 1);          /* another endpoint */
	DIFFERS(x.addrlen--);
	DIFFERS(x.addr_format = 3);
	DIFFERS(x.token[0] ^= 1);
	DIFFERS(x.ring_size <<= 1);
	DIFFERS(x.provider[0] = 'u');
	/* Another key; the same key cut short. */
	agent_countersig((const uint8_t *)"another-key-0123456789", 22, &o, b);
	cr_assert_neq(memcmp(a, b, AGENT_MAC_LEN), 0);
	agent_countersig(key, sizeof key - 2, &o, b);
	cr_assert_neq(memcmp(a, b, AGENT_MAC_LEN), 0);
	/* Not the challenge-response's MAC under the same key either. */
	uint8_t n1[AGENT_NONCE_LEN] = {0}, n2[AGENT_NONCE_LEN] = {0};
	agent_auth_mac((const char *)key, sizeof key - 1, 1, n1, n2, b);
	cr_assert_neq(memcmp(a, b, AGENT_MAC_LEN), 0);
}

Test(frames, wire_layout)
{
	struct agent_msg m = {.type = AGENT_QUERY};
	uint8_t buf[AGENT_FRAME_MAX];
	m.u.query.addr[15] = 9;
	m.u.query.port = 0x1234;
	cr_assert_eq(agent_encode(&m, buf), 26);
	static const uint8_t want[8] = {'S', 'D', 2, AGENT_QUERY, 0, 0, 0, 18};
	cr_assert_eq(memcmp(buf, want, 8), 0);
	cr_assert_eq(buf[8 + 15], 9);
	cr_assert_eq(buf[24], 0x12);
	cr_assert_eq(buf[25], 0x34);
}

Test(frames, header_rejections_as_early_as_possible)
{
	cr_assert_eq(decode_err((const uint8_t *)"G", 1), AGENT_E_MALFORMED);
	cr_assert_eq(decode_err((const uint8_t *)"SX", 2), AGENT_E_MALFORMED);
	cr_assert_eq(decode_err((const uint8_t *)"SD\x03", 3), AGENT_E_VERSION);
	cr_assert_eq(decode_err((const uint8_t *)"SD\x02\x00", 4), AGENT_E_MALFORMED);
	const uint8_t past_last[] = {'S', 'D', AGENT_PROTO_VERSION, AGENT_TYPE_END};
	cr_assert_eq(decode_err(past_last, 4), AGENT_E_MALFORMED);
	cr_assert_eq(decode_err((const uint8_t *)"SD\x02\xff", 4), AGENT_E_MALFORMED);
	/* Oversized is known from the length alone, before any body. */
	cr_assert_eq(decode_err((const uint8_t *)"SD\x02\x05\x00\x00\x01\x41", 8),
		     AGENT_E_OVERSIZED);
	cr_assert_eq(decode_err((const uint8_t *)"SD\x02\x05\xff\xff\xff\xff", 8),
		     AGENT_E_OVERSIZED);
	/* Each type has one length. */
	cr_assert_eq(decode_err((const uint8_t *)"SD\x02\x05\x00\x00\x00\x11", 8),
		     AGENT_E_MALFORMED);
	cr_assert_eq(decode_err((const uint8_t *)"SD\x02\x01\x00\x00\x00\x00", 8),
		     AGENT_E_MALFORMED);
}

Test(frames, body_rejections)
{
	uint8_t b[AGENT_FRAME_MAX];
	struct agent_msg m = {.type = AGENT_QUERY_ANSWER, .u.status = 0};
	size_t n = enc(&m, b);
	b[8] = AGENT_ST_END;
	cr_assert_eq(decode_err(b, n), AGENT_E_MALFORMED);
	m.type = AGENT_ERROR;
	m.u.code = AGENT_E_AUTH;
	n = enc(&m, b);
	b[8] = 0;
	cr_assert_eq(decode_err(b, n), AGENT_E_MALFORMED);
	m.type = AGENT_QUERY;
	m.u.query.port = 1;
	n = enc(&m, b);
	b[25] = 0; /* port 0 */
	cr_assert_eq(decode_err(b, n), AGENT_E_MALFORMED);
	/* Encoding refuses what decoding would reject. */
	m.u.query.port = 0;
	cr_assert_eq(agent_encode(&m, b), 0);
	m.type = 0;
	cr_assert_eq(agent_encode(&m, b), 0);
	m.type = AGENT_TYPE_END;
	cr_assert_eq(agent_encode(&m, b), 0);
}

/* Offer bodies: each bad field alone is rejected by decode and encode. */
Test(frames, offer_bounds)
{
	struct agent_offer o = good_offer();
	cr_assert_eq(agent_offer_check(&o), 0);
#define BAD_OFFER(stmt)                                                           \
	do {                                                                       \
		struct agent_msg m_ = {.type = AGENT_OFFER};                       \
		uint8_t b_[AGENT_FRAME_MAX];                                       \
		m_.u.offer = good_offer();                                         \
		size_t n_ = enc(&m_, b_);                                          \
		struct agent_offer *o_ = &m_.u.offer;                                \
		stmt;                                                              \
		cr_assert_eq(agent_offer_check(o_), -1, "accepted: %s", #stmt);    \
		cr_assert_eq(agent_encode(&m_, b_), 0, "encoded: %s", #stmt);     \
		(void)n_;                                                          \
	} while (0)
	BAD_OFFER(o_->addrlen = 0);
	BAD_OFFER(o_->addrlen = AGENT_ADDR_MAX + 1);
	BAD_OFFER(o_->addrlen = 0xffffffffu);
	BAD_OFFER(o_->addr_format = 0);
	BAD_OFFER(o_->addr_format = 0x10000);
	BAD_OFFER(o_->ring_size = 4095);
	BAD_OFFER(o_->ring_size = 3 << 20);
	BAD_OFFER(o_->ring_size = (uint64_t)1 << 31);
	BAD_OFFER(memset(o_->provider, 'a', sizeof o_->provider)); /* no NUL */
	BAD_OFFER(o_->provider[0] = 0);
	BAD_OFFER(o_->provider[1] = 'X');
	BAD_OFFER(o_->provider[2] = '/');
	BAD_OFFER(o_->tuple.cport = 0);
	BAD_OFFER(o_->tuple.sport = 0);
	/* And on the wire: addrlen 200 in an otherwise good frame; padding
	 * that is not zero (addr past addrlen, provider past its NUL). */
	struct agent_msg m = {.type = AGENT_OFFER};
	uint8_t b[AGENT_FRAME_MAX];
	m.u.offer = good_offer();
	size_t n = enc(&m, b);
	b[8 + 88 + 3] = 200;
	cr_assert_eq(decode_err(b, n), AGENT_E_MALFORMED);
	n = enc(&m, b);
	b[8 + 92 + 16] = 1;
	cr_assert_eq(decode_err(b, n), AGENT_E_MALFORMED);
	n = enc(&m, b);
	b[8 + 52 + 20] = 'a';
	cr_assert_eq(decode_err(b, n), AGENT_E_MALFORMED);
	/* A struct with junk in its padding encodes to the canonical bytes. */
	uint8_t clean[AGENT_FRAME_MAX], dirty[AGENT_FRAME_MAX];
	size_t cn = enc(&m, clean);
	memset(m.u.offer.addr + 16, 0xa5, AGENT_ADDR_MAX - 16);
	memset(m.u.offer.provider + 12, 0x5a, sizeof m.u.offer.provider - 13);
	cr_assert_eq(agent_offer_check(&m.u.offer), 0);
	cr_assert_eq(enc(&m, dirty), cn);
	cr_assert_eq(memcmp(clean, dirty, cn), 0);
	/* Extremes that are fine. */
	o.addrlen = AGENT_ADDR_MAX;
	memset(o.addr, 1, AGENT_ADDR_MAX);
	o.ring_size = SHUNT_RING_MIN;
	cr_assert_eq(agent_offer_check(&o), 0);
	o.ring_size = SHUNT_RING_MAX;
	memset(o.provider, 0, sizeof o.provider);
	memset(o.provider, 'z', sizeof o.provider - 1);
	cr_assert_eq(agent_offer_check(&o), 0);
}

/* Any byte string: parse, need more, or reject, and never read past len
 * (checked by ASan in the sanitizer build and by the fuzzer). */
Test(frames, random_bytes_are_total)
{
	uint8_t b[AGENT_FRAME_MAX + 16];
	struct agent_msg m;
	unsigned seed = 12345;
	int seen[3] = {0};
	for (int i = 0; i < 200000; i++) {
		size_t n = (size_t)(rand_r(&seed) % sizeof b);
		for (size_t k = 0; k < n; k++)
			b[k] = (uint8_t)rand_r(&seed);
		if (i & 1) { /* a plausible header, so bodies are exercised */
			b[0] = 'S', b[1] = 'D', b[2] = AGENT_PROTO_VERSION;
			b[3] = (uint8_t)(1 + rand_r(&seed) % (AGENT_TYPE_END - 1));
			b[4] = b[5] = b[6] = 0;
		}
		int why = 0;
		int r = agent_decode(b, n, &m, &why);
		cr_assert(r >= -1 && r <= (int)n);
		seen[r > 0 ? 0 : r == 0 ? 1 : 2]++;
		if (r < 0)
			cr_assert(why > 0 && why < AGENT_E_END);
	}
	cr_assert(seen[1] && seen[2]);
}

/* ---- secret files ----------------------------------------------------------- */

static char tmpdir[] = "/tmp/test_agent_proto.XXXXXX";

static void rmtmp(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd)) {
	}
}

static const char *put_file(const char *name, const char *text, mode_t mode)
{
	static char path[256];
	snprintf(path, sizeof path, "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
	return path;
}

Test(secret, file_rules, .fini = rmtmp)
{
	char out[AGENT_SECRET_MAX + 1], err[256];
	cr_assert_not_null(mkdtemp(tmpdir));
	const char *p = put_file("ok", "0123456789abcdef-secret\n\n", 0600);
	cr_assert_eq(agent_secret_read(p, out, sizeof out, err, sizeof err), 23);
	cr_assert_str_eq(out, "0123456789abcdef-secret");
	p = put_file("readable", "0123456789abcdef-secret\n", 0644);
	cr_assert_eq(agent_secret_read(p, out, sizeof out, err, sizeof err), -1);
	cr_assert(strstr(err, "group or others"), "%s", err);
	p = put_file("short", "0123456789\n", 0600);
	cr_assert_eq(agent_secret_read(p, out, sizeof out, err, sizeof err), -1);
	cr_assert(strstr(err, "16..128"), "%s", err);
	char big[300];
	memset(big, 'x', 200);
	big[200] = 0;
	p = put_file("long", big, 0600);
	cr_assert_eq(agent_secret_read(p, out, sizeof out, err, sizeof err), -1);
	cr_assert_eq(agent_secret_read("/nonexistent/secret", out, sizeof out, err, sizeof err),
		     -1);
	cr_assert(strstr(err, "No such file"), "%s", err);
	/* A FIFO in its place is refused, not waited on for a writer. */
	char fifo[sizeof tmpdir + 8];
	snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(agent_secret_read(fifo, out, sizeof out, err, sizeof err), -1);
	cr_assert(strstr(err, "regular file"), "%s", err);

	struct shunt_config c;
	shunt_config_defaults(&c);
	cr_assert_eq(agent_secret_get(&c, out, sizeof out, err, sizeof err), 0);
	strcpy(c.agent_secret, "inline-secret-0123");
	cr_assert_eq(agent_secret_get(&c, out, sizeof out, err, sizeof err), 18);
	c.agent_secret[0] = 0;
	snprintf(c.agent_secret_file, sizeof c.agent_secret_file, "%s/ok", tmpdir);
	cr_assert_eq(agent_secret_get(&c, out, sizeof out, err, sizeof err), 23);
}

/* The countersign key: as a secret file, and its owner us (or root). */
Test(secret, countersign_key_file, .fini = rmtmp)
{
	char out[AGENT_SECRET_MAX + 1], err[256];
	cr_assert_not_null(mkdtemp(tmpdir));
	const char *p = put_file("key", "countersign-key-0123456789\n", 0600);
	cr_assert_eq(agent_countersign_key_read(p, out, sizeof out, err, sizeof err), 26);
	cr_assert_str_eq(out, "countersign-key-0123456789");
	p = put_file("group", "countersign-key-0123456789\n", 0640);
	cr_assert_eq(agent_countersign_key_read(p, out, sizeof out, err, sizeof err), -1);
	cr_assert(strstr(err, "countersign_key_file"), "%s", err);
	cr_assert(strstr(err, "group or others"), "%s", err);
	p = put_file("world", "countersign-key-0123456789\n", 0604);
	cr_assert_eq(agent_countersign_key_read(p, out, sizeof out, err, sizeof err), -1);
	p = put_file("short", "0123\n", 0600);
	cr_assert_eq(agent_countersign_key_read(p, out, sizeof out, err, sizeof err), -1);
	cr_assert(strstr(err, "key must be"), "%s", err);
	/* Another user's file (as root: give it away) is refused. */
	if (geteuid() == 0) {
		p = put_file("theirs", "countersign-key-0123456789\n", 0600);
		cr_assert_eq(chown(p, 65534, 65534), 0);
		cr_assert_eq(agent_countersign_key_read(p, out, sizeof out, err, sizeof err), -1);
		cr_assert(strstr(err, "this user"), "%s", err);
	}
}

Test(names, all_named)
{
	for (int t = 1; t < AGENT_TYPE_END; t++)
		cr_assert_str_neq(agent_type_name(t), "unknown");
	for (int e = 1; e < AGENT_E_END; e++)
		cr_assert_str_neq(agent_error_name(e), "unknown");
	cr_assert_str_eq(agent_type_name(0), "unknown");
	cr_assert_str_eq(agent_error_name(99), "unknown");
}
