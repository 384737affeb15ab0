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
	printf("# sockmap: attached: connections=%llu sockets=%llu redirected sends=%llu "
	       "bytes=%llu, to tcp sends=%llu; kept off: shim=%llu rule-kernel=%llu remote=%llu "
	       "refused=%llu\n",
	       (unsigned long long)c[SHUNT_SM_CONNS], (unsigned long long)c[SHUNT_SM_SOCKS_ADDED],
	       (unsigned long long)c[SHUNT_SM_MSGS], (unsigned long long)c[SHUNT_SM_BYTES],
	       (unsigned long long)c[SHUNT_SM_MISSES], (unsigned long long)c[SHUNT_SM_SKIP_SHIM],
	       (unsigned long long)c[SHUNT_SM_SKIP_RULE], (unsigned long long)c[SHUNT_SM_SKIP_REMOTE],
	       (unsigned long long)c[SHUNT_SM_ADD_FAILED]);
}

void stat_sockmap_json(void)
{
	uint64_t c[SHUNT_SM_NCOUNTERS];
	int readable = 0;
	if (!read_counters(c, &readable))
		return;
	if (!readable) {
		printf(",\"sockmap\":{\"attached\":true}");
		return;
	}
	printf(",\"sockmap\":{\"attached\":true,\"connections\":%llu,\"sockets\":%llu,"
	       "\"redirected_sends\":%llu,\"redirected_bytes\":%llu,\"tcp_sends\":%llu,"
	       "\"kept_off\":{\"shim\":%llu,\"rule-kernel\":%llu,\"remote\":%llu,\"refused\":%llu}}",
	       (unsigned long long)c[SHUNT_SM_CONNS], (unsigned long long)c[SHUNT_SM_SOCKS_ADDED],
	       (unsigned long long)c[SHUNT_SM_MSGS], (unsigned long long)c[SHUNT_SM_BYTES],
	       (unsigned long long)c[SHUNT_SM_MISSES], (unsigned long long)c[SHUNT_SM_SKIP_SHIM],
	       (unsigned long long)c[SHUNT_SM_SKIP_RULE], (unsigned long long)c[SHUNT_SM_SKIP_REMOTE],
	       (unsigned long long)c[SHUNT_SM_ADD_FAILED]);
}
