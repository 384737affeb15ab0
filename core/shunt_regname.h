/* Names of the listener registry's entries, <rundir>/l/<name>: the one
 * place that writes and reads them (the library registers and looks up,
 * `shunt stat -l` and `shunt ab` read).  Pure: no I/O, no state.
 *
 *   n<netns inode>-<32 hex>-<port>   a loopback address, per namespace
 *   n<netns inode>-any-<port>        a wildcard listener, per namespace
 *   g-<32 hex>-<port>                any other address, host-wide
 *
 * The address is 16 bytes, IPv4 as IPv4-mapped IPv6 (shunt_addr16). */
#ifndef SHUNT_REGNAME_H
#define SHUNT_REGNAME_H

#include <stddef.h>
#include <stdint.h>

#define SHUNT_REGNAME_MAX 80

struct shunt_regname {
	int host_wide;          /* a "g-" name */
	unsigned long netns;    /* the namespace of an "n" name */
	int any;                /* the wildcard address (addr is zero) */
	uint8_t addr[16];
	unsigned port;
};

/* The entry name of a listener on a:port in namespace netns. */
void shunt_regname_format(char *buf, size_t len, unsigned long netns, const uint8_t a[16],
			unsigned port);

/* 0 with *out filled when name is an entry name, else -1 (temporary and
 * foreign files in l/ are not). */
int shunt_regname_parse(const char *name, struct shunt_regname *out);

#endif
