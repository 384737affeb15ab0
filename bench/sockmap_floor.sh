#!/usr/bin/env bash
# sockmap_floor.sh: how close is shunt's sockmap path to the least any
# sockmap path can do, and what does either give over kernel TCP?
#
# Usage (root; clang, bpftool, cgroup v2):
#   bench/sockmap_floor.sh --build-dir build [--rounds N] [--duration S]
#                          [--cpus LIST] [--tests LIST] [--stats] [--raw FILE]
#
# Runs shunt-tcpbench (plain programs, no libshunt.so) in a cgroup of its own
# three ways, interleaved in each round (the order turns every round):
#   tcp     nothing attached: kernel TCP over loopback
#   shunt   shuntd --sockmap attached to that cgroup (bpf/shunt_sockmap.bpf.c)
#   floor   bench/sockmap_minimal.bpf.c attached instead: established IPv4
#           sockets into a sockhash, each send redirected to the peer's
#           ingress, nothing else
# and prints the medians over rounds, and each column's ratio to tcp (the
# median of the rounds' own ratios):
#   pingpong  64 B round trip p50 (us; ratio: column / tcp, lower is better)
#   stream64  64 B writes, MB/s (the message rate; column / tcp)
#   stream64k 64 KiB writes, MB/s
#   connect   connections per second (connect + one round trip + close)
# If shunt is near floor, the gap to tcp is the kernel's mechanism on this
# host, not shunt's programs.
#
# Options:
#   --build-dir DIR  the CMake build tree (default: <source>/build)
#   --rounds N       rounds (default 5)
#   --duration S     seconds per ping-pong or stream run (default 2)
#   --cpus LIST      taskset both ends to LIST (e.g. 0: both on one CPU);
#                    default: not pinned
#   --tests LIST     of pingpong,stream64,stream64k,connect (default all)
#   --stats          also the kernel's BPF run-time statistics: ns per run
#                    of each sk_msg program (kernel.bpf_stats_enabled is on
#                    meanwhile, which itself costs a little)
#   --raw FILE       append every raw result line to FILE
# A run that fails (a redirected socket's blocking recv can return EAGAIN:
# a fault of the kernel's sockmap) is repeated, up to 5 times, and counted.
# Exit status: 0 ok, 1 a run or the setup failed, 2 usage, 77 cannot run
# here (not root, no clang/bpftool, no cgroup v2), with the reason.

set -u -o pipefail

die() { echo "sockmap_floor.sh: $*" >&2; exit 1; }
skip() { echo "sockmap_floor.sh: cannot run here: $*" >&2; exit 77; }
usage() { sed -n '2,/^# Exit status/s/^# \{0,1\}//p' "$0"; }

script_dir=$(cd "$(dirname "$0")" && pwd)
build_dir="$script_dir/../build"
rounds=5 duration=2 cpus="" tests="pingpong,stream64,stream64k,connect" stats=0 raw=""
while [ $# -gt 0 ]; do
	case "$1" in
	--build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
	--rounds) rounds=${2:?--rounds needs N}; shift ;;
	--duration) duration=${2:?--duration needs seconds}; shift ;;
	--cpus) cpus=${2:?--cpus needs a list}; shift ;;
	--tests) tests=${2:?--tests needs a list}; shift ;;
	--stats) stats=1 ;;
	--raw) raw=${2:?--raw needs a file}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "--rounds: a positive integer" >&2; exit 2; }

TCPBENCH=$build_dir/bench/shunt-tcpbench
SHUNTD=$build_dir/tools/shuntd
[[ -x $TCPBENCH && -x $SHUNTD ]] || die "no shunt-tcpbench or shuntd in $build_dir (build first)"
[[ $(id -u) == 0 ]] || skip "needs root (BPF programs, a cgroup)"
command -v clang >/dev/null || skip "needs clang (to build the floor's programs)"
command -v bpftool >/dev/null || skip "needs bpftool (to load the floor's programs)"
command -v python3 >/dev/null || skip "needs python3 (to find a free port for the agent)"
CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
[[ -n $CG2 ]] || skip "no cgroup v2 hierarchy mounted"

TMP=$(mktemp -d /tmp/sockmap-floor-XXXXXX) # no dot: libbpf turns it into _ in pin paths
CG=$CG2/shunt-floor-$$
BPFFS=$TMP/bpffs
SD_PID=""
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
cleanup() {
	set +e
	[[ -n $SD_PID ]] && kill "$SD_PID" 2>/dev/null && wait "$SD_PID" 2>/dev/null
	bpftool cgroup detach "$CG" sock_ops pinned "$BPFFS/floor/floor_sockops" 2>/dev/null
	sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS" 2>/dev/null
	umount -l "$BPFFS" 2>/dev/null
	# A run cut short leaves its server in the cgroup: none outlives us.
	[[ -e $CG/cgroup.kill ]] && echo 1 >"$CG/cgroup.kill"
	for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$CG" 2>/dev/null && break; sleep 0.2; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir "$CG" || die "cannot make cgroup $CG"
mkdir -p "$BPFFS" "$TMP/agent" && chmod 700 "$TMP/agent"
mount -t bpf bpf "$BPFFS" || die "cannot mount a bpffs at $BPFFS"
arch_inc=/usr/include/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
clang -O2 -g -target bpf -I"$arch_inc" -c "$script_dir/sockmap_minimal.bpf.c" -o "$TMP/floor.o" ||
	die "clang could not build sockmap_minimal.bpf.c"
bpftool prog loadall "$TMP/floor.o" "$BPFFS/floor" pinmaps "$BPFFS/floor/maps" ||
	die "bpftool could not load the floor's programs"
bpftool prog attach pinned "$BPFFS/floor/floor_sk_msg" msg_verdict pinned "$BPFFS/floor/maps/socks" ||
	die "cannot attach the floor's sk_msg program"
# A port nothing listens on now, for the agent (only its sockmap path is
# wanted, but it serves /metrics too).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
cat >"$TMP/shuntd.conf" <<EOF
sockmap = on
sockmap_cgroup = $CG
sockmap_pin = $BPFFS/shunt
rundir = $TMP/agent
agent_port = $(free_port)
EOF
((stats)) && sysctl -qw kernel.bpf_stats_enabled=1

# in_cg CMD...: CMD in the cgroup, pinned when --cpus says so; it takes
# the place of the caller's (sub)shell, so `in_cg ... &`'s pid is CMD's.
in_cg() {
	local -a pin=()
	[[ -n $cpus ]] && pin=(taskset -c "$cpus")
	exec bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" ${pin[@]+"${pin[@]}"} "$@"
}

attach() { # VARIANT
	case $1 in
	shunt)
		"$SHUNTD" --config "$TMP/shuntd.conf" >"$TMP/shuntd.log" 2>&1 </dev/null &
		SD_PID=$!
		for ((i = 0; i < 200; i++)); do
			grep -q 'sockmap: attached' "$TMP/shuntd.log" && return 0
			kill -0 "$SD_PID" 2>/dev/null || break
			sleep 0.05
		done
		grep -q 'built without it' "$TMP/shuntd.log" && skip "$(grep -o 'sockmap: this shuntd.*' "$TMP/shuntd.log" | head -n 1)"
		die "shuntd --sockmap did not attach: $(grep sockmap "$TMP/shuntd.log" | tail -n 2)"
		;;
	floor) bpftool cgroup attach "$CG" sock_ops pinned "$BPFFS/floor/floor_sockops" ||
		die "cannot attach the floor's sockops program" ;;
	esac
}
detach() { # VARIANT
	case $1 in
	shunt)
		# Its programs go with it: their statistics are read first.
		((stats)) && bpftool prog show name shunt_sk_msg >>"$TMP/shunt_sk_msg.stats"
		kill "$SD_PID" && wait "$SD_PID"
		SD_PID=""
		;;
	floor) bpftool cgroup detach "$CG" sock_ops pinned "$BPFFS/floor/floor_sockops" ;;
	esac
}

# measure VARIANT TEST: one run; prints its figure.
measure() {
	local v=$1 t=$2 args spid out fig
	case $t in
	pingpong) args=(--mode pingpong --size 64 --duration "$duration") ;;
	stream64) args=(--mode stream --size 64 --duration "$duration") ;;
	stream64k) args=(--mode stream --size 65536 --duration "$duration") ;;
	connect) args=(--mode connect --size 64 --iters 2000) ;;
	esac
	rm -f "$TMP/listening"
	# Any free port: the server says which.
	in_cg "$TCPBENCH" server --port 0 --bind 127.0.0.1 >"$TMP/listening" 2>&1 &
	spid=$!
	local sport=''
	for ((i = 0; i < 1500 && !sport; i++)); do
		sport=$(sed -n 's/^listening \([0-9][0-9]*\)$/\1/p' "$TMP/listening" 2>/dev/null)
		[[ -n $sport ]] || kill -0 "$spid" 2>/dev/null || break
		[[ -n $sport ]] || sleep 0.02
	done
	if [[ -z $sport ]]; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		echo "$v $t: the server did not listen: $(cat "$TMP/listening")" >&2
		return 1
	fi
	out=$(in_cg "$TCPBENCH" client --host 127.0.0.1 --port "$sport" "${args[@]}" 2>&1)
	local rc=$?
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	if ((rc != 0)); then
		echo "$v $t: shunt-tcpbench client failed: $out" >&2
		return 1
	fi
	[[ -n $raw ]] && echo "$v $out" >>"$raw"
	case $t in
	pingpong) fig=$(sed -n 's/.* p50_us=\([0-9.]*\).*/\1/p' <<<"$out") ;;
	stream*) fig=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' <<<"$out") ;;
	connect) fig=$(sed -n 's/.* rate=\([0-9.]*\).*/\1/p' <<<"$out") ;;
	esac
	[[ -n $fig ]] || { echo "$v $t: no figure in: $out" >&2; return 1; }
	echo "$fig"
}

variants=(tcp shunt floor)
IFS=, read -r -a tlist <<<"$tests"
echo "sockmap_floor: $rounds round(s), ${duration}s per run, $([[ -n $cpus ]] && echo "both ends on CPU(s) $cpus" || echo "not pinned"); load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
	for ((k = 0; k < 3; k++)); do
		v=${variants[(r + k) % 3]}
		attach "$v"
		for t in "${tlist[@]}"; do
			# A redirected socket's blocking recv can fail with EAGAIN
			# (a fault of the kernel's sockmap, docs/ARCHITECTURE.md):
			# the run is repeated, and counted.
			for ((try = 0; ; try++)); do
				fig=$(measure "$v" "$t") && break
				((try < 4)) || die "$v $t failed 5 times in a row"
				echo "$v $t" >>"$TMP/failed"
			done
			echo "$r $fig" >>"$TMP/$v.$t"
		done
		detach "$v"
	done
done

# median FILE: of the figures (second field) in FILE.
median() { awk '{ print $2 }' "$1" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# paired A B: the median over rounds of each round's A / B (the host's
# drift between rounds cancels).
paired() {
	awk 'NR == FNR { b[$1] = $2; next } ($1 in b) && b[$1] > 0 { print $1, $2 / b[$1] }' "$2" "$1" >"$TMP/ratios"
	median "$TMP/ratios"
}
printf '%-10s %10s %10s %10s %10s %10s\n' test tcp shunt floor shunt/tcp floor/tcp
for t in "${tlist[@]}"; do
	printf '%-10s %10s %10s %10s %9.2fx %9.2fx\n' "$t" "$(median "$TMP/tcp.$t")" \
		"$(median "$TMP/shunt.$t")" "$(median "$TMP/floor.$t")" \
		"$(paired "$TMP/shunt.$t" "$TMP/tcp.$t")" "$(paired "$TMP/floor.$t" "$TMP/tcp.$t")"
done
echo "figures: medians over rounds; ratios: medians of each round's own ratio"
if [[ -s $TMP/failed ]]; then
	echo "runs that failed and were repeated: $(sort "$TMP/failed" | uniq -c | awk '{ printf "%s%s %s %s", (NR > 1 ? ", " : ""), $2, $3, $1 }')"
else
	echo "runs that failed and were repeated: none"
fi
echo "units: pingpong p50 us (lower is better); stream MB/s and connect per second (higher is better)"
if ((stats)); then
	bpftool prog show name floor_sk_msg >"$TMP/floor_sk_msg.stats"
	for p in shunt_sk_msg floor_sk_msg; do
		awk -v p="$p" '{ for (i = 1; i < NF; i++) { if ($i == "run_time_ns") t += $(i + 1); if ($i == "run_cnt") n += $(i + 1) } }
				END { if (n) printf "%s: %.0f ns per run (%d runs)\n", p, t / n, n }' "$TMP/$p.stats"
	done
fi
