#!/usr/bin/env bash
# Real programs across two "hosts" (network namespaces, 198.18.0.0/15) over
# the fabric transport (libfabric tcp provider), each host with its rundir
# and shuntd:
#   redis    redis-server on B; redis-benchmark (SET/GET, -P 1 and 16) and
#            redis-cli (--pipe of random values, a 300 kB binary value,
#            MGET read back and compared) on A
#   iperf3   iperf3 -s on B, iperf3 -c on A, -P 2 and -R; both reports agree
#   closed   tests/progs/peer_closed_send: B sends after A's close; the
#            kernel's answers (first send taken, then EPIPE and SIGPIPE),
#            line for line as plain
# Every connection on fabric at both ends (conn lines), none moved to TCP.
source "$(dirname "$0")/lib_fabric.sh"

# wait_port_on A|B PORT PID: until something listens on PORT in that host.
wait_port_on() {
	local ns i
	[[ $1 == A ]] && ns=$NSA || ns=$NSB
	for ((i = 0; i < 300; i++)); do
		[[ -n "$(ip netns exec "$ns" ss -Hltn "( sport = :$2 )" 2>/dev/null)" ]] && return 0
		kill -0 "$3" 2>/dev/null || die "process $3 exited before listening on port $2"
		sleep 0.05
	done
	die "nothing listening on port $2 on host $1"
}

t_redis() {
	need redis-server redis-benchmark redis-cli python3
	fab_hosts
	fab_phase redis shunt
	agent_on A
	agent_on B
	local port=6390 n=200
	python3 - "$PDIR" "$n" <<-'PY'
		import base64, os, random, sys
		d, n = sys.argv[1], int(sys.argv[2])
		rnd = random.Random(int.from_bytes(os.urandom(8), "little"))
		keys, vals = [], []
		for i in range(n):
		    keys.append("k:%d:%s" % (i, base64.b32encode(rnd.randbytes(5)).decode()))
		    vals.append(base64.b64encode(rnd.randbytes(rnd.randint(1, 30000))).decode())
		def bulk(s):
		    b = s.encode()
		    return b"$%d\r\n%s\r\n" % (len(b), b)
		with open(d + "/set.resp", "wb") as f:
		    for k, v in zip(keys, vals):
		        f.write(b"*3\r\n" + bulk("SET") + bulk(k) + bulk(v))
		with open(d + "/keys", "w") as f:
		    f.write("\n".join(keys) + "\n")
		with open(d + "/expect.mget", "w") as f:
		    f.write("".join(v + "\n" for v in vals))
	PY
	random_file "$PDIR/bin.dat" 300000
	cp "$PDIR/bin.dat" "$PDIR/expect.bin" && echo >>"$PDIR/expect.bin"
	on_bg B redis redis-server --port "$port" --bind "$ADDR_B" --save '' --appendonly no \
		--daemonize no --protected-mode no --dir "$PDIR" --logfile ''
	local rpid=$BG_PID p t
	wait_port_on B "$port" "$rpid"
	for p in 1 16; do
		on_run A redis-benchmark -h "$ADDR_B" -p "$port" -n 3000 -c 8 -P $p -t set,get --csv \
			>"$PDIR/bench-$p.csv" 2>"$PDIR/bench-$p.err" || die "redis-benchmark -P $p failed"
		for t in SET GET; do
			awk -F'"' -v t=$t '$2 == t && $4 + 0 > 0 { ok = 1 } END { exit !ok }' "$PDIR/bench-$p.csv" ||
				die "redis-benchmark -P $p: no $t rate: $(cat "$PDIR/bench-$p.csv")"
		done
		note "redis-benchmark -P $p: $(awk -F'"' '$2 == "SET" || $2 == "GET" { printf "%s %s/s  ", $2, $4 }' "$PDIR/bench-$p.csv")"
	done
	cli() { on_run A redis-cli -h "$ADDR_B" -p "$port" "$@"; }
	cli FLUSHALL >/dev/null
	cli --pipe <"$PDIR/set.resp" >"$PDIR/pipe.out" 2>&1 || die "redis-cli --pipe failed"
	grep -q "errors: 0, replies: $n" "$PDIR/pipe.out" || die "redis-cli --pipe: $(tail -n 1 "$PDIR/pipe.out")"
	[[ $(cli -x SET binkey <"$PDIR/bin.dat") == OK ]] || die "SET -x binkey failed"
	mapfile -t keys <"$PDIR/keys"
	cli --raw MGET "${keys[@]}" >"$PDIR/mget.out" || die "MGET failed"
	cli --raw GET binkey >"$PDIR/bin.out" || die "GET binkey failed"
	assert_same_file "$PDIR/mget.out" "$PDIR/expect.mget" "MGET of $n random values"
	assert_same_file "$PDIR/bin.out" "$PDIR/expect.bin" "binary value read back"
	assert_eq "$(cli DBSIZE)" $((n + 1)) "DBSIZE"
	cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait_exit "$rpid" 20 || die "redis-server exited with status $?"
	check_logs
	assert_all_on fabric redis-benchmark client 16
	local nb=$CONN_N
	assert_all_on fabric redis-cli client 6
	local nc=$CONN_N
	assert_all_on fabric redis-server server $((nb + nc))
	assert_conn_pairs $((nb + nc))
	assert_log_lacks "$(moved_re fabric)"
	note "$nb redis-benchmark and $nc redis-cli connections, all on fabric"
}

t_iperf3() {
	need iperf3 jq
	fab_hosts
	fab_phase iperf3 shunt
	agent_on A
	agent_on B
	local dir port=5211
	for dir in fwd rev; do
		on_bg B "server-$dir" iperf3 -s -1 -B "$ADDR_B" -p "$port" -J
		local spid=$BG_PID extra
		wait_port_on B "$port" "$spid"
		if [[ $dir == fwd ]]; then extra=(-P 2); else extra=(-R); fi
		on_run A iperf3 -c "$ADDR_B" -p "$port" -t 2 -J "${extra[@]}" >"$PDIR/client-$dir.json" 2>"$PDIR/client-$dir.err" ||
			die "iperf3 client ($dir) exited with status $?: $(jq -r '.error // empty' "$PDIR/client-$dir.json" 2>/dev/null)"
		wait_exit "$spid" 20 || die "iperf3 server ($dir) exited with status $?"
		local e
		for e in "$PDIR/client-$dir.json" "$PDIR/server-$dir.out"; do
			jq -e 'has("end") and (has("error") | not)' "$e" >/dev/null ||
				die "iperf3 $dir: $(jq -r '.error // "no result"' "$e" 2>&1 | head -c 200)"
		done
		jq -e '.end.sum_sent.bytes > 0 and .end.sum_received.bytes > 0' "$PDIR/client-$dir.json" >/dev/null ||
			die "iperf3 $dir: zero bytes"
		if [[ $dir == fwd ]]; then
			assert_eq "$(jq '.end.sum_received.bytes' "$PDIR/server-$dir.out")" \
				"$(jq '.end.sum_received.bytes' "$PDIR/client-$dir.json")" "iperf3 bytes received, server vs client report"
		else
			assert_eq "$(jq '.end.sum_sent.bytes' "$PDIR/server-$dir.out")" \
				"$(jq '.end.sum_sent.bytes' "$PDIR/client-$dir.json")" "iperf3 -R bytes sent, server vs client report"
		fi
		note "iperf3 $dir: $(jq -r '.end.sum_received.bits_per_second / 1e9 | . * 100 | floor / 100' "$PDIR/client-$dir.json") Gbit/s"
	done
	check_logs
	assert_all_on fabric iperf3 client 5
	assert_all_on fabric iperf3 server 5
	assert_conn_pairs 5
	assert_log_lacks "$(moved_re fabric)"
}

# closed_run PHASE MODE: one peer_closed_send pair, B's lines in $PDIR/sender.out.
closed_run() {
	fab_phase "$1" "$2"
	if [[ $2 == shunt ]]; then
		agent_on A
		agent_on B
	fi
	on_bg B sender "$PROGS/peer_closed_send" --serve "$ADDR_B" "$PDIR/port"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	on_run A "$PROGS/peer_closed_send" --close "$ADDR_B" "$(port_of)" >"$PDIR/closer.out" 2>&1 ||
		die "closer failed ($1): $(cat "$PDIR/closer.out")"
	wait_exit "$spid" 30 || die "sender failed ($1): $(cat "$PDIR/sender.out")"
}

t_closed() {
	fab_hosts
	closed_run closed-plain plain
	cp "$PDIR/sender.out" "$TMP/closed-plain.out"
	closed_run closed-shunt shunt
	grep -q "^first send: 5 ok sigpipe=0$" "$PDIR/sender.out" || die "first send not accepted: $(cat "$PDIR/sender.out")"
	assert_same_file "$TMP/closed-plain.out" "$PDIR/sender.out" "sends after the peer's close, plain vs fabric"
	check_logs
	assert_conns fabric peer_closed_send client 1
	assert_conns fabric peer_closed_send server 1
	note "sends after the peer's close: as the kernel answers them, over fabric"
}

subtest redis t_redis
subtest iperf3 t_iperf3
subtest closed t_closed
finish_subtests
