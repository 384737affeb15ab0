/* Connection data (fab_wire.h). */
#include "fab_wire.h"

#include <string.h>

void fab_cm_req_make(struct fab_cm_req *r, const uint8_t token[AGENT_TOKEN_LEN],
		     uint64_t ring, uint64_t rx_addr, uint64_t rx_key, int decline)
{
	memset(r, 0, sizeof *r);
	r->magic = FAB_MAGIC;
	r->version = FAB_VERSION;
	r->decline = (uint8_t)!!decline;
	memcpy(r->token, token, AGENT_TOKEN_LEN);
	while (ring > ((uint64_t)1 << r->ring_log2) && r->ring_log2 < 63)
		r->ring_log2++;
	r->rx_addr = rx_addr;
	r->rx_key = rx_key;
}

int fab_cm_req_parse(struct fab_cm_req *r, const void *data, size_t len)
{
	if (len < sizeof *r)
		return -1;
	memcpy(r, data, sizeof *r);
	return r->magic == FAB_MAGIC && r->version == FAB_VERSION && r->ring_log2 < 64 ? 0 : -1;
}

void fab_cm_rep_make(struct fab_cm_rep *r, uint64_t rx_addr, uint64_t rx_key)
{
	memset(r, 0, sizeof *r);
	r->magic = FAB_MAGIC;
	r->rx_addr = rx_addr;
	r->rx_key = rx_key;
}

int fab_cm_rep_check(const struct fab_cm_rep *r)
{
	return r->magic == FAB_MAGIC ? 0 : -1;
}
