/* Whether a libfabric provider can carry the fabric transport, and if not
 * why, in words a user (or a test that must skip) can act on.  The
 * transport connects endpoints with fi_connect/fi_accept and the
 * connection data they carry (fab_offer.c): it needs FI_EP_MSG.  The
 * providers that offer only reliable datagrams (FI_EP_RDM: ofi_rxm over
 * tcp, ofi_rxd over udp, shm) or plain datagrams cannot serve it. */
#include <stdio.h>
#include <string.h>

#include "fab_internal.h"
#include "fab_verbs.h"

/* The endpoint types prov offers at all, as words into out. */
static void types_of(const char *prov, char *out, size_t len)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	out[0] = '\0';
	if (!h)
		return;
	h->fabric_attr->prov_name = strdup(prov);
	int got[3] = {0, 0, 0};
	if (fi_getinfo(FAB_API, NULL, NULL, 0, h, &info) == 0)
		for (struct fi_info *i = info; i; i = i->next) {
			int t = i->ep_attr->type;
			got[0] |= t == FI_EP_MSG;
			got[1] |= t == FI_EP_RDM;
			got[2] |= t == FI_EP_DGRAM;
		}
	fi_freeinfo(info);
	fi_freeinfo(h);
	snprintf(out, len, "%s%s%s", got[0] ? " FI_EP_MSG" : "", got[1] ? " FI_EP_RDM" : "",
		 got[2] ? " FI_EP_DGRAM" : "");
}

int fab_provider_fit(const char *prov, char *why, size_t len)
{
	struct fi_info *h = fab_hints_for(prov), *info = NULL;
	if (!h) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	int rc = fi_getinfo(FAB_API, NULL, NULL, 0, h, &info);
	fi_freeinfo(h);
	if (rc == 0) {
		struct fab_attrs a;
		fab_attrs_for(info, &a);
		const char *unfit = fab_attrs_unfit(prov, &a);
		fi_freeinfo(info);
		if (!unfit)
			return 0;
		snprintf(why, len, "provider %s: %s", prov, unfit);
		return -1;
	}
	char types[64];
	types_of(prov, types, sizeof types);
	if (!types[0])
		snprintf(why, len, "provider %s: not in this libfabric, or no device for it (%s)",
			 prov, fi_strerror(-rc));
	else if (!strstr(types, "FI_EP_MSG"))
		snprintf(why, len,
			 "provider %s offers only%s endpoints: the fabric transport connects "
			 "FI_EP_MSG endpoints (fi_connect/fi_accept with connection data)",
			 prov, types);
	else
		snprintf(why, len,
			 "provider %s has FI_EP_MSG endpoints, but none with RMA writes, remote CQ "
			 "data and the modes the transport serves (%s)",
			 prov, fi_strerror(-rc));
	return -1;
}
