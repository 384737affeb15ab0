/* What the fabric transport needs of a provider (fab_attr.h).
 *
 * Its protocol (fab_wire.h) puts a type and a stream position in the
 * remote CQ data of each RMA write, 4 bytes: a provider carrying less
 * (verbs over iWARP reports none) cannot serve.  A reader takes a write's
 * position as the end of the bytes that have landed: the writes must land
 * in order (FI_ORDER_WAW), or their completions come in order
 * (FI_ORDER_STRICT) — each write's own bytes are in place before its
 * completion in any provider. */
#include "fab_attr.h"

#include <stdlib.h>
#include <string.h>

#include "fab_ctx.h"

void fab_attrs_of(const struct fi_info *info, struct fab_attrs *a)
{
	memset(a, 0, sizeof *a);
	a->mode = info->mode | (info->rx_attr ? info->rx_attr->mode : 0);
	if (info->domain_attr) {
		a->mr_mode = (uint64_t)info->domain_attr->mr_mode;
		a->cq_data_size = info->domain_attr->cq_data_size;
		a->mr_key_size = info->domain_attr->mr_key_size;
	}
	if (info->tx_attr) {
		a->msg_order = info->tx_attr->msg_order;
		a->tx_size = info->tx_attr->size;
		a->inject_size = info->tx_attr->inject_size;
		a->iov_limit = info->tx_attr->iov_limit;
		a->rma_iov_limit = info->tx_attr->rma_iov_limit;
	}
	if (info->rx_attr) {
		a->rx_comp_order = info->rx_attr->comp_order;
		a->rx_size = info->rx_attr->size;
	}
	if (info->ep_attr) {
		a->max_msg_size = info->ep_attr->max_msg_size;
		a->max_order_waw_size = info->ep_attr->max_order_waw_size;
	}
}

/* Providers whose attributes say yes but whose behaviour says no, found
 * by the self-test (fab_selftest.c) and the tests on every provider. */
static const struct {
	const char *prov, *why;
} known_unfit[] = {
	/* Its writes wait in the provider until the writer's next call into
	 * it, and its completion fd does not wake a writer with writes
	 * queued: a writer that then sleeps (in epoll, on its peer's answer)
	 * stalls the stream.  (libfabric deprecates it.) */
	{"sockets", "its writes move only while the writer calls it (a writer that then "
		    "sleeps stalls the stream: its completion fd does not wake it)"},
};

const char *fab_attrs_unfit(const char *prov, const struct fab_attrs *a)
{
	for (size_t i = 0; i < sizeof known_unfit / sizeof known_unfit[0]; i++)
		if (prov && !strcmp(prov, known_unfit[i].prov))
			return known_unfit[i].why;
	if (a->cq_data_size < 4)
		return "its writes carry less than 4 bytes of remote CQ data (type and "
		       "position)";
	if (!(a->msg_order & FI_ORDER_WAW) && !(a->rx_comp_order & FI_ORDER_STRICT))
		return "its writes neither land nor complete in order (no FI_ORDER_WAW, "
		       "no FI_ORDER_STRICT)";
	if (a->rma_iov_limit < 1 || a->iov_limit < 1 || (a->max_msg_size && a->max_msg_size < 4096))
		return "its writes carry less than a page";
	if ((a->mode & FI_RX_CQ_DATA) && a->rx_size && a->rx_size < FAB_RX_POSTS)
		return "its receive queue holds fewer receives than remote CQ data needs posted";
	return NULL;
}

uint64_t fab_attrs_chunk(const struct fab_attrs *a, uint64_t want)
{
	if (a->max_msg_size && a->max_msg_size < want)
		want = a->max_msg_size;
	/* Ordered only up to this many bytes: where the order is what makes a
	 * position true, no write is longer. */
	if (!(a->rx_comp_order & FI_ORDER_STRICT) && a->max_order_waw_size &&
	    a->max_order_waw_size < want)
		want = a->max_order_waw_size;
	return want < 4096 ? 4096 : want & ~(uint64_t)4095;
}
