/* shunt doctor: libfabric and RDMA.  Is libfabric.so.1 loadable, which
 * providers offer FI_EP_MSG endpoints (what the fabric transport uses),
 * which RDMA devices are there (/sys/class/infiniband_verbs, where
 * libibverbs finds them), what fabric_provider resolves to, and what
 * `auto` would do.
 *
 * libfabric is loaded and asked in a child process: loading it runs its
 * dependencies' constructors and its providers' start-up (100-300 ms, see
 * fabric/fab_lib.c), which the doctor itself should not carry, and a
 * provider that hangs or crashes there takes only the child with it. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "shunt_doctor.h"

#define LIB_NAME "libfabric.so.1"
#define API FI_VERSION(1, 9) /* as fabric/fab_internal.h asks */
#define PROBE_TIMEOUT_MS 10000

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The RDMA devices libibverbs would find: uverbs character devices, by
 * the name of the device behind each. */
static void rdma_devices(struct doctor_fabric *f)
{
	DIR *dir = opendir("/sys/class/infiniband_verbs");
	size_t w = 0;
	for (struct dirent *e; dir && (e = readdir(dir));) {
		if (strncmp(e->d_name, "uverbs", 6))
			continue;
		char path[512], name[64] = "";
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", e->d_name);
		FILE *fp = fopen(path, "re");
		if (fp) {
			if (fgets(name, sizeof(name), fp))
				name[strcspn(name, "\n")] = '\0';
			fclose(fp);
		}
		f->ndev++;
		if (w < sizeof(f->devices))
			w += (size_t)snprintf(f->devices + w, sizeof(f->devices) - w, "%s%s (%s)",
					      w ? ", " : "", name[0] ? name : "?", e->d_name);
	}
	if (dir)
		closedir(dir);
}

/* In the child: load libfabric, say what it offers on fd out, line by
 * line ("V 1.20", "P tcp", "R 1"; "E why" when it cannot load), exit. */
static void child(int out, const struct sockaddr *dst, socklen_t len)
{
	void *h = dlopen(LIB_NAME, RTLD_NOW | RTLD_LOCAL);
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
		       struct fi_info **);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	uint32_t (*version)(void);
	if (!h) {
		dprintf(out, "E %s\n", dlerror());
		_exit(0);
	}
	*(void **)&getinfo = dlsym(h, "fi_getinfo");
	*(void **)&freeinfo = dlsym(h, "fi_freeinfo");
	*(void **)&dupinfo = dlsym(h, "fi_dupinfo");
	*(void **)&version = dlsym(h, "fi_version");
	if (!getinfo || !freeinfo || !dupinfo || !version) {
		dprintf(out, "E %s: fi_getinfo, fi_freeinfo, fi_dupinfo or fi_version missing\n",
			LIB_NAME);
		_exit(0);
	}
	uint32_t v = version();
	dprintf(out, "V %u.%u\n", FI_MAJOR(v), FI_MINOR(v));
	struct fi_info *hints = dupinfo(NULL), *info = NULL;
	if (hints) {
		hints->ep_attr->type = FI_EP_MSG;
		if (getinfo(API, NULL, NULL, 0, hints, &info) == 0)
			for (struct fi_info *i = info; i; i = i->next)
				dprintf(out, "P %s\n", i->fabric_attr->prov_name);
		freeinfo(info);
		freeinfo(hints);
	}
	/* auto's question for a destination (fabric/fab_prov.c): does the
	 * verbs provider resolve it over an RDMA device? */
	hints = dst ? dupinfo(NULL) : NULL;
	if (hints) {
		hints->ep_attr->type = FI_EP_MSG;
		hints->fabric_attr->prov_name = strdup("verbs");
		hints->addr_format = dst->sa_family == AF_INET ? FI_SOCKADDR_IN : FI_SOCKADDR_IN6;
		hints->dest_addr = malloc(len);
		if (hints->dest_addr) {
			memcpy(hints->dest_addr, dst, len);
			hints->dest_addrlen = len;
		}
		info = NULL;
		dprintf(out, "R %d\n", getinfo(API, NULL, NULL, 0, hints, &info) == 0);
		freeinfo(info);
		freeinfo(hints);
	}
	_exit(0);
}

/* One line of the child's into f. */
static void take(struct doctor_fabric *f, const char *line)
{
	size_t n = strlen(f->providers);
	switch (line[0]) {
	case 'E':
		snprintf(f->error, sizeof(f->error), "%s", line + 2);
		break;
	case 'V':
		snprintf(f->version, sizeof(f->version), "%s", line + 2);
		f->loaded = 1;
		break;
	case 'P':
		/* Each provider once (a provider may list several fabrics). */
		if (!doctor_fabric_offers(f, line + 2))
			snprintf(f->providers + n, sizeof(f->providers) - n, "%s%s", n ? ", " : "",
				 line + 2);
		break;
	case 'R':
		f->route = line[2] == '1';
		break;
	}
}

void doctor_fabric_probe(struct doctor_fabric *f, const struct sockaddr *dst, socklen_t len)
{
	memset(f, 0, sizeof(*f));
	rdma_devices(f);
	if (!f->ndev)
		dst = NULL; /* (auto asks libfabric nothing then) */
	int p[2];
	uint64_t t0 = now_ms();
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(f->error, sizeof(f->error), "pipe: %s", strerror(errno));
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(f->error, sizeof(f->error), "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		/* (libfabric's own warnings are not the doctor's findings) */
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		close(p[0]);
		child(p[1], dst, len);
	}
	close(p[1]);
	char buf[4096];
	size_t got = 0;
	int timed_out = 0;
	for (;;) {
		uint64_t now = now_ms();
		if (now - t0 >= PROBE_TIMEOUT_MS) {
			timed_out = 1;
			break;
		}
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int r = poll(&pf, 1, (int)(PROBE_TIMEOUT_MS - (now - t0)));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		ssize_t n = read(p[0], buf + got, sizeof(buf) - 1 - got);
		if (n <= 0 || (got += (size_t)n) == sizeof(buf) - 1)
			break;
	}
	close(p[0]);
	if (timed_out)
		kill(pid, SIGKILL);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	f->ms = (unsigned)(now_ms() - t0);
	buf[got] = '\0';
	for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		take(f, line);
	if (timed_out) {
		f->loaded = 0;
		snprintf(f->error, sizeof(f->error), "loading it took more than %d s", PROBE_TIMEOUT_MS / 1000);
	} else if (!f->loaded && !f->error[0]) {
		snprintf(f->error, sizeof(f->error), "the probe died (%s %d)",
			 WIFSIGNALED(status) ? "signal" : "status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	}
}

int doctor_fabric_offers(const struct doctor_fabric *f, const char *prov)
{
	char have[sizeof(f->providers) + 4], tok[48];
	snprintf(have, sizeof(have), ", %s,", f->providers);
	snprintf(tok, sizeof(tok), ", %s,", prov);
	return f->loaded && strstr(have, tok) != NULL;
}

void doctor_fabric(struct doctor *d, const struct sockaddr *dst, socklen_t len)
{
	struct doctor_fabric *f = &d->fab;
	const char *prov = d->cfg.fabric_provider;
	int autop = !strcmp(prov, "auto");
	doctor_fabric_probe(f, dst, len);
	char devs[300];
	snprintf(devs, sizeof(devs), "%s", f->ndev ? f->devices : "none");
	int ok = 1;
	if (!strcmp(prov, "tcp"))
		doctor_add(d, DOC_FABRIC_TCP,
			   "fabric_provider = tcp: the fabric transport over libfabric's tcp provider, "
			   "made to test it without RDMA hardware");
	if (!f->loaded && (!autop || f->ndev)) {
		doctor_add(d, DOC_FABRIC_LIB,
			   "%s cannot be loaded (%s): connections to other hosts take TCP (reason "
			   "provider-error)",
			   LIB_NAME, f->error);
		return;
	}
	if (f->loaded && !autop && !doctor_fabric_offers(f, prov)) {
		doctor_add(d, DOC_FABRIC_PROVIDER,
			   "fabric_provider = %s, but libfabric %s offers FI_EP_MSG endpoints with %s "
			   "only: connections to other hosts take TCP (reason provider-error)",
			   prov, f->version, f->providers[0] ? f->providers : "no provider");
		ok = 0;
	}
	char why[512];
	if (ok && f->loaded && !autop && doctor_fabric_unfit(prov, why, sizeof(why))) {
		doctor_add(d, DOC_FABRIC_PROVIDER,
			   "fabric_provider = %s, but the fabric transport cannot run on it: %s: "
			   "connections to other hosts take TCP (reason provider-error)",
			   prov, why);
		ok = 0;
	}
	if (f->loaded && autop && f->ndev && !doctor_fabric_offers(f, "verbs")) {
		doctor_add(d, DOC_FABRIC_VERBS,
			   "RDMA devices %s, but libfabric %s has no verbs provider for them (it offers "
			   "%s): auto keeps connections to other hosts on TCP",
			   devs, f->version, f->providers[0] ? f->providers : "none");
		ok = 0;
	}
	if (!ok)
		return;
	char lib[sizeof(f->providers) + sizeof(f->error) + 128];
	if (f->loaded)
		snprintf(lib, sizeof(lib), "libfabric %s (loaded in a child in %u ms), FI_EP_MSG providers %s",
			 f->version, f->ms, f->providers[0] ? f->providers : "none");
	else
		snprintf(lib, sizeof(lib), "%s not loadable (%s), not needed here", LIB_NAME, f->error);
	const char *what =
		!autop	  ? "connections to a shunt listener on another host take fabric over this provider"
		: f->ndev ? "verbs to destinations an RDMA device reaches (--to says for one), "
			    "kernel TCP to the others (no-rdma-route)"
			  : "no RDMA device, so connections to other hosts stay on kernel TCP "
			    "(no-rdma-route) and libfabric is never loaded";
	doctor_add(d, DOC_FABRIC, "%s; RDMA devices: %s; fabric_provider = %s: %s", lib, devs, prov,
		   what);
}
