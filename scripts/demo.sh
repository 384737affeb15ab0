#!/usr/bin/env bash
# The main job: install, build, then run a real program pair -- redis-server and
# redis-benchmark -- plain and under shunt, alternately, and print the figures
# side by side.
#   scripts/demo.sh [--rounds N] [--requests N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=3 requests=100000
while [[ $# -gt 0 ]]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--requests) requests=$2; shift 2 ;;
	*) echo "usage: $0 [--rounds N] [--requests N]" >&2; exit 2 ;;
	esac
done

"$root/scripts/deps.sh"
"$root/scripts/build.sh" "$root/build"
shunt=$root/build/tools/shunt

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 1 500); do
		redis-cli -p "$1" ping 2>/dev/null | grep -q PONG && return 0
		sleep 0.01
	done
	echo "redis on port $1 did not start" >&2; return 1
}

# One measurement: start a server (plain or under shunt), run the benchmark
# the same way, print "SET GET" requests per second.
measure() {
	local mode=$1 port pre=()
	port=$(free_port)
	[[ $mode == shunt ]] && pre=("$shunt" run --)
	"${pre[@]}" redis-server --port "$port" --save '' --appendonly no \
		--daemonize no --dir "$tmp" >"$tmp/redis-$mode.log" 2>&1 &
	pids+=($!)
	wait_port "$port"
	"${pre[@]}" redis-benchmark -p "$port" -n "$requests" -c 10 -t set,get --csv -q \
		>"$tmp/bench-$mode.csv"
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "${pids[-1]}" 2>/dev/null || true
	awk -F'"' '/^"SET"/ {s=$4} /^"GET"/ {g=$4} END {print s, g}' "$tmp/bench-$mode.csv"
}

echo
echo "redis-benchmark -n $requests -c 10 -t set,get, $rounds rounds, plain and under shunt alternately"
declare -a ps pg ss sg
for r in $(seq 1 "$rounds"); do
	if (( r % 2 )); then read -r a b < <(measure plain); read -r c d < <(measure shunt)
	else read -r c d < <(measure shunt); read -r a b < <(measure plain); fi
	ps+=("$a"); pg+=("$b"); ss+=("$c"); sg+=("$d")
	printf 'round %d: plain SET %s GET %s | shunt SET %s GET %s\n' "$r" "$a" "$b" "$c" "$d"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
printf '\n%-6s %14s %14s %8s\n' op "plain req/s" "shunt req/s" ratio
for op in SET GET; do
	if [[ $op == SET ]]; then p=$(median "${ps[@]}"); s=$(median "${ss[@]}")
	else p=$(median "${pg[@]}"); s=$(median "${sg[@]}"); fi
	awk -v op="$op" -v p="$p" -v s="$s" 'BEGIN { printf "%-6s %14.0f %14.0f %7.2fx\n", op, p, s, s / p }'
done
echo "(medians; every connection is on the kernel path until the shm transport lands,"
echo " so the ratio shows shunt's overhead: expect ~1.00x)"
