/* What the fabric transport needs of a provider, without one: the
 * attributes it refuses and why, the write size it cuts to, the verbs
 * provider's attributes (as libfabric 1.17 reports them) passing, and the
 * per-operation contexts a completion is told apart by. */
#include <criterion/criterion.h>
#include <string.h>

#include "fabric/fab_attr.h"
#include "fabric/fab_ctx.h"
#include "fabric/fab_verbs.h"
#include "core/shunt_transport.h"

/* Linked with the fabric code, which the core's table names: no transport
 * takes connections here. */
const struct shunt_transport_ops *const shunt_transports[] = {NULL};

/* A provider like libfabric 1.17's tcp: 8-byte CQ data, ordered writes. */
static struct fab_attrs tcp_like(void)
{
	struct fab_attrs a;
	memset(&a, 0, sizeof a);
	a.cq_data_size = 8;
	a.mr_key_size = 8;
	a.msg_order = FI_ORDER_WAW | FI_ORDER_RAW;
	a.rx_comp_order = FI_ORDER_STRICT;
	a.tx_size = a.rx_size = 256;
	a.iov_limit = a.rma_iov_limit = 4;
	a.max_msg_size = a.max_order_waw_size = SIZE_MAX;
	return a;
}

Test(fab_attr, a_tcp_like_provider_serves)
{
	struct fab_attrs a = tcp_like();
	cr_assert_null(fab_attrs_unfit("tcp", &a));
	cr_assert_eq(fab_attrs_chunk(&a, 256 << 10), 256 << 10);
}

Test(fab_attr, verbs_attributes_serve)
{
	struct fab_attrs a;
	memset(&a, 0, sizeof a);
	fab_verbs_attrs(&a);
	cr_assert_null(fab_attrs_unfit("verbs", &a), "%s", fab_attrs_unfit("verbs", &a));
	cr_assert_eq(a.cq_data_size, 4);
	cr_assert_eq(a.mr_key_size, 4);
	cr_assert(a.mode & FI_RX_CQ_DATA);
	cr_assert_eq(a.mr_mode, FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
	cr_assert_eq(a.rma_iov_limit, 1);
	cr_assert(!(a.msg_order & FI_ORDER_WAR), "verbs does not order a write after a read");
	cr_assert_eq(fab_attrs_chunk(&a, 256 << 10), 256 << 10);
}

Test(fab_attr, what_the_protocol_cannot_run_on)
{
	struct fab_attrs a = tcp_like();
	a.cq_data_size = 0; /* verbs over iWARP */
	cr_assert_not_null(fab_attrs_unfit("verbs", &a));
	a = tcp_like();
	a.cq_data_size = 2;
	cr_assert_not_null(fab_attrs_unfit("x", &a));
	a = tcp_like();
	a.msg_order = FI_ORDER_RAW;
	a.rx_comp_order = FI_ORDER_NONE; /* a position could come before its bytes */
	cr_assert_not_null(fab_attrs_unfit("x", &a));
	a.rx_comp_order = FI_ORDER_STRICT; /* completions in order are enough */
	cr_assert_null(fab_attrs_unfit("x", &a));
	a = tcp_like();
	a.mode = FI_RX_CQ_DATA;
	a.rx_size = 16; /* fewer receives than remote CQ data keeps posted */
	cr_assert_not_null(fab_attrs_unfit("x", &a));
	a = tcp_like();
	a.max_msg_size = 1024;
	cr_assert_not_null(fab_attrs_unfit("x", &a));
	a = tcp_like();
	cr_assert_not_null(fab_attrs_unfit("sockets", &a), "known to stall a sleeping writer");
}

Test(fab_attr, writes_are_cut_to_the_provider)
{
	struct fab_attrs a = tcp_like();
	a.max_msg_size = 100000;
	cr_assert_eq(fab_attrs_chunk(&a, 256 << 10), 98304, "a whole number of pages below it");
	a = tcp_like();
	a.rx_comp_order = FI_ORDER_NONE;
	a.max_order_waw_size = 65536; /* only the order makes a position true */
	cr_assert_eq(fab_attrs_chunk(&a, 256 << 10), 65536);
	a.rx_comp_order = FI_ORDER_STRICT;
	cr_assert_eq(fab_attrs_chunk(&a, 256 << 10), 256 << 10);
}

Test(fab_attr, contexts_are_given_out_once_and_told_apart)
{
	static struct fab_ctxs x;
	fab_ctx_init(&x);
	void *tx = fab_ctx_get(&x, FAB_CTX_TX), *rx = fab_ctx_get(&x, FAB_CTX_RX);
	cr_assert(tx && rx && tx != rx);
	cr_assert_eq(fab_ctx_put(&x, rx), FAB_CTX_RX);
	cr_assert_eq(fab_ctx_put(&x, rx), -1, "given back twice");
	cr_assert_eq(fab_ctx_put(&x, NULL), -1);
	int stranger;
	cr_assert_eq(fab_ctx_put(&x, &stranger), -1, "not one of ours");
	cr_assert_eq(fab_ctx_put(&x, (char *)tx + 1), -1, "not a context's start");
	cr_assert_eq(fab_ctx_put(&x, tx), FAB_CTX_TX);
	/* All of them, then none, then one back. */
	void *all[FAB_CTX_MAX];
	for (int i = 0; i < FAB_CTX_MAX; i++) {
		all[i] = fab_ctx_get(&x, FAB_CTX_TX);
		cr_assert_not_null(all[i]);
		for (int j = 0; j < i; j++)
			cr_assert_neq(all[i], all[j]);
	}
	cr_assert_null(fab_ctx_get(&x, FAB_CTX_TX), "more in flight than there are");
	cr_assert_eq(fab_ctx_put(&x, all[7]), FAB_CTX_TX);
	cr_assert_eq(fab_ctx_get(&x, FAB_CTX_RX), all[7]);
}
