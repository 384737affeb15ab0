/* The operations the fabric transport hands to its provider, one call
 * each: an RMA write with remote CQ data, a zero-byte receive for CQ data
 * where the provider says writes consume one (FI_RX_CQ_DATA), and a
 * completion's context given back.  Each carries a context of its own
 * (fab_ctx.h); with SHUNT_FABRIC_EMULATE=verbs each goes through verbs'
 * rules first (fab_verbs.c).  What to post and when is fab_post.c's. */
#include "fab_internal.h"
#include "fab_verbs.h"
#include "core/shunt_log.h"

ssize_t fab_op_write(struct fab_conn *c, uint64_t off, size_t len, uint64_t roff,
		       enum fab_imm t, uint64_t pos, uint64_t flags)
{
	void *ctx = fab_ctx_get(&c->ctxs, FAB_CTX_TX);
	if (!ctx)
		return -FI_EAGAIN;
	struct iovec iov = {c->buf + off, len};
	struct fi_rma_iov rma = {c->peer_addr + roff, len, c->peer_key};
	struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &c->desc, .iov_count = 1,
				 .addr = FI_ADDR_UNSPEC, .rma_iov = &rma, .rma_iov_count = 1,
				 .context = ctx, .data = fab_imm_make(t, pos)};
	flags |= FI_REMOTE_CQ_DATA | FI_COMPLETION;
	ssize_t r = fab_vrb_on() ? fab_vrb_writemsg(c, &msg, flags) : fi_writemsg(c->ep, &msg, flags);
	if (r != 0)
		fab_ctx_put(&c->ctxs, ctx);
	return r;
}

ssize_t fab_op_recv(struct fab_conn *c)
{
	void *ctx = fab_ctx_get(&c->ctxs, FAB_CTX_RX);
	if (!ctx)
		return -FI_EAGAIN;
	void *buf = c->buf + 2 * c->ring;
	ssize_t r = fab_vrb_on() ? fab_vrb_recv(c, buf, 0, c->desc, ctx)
				 : fi_recv(c->ep, buf, 0, c->desc, 0, ctx);
	if (r != 0)
		fab_ctx_put(&c->ctxs, ctx);
	return r;
}

int fab_op_done(struct fab_conn *c, void *ctx)
{
	int k = ctx ? fab_ctx_put(&c->ctxs, ctx) : -1;
	if (k < 0 && ctx && fab_vrb_on()) {
		fab_vrb_count(FAB_VRB_BROKEN, 1);
		SHUNT_WARN("fabric: fd=%d a completion carries a context not in flight",
			   c->base.fd);
	}
	return k;
}

uint64_t fab_mr_key(struct fab_conn *c)
{
	uint64_t k = fi_mr_key(c->mr);
	if (fab_vrb_on())
		fab_vrb_count(FAB_VRB_KEYS, 1);
	return k;
}
