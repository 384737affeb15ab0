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
# And the wakeups needed no name to begin with: while the server sleeps,
# o/ holds no socket file, the server's wake sockets are bound in the
# abstract namespace (@shunt-w-<id> in /proc/net/unix), and after the
# rundir went, under strace, the server's wait ends with a datagram read
# from one of them (the peer's wakeup, not the wait's re-check, which
# reads none).
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

# wake_fds PID: the fds of PID that are datagram sockets bound in the
# abstract namespace under shunt's wake-socket names (space-separated).
wake_fds() {
	local pid=$1 inos fd link out=''
	# /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path.
	inos=" $(awk 'length($8) == 25 && $8 ~ /^@shunt-w-[0-9a-f]+$/ { printf "%s ", $7 }' /proc/net/unix) "
	for fd in /proc/"$pid"/fd/*; do
		link=$(readlink "$fd" 2>/dev/null) || continue
		[[ $link =~ ^socket:\[([0-9]+)\]$ && $inos == *" ${BASH_REMATCH[1]} "* ]] &&
			out+="${fd##*/} "
	done
	echo "$out"
}

[[ -n $EPOLL_NRS ]] || { echo "SKIP: $E2E_NAME: system call numbers unknown for $(uname -m)"; exit 0; }

# Whether a wakeup came from the peer's datagram is seen in the server's
# system calls: after its wait, shunt reads the datagram from the wake
# socket that woke it (recvfrom, 1 byte).  Without strace (or ptrace) that
# one check is left out.
STRACE=
if command -v strace >/dev/null 2>&1; then
	STRACE=strace
else
	note "no strace: the wakeup's datagram is not observed"
fi

# strace_start PID CALLS: trace PID's CALLS into $PDIR/strace, once
# attached.  strace_stop: detach, the file complete.
strace_start() {
	local i
	strace -qq -p "$1" -e trace="$2" -e signal=none -o "$PDIR/strace" 2>"$PDIR/strace.err" &
	STRACE_PID=$!
	for ((i = 0; i < 300; i++)); do
		[[ $(sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/$1/status") != 0 ]] && return 0
		kill -0 "$STRACE_PID" 2>/dev/null || die "strace could not attach: $(cat "$PDIR/strace.err")"
		sleep 0.05
	done
	die "strace never attached to $1"
}
strace_stop() {
	kill -INT "$STRACE_PID" 2>/dev/null
	wait "$STRACE_PID" 2>/dev/null || true
}
# wake_reads "FD...": datagrams read from those fds in $PDIR/strace.
wake_reads() {
	local fd n=0 c
	for fd in $1; do
		c=$(grep -cE "^recvfrom\($fd, .*\) = 1\$" "$PDIR/strace" || true)
		n=$((n + c))
	done
	echo "$n"
}

scenario() {
	local wait=$1 nrs=$2 total=4096 left i port cline sline fd tp moved newtp= wfds woke
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
	# Asleep with its wake sockets armed, the server has none in o/: they
	# are in the abstract namespace, nothing anyone could unlink.
	left=$(find "$RUNDIR/o" -type s | head -n 3)
	[[ -z $left ]] || die "wake sockets named in the rundir: $left"
	wfds=$(wake_fds "$HOLD_SPID")
	(($(wc -w <<<"$wfds") >= NCONN)) ||
		die "the server holds ${wfds:-no} abstract wake sockets for $NCONN connections"
	note "no wake socket in o/; the server's abstract ones: fds $wfds"
	# Everything under the rundir, the rundir itself kept.
	find "$RUNDIR" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
	left=$(find "$RUNDIR" -mindepth 1 | head -n 3)
	[[ -z $left ]] || die "the rundir is not empty: $left"
	note "rundir emptied under $NCONN live shm connections, the server asleep in $wait"
	# The server was asleep when the names went: its wait must end all
	# the same, and again in its next sleep.  (One message a connection
	# each time: a sleep that misses its wakeup lasts until its re-check.)
	# The first time under strace: the wait must end with the datagram.
	[[ -n $STRACE ]] && strace_start "$HOLD_SPID" recvfrom && wait_asleep "$HOLD_SPID" "$nrs"
	hold_cmd C "echo 1000" '^echoed '
	if [[ -n $STRACE ]]; then
		strace_stop
		woke=$(wake_reads "$wfds")
		((woke >= 1)) || die "no wakeup datagram read from a wake socket (fds $wfds): $(head -n 5 "$PDIR/strace")"
		note "the server read $woke wakeup datagrams from its abstract wake sockets"
	fi
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
