#!/usr/bin/env bash
# The main job: install, build, then run a real program pair -- redis-server and
# redis-benchmark -- plain and under shunt, alternately, with `shunt ab`, and
# print the figures side by side with their ratio, its interval and verdict
# (6 rounds: the fewest that can give one), the CPU time of both ends and the
# transport the shunt side's connections took.
#   scripts/demo.sh [--rounds N] [--requests N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=6 requests=100000
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
trap 'rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

echo
"$shunt" ab --runs "$rounds" --port "$port" \
	--server "redis-server --port $port --save '' --appendonly no --daemonize no --dir $tmp" \
	--client "redis-benchmark -p $port -n $requests -c 10 -t set,get --csv"
