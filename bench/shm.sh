#!/usr/bin/env bash
# Same-host acceleration, measured side by side in one run: the raw
# shared-memory ring (the limit), kernel TCP loopback, and TCP under shunt
# (both ends, so the connection takes shm).  Rounds alternate the order;
# medians are printed with the ratios the shm issue sets as targets.
#
#   bench/shm.sh [--build-dir DIR] [--rounds N] [--quick]
#
# Rows: 64 B ping-pong (p50/p99/p99.9), 64 KiB stream, connection setup
# (connect + one round trip + close), redis-benchmark GET/SET with and
# without pipelining, sockperf ping-pong, and the CPU used by 100 idle
# accelerated connections.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build rounds=3 quick=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--build-dir) build=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--quick) quick=1; rounds=1; shift ;;
	*) echo "usage: $0 [--build-dir DIR] [--rounds N] [--quick]" >&2; exit 2 ;;
	esac
done
build=$(cd "$build" && pwd)
lib=$build/preload/libshunt.so tcpb=$build/bench/shunt-tcpbench ringb=$build/bench/shunt-ringbench
for f in "$lib" "$tcpb" "$ringb"; do [[ -e $f ]] || { echo "missing $f (build first)" >&2; exit 1; }; done
iters=$((quick ? 20000 : 100000)) dur=$((quick ? 1 : 3)) conns=$((quick ? 300 : 2000))
reqs=$((quick ? 20000 : 100000))

tmp=$(mktemp -d)
rundir=/dev/shm/shunt-bench-$$
mkdir -m 700 "$rundir"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp" "$rundir"; }
trap cleanup EXIT
export SHUNT_RUNDIR=$rundir
cpus=$(nproc)
ringcpu=""; ((cpus >= 2)) && ringcpu="--cpu 0,1"
pin() { if ((cpus >= 2)); then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start_server MODE PORT CPU CMD...: MODE plain|shm, CPU to pin to or "-";
# waits until the port listens.  The command itself is the background job
# (not a shell function), so $! is the server and stop_server stops it.
start_server() {
	local mode=$1 port=$2 cpu=$3 pre=()
	shift 3
	[[ $cpu != - ]] && ((cpus >= 2)) && pre=(taskset -c "$cpu")
	if [[ $mode == shm ]]; then LD_PRELOAD=$lib "${pre[@]}" "$@" >/dev/null 2>&1 &
	else "${pre[@]}" "$@" >/dev/null 2>&1 & fi
	pids+=($!)
	for _ in $(seq 1 500); do
		ss -ltn "sport = :$port" | grep -q LISTEN && return 0
		sleep 0.01
	done
	echo "server on $port did not start" >&2; return 1
}
stop_server() { kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }
client() { local mode=$1; shift; if [[ $mode == shm ]]; then LD_PRELOAD=$lib "$@"; else "$@"; fi; }
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

declare -A R # R[metric,mode] = "v1 v2 ..."
add() { R[$1,$2]="${R[$1,$2]:-} $3"; }

tcp_round() {
	local mode=$1 port out
	port=$(free_port)
	start_server "$mode" "$port" 0 "$tcpb" server --port "$port"
	out=$(client "$mode" pin 1 "$tcpb" client --host 127.0.0.1 --port "$port" --mode pingpong --size 64 --iters "$iters" --warmup 2000)
	add pp_p50 "$mode" "$(field p50_us <<<"$out")"
	add pp_p99 "$mode" "$(field p99_us <<<"$out")"
	add pp_p999 "$mode" "$(field p999_us <<<"$out")"
	out=$(client "$mode" pin 1 "$tcpb" client --host 127.0.0.1 --port "$port" --mode stream --size 65536 --duration "$dur")
	add stream "$mode" "$(field gbps <<<"$out")"
	out=$(client "$mode" pin 1 "$tcpb" client --host 127.0.0.1 --port "$port" --mode connect --iters "$conns")
	add connect "$mode" "$(field p50_us <<<"$out")"
	stop_server
}

redis_round() {
	local mode=$1 port out
	port=$(free_port)
	start_server "$mode" "$port" - redis-server --port "$port" --save '' --appendonly no --dir "$tmp"
	out=$(client "$mode" redis-benchmark -p "$port" -n "$reqs" -c 10 -t get,set --csv -q)
	add redis_set "$mode" "$(awk -F'"' '/^"SET"/ {print $4}' <<<"$out")"
	add redis_get "$mode" "$(awk -F'"' '/^"GET"/ {print $4}' <<<"$out")"
	out=$(client "$mode" redis-benchmark -p "$port" -n "$((reqs * 4))" -c 10 -P 16 -t get --csv -q)
	add redis_get_p16 "$mode" "$(awk -F'"' '/^"GET"/ {print $4}' <<<"$out")"
	stop_server
}

sockperf_round() {
	local mode=$1 port out
	port=$(free_port)
	start_server "$mode" "$port" 0 sockperf server --tcp -i 127.0.0.1 -p "$port"
	# --mps: with its default ("max") sockperf sizes its sequence numbers
	# for about 2 M messages a second and aborts a faster run of more than
	# a second ("_seqN > m_maxSequenceNo"); shm goes faster.
	out=$(client "$mode" pin 1 sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t "$dur" -m 64 \
		--mps 10000000 2>&1 || true)
	add sockperf_p50 "$mode" "$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$out" | head -1)"
	stop_server
}

ring_round() {
	local out
	out=$("$ringb" pingpong --size 64 --iters "$iters" --warmup 2000 $ringcpu)
	add pp_p50 ring "$(field p50_us <<<"$out")"
	add pp_p99 ring "$(field p99_us <<<"$out")"
	add pp_p999 ring "$(field p999_us <<<"$out")"
	out=$("$ringb" stream --size 65536 --duration "$dur" $ringcpu)
	add stream ring "$(field gbps <<<"$out")"
}

# CPU (user+sys, in % of one core) used by both processes holding 100 idle
# shm connections, over a few seconds.
idle_cpu() {
	local port out
	port=$(free_port)
	cat >"$tmp/idle.py" <<'EOF'
import os, socket, sys, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
for c in conns:
    c.sendall(b"x"); assert c.recv(1) == b"x"
def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
spid = int(sys.argv[4])
a = cpu(os.getpid()) + cpu(spid); t = time.time()
time.sleep(secs)
b = cpu(os.getpid()) + cpu(spid)
print("idle idle_cpu_pct=%.3f" % (100 * (b - a) / (time.time() - t)))
EOF
	cat >"$tmp/idle_server.py" <<'EOF'
import selectors, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(256)
sel = selectors.EpollSelector(); sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj is s:
            c, _ = s.accept(); sel.register(c, selectors.EVENT_READ)
        else:
            d = key.fileobj.recv(64)
            if d: key.fileobj.sendall(d)
            else: sel.unregister(key.fileobj); key.fileobj.close()
EOF
	start_server shm "$port" - python3 "$tmp/idle_server.py" "$port"
	out=$(LD_PRELOAD=$lib python3 "$tmp/idle.py" "$port" 100 "$((quick ? 2 : 5))" "${pids[-1]}")
	stop_server
	field idle_cpu_pct <<<"$out"
}

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (!NR) print "nan"; else print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

echo "# shm benchmark: $rounds round(s), $(nproc) CPUs, $(uname -r), $(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)"
for r in $(seq 1 "$rounds"); do
	if ((r % 2)); then order="plain shm"; else order="shm plain"; fi
	for m in $order; do tcp_round "$m"; done
	ring_round
	for m in $order; do redis_round "$m"; done
	for m in $order; do sockperf_round "$m"; done
	echo "round $r/$rounds done"
done
idle=$(idle_cpu) || idle=failed

row() { # name unit plain shm [ring] ratio-text
	printf '%-28s %12s %12s %12s   %s\n' "$1" "$2" "$3" "$4" "$5"
}
m() { median "${R[$1,$2]:-}"; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo
printf '%-28s %12s %12s %12s   %s\n' metric "kernel TCP" shunt-shm "raw ring" "ratios (medians)"
row "pingpong 64 B p50 (us)" "$(m pp_p50 plain)" "$(m pp_p50 shm)" "$(m pp_p50 ring)" \
	"TCP/shm $(div "$(m pp_p50 plain)" "$(m pp_p50 shm)")x (target >= 8), shm/ring $(div "$(m pp_p50 shm)" "$(m pp_p50 ring)")x (target <= 1.5)"
row "pingpong 64 B p99 (us)" "$(m pp_p99 plain)" "$(m pp_p99 shm)" "$(m pp_p99 ring)" "TCP/shm $(div "$(m pp_p99 plain)" "$(m pp_p99 shm)")x"
row "pingpong 64 B p99.9 (us)" "$(m pp_p999 plain)" "$(m pp_p999 shm)" "$(m pp_p999 ring)" "TCP/shm $(div "$(m pp_p999 plain)" "$(m pp_p999 shm)")x"
row "stream 64 KiB (Gbit/s)" "$(m stream plain)" "$(m stream shm)" "$(m stream ring)" \
	"shm/TCP $(div "$(m stream shm)" "$(m stream plain)")x (target >= 2.5)"
row "connect+RTT+close p50 (us)" "$(m connect plain)" "$(m connect shm)" "-" \
	"shm/TCP $(div "$(m connect shm)" "$(m connect plain)")x (target <= 2)"
row "redis SET (req/s)" "$(m redis_set plain)" "$(m redis_set shm)" "-" "shm/TCP $(div "$(m redis_set shm)" "$(m redis_set plain)")x"
row "redis GET (req/s)" "$(m redis_get plain)" "$(m redis_get shm)" "-" \
	"shm/TCP $(div "$(m redis_get shm)" "$(m redis_get plain)")x (target >= 1.5)"
row "redis GET -P 16 (req/s)" "$(m redis_get_p16 plain)" "$(m redis_get_p16 shm)" "-" \
	"shm/TCP $(div "$(m redis_get_p16 shm)" "$(m redis_get_p16 plain)")x"
row "sockperf pp median (us)" "$(m sockperf_p50 plain)" "$(m sockperf_p50 shm)" "-" \
	"TCP/shm $(div "$(m sockperf_p50 plain)" "$(m sockperf_p50 shm)")x"
row "100 idle shm conns (%CPU)" "-" "$idle" "-" "target < 1"
