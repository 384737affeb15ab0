#!/bin/bash
# remote_conn.sh BUILD_DIR [ROUNDS]: what a connection to another host costs
# under shunt with default settings (docs/PERFORMANCE.md, "To another host").
# Root: two network namespaces joined by a veth pair (198.18.250.0/24), a
# plain conn_churn server (tests/progs) in one, its client in the other:
#   loop   N (5,000) connections in a loop (connect, 1..512 B echoed, close):
#          microseconds per connection
#   fresh  a fresh process making one connection: its whole life
# each run plainly and under LD_PRELOAD, through the same env(1), rounds
# interleaved; prints every run and the medians.
set -eu
B=${1:?usage: remote_conn.sh BUILD_DIR [ROUNDS]}
R=${2:-9}
P=$B/tests/progs LIB=$B/preload/libshunt.so N=${N:-5000}
[[ -x $P/conn_churn && -f $LIB ]] || { echo "need $P/conn_churn and $LIB" >&2; exit 2; }
NA=shunt-rc-a NB=shunt-rc-b A=198.18.250.1 S=198.18.250.2
T='' RD=''
cleanup() {
	ip netns del $NA 2>/dev/null || true
	ip netns del $NB 2>/dev/null || true
	[[ -z $T ]] || rm -rf "$T" "$RD"
}
trap cleanup EXIT
cleanup # what an interrupted run left
T=$(mktemp -d) RD=$(mktemp -d -p /dev/shm)
chmod 700 "$RD"
ip netns add $NA; ip netns add $NB
ip link add shrc0 type veth peer name shrc1
ip link set shrc0 netns $NA; ip link set shrc1 netns $NB
ip -n $NA addr add $A/24 dev shrc0; ip -n $NB addr add $S/24 dev shrc1
for n in $NA $NB; do ip -n $n link set lo up; done
ip -n $NA link set shrc0 up; ip -n $NB link set shrc1 up
# The client closes first, so each connection leaves its port in TIME_WAIT
# for a minute: 10,000 a round exhaust the namespace's 28,232 ports in the
# third (connect slowing down as they fill, then EADDRNOTAVAIL).  Reusing
# TIME_WAIT ports keeps every round what the first one is, plain or not.
ip netns exec $NA sysctl -qw net.ipv4.tcp_tw_reuse=1

# run MODE CONNS: wall microseconds of one client run (plain|shunt).
run() {
	local pre=(env "SHUNT_RUNDIR=$RD") port t0 t1 out
	[[ $1 == shunt ]] && pre+=("LD_PRELOAD=$LIB")
	port=$(cat "$T/port")
	t0=$(date +%s%N)
	out=$(ip netns exec $NA "${pre[@]}" "$P/conn_churn" client --port "$port" --conns "$2" \
		--mode loop --host $S 2>&1) || true
	t1=$(date +%s%N)
	# A client that failed takes no time: its figure would read as fast.
	if [[ $out != *"PASS conn_churn client"* ]]; then
		echo "remote_conn.sh: $1 client failed: $out" >&2
		return 1
	fi
	echo $(((t1 - t0) / 1000))
}
med() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

ip netns exec $NB "$P/conn_churn" server --port-file "$T/port" --conns $((2 * R * (N + 1))) \
	--mode loop --host $S >/dev/null &
srv=$!
for ((i = 0; i < 100; i++)); do [[ -s $T/port ]] && break; sleep 0.05; done
for ((r = 0; r < R; r++)); do
	for m in plain shunt; do
		us=$(run $m $N) || exit 1
		echo "loop $m $((us / N))"
		us=$(run $m 1) || exit 1
		echo "fresh $m $us"
	done
done | tee "$T/res"
[[ ${PIPESTATUS[0]} == 0 ]] || { kill $srv 2>/dev/null; exit 1; }
kill $srv 2>/dev/null || true
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for k in loop fresh; do
	for m in plain shunt; do
		echo "$k $m median: $(awk -v k=$k -v m=$m '$1 == k && $2 == m {print $3}' "$T/res" | med) us"
	done
done
