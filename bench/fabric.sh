#!/usr/bin/env bash
# Cross-host acceleration over libfabric, measured side by side in one run
# across a veth pair between two network namespaces (198.18.0.1/24 and
# 198.18.0.2/24, benchmarking range): kernel TCP, TCP under shunt with the
# fabric transport (fabric_provider, default tcp; each "host" with its own
# rundir and shuntd), and libfabric's own fi_pingpong over the same provider
# (FI_EP_MSG) as the provider's limit.  Rounds alternate; medians and ratios
# are printed.  Needs root (ip netns) and libfabric-bin.
#
#   bench/fabric.sh [--build-dir DIR] [--rounds N] [--quick] [--provider P]
#
# Rows: ping-pong round trip p50 at 64 B and 4 KiB, 64 KiB stream (Gbit/s),
# and connection setup (connect + one round trip + close; shunt's includes
# the agent exchange and the connect-back): p50 of a process's later
# connections (agent link open, libfabric up), of the first connection of a
# fresh process (nothing cached: libfabric loaded and started, agent link
# opened), and the wall time of that whole process (exec to exit, through
# ip netns exec; what a short-lived client pays).  fi_pingpong reports the
# time per transfer (half a round trip): the row shows twice that.
# On RDMA hardware run it between two real hosts instead (docs/ARCHITECTURE.md,
# "Fabric: benchmarks"), with --provider verbs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build rounds=3 quick=0 prov=tcp
while [[ $# -gt 0 ]]; do
	case $1 in
	--build-dir) build=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--quick) quick=1; rounds=1; shift ;;
	--provider) prov=$2; shift 2 ;;
	*) echo "usage: $0 [--build-dir DIR] [--rounds N] [--quick] [--provider P]" >&2; exit 2 ;;
	esac
done
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
command -v fi_pingpong >/dev/null || { echo "needs fi_pingpong (libfabric-bin)" >&2; exit 1; }
build=$(cd "$build" && pwd)
lib=$build/preload/libshunt.so tcpb=$build/bench/shunt-tcpbench shuntd=$build/tools/shuntd
for f in "$lib" "$tcpb" "$shuntd"; do [[ -e $f ]] || { echo "missing $f (build first)" >&2; exit 1; }; done
iters=$((quick ? 5000 : 20000)) dur=$((quick ? 1 : 3)) conns=$((quick ? 100 : 300))
fresh=$((quick ? 5 : 10)) # fresh processes per round, one connection each

A=shunt-bench-$$-a B=shunt-bench-$$-b VA=sbv$$a VB=sbv$$b
ADDR_A=198.18.0.1 ADDR_B=198.18.0.2
tmp=$(mktemp -d)
# Rundirs on tmpfs, as deployed (/run/shunt, /dev/shm/shunt-UID): offers
# are files there.
shmdir=$(mktemp -d /dev/shm/shunt-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$A" 2>/dev/null || true
	ip netns del "$B" 2>/dev/null || true
	rm -rf "$tmp" "$shmdir"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add "$ADDR_A/24" dev "$VA"
ip -n "$B" addr add "$ADDR_B/24" dev "$VB"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
for h in a b; do
	mkdir -m 700 "$shmdir/run-$h"
	# What is measured is the fabric path: a process's first connection
	# waits for libfabric's start-up rather than go by TCP meanwhile.
	printf 'rundir = %s\nfabric_provider = %s\nfabric_load_wait_ms = 30000\n' "$shmdir/run-$h" "$prov" >"$tmp/$h.conf"
done
ip netns exec "$A" "$shuntd" --config "$tmp/a.conf" 2>"$tmp/shuntd-a.log" &
pids+=($!)
ip netns exec "$B" "$shuntd" --config "$tmp/b.conf" 2>"$tmp/shuntd-b.log" &
pids+=($!)

# on NS MODE CMD...: run in namespace NS, plainly or under shunt (fabric).
on() {
	local ns=$1 mode=$2 conf
	shift 2
	[[ $ns == "$A" ]] && conf=$tmp/a.conf || conf=$tmp/b.conf
	# exec: a server started as `on ... &` is then the pid that gets killed
	# (not a subshell whose child would outlive the run).
	if [[ $mode == fabric ]]; then
		exec ip netns exec "$ns" env SHUNT_CONFIG="$conf" SHUNT_LOG=debug \
			SHUNT_LOG_FILE="$tmp/log-%p" LD_PRELOAD="$lib" "$@"
	else
		exec ip netns exec "$ns" "$@"
	fi
}
wait_listen() {
	for _ in $(seq 1 500); do
		ip netns exec "$B" ss -ltn "sport = :$1" | grep -q LISTEN && return 0
		sleep 0.01
	done
	echo "server on $1 did not start" >&2
	return 1
}
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
declare -A R # R[metric,mode] = "v1 v2 ..."
add() { R[$1,$2]="${R[$1,$2]:-} $3"; }
port=7400

tcp_round() {
	local mode=$1 out
	port=$((port + 1))
	on "$B" "$mode" "$tcpb" server --port "$port" --bind "$ADDR_B" >/dev/null 2>&1 &
	pids+=($!)
	wait_listen "$port"
	for s in 64 4096; do
		out=$(on "$A" "$mode" "$tcpb" client --host "$ADDR_B" --port "$port" --mode pingpong \
			--size "$s" --iters "$iters" --warmup 1000)
		add "pp$s" "$mode" "$(field p50_us <<<"$out")"
	done
	out=$(on "$A" "$mode" "$tcpb" client --host "$ADDR_B" --port "$port" --mode stream \
		--size 65536 --duration "$dur")
	add stream "$mode" "$(field gbps <<<"$out")"
	out=$(on "$A" "$mode" "$tcpb" client --host "$ADDR_B" --port "$port" --mode connect \
		--iters "$conns")
	add connect "$mode" "$(field p50_us <<<"$out")"
	local t0 t1
	for ((i = 0; i < fresh; i++)); do
		t0=$(date +%s%N)
		out=$(on "$A" "$mode" "$tcpb" client --host "$ADDR_B" --port "$port" --mode connect \
			--iters 1)
		t1=$(date +%s%N)
		add first "$mode" "$(field p50_us <<<"$out")"
		add proc "$mode" "$(((t1 - t0) / 1000))"
	done
	kill "${pids[-1]}" 2>/dev/null || true
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}

fi_round() {
	local s out
	for s in 64 4096; do
		port=$((port + 1))
		ip netns exec "$B" timeout 60 fi_pingpong -p "$prov" -e msg -B "$port" -S "$s" -I "$iters" \
			>/dev/null 2>&1 &
		pids+=($!)
		sleep 0.3
		out=$(ip netns exec "$A" timeout 60 fi_pingpong -p "$prov" -e msg -P "$port" -S "$s" \
			-I "$iters" "$ADDR_B" 2>&1 | awk '$1 ~ /^[0-9]/ && $7 ~ /^[0-9.]+$/ { v = $7 } END { print v }')
		wait "${pids[-1]}" 2>/dev/null || true
		unset 'pids[-1]'
		if [[ -n $out ]]; then
			add "pp$s" fi_pingpong "$(awk -v x="$out" 'BEGIN { printf "%.3f", 2 * x }')"
		fi
	done
}

for ((r = 0; r < rounds; r++)); do
	if ((r % 2)); then order=(fabric kernel); else order=(kernel fabric); fi
	for m in "${order[@]}"; do tcp_round "$m"; done
	fi_round
done

# The fabric runs must really have been on fabric.
nfab=$(cat "$tmp"/log-* 2>/dev/null | grep -c 'role=client .* transport=fabric ' || true)
nker=$(cat "$tmp"/log-* 2>/dev/null | grep -c 'role=client .* transport=kernel ' || true)

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "-" }'; }
med() { median <<<"${R[$1,$2]:-}"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }

echo "fabric benchmark: provider $prov, veth between two namespaces, $rounds round(s), medians"
echo "(client connections: $nfab on fabric, $nker on the kernel path in the shunt runs)"
printf '%-26s %12s %12s %12s %14s %14s\n' metric kernel-tcp shunt-fabric fi_pingpong fabric/kernel fabric/fi_pp
for m in pp64 pp4096; do
	k=$(med "$m" kernel) f=$(med "$m" fabric) p=$(med "$m" fi_pingpong)
	name="ping-pong ${m#pp} B RTT us"
	printf '%-26s %12s %12s %12s %14s %14s\n' "$name" "$k" "$f" "$p" "$(ratio "$f" "$k")" "$(ratio "$f" "$p")"
done
k=$(med stream kernel) f=$(med stream fabric)
printf '%-26s %12s %12s %12s %14s %14s\n' "stream 64 KiB Gbit/s" "$k" "$f" - "$(ratio "$f" "$k")" -
echo "connection setup: connect + 64 B round trip + close, us"
k=$(med connect kernel) f=$(med connect fabric)
printf '%-26s %12s %12s %12s %14s %14s\n' "  later (cached) p50" "$k" "$f" - "$(ratio "$f" "$k")" -
k=$(med first kernel) f=$(med first fabric)
printf '%-26s %12s %12s %12s %14s %14s\n' "  first, fresh process" "$k" "$f" - "$(ratio "$f" "$k")" -
k=$(med proc kernel) f=$(med proc fabric)
printf '%-26s %12s %12s %12s %14s %14s\n' "  fresh process, wall" "$k" "$f" - "$(ratio "$f" "$k")" -
