/* What the sockmap programs (bpf/shunt_sockmap.bpf.c), shuntd, the shim and
 * the shunt tool share: the pinned objects' names, the map keys, the
 * counters.  Plain C types only: this header is compiled for the BPF target
 * too. */
#ifndef SHUNT_SOCKMAP_ABI_H
#define SHUNT_SOCKMAP_ABI_H

/* shuntd pins these under sockmap_pin (a directory in a bpffs). */
#define SHUNT_SM_PIN_DEFAULT "/sys/fs/bpf/shunt"
#define SHUNT_SM_PIN_LINK "sockops_link"  /* the sockops program on the cgroup */
#define SHUNT_SM_PIN_SOCKS "socks"        /* the sockhash (sk_msg attached) */
#define SHUNT_SM_PIN_SKIP "skip_cookie"   /* sockets the shim keeps off it */
#define SHUNT_SM_PIN_COUNTERS "counters"  /* per-CPU counters */
#define SHUNT_SM_PIN_CGROUP "cgroup"      /* a file: the cgroup attached to */

#define SHUNT_SM_MAX_SOCKS 65536
#define SHUNT_SM_MAX_SKIP 16384
#define SHUNT_SM_MAX_RULES 64

/* One end's view of a TCP connection.  IPv4 (and IPv4-mapped IPv6) as
 * family 2 with the address in ip[0]; IPv6 as family 10.  Addresses in
 * network order, ports in host order. */
struct shunt_sm_key {
	unsigned int family;
	unsigned int lport, rport;
	unsigned int lip[4], rip[4];
};

/* Counters, summed over CPUs by readers. */
enum shunt_sm_counter {
	SHUNT_SM_SOCKS_ADDED,     /* sockets entered into the sockhash */
	SHUNT_SM_CONNS,           /* connections whose two ends are in it */
	SHUNT_SM_MSGS,            /* sends redirected to the peer */
	SHUNT_SM_BYTES,           /* bytes redirected */
	SHUNT_SM_MISSES,          /* sends left to TCP: peer not in the sockhash */
	SHUNT_SM_SKIP_SHIM,       /* ends kept out: the shim's (shm) */
	SHUNT_SM_SKIP_RULE,       /* ends kept out by a rule (kernel) */
	SHUNT_SM_SKIP_REMOTE,     /* ends kept out: the peer is not on this host */
	SHUNT_SM_ADD_FAILED,      /* the sockhash refused a socket (full; in another sockmap) */
	SHUNT_SM_NCOUNTERS
};

/* A configuration rule as the sockops program applies it (first match
 * wins).  transport: 0 allowed (auto, shm, fabric), 1 kernel; role: 0 any,
 * 1 client (active open), 2 server (passive); family 0 any. */
struct shunt_sm_rule {
	unsigned char kernel, role, family, prefix;
	unsigned char addr[16];
	unsigned short port_lo, port_hi;
};

#endif
