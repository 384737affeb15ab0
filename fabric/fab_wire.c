/* Connection data and relay proofs (fab_wire.h). */
#include "fab_wire.h"

#include <netinet/in.h>
#include <rdma/fabric.h>
#include <string.h>

#include "core/shunt_tuple.h"

#include "agent/agent_hmac.h"

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_head(uint8_t *p)
{
	p[0] = (uint8_t)(FAB_MAGIC >> 24);
	p[1] = (uint8_t)(FAB_MAGIC >> 16);
	p[2] = (uint8_t)(FAB_MAGIC >> 8);
	p[3] = (uint8_t)FAB_MAGIC;
	p[4] = FAB_VERSION;
}

static int head_ok(const uint8_t *p)
{
	uint8_t h[5];
	put_head(h);
	return !memcmp(p, h, sizeof h);
}

/* HMAC-SHA256 under key of label and the parts, cut to FAB_MAC_LEN. */
static void mac(const uint8_t key[FAB_KEY_LEN], const char *label, const void *a, size_t alen,
		const void *b, size_t blen, uint8_t out[FAB_MAC_LEN])
{
	uint8_t full[SHA256_LEN];
	const void *parts[3] = {label, a, b};
	const size_t lens[3] = {strlen(label) + 1, alen, blen};
	hmac_sha256(key, FAB_KEY_LEN, parts, lens, b ? 3 : 2, full);
	memcpy(out, full, FAB_MAC_LEN);
}

void fab_offer_id(const uint8_t key[FAB_KEY_LEN], uint8_t id[FAB_ID_LEN])
{
	uint8_t full[FAB_MAC_LEN];
	mac(key, "shunt-offer-id", "", 0, NULL, 0, full);
	memcpy(id, full, FAB_ID_LEN);
}

/* The request's bytes before its MAC (decline normalised to 0/1). */
static void req_bytes(const struct fab_cm_req *r, uint8_t out[FAB_CM_REQ_LEN])
{
	memset(out, 0, FAB_CM_REQ_LEN);
	put_head(out);
	out[5] = (uint8_t)!!r->decline;
	out[6] = r->ring_log2;
	memcpy(out + 8, r->id, FAB_ID_LEN);
	put64(out + 24, r->rx_addr);
	put64(out + 32, r->rx_key);
}

void fab_cm_req_make(struct fab_cm_req *r, uint8_t out[FAB_CM_REQ_LEN],
		     const uint8_t key[FAB_KEY_LEN], uint64_t ring, uint64_t rx_addr,
		     uint64_t rx_key, int decline)
{
	memset(r, 0, sizeof *r);
	r->decline = (uint8_t)!!decline;
	while (ring > ((uint64_t)1 << r->ring_log2) && r->ring_log2 < 63)
		r->ring_log2++;
	fab_offer_id(key, r->id);
	r->rx_addr = rx_addr;
	r->rx_key = rx_key;
	req_bytes(r, out);
	mac(key, "shunt-cm-req", out, 40, NULL, 0, r->mac);
	memcpy(out + 40, r->mac, FAB_MAC_LEN);
}

int fab_cm_req_parse(struct fab_cm_req *r, const void *data, size_t len)
{
	const uint8_t *p = data;
	if (len < FAB_CM_REQ_LEN || !head_ok(p) || p[5] > 1 || p[7] || p[6] > 63 ||
	    (1ull << p[6]) < FAB_MIN_RING || (1ull << p[6]) > FAB_MAX_RING)
		return -1;
	memset(r, 0, sizeof *r);
	r->decline = p[5];
	r->ring_log2 = p[6];
	memcpy(r->id, p + 8, FAB_ID_LEN);
	r->rx_addr = get64(p + 24);
	r->rx_key = get64(p + 32);
	memcpy(r->mac, p + 40, FAB_MAC_LEN);
	return 0;
}

int fab_cm_req_verify(const struct fab_cm_req *r, const uint8_t key[FAB_KEY_LEN])
{
	uint8_t b[FAB_CM_REQ_LEN], want[FAB_MAC_LEN], id[FAB_ID_LEN];
	req_bytes(r, b);
	mac(key, "shunt-cm-req", b, 40, NULL, 0, want);
	fab_offer_id(key, id);
	/* Both compared, whatever the first says: constant time. */
	int bad = hmac_equal(want, r->mac, FAB_MAC_LEN);
	bad |= hmac_equal(id, r->id, FAB_ID_LEN);
	return bad ? -1 : 0;
}

static void rep_bytes(const struct fab_cm_rep *r, uint8_t out[FAB_CM_REP_LEN])
{
	memset(out, 0, FAB_CM_REP_LEN);
	put_head(out);
	put64(out + 8, r->rx_addr);
	put64(out + 16, r->rx_key);
}

void fab_cm_rep_make(struct fab_cm_rep *r, uint8_t out[FAB_CM_REP_LEN],
		     const uint8_t key[FAB_KEY_LEN], const struct fab_cm_req *req,
		     uint64_t rx_addr, uint64_t rx_key)
{
	memset(r, 0, sizeof *r);
	r->rx_addr = rx_addr;
	r->rx_key = rx_key;
	rep_bytes(r, out);
	/* Bound to the request it answers: it cannot answer another. */
	mac(key, "shunt-cm-rep", req->mac, FAB_MAC_LEN, out, 24, r->mac);
	memcpy(out + 24, r->mac, FAB_MAC_LEN);
}

int fab_cm_rep_check(struct fab_cm_rep *r, const void *data, size_t len,
		     const uint8_t key[FAB_KEY_LEN], const struct fab_cm_req *req)
{
	const uint8_t *p = data;
	uint8_t want[FAB_MAC_LEN];
	if (len < FAB_CM_REP_LEN || !head_ok(p) || p[5] || p[6] || p[7])
		return -1;
	memset(r, 0, sizeof *r);
	r->rx_addr = get64(p + 8);
	r->rx_key = get64(p + 16);
	memcpy(r->mac, p + 24, FAB_MAC_LEN);
	mac(key, "shunt-cm-rep", req->mac, FAB_MAC_LEN, p, 24, want);
	return hmac_equal(want, r->mac, FAB_MAC_LEN) ? -1 : 0;
}

void fab_relay_proof(const uint8_t key[FAB_KEY_LEN], const struct agent_relay *r,
		     uint8_t proof[AGENT_TOKEN_LEN])
{
	/* Over the relay's canonical frame, its proof field zero. */
	struct agent_msg m = {.type = AGENT_RELAY};
	uint8_t b[AGENT_FRAME_MAX];
	m.u.relay = *r;
	memset(m.u.relay.token, 0, sizeof m.u.relay.token);
	size_t n = agent_encode(&m, b);
	uint8_t out[FAB_MAC_LEN];
	mac(key, "shunt-relay", b, n, NULL, 0, out);
	memcpy(proof, out, AGENT_TOKEN_LEN);
}

int fab_relay_verify(const uint8_t key[FAB_KEY_LEN], const struct agent_relay *r)
{
	uint8_t want[AGENT_TOKEN_LEN];
	fab_relay_proof(key, r, want);
	return hmac_equal(want, r->token, AGENT_TOKEN_LEN) ? -1 : 0;
}

int fab_offer_addr_is_peer(const struct agent_offer *o, const struct sockaddr *peer)
{
	const struct sockaddr *a = (const struct sockaddr *)o->addr;
	uint8_t x[16], y[16];
	uint16_t px, py;
	if ((o->addr_format != FI_SOCKADDR_IN && o->addr_format != FI_SOCKADDR_IN6 &&
	     o->addr_format != FI_SOCKADDR) ||
	    o->addrlen < sizeof(struct sockaddr_in) || o->addrlen > AGENT_ADDR_MAX)
		return o->addr_format != FI_SOCKADDR_IN && o->addr_format != FI_SOCKADDR_IN6;
	if (a->sa_family == AF_INET6 && o->addrlen < sizeof(struct sockaddr_in6))
		return 0;
	if (a->sa_family != AF_INET && a->sa_family != AF_INET6)
		return o->addr_format == FI_SOCKADDR; /* another family: nothing to compare */
	return shunt_addr16(a, x, &px) == 0 && shunt_addr16(peer, y, &py) == 0 &&
	       memcmp(x, y, 16) == 0;
}
