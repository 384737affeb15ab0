/* shunt doctor: the agent of this host.  Is a shuntd answering on
 * agent_port here (loopback first, then this host's other addresses, as
 * shuntd may listen on one only), does it take our secret and prove its
 * own (the real challenge-response: a different secret is reported as
 * such), is it serving our rundir (its Unix socket there), healthy
 * (GET /healthz) and of our version (GET /metrics)? */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <shunt/version.h>

#include "core/shunt_tuple.h"
#include "shunt_doctor.h"
#include "shunt_doctor_judge.h"
#include "shunt_doctor_link.h"

/* A local agent should answer at once; this is generous for a loaded host. */
#define LOCAL_TIMEOUT_MS 2000
#define MAX_ADDRS 8

/* The addresses to look for the agent at: loopback, then the others of
 * this network namespace. */
static int local_addrs(struct sockaddr_storage *out, int max)
{
	int n = 0;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&out[n++];
	memset(s4, 0, sizeof(*s4));
	s4->sin_family = AF_INET;
	s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out[n++];
	memset(s6, 0, sizeof(*s6));
	s6->sin6_family = AF_INET6;
	s6->sin6_addr = in6addr_loopback;
	struct ifaddrs *ifs;
	if (getifaddrs(&ifs) < 0)
		return n;
	for (struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) ||
		    shunt_sa_loopback(i->ifa_addr))
			continue;
		if (i->ifa_addr->sa_family == AF_INET6 &&
		    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
			continue; /* (would need its interface) */
		memcpy(&out[n++], i->ifa_addr,
		       i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
							  : sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifs);
	return n;
}

static socklen_t with_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET) {
		((struct sockaddr_in *)ss)->sin_port = htons(port);
		return sizeof(struct sockaddr_in);
	}
	((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	return sizeof(struct sockaddr_in6);
}

static void addr_name(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	uint8_t a[16];
	uint16_t port;
	if (shunt_addr16((const struct sockaddr *)ss, a, &port) == 0) {
		char ip[INET6_ADDRSTRLEN];
		inet_ntop(ss->ss_family, ss->ss_family == AF_INET
						 ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
						 : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr,
			  ip, sizeof(ip));
		snprintf(buf, len, ss->ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, port);
	} else {
		snprintf(buf, len, "?");
	}
}

/* The query every probe asks: whether 127.0.0.1:1 is a listener.  Its
 * answer does not matter, only that one comes. */
static const uint8_t probe_addr[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};

/* The agent's secret against ours, from what the exchange said. */
static void secret_finding(struct doctor *d, const char *where, const struct sockaddr *a,
			   socklen_t len, const struct agent_ask *k)
{
	if (k->res == ASK_AUTH_REQUIRED) {
		doctor_add(d, DOC_AGENT_SECRET,
			   "the agent at %s requires a secret and none is configured here: it refuses "
			   "this host's shims", where);
		return;
	}
	if (k->res == ASK_IMPOSTOR) {
		doctor_add(d, DOC_AGENT_SECRET, "the agent at %s took our proof but %s", where,
			   k->detail);
		return;
	}
	/* Refused: another secret, or none at all (it then answers without). */
	struct agent_ask plain;
	doctor_agent_ask(a, len, NULL, 0, probe_addr, 1, LOCAL_TIMEOUT_MS, &plain);
	doctor_add(d, DOC_AGENT_SECRET, "the agent at %s refused our proof of the secret: %s", where,
		   plain.res == ASK_ANSWERED ? "it has no secret configured, and this host's shims "
					       "have one"
					     : "it has another secret");
}

void doctor_agent(struct doctor *d)
{
	char err[256];
	d->secret_len = agent_secret_get(&d->cfg, d->secret, sizeof(d->secret), err, sizeof(err));
	if (d->secret_len < 0)
		doctor_add(d, DOC_AGENT_SECRET_FILE,
			   "%s: this host's shims make no fabric offers, shuntd does not start", err);
	int klen = d->secret_len > 0 ? d->secret_len : 0;

	/* The TCP port, where remote shims reach it. */
	struct sockaddr_storage addrs[MAX_ADDRS];
	int n = local_addrs(addrs, MAX_ADDRS), at = -1;
	struct agent_ask tcp = {.res = ASK_NO_AGENT};
	socklen_t alen = 0;
	for (int i = 0; i < n && at < 0; i++) {
		alen = with_port(&addrs[i], d->cfg.agent_port);
		doctor_agent_ask((struct sockaddr *)&addrs[i], alen, d->secret, klen, probe_addr, 1,
				 LOCAL_TIMEOUT_MS, &tcp);
		if (!tcp.connect_errno)
			at = i; /* (something took the connection) */
	}
	/* Its Unix socket in our rundir: an agent serving this rundir. */
	struct agent_ask unx = {.res = ASK_NO_AGENT};
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	int have_sock = 0;
	if (d->rundir[0] &&
	    snprintf(un.sun_path, sizeof(un.sun_path), "%s/agent.sock", d->rundir) <
		    (int)sizeof(un.sun_path)) {
		struct stat st;
		have_sock = lstat(un.sun_path, &st) == 0 && S_ISSOCK(st.st_mode);
		if (have_sock)
			doctor_agent_ask((struct sockaddr *)&un, sizeof(un), NULL, 0, probe_addr, 1,
					 LOCAL_TIMEOUT_MS, &unx);
	}
	int serves_rundir = unx.res == ASK_ANSWERED;

	if (at < 0) {
		if (serves_rundir)
			doctor_add(d, DOC_AGENT_ABSENT,
				   "a shuntd serves %s but none answers on port %u here: its agent_port "
				   "differs, or it listens on another address",
				   un.sun_path, (unsigned)d->cfg.agent_port);
		else
			doctor_add(d, DOC_AGENT_ABSENT,
				   "no shuntd answers on port %u here (loopback and this host's "
				   "addresses)%s%s",
				   (unsigned)d->cfg.agent_port, d->rundir[0] ? " nor on " : "",
				   d->rundir[0] ? un.sun_path : "");
		return;
	}
	char where[80];
	addr_name(&addrs[at], where, sizeof(where));
	int ok = 1;
	switch (tcp.res) {
	case ASK_ANSWERED:
		break;
	case ASK_AUTH_REFUSED:
	case ASK_AUTH_REQUIRED:
	case ASK_IMPOSTOR:
		secret_finding(d, where, (struct sockaddr *)&addrs[at], alen, &tcp);
		ok = 0;
		break;
	default:
		doctor_add(d, DOC_AGENT_PROTOCOL, "port %u (%s) answers, but not as shuntd does: %s",
			   (unsigned)d->cfg.agent_port, where, tcp.detail);
		return;
	}
	/* Health and version: the HTTP side of the same port. */
	static char buf[65536];
	const char *body;
	size_t blen;
	char health[128] = "?", version[32] = "";
	int st = doctor_http_get((struct sockaddr *)&addrs[at], alen, "/healthz", LOCAL_TIMEOUT_MS,
				 buf, sizeof(buf), &body, &blen);
	if (st == 200) {
		snprintf(health, sizeof(health), "ok");
	} else {
		if (st > 0)
			snprintf(health, sizeof(health), "%d %.*s", st, (int)(blen > 100 ? 100 : blen), body);
		else
			snprintf(health, sizeof(health), "%.100s", buf);
		health[strcspn(health, "\r\n")] = '\0';
		doctor_add(d, DOC_AGENT_UNHEALTHY, "the agent at %s: GET /healthz: %s", where, health);
		ok = 0;
	}
	if (doctor_http_get((struct sockaddr *)&addrs[at], alen, "/metrics", LOCAL_TIMEOUT_MS, buf,
			    sizeof(buf), &body, &blen) == 200 &&
	    doctor_metrics_version(body, blen, version, sizeof(version)) == 0 &&
	    strcmp(version, SHUNT_VERSION)) {
		doctor_add(d, DOC_AGENT_VERSION, "the agent at %s is shuntd %s, this is shunt %s", where,
			   version, SHUNT_VERSION);
		ok = 0;
	}
	if (!serves_rundir && d->rundir[0]) {
		doctor_add(d, DOC_AGENT_RUNDIR,
			   "the agent at %s does not serve %s (no %s): it does not see this rundir's "
			   "listeners, so clients on other hosts find none",
			   where, d->rundir, have_sock ? "answer on its agent.sock" : "agent.sock in it");
		ok = 0;
	}
	if (ok)
		doctor_add(d, DOC_AGENT, "shuntd %s answers on %s (%s) and serves %s; /healthz ok",
			   version[0] ? version : "(version unknown)", where,
			   klen ? "the secret proven both ways" : "no secret", d->rundir);
}
