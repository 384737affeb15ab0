/* shunt doctor --fabric-selftest: the fabric transport's self-test (one
 * connection from this host to itself through the transport's own code,
 * bytes checked both ways: fabric/fab_selftest.c), run by the program
 * shunt-fabtest in a child, its report made a finding a user can send
 * back.
 *
 * With no provider named it tests verbs on a host with an RDMA device,
 * between two endpoints on the address of the device's network interface
 * (the first IPv4 one, else IPv6), and says there is nothing to test on a
 * host without one.  A provider named (--fabric-selftest=tcp) is tested on
 * 127.0.0.1 unless --selftest-address gives another: what makes the test
 * of the test possible here, with no RDMA hardware.
 *
 * shunt-fabtest is looked for as libshunt.so is (shunt_run.c): $SHUNT_FABTEST,
 * next to libshunt.so, then, for the build-tree shunt only, the build tree. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shunt_doctor.h"

#define FABTEST "shunt-fabtest"
#define SELFTEST_TIMEOUT_MS 120000

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int find_fabtest(char *out, size_t len)
{
	const char *env = getenv("SHUNT_FABTEST");
	if (env && env[0]) {
		snprintf(out, len, "%s", env);
		return access(out, X_OK);
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/%s/%s", self, SHUNT_BIN_TO_LIBDIR, FABTEST);
			if (access(out, X_OK) == 0)
				return 0;
#if defined(SHUNT_BUILD_FABTEST) && defined(SHUNT_BUILD_BINDIR)
			char a[PATH_MAX], b[PATH_MAX];
			if (realpath(self, a) && realpath(SHUNT_BUILD_BINDIR, b) && !strcmp(a, b)) {
				snprintf(out, len, "%s", SHUNT_BUILD_FABTEST);
				if (access(out, X_OK) == 0)
					return 0;
			}
#endif
		}
	}
	snprintf(out, len, "%s (next to libshunt.so, or $SHUNT_FABTEST)", FABTEST);
	return -1;
}

/* The address of the network interface of the first RDMA device that has
 * one (its first IPv4 address, else an IPv6 one), into out. */
static int rdma_address(char *out, size_t len)
{
	DIR *dir = opendir("/sys/class/infiniband");
	char ifname[IF_NAMESIZE + 1] = "";
	for (struct dirent *e; dir && !ifname[0] && (e = readdir(dir));) {
		if (e->d_name[0] == '.')
			continue;
		char path[512];
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net", e->d_name);
		DIR *net = opendir(path);
		for (struct dirent *n; net && !ifname[0] && (n = readdir(net));)
			if (n->d_name[0] != '.' && strlen(n->d_name) < sizeof(ifname))
				memcpy(ifname, n->d_name, strlen(n->d_name) + 1);
		if (net)
			closedir(net);
	}
	if (dir)
		closedir(dir);
	struct ifaddrs *ifa = NULL;
	if (!ifname[0] || getifaddrs(&ifa) < 0)
		return -1;
	int found = 0;
	for (int fam = 0; fam < 2 && !found; fam++)
		for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next) {
			if (!i->ifa_addr || strcmp(i->ifa_name, ifname))
				continue;
			int f = i->ifa_addr->sa_family;
			if (fam == 0 && f == AF_INET)
				found = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
						  out, (socklen_t)len) != NULL;
			else if (fam == 1 && f == AF_INET6)
				found = inet_ntop(AF_INET6, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
						  out, (socklen_t)len) != NULL;
		}
	freeifaddrs(ifa);
	return found ? 0 : -1;
}

/* Run prog run PROV ADDR (addr NULL: prog check PROV) in a child, its
 * stdout into buf: its exit status (-1 when it could not run or timed out,
 * with why in buf). */
static int run_child(const char *prog, const char *prov, const char *addr, char *buf, size_t len)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(buf, len, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(buf, len, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, 2); /* (libfabric's own warnings are not the report) */
		if (addr)
			execl(prog, prog, "run", prov, addr, (char *)NULL);
		else
			execl(prog, prog, "check", prov, (char *)NULL);
		dprintf(1, "error: cannot run %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	uint64_t t0 = now_ms();
	int timed_out = 0;
	for (;;) {
		uint64_t t = now_ms() - t0;
		if (t >= SELFTEST_TIMEOUT_MS) {
			timed_out = 1;
			break;
		}
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int r = poll(&pf, 1, (int)(SELFTEST_TIMEOUT_MS - t));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		ssize_t n = read(p[0], buf + got, len - 1 - got);
		if (n <= 0 || (got += (size_t)n) == len - 1)
			break;
	}
	close(p[0]);
	buf[got] = '\0';
	if (timed_out)
		kill(pid, SIGKILL);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		snprintf(buf + got, len - got, "error: no result in %d s\n", SELFTEST_TIMEOUT_MS / 1000);
		return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void doctor_fabric_selftest(struct doctor *d, const char *prov, const char *addr)
{
	char address[INET6_ADDRSTRLEN] = "127.0.0.1";
	if (!prov || !prov[0]) {
		if (!d->fab.ndev) {
			doctor_add(d, DOC_FABRIC_SELFTEST,
				   "fabric self-test: no RDMA device here, nothing to test "
				   "(--fabric-selftest=tcp tests the transport's code on the tcp provider)");
			return;
		}
		prov = "verbs";
		if (!addr && rdma_address(address, sizeof(address)) < 0) {
			doctor_add(d, DOC_FABRIC_SELFTEST_FAILED,
				   "fabric self-test: RDMA devices %s, but no network interface of theirs "
				   "has an IP address (--selftest-address names one)",
				   d->fab.devices);
			return;
		}
	}
	if (addr)
		snprintf(address, sizeof(address), "%s", addr);
	char prog[PATH_MAX + 64];
	if (find_fabtest(prog, sizeof(prog)) < 0) {
		doctor_add(d, DOC_FABRIC_SELFTEST_FAILED, "fabric self-test: %s not found", prog);
		return;
	}
	char out[4096];
	int rc = run_child(prog, prov, address, out, sizeof(out));
	/* The report's lines, one finding: "key: value; key: value". */
	char msg[DOCTOR_MSG_MAX - 64];
	size_t w = 0;
	for (char *save = NULL, *line = strtok_r(out, "\n", &save); line && w < sizeof(msg);
	     line = strtok_r(NULL, "\n", &save))
		w += (size_t)snprintf(msg + w, sizeof(msg) - w, "%s%s", w ? "; " : "", line);
	if (rc == 0)
		doctor_add(d, DOC_FABRIC_SELFTEST, "fabric self-test passed: %s", msg);
	else
		doctor_add(d, DOC_FABRIC_SELFTEST_FAILED, "fabric self-test failed (status %d): %s", rc,
			   msg[0] ? msg : "no report");
}

int doctor_fabric_unfit(const char *prov, char *why, size_t len)
{
	char prog[PATH_MAX + 64], out[1024];
	if (find_fabtest(prog, sizeof(prog)) < 0)
		return 0; /* (not installed: nothing more to say) */
	if (run_child(prog, prov, NULL, out, sizeof(out)) != 3)
		return 0;
	out[strcspn(out, "\n")] = '\0';
	snprintf(why, len, "%s", strncmp(out, "unfit: ", 7) ? out : out + 7);
	return 1;
}
