/* shunt doctor --to HOST:PORT: which transport a connection from here
 * would take, and why, decided as core/shunt_decide.c decides it (the rule,
 * then each transport the rule allows, fastest first, the most telling
 * reason kept) with each transport's question really asked:
 *   shm:    the listener registry of our rundir (shunt_regprobe.c: live,
 *           stale, whose, held by which processes now, as which user), and
 *           whether the accepting process would trust our offer (peer-cred);
 *   fabric: the provider (fabric_provider; auto: an RDMA device reaching
 *           the destination), then the destination host's agent, asked
 *           with QUERY (read-only: no offer is filed) after the secret's
 *           challenge-response, as the shim's OFFER would be.
 * No TCP connection to the server is made, so the server sees nothing. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/shunt_reason.h"
#include "core/shunt_rundir_layout.h"
#include "core/shunt_stats_read.h"
#include "core/shunt_tuple.h"
#include "shunt_ab.h"
#include "shunt_doctor.h"
#include "shunt_doctor_judge.h"
#include "shunt_doctor_link.h"
#include "shunt_regprobe.h"

/* What one transport said: its reason (SHUNT_R_NONE: it takes the
 * connection), the finding that explains it (DOC_COUNT: none of its own),
 * and whether the offer is taken first and refused later (a demotion:
 * the decision line says the transport, a "moved" line the reason). */
struct answer {
	unsigned reason;
	enum doctor_code code;
	int later;
	char msg[DOCTOR_MSG_MAX - 64];
};

struct dest {
	const struct sockaddr *sa;
	socklen_t len;
	uint8_t a16[16];
	uint16_t port;
	char name[64];            /* "1.2.3.4:80" */
	struct sockaddr_storage src; /* our address towards it */
	uint8_t src16[16];
	char src_name[64];
	int local;                /* an address of this host (namespace) */
};

__attribute__((format(printf, 4, 5)))
static void say(struct answer *a, unsigned reason, enum doctor_code code, const char *fmt, ...)
{
	a->reason = reason;
	a->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->msg, sizeof(a->msg), fmt, ap);
	va_end(ap);
}

/* Our source address towards dst, as the kernel routes it (a connected
 * UDP socket sends nothing).  0, or -1 with errno. */
static int source_of(struct dest *t)
{
	int s = socket(t->sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t sl = sizeof(t->src);
	int rc = -1;
	uint16_t port;
	if (s >= 0 && connect(s, t->sa, t->len) == 0 &&
	    getsockname(s, (struct sockaddr *)&t->src, &sl) == 0 &&
	    shunt_addr16((struct sockaddr *)&t->src, t->src16, &port) == 0)
		rc = 0;
	int e = errno;
	if (s >= 0)
		close(s);
	errno = e;
	return rc;
}

/* An address of this network namespace (loopback included). */
static int is_local(const uint8_t a16[16])
{
	if (shunt_addr16_loopback(a16))
		return 1;
	struct ifaddrs *ifs;
	int found = 0;
	uint16_t port;
	if (getifaddrs(&ifs) < 0)
		return 0;
	for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
		uint8_t ia[16];
		found = i->ifa_addr && shunt_addr16(i->ifa_addr, ia, &port) == 0 &&
			!memcmp(ia, a16, 16);
	}
	freeifaddrs(ifs);
	return found;
}

/* The group an offer of ours would belong to: o/'s when it is setgid (a
 * shared rundir), the shm_group's when the library will make it so, else
 * our own. */
static unsigned offer_gid(const struct doctor *d)
{
	char o[SHUNT_PATH_MAX];
	struct stat st;
	if (shunt_rundir_path(o, sizeof(o), d->rundir, SHUNT_ROOM_OFFER, NULL) == 0 &&
	    stat(o, &st) == 0 && (st.st_mode & S_ISGID))
		return (unsigned)st.st_gid;
	return d->group_on ? (unsigned)d->group_gid : (unsigned)d->egid;
}

/* ---- shm ------------------------------------------------------------------ */

static void ask_shm(struct doctor *d, const struct dest *t, struct answer *a)
{
	struct regprobe p;
	if (!d->rundir[0] || !d->rundir_ok) {
		say(a, SHUNT_R_RING_ALLOC, DOC_TO_RING_ALLOC,
		    "this side cannot use its rundir%s%s: no shm (see the rundir findings)",
		    d->rundir[0] ? " " : "", d->rundir);
		return;
	}
	int found = regprobe_lookup(d->rundir, t->a16, t->port, &p);
	if (found < 0) {
		say(a, SHUNT_R_RING_ALLOC, DOC_TO_RING_ALLOC, "%s/l cannot be read: %s", d->rundir,
		    strerror(errno));
		return;
	}
	if (!found) {
		int plain = t->local && ab_port_listening(t->port);
		say(a, SHUNT_R_NO_PEER_SHIM, DOC_TO_NOT_SHUNT,
		    "no shunt listener for %s in %s/l: %s", t->name, d->rundir,
		    plain	   ? "a server not under shunt (or under another rundir) listens on that port"
		    : t->local ? "nothing listens on that port here"
			       : "not a listener of this rundir");
		return;
	}
	if (!p.live) {
		say(a, SHUNT_R_NO_PEER_SHIM, DOC_TO_STALE,
		    "%s/l/%s (uid %u) is stale: its listener is gone; the library removes it at the "
		    "next lookup", d->rundir, p.name, p.uid);
		return;
	}
	/* Who accepts: any of the processes holding the entry, as they are
	 * now (nginx's master registers as root, its workers accept as
	 * nobody).  Each trusts an offer whose file is its uid's or belongs
	 * to its shm_group (shm/shm_arena.c), taken to be ours. */
	unsigned gid = offer_gid(d);
	int by_group = d->group_on && gid == (unsigned)d->group_gid;
	char who[256] = "", refusers[128] = "";
	size_t w = 0, rw = 0;
	int dropped = 0, via_broker = 0;
	for (int i = 0; i < p.nholders && w < sizeof(who); i++) {
		w += (size_t)snprintf(who + w, sizeof(who) - w, "%s%ld/%s uid %ld", i ? ", " : "",
				      p.holders[i], p.progs[i], p.euids[i]);
		dropped |= p.euids[i] >= 0 && p.euids[i] != (long)p.uid;
		/* A local mark: holders that dropped privileges have their
		 * offers opened by the process that registered (uid p.uid). */
		int brokered = p.local && p.uid == d->euid;
		if (brokered && p.euids[i] != (long)d->euid)
			via_broker = 1;
		if (p.euids[i] != (long)d->euid && !by_group && !brokered && rw < sizeof(refusers))
			rw += (size_t)snprintf(refusers + rw, sizeof(refusers) - rw, "%s%ld",
					       rw ? ", " : "", p.holders[i]);
	}
	if (!p.nholders) {
		snprintf(who, sizeof(who), "a process of another PID namespace, registered by uid %u",
			 p.uid);
		if (p.uid != d->euid && !by_group)
			snprintf(refusers, sizeof(refusers), "it");
	}
	char priv[160] = "";
	if (dropped)
		snprintf(priv, sizeof(priv),
			 "; the server dropped privileges after listen() (registered by uid %u)", p.uid);
	/* Asked before trust: the library looks no further than the mark. */
	if (p.refuses) {
		say(a, SHUNT_R_SERVER_CRED, DOC_TO_SERVER_CRED,
		    "a live shunt listener (%s), registered by uid %u, marked refusing: a process of "
		    "it dropped privileges and can no longer open %s, so no offer is made (TCP at "
		    "once)",
		    who, p.uid, d->rundir);
		return;
	}
	if (refusers[0]) {
		say(a, SHUNT_R_OFFER_TIMEOUT, DOC_TO_PEER_CRED,
		    "a live shunt listener (%s)%s, but our offer (uid %u, group %u) is not trusted by "
		    "%s, neither its user's nor its shm_group's: one that accepts declines it "
		    "(peer-cred there), this side gives up after offer_timeout_ms",
		    who, priv, d->euid, gid, refusers);
		a->later = 1;
		return;
	}
	int same = p.nholders ? 1 : p.uid == d->euid;
	for (int i = 0; i < p.nholders; i++)
		same &= p.euids[i] == (long)d->euid;
	/* The server's own rule, for our address, if it reads this
	 * configuration too. */
	const char *sprog = p.nholders ? p.progs[0] : "";
	if (shunt_config_decide(&d->cfg, SHUNT_ROLE_SERVER, sprog, (struct sockaddr *)&t->src,
				t->len) == SHUNT_TP_KERNEL) {
		say(a, SHUNT_R_DECLINED, DOC_TO_SERVER_RULE,
		    "a live shunt listener (%s), but the rule for %s as a server keeps connections "
		    "from %s on TCP: it declines the offer (if it reads this configuration)",
		    who, sprog[0] ? sprog : "it", t->src_name);
		a->later = 1;
		return;
	}
	if (via_broker)
		say(a, SHUNT_R_NONE, DOC_TO,
		    "shm: a live shunt listener (%s)%s; its processes that dropped privileges open "
		    "our offer through the broker of the process that registered it (marked local: "
		    "clients on other hosts stay on TCP)",
		    who, priv);
	else
		say(a, SHUNT_R_NONE, DOC_TO, "shm: a live shunt listener (%s)%s, trusting our offer (%s)",
		    who, priv, same ? "the same user" : "shm_group");
}

/* ---- fabric ------------------------------------------------------------------ */

static void ask_fabric(struct doctor *d, const struct dest *t, struct answer *a)
{
	const char *prov = d->cfg.fabric_provider;
	if (shunt_addr16_loopback(t->a16)) {
		say(a, SHUNT_R_NO_PEER_SHIM, DOC_COUNT, "loopback: shm's business");
		return;
	}
	if (!strcmp(prov, "auto")) {
		if (!d->fab.ndev || !d->fab.route) {
			say(a, SHUNT_R_NO_RDMA_ROUTE, DOC_TO_NO_RDMA_ROUTE,
			    "fabric_provider = auto and %s: TCP is the best path there is",
			    d->fab.ndev ? "no RDMA device reaches it" : "no RDMA device here");
			return;
		}
		prov = "verbs";
	}
	if (!d->fab.loaded || !doctor_fabric_offers(&d->fab, prov)) {
		say(a, SHUNT_R_PROVIDER_ERROR, DOC_TO_PROVIDER, "provider %s unusable here: %s", prov,
		    d->fab.loaded ? "libfabric does not offer it" : d->fab.error);
		return;
	}
	struct sockaddr_storage ag;
	memcpy(&ag, t->sa, t->len);
	if (ag.ss_family == AF_INET)
		((struct sockaddr_in *)&ag)->sin_port = htons(d->cfg.agent_port);
	else
		((struct sockaddr_in6 *)&ag)->sin6_port = htons(d->cfg.agent_port);
	char agent[80];
	shunt_stats_format_addr(t->a16, d->cfg.agent_port, agent, sizeof(agent));
	if (d->secret_len < 0) {
		say(a, SHUNT_R_DECLINED, DOC_TO_AGENT_SECRET,
		    "agent_secret_file is unusable: this side offers nothing (see agent-secret-file)");
		return;
	}
	struct agent_ask k;
	doctor_agent_ask((struct sockaddr *)&ag, t->len, d->secret, d->secret_len, t->a16, t->port,
			 (int)d->cfg.agent_timeout_ms, &k);
	switch (k.res) {
	case ASK_NO_AGENT:
		say(a, SHUNT_R_NO_AGENT, DOC_TO_NO_AGENT,
		    "no agent at %s answered within agent_timeout_ms (%u ms): %s", agent,
		    d->cfg.agent_timeout_ms, k.detail);
		return;
	case ASK_AUTH_REFUSED:
	case ASK_AUTH_REQUIRED:
	case ASK_IMPOSTOR:
		say(a, SHUNT_R_DECLINED, DOC_TO_AGENT_SECRET, "the agent at %s: %s: %s", agent,
		    k.res == ASK_AUTH_REQUIRED ? "it requires a secret, none is configured here"
		    : k.res == ASK_IMPOSTOR    ? "its proof does not match our secret"
					       : "it refused our proof of the secret",
		    k.detail);
		return;
	case ASK_PROTOCOL:
		say(a, SHUNT_R_DECLINED, DOC_AGENT_PROTOCOL, "%s answers, but not as shuntd does: %s",
		    agent, k.detail);
		return;
	case ASK_ANSWERED:
		break;
	}
	if (k.status != AGENT_ST_OK) {
		say(a, SHUNT_R_NO_PEER_SHIM, DOC_TO_REMOTE_NOT_SHUNT,
		    "the agent at %s%s knows no live shunt listener at %s", agent,
		    k.authed ? " (secret proven both ways)" : "", t->name);
		return;
	}
	say(a, SHUNT_R_NONE, DOC_TO, "fabric (%s): the agent at %s%s knows a live shunt listener at %s",
	    prov, agent, k.authed ? " (secret proven both ways)" : "", t->name);
}

/* ---- the decision ------------------------------------------------------------- */

static const char *rule_source(const struct doctor *d, const char *prog, const struct dest *t,
			       char *buf, size_t len)
{
	const struct shunt_rule *r =
		shunt_config_match(&d->cfg, SHUNT_ROLE_CLIENT, prog, t->sa, t->len);
	if (!r)
		snprintf(buf, len, "no rule matches: default_transport = %s",
			 shunt_transport_name(d->cfg.default_transport));
	else if (r->line)
		snprintf(buf, len, "the rule of line %u (%s)", r->line, shunt_transport_name(r->transport));
	else
		snprintf(buf, len, "a rule of the environment (%s)", shunt_transport_name(r->transport));
	return buf;
}

void doctor_to(struct doctor *d, const struct sockaddr *dst, socklen_t len)
{
	struct dest t = {.sa = dst, .len = len};
	const char *prog = d->program ? d->program : "";
	shunt_addr16(dst, t.a16, &t.port);
	shunt_stats_format_addr(t.a16, t.port, t.name, sizeof(t.name));
	snprintf(d->to_dest, sizeof(d->to_dest), "%s", t.name);
	t.local = is_local(t.a16);
	if (source_of(&t) < 0) {
		int e = errno;
		doctor_add(d, DOC_TO_NO_ROUTE, "%s: no route from here (%s): the connect itself fails",
			   t.name, strerror(e));
		snprintf(d->to_transport, sizeof(d->to_transport), "none");
		snprintf(d->to_log, sizeof(d->to_log), "(connect fails: %s)", strerror(e));
		return;
	}
	shunt_stats_format_addr(t.src16, 0, t.src_name, sizeof(t.src_name));
	t.src_name[strlen(t.src_name) - 2] = '\0'; /* (without ":0") */

	struct answer shm = {.code = DOC_COUNT}, fab = {.code = DOC_COUNT}, *won = NULL;
	unsigned why = SHUNT_R_NO_TRANSPORT;
	char rule[128];
	enum shunt_transport r = shunt_config_decide(&d->cfg, SHUNT_ROLE_CLIENT, prog, dst, len);
	if (!d->cfg.enabled) {
		why = SHUNT_R_DISABLED;
		doctor_add(d, DOC_TO_DISABLED, "%s: enable = no", t.name);
	} else if (r == SHUNT_TP_KERNEL) {
		why = SHUNT_R_RULE_KERNEL;
		doctor_add(d, DOC_TO_RULE, "%s: %s", t.name, rule_source(d, prog, &t, rule, sizeof(rule)));
	} else {
		/* shm, then fabric: preload/shunt_transports.c's order.  An
		 * offer taken and refused later ends the decision as taking it
		 * would (the connect goes on with it). */
		if (r == SHUNT_TP_AUTO || r == SHUNT_TP_SHM) {
			ask_shm(d, &t, &shm);
			why = shm.later ? shm.reason : doctor_combine(why, shm.reason);
			won = &shm;
		}
		if (why != SHUNT_R_NONE && !shm.later && (r == SHUNT_TP_AUTO || r == SHUNT_TP_FABRIC)) {
			ask_fabric(d, &t, &fab);
			/* (fabric's answer explains the outcome when its reason
			 * is the one kept) */
			if (doctor_combine(why, fab.reason) == fab.reason && fab.code != DOC_COUNT)
				won = &fab;
			why = doctor_combine(why, fab.reason);
		}
		/* A destination on this host is shm's to explain, whatever
		 * fabric added to the reason. */
		if (why != SHUNT_R_NONE && t.local && shm.code != DOC_COUNT)
			won = &shm;
		if (won)
			doctor_add(d, won->code, "%s: %s; %s", t.name, won->msg,
				   rule_source(d, prog, &t, rule, sizeof(rule)));
		else /* (a fabric rule for a loopback address) */
			doctor_add(d, DOC_TO_NOT_SHUNT, "%s: %s allows fabric only, which serves other hosts",
				   t.name, rule_source(d, prog, &t, rule, sizeof(rule)));
	}
	int later = won && won->later;
	const char *tp = why == SHUNT_R_NONE ? (won == &fab ? "fabric" : "shm") : "kernel";
	snprintf(d->to_transport, sizeof(d->to_transport), "%s", tp);
	snprintf(d->to_reason, sizeof(d->to_reason), "%s", shunt_reason_name(why));
	int n = snprintf(d->to_log, sizeof(d->to_log),
			 "conn fd=? role=client local=%s:? peer=%s transport=%s reason=%s",
			 t.src_name, t.name, later ? "shm" : tp,
			 why == SHUNT_R_NONE || later ? "-" : shunt_reason_name(why));
	if (later && n > 0 && (size_t)n < sizeof(d->to_log))
		snprintf(d->to_log + n, sizeof(d->to_log) - (size_t)n,
			 ", then moved fd=? from=shm transport=kernel reason=%s", shunt_reason_name(why));
}
