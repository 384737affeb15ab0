/* shunt doctor's report: the findings as lines or as one JSON object, and
 * the exit status they make. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <shunt/version.h>

#include "shunt_doctor.h"
#include "shunt_outfmt.h"

static const struct {
	const char *name;
	enum doctor_level level;
	const char *fix;
} table[DOC_COUNT] = {
#define DOCTOR_CODE_ROW(id, code, lvl, fixtext) [DOC_##id] = {code, DOC_##lvl, fixtext},
	SHUNT_DOCTOR_FINDINGS(DOCTOR_CODE_ROW)
#undef DOCTOR_CODE_ROW
};

const char *doctor_code_name(enum doctor_code c)
{
	return table[c].name;
}

enum doctor_level doctor_code_level(enum doctor_code c)
{
	return table[c].level;
}

const char *doctor_code_fix(enum doctor_code c)
{
	return table[c].fix;
}

const char *doctor_level_name(enum doctor_level l)
{
	return l == DOC_OK ? "OK" : l == DOC_WARN ? "WARN" : "FAIL";
}

void doctor_add(struct doctor *d, enum doctor_code code, const char *fmt, ...)
{
	if (d->nfindings == DOCTOR_FINDINGS_MAX)
		return; /* (more than the checks can make) */
	struct doctor_finding *f = &d->findings[d->nfindings++];
	f->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
}

static void json_finding(const struct doctor_finding *f, int first)
{
	printf("%s{\"level\":\"%s\",\"code\":", first ? "" : ",",
	       doctor_level_name(doctor_code_level(f->code)));
	json_str(stdout, doctor_code_name(f->code));
	printf(",\"message\":");
	json_str(stdout, f->msg);
	printf(",\"fix\":");
	json_str(stdout, doctor_code_fix(f->code));
	printf("}");
}

int doctor_report(const struct doctor *d)
{
	unsigned n[3] = {0, 0, 0};
	for (int i = 0; i < d->nfindings; i++)
		n[doctor_code_level(d->findings[i].code)]++;
	const char *status = n[DOC_FAIL] ? "FAIL" : n[DOC_WARN] ? "WARN" : "OK";
	if (d->json) {
		printf("{\"version\":\"%s\",\"uid\":%u,\"connections\":%lu,\"rundir\":", SHUNT_VERSION,
		       d->euid, d->connections);
		json_str(stdout, d->rundir);
		printf(",\"status\":\"%s\",\"counts\":{\"ok\":%u,\"warn\":%u,\"fail\":%u},\"findings\":[",
		       status, n[DOC_OK], n[DOC_WARN], n[DOC_FAIL]);
		for (int i = 0; i < d->nfindings; i++)
			json_finding(&d->findings[i], i == 0);
		printf("],\"to\":");
		if (d->to_dest[0]) {
			printf("{\"destination\":");
			json_str(stdout, d->to_dest);
			printf(",\"transport\":");
			json_str(stdout, d->to_transport);
			printf(",\"reason\":");
			json_str(stdout, d->to_reason);
			printf(",\"log\":");
			json_str(stdout, d->to_log);
			printf("}");
		} else {
			printf("null");
		}
		printf("}\n");
	} else {
		for (int i = 0; i < d->nfindings; i++) {
			const struct doctor_finding *f = &d->findings[i];
			enum doctor_level l = doctor_code_level(f->code);
			printf("%-4s %s: %s", doctor_level_name(l), doctor_code_name(f->code), f->msg);
			if (l != DOC_OK)
				printf("; fix: %s", doctor_code_fix(f->code));
			printf("\n");
		}
		if (d->to_dest[0])
			printf("to %s: transport=%s reason=%s\n  as shunt run --log debug would log it: %s\n",
			       d->to_dest, d->to_transport, d->to_reason[0] ? d->to_reason : "-",
			       d->to_log);
		printf("shunt doctor: %s (%u FAIL, %u WARN, %u OK)\n", status, n[DOC_FAIL], n[DOC_WARN],
		       n[DOC_OK]);
	}
	return n[DOC_FAIL] ? 1 : 0;
}
