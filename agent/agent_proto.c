#include "agent_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_hmac.h"
#include "config/shunt_config.h"

/* ---- byte order ------------------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* ---- bodies ---------------------------------------------------------------- */

/* Exact body length of each type; 0 marks types that do not exist. */
static const uint16_t body_len[AGENT_TYPE_END] = {
	[AGENT_HELLO] = AGENT_NONCE_LEN,
	[AGENT_CHALLENGE] = AGENT_NONCE_LEN,
	[AGENT_AUTH] = AGENT_MAC_LEN,
	[AGENT_AUTH_OK] = AGENT_MAC_LEN,
	[AGENT_QUERY] = 18,
	[AGENT_QUERY_ANSWER] = 1,
	[AGENT_OFFER] = AGENT_OFFER_LEN,
	[AGENT_OFFER_ANSWER] = 1,
	[AGENT_ERROR] = 1,
	[AGENT_RELAY] = AGENT_RELAY_LEN,
	[AGENT_RELAY_ANSWER] = 1,
	[AGENT_TAKE] = 36,
	[AGENT_TAKE_ANSWER] = AGENT_TAKE_ANSWER_LEN,
	[AGENT_SIGN] = AGENT_OFFER_LEN,
	[AGENT_SIGN_ANSWER] = AGENT_SIGN_ANSWER_LEN,
};

_Static_assert(AGENT_OFFER_LEN <= AGENT_BODY_MAX, "an offer fits a frame");
_Static_assert(AGENT_TAKE_ANSWER_LEN <= AGENT_BODY_MAX, "a taken offer fits a frame");
_Static_assert(AGENT_OFFER_SIGNED_LEN + AGENT_MAC_LEN == AGENT_OFFER_LEN, "csig ends an offer");
_Static_assert(sizeof(((struct agent_offer *)0)->provider) == 32, "offer layout");

static int all_zero(const uint8_t *p, size_t n)
{
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= p[i];
	return d == 0;
}

int agent_offer_check(const struct agent_offer *o)
{
	const char *p = o->provider;
	size_t n = strnlen(p, sizeof o->provider);
	if (n == 0 || n == sizeof o->provider)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char ch = p[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
		      ch == ';' || ch == '-'))
			return -1;
	}
	if (o->addrlen == 0 || o->addrlen > AGENT_ADDR_MAX)
		return -1;
	if (o->addr_format == 0 || o->addr_format > 0xffff)
		return -1;
	uint64_t rs = o->ring_size;
	if (rs < SHUNT_RING_MIN || rs > SHUNT_RING_MAX || (rs & (rs - 1)))
		return -1;
	if (o->tuple.cport == 0 || o->tuple.sport == 0)
		return -1;
	return 0;
}

static void enc_tuple(const struct agent_tuple *t, uint8_t *p)
{
	memcpy(p, t->caddr, 16);
	memcpy(p + 16, t->saddr, 16);
	put16(p + 32, t->cport);
	put16(p + 34, t->sport);
}

/* 0, or -1 for a port 0 (no connection has one). */
static int dec_tuple(const uint8_t *p, struct agent_tuple *t)
{
	memcpy(t->caddr, p, 16);
	memcpy(t->saddr, p + 16, 16);
	t->cport = get16(p + 32);
	t->sport = get16(p + 34);
	return t->cport && t->sport ? 0 : -1;
}

/* Padding goes out as zeros whatever the struct held there, so the wire
 * form is canonical (and nothing of the sender's memory leaks). */
static void enc_offer(const struct agent_offer *o, uint8_t *p)
{
	size_t pn = strnlen(o->provider, sizeof o->provider);
	memcpy(p, o->tuple.caddr, 16);
	memcpy(p + 16, o->tuple.saddr, 16);
	put16(p + 32, o->tuple.cport);
	put16(p + 34, o->tuple.sport);
	memcpy(p + 36, o->token, AGENT_TOKEN_LEN);
	memset(p + 52, 0, 32);
	memcpy(p + 52, o->provider, pn);
	put32(p + 84, o->addr_format);
	put32(p + 88, o->addrlen);
	memset(p + 92, 0, AGENT_ADDR_MAX);
	memcpy(p + 92, o->addr, o->addrlen);
	put64(p + 220, o->ring_size);
	memcpy(p + AGENT_OFFER_SIGNED_LEN, o->csig, AGENT_MAC_LEN);
}

static void dec_offer(const uint8_t *p, struct agent_offer *o);

/* The offer at b, checked, with zero padding: 0, or -1. */
static int dec_offer_checked(const uint8_t *b, struct agent_offer *o)
{
	dec_offer(b, o);
	if (agent_offer_check(o))
		return -1;
	/* Canonical: padding is zero on the wire. */
	size_t pn = strlen(o->provider);
	return all_zero(b + 52 + pn, 32 - pn) &&
			       all_zero(b + 92 + o->addrlen, AGENT_ADDR_MAX - o->addrlen)
		       ? 0
		       : -1;
}

static void dec_offer(const uint8_t *p, struct agent_offer *o)
{
	memset(o, 0, sizeof *o);
	memcpy(o->tuple.caddr, p, 16);
	memcpy(o->tuple.saddr, p + 16, 16);
	o->tuple.cport = get16(p + 32);
	o->tuple.sport = get16(p + 34);
	memcpy(o->token, p + 36, AGENT_TOKEN_LEN);
	memcpy(o->provider, p + 52, 32);
	o->addr_format = get32(p + 84);
	o->addrlen = get32(p + 88);
	memcpy(o->addr, p + 92, AGENT_ADDR_MAX);
	o->ring_size = get64(p + 220);
	memcpy(o->csig, p + AGENT_OFFER_SIGNED_LEN, AGENT_MAC_LEN);
}

/* ---- frames ---------------------------------------------------------------- */

static int reject(int *why, int code)
{
	if (why)
		*why = code;
	return -1;
}

int agent_decode(const uint8_t *buf, size_t len, struct agent_msg *m, int *why)
{
	/* Judge every header byte as soon as it is there, so a prefix is
	 * rejected as early as it can be (garbage closes at once). */
	if (len >= 1 && buf[0] != AGENT_MAGIC0)
		return reject(why, AGENT_E_MALFORMED);
	if (len >= 2 && buf[1] != AGENT_MAGIC1)
		return reject(why, AGENT_E_MALFORMED);
	if (len >= 3 && buf[2] != AGENT_PROTO_VERSION)
		return reject(why, AGENT_E_VERSION);
	if (len >= 4 && (buf[3] == 0 || buf[3] >= AGENT_TYPE_END))
		return reject(why, AGENT_E_MALFORMED);
	if (len < AGENT_HDR_LEN)
		return 0;
	uint8_t type = buf[3];
	uint32_t n = get32(buf + 4);
	if (n > AGENT_BODY_MAX)
		return reject(why, AGENT_E_OVERSIZED);
	if (n != body_len[type])
		return reject(why, AGENT_E_MALFORMED);
	if (len < AGENT_HDR_LEN + n)
		return 0;
	const uint8_t *b = buf + AGENT_HDR_LEN;
	memset(m, 0, sizeof *m);
	m->type = type;
	switch ((enum agent_type)type) {
	case AGENT_HELLO:
	case AGENT_CHALLENGE:
		memcpy(m->u.nonce, b, AGENT_NONCE_LEN);
		break;
	case AGENT_AUTH:
	case AGENT_AUTH_OK:
		memcpy(m->u.mac, b, AGENT_MAC_LEN);
		break;
	case AGENT_QUERY:
		memcpy(m->u.query.addr, b, 16);
		m->u.query.port = get16(b + 16);
		if (m->u.query.port == 0)
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_RELAY:
		memcpy(m->u.relay.token, b + 36, AGENT_TOKEN_LEN);
		m->u.relay.pos = get64(b + 52);
		m->u.relay.to_client = b[60];
		if (dec_tuple(b, &m->u.relay.tuple) || b[60] > 1)
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_QUERY_ANSWER:
	case AGENT_OFFER_ANSWER:
	case AGENT_RELAY_ANSWER:
		m->u.status = b[0];
		if (b[0] >= AGENT_ST_END)
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_ERROR:
		m->u.code = b[0];
		if (b[0] == 0 || b[0] >= AGENT_E_END)
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_OFFER:
		if (dec_offer_checked(b, &m->u.offer))
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_TAKE:
		if (dec_tuple(b, &m->u.take))
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_TAKE_ANSWER:
		/* An offer with OK, nothing (zeros) with any other status. */
		m->u.taken.status = b[0];
		if (b[0] >= AGENT_ST_END ||
		    (b[0] == AGENT_ST_OK ? dec_offer_checked(b + 1, &m->u.taken.offer)
					 : !all_zero(b + 1, AGENT_OFFER_LEN) ? -1 : 0))
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_SIGN:
		/* The signature is what is asked for: none yet. */
		if (dec_offer_checked(b, &m->u.sign) ||
		    !all_zero(b + AGENT_OFFER_SIGNED_LEN, AGENT_MAC_LEN))
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_SIGN_ANSWER:
		m->u.signed_.status = b[0];
		memcpy(m->u.signed_.csig, b + 1, AGENT_MAC_LEN);
		if (b[0] >= AGENT_ST_END || (b[0] != AGENT_ST_OK && !all_zero(b + 1, AGENT_MAC_LEN)))
			return reject(why, AGENT_E_MALFORMED);
		break;
	case AGENT_TYPE_END:
		return reject(why, AGENT_E_MALFORMED);
	}
	return (int)(AGENT_HDR_LEN + n);
}

size_t agent_encode(const struct agent_msg *m, uint8_t *buf)
{
	if (m->type == 0 || m->type >= AGENT_TYPE_END)
		return 0;
	uint16_t n = body_len[m->type];
	uint8_t *b = buf + AGENT_HDR_LEN;
	buf[0] = AGENT_MAGIC0;
	buf[1] = AGENT_MAGIC1;
	buf[2] = AGENT_PROTO_VERSION;
	buf[3] = m->type;
	put32(buf + 4, n);
	switch ((enum agent_type)m->type) {
	case AGENT_HELLO:
	case AGENT_CHALLENGE:
		memcpy(b, m->u.nonce, AGENT_NONCE_LEN);
		break;
	case AGENT_AUTH:
	case AGENT_AUTH_OK:
		memcpy(b, m->u.mac, AGENT_MAC_LEN);
		break;
	case AGENT_QUERY:
		if (m->u.query.port == 0)
			return 0;
		memcpy(b, m->u.query.addr, 16);
		put16(b + 16, m->u.query.port);
		break;
	case AGENT_RELAY:
		if (!m->u.relay.tuple.cport || !m->u.relay.tuple.sport || m->u.relay.to_client > 1)
			return 0;
		enc_tuple(&m->u.relay.tuple, b);
		memcpy(b + 36, m->u.relay.token, AGENT_TOKEN_LEN);
		put64(b + 52, m->u.relay.pos);
		b[60] = m->u.relay.to_client;
		break;
	case AGENT_QUERY_ANSWER:
	case AGENT_OFFER_ANSWER:
	case AGENT_RELAY_ANSWER:
		if (m->u.status >= AGENT_ST_END)
			return 0;
		b[0] = m->u.status;
		break;
	case AGENT_ERROR:
		if (m->u.code == 0 || m->u.code >= AGENT_E_END)
			return 0;
		b[0] = m->u.code;
		break;
	case AGENT_OFFER:
		if (agent_offer_check(&m->u.offer))
			return 0;
		enc_offer(&m->u.offer, b);
		break;
	case AGENT_TAKE:
		if (!m->u.take.cport || !m->u.take.sport)
			return 0;
		enc_tuple(&m->u.take, b);
		break;
	case AGENT_TAKE_ANSWER:
		if (m->u.taken.status >= AGENT_ST_END ||
		    (m->u.taken.status == AGENT_ST_OK && agent_offer_check(&m->u.taken.offer)))
			return 0;
		b[0] = m->u.taken.status;
		if (m->u.taken.status == AGENT_ST_OK)
			enc_offer(&m->u.taken.offer, b + 1);
		else
			memset(b + 1, 0, AGENT_OFFER_LEN);
		break;
	case AGENT_SIGN:
		if (agent_offer_check(&m->u.sign) || !all_zero(m->u.sign.csig, AGENT_MAC_LEN))
			return 0;
		enc_offer(&m->u.sign, b);
		break;
	case AGENT_SIGN_ANSWER:
		if (m->u.signed_.status >= AGENT_ST_END ||
		    (m->u.signed_.status != AGENT_ST_OK && !all_zero(m->u.signed_.csig, AGENT_MAC_LEN)))
			return 0;
		b[0] = m->u.signed_.status;
		memcpy(b + 1, m->u.signed_.csig, AGENT_MAC_LEN);
		break;
	case AGENT_TYPE_END:
		return 0;
	}
	return AGENT_HDR_LEN + n;
}

/* ---- authentication ------------------------------------------------------------ */

void agent_auth_mac(const char *secret, size_t slen, int client,
		    const uint8_t cnonce[AGENT_NONCE_LEN],
		    const uint8_t snonce[AGENT_NONCE_LEN], uint8_t mac[AGENT_MAC_LEN])
{
	/* Distinct labels and nonce orders, so neither proof can be replayed
	 * as the other. */
	static const char lc[] = "shuntd-client", la[] = "shuntd-agent";
	const void *parts[3] = {client ? lc : la, client ? snonce : cnonce,
				client ? cnonce : snonce};
	const size_t lens[3] = {client ? sizeof lc : sizeof la, AGENT_NONCE_LEN,
				AGENT_NONCE_LEN};
	hmac_sha256(secret, slen, parts, lens, 3, mac);
}

void agent_countersig(const uint8_t *key, size_t klen, const struct agent_offer *o,
		      uint8_t mac[AGENT_MAC_LEN])
{
	/* The canonical bytes, so both agents sign and check the same thing
	 * whatever padding their structs held; a label no other MAC of the
	 * protocol uses. */
	static const char label[] = "shuntd-countersign";
	uint8_t b[AGENT_OFFER_LEN];
	enc_offer(o, b);
	const void *parts[2] = {label, b};
	const size_t lens[2] = {sizeof label, AGENT_OFFER_SIGNED_LEN};
	hmac_sha256(key, klen, parts, lens, 2, mac);
}

/* A key file named by option: regular, not accessible by group or others,
 * and (owner_only) its owner us or root. */
static int key_read(const char *option, int owner_only, const char *path, char *out, size_t cap,
		    char *err, size_t errlen)
{
	/* (O_NONBLOCK: a FIFO there must not hang the shim or the agent.) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, errlen, "%s %s: %s", option, path, strerror(errno));
		return -1;
	}
	struct stat st;
	char buf[AGENT_SECRET_MAX + 2];
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && !(st.st_mode & 077) &&
	    (!owner_only || st.st_uid == geteuid() || st.st_uid == 0))
		n = read(fd, buf, sizeof buf);
	else
		errno = EPERM;
	int e = errno;
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "%s %s: %s", option, path,
			 e != EPERM   ? strerror(e)
			 : owner_only ? "must be a regular file of this user (or root) not "
					"accessible by group or others"
				      : "must be a regular file not accessible by group or others");
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if ((size_t)n < AGENT_SECRET_MIN || (size_t)n > AGENT_SECRET_MAX || (size_t)n >= cap ||
	    memchr(buf, 0, (size_t)n)) {
		snprintf(err, errlen, "%s %s: the %s must be %d..%d bytes, no NUL", option, path,
			 owner_only ? "key" : "secret", AGENT_SECRET_MIN, AGENT_SECRET_MAX);
		memset(buf, 0, sizeof buf);
		return -1;
	}
	memcpy(out, buf, (size_t)n);
	out[n] = 0;
	memset(buf, 0, sizeof buf);
	return (int)n;
}

int agent_secret_read(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
	return key_read("agent_secret_file", 0, path, out, cap, err, errlen);
}

int agent_countersign_key_read(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
	return key_read("countersign_key_file", 1, path, out, cap, err, errlen);
}

int agent_secret_get(const struct shunt_config *c, char *out, size_t cap, char *err,
		     size_t errlen)
{
	if (c->agent_secret[0]) {
		size_t n = strlen(c->agent_secret);
		if (n >= cap)
			return -1;
		memcpy(out, c->agent_secret, n + 1);
		return (int)n;
	}
	if (c->agent_secret_file[0])
		return agent_secret_read(c->agent_secret_file, out, cap, err, errlen);
	return 0;
}

/* ---- names ----------------------------------------------------------------- */

const char *agent_type_name(int type)
{
	static const char *const names[AGENT_TYPE_END] = {
		[AGENT_HELLO] = "hello",	     [AGENT_CHALLENGE] = "challenge",
		[AGENT_AUTH] = "auth",		     [AGENT_AUTH_OK] = "auth_ok",
		[AGENT_QUERY] = "query",	     [AGENT_QUERY_ANSWER] = "query_answer",
		[AGENT_OFFER] = "offer",	     [AGENT_OFFER_ANSWER] = "offer_answer",
		[AGENT_ERROR] = "error",	     [AGENT_RELAY] = "relay",
		[AGENT_RELAY_ANSWER] = "relay_answer", [AGENT_TAKE] = "take",
		[AGENT_TAKE_ANSWER] = "take_answer", [AGENT_SIGN] = "sign",
		[AGENT_SIGN_ANSWER] = "sign_answer",
	};
	return type > 0 && type < AGENT_TYPE_END ? names[type] : "unknown";
}

const char *agent_error_name(int code)
{
	static const char *const names[AGENT_E_END] = {
		[AGENT_E_VERSION] = "version",	       [AGENT_E_MALFORMED] = "malformed",
		[AGENT_E_OVERSIZED] = "oversized",     [AGENT_E_AUTH] = "auth",
		[AGENT_E_UNEXPECTED] = "unexpected",   [AGENT_E_BUSY] = "busy",
	};
	return code > 0 && code < AGENT_E_END ? names[code] : "unknown";
}
