#!/usr/bin/env bash
# Real, unmodified programs with both ends under `shunt run`, their results
# checked against the truth (values written, files served, byte counts) and
# shm confirmed from the logs: every connection decided on shm at both ends.
# (The e2e_* tests compare the same programs plain vs shunt; here the point
# is that shm really carries them.)  Subtests (E2E_ONLY="redis nginx ..."):
#   redis      redis-server + redis-benchmark (SET/GET, -P 1 and 16) +
#              redis-cli --pipe/-x/MGET of random values read back
#   memcached  memcached + a python3 client (plain socket module, text
#              protocol): set/get/multi-get of random binary values
#   nginx      nginx (master + 2 workers, epoll): curl of a 64 MiB file
#              (sha256), once with sendfile off (rings all the way) and once
#              with sendfile on (nginx's sockets are non-blocking: sendfile
#              copies into the ring while curl has bytes to read there, and
#              moves the connection to TCP, explained, once it has none);
#              wrk -d 2s
#   sockperf   sockperf server + ping-pong and throughput
#   iperf3     iperf3 -t 2 -J, -P 2 and -R
#   asyncio    python3 asyncio echo (asyncio_echo.py), 4 x 3 MB
#   prefork    prefork_echo: listen, fork 4 workers that accept
source "$(dirname "$0")/lib_shm.sh"

MODE=shunt

# ---------------------------------------------------------------- redis
t_redis() {
	need redis-server redis-benchmark redis-cli python3
	shm_phase redis shunt
	local port n=300
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
	port=$(free_port)
	bg redis redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --protected-mode no --dir "$PDIR" --logfile ''
	local rpid=$BG_PID
	wait_port "$port" "$rpid"
	assert_preloaded "$(bg_prog_pid "$rpid")"
	local p
	for p in 1 16; do
		runx redis-benchmark -h 127.0.0.1 -p "$port" -n 3000 -c 8 -P $p -t set,get --csv \
			>"$PDIR/bench-$p.csv" 2>"$PDIR/bench-$p.err" || die "redis-benchmark -P $p failed"
		local t
		for t in SET GET; do
			awk -F'"' -v t=$t '$2 == t && $4 + 0 > 0 { ok = 1 } END { exit !ok }' "$PDIR/bench-$p.csv" ||
				die "redis-benchmark -P $p: no $t rate: $(cat "$PDIR/bench-$p.csv")"
		done
		note "redis-benchmark -P $p: $(awk -F'"' '$2 == "SET" || $2 == "GET" { printf "%s %s/s  ", $2, $4 }' "$PDIR/bench-$p.csv")"
	done
	cli() { runx redis-cli -h 127.0.0.1 -p "$port" "$@"; }
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
	assert_all_on shm redis-benchmark client 32
	local nb=$CONN_N
	assert_all_on shm redis-cli client 6
	local nc=$CONN_N
	assert_conns shm redis-server server $((nb + nc))
	assert_conn_pairs $((nb + nc))
	assert_no_moves shm
	# the binary value went through the rings: 300000 bytes + the command
	# (counted by the server: redis-cli exits without closing)
	assert_log_has "$(close_re shm redis-server '3000[0-9][0-9]' '[0-9]+')" 1
	note "$nb redis-benchmark and $nc redis-cli connections, all on shm"
}

# ---------------------------------------------------------------- memcached
t_memcached() {
	need memcached python3
	shm_phase memcached shunt
	local port user=()
	port=$(free_port)
	[[ $(id -u) -eq 0 ]] && user=(-u root)
	bg memcached memcached -p "$port" -l 127.0.0.1 -U 0 -t 2 -m 256 -I 1m "${user[@]}"
	local mpid=$BG_PID
	wait_port "$port" "$mpid"
	assert_preloaded "$(bg_prog_pid "$mpid")"
	_prefix "$MODE"
	memcached_client "$port" 200
	stop "$mpid"
	assert_memcached_on_shm
}

# ---------------------------------------------------------------- nginx
t_nginx() {
	need nginx curl wrk
	shm_phase nginx shunt
	local size=$((64 * 1024 * 1024)) port want user_line=""
	mkdir -p "$PDIR/www" "$PDIR/nginx"
	random_file "$PDIR/www/big.bin" $size
	random_file "$PDIR/www/small.bin" 4096
	want=$(sha256 "$PDIR/www/big.bin")
	[[ $(id -u) -eq 0 ]] && user_line="root root"
	port=$(free_port)
	nginx_conf "$user_line" 2 "use epoll;" "
	    sendfile off;
	    keepalive_timeout 30;
	    default_type application/octet-stream;
	    server {
	        listen 127.0.0.1:$port;
	        root $PDIR/www;
	        location /sf/ { alias $PDIR/www/; sendfile on; }
	    }"
	bg nginx nginx -p "$PDIR/nginx" -e "$PDIR/nginx/error.log" -c "$PDIR/nginx.conf"
	local npid=$BG_PID
	wait_port "$port" "$npid"
	runx curl -sS --fail -o "$PDIR/get1" "http://127.0.0.1:$port/big.bin" \
		-w '%{http_code} %{size_download}\n' >"$PDIR/curl1.out" 2>"$PDIR/curl1.err" ||
		die "curl failed: $(cat "$PDIR/curl1.err")"
	assert_eq "$(cat "$PDIR/curl1.out")" "200 $size" "curl status and size"
	assert_eq "$(sha256 "$PDIR/get1")" "$want" "64 MiB file through shm"
	rm -f "$PDIR/get1"
	check_logs
	assert_conns shm curl client 1
	assert_conns shm nginx server 1
	assert_log_lacks "$(moved_re shm)"
	assert_log_has "$(close_re shm curl '671[0-9]{5}' '[0-9]+')" 1
	# sendfile on: copies into the ring, or moves to TCP once nothing is
	# left to replay (whichever the reader's pace makes it)
	runx curl -sS --fail -o "$PDIR/get2" "http://127.0.0.1:$port/sf/big.bin" \
		-w '%{http_code} %{size_download}\n' >"$PDIR/curl2.out" 2>"$PDIR/curl2.err" ||
		die "curl (sendfile) failed: $(cat "$PDIR/curl2.err")"
	assert_eq "$(cat "$PDIR/curl2.out")" "200 $size" "curl status and size (sendfile)"
	assert_eq "$(sha256 "$PDIR/get2")" "$want" "64 MiB file, sendfile on"
	rm -f "$PDIR/get2"
	assert_conns shm curl client 2
	assert_conns shm nginx server 2
	local moves
	moves=$(log_count "nginx$(moved_re shm)")
	[[ $moves -le 1 ]] || die "nginx moved $moves connections to TCP, expected at most 1"
	assert_moves_explained shm
	# wrk: 2 s, 8 connections, no socket error, no non-2xx
	runx wrk -t 2 -c 8 -d 2s "http://127.0.0.1:$port/small.bin" >"$PDIR/wrk.out" 2>&1 ||
		die "wrk failed: $(tail -n 3 "$PDIR/wrk.out")"
	local reqs
	reqs=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$PDIR/wrk.out")
	[[ -n "$reqs" && $reqs -gt 0 ]] || die "wrk made no requests: $(cat "$PDIR/wrk.out")"
	if grep -Eq 'Socket errors|Non-2xx' "$PDIR/wrk.out"; then
		die "wrk: $(grep -E 'Socket errors|Non-2xx' "$PDIR/wrk.out")"
	fi
	note "wrk: $reqs requests, $(sed -n 's/^Requests\/sec: *//p' "$PDIR/wrk.out") req/s"
	# wrk reconnects after nginx's keepalive_requests: at least 8
	assert_all_on shm wrk client 8
	local nw=$CONN_N nk peer=none
	# wrk's first connection only probes the address: it may be closed
	# (offer withdrawn, nothing sent) before nginx accepts it, and then
	# nginx rightly finds no offer, or while nginx's accept holds the offer,
	# and then finds it withdrawn by the close (client-closed).  Any other
	# kernel decision is wrong (offer-timeout would mean the client waited
	# out its offer).
	local probe_re
	probe_re=$(conn_re nginx server kernel '(no-peer-shim|client-closed)')
	nk=$(log_count "$probe_re")
	[[ $nk -le 1 ]] || die "$nk nginx connections on the kernel path"
	if [[ $nk -eq 1 ]]; then
		peer=$(log_lines "$probe_re" | sed -n 's/.* peer=\([^ ]*\) .*/\1/p')
		local wline wpid wfd
		wline=$(log_lines "$(conn_re wrk client shm '-')" | grep " local=$peer ") ||
			die "nginx took a connection from $peer on the kernel path, not from wrk"
		wpid=$(sed -n 's/^shunt\[\([0-9]*\)\].*/\1/p' <<<"$wline")
		wfd=$(sed -n 's/.* conn fd=\([0-9]*\) .*/\1/p' <<<"$wline")
		grep -q "shm close fd=$wfd bytes_in=0 bytes_out=0\$" "$LOGDIR/$wpid.log" ||
			die "nginx took wrk's connection $peer on the kernel path, but wrk used it"
		note "wrk's probe connection $peer was closed before nginx accepted it"
	fi
	assert_log_count "$(conn_re nginx server '[a-z]+' '[a-z-]*')" $((nw + 2))
	assert_log_count "$(conn_re nginx server shm '-')" $((nw + 2 - nk))
	assert_conn_sets "$peer"
	# accepts decided in the workers, not the master
	local master
	master=$(bg_prog_pid "$npid")
	if log_lines 'nginx: debug: conn .*role=server' | grep -q "^shunt\\[$master\\]"; then
		die "accepts logged by the nginx master"
	fi
	stop "$npid"
}

# ---------------------------------------------------------------- sockperf
t_sockperf() {
	need sockperf
	shm_phase sockperf shunt
	local port
	port=$(free_port)
	echo "T:127.0.0.1:$port" >"$PDIR/feed"
	bg server sockperf server -f "$PDIR/feed" -F epoll
	local spid=$BG_PID
	wait_port "$port" "$spid"
	# --mps: without it sockperf sizes its sequence window for 600k round
	# trips a second and aborts with "_seqN > m_maxSequenceNo" once shm goes
	# faster (a host in its fast mode: 1.2M in this second); as
	# e2e_sockperf, the same unpaced run with room to spare.
	runx sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t 1 -m 64 --mps 10000000 \
		>"$PDIR/pp.out" 2>&1 ||
		die "sockperf ping-pong exited with status $?"
	local lat obs bw
	lat=$(sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$PDIR/pp.out")
	obs=$(sed -n 's/.*Total \([0-9]*\) observations.*/\1/p' "$PDIR/pp.out")
	[[ -n "$lat" && -n "$obs" && $obs -gt 0 ]] || die "no ping-pong result: $(tail -n 5 "$PDIR/pp.out")"
	grep -q 'dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$PDIR/pp.out" ||
		die "ping-pong lost, duplicated or reordered messages: $(grep dropped "$PDIR/pp.out")"
	runx sockperf throughput --tcp -i 127.0.0.1 -p "$port" -t 1 -m 1400 >"$PDIR/tp.out" 2>&1 ||
		die "sockperf throughput exited with status $?"
	bw=$(sed -n 's/.*Summary: BandWidth is \([0-9.]*\) MBps.*/\1/p' "$PDIR/tp.out")
	if [[ -z "$bw" ]] || ! awk -v b="$bw" 'BEGIN { exit !(b > 0) }'; then
		die "no throughput: $(tail -n 5 "$PDIR/tp.out")"
	fi
	note "ping-pong $lat usec over $obs round trips; throughput $bw MBps"
	stop "$spid"
	check_logs
	assert_conns shm sockperf client 2
	assert_conns shm sockperf server 2
	assert_conn_pairs 2
	assert_no_moves shm
}

# ---------------------------------------------------------------- iperf3
t_iperf3() {
	need iperf3 jq
	shm_phase iperf3 shunt
	local dir port
	for dir in fwd rev; do
		port=$(free_port)
		bg "server-$dir" iperf3 -s -1 -B 127.0.0.1 -p "$port" -J
		local spid=$BG_PID extra
		wait_port "$port" "$spid"
		if [[ $dir == fwd ]]; then extra=(-P 2); else extra=(-R); fi
		runx iperf3 -c 127.0.0.1 -p "$port" -t 2 -J "${extra[@]}" >"$PDIR/client-$dir.json" 2>"$PDIR/client-$dir.err" ||
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
	assert_conns shm iperf3 client 5
	assert_conns shm iperf3 server 5
	assert_conn_pairs 5
	assert_no_moves shm
}

# ---------------------------------------------------------------- asyncio
t_asyncio() {
	need python3
	shm_phase asyncio shunt
	local conns=4 bytes=3000000
	bg server python3 "$E2E_DIR/asyncio_echo.py" server --port-file "$PDIR/port" --conns $conns --hashes "$PDIR/server.sha"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	runx python3 "$E2E_DIR/asyncio_echo.py" client --port "$(cat "$PDIR/port")" --conns $conns \
		--bytes $bytes --seed 41 >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "asyncio client failed: $(tail -n 2 "$PDIR/client.out" "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "asyncio server failed"
	grep -q '^PASS' "$PDIR/client.out" || die "no PASS from the client"
	sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) recv_sha256=\2$/bytes=\1 sha256=\2/p' \
		"$PDIR/client.out" | sort >"$PDIR/client.sha"
	[[ $(wc -l <"$PDIR/client.sha") -eq $conns ]] || die "client hashes missing or sent != received"
	assert_same_file "$PDIR/client.sha" "$PDIR/server.sha" "client vs server hashes"
	check_logs
	assert_conns shm 'python3[^:]*' client $conns
	assert_conns shm 'python3[^:]*' server $conns
	assert_conn_pairs $conns
	assert_close shm 'python3[^:]*' $bytes $bytes $((2 * conns))
	assert_no_moves shm
}

# ---------------------------------------------------------------- prefork
t_prefork() {
	shm_phase prefork shunt
	local w=4 rounds=2 total
	runx "$PROGS/prefork_echo" --workers $w --bytes 1000000 --rounds $rounds \
		>"$PDIR/out" 2>"$PDIR/err" || die "prefork_echo failed: $(tail -n 3 "$PDIR/out")"
	grep -q '^PASS prefork_echo' "$PDIR/out" || die "no PASS"
	total=$((w * (rounds + 1)))
	check_logs
	assert_conns shm prefork_echo client $total
	assert_conns shm prefork_echo server $total
	assert_conn_pairs $total
	assert_log_pids 'role=server' $w
	# the first round: a short probe, then 1,000,000 bytes each way
	assert_log_count "$(close_re shm prefork_echo '1000[0-9]{3}' '1000[0-9]{3}')" $((2 * w))
	assert_no_moves shm
	assert_rundir_clean
}

subtest redis t_redis
subtest memcached t_memcached
subtest nginx t_nginx
subtest sockperf t_sockperf
subtest iperf3 t_iperf3
subtest asyncio t_asyncio
subtest prefork t_prefork
finish_subtests
