/* shunt stat: the sockmap path's counters (shuntd --sockmap), read from
 * the map shuntd pins under sockmap_pin.  Nothing is printed when no
 * shuntd runs it. */
#include <linux/bpf.h>
#include <stdio.h>
#include <unistd.h>

#include "config/shunt_config.h"
#include "core/shunt_sockmap.h"
#include "shunt_stat_sockmap.h"

/* 1 with the counters when the path is attached and they can be read. */
static int read_counters(uint64_t c[SHUNT_SM_NCOUNTERS], int *readable)
{
	static struct shunt_config cfg;
	static int loaded;
	char err[SHUNT_ERR_MAX];
	if (!loaded) {
		if (shunt_config_load(&cfg, NULL, err, sizeof err) < 0)
			shunt_config_defaults(&cfg);
		loaded = 1;
	}
	if (shunt_sm_attached(cfg.sockmap_pin) <= 0)
		return 0;
	int fd = shunt_sm_obj_get(cfg.sockmap_pin, SHUNT_SM_PIN_COUNTERS, BPF_F_RDONLY);
	*readable = fd >= 0 && shunt_sm_counters_read(fd, c) == 0;
	if (fd >= 0)
		close(fd);
	return 1;
}

/* Each counter as the text (after sep) and the JSON name it; kept: one
 * of the ends the path left alone (grouped under "kept_off"). */
static const struct {
	int idx, kept;
	const char *sep, *text, *json;
} rows[] = {
	{SHUNT_SM_CONNS, 0, " ", "connections", "connections"},
	{SHUNT_SM_SOCKS_ADDED, 0, " ", "sockets", "sockets"},
	{SHUNT_SM_MSGS, 0, " ", "redirected sends", "redirected_sends"},
	{SHUNT_SM_BYTES, 0, " ", "bytes", "redirected_bytes"},
	{SHUNT_SM_MISSES, 0, ", ", "to tcp sends", "tcp_sends"},
	{SHUNT_SM_SKIP_SHIM, 1, "; kept off: ", "shim", "shim"},
	{SHUNT_SM_SKIP_RULE, 1, " ", "rule-kernel", "rule-kernel"},
	{SHUNT_SM_SKIP_REMOTE, 1, " ", "remote", "remote"},
	{SHUNT_SM_ADD_FAILED, 1, " ", "refused", "refused"},
};
#define NROWS (sizeof rows / sizeof rows[0])

void stat_sockmap_text(void)
{
	uint64_t c[SHUNT_SM_NCOUNTERS];
	int readable = 0;
	if (!read_counters(c, &readable))
		return;
	if (!readable) {
		printf("# sockmap: attached (its counters are root's to read)\n");
		return;
	}
	printf("# sockmap: attached:");
	for (size_t i = 0; i < NROWS; i++)
		printf("%s%s=%llu", rows[i].sep, rows[i].text, (unsigned long long)c[rows[i].idx]);
	printf("\n");
}

void stat_sockmap_json(void)
{
	uint64_t c[SHUNT_SM_NCOUNTERS];
	int readable = 0;
	if (!read_counters(c, &readable))
		return;
	printf(",\"sockmap\":{\"attached\":true");
	for (size_t i = 0; readable && i < NROWS; i++)
		printf("%s\"%s\":%llu",
		       rows[i].kept && (!i || !rows[i - 1].kept) ? ",\"kept_off\":{" : ",",
		       rows[i].json, (unsigned long long)c[rows[i].idx]);
	printf(readable && rows[NROWS - 1].kept ? "}}" : "}");
}
