#!/usr/bin/env bash
# shellcheck disable=SC2030,SC2031 # subtests run in subshells by design
# Every file of the rundir deleted while shm connections live (issue 14):
# no sleep may depend on a name anyone can unlink.
#
# hold_echo (tests/progs) holds 3 connections between a server that sleeps
# in poll() (subtest poll) or epoll_wait() (subtest epoll) and a client
# driven by commands.  Once every connection is on shm at both ends and the
# server is asleep in its wait (its state and system call, from /proc), the
# whole content of the rundir goes (rm -rf: registry, offers, ring arenas,
# wake sockets, counters).  Then:
#   * the client sends more bytes on every connection and waits for the
#     echo: the sleeping server must wake, read them and answer; byte-exact
#     (the client checks every offset); each command is bounded by 20 s,
#     which only turns a hang into a failure;
#   * new connections still work, byte-exact (on the kernel path or on
#     shm, whatever the library can still do there), both ends agreeing;
#   * the old connections stayed on shm to the end (no move) and closed
#     with exactly the bytes the client moved.
source "$(dirname "$0")/lib_shm.sh"

NCONN=3

# hold_start WAIT: hold_echo server (sleeping in WAIT) and client in this
# phase, driven through fifos (fds 3/4: server in/out, 5/6: client in/out;
# transcripts in $PDIR/server.out, client.out).  Sets HOLD_S, HOLD_C (the
# background pids) and HOLD_SPID (the server program's).
hold_start() {
	local f i
	for f in sin sout cin cout; do
		rm -f "$PDIR/$f"
		mkfifo -m 600 "$PDIR/$f"
	done
	# Held read-write here so no open blocks (as in e2e_stat.sh).
	exec 3<>"$PDIR/sin" 4<>"$PDIR/sout" 5<>"$PDIR/cin" 6<>"$PDIR/cout"
	_prefix "$MODE" "$E2E_BG_LIFETIME"
	"${PFX[@]}" "$PROGS/hold_echo" server --host 127.0.0.1 --port-file "$PDIR/port" --wait "$1" \
		<"$PDIR/sin" >"$PDIR/sout" 2>"$PDIR/server.err" 3>&- 4>&- 5>&- 6>&- &
	HOLD_S=$!
	BG_PIDS+=("$HOLD_S")
	wait_file "$PDIR/port" "$HOLD_S"
	"${PFX[@]}" "$PROGS/hold_echo" client --host 127.0.0.1 --port "$(cat "$PDIR/port")" \
		<"$PDIR/cin" >"$PDIR/cout" 2>"$PDIR/client.err" 3>&- 4>&- 5>&- 6>&- &
	HOLD_C=$!
	BG_PIDS+=("$HOLD_C")
	# The server has written its port: timeout(1)'s child is hold_echo.
	for ((i = 0; i < 200; i++)); do
		HOLD_SPID=$(bg_prog_pid "$HOLD_S")
		[[ -n $HOLD_SPID && $(cat "/proc/$HOLD_SPID/comm" 2>/dev/null) == hold_echo ]] && return 0
		sleep 0.05
	done
	die "no pid for the hold_echo server"
}

# wait_asleep PID "SYSCALL...": until PID's only thread sleeps (state S) in
# one of these system calls (numbers, from /proc/PID/syscall): asleep in
# the kernel's wait, shunt's wake sockets armed.
wait_asleep() {
	local pid=$1 nrs=$2 i st='' nr=''
	for ((i = 0; i < 300; i++)); do
		st=$(sed -n 's/.*) \([A-Z]\) .*/\1/p' "/proc/$pid/stat" 2>/dev/null || true)
		read -r nr _ <"/proc/$pid/syscall" 2>/dev/null || nr=''
		[[ $st == S && " $nrs " == *" $nr "* ]] && return 0
		kill -0 "$pid" 2>/dev/null || die "process $pid exited"
		sleep 0.05
	done
	die "process $pid never slept in its wait (state $st, system call $nr)"
}

# The kernel's system calls behind poll() and epoll_wait() (shunt waits in
# ppoll and epoll_pwait; libc's own calls may use the others).
case $(uname -m) in
x86_64) POLL_NRS="7 271" EPOLL_NRS="232 281 441" ;;
aarch64) POLL_NRS="73" EPOLL_NRS="22 441" ;;
*) echo "SKIP: $E2E_NAME: system call numbers unknown for $(uname -m)" && exit 0 ;;
esac

scenario() {
	local wait=$1 nrs=$2 total=4096 left i port cline sline fd tp moved newtp=
	shm_phase "$wait" shunt
	hold_start "$wait"
	hold_cmd C "open $NCONN" '^done open$'
	hold_cmd C "echo 100000" '^echoed '
	total=$((total + 100000))
	# Every connection on shm at both ends (the decision lines are written
	# before connect() and accept() return).
	check_logs
	assert_conns shm hold_echo client $NCONN
	assert_conns shm hold_echo server $NCONN
	assert_conn_sets
	assert_no_moves shm
	wait_asleep "$HOLD_SPID" "$nrs"
	# Everything under the rundir, the rundir itself kept.
	find "$RUNDIR" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
	left=$(find "$RUNDIR" -mindepth 1 | head -n 3)
	[[ -z $left ]] || die "the rundir is not empty: $left"
	note "rundir emptied under $NCONN live shm connections, the server asleep in $wait"
	# The server was asleep when the names went: its wait must end all
	# the same, and again in its next sleep.  (One message a connection
	# each time: a sleep that misses its wakeup lasts until its re-check.)
	hold_cmd C "echo 1000" '^echoed '
	wait_asleep "$HOLD_SPID" "$nrs"
	hold_cmd C "echo 1001" '^echoed '
	total=$((total + 2001))
	note "the server, asleep in $wait, woke for every byte sent after the rundir went"

	# New connections, and more bytes on all of them.
	hold_cmd C "open 2" '^done open$'
	hold_cmd C "echo 1002" '^echoed 1002 conns=5$'
	total=$((total + 1002))
	hold_cmd C totals '^done totals$'
	hold_end
	check_logs
	assert_log_count "$(conn_re hold_echo client)" $((NCONN + 2))
	assert_log_count "$(conn_re hold_echo server)" $((NCONN + 2))
	# Every connection: the transport it ended on, the same at both ends.
	# The old ones stayed on shm.  A new one may be offered on shm and
	# moved to TCP before its first byte, its offer not named (o/ is
	# gone): the client's decision line, then a move that says why.
	for ((i = 0; i < NCONN + 2; i++)); do
		port=$(sed -n "s/^conn $i port=\\([0-9]*\\) bytes=.*/\\1/p" "$PDIR/client.out")
		cline=$(log_lines "$(conn_re hold_echo client)" | grep -F " local=127.0.0.1:$port " || true)
		sline=$(log_lines "$(conn_re hold_echo server)" | grep -F " peer=127.0.0.1:$port " || true)
		[[ -n $port && -n $cline && -n $sline ]] ||
			die "connection $i (port $port): no decision line at both ends"
		fd=$(sed -n 's/.* conn fd=\([0-9]*\) .*/\1/p' <<<"$cline")
		tp=$(sed -n 's/.* transport=\([a-z]*\) .*/\1/p' <<<"$cline")
		moved=$(log_lines "hold_echo$(moved_re shm)" | grep -c -F " moved fd=$fd " || true)
		[[ $tp == shm && $moved -gt 0 ]] && tp=kernel
		[[ $sline == *" transport=$tp "* ]] ||
			die "connection $i (port $port): the client ended on $tp (moves: $moved), the server: $sline"
		if ((i < NCONN)); then
			[[ $tp == shm ]] || die "connection $i left shm: $cline (moves: $moved)"
		else
			newtp+=" $tp"
		fi
	done
	assert_moves_explained shm
	# The old connections closed on shm with every byte the client moved.
	assert_log_count "$(close_re shm hold_echo "$total" "$total")" $((2 * NCONN))
	note "new connections after the rundir went:$newtp; every byte right"
}

subtest poll scenario poll "$POLL_NRS"
subtest epoll scenario epoll "$EPOLL_NRS"
finish_subtests
