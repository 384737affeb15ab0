/* Operation contexts of a fabric connection: every operation it posts
 * carries a struct fi_context of its own, the provider's until the
 * operation's completion (FI_CONTEXT: a provider may keep its state of the
 * operation there).  A fixed set per connection, enough for everything it
 * can have in flight: at most 64 + 8 writes (tx_depth and the control
 * writes past it, fab_data.c) and FAB_RX_POSTS receives.  A completion
 * gives its context back, and says by it whether it was a write or a
 * receive: an error completion's flags may not (verbs fills them only for
 * successful work requests), and a flushed receive must not be counted as
 * a write that left. */
#ifndef FAB_CTX_H
#define FAB_CTX_H

#include <stdint.h>
#include <rdma/fabric.h>

#define FAB_RX_POSTS 64 /* zero-byte receives kept posted for remote CQ data */
#define FAB_CTX_MAX 160

enum fab_ctx_kind { FAB_CTX_FREE = 0, FAB_CTX_TX, FAB_CTX_RX };

struct fab_ctxs {
	struct fi_context ctx[FAB_CTX_MAX];
	uint8_t kind[FAB_CTX_MAX];
	uint16_t free[FAB_CTX_MAX];
	unsigned nfree;
};

static inline void fab_ctx_init(struct fab_ctxs *x)
{
	for (unsigned i = 0; i < FAB_CTX_MAX; i++) {
		x->kind[i] = FAB_CTX_FREE;
		x->free[i] = (uint16_t)(FAB_CTX_MAX - 1 - i);
	}
	x->nfree = FAB_CTX_MAX;
}

/* A free context for an operation of kind k, or NULL when all are in
 * flight (the caller reads the CQ and tries again). */
static inline void *fab_ctx_get(struct fab_ctxs *x, enum fab_ctx_kind k)
{
	if (!x->nfree)
		return NULL;
	unsigned i = x->free[--x->nfree];
	x->kind[i] = (uint8_t)k;
	return &x->ctx[i];
}

/* Give back the context p of a completed (or never posted) operation: its
 * kind, or -1 when p is not one of ours in flight (NULL included). */
static inline int fab_ctx_put(struct fab_ctxs *x, void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)x->ctx;
	if (a < b || a >= b + sizeof x->ctx || (a - b) % sizeof x->ctx[0])
		return -1;
	unsigned i = (unsigned)((a - b) / sizeof x->ctx[0]);
	int k = x->kind[i];
	if (k == FAB_CTX_FREE)
		return -1;
	x->kind[i] = FAB_CTX_FREE;
	x->free[x->nfree++] = (uint16_t)i;
	return k;
}

#endif
