/* The client's offers waiting for their connect-back: the table the
 * passive thread finds a request's offer in, by id, and claims it from by
 * one CAS on its state (fab_offer.c answers it).  Under the connection's
 * close and demotion, which take an offer out of it. */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "fab_internal.h"
#include "agent/agent_hmac.h"
#include "core/shunt_forklock.h"

static struct fab_conn *offers;
static pthread_mutex_t offers_mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(offers_mu, SHUNT_RANK_FAB_OFFERS)

void fab_offer_add(struct fab_conn *c)
{
	pthread_mutex_lock(&offers_mu);
	c->next = offers;
	offers = c;
	pthread_mutex_unlock(&offers_mu);
}

/* 1 when the request came from the address the client connected to: the
 * server's (its endpoint is bound there, see fab_accept).  Someone who
 * learnt an offer's key could still not use it from elsewhere. */
static int from_server(const struct fab_conn *c, const struct fi_info *info)
{
	uint8_t want[16], got[16];
	uint16_t port;
	if (!info || !info->dest_addr ||
	    (info->addr_format != FI_SOCKADDR_IN && info->addr_format != FI_SOCKADDR_IN6 &&
	     info->addr_format != FI_SOCKADDR))
		return 0;
	return shunt_addr16((const struct sockaddr *)&c->peer_sa, want, &port) == 0 &&
	       shunt_addr16(info->dest_addr, got, &port) == 0 && !memcmp(want, got, 16);
}

/* The offer a request is for: it names its id, is made with its key, for
 * its ring, from the server's address.  Taken out of the table only then,
 * so a request that fails any of it (forged, replayed, a stranger's) leaves
 * the offer to its server.  Ids and MACs are compared in constant time. */
static struct fab_conn *offer_find_locked(const struct fab_cm_req *req, const struct fi_info *info,
					  const char **why)
{
	struct fab_conn **hit = NULL;
	for (struct fab_conn **p = &offers; *p; p = &(*p)->next)
		if (!hmac_equal((*p)->id, req->id, FAB_ID_LEN))
			hit = p;
	*why = "no offer with that id";
	if (!hit)
		return NULL;
	struct fab_conn *c = *hit;
	*why = fab_cm_req_verify(req, c->key) ? "not made with the offer's key"
	       : fab_cm_req_ring(req) != c->ring ? "another ring size"
	       : !from_server(c, info)	      ? "not from the server's address"
						      : NULL;
	if (*why)
		return NULL;
	*hit = c->next;
	return c;
}

void fab_offer_del(struct fab_conn *c)
{
	pthread_mutex_lock(&offers_mu);
	for (struct fab_conn **p = &offers; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&offers_mu);
}

struct fab_conn *fab_offer_claim(const struct fab_cm_req *req, const struct fi_info *info,
				 const char **why, int *won)
{
	pthread_mutex_lock(&offers_mu);
	struct fab_conn *c = offer_find_locked(req, info, why);
	int st = FAB_OFFERED;
	*won = c && __atomic_compare_exchange_n(&c->state, &st,
						req->decline ? FAB_DECLINED : FAB_ACCEPTING, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	if (*won)
		__atomic_add_fetch(&c->base.refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&offers_mu);
	return c;
}

/* The passive thread owns a connection between its CAS and its answer. */
void fab_wait_accepting(struct fab_conn *c)
{
	while (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == FAB_ACCEPTING)
		sched_yield();
}
