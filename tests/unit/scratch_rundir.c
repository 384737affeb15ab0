/* A private runtime directory for the tests of one program, linked into
 * the transport unit tests.
 *
 * The library reads its SHUNT_* settings once, when it is loaded.
 * Criterion runs each test in a new image of the test program, started by
 * the runner with the runner's environment, so the runner sets them here,
 * before the first test, and removes the directory after the last. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	(void)set;
	/* Memory-backed where there is one, as a rundir should be. */
	snprintf(dir, sizeof dir, "%s/shunt-unit-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir) || chmod(dir, 0700) < 0) {
		perror("scratch rundir");
		exit(1);
	}
	setenv("SHUNT_RUNDIR", dir, 1);
	setenv("SHUNT_CONFIG", "/dev/null", 1); /* never /etc/shunt/shunt.conf */
	setenv("SHUNT_LOG", "error", 1);
	setenv("SHUNT_OFFER_TIMEOUT_MS", "300", 1);
	setenv("SHUNT_RING_SIZE", "64k", 1);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	(void)stats;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
