// SPDX-License-Identifier: GPL-2.0
/* The sockmap path: loaded and attached by shuntd --sockmap
 * (agent/shuntd_sockmap.c).
 *
 * shunt_sockops, on a cgroup: a TCP connection of this host whose two ends
 * are here (loopback, or one address at both ends) enters the sockhash
 * `socks`, keyed by its 4-tuple as this end sees it, when it becomes
 * established, unless the shim marked it (`skip_cookie`: the client
 * socket's cookie, put there before its connect, for connections it offers
 * to shm) or a rule sends it to the kernel.
 *
 * shunt_sk_msg, on `socks`: each send of a socket in it goes straight into
 * the peer socket's receive queue when the peer is in it too; otherwise TCP
 * carries it as before.  The verdict is always SK_PASS: a send is never
 * dropped by this program.
 *
 * Only UAPI context fields are read (the verifier rewrites them), so no
 * vmlinux.h and no relocations are needed. */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "core/shunt_sockmap_abi.h"

#define AF_INET 2
#define AF_INET6 10

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, SHUNT_SM_MAX_SOCKS);
	__type(key, struct shunt_sm_key);
	__type(value, __u64);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SHUNT_SM_MAX_SKIP);
	__type(key, struct shunt_sm_key);
	__type(value, __u8);
} skip SEC(".maps");

/* Client ends entered, by tuple, until their server end comes. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SHUNT_SM_MAX_SKIP);
	__type(key, struct shunt_sm_key);
	__type(value, __u8);
} entered SEC(".maps");

/* The shim's mark: the cookie of a client socket it offers to shm, put
 * there before its connect (the 4-tuple may not be known yet).  The
 * client's end moves it into `skip` under the tuple, for the server's. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SHUNT_SM_MAX_SKIP);
	__type(key, __u64);
	__type(value, __u8);
} skip_cookie SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHUNT_SM_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Set by shuntd before loading: the configuration's rules and default. */
const volatile struct shunt_sm_rule rules[SHUNT_SM_MAX_RULES];
const volatile __u32 nrules;
const volatile __u8 default_kernel;

static __always_inline void count(__u32 i, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &i);
	if (v)
		*v += n;
}

static __always_inline int is_v4mapped(const __u32 *ip)
{
	return ip[0] == 0 && ip[1] == 0 && ip[2] == bpf_htonl(0xffff);
}

/* Both the sock_ops and the sk_msg contexts carry the same fields. */
#define FILL_KEY(k, ctx)                                                          \
	do {                                                                      \
		__builtin_memset(&(k), 0, sizeof(k));                             \
		(k).lport = (ctx)->local_port;                                    \
		(k).rport = bpf_ntohl((ctx)->remote_port);                        \
		if ((ctx)->family == AF_INET) {                                   \
			(k).family = AF_INET;                                     \
			(k).lip[0] = (ctx)->local_ip4;                            \
			(k).rip[0] = (ctx)->remote_ip4;                           \
		} else {                                                          \
			__u32 l0 = (ctx)->local_ip6[0], l1 = (ctx)->local_ip6[1]; \
			__u32 l2 = (ctx)->local_ip6[2], l3 = (ctx)->local_ip6[3]; \
			__u32 r0 = (ctx)->remote_ip6[0], r1 = (ctx)->remote_ip6[1]; \
			__u32 r2 = (ctx)->remote_ip6[2], r3 = (ctx)->remote_ip6[3]; \
			__u32 l[4] = {l0, l1, l2, l3}, r[4] = {r0, r1, r2, r3};   \
			if (is_v4mapped(l) && is_v4mapped(r)) {                   \
				(k).family = AF_INET;                             \
				(k).lip[0] = l3;                                  \
				(k).rip[0] = r3;                                  \
			} else {                                                  \
				(k).family = AF_INET6;                            \
				(k).lip[0] = l0; (k).lip[1] = l1;                 \
				(k).lip[2] = l2; (k).lip[3] = l3;                 \
				(k).rip[0] = r0; (k).rip[1] = r1;                 \
				(k).rip[2] = r2; (k).rip[3] = r3;                 \
			}                                                         \
		}                                                                 \
	} while (0)

static __always_inline void peer_of(struct shunt_sm_key *p, const struct shunt_sm_key *k)
{
	p->family = k->family;
	p->lport = k->rport;
	p->rport = k->lport;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		p->lip[i] = k->rip[i];
		p->rip[i] = k->lip[i];
	}
}

/* Both ends on this host: loopback, or the same address at both ends. */
static __always_inline int is_local(const struct shunt_sm_key *k)
{
	if (k->family == AF_INET)
		return (bpf_ntohl(k->rip[0]) >> 24) == 127 || k->rip[0] == k->lip[0];
	if (k->rip[0] == 0 && k->rip[1] == 0 && k->rip[2] == 0 && k->rip[3] == bpf_htonl(1))
		return 1;
	return k->rip[0] == k->lip[0] && k->rip[1] == k->lip[1] && k->rip[2] == k->lip[2] &&
	       k->rip[3] == k->lip[3];
}

static __always_inline int prefix_match(const volatile unsigned char *net, const __u32 *ip,
					unsigned prefix)
{
	const unsigned char *a = (const unsigned char *)ip;
	for (unsigned i = 0; i < 16; i++) {
		if (prefix == 0)
			return 1;
		unsigned char mask = prefix >= 8 ? 0xff : (unsigned char)(0xff << (8 - prefix));
		if ((a[i] ^ net[i]) & mask)
			return 0;
		prefix = prefix >= 8 ? prefix - 8 : 0;
	}
	return 1;
}

/* 1 when the rules send this end to the kernel (the peer's address, as the
 * shim's rules see it: the server's for a client, the client's for a
 * server). */
static __always_inline int rule_kernel(const struct shunt_sm_key *k, int client)
{
	__u32 n = nrules;
	for (__u32 i = 0; i < SHUNT_SM_MAX_RULES; i++) {
		if (i >= n)
			break;
		const volatile struct shunt_sm_rule *r = &rules[i];
		if (r->role && r->role != (client ? 1 : 2))
			continue;
		if (r->family && r->family != k->family)
			continue;
		if (r->family && !prefix_match(r->addr, k->rip, r->prefix))
			continue;
		if (k->rport < r->port_lo || k->rport > r->port_hi)
			continue;
		return r->kernel;
	}
	return default_kernel;
}

SEC("sockops")
int shunt_sockops(struct bpf_sock_ops *skops)
{
	int client;
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		client = 1;
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		client = 0;
		break;
	default:
		return 1;
	}
	if (skops->family != AF_INET && skops->family != AF_INET6)
		return 1;
	struct shunt_sm_key k, p;
	FILL_KEY(k, skops);
	peer_of(&p, &k);
	if (!is_local(&k)) {
		count(SHUNT_SM_SKIP_REMOTE, 1);
		return 1;
	}
	/* The client's end is established first (the server's waits for
	 * the ACK it sends then): it finds the shim's mark by its cookie and
	 * leaves one under the tuple for the server's. */
	if (client) {
		__u64 cookie = bpf_get_socket_cookie(skops);
		if (bpf_map_lookup_elem(&skip_cookie, &cookie)) {
			__u8 one = 1;
			bpf_map_delete_elem(&skip_cookie, &cookie);
			bpf_map_update_elem(&skip, &k, &one, BPF_ANY);
			count(SHUNT_SM_SKIP_SHIM, 1);
			return 1;
		}
	} else if (bpf_map_lookup_elem(&skip, &p)) {
		bpf_map_delete_elem(&skip, &p);
		count(SHUNT_SM_SKIP_SHIM, 1);
		return 1;
	}
	if (rule_kernel(&k, client)) {
		count(SHUNT_SM_SKIP_RULE, 1);
		return 1;
	}
	if (bpf_sock_hash_update(skops, &socks, &k, BPF_NOEXIST)) {
		count(SHUNT_SM_ADD_FAILED, 1);
		return 1;
	}
	count(SHUNT_SM_SOCKS_ADDED, 1);
	/* The server's end comes second: when the client's is in too, the
	 * connection is whole. */
	if (client) {
		__u8 one = 1;
		bpf_map_update_elem(&entered, &k, &one, BPF_ANY);
	} else if (bpf_map_lookup_elem(&entered, &p)) {
		bpf_map_delete_elem(&entered, &p);
		count(SHUNT_SM_CONNS, 1);
	}
	return 1;
}

SEC("sk_msg")
int shunt_sk_msg(struct sk_msg_md *msg)
{
	struct shunt_sm_key k, p;
	FILL_KEY(k, msg);
	peer_of(&p, &k);
	__u32 size = msg->size;
	if (bpf_msg_redirect_hash(msg, &socks, &p, BPF_F_INGRESS) == SK_PASS) {
		count(SHUNT_SM_MSGS, 1);
		count(SHUNT_SM_BYTES, size);
	} else {
		count(SHUNT_SM_MISSES, 1);
	}
	return SK_PASS;
}
