#!/usr/bin/env bash
# shm connections across fork, exec and stdio (plain vs shunt, outputs
# compared).  Subtests (E2E_ONLY="fork exec fdopen-server ..."):
#   fork    fork_server: accept, fork, the child serves the connection, the
#           parent closes its copy (and the child closes its copy of the
#           listener).  Two rounds of 4 concurrent echo_client connections:
#           every connection on shm at both ends, the bytes counted in the
#           children.
#   arena   arena_fork: a connection shared by fork keeps its ring memory
#           while the parent makes new connections (which reuse rings).
#   exec    exec_child: connections inherited across execve (the program
#           itself with the fd in argv; /bin/cat on stdin/stdout) are moved
#           to TCP before the exec (reason exec), data written before the
#           exec included: nothing lost in either direction.
#   late    late_reader: the server writes and exits, then the client execs
#           (or forks) with most of the stream unread in its ring: every
#           byte still reaches the reader once (the exec'd image reads a
#           spill the exec passed on).
#   fdopen-* fdopen_pair: fdopen() + fgets/fputs on an shm connection with
#           unread bytes waiting in both directions: the server alone uses
#           stdio (-server); both ends do (-both-server-first,
#           -both-client-first); the server shuts down its side before the
#           client's fdopen (-shutdown-first).
source "$(dirname "$0")/lib_shm.sh"

# ---------------------------------------------------------------- fork
t_fork() {
	local rounds=2 conns=4 bytes=2000000 r total
	total=$((rounds * conns))
	for MODE in plain shunt; do
		shm_phase "fork-$MODE" "$MODE"
		bg server "$PROGS/fork_server" --port-file "$PDIR/port" --conns $total
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		for ((r = 0; r < rounds; r++)); do
			runx "$PROGS/echo_client" --port "$(cat "$PDIR/port")" --conns $conns --bytes $bytes \
				--seed $((50 + r)) --wait epoll >"$PDIR/client-$r.out" 2>"$PDIR/client-$r.err" ||
				die "echo_client round $r failed ($MODE)"
		done
		wait_exit "$spid" 30 || die "fork_server failed ($MODE): $(tail -n 2 "$PDIR/server.out")"
		grep -q "^PASS fork_server conns=$total" "$PDIR/server.out" || die "no PASS from fork_server ($MODE)"
		sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) recv_sha256=\2$/conn bytes=\1 sha256=\2/p' \
			"$PDIR"/client-*.out | sort >"$PDIR/client.sha"
		grep '^conn ' "$PDIR/server.out" | sort >"$PDIR/server.sha" || true
		[[ $(wc -l <"$PDIR/client.sha") -eq $total ]] || die "client hashes missing or sent != echoed ($MODE)"
		assert_same_file "$PDIR/client.sha" "$PDIR/server.sha" "client vs forked children's hashes ($MODE)"
	done
	assert_same_file "$TMP/fork-plain/server.sha" "$TMP/fork-shunt/server.sha" "children's hashes plain vs shunt"
	check_logs
	assert_log_count "$(conn_re fork_server server '[a-z]+' '[a-z-]*')" $total
	assert_log_count "$(conn_re echo_client client '[a-z]+' '[a-z-]*')" $total
	# round 1: the listener's registration must survive the first child's
	# close() of its inherited copy, so round 2 is on shm too
	assert_conns shm echo_client client $total
	assert_conns shm fork_server server $total
	assert_conn_pairs $total
	# the bytes went through the rings of the children; the parent's
	# copies closed unused
	local parent
	parent=$(log_lines "$(conn_re fork_server server '[a-z]+')" | head -n 1 | sed 's/^shunt\[\([0-9]*\)\].*/\1/')
	assert_log_count "$(close_re shm fork_server $bytes $bytes)" $total
	if log_lines "$(close_re shm fork_server $bytes $bytes)" | grep -q "^shunt\\[$parent\\]"; then
		die "the parent ($parent) counted the children's bytes"
	fi
	assert_log_pids "$(close_re shm fork_server $bytes $bytes)" $total
	assert_close shm echo_client $bytes $bytes $total
	assert_no_moves shm
}

# ---------------------------------------------------------------- exec
t_exec() {
	local n=4000000
	for MODE in plain shunt; do
		shm_phase "exec-$MODE" "$MODE"
		runx "$PROGS/exec_child" --bytes $n >"$PDIR/out" 2>"$PDIR/err" ||
			die "exec_child failed ($MODE): $(tail -n 3 "$PDIR/out" "$PDIR/err")"
		grep -q '^PASS exec_child' "$PDIR/out" || die "no PASS ($MODE)"
	done
	assert_same_file "$TMP/exec-plain/out" "$TMP/exec-shunt/out" "exec_child output plain vs shunt"
	check_logs
	assert_conns shm exec_child client 3
	assert_conns shm exec_child server 3
	assert_conn_pairs 3
	# parts 1 and 2 exec with the connection open: moved to TCP first, by
	# the child that execs (not the parent); part 3's is FD_CLOEXEC
	assert_log_count "exec_child$(moved_re shm exec)" 2
	local parent
	parent=$(log_lines "$(conn_re exec_child client '[a-z]+')" | head -n 1 | sed 's/^shunt\[\([0-9]*\)\].*/\1/')
	if log_lines "exec_child$(moved_re shm exec)" | grep -q "^shunt\\[$parent\\]"; then
		die "the parent moved a connection for an exec it did not do"
	fi
	assert_moves_explained shm
	assert_log_lacks '^shunt\[[0-9]+\] cat: debug: conn '
}

# ---------------------------------------------------------------- fdopen
t_fdopen() { # NAME ARGS...
	local name=$1
	shift
	for MODE in plain shunt; do
		shm_phase "fdopen-$name-$MODE" "$MODE"
		runx "$PROGS/fdopen_pair" "$@" >"$PDIR/out" 2>"$PDIR/err" ||
			die "fdopen_pair $* failed ($MODE): $(tail -n 3 "$PDIR/out" "$PDIR/err")"
		grep -q '^PASS fdopen_pair' "$PDIR/out" || die "no PASS ($MODE)"
	done
	assert_same_file "$TMP/fdopen-$name-plain/out" "$TMP/fdopen-$name-shunt/out" "fdopen_pair $* plain vs shunt"
	check_logs
	assert_conns shm fdopen_pair client 1
	assert_conns shm fdopen_pair server 1
	assert_log_has "fdopen_pair$(moved_re shm stdio)" 1
	assert_moves_explained shm
}

# ---------------------------------------------------------------- arena
# A server sends 512 KiB and closes; the client forks with the connection
# open, the parent closes its copy and makes 64 connections of its own, and
# only then does the child read the rest.  Ring memory is reused across
# connections: the child's slot must not be handed out while it may still
# read it (every byte checked, to EOF).
t_arena() {
	local conns=64
	for MODE in plain shunt; do
		shm_phase "arena-$MODE" "$MODE"
		runx "$PROGS/arena_fork" --conns $conns >"$PDIR/out" 2>"$PDIR/err" ||
			die "arena_fork failed ($MODE): $(tail -n 2 "$PDIR/err")"
		grep -q "^PASS arena_fork conns=$conns" "$PDIR/out" || die "no PASS from arena_fork ($MODE)"
	done
	check_logs
	assert_conns shm arena_fork client $((conns + 1))
	assert_conns shm arena_fork server $((conns + 1))
	assert_rundir_clean
}

# ---------------------------------------------------------------- late
# The server writes and exits; only then does the client exec (or fork)
# with most of the stream unread in its ring.  The peer that would resend
# those bytes over TCP is gone: they reach the reader anyway (a spill),
# once, in order.  A ring that has wrapped too (3 MB through 1 MiB).
t_late() {
	local c then n first
	for c in "exec 600000 1000" "exec 3000000 2500000" "fork 600000 1000"; do
		read -r then n first <<<"$c"
		for MODE in plain shunt; do
			shm_phase "late-$then-$n-$MODE" "$MODE"
			mkfifo "$PDIR/gate"
			bg server "$PROGS/late_reader" server --port-file "$PDIR/port" --bytes "$n"
			local spid=$BG_PID
			wait_file "$PDIR/port" "$spid"
			bg client "$PROGS/late_reader" client --port "$(cat "$PDIR/port")" --bytes "$n" \
				--first "$first" --gate "$PDIR/gate" --then "$then"
			local cpid=$BG_PID
			wait_exit "$spid" 30 || die "late_reader server failed ($c, $MODE)"
			echo go >"$PDIR/gate"
			wait_exit "$cpid" 30 ||
				die "late_reader client failed ($c, $MODE): $(tail -n 3 "$PDIR/client.out")"
			grep -q "^PASS late_reader $then " "$PDIR/client.out" || die "no PASS ($c, $MODE)"
		done
		check_logs
		assert_conns shm late_reader client 1
		assert_conns shm late_reader server 1
		if [[ $then == exec ]]; then
			assert_log_count "late_reader$(moved_re shm exec)" 1
			assert_log_count "late_reader: debug: fd=[0-9]+: $((n - first)) unread bytes kept" 1
		fi
		assert_log_lacks 'unread bytes may be lost'
		note "$then after the peer closed ($c): every byte once"
	done
}

subtest fork t_fork
subtest arena t_arena
subtest exec t_exec
subtest late t_late
subtest fdopen-server t_fdopen server
subtest fdopen-both-server-first t_fdopen both-server-first --client-stdio server-first
subtest fdopen-both-client-first t_fdopen both-client-first --client-stdio client-first
# Not run: the writer shuts down and then waits in waitpid(), outside any
# shunt call, so nothing replays its unread ring bytes when the reader's
# fdopen() demotes the connection (see "Known limits" in
# docs/ARCHITECTURE.md: a demotion needs the peer to enter shunt; an agent
# thread per process would lift it).  Run it with E2E_ONLY=fdopen-shutdown-first.
if [[ " ${E2E_ONLY:-} " == *" fdopen-shutdown-first "* ]]; then
	subtest fdopen-shutdown-first t_fdopen shutdown-first --shutdown-first
fi
finish_subtests
