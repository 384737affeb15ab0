/* shunt doctor: the parts of the command (shunt_doctor*.c) and what they
 * share.  Each check adds findings (one line: a code of
 * shunt_doctor_codes.h, its level, a message) to the one report. */
#ifndef SHUNT_DOCTOR_H
#define SHUNT_DOCTOR_H

#include <limits.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "agent/agent_proto.h"
#include "config/shunt_config.h"
#include "config/shunt_rundir_path.h"
#include "shunt_doctor_codes.h"

#define DOCTOR_MSG_MAX 1024
#define DOCTOR_FINDINGS_MAX 64

struct doctor_finding {
	enum doctor_code code;
	char msg[DOCTOR_MSG_MAX];
};

/* What the libfabric probe found (shunt_doctor_fabric.c). */
struct doctor_fabric {
	int loaded;              /* libfabric.so.1 loaded and its symbols found */
	char error[256];         /* why not */
	char version[16];        /* "1.20" */
	unsigned ms;             /* how long loading and asking took */
	char providers[512];     /* providers of FI_EP_MSG endpoints, ", "-separated */
	int route;               /* verbs reaches the destination asked about */
	int ndev;                /* RDMA devices (uverbs) */
	char devices[256];       /* their names */
};

struct doctor {
	/* options */
	unsigned long connections;
	int json;
	const char *to;          /* --to HOST:PORT */
	const char *program;     /* --program NAME: rules' program glob */
	int selftest;            /* --fabric-selftest[=PROVIDER] */
	const char *selftest_prov;
	const char *selftest_addr; /* --selftest-address ADDR */
	/* the configuration, loaded as shunt run loads it */
	struct shunt_config cfg;
	char config_file[PATH_MAX + 16];
	unsigned euid;
	gid_t egid;
	int group_on;            /* shm_group names a group this host knows */
	gid_t group_gid;
	int secret_len;          /* agent secret: 0 none, -1 unusable */
	char secret[AGENT_SECRET_MAX + 1];
	/* found by the rundir check */
	char rundir[SHUNT_RUNDIR_MAX + 1]; /* the rundir the library would use ("" none) */
	int rundir_ok;           /* usable by the library */
	/* found by the fabric check */
	struct doctor_fabric fab;
	/* the report */
	int nfindings;
	struct doctor_finding findings[DOCTOR_FINDINGS_MAX];
	/* --to's outcome, for the report */
	char to_dest[128];
	char to_transport[16];
	char to_reason[32];
	char to_log[512];
};

/* Add a finding to the report (shunt_doctor_report.c). */
__attribute__((format(printf, 3, 4)))
void doctor_add(struct doctor *d, enum doctor_code code, const char *fmt, ...);

/* The report, as text lines or one JSON object, on stdout; the exit
 * status it makes: 1 when a finding is a FAIL, else 0. */
int doctor_report(const struct doctor *d);

/* A code's name, level and fix as the table has them. */
const char *doctor_code_name(enum doctor_code c);
enum doctor_level doctor_code_level(enum doctor_code c);
const char *doctor_code_fix(enum doctor_code c);
const char *doctor_level_name(enum doctor_level l);

/* The checks, in the order they run: each adds its findings. */
void doctor_config(struct doctor *d);   /* shunt_doctor.c */
void doctor_rundir(struct doctor *d);   /* shunt_doctor_rundir.c; sets rundir */
void doctor_agent(struct doctor *d);    /* shunt_doctor_agent.c */
void doctor_sockmap(struct doctor *d);  /* shunt_doctor_sockmap.c */
/* shunt_doctor_fabric.c: sets fab; with --to's destination (NULL: none),
 * whether auto's verbs reaches it. */
void doctor_fabric(struct doctor *d, const struct sockaddr *dst, socklen_t len);
/* shunt_doctor_selftest.c: the fabric self-test on provider prov (NULL:
 * verbs where there is an RDMA device) between endpoints on addr (NULL:
 * the device's address, or 127.0.0.1 for a named provider). */
void doctor_fabric_selftest(struct doctor *d, const char *prov, const char *addr);
/* 1 with why when the fabric transport cannot run on provider prov
 * (shunt-fabtest check: FI_EP_RDM only, attributes, known behaviour); 0
 * when it can or when that cannot be asked. */
int doctor_fabric_unfit(const char *prov, char *why, size_t len);
/* shunt_doctor_to.c: which transport a connection to dst would take. */
void doctor_to(struct doctor *d, const struct sockaddr *dst, socklen_t len);

/* Probe libfabric in a child process (its providers' start-up stays out
 * of this one): into *f; with dst and an RDMA device, whether the verbs
 * provider reaches dst. */
void doctor_fabric_probe(struct doctor_fabric *f, const struct sockaddr *dst, socklen_t len);

/* 1 when the probe found libfabric offering provider prov. */
int doctor_fabric_offers(const struct doctor_fabric *f, const char *prov);

#endif
