/* shunt doctor's judgements: what it concludes from what it read, without
 * I/O (unit-tested in tests/unit/test_doctor.c; what a peer sends is
 * fuzzed in tests/fuzz/fuzz_doctor_http.c). */
#ifndef SHUNT_DOCTOR_JUDGE_H
#define SHUNT_DOCTOR_JUDGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "shunt_doctor_codes.h"

/* "HOST:PORT", "[V6]:PORT": host into host[hlen] (brackets removed), the
 * port 1..65535 into *port.  0, or -1 when malformed. */
int doctor_parse_hostport(const char *s, char *host, size_t hlen, unsigned *port);

/* The memory n connections' rings take: n x (2 x ring + 4 KiB)
 * (docs/DEPLOY.md, "Memory"); UINT64_MAX when it does not fit. */
uint64_t doctor_rings_need(uint64_t n, uint64_t ring);

/* "tmpfs", "ext4", ... for a statfs f_type; NULL when unknown. */
const char *doctor_fs_name(unsigned long f_type);

/* "1.5 MiB" and the like into buf. */
void doctor_bytes(uint64_t v, char *buf, size_t len);

/* A directory of the rundir (the rundir or one of its rooms) as the
 * library would judge it, and stricter: DOC_RUNDIR_PERM when it is fine,
 * else the finding, with why[] saying what is wrong.  group: shm_group is
 * on with gid; member: this process may give files that group (a member,
 * or root). */
enum doctor_code doctor_dir_verdict(const struct stat *st, unsigned euid, int group, unsigned gid,
				    int member, char *why, size_t whylen);

/* A directory on the way to the rundir (parent, grandparent...): 1 when
 * someone other than root and euid could replace what is inside (writable
 * by them and not sticky, or owned by another user). */
int doctor_parent_unsafe(const struct stat *st, unsigned euid);

/* The reason a decision keeps when one more transport answered r (core's
 * decide(): a transport that found the peer and refused it says more than
 * a later one that found no peer).  Reasons are enum shunt_reason; 0 took. */
unsigned doctor_combine(unsigned why, unsigned r);

/* An HTTP/1.x response in buf[0..len): its status code, with *body and
 * *blen the body (up to len, at most Content-Length).  -1 when it is not a
 * complete response head. */
int doctor_http_parse(const char *buf, size_t len, const char **body, size_t *blen);

/* The version in a /metrics text's shuntd_build_info{version="..."} line
 * into out (printable ASCII, at most 31 bytes).  0, or -1 when absent. */
int doctor_metrics_version(const char *body, size_t len, char *out, size_t outlen);

#endif
