/* shunt doctor: will shunt work here?  (like smc_chk and smc_rnics)
 *
 *   shunt doctor [--config FILE] [--options 'k=v,...'] [--connections N]
 *                [--to HOST:PORT] [--program PATH] [--json]
 *
 * Loads the configuration exactly as `shunt run` does (shunt_run_env.c:
 * a setting the library would refuse is a usage error), then checks this
 * host: the rundir the library would use (shunt_doctor_rundir.c), the
 * local agent (shunt_doctor_agent.c), libfabric and RDMA devices
 * (shunt_doctor_fabric.c); with --to, which transport a connection from
 * here to HOST:PORT would take and why, found by asking the registry or the
 * destination's agent, never the server (shunt_doctor_to.c); with
 * --program, whether LD_PRELOAD reaches that program at all (static, Go:
 * shunt_reach.h), and its name for the rules --to asks.  Each finding
 * is one line, OK, WARN or FAIL, with what to do (shunt_doctor_codes.h, the
 * table docs/TROUBLESHOOTING.md shares).  Exit status: 0 when nothing
 * FAILs, 1 otherwise, 2 for a usage error. */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <grp.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shunt_doctor.h"
#include "shunt_doctor_judge.h"
#include "shunt_reach.h"
#include "shunt_run_env.h"
#include "shunt_tool.h"

#define DEFAULT_CONNECTIONS 100

static void doctor_usage(FILE *f)
{
	fprintf(f,
		"usage: shunt doctor [--config FILE] [--options 'k=v,...'] [--connections N]\n"
		"                    [--to HOST:PORT] [--program PATH] [--json]\n"
		"                    [--fabric-selftest[=PROVIDER] [--selftest-address ADDR]]\n"
		"  --config FILE        configuration file, as shunt run takes it\n"
		"  --options 'k=v,...'  settings over it, as shunt run takes them\n"
		"  --connections N      shm connections open at once the rundir must hold\n"
		"                       rings for (default %d)\n"
		"  --to HOST:PORT       which transport a connection from here would take, and\n"
		"                       why: asks the listener registry or HOST's agent, never\n"
		"                       the server\n"
		"  --program PATH       whether the program can be accelerated at all (static,\n"
		"                       Go); with --to, its name for rules naming programs\n"
		"  --json               one JSON object\n"
		"  --fabric-selftest[=PROVIDER]  one fabric connection from this host to itself\n"
		"                       through shunt's code, bytes checked: verbs on a host\n"
		"                       with an RDMA device, or PROVIDER (e.g. tcp) on\n"
		"                       127.0.0.1; its report is a finding to send back\n"
		"  --selftest-address ADDR  this host's address for the self-test's endpoints\n"
		"Each finding is one line: OK, WARN or FAIL, with what to do\n"
		"(docs/TROUBLESHOOTING.md).  Exit status: 0 when nothing FAILs, 1 otherwise.\n",
		DEFAULT_CONNECTIONS);
}

#define usage_error(...) shunt_usage_error("doctor", __VA_ARGS__)

/* shm_group as the library resolves it (core/shunt_rundir.c), and whether
 * this process may give a file that group. */
static void resolve_group(struct doctor *d)
{
	unsigned g;
	struct group gr, *res = NULL;
	char buf[4096];
	if (!d->cfg.shm_group[0])
		return;
	if (shunt_config_group_id(&d->cfg, &g)) {
		d->group_gid = (gid_t)g;
		d->group_on = 1;
	} else if (getgrnam_r(d->cfg.shm_group, &gr, buf, sizeof(buf), &res) == 0 && res) {
		d->group_gid = res->gr_gid;
		d->group_on = 1;
	}
}

void doctor_config(struct doctor *d)
{
	char desc[1024];
	static struct shunt_config settings;
	settings = d->cfg;
	settings.nrules = 0;
	shunt_config_describe(&settings, desc, sizeof(desc));
	doctor_add(d, DOC_CONFIG, "%s and the environment, as shunt run loads them; not the defaults: %s; %u rule%s",
		   d->config_file, desc[0] ? desc : "nothing", d->cfg.nrules, d->cfg.nrules == 1 ? "" : "s");
	if (!d->cfg.enabled)
		doctor_add(d, DOC_CONFIG_DISABLED,
			   "enable = no: every connection stays on TCP (reason disabled)");
	if (d->cfg.default_transport == SHUNT_TP_KERNEL)
		doctor_add(d, DOC_CONFIG_KERNEL,
			   "default_transport = kernel: connections no rule names stay on TCP (reason rule-kernel)");
}

/* --to's HOST:PORT as a socket address (the first getaddrinfo gives, as a
 * program's connect would take).  0, or SHUNT_EXIT_USAGE with a message. */
static int resolve_to(const char *to, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256];
	unsigned port;
	if (doctor_parse_hostport(to, host, sizeof(host), &port) < 0)
		return usage_error("--to %s: expected HOST:PORT or [IPV6]:PORT, port 1..65535", to);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
	char service[8];
	snprintf(service, sizeof(service), "%u", port);
	int rc = getaddrinfo(host, service, &hints, &ai);
	if (rc != 0)
		return usage_error("--to %s: %s", to, gai_strerror(rc));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* --program: can LD_PRELOAD reach it?  (What `shunt run` says on stderr.)
 * A name that is no file is only a name for the rules. */
static void doctor_program(struct doctor *d)
{
	static char path[PATH_MAX];
	char why[PATH_MAX + 256];
	if (shunt_reach_find(d->program, path, sizeof path) < 0) {
		if (!d->to)
			doctor_add(d, DOC_PROGRAM_UNKNOWN, "%s: no such program on PATH",
				   d->program);
		return;
	}
	switch (shunt_reach_file(path, why, sizeof why)) {
	case SHUNT_REACH_YES: doctor_add(d, DOC_PROGRAM, "%s", why); break;
	case SHUNT_REACH_STATIC:
		doctor_add(d, DOC_PROGRAM_STATIC, "%s: it cannot be accelerated, its connections stay on TCP", why);
		break;
	case SHUNT_REACH_GO:
		doctor_add(d, DOC_PROGRAM_GO, "%s: it cannot be accelerated, its connections stay on TCP", why);
		break;
	default: doctor_add(d, DOC_PROGRAM_UNKNOWN, "%s", why); break;
	}
	/* Rules match the program's name, not its path. */
	const char *base = strrchr(d->program, '/');
	if (base && base[1])
		d->program = base + 1;
}

int shunt_cmd_doctor(int argc, char **argv)
{
	enum { O_CONFIG = 1, O_OPTIONS, O_CONNECTIONS, O_TO, O_PROGRAM, O_JSON, O_HELP, O_SELFTEST,
	       O_SELFTEST_ADDR };
	static const struct option opts[] = {
		{"config", required_argument, NULL, O_CONFIG},
		{"options", required_argument, NULL, O_OPTIONS},
		{"connections", required_argument, NULL, O_CONNECTIONS},
		{"to", required_argument, NULL, O_TO},
		{"program", required_argument, NULL, O_PROGRAM},
		{"json", no_argument, NULL, O_JSON},
		{"fabric-selftest", optional_argument, NULL, O_SELFTEST},
		{"selftest-address", required_argument, NULL, O_SELFTEST_ADDR},
		{"help", no_argument, NULL, O_HELP},
		{NULL, 0, NULL, 0},
	};
	static struct doctor doc;
	struct doctor *d = &doc;
	struct run_env env = {0};
	memset(d, 0, sizeof(*d));
	d->connections = DEFAULT_CONNECTIONS;
	opterr = 0;
	optind = 1;
	int o;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case O_CONFIG: env.config = optarg; break;
		case O_OPTIONS: env.options = optarg; break;
		case O_CONNECTIONS: {
			char *end;
			errno = 0;
			unsigned long v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || v == 0 || v > 10000000)
				return usage_error("--connections %s: expected 1..10000000", optarg);
			d->connections = v;
			break;
		}
		case O_TO: d->to = optarg; break;
		case O_PROGRAM: d->program = optarg; break;
		case O_JSON: d->json = 1; break;
		case O_SELFTEST:
			d->selftest = 1;
			d->selftest_prov = optarg;
			break;
		case O_SELFTEST_ADDR: d->selftest_addr = optarg; break;
		case 'h':
		case O_HELP:
			doctor_usage(stdout);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected '%s'", argv[optind]);
	if (d->selftest_addr && !d->selftest)
		return usage_error("--selftest-address goes with --fabric-selftest");

	int rc = run_env_check(&env, "doctor");
	if (rc)
		return rc;
	char err[SHUNT_ERR_MAX];
	if (run_env_load(&env, &d->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "shunt doctor: %s\n", err);
		return SHUNT_EXIT_USAGE;
	}
	struct sockaddr_storage dst;
	socklen_t dlen = 0;
	if (d->to && (rc = resolve_to(d->to, &dst, &dlen)) != 0)
		return rc;

	const char *file = env.config ? env.config_abs : getenv("SHUNT_CONFIG");
	if (!file || !file[0])
		file = SHUNT_DEFAULT_CONFIG;
	snprintf(d->config_file, sizeof(d->config_file), "%s%s", file,
		 access(file, F_OK) == 0 ? "" : " (absent)");
	d->euid = (unsigned)geteuid();
	d->egid = getegid();
	resolve_group(d);
	doctor_config(d);
	if (d->program)
		doctor_program(d);
	doctor_rundir(d);
	doctor_agent(d);
	doctor_sockmap(d);
	doctor_fabric(d, d->to ? (struct sockaddr *)&dst : NULL, dlen);
	if (d->selftest)
		doctor_fabric_selftest(d, d->selftest_prov, d->selftest_addr);
	if (d->to)
		doctor_to(d, (struct sockaddr *)&dst, dlen);
	memset(d->secret, 0, sizeof(d->secret));
	return doctor_report(d);
}
