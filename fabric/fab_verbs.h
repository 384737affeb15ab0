/* The verbs provider's rules, enforced on a provider that does not need
 * them (test only: SHUNT_FABRIC_EMULATE=verbs, docs/CONFIG.md).  The
 * transport then goes by verbs' attributes (fab_verbs_attrs) — receives
 * posted for remote CQ data, virtual remote addresses, provider keys, a
 * context per operation, 4-byte CQ data — and every operation it posts is
 * checked against verbs' rules before it reaches the real provider,
 * translated where the real one differs (virtual addresses to its offsets;
 * receives kept here, since it consumes none for CQ data, and each remote
 * CQ data completion consuming one, as verbs' would).  A broken rule is a
 * provider error on that connection (it moves to TCP, and the tests see
 * it), and each rule counts how often it was checked, so a test can tell
 * that the code meant for verbs ran at all. */
#ifndef FAB_VERBS_H
#define FAB_VERBS_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>

#include "fab_attr.h"

struct fab_conn;

/* The verbs provider's attributes for an FI_EP_MSG endpoint (libfabric
 * 1.17, prov/verbs), for a device of the usual limits. */
void fab_verbs_attrs(struct fab_attrs *a);
/* The attributes the transport goes by for info: the provider's
 * (fab_attrs_of), or verbs' when its rules are enforced. */
void fab_attrs_for(const struct fi_info *info, struct fab_attrs *a);

/* What the emulation counts (one process's totals). */
enum fab_vrb_count {
	FAB_VRB_RECV_POSTED,  /* receives posted for remote CQ data */
	FAB_VRB_RECV_TAKEN,   /* ...consumed by a write's CQ data */
	FAB_VRB_RNR,          /* a write's CQ data found no receive posted */
	FAB_VRB_CONTEXTS,     /* operations posted with a context of their own */
	FAB_VRB_LOCAL,        /* local buffers checked registered (FI_MR_LOCAL) */
	FAB_VRB_VIRT,         /* remote addresses given as virtual ones */
	FAB_VRB_KEYS,         /* provider keys (4 bytes) handed to a peer */
	FAB_VRB_CQ_DATA,      /* CQ data checked to fit 4 bytes */
	FAB_VRB_FLUSHED,      /* receives flushed as errors at the peer's CLOSE */
	FAB_VRB_BROKEN,       /* rules broken */
	FAB_VRB_NCOUNT
};

/* 1 when the verbs rules are enforced (read once per process). */
int fab_vrb_on(void);
void fab_vrb_count(enum fab_vrb_count what, uint64_t n);
/* The emulation's write and receive: the rules checked, then to the real
 * provider (lock held).  As fi_writemsg / fi_recv. */
ssize_t fab_vrb_writemsg(struct fab_conn *c, const struct fi_msg_rma *m, uint64_t flags);
ssize_t fab_vrb_recv(struct fab_conn *c, void *buf, size_t len, void *desc, void *ctx);
/* A completion as verbs would report it: one for remote CQ data consumes
 * a posted receive, whose context it then carries (lock held). */
void fab_vrb_completion(struct fab_conn *c, struct fi_cq_data_entry *e);
/* After e, the peer's CLOSE (its endpoint going): each receive still posted
 * as verbs flushes it, an error (FI_ECANCELED, FI_RECV) carrying its
 * context, one per call into *err; 0 when none is left (lock held). */
int fab_vrb_flush(struct fab_conn *c, const struct fi_cq_data_entry *e,
		  struct fi_cq_err_entry *err);
/* A key the "provider" chose for a registration (FI_MR_PROV_KEY): 4 bytes,
 * never the one the transport would have asked for. */
uint64_t fab_vrb_key(void);
/* The counts so far, as one line for the logs. */
void fab_vrb_report(char *out, size_t len);

#endif
