/* The verbs provider's rules, enforced on another provider (fab_verbs.h).
 *
 * The values are those libfabric 1.17's verbs provider reports for an
 * FI_EP_MSG endpoint (prov/verbs/src/verbs_info.c and fi_verbs.c):
 *   mode          FI_RX_CQ_DATA (rx_attr.mode; each write's remote CQ data
 *                 consumes a posted receive)
 *   mr_mode       FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
 *                 FI_MR_PROV_KEY (FI_MR_LOCAL | OFI_MR_BASIC_MAP)
 *   mr_key_size   4 (ibv_sge.lkey), cq_data_size 4 (ibv_send_wr.imm_data)
 *   msg_order     RAR RAW RAS WAW WAS SAW SAS (no WAR): tx comp_order
 *                 STRICT, rx comp_order STRICT | DATA
 *   tx/rx size    384 (its defaults, under the device's max_qp_wr)
 *   iov_limit 4, rma_iov_limit 1
 *   inject_size   the device's max_inline_data, at most 256: 64 here, a
 *                 small device's
 *   max_msg_size = max_order_raw_size = max_order_waw_size: the port's
 *                 max_msg_sz, 1 GiB (mlx5); max_order_war_size 0
 * and, stricter than verbs' FI_EP_MSG (its FI_EP_RDM and other providers
 * ask it), FI_CONTEXT: a context of its own for every operation.
 *
 * At the peer's CLOSE (its endpoint going away) every receive still posted
 * completes as verbs flushes it: an error, FI_ECANCELED, reported ahead of
 * the entries before it.
 *
 * What it cannot show: verbs' completions of errors carry no opcode; a
 * receive that finds nothing posted stalls the writer's queue pair (its
 * rnr_retry is 7: retried for ever) where here it is only counted; the
 * peer's memory protection (a remote key or address out of its region
 * fails the tcp provider's check too, as verbs' would). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fab_internal.h"
#include "fab_verbs.h"
#include "core/shunt_log.h"

static int on = -1;
static uint64_t counts[FAB_VRB_NCOUNT];

#define VRB_SIZE 384
#define VRB_INJECT 64
#define VRB_MAX_MSG ((size_t)1 << 30)

int fab_vrb_on(void)
{
	int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
	if (v < 0) {
		const char *e = getenv("SHUNT_FABRIC_EMULATE");
		v = e && !strcmp(e, "verbs");
		__atomic_store_n(&on, v, __ATOMIC_RELAXED);
	}
	return v;
}

void fab_vrb_count(enum fab_vrb_count what, uint64_t n)
{
	__atomic_add_fetch(&counts[what], n, __ATOMIC_RELAXED);
}

void fab_attrs_for(const struct fi_info *info, struct fab_attrs *a)
{
	fab_attrs_of(info, a);
	if (fab_vrb_on())
		fab_verbs_attrs(a);
}

void fab_verbs_attrs(struct fab_attrs *a)
{
	a->mode = FI_RX_CQ_DATA | FI_CONTEXT;
	a->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	a->cq_data_size = 4;
	a->mr_key_size = 4;
	a->msg_order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAW | FI_ORDER_WAS |
		       FI_ORDER_SAW | FI_ORDER_SAS;
	a->rx_comp_order = FI_ORDER_STRICT | FI_ORDER_DATA;
	a->tx_size = a->rx_size = VRB_SIZE;
	a->inject_size = VRB_INJECT;
	a->iov_limit = 4;
	a->rma_iov_limit = 1;
	a->max_msg_size = a->max_order_waw_size = VRB_MAX_MSG;
}

/* A rule broken: the connection takes the provider-error path. */
static ssize_t broken(struct fab_conn *c, const char *rule)
{
	fab_vrb_count(FAB_VRB_BROKEN, 1);
	SHUNT_WARN("fabric: fd=%d breaks a verbs rule: %s", c->base.fd, rule);
	return -FI_EINVAL;
}

/* FI_CONTEXT: a context of the connection's own, in flight (taken for this
 * operation and not given back). */
static int ctx_ok(struct fab_conn *c, void *ctx, enum fab_ctx_kind kind)
{
	uintptr_t a = (uintptr_t)ctx, b = (uintptr_t)c->ctxs.ctx;
	if (a < b || a >= b + sizeof c->ctxs.ctx || (a - b) % sizeof c->ctxs.ctx[0])
		return 0;
	return c->ctxs.kind[(a - b) / sizeof c->ctxs.ctx[0]] == kind;
}

/* FI_MR_LOCAL: the bytes lie in the connection's registered buffer and
 * the descriptor is its registration's. */
static int local_ok(struct fab_conn *c, const void *buf, size_t len, void *desc)
{
	const uint8_t *p = buf;
	return c->mr && desc == fi_mr_desc(c->mr) && p >= c->buf && p <= c->buf + c->buf_len &&
	       len <= (size_t)(c->buf + c->buf_len - p);
}

ssize_t fab_vrb_writemsg(struct fab_conn *c, const struct fi_msg_rma *m, uint64_t flags)
{
	if (!ctx_ok(c, m->context, FAB_CTX_TX))
		return broken(c, "a write without a context of its own (FI_CONTEXT)");
	fab_vrb_count(FAB_VRB_CONTEXTS, 1);
	if (m->iov_count > 4 || m->rma_iov_count != 1)
		return broken(c, "more buffers than iov_limit 4 / rma_iov_limit 1");
	size_t len = m->msg_iov[0].iov_len;
	if (!m->desc || !local_ok(c, m->msg_iov[0].iov_base, len, m->desc[0]))
		return broken(c, "a local buffer outside the registered one (FI_MR_LOCAL)");
	fab_vrb_count(FAB_VRB_LOCAL, 1);
	if ((flags & FI_REMOTE_CQ_DATA) && (m->data >> 32))
		return broken(c, "remote CQ data wider than 4 bytes");
	if (flags & FI_REMOTE_CQ_DATA)
		fab_vrb_count(FAB_VRB_CQ_DATA, 1);
	if ((flags & FI_INJECT) && len > VRB_INJECT)
		return broken(c, "an inject longer than inject_size");
	if (len > VRB_MAX_MSG || len != m->rma_iov[0].len)
		return broken(c, "a write longer than max_msg_size / max_order_waw_size");
	if (m->rma_iov[0].key >> 32)
		return broken(c, "a remote key wider than mr_key_size 4");
	/* FI_MR_VIRT_ADDR: the peer named its rx ring by its virtual address
	 * (peer_addr); every write lands inside that ring.  The real provider
	 * names bytes by their offset in the registration, where the rx ring
	 * starts one ring in. */
	uint64_t addr = m->rma_iov[0].addr;
	if (addr < c->peer_addr || addr - c->peer_addr > c->ring ||
	    len > c->ring - (addr - c->peer_addr) || c->peer_addr < c->ring)
		return broken(c, "a remote address outside the peer's ring (FI_MR_VIRT_ADDR)");
	fab_vrb_count(FAB_VRB_VIRT, 1);
	struct fi_rma_iov rma = m->rma_iov[0];
	rma.addr = addr - c->peer_addr + c->ring;
	struct fi_msg_rma msg = *m;
	msg.rma_iov = &rma;
	return fi_writemsg(c->ep, &msg, flags);
}

ssize_t fab_vrb_recv(struct fab_conn *c, void *buf, size_t len, void *desc, void *ctx)
{
	if (!ctx_ok(c, ctx, FAB_CTX_RX))
		return broken(c, "a receive without a context of its own (FI_CONTEXT)");
	if (!local_ok(c, buf, len, desc))
		return broken(c, "a receive buffer outside the registered one (FI_MR_LOCAL)");
	if (c->vrb.n >= VRB_SIZE || c->vrb.n >= FAB_CTX_MAX)
		return -FI_EAGAIN;
	/* Kept here: the real provider consumes no receive for CQ data. */
	c->vrb.q[(c->vrb.head + c->vrb.n++) % FAB_CTX_MAX] = ctx;
	fab_vrb_count(FAB_VRB_RECV_POSTED, 1);
	fab_vrb_count(FAB_VRB_CONTEXTS, 1);
	return 0;
}

void fab_vrb_completion(struct fab_conn *c, struct fi_cq_data_entry *e)
{
	if (!(e->flags & FI_REMOTE_CQ_DATA) || ctx_ok(c, e->op_context, FAB_CTX_TX))
		return; /* (a write of ours: sockets flags its CQ data too) */
	if (e->data >> 32)
		broken(c, "remote CQ data wider than 4 bytes arrived");
	if (!c->rx_cq_data)
		return;
	if (!c->vrb.n) {
		/* verbs: the writer's queue pair retries until a receive is
		 * posted (a stall, not an error); counted. */
		fab_vrb_count(FAB_VRB_RNR, 1);
		e->op_context = NULL;
		return;
	}
	e->op_context = c->vrb.q[c->vrb.head];
	c->vrb.head = (c->vrb.head + 1) % FAB_CTX_MAX;
	c->vrb.n--;
	fab_vrb_count(FAB_VRB_RECV_TAKEN, 1);
}

int fab_vrb_flush(struct fab_conn *c, const struct fi_cq_data_entry *e,
		  struct fi_cq_err_entry *err)
{
	if (!(e->flags & FI_REMOTE_CQ_DATA) || fab_imm_type(e->data) != FAB_IMM_CLOSE ||
	    ctx_ok(c, e->op_context, FAB_CTX_TX) || !c->vrb.n)
		return 0;
	*err = (struct fi_cq_err_entry){.op_context = c->vrb.q[c->vrb.head],
					.flags = FI_RECV,
					.err = FI_ECANCELED,
					.prov_errno = 5 /* IBV_WC_WR_FLUSH_ERR */};
	c->vrb.head = (c->vrb.head + 1) % FAB_CTX_MAX;
	c->vrb.n--;
	fab_vrb_count(FAB_VRB_FLUSHED, 1);
	return 1;
}

uint64_t fab_vrb_key(void)
{
	uint32_t k = 0;
	while (!k && getrandom(&k, sizeof k, 0) == sizeof k)
		;
	fab_vrb_count(FAB_VRB_KEYS, 1);
	return k;
}

void fab_vrb_report(char *out, size_t len)
{
	uint64_t v[FAB_VRB_NCOUNT];
	for (int i = 0; i < FAB_VRB_NCOUNT; i++)
		v[i] = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
	snprintf(out, len,
		 "recv_posted=%llu recv_taken=%llu rnr=%llu contexts=%llu local=%llu virt=%llu "
		 "keys=%llu cq_data=%llu flushed=%llu broken=%llu",
		 (unsigned long long)v[FAB_VRB_RECV_POSTED], (unsigned long long)v[FAB_VRB_RECV_TAKEN],
		 (unsigned long long)v[FAB_VRB_RNR], (unsigned long long)v[FAB_VRB_CONTEXTS],
		 (unsigned long long)v[FAB_VRB_LOCAL], (unsigned long long)v[FAB_VRB_VIRT],
		 (unsigned long long)v[FAB_VRB_KEYS], (unsigned long long)v[FAB_VRB_CQ_DATA],
		 (unsigned long long)v[FAB_VRB_FLUSHED], (unsigned long long)v[FAB_VRB_BROKEN]);
}
