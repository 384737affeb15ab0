/* The attributes of a provider the fabric transport goes by, and what it
 * needs of them.  Pure: no provider is called. */
#ifndef FAB_ATTR_H
#define FAB_ATTR_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>

struct fab_attrs {
	uint64_t mode;           /* FI_RX_CQ_DATA, FI_CONTEXT */
	uint64_t mr_mode;        /* FI_MR_LOCAL, _VIRT_ADDR, _ALLOCATED, _PROV_KEY */
	size_t cq_data_size;     /* bytes of remote CQ data a write carries */
	size_t mr_key_size;
	uint64_t msg_order;      /* of the transmit side */
	uint64_t rx_comp_order;
	size_t tx_size, rx_size; /* operations a queue holds */
	size_t inject_size, iov_limit, rma_iov_limit;
	size_t max_msg_size, max_order_waw_size;
};

/* The attributes info (an endpoint's description from fi_getinfo, or a
 * connection request's) gives; fab_attrs_for (fab_verbs.h) is what the
 * transport goes by. */
void fab_attrs_of(const struct fi_info *info, struct fab_attrs *a);
/* Why the transport cannot run on provider prov with attributes a, or
 * NULL when it can. */
const char *fab_attrs_unfit(const char *prov, const struct fab_attrs *a);
/* The largest RMA write to post: want, or less where the provider orders
 * or carries less in one write. */
uint64_t fab_attrs_chunk(const struct fab_attrs *a, uint64_t want);

#endif
