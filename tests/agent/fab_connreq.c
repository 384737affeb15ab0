/* fab_connreq: a third party's connection request to a client's passive
 * endpoint, made with what it saw of an offer on the wire (its token), for
 * the hijack tests (tests/e2e/fab_hijack.sh).
 *
 *   fab_connreq PEP_IP PEP_PORT TOKEN_HEX RING SRC_IP
 *
 * Connects a libfabric tcp endpoint, bound to SRC_IP, to the passive
 * endpoint at PEP_IP:PEP_PORT twice: with the connection data of the first
 * protocol (the token itself) and with the current one made with the token
 * as the key (what the connection's key is when no agent secret is set).
 * One line each, "accepted vN" or "refused vN"; exit 3 when either was
 * accepted (the client would have taken a stranger for its server), 0 when
 * both were refused, 2 on a usage or setup error. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/shunt_transport.h"
#include "fabric/fab_internal.h"

/* The program drives libfabric only: no transport takes connections here. */
const struct shunt_transport_ops *const shunt_transports[] = {NULL};

/* The first protocol's request, as the code before the key sent it. */
struct req_v1 {
	uint32_t magic;
	uint8_t version, decline, ring_log2, reserved;
	uint8_t token[AGENT_TOKEN_LEN];
	uint64_t rx_addr, rx_key;
};

static int hex(const char *s, uint8_t *out, size_t n)
{
	if (strlen(s) != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return 0;
}

/* One request with data; 1 accepted, 0 refused or no answer, -1 error. */
static int try_once(struct fid_fabric *fab, struct fid_domain *d, struct fi_info *info,
		    const void *addr, const void *data, size_t len)
{
	struct fid_eq *eq = NULL;
	struct fid_cq *cq = NULL;
	struct fid_ep *ep = NULL;
	struct fi_eq_attr ea = {.size = 4, .wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr ca = {.size = 4, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	int rc = -1;
	if (fi_eq_open(fab, &ea, &eq, NULL) == 0 && fi_cq_open(d, &ca, &cq, NULL) == 0 &&
	    fi_endpoint(d, info, &ep, NULL) == 0 && fi_ep_bind(ep, &eq->fid, 0) == 0 &&
	    fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0 && fi_enable(ep) == 0 &&
	    fi_connect(ep, addr, data, len) == 0) {
		union {
			struct fi_eq_cm_entry cm;
			uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
		} ev;
		uint32_t event = 0;
		ssize_t n;
		do
			n = fi_eq_sread(eq, &event, &ev, sizeof ev, 3000, 0);
		while (n == -FI_EAGAIN || n == -FI_EINTR);
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {0};
			fi_eq_readerr(eq, &err, 0);
		}
		rc = n >= 0 && event == FI_CONNECTED;
	}
	if (ep)
		fi_close(&ep->fid);
	if (cq)
		fi_close(&cq->fid);
	if (eq)
		fi_close(&eq->fid);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: fab_connreq PEP_IP PEP_PORT TOKEN_HEX RING SRC_IP\n");
		return 2;
	}
	struct agent_offer o = {0};
	struct sockaddr_in pep = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
	struct sockaddr_in src = {.sin_family = AF_INET};
	uint8_t token[AGENT_TOKEN_LEN];
	uint64_t ring = strtoull(argv[4], NULL, 10);
	if (inet_pton(AF_INET, argv[1], &pep.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[5], &src.sin_addr) != 1 || hex(argv[3], token, sizeof token)) {
		fprintf(stderr, "fab_connreq: bad argument\n");
		return 2;
	}
	snprintf(o.provider, sizeof o.provider, "tcp");
	o.addr_format = FI_SOCKADDR_IN;
	o.addrlen = sizeof pep;
	memcpy(o.addr, &pep, sizeof pep);
	struct fid_fabric *fab;
	struct fid_domain *d = fab_domain("tcp", &fab);
	struct fi_info *info = d ? fab_info_for_peer(&o) : NULL;
	if (!info) {
		fprintf(stderr, "fab_connreq: no tcp provider\n");
		return 2;
	}
	free(info->src_addr);
	info->src_addr = malloc(sizeof src);
	memcpy(info->src_addr, &src, sizeof src);
	info->src_addrlen = sizeof src;

	struct req_v1 v1 = {.magic = FAB_MAGIC, .version = 1};
	while (ring > ((uint64_t)1 << v1.ring_log2) && v1.ring_log2 < 63)
		v1.ring_log2++;
	memcpy(v1.token, token, sizeof token);
	struct fab_cm_req v2;
	uint8_t raw[FAB_CM_REQ_LEN];
	fab_cm_req_make(&v2, raw, token, ring, 0, 0, 0);

	int any = 0;
	int a = try_once(fab, d, info, o.addr, &v1, sizeof v1);
	printf("%s v1\n", a > 0 ? "accepted" : "refused");
	any |= a > 0;
	a = try_once(fab, d, info, o.addr, raw, sizeof raw);
	printf("%s v2\n", a > 0 ? "accepted" : "refused");
	any |= a > 0;
	fi_freeinfo(info);
	return any ? 3 : 0;
}
