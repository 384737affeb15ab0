// SPDX-License-Identifier: GPL-2.0
/* The least a sockmap path can do, for bench/sockmap_floor.sh to compare
 * shunt's with: a sockops program puts every established IPv4 connection
 * of its cgroup into a sockhash keyed by 4-tuple, and an sk_msg program
 * redirects each send to the peer socket's ingress.  No locality check, no
 * shim marks, no rules, no counters: not for use, only a floor. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

struct key {
	__u32 lip, rip, lport, rport;
};

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536);
	__type(key, struct key);
	__type(value, __u64);
} socks SEC(".maps");

SEC("sockops")
int floor_sockops(struct bpf_sock_ops *s)
{
	if (s->family != 2 || (s->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB &&
			       s->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB))
		return 1;
	struct key k = {s->local_ip4, s->remote_ip4, s->local_port, bpf_ntohl(s->remote_port)};
	bpf_sock_hash_update(s, &socks, &k, BPF_NOEXIST);
	return 1;
}

SEC("sk_msg")
int floor_sk_msg(struct sk_msg_md *m)
{
	if (m->family != 2)
		return SK_PASS;
	struct key p = {m->remote_ip4, m->local_ip4, bpf_ntohl(m->remote_port), m->local_port};
	bpf_msg_redirect_hash(m, &socks, &p, BPF_F_INGRESS);
	return SK_PASS;
}
