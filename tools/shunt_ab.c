/* shunt ab: A/B of any server/client pair, plain and under shunt.
 *
 *   shunt ab --server 'CMD' --client 'CMD' [--runs N] [--warmup N] [--port P]
 *            [--format F] [--config FILE] [--transport T] [--options 'k=v,...']
 *            [--cpus A,B] [--json FILE|-] [--csv FILE] [--ready-timeout SEC]
 *            [--timeout SEC] [--keep DIR] [-v]
 *
 * Everything that can be checked is checked before the first run: a bad
 * option, or shunt-side settings the library would refuse (the same check
 * as shunt run's: shunt_run_env.c), is a usage error.  Then warm-up runs,
 * not counted, then the counted runs: in run r the plain and the shunt
 * side run back to back, which first alternating, so drift on a busy
 * machine hurts both alike and each pair can be compared on its own
 * (shunt_ab_stats.c).  A run that fails is reported and kept out; the exit
 * status says whether enough pairs were left. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "shunt_ab.h"
#include "shunt_ab_sockperf.h"
#include "shunt_child.h"
#include "shunt_machine.h"
#include "shunt_tool.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shunt ab --server 'CMD' --client 'CMD' [options]\n"
		"  --server CMD        the server command (a shell command line); optional\n"
		"  --client CMD        the client command, whose output is compared\n"
		"  --runs N            counted runs each way, in pairs (default %d, the least\n"
		"                      that can give a verdict)\n"
		"  --warmup N          runs each way before those, not counted (default 1)\n"
		"  --port P            the server is ready when port P listens\n"
		"                      (default: when it listens on any TCP port)\n"
		"  --format F          auto (default), sockperf, redis-benchmark, iperf3, wrk,\n"
		"                      or time (wall and CPU time only)\n"
		"  --config FILE       the shunt side's configuration file (shunt run --config)\n"
		"  --transport T       the shunt side's transport (shunt run --transport)\n"
		"  --options 'k=v,..'  the shunt side's extra settings (shunt run --options)\n"
		"  --cpus A,B          pin the client to CPU A, the server to CPU B\n"
		"  --json FILE|-       the report as JSON too ('-': on standard output, the\n"
		"                      table then on standard error)\n"
		"  --csv FILE          every run's figures and the summaries, as CSV\n"
		"  --ready-timeout SEC how long the server may take to listen (default 30)\n"
		"  --timeout SEC       how long a client may run (default 600)\n"
		"  --keep DIR          keep every run's client and server output in DIR\n"
		"  -v, --verbose       show every client output\n"
		"A ping-pong sockperf client without --mps gets %s.\n",
		AB_MIN_PAIRS, AB_SOCKPERF_MPS);
}

#define usage_error(...) shunt_usage_error("ab", __VA_ARGS__)

/* An output file must be writable before minutes of runs are spent. */
static int writable_dir_of(const char *path)
{
	char copy[4096];
	if (!strcmp(path, "-"))
		return 1;
	snprintf(copy, sizeof(copy), "%s", path);
	return access(dirname(copy), W_OK) == 0;
}

static int parse_count(const char *arg, int lo, int hi, int *out)
{
	uint64_t u;
	if (parse_u64(arg, &u, 0) || u < (uint64_t)lo || u > (uint64_t)hi)
		return -1;
	*out = (int)u;
	return 0;
}

static int parse_secs(const char *arg, double max, double *out)
{
	char *e;
	double v = strtod(arg, &e);
	if (e == arg || *e || !(v > 0 && v <= max))
		return -1;
	*out = v;
	return 0;
}

/* The options; 0 or a usage error's exit status. */
static int parse_options(struct ab *a, int argc, char **argv)
{
	enum { O_SERVER = 1, O_CLIENT, O_RUNS, O_WARMUP, O_PORT, O_FORMAT, O_CONFIG, O_TRANSPORT,
	       O_OPTIONS, O_CPUS, O_JSON, O_CSV, O_READY, O_TIMEOUT, O_KEEP, O_HELP };
	static const struct option opts[] = {
		{ "server", required_argument, NULL, O_SERVER },
		{ "client", required_argument, NULL, O_CLIENT },
		{ "runs", required_argument, NULL, O_RUNS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "port", required_argument, NULL, O_PORT },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "options", required_argument, NULL, O_OPTIONS },
		{ "cpus", required_argument, NULL, O_CPUS },
		{ "json", required_argument, NULL, O_JSON },
		{ "csv", required_argument, NULL, O_CSV },
		{ "ready-timeout", required_argument, NULL, O_READY },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "keep", required_argument, NULL, O_KEEP },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	char err[200];
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":vh", opts, NULL)) != -1) {
		switch (c) {
		case O_SERVER: a->server = optarg; break;
		case O_CLIENT: a->client_given = optarg; break;
		case O_RUNS:
			if (parse_count(optarg, 1, AB_MAX_RUNS, &a->runs))
				return usage_error("--runs: expected 1..%d", AB_MAX_RUNS);
			break;
		case O_WARMUP:
			if (parse_count(optarg, 0, 100, &a->warmup))
				return usage_error("--warmup: expected 0..100");
			break;
		case O_PORT:
			if (parse_count(optarg, 1, 65535, &a->port))
				return usage_error("--port: expected 1..65535");
			break;
		case O_FORMAT: {
			int ok = !strcmp(optarg, "auto");
			for (int i = 0; ab_formats[i] && !ok; i++)
				ok = !strcmp(optarg, ab_formats[i]);
			if (!ok)
				return usage_error("--format: expected auto, sockperf, redis-benchmark, "
						   "iperf3, wrk or time");
			a->format = optarg;
			break;
		}
		case O_CONFIG: a->env.config = optarg; break;
		case O_TRANSPORT: a->env.transport = optarg; break;
		case O_OPTIONS: a->env.options = optarg; break;
		case O_CPUS:
			if (child_parse_cpus(optarg, a->cpus, err, sizeof(err)))
				return usage_error("--cpus: %s", err);
			break;
		case O_JSON: a->json = optarg; break;
		case O_CSV: a->csv = optarg; break;
		case O_READY:
			if (parse_secs(optarg, 3600, &a->ready_timeout))
				return usage_error("--ready-timeout: expected seconds in (0, 3600]");
			break;
		case O_TIMEOUT:
			if (parse_secs(optarg, 86400, &a->timeout))
				return usage_error("--timeout: expected seconds in (0, 86400]");
			break;
		case O_KEEP: a->keep = optarg; break;
		case 'v': a->verbose = 1; break;
		case 'h':
		case O_HELP:
			usage(stdout);
			return -1;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!a->client_given || !a->client_given[0])
		return usage_error("--client is required");
	if (a->server && !a->server[0])
		return usage_error("--server: empty command");
	if (a->env.options && strlen(a->env.options) > 4000)
		return usage_error("--options: longer than 4000 bytes");
	if (a->json && a->csv && !strcmp(a->json, "-") && !strcmp(a->csv, "-"))
		return usage_error("--json - and --csv -: only one can have standard output");
	if (a->csv && !strcmp(a->csv, "-"))
		return usage_error("--csv: a file name ('-' is for --json)");
	if (a->json && !writable_dir_of(a->json))
		return usage_error("--json %s: cannot write there", a->json);
	if (a->csv && !writable_dir_of(a->csv))
		return usage_error("--csv %s: cannot write there", a->csv);
	return 0;
}

/* The shunt side's settings, loaded exactly as shunt run will load them:
 * a key the library does not know is an error now, not a plain "shunt"
 * side later.  The report names the settings that differ from the
 * defaults (rundir is the runs' own). */
static int check_shunt_side(struct ab *a)
{
	int rc = run_env_check(&a->env, "ab");
	if (rc)
		return rc;
	static struct shunt_config c;
	char err[SHUNT_ERR_MAX];
	if (run_env_load(&a->env, &c, err, sizeof(err)) != 0)
		return usage_error("the shunt side's settings: %s", err);
	c.rundir[0] = '\0';
	shunt_config_describe(&c, a->settings, sizeof(a->settings));
	return 0;
}

int shunt_cmd_ab(int argc, char **argv)
{
	static struct ab ab;
	struct ab *a = &ab;
	memset(a, 0, sizeof(*a));
	a->runs = AB_MIN_PAIRS;
	a->warmup = 1;
	a->format = "auto";
	a->ready_timeout = 30;
	a->timeout = 600;
	a->cpus[0] = a->cpus[1] = -1;
	int rc = parse_options(a, argc, argv);
	if (rc)
		return rc < 0 ? 0 : rc;
	if ((rc = check_shunt_side(a)) != 0)
		return rc;
	int added = ab_sockperf_mps(a->client_given, a->client, sizeof(a->client));
	if (added < 0)
		return usage_error("--client: longer than %d bytes", AB_CMD_MAX - 64);
	a->mps_added = added;
	if (a->keep && mkdir(a->keep, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "shunt ab: --keep %s: %s\n", a->keep, strerror(errno));
		return 1;
	}
	if (!child_self_exe())
		return 1;
	if (a->server && a->port && ab_port_listening((unsigned)a->port)) {
		fprintf(stderr, "shunt ab: port %d is already listening: stop what holds it, "
			"or choose another port\n", a->port);
		return 1;
	}
	if (a->mps_added)
		fprintf(stderr, "shunt ab: the client is sockperf ping-pong without --mps: "
			"running it with %s\n", AB_SOCKPERF_MPS);

	shunt_machine_describe(a->machine, sizeof(a->machine));
	ab_catch_signals();
	for (int w = 0; w < a->warmup; w++)
		for (int side = 0; side < 2; side++) {
			fprintf(stderr, "shunt ab: warm-up %d/%d, %s\n", w + 1, a->warmup,
				ab_side_name[side]);
			ab_run_one(a, side, w, 1);
		}
	for (int r = 0; r < a->runs; r++) {
		for (int k = 0; k < 2; k++) {
			int side = r % 2 ? !k : k; /* plain first in odd runs */
			fprintf(stderr, "shunt ab: run %d/%d, %s\n", r + 1, a->runs,
				ab_side_name[side]);
			ab_run_one(a, side, r, 0);
		}
	}
	a->load_end = shunt_machine_loadavg();

	int json_stdout = a->json && !strcmp(a->json, "-");
	ab_print_report(a, json_stdout ? stderr : stdout);
	rc = 0;
	if (a->json && ab_write_json(a, a->json) != 0)
		rc = 1;
	if (a->csv && ab_write_csv(a, a->csv) != 0)
		rc = 1;
	int pairs = ab_complete_pairs(a), need = a->runs < AB_MIN_PAIRS ? a->runs : AB_MIN_PAIRS;
	if (pairs < need) {
		fprintf(stderr, "shunt ab: %d of %d runs succeeded on both sides; %d needed\n",
			pairs, a->runs, need);
		rc = 1;
	}
	return rc;
}
