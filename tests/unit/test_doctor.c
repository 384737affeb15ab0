/* shunt doctor's judgements (tools/shunt_doctor_judge.c): --to's argument,
 * the rings' memory, the rundir's directories as the library judges them
 * and stricter, the reason a decision keeps, and what an agent answers
 * over HTTP. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "core/shunt_reason.h"
#include "tools/shunt_doctor_judge.h"

Test(doctor, hostport)
{
	char host[64];
	unsigned port;
	cr_assert_eq(doctor_parse_hostport("198.18.0.2:5000", host, sizeof host, &port), 0);
	cr_assert_str_eq(host, "198.18.0.2");
	cr_assert_eq(port, 5000);
	cr_assert_eq(doctor_parse_hostport("[::1]:6379", host, sizeof host, &port), 0);
	cr_assert_str_eq(host, "::1");
	cr_assert_eq(port, 6379);
	cr_assert_eq(doctor_parse_hostport("redis.example:65535", host, sizeof host, &port), 0);
	cr_assert_str_eq(host, "redis.example");
	static const char *const bad[] = {"::1:80",	  "1.2.3.4",	"1.2.3.4:0", ":80",
					  "[::1]80",	  "[::1]:",	"x:65536",   "x:8a",
					  "x:-1",	  "x:000080", "[]:80",     "x: 80"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(doctor_parse_hostport(bad[i], host, sizeof host, &port), -1, "%s", bad[i]);
	char tiny[4];
	cr_assert_eq(doctor_parse_hostport("abcd:1", tiny, sizeof tiny, &port), -1);
}

Test(doctor, rings)
{
	/* docs/DEPLOY.md: n x (2 x ring_size + 4 KiB) */
	cr_assert_eq(doctor_rings_need(100, 1 << 20), 100ull * (2 * 1048576 + 4096));
	cr_assert_eq(doctor_rings_need(0, 1 << 20), 0);
	cr_assert_eq(doctor_rings_need(UINT64_MAX / 2, 1 << 20), UINT64_MAX);
	cr_assert_eq(doctor_rings_need(2, UINT64_MAX / 2), UINT64_MAX);
	char b[32];
	doctor_bytes(0, b, sizeof b);
	cr_assert_str_eq(b, "0 B");
	doctor_bytes(1536, b, sizeof b);
	cr_assert_str_eq(b, "1.5 KiB");
	doctor_bytes(doctor_rings_need(100, 1 << 20), b, sizeof b);
	cr_assert_str_eq(b, "200.4 MiB");
	cr_assert_str_eq(doctor_fs_name(0x01021994), "tmpfs");
	cr_assert_str_eq(doctor_fs_name(0xef53), "ext4");
	cr_assert_null(doctor_fs_name(0x12345678));
}

static struct stat dir(unsigned mode, unsigned uid, unsigned gid)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_mode = S_IFDIR | mode;
	st.st_uid = uid;
	st.st_gid = gid;
	return st;
}

Test(doctor, private_dirs)
{
	char why[256];
	struct stat st = dir(0700, 1000, 1000);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why), DOC_RUNDIR_PERM);
	st = dir(0750, 1000, 1000); /* no one plants, but the group reads */
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why), DOC_RUNDIR_READABLE);
	cr_assert_str_eq(why, "readable by group 1000 (mode 0750)");
	st = dir(0711, 1000, 1000);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why), DOC_RUNDIR_READABLE);
	cr_assert_str_eq(why, "searchable by others (mode 0711)");
	st = dir(0710, 1000, 1000);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why), DOC_RUNDIR_READABLE);
	cr_assert_str_eq(why, "searchable by group 1000 (mode 0710)");
	st = dir(0751, 1000, 1000); /* the worse: the group reads */
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why), DOC_RUNDIR_READABLE);
	cr_assert_str_eq(why, "readable by group 1000 (mode 0751)");
	st = dir(0770, 1000, 1000);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why),
		     DOC_RUNDIR_GROUP_WRITABLE);
	cr_assert(strstr(why, "mode 0770"), "%s", why);
	st = dir(0703, 1000, 1000);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why),
		     DOC_RUNDIR_WORLD_WRITABLE);
	st = dir(01777, 0, 0); /* sticky is no help inside the rundir */
	cr_assert_eq(doctor_dir_verdict(&st, 0, 0, 0, 0, why, sizeof why),
		     DOC_RUNDIR_WORLD_WRITABLE);
	st = dir(0700, 0, 0);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why), DOC_RUNDIR_OWNER);
	cr_assert_str_eq(why, "owned by uid 0, not by uid 1000");
	st = dir(0700, 1000, 1000);
	st.st_mode = S_IFREG | 0600;
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 0, 0, 0, why, sizeof why), DOC_RUNDIR_MISSING);
}

Test(doctor, group_dirs)
{
	char why[256];
	/* Ours: the library makes it the group's, if it may. */
	struct stat st = dir(0700, 1000, 1000);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 1, why, sizeof why), DOC_RUNDIR_PERM);
	cr_assert(strstr(why, "makes it group 50's"), "%s", why);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 0, why, sizeof why), DOC_GROUP_MEMBER);
	st = dir(02770, 1000, 50);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 0, why, sizeof why), DOC_RUNDIR_PERM);
	cr_assert_str_eq(why, "");
	/* Another member's: only as the group's 2770. */
	st = dir(02770, 0, 50);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 1, why, sizeof why), DOC_RUNDIR_PERM);
	st = dir(02770, 0, 51);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 1, why, sizeof why), DOC_RUNDIR_GROUP);
	st = dir(0770, 0, 50);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 1, why, sizeof why), DOC_RUNDIR_GROUP);
	st = dir(02750, 0, 50);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 1, why, sizeof why), DOC_RUNDIR_GROUP);
	st = dir(02775, 0, 50); /* the group's to read: only others count */
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 1, why, sizeof why), DOC_RUNDIR_READABLE);
	cr_assert_str_eq(why, "readable by others (mode 2775)");
	st = dir(02777, 0, 50);
	cr_assert_eq(doctor_dir_verdict(&st, 1000, 1, 50, 1, why, sizeof why),
		     DOC_RUNDIR_WORLD_WRITABLE);
}

Test(doctor, parents)
{
	struct stat st = dir(01777, 0, 0); /* /tmp, /dev/shm */
	cr_assert_eq(doctor_parent_unsafe(&st, 1000), 0);
	st = dir(0755, 0, 0);
	cr_assert_eq(doctor_parent_unsafe(&st, 1000), 0);
	st = dir(0755, 1000, 1000);
	cr_assert_eq(doctor_parent_unsafe(&st, 1000), 0);
	st = dir(0755, 1001, 1001);
	cr_assert_eq(doctor_parent_unsafe(&st, 1000), 1);
	st = dir(0777, 0, 0);
	cr_assert_eq(doctor_parent_unsafe(&st, 1000), 1);
	st = dir(0775, 0, 100);
	cr_assert_eq(doctor_parent_unsafe(&st, 1000), 1);
}

Test(doctor, combine)
{
	/* core/shunt_decide.c: a transport that found the peer and refused
	 * it says more than a later one that found none. */
	cr_assert_eq(doctor_combine(SHUNT_R_NO_TRANSPORT, SHUNT_R_NO_PEER_SHIM), SHUNT_R_NO_PEER_SHIM);
	cr_assert_eq(doctor_combine(SHUNT_R_NO_PEER_SHIM, SHUNT_R_NO_RDMA_ROUTE),
		     SHUNT_R_NO_RDMA_ROUTE);
	cr_assert_eq(doctor_combine(SHUNT_R_NO_PEER_SHIM, SHUNT_R_NO_AGENT), SHUNT_R_NO_AGENT);
	cr_assert_eq(doctor_combine(SHUNT_R_RING_ALLOC, SHUNT_R_NO_RDMA_ROUTE), SHUNT_R_RING_ALLOC);
	cr_assert_eq(doctor_combine(SHUNT_R_RING_ALLOC, SHUNT_R_NONE), SHUNT_R_NONE);
}

static int http(const char *s, const char **body, size_t *blen)
{
	return doctor_http_parse(s, strlen(s), body, blen);
}

Test(doctor, http_answers)
{
	const char *b;
	size_t n;
	cr_assert_eq(http("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
			  "Connection: close\r\n\r\nok\nmore",
			  &b, &n),
		     200);
	cr_assert_eq(n, 3);
	cr_assert(!memcmp(b, "ok\n", 3));
	cr_assert_eq(http("HTTP/1.1 503 Service Unavailable\r\ncontent-length:  10\r\n\r\nrundir x\n", &b,
			  &n),
		     503);
	cr_assert_eq(n, 9); /* fewer bytes than announced: what came */
	cr_assert_eq(http("HTTP/1.0 200\r\n\r\nbody", &b, &n), 200);
	cr_assert_eq(n, 4);
	static const char *const bad[] = {"",
					  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n",
					  "HTTP/2 200 OK\r\n\r\n",
					  "HTTP/1.1 20 OK\r\n\r\n",
					  "HTTP/1.1 2000 OK\r\n\r\n",
					  "HTTP/1.1 099 OK\r\n\r\n",
					  "SD\x01\x09\0\0\0\x01\x04",
					  "\r\n\r\n"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(http(bad[i], &b, &n), -1, "%zu", i);
}

Test(doctor, metrics_version)
{
	static const char m[] = "# HELP shuntd_build_info shuntd version.\n"
				"# TYPE shuntd_build_info gauge\n"
				"shuntd_build_info{version=\"0.1.0\"} 1\n"
				"shuntd_clients_open 1\n";
	char v[32];
	cr_assert_eq(doctor_metrics_version(m, sizeof m - 1, v, sizeof v), 0);
	cr_assert_str_eq(v, "0.1.0");
	static const char *const bad[] = {
		"shuntd_clients_open 1\n",
		"shuntd_build_info{version=\"0.1.0} 1\n", /* unterminated */
		"shuntd_build_info{version=\"\"} 1\n",
		"shuntd_build_info{version=\"a b\"} 1\n",
		"shuntd_build_info{version=\"0123456789012345678901234567890123\"} 1\n",
		"# shuntd_build_info{version=\"0.1.0\"} 1\n",
		"shuntd_build_info{version=\"0.1.0",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(doctor_metrics_version(bad[i], strlen(bad[i]), v, sizeof v), -1, "%zu", i);
	char small[4];
	cr_assert_eq(doctor_metrics_version(m, sizeof m - 1, small, sizeof small), -1);
}
