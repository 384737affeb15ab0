#!/usr/bin/env bash
# iperf3 (-t 2, JSON), client to server with 2 parallel streams and reverse
# (-R), all under shunt and all plain: each run must succeed with a non-zero
# rate sent and received, the one-off server must exit 0, and under shunt the
# control and data connections must be decided on both sides.
source "$(dirname "$0")/lib.sh"
need iperf3 jq

T=${E2E_IPERF_T:-2}
# check_json CLIENT_JSON SERVER_JSON DIR: both ends succeeded, non-zero rates,
# and the receiver's byte count is the same in both reports.  Prints the
# client's "sent_bps received_bps".
check_json() {
	local cl=$1 sv=$2 dir=$3 e
	for e in "$cl" "$sv"; do
		jq -e 'has("end") and (has("error") | not)' "$e" >/dev/null ||
			{ echo "$(basename "$e"): $(jq -r '.error // "no result"' "$e" 2>&1 | head -c 200)"; return 1; }
	done
	jq -e '.end.sum_sent.bits_per_second > 0 and .end.sum_received.bits_per_second > 0 and
		.end.sum_sent.bytes > 0 and .end.sum_received.bytes > 0' "$cl" >/dev/null ||
		{ echo "zero rate in the client report"; return 1; }
	local want got
	# the receiving end's count, as reported by the server itself
	if [[ $dir == fwd ]]; then
		got=$(jq '.end.sum_received.bytes' "$sv")
		want=$(jq '.end.sum_received.bytes' "$cl")
		[[ "$got" == "$want" ]] || { echo "server received $got bytes, client report says $want"; return 1; }
	else
		got=$(jq '.end.sum_sent.bytes' "$sv")
		[[ "$got" -gt 0 ]] || { echo "zero bytes in the server report"; return 1; }
	fi
	jq -r '"\(.end.sum_sent.bits_per_second | floor) \(.end.sum_received.bits_per_second | floor)"' "$cl"
}

for MODE in plain shunt; do
	phase "$MODE"
	for dir in fwd rev; do
		port=$(free_port)
		bg "server-$dir" iperf3 -s -1 -B 127.0.0.1 -p "$port" -J
		spid=$BG_PID
		wait_port "$port" "$spid"
		if [[ $dir == fwd ]]; then extra=(-P 2); else extra=(-R); fi
		runx iperf3 -c 127.0.0.1 -p "$port" -t "$T" -J "${extra[@]}" \
			>"$PDIR/client-$dir.json" 2>"$PDIR/client-$dir.err" ||
			die "iperf3 client ($dir) exited with status $? ($MODE)"
		wait_exit "$spid" 20 || die "iperf3 server ($dir) exited with status $? ($MODE)"
		check_json "$PDIR/client-$dir.json" "$PDIR/server-$dir.out" $dir >"$PDIR/rates-$dir" 2>&1 ||
			die "iperf3 $dir ($MODE): $(cat "$PDIR/rates-$dir")"
		read -r sent recv <"$PDIR/rates-$dir"
		note "$MODE $dir: sent $((sent / 1000000)) Mbit/s, received $((recv / 1000000)) Mbit/s"
	done
done

phase shunt
check_logs
assert_started iperf3
# fwd: control + 2 data streams; rev: control + 1 data stream
assert_log_count "$(conn_re 'iperf3' client)" 5
assert_log_count "$(conn_re 'iperf3' server)" 5
assert_conn_pairs 5
assert_log_pids 'role=server' 2
compat_row "iperf3 (-P 2, -R)" "$(iperf3 --version | awk "NR == 1 { print \$2 }")" "pass" "pass, bytes match the report"
pass
