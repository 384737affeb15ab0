/* shunt doctor's judgements, without I/O (see shunt_doctor_judge.h). */
#include "shunt_doctor_judge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/shunt_rundir_path.h"
#include "core/shunt_reason.h"

int doctor_parse_hostport(const char *s, char *host, size_t hlen, unsigned *port)
{
	const char *h = s, *colon;
	size_t n;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return -1;
		h = s + 1;
		n = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return -1; /* no port, or an IPv6 address without brackets */
		n = (size_t)(colon - s);
	}
	if (n == 0 || n >= hlen)
		return -1;
	const char *p = colon + 1;
	unsigned long v = 0;
	if (!*p || strlen(p) > 5)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (unsigned)v;
	return 0;
}

uint64_t doctor_rings_need(uint64_t n, uint64_t ring)
{
	if (ring > (UINT64_MAX - 4096) / 2)
		return UINT64_MAX;
	uint64_t one = 2 * ring + 4096;
	return n && one > UINT64_MAX / n ? UINT64_MAX : n * one;
}

const char *doctor_fs_name(unsigned long f_type)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} fs[] = {
		{0x01021994, "tmpfs"}, {0x858458f6, "ramfs"},	{0xef53, "ext4"},
		{0x58465342, "xfs"},   {0x9123683e, "btrfs"},	{0x794c7630, "overlayfs"},
		{0x6969, "nfs"},       {0x01021997, "9p"},	{0x65735546, "fuse"},
		{0x2fc12fc1, "zfs"},   {0x73717368, "squashfs"}, {0xf2f52010, "f2fs"},
		{0x5346544e, "ntfs"},  {0x4d44, "vfat"},	{0x62656572, "sysfs"},
	};
	for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		if (fs[i].magic == f_type)
			return fs[i].name;
	return NULL;
}

void doctor_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double x = (double)v;
	unsigned u = 0;
	while (x >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		x /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)v);
	else
		snprintf(buf, len, "%.1f %s", x, unit[u]);
}

/* A directory users it is not shared with may read (list: which addresses
 * listen) or only search (open what they can name: every process's
 * counters by its pid); the worst of others and, unless it is shared with
 * it, the group. */
static enum doctor_code open_to(const struct stat *st, int shared, char *why, size_t whylen)
{
	unsigned mode = st->st_mode & 07777, o = mode & 007, g = shared ? 0 : (mode & 070) >> 3;
	int others = (o & 4) || (!(g & 4) && o);
	char who[32] = "others";
	if (!others)
		snprintf(who, sizeof(who), "group %u", (unsigned)st->st_gid);
	snprintf(why, whylen, "%s by %s (mode %04o)", (o | g) & 4 ? "readable" : "searchable",
		 who, mode);
	return DOC_RUNDIR_READABLE;
}

enum doctor_code doctor_dir_verdict(const struct stat *st, unsigned euid, int group, unsigned gid,
				    int member, char *why, size_t whylen)
{
	unsigned mode = (unsigned)(st->st_mode & 07777);
	why[0] = '\0';
	if (!S_ISDIR(st->st_mode)) {
		snprintf(why, whylen, "not a directory");
		return DOC_RUNDIR_MISSING;
	}
	if (mode & 002) {
		snprintf(why, whylen, "writable by others (mode %04o)", mode);
		return DOC_RUNDIR_WORLD_WRITABLE;
	}
	if (!group) {
		/* The library's own rule first, then what it lets through. */
		/* (shared = 1: group-writable is told apart just below.) */
		if (!shunt_rundir_acceptable(st, euid, 1)) {
			snprintf(why, whylen, "owned by uid %u, not by uid %u", (unsigned)st->st_uid,
				 euid);
			return DOC_RUNDIR_OWNER;
		}
		if (mode & 020) {
			snprintf(why, whylen,
				 "group-writable (mode %04o) without shm_group: the members of group %u "
				 "can plant offers and registry entries",
				 mode, (unsigned)st->st_gid);
			return DOC_RUNDIR_GROUP_WRITABLE;
		}
		if (mode & 077)
			return open_to(st, 0, why, whylen);
		return DOC_RUNDIR_PERM;
	}
	/* shm_group: the library makes a directory of its own the group's,
	 * 2770, and takes one another member made only when it is so
	 * (core/shunt_rundir.c). */
	if (st->st_uid == euid) {
		if (st->st_gid != gid && !member) {
			snprintf(why, whylen, "group %u, and this user cannot give it group %u",
				 (unsigned)st->st_gid, gid);
			return DOC_GROUP_MEMBER;
		}
		if (st->st_gid != gid || mode != 02770)
			snprintf(why, whylen, "the library makes it group %u's, mode 2770, at first use",
				 gid);
		return DOC_RUNDIR_PERM;
	}
	if (st->st_gid != gid) {
		snprintf(why, whylen, "owned by uid %u and group %u, not shm_group %u",
			 (unsigned)st->st_uid, (unsigned)st->st_gid, gid);
		return DOC_RUNDIR_GROUP;
	}
	if ((mode & 02070) != 02070) {
		snprintf(why, whylen, "mode %04o: not setgid with group rwx (2770)", mode);
		return DOC_RUNDIR_GROUP;
	}
	if (mode & 007)
		return open_to(st, 1, why, whylen);
	return DOC_RUNDIR_PERM;
}

int doctor_parent_unsafe(const struct stat *st, unsigned euid)
{
	if (st->st_uid != 0 && st->st_uid != euid)
		return 1;
	return (st->st_mode & 022) && !(st->st_mode & S_ISVTX);
}

unsigned doctor_combine(unsigned why, unsigned r)
{
	if (r == SHUNT_R_NONE || why == SHUNT_R_NO_TRANSPORT || why == SHUNT_R_NO_PEER_SHIM)
		return r;
	return why;
}

/* The line at p (up to end) and where the next one starts. */
static const char *line_end(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl : end;
}

int doctor_http_parse(const char *buf, size_t len, const char **body, size_t *blen)
{
	const char *end = buf + len;
	const char *head_end = NULL;
	for (const char *p = buf; p + 4 <= end; p++)
		if (!memcmp(p, "\r\n\r\n", 4)) {
			head_end = p;
			break;
		}
	if (!head_end || len < 12 || memcmp(buf, "HTTP/1.", 7) || buf[8] != ' ')
		return -1;
	int status = 0;
	for (int i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		status = status * 10 + (buf[i] - '0');
	}
	if (status < 100 || (len > 12 && buf + 12 < head_end && buf[12] != ' ' && buf[12] != '\r'))
		return -1;
	const char *b = head_end + 4;
	size_t n = (size_t)(end - b);
	/* Content-Length, when there is one, bounds the body. */
	for (const char *p = line_end(buf, head_end); p < head_end; p = line_end(p, head_end)) {
		p++; /* past '\n' */
		static const char cl[] = "content-length:";
		if ((size_t)(head_end - p) > sizeof(cl) - 1 && !strncasecmp(p, cl, sizeof(cl) - 1)) {
			const char *q = p + sizeof(cl) - 1;
			while (q < head_end && *q == ' ')
				q++;
			size_t v = 0;
			int digits = 0;
			for (; q < head_end && *q >= '0' && *q <= '9' && digits < 12; q++, digits++)
				v = v * 10 + (size_t)(*q - '0');
			if (digits && v < n)
				n = v;
		}
	}
	*body = b;
	*blen = n;
	return status;
}

int doctor_metrics_version(const char *body, size_t len, char *out, size_t outlen)
{
	static const char key[] = "shuntd_build_info{version=\"";
	const char *end = body + len;
	for (const char *p = body, *eol; p < end; p = eol < end ? eol + 1 : end) {
		eol = line_end(p, end);
		if ((size_t)(eol - p) <= sizeof(key) - 1 || memcmp(p, key, sizeof(key) - 1))
			continue;
		const char *v = p + sizeof(key) - 1, *q = v;
		while (q < eol && *q != '"' && *q > ' ' && *q < 0x7f && q - v < 31)
			q++;
		size_t n = (size_t)(q - v);
		if (q >= eol || *q != '"' || n == 0 || n >= outlen)
			return -1;
		memcpy(out, v, n);
		out[n] = '\0';
		return 0;
	}
	return -1;
}
