#!/usr/bin/env bash
# sockperf over TCP: server (epoll multiplexing) + ping-pong (-t 2) and
# throughput (-t 2), all under shunt and all plain: both must exit 0, report
# a latency / bandwidth, and (ping-pong) no dropped, duplicated or reordered
# messages.  Under shunt the connections must be decided on both sides.
source "$(dirname "$0")/lib.sh"
need sockperf

T=${E2E_SOCKPERF_T:-2}
for MODE in plain shunt; do
	phase "$MODE"
	port=$(free_port)
	echo "T:127.0.0.1:$port" >"$PDIR/feed"
	bg server sockperf server -f "$PDIR/feed" -F epoll
	spid=$BG_PID
	wait_port "$port" "$spid"
	# --mps: without it sockperf sizes its sequence window for 600k
	# round trips a second ((1 + T) x 600k, MPS_MAX_PP) and aborts with
	# "_seqN > m_maxSequenceNo" when shm goes faster; 10M is the same
	# unpaced run with room to spare.
	runx sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t "$T" -m 64 --mps 10000000 \
		>"$PDIR/pp.out" 2>&1 ||
		die "sockperf ping-pong exited with status $? ($MODE)"
	lat=$(sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$PDIR/pp.out")
	[[ -n "$lat" ]] || die "no latency in the ping-pong output ($MODE)"
	awk -v l="$lat" 'BEGIN { exit !(l > 0) }' || die "latency $lat ($MODE)"
	grep -q 'dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$PDIR/pp.out" ||
		die "ping-pong lost, duplicated or reordered messages ($MODE): $(grep 'dropped' "$PDIR/pp.out")"
	obs=$(sed -n 's/.*Total \([0-9]*\) observations.*/\1/p' "$PDIR/pp.out")
	[[ -n "$obs" && "$obs" -gt 0 ]] || die "no ping-pong observations ($MODE)"
	note "$MODE: ping-pong latency $lat usec over $obs round trips"

	runx sockperf throughput --tcp -i 127.0.0.1 -p "$port" -t "$T" -m 1400 >"$PDIR/tp.out" 2>&1 ||
		die "sockperf throughput exited with status $? ($MODE)"
	bw=$(sed -n 's/.*Summary: BandWidth is \([0-9.]*\) MBps.*/\1/p' "$PDIR/tp.out")
	[[ -n "$bw" ]] || die "no bandwidth in the throughput output ($MODE)"
	awk -v b="$bw" 'BEGIN { exit !(b > 0) }' || die "bandwidth $bw ($MODE)"
	note "$MODE: throughput $bw MBps"
	echo "$lat $bw" >"$PDIR/result"
	[[ $MODE == shunt ]] && assert_preloaded "$(bg_prog_pid "$spid")"
	stop "$spid"
done

# Same order of magnitude (kernel path; the precise overhead is bench/'s job).
read -r plat pbw <"$TMP/plain/result"
read -r slat sbw <"$TMP/shunt/result"
awk -v p="$plat" -v s="$slat" 'BEGIN { exit !(s < 5 * p + 50) }' ||
	die "latency under shunt $slat usec vs $plat plain"

phase shunt
check_logs
assert_started sockperf
assert_log_has "$(conn_re 'sockperf' client)" 2
assert_log_has "$(conn_re 'sockperf' server)" 2
assert_conn_pairs "$(log_count ': debug: conn .* role=server ')"
assert_log_pids 'role=client' 2
compat_row "sockperf (ping-pong, throughput)" "$(sockperf --version 2>&1 | sed -n "s/.*version \([^ ]*\).*/\1/p" | head -n 1)" "pass" "pass, no loss or reorder"
pass
