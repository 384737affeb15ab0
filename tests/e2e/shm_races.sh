#!/usr/bin/env bash
# Races and limits of the shm transport.  Each scenario is a subtest (run a
# subset with E2E_ONLY="late decline ..."); a failing one does not stop the
# others.  Every scenario checks the bytes and whether shm was used.
#   late       accept() long after the client wrote: (1) everything written
#              before accept, (2) more than a 64 KiB ring, the writer blocked
#              until accept -- both with offer_timeout_ms above the delay, so
#              shm must be used; (3) the delay longer than the offer timeout:
#              the client gives up and replays over TCP, bytes exact, and the
#              fallback is explained.  (tests/progs/late_accept)
#   decline    the server's rule `kernel server * *` declines every offer:
#              the client offered (transport=shm at connect), replays over
#              TCP; server says rule-kernel; bytes exact.
#   reuseport  a shunt listener and a plain listener in one SO_REUSEPORT
#              group: connections that land on the plain one cost the client
#              offer_timeout_ms (100 here) and must still carry exact bytes.
#   slow       ring full with a slow reader: 50 MB through a 64 KiB ring.
#   many       1,000 concurrent connections, all on shm, data verified.
#   churn      10,000 connections opened, used and closed in a loop: fds,
#              mappings and RSS of both processes do not grow between the
#              1,000th and the 10,000th (but for at most two process-wide
#              sockets made at first need), and the rundir is empty at the end
#              (in a private network namespace when root).
#   portchurn  (root) the ephemeral port range nearly full of TIME_WAIT:
#              shunt clients still connect, every one on shm (the client
#              connects as plain TCP does and names its offer after).
#   kill       kill -9 of the client mid-stream (the server sees EOF or
#              ECONNRESET within 5 s) and of the server (same for the client);
#              (root) of a client in a PID namespace of its own.
#   closethr   close() from another thread while threads wait in read,
#              epoll_wait, poll, recv on shm connections (close_thread).
source "$(dirname "$0")/lib_shm.sh"
need python3

# ---------------------------------------------------------------- late
late_one() { # NAME ARGS...: both modes, outputs compared
	local name=$1
	shift
	for MODE in plain shunt; do
		shm_phase "$name-$MODE" "$MODE"
		runx "$PROGS/late_accept" "$@" >"$PDIR/out" 2>"$PDIR/err" ||
			die "late_accept $* failed ($MODE): $(tail -n 2 "$PDIR/out" "$PDIR/err")"
		grep -q '^PASS late_accept' "$PDIR/out" || die "no PASS ($MODE)"
	done
	assert_same_file "$TMP/$name-plain/out" "$TMP/$name-shunt/out" "late_accept $* plain vs shunt"
}
t_late() {
	local n1=100000 n2=16000000
	# 1: all bytes in the ring long before accept
	SHUNT_ARGS=(--options offer_timeout_ms=5000)
	late_one late-written --bytes $n1 --late-ms 1000
	check_logs
	assert_conns shm late_accept client 1
	assert_conns shm late_accept server 1
	assert_conn_pairs 1
	assert_close shm late_accept $n1 $n1 2
	assert_no_moves shm
	assert_rundir_clean
	# 2: the writer blocks on a full 64 KiB ring until the late accept
	SHUNT_ARGS=(--options "offer_timeout_ms=5000,ring_size=65536")
	late_one late-blocked --bytes $n2 --late-ms 1000 --until-blocked
	grep -q 'writer blocked after 65536 of' "$PDIR/err" ||
		die "the client's writer did not block on the full ring: $(cat "$PDIR/err")"
	check_logs
	assert_conns shm late_accept client 1
	assert_conns shm late_accept server 1
	assert_close shm late_accept $n2 $n2 2
	assert_no_moves shm
	assert_rundir_clean
	# 3: accept later than offer_timeout_ms (500 by default): the client
	# replays over TCP; nothing lost, and the fallback says why.
	SHUNT_ARGS=()
	late_one late-timeout --bytes $n1 --late-ms 1000
	check_logs
	assert_log_count "$(conn_re late_accept client shm '-')" 1
	assert_kernel_conns late_accept server 1 offer-timeout
	assert_log_count "$(moved_re shm)" 1
	assert_moves_explained shm
	assert_log_lacks ': debug: shm close .*bytes_out=[1-9]'
	assert_rundir_clean
}

# ---------------------------------------------------------------- decline
t_decline() {
	local conns=4 bytes=3000000
	printf 'kernel server * *\n' >"$TMP/decline.conf"
	for MODE in plain shunt; do
		shm_phase "decline-$MODE" "$MODE"
		SHUNT_CONF=$TMP/decline.conf bg server "$PROGS/echo_server" --port-file "$PDIR/port" \
			--conns $conns --wait epoll
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		# The client writes at once: its first bytes go into the ring
		# before the server declines.
		runx "$PROGS/echo_client" --port "$(cat "$PDIR/port")" --conns $conns --bytes $bytes \
			--seed 23 --wait epoll >"$PDIR/client.out" 2>"$PDIR/client.err" ||
			die "echo_client failed ($MODE)"
		wait_exit "$spid" 30 || die "echo_server failed ($MODE)"
		grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client ($MODE)"
	done
	assert_same_file "$TMP/decline-plain/client.out" "$TMP/decline-shunt/client.out" "client output plain vs shunt"
	assert_same_file "$TMP/decline-plain/server.out" "$TMP/decline-shunt/server.out" "server output plain vs shunt"
	check_logs
	assert_log_count "$(conn_re echo_client client shm '-')" $conns
	assert_kernel_conns echo_server server $conns rule-kernel
	assert_log_count "echo_client$(moved_re shm)" $conns
	assert_moves_explained shm
	assert_log_lacks 'echo_server: debug: shm close '
	assert_rundir_clean
	# The client's bytes are in the ring before the server declines: all
	# written (1), or a full 64 KiB ring and a blocked writer (2).
	SHUNT_CONF=$TMP/decline.conf
	late_one decline-written --bytes 100000 --late-ms 0
	check_logs
	assert_log_count "$(conn_re late_accept client shm '-')" 1
	assert_kernel_conns late_accept server 1 rule-kernel
	assert_log_count "$(moved_re shm)" 1
	assert_moves_explained shm
	assert_rundir_clean
	SHUNT_ARGS=(--options ring_size=65536)
	late_one decline-blocked --bytes 16000000 --late-ms 0 --until-blocked
	grep -q 'writer blocked after 65536 of' "$PDIR/err" ||
		die "the client's writer did not block on the full ring: $(cat "$PDIR/err")"
	check_logs
	assert_log_count "$(conn_re late_accept client shm '-')" 1
	assert_kernel_conns late_accept server 1 rule-kernel
	assert_log_count "$(moved_re shm)" 1
	assert_moves_explained shm
	assert_rundir_clean
	SHUNT_ARGS=()
	unset SHUNT_CONF
}

# ---------------------------------------------------------------- reuseport
# An echo server on 127.0.0.1:PORT with SO_REUSEPORT; appends
# "conn bytes=N" to OUT for each connection that ended.
REUSEPORT_PY='
import socket, sys, threading
port, out = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", port))
s.listen(128)
def serve(c):
    n = 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
        n += len(d)
    c.close()
    with lock, open(out, "a") as f:
        f.write("conn bytes=%d\n" % n)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'
# reuseport_one NAME RING: SO_REUSEPORT group of a shunt and a plain listener.
reuseport_one() {
	local name=$1 ring=$2 conns=32 bytes=300000 port
	shm_phase "$name" shunt
	port=$(free_port)
	MODE=shunt bg shunt-server python3 -c "$REUSEPORT_PY" "$port" "$PDIR/shunt-server.conns"
	local s1=$BG_PID
	wait_port "$port" "$s1"
	MODE=plain bg plain-server python3 -c "$REUSEPORT_PY" "$port" "$PDIR/plain-server.conns"
	local s2=$BG_PID i
	for ((i = 0; i < 200; i++)); do
		[[ $(count_listeners "$port") -eq 2 ]] && break
		kill -0 "$s2" 2>/dev/null || die "the plain server died"
		sleep 0.05
	done
	[[ $(count_listeners "$port") -eq 2 ]] || die "expected 2 listeners in the SO_REUSEPORT group on $port"
	assert_preloaded "$(bg_prog_pid "$s1")"
	assert_not_preloaded "$(bg_prog_pid "$s2")"
	MODE=shunt
	SHUNT_ARGS=(--options "offer_timeout_ms=100,ring_size=$ring")
	runx "$PROGS/echo_client" --port "$port" --conns $conns --bytes $bytes --seed 29 \
		--wait epoll >"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed (ring $ring)"
	SHUNT_ARGS=()
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	# Both servers see every connection end (bounded wait).
	local a=0 b=0
	for ((i = 0; i < 200; i++)); do
		a=$( (wc -l <"$PDIR/shunt-server.conns") 2>/dev/null || echo 0)
		b=$( (wc -l <"$PDIR/plain-server.conns") 2>/dev/null || echo 0)
		[[ $((a + b)) -ge $conns ]] && break
		sleep 0.05
	done
	note "$a connections on the shunt listener, $b on the plain one"
	[[ $((a + b)) -eq $conns ]] || die "servers saw $((a + b)) connections end, expected $conns"
	[[ $a -gt 0 && $b -gt 0 ]] || die "SO_REUSEPORT put $a on the shunt server and $b on the plain one: the scenario needs both"
	[[ $(cat "$PDIR/shunt-server.conns" "$PDIR/plain-server.conns" | grep -vc "^conn bytes=$bytes\$") -eq 0 ]] ||
		die "a server echoed a byte count other than $bytes"
	stop "$s1"
	stop "$s2"
	check_logs
	# The client offered on every connection (the registry says a shunt
	# listener is there); those that the plain server took moved to TCP.
	# The shunt server may also be later than the short timeout (a
	# loaded machine, a slow accept loop): such a connection moved to TCP
	# too, with offer-timeout at both ends.  Either way the bytes were
	# checked above.
	local late on_shm
	late=$(log_count "$(conn_re 'python3[^:]*' server kernel offer-timeout)")
	on_shm=$(log_count "$(conn_re 'python3[^:]*' server shm '-')")
	[[ $((on_shm + late)) -eq $a ]] ||
		die "shunt server: $on_shm on shm + $late offer-timeout, expected $a connections: $(why_not shm 'python3[^:]*' server)"
	[[ $on_shm -gt 0 ]] || die "no connection of the shunt listener stayed on shm"
	[[ $late -eq 0 ]] || note "$late of the shunt listener's connections were later than offer_timeout_ms"
	assert_log_count "$(conn_re echo_client client shm '-')" $conns
	assert_log_count "echo_client$(moved_re shm)" $((b + late))
	assert_moves_explained shm
	assert_log_count "$(close_re shm echo_client $bytes $bytes)" "$on_shm"
	assert_rundir_clean
}
t_reuseport() {
	# 1 MiB ring: every byte is in the ring before the client shuts down
	# its side, then it has to wait for the echo and gives up.
	reuseport_one reuseport-1m 1048576
	# 64 KiB ring: the client gives up while its ring is full, long
	# before it shuts down.
	reuseport_one reuseport-64k 65536
}

# ---------------------------------------------------------------- slow
t_slow() {
	local bytes=50000000 want
	want=$("$PROGS/streamgen" 11 $bytes 2>/dev/null | sha256)
	for MODE in plain shunt; do
		shm_phase "slow-$MODE" "$MODE"
		SHUNT_ARGS=(--options ring_size=65536)
		bg server "$PROGS/stream_peer" server --port-file "$PDIR/port" --slow-us 100 --chunk 16384
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		runx "$PROGS/stream_peer" client --port "$(cat "$PDIR/port")" --bytes $bytes \
			>"$PDIR/client.out" 2>"$PDIR/client.err" || die "stream_peer client failed ($MODE)"
		wait_exit "$spid" 60 || die "stream_peer server failed ($MODE)"
		SHUNT_ARGS=()
		assert_eq "$(cat "$PDIR/server.out")" "server: recv bytes=$bytes sha256=$want end=EOF" "slow reader's stream ($MODE)"
		assert_eq "$(cat "$PDIR/client.out")" "client: send end=done" "writer ($MODE)"
	done
	check_logs
	assert_conns shm stream_peer client 1
	assert_conns shm stream_peer server 1
	assert_log_count "$(close_re shm stream_peer 0 $bytes)" 1
	assert_log_count "$(close_re shm stream_peer $bytes 0)" 1
	assert_no_moves shm
	assert_rundir_clean
}

# ---------------------------------------------------------------- many
t_many() {
	local n=1000
	for MODE in plain shunt; do
		shm_phase "many-$MODE" "$MODE"
		bg server "$PROGS/conn_churn" server --mode many --conns $n --port-file "$PDIR/port"
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		runx "$PROGS/conn_churn" client --mode many --conns $n --port "$(cat "$PDIR/port")" \
			>"$PDIR/client.out" 2>"$PDIR/client.err" || die "conn_churn client failed ($MODE)"
		wait_exit "$spid" 60 || die "conn_churn server failed ($MODE)"
		grep -q '^PASS conn_churn client' "$PDIR/client.out" || die "no PASS from the client ($MODE)"
		grep -q "^server conns=$n " "$PDIR/server.out" || die "server did not see $n connections ($MODE)"
		grep -v open_fds "$PDIR/client.out" >"$PDIR/client.cmp"
	done
	assert_same_file "$TMP/many-plain/client.cmp" "$TMP/many-shunt/client.cmp" "client output plain vs shunt"
	assert_same_file "$TMP/many-plain/server.out" "$TMP/many-shunt/server.out" "server output plain vs shunt"
	check_logs
	assert_conns shm conn_churn client $n
	assert_conns shm conn_churn server $n
	assert_conn_pairs $n
	assert_no_moves shm
	# every connection echoed what it sent, through the rings
	local total bad fds
	total=$(sed -n 's/^server conns=[0-9]* bytes=\([0-9]*\)$/\1/p' "$PDIR/server.out")
	assert_log_count "$(close_re shm conn_churn '[0-9]+' '[0-9]+')" $((2 * n))
	bad=$(log_lines "$(close_re shm conn_churn '[0-9]+' '[0-9]+')" | awk '{split($7, a, "="); split($8, b, "="); if (a[2] != b[2] || a[2] == 0) print}' | head -n 3)
	[[ -z "$bad" ]] || die "shm close with bytes_in != bytes_out or 0: $bad"
	assert_eq "$(log_lines 'conn_churn: debug: shm close' | awk '{split($7, a, "="); s += a[2]} END {print s}')" \
		$((2 * total)) "bytes counted at close by both ends vs bytes echoed"
	fds=$(sed -n 's/^client open_fds=//p' "$PDIR/client.out")
	note "client held $fds fds with $n shm connections open"
	# Per connection: the socket, two wake sockets, the slot's lock (see
	# "Ring arenas" in docs/ARCHITECTURE.md); plus kept sockets and arenas.
	[[ -n "$fds" && $fds -le $((4 * n + 128)) ]] || die "client held $fds fds for $n connections (> 4 per connection)"
	assert_rundir_clean
}

# ---------------------------------------------------------------- churn
# fd_growth ERR: the fds conn_churn listed at its last report and not at
# its first (it lists them on stderr at each report).
fd_growth() {
	awk '/^report at=/ { n++ } /^fd / { if (n == 1) a[$2 " " $4] = 1; else if (n > 1) b[$2 " " $4] = 1 }
	     END { for (k in b) if (!(k in a)) printf "new fd %s; ", k }' "$1"
}
t_churn() {
	local n=10000 f role ns=""
	# In a private network namespace when root: its 20,000 TIME_WAIT
	# sockets then use no port of the host's.
	if can_netns; then
		new_netns
		ns=$NETNS
	fi
	for MODE in plain shunt; do
		shm_phase "churn-$MODE" "$MODE"
		local t0=$SECONDS
		bg_in "$ns" server "$PROGS/conn_churn" server --mode loop --conns $n --report 1000,$n --port-file "$PDIR/port"
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		run_in "$ns" "$PROGS/conn_churn" client --mode loop --conns $n --report 1000,$n --port "$(cat "$PDIR/port")" \
			>"$PDIR/client.out" 2>"$PDIR/client.err" || die "conn_churn client failed ($MODE)"
		wait_exit "$spid" 60 || die "conn_churn server failed ($MODE)"
		note "$MODE: $n connections in $((SECONDS - t0)) s"
		for f in client server; do
			grep -q "^PASS conn_churn $f" "$PDIR/$f.out" || die "no PASS from the $f ($MODE)"
			grep -v ' at=' "$PDIR/$f.out" >"$PDIR/$f.cmp"
			# fds and mappings the same, RSS within 1 MiB
			read -r f1 r1 m1 < <(sed -n "s/^$f at=1000 fds=\([0-9]*\) rss_kb=\([0-9]*\) maps=\([0-9]*\)$/\1 \2 \3/p" "$PDIR/$f.out")
			read -r f2 r2 m2 < <(sed -n "s/^$f at=$n fds=\([0-9]*\) rss_kb=\([0-9]*\) maps=\([0-9]*\)$/\1 \2 \3/p" "$PDIR/$f.out")
			[[ -n "$f1" && -n "$f2" ]] || die "$f printed no resource report ($MODE)"
			note "$MODE $f: fds $f1 -> $f2, rss $r1 -> $r2 KiB, mappings $m1 -> $m2"
			# A process-wide socket shunt makes on first need (the
			# wake socket, bound when a wait first sleeps in poll)
			# may come after connection 1000: at most two such, not
			# one per connection (a leak here would be thousands).
			[[ $f2 -le $((f1 + 2)) ]] || die "$f ($MODE): open fds grew from $f1 to $f2 between connection 1000 and $n: $(fd_growth "$PDIR/$f.err")"
			[[ $f2 -le $f1 ]] || note "$f ($MODE): made later, once: $(fd_growth "$PDIR/$f.err")"
			[[ $m2 -le $((m1 + 2)) ]] || die "$f ($MODE): mappings grew from $m1 to $m2 between connection 1000 and $n"
			[[ $r2 -le $((r1 + 1024)) ]] || die "$f ($MODE): RSS grew from $r1 to $r2 KiB between connection 1000 and $n"
		done
	done
	for f in client server; do
		assert_same_file "$TMP/churn-plain/$f.cmp" "$TMP/churn-shunt/$f.cmp" "$f output plain vs shunt"
	done
	check_logs
	assert_conns shm conn_churn client $n
	assert_conns shm conn_churn server $n
	assert_no_moves shm
	assert_log_count "$(close_re shm conn_churn '[1-9][0-9]*' '[1-9][0-9]*')" $((2 * n))
	assert_rundir_clean
	# Nothing else either, but the per-process statistics files (s/PID)
	# that the next shunt process sweeps by design: at most one per process;
	# the registry's generation (l/.generation, one page per rundir,
	# core/shunt_registry.c), the announced offers (o/.pending,
	# shm/shm_pending.c) and the table offers are named in (o/.names,
	# shm/shm_names.c), which live as long as the rundir.
	local left nstat
	left=$(find "$RUNDIR" \( -type f -o -type s \) ! -path "$RUNDIR/s/*" \
		! -path "$RUNDIR/l/.generation" ! -path "$RUNDIR/o/.pending" \
		! -path "$RUNDIR/o/.names" | head -n 5)
	[[ -z "$left" ]] || die "files left in the rundir: $(echo "$left" | tr '\n' ' ')"
	nstat=$(find "$RUNDIR/s" -type f 2>/dev/null | wc -l)
	[[ $nstat -le 2 ]] || die "$nstat statistics files left by 2 processes"
}

# ---------------------------------------------------------------- portchurn
# Binding before connect (to name the offer by its 4-tuple before the SYN)
# takes ports the way bind() does, which cannot reuse a port whose earlier
# connection is in TIME_WAIT, while a plain connect() can (loopback,
# tcp_tw_reuse=2): such clients failed or fell back where plain TCP did
# not.  The client now connects as plain TCP does and names its offer once
# connect() has picked the port (shm/shm_pending.c).  In a private
# namespace with 5,000 ephemeral ports, 5,000 short connections leave most
# client ports in TIME_WAIT (fewer free than needed next); then 1,800 more
# connections between shunt processes must all succeed, as 1,800 plain ones
# do, with the same bytes, and every one on shm at both ends.
t_portchurn() {
	if ! can_netns; then
		note "SKIP portchurn: needs root for a private network namespace"
		return 0
	fi
	local fill=5000 n tw
	new_netns
	ip netns exec "$NETNS" sysctl -qw net.ipv4.ip_local_port_range="40000 44999" ||
		die "cannot set the port range in $NETNS"
	MODE=plain
	shm_phase portchurn-fill plain
	# Servers listen below the range: an ephemeral port for the listener
	# may not be left once the clients have used them all.
	bg_in "$NETNS" server "$PROGS/conn_churn" server --mode loop --conns $fill --port 39001 \
		--port-file "$PDIR/port"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	run_in "$NETNS" "$PROGS/conn_churn" client --mode loop --conns $fill --port "$(cat "$PDIR/port")" \
		>"$PDIR/client.out" 2>"$PDIR/client.err" || die "filling connections failed"
	wait_exit "$spid" 30 || die "conn_churn server failed (fill)"
	tw=$(ip netns exec "$NETNS" ss -Htan state time-wait | wc -l)
	note "$tw client ports of 5000 in TIME_WAIT"
	# (connect() itself reuses ports whose TIME_WAIT is older than 1 s, so
	# a slow fill leaves fewer: the connections to make are counted from
	# what is left, 300 more than the free ports.)
	[[ $tw -ge 2000 ]] || die "the scenario needs >= 2000 of 5000 ports in TIME_WAIT, found $tw"
	n=$((5000 - tw + 300))
	local lport=39002
	for MODE in shunt plain; do
		shm_phase "portchurn-$MODE" "$MODE"
		local t0=$SECONDS
		bg_in "$NETNS" server "$PROGS/conn_churn" server --mode loop --conns $n --port $((lport++)) \
			--port-file "$PDIR/port"
		spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		run_in "$NETNS" "$PROGS/conn_churn" client --mode loop --conns $n --port "$(cat "$PDIR/port")" \
			>"$PDIR/client.out" 2>"$PDIR/client.err" ||
			die "$n connections with the port range full of TIME_WAIT failed ($MODE): $(tail -n 2 "$PDIR/client.out" "$PDIR/client.err")"
		wait_exit "$spid" 60 || die "conn_churn server failed ($MODE)"
		note "$MODE: $n connections in $((SECONDS - t0)) s"
	done
	assert_same_file "$TMP/portchurn-plain/client.out" "$TMP/portchurn-shunt/client.out" "client output plain vs shunt"
	phase portchurn-shunt shunt
	check_logs
	assert_log_count "$(conn_re conn_churn client '[a-z]+' '[a-z-]*')" "$n"
	local bad
	bad=$(log_lines "$(conn_re conn_churn client '[a-z]+' '[a-z-]*')" |
		grep -Ev ' transport=shm reason=-$' | head -n 3 || true)
	[[ -z "$bad" ]] || die "portchurn: a client not on shm: $bad"
	local nshm_c nshm_s
	nshm_c=$(log_count "$(conn_re conn_churn client shm '-')")
	nshm_s=$(log_count "$(conn_re conn_churn server shm '-')")
	[[ $nshm_c -eq $n && $nshm_s -eq $n ]] || die "portchurn: $nshm_c clients and $nshm_s servers of $n on shm"
	note "portchurn: all $n on shm at both ends"
}

# ---------------------------------------------------------------- kill
# kill_one VICTIM MODE: a bidirectional stream; once the survivor has
# received 20 MB, kill -9 the victim; the survivor must end within 5 s with
# EOF or ECONNRESET on its reads and EPIPE or ECONNRESET on its writes.
kill_one() {
	local victim=$1 survivor vpid spid pfile pidns=${3:-} pre=()
	MODE=$2
	# pidns: the victim runs in a PID namespace of its own, so its pid
	# means another process (init, a kernel thread) to the survivor.
	[[ -n $pidns ]] && pre=(unshare --pid --fork)
	[[ $victim == client ]] && survivor=server || survivor=client
	shm_phase "kill-$victim-$MODE${pidns:+-pidns}" "$MODE"
	pfile=$PDIR/progress
	local sargs=() cargs=()
	[[ $survivor == server ]] && sargs=(--progress-file "$pfile" --progress-bytes 20000000)
	[[ $survivor == client ]] && cargs=(--progress-file "$pfile" --progress-bytes 20000000)
	bg server "$PROGS/stream_peer" server --bidi --port-file "$PDIR/port" "${sargs[@]}"
	local sbg=$BG_PID
	wait_file "$PDIR/port" "$sbg"
	if [[ -n $pidns ]]; then
		# unshare outside shunt's prefix: the sanitizer build's library
		# cannot be preloaded into programs not built with it.
		_prefix "$MODE" "$E2E_BG_LIFETIME"
		"${pre[@]}" "${PFX[@]}" "$PROGS/stream_peer" client --bidi --bytes 0 --port "$(cat "$PDIR/port")" \
			"${cargs[@]}" </dev/null >"$PDIR/client.out" 2>"$PDIR/client.err" &
		BG_PID=$!
		BG_PIDS+=("$BG_PID")
	else
		bg client "$PROGS/stream_peer" client --bidi --bytes 0 --port "$(cat "$PDIR/port")" "${cargs[@]}"
	fi
	local cbg=$BG_PID
	if [[ $victim == client ]]; then vpid=$cbg spid=$sbg; else vpid=$sbg spid=$cbg; fi
	wait_file "$pfile" "$spid" 30
	local prog
	prog=$(bg_prog_pid "$vpid")
	# (pidns: unshare's child is the namespace's init; killing it ends the
	# namespace, the program with it.)
	[[ -n "$prog" ]] || die "no $victim process"
	kill -KILL "$prog"
	local t0=$SECONDS
	wait_exit "$spid" 5 || die "the $survivor failed after the $victim was killed ($MODE): $(cat "$PDIR/$survivor.err")"
	note "$MODE: $survivor ended $((SECONDS - t0)) s after kill -9 of the $victim: $(tr '\n' ' ' <"$PDIR/$survivor.out")"
	grep -Eq "^$survivor: recv bytes(=[0-9]+ sha256=[0-9a-f]+|>0=1) end=(EOF|ECONNRESET)\$" "$PDIR/$survivor.out" ||
		die "$survivor's reads ended badly ($MODE): $(cat "$PDIR/$survivor.out")"
	grep -Eq "^$survivor: send end=(EPIPE|ECONNRESET)\$" "$PDIR/$survivor.out" ||
		die "$survivor's writes ended badly ($MODE): $(cat "$PDIR/$survivor.out")"
	wait "$vpid" 2>/dev/null || true
	if [[ $MODE == shunt ]]; then
		check_logs
		assert_conns shm stream_peer client 1
		assert_conns shm stream_peer server 1
	fi
}
t_kill() {
	local v
	for v in client server; do
		kill_one "$v" plain
		kill_one "$v" shunt
	done
	# Issue 14, item 7: a peer in another PID namespace.  Its death must be
	# seen as promptly (liveness from the arena's OFD locks, not its pid).
	if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null && unshare --pid --fork true 2>/dev/null; then
		kill_one client shunt pidns
	else
		note "SKIP kill in a PID namespace (needs root and unshare)"
	fi
}

# ---------------------------------------------------------------- closethr
t_closethr() {
	for MODE in plain shunt; do
		shm_phase "closethr-$MODE" "$MODE"
		local rc=0
		runx "$PROGS/close_thread" >"$PDIR/out" 2>"$PDIR/err" || rc=$?
		[[ $rc -eq 0 ]] || die "close_thread exited with status $rc ($MODE)$( ((rc > 128)) && echo ", signal $((rc - 128))")"
		grep -q '^PASS close_thread' "$PDIR/out" || die "no PASS ($MODE)"
	done
	assert_same_file "$TMP/closethr-plain/out" "$TMP/closethr-shunt/out" "close_thread trace plain vs shunt"
	check_logs
	local n
	n=$(log_count "$(conn_re close_thread client '[a-z]+')")
	[[ $n -ge 7 ]] || die "expected >= 7 connections, found $n"
	assert_conns shm close_thread client "$n"
	assert_conns shm close_thread server "$n"
}

subtest late t_late
subtest decline t_decline
subtest reuseport t_reuseport
subtest slow t_slow
subtest many t_many
subtest churn t_churn
subtest portchurn t_portchurn
subtest kill t_kill
subtest closethr t_closethr
finish_subtests
