#!/usr/bin/env bash
# shunt never makes a program run out of descriptors (issue 14, item 12): a
# client with the usual soft limit (1024) opens 900 connections at once,
# all live together.  It works without shunt, so it must work with it: as
# the process nears its limit shunt stops accelerating new connections
# (reason fd-limit) instead of spending descriptors the program needs.
# Checked: every byte echoed on every connection, some connections on shm
# and the rest on TCP with fd-limit, and no other reason.
source "$(dirname "$0")/lib_shm.sh"
CONNS=900

shm_phase fdlimit shunt
MODE=shunt bg server prlimit --nofile=4096:4096 -- "$PROGS/echo_server" --host 127.0.0.1 --port 0 \
	--port-file "$PDIR/port" --conns $CONNS --wait epoll
spid=$BG_PID
wait_file "$PDIR/port" "$spid"
_prefix shunt
prlimit --nofile=1024:1024 -- "${PFX[@]}" "$PROGS/echo_client" --host 127.0.0.1 --port "$(cat "$PDIR/port")" \
	--conns $CONNS --bytes 3000 --wait epoll >"$PDIR/client.out" 2>"$PDIR/client.err" ||
	die "echo_client with $CONNS connections under ulimit -n 1024 failed: $(tail -n 2 "$PDIR/client.out" "$PDIR/client.err")"
wait_exit "$spid" 60 || die "echo_server failed"
grep -q "^PASS echo_client conns=$CONNS " "$PDIR/client.out" || die "no PASS from echo_client"
check_logs
on_shm=$(log_count "$(conn_re echo_client client shm '-')")
limited=$(log_count "$(conn_re echo_client client kernel fd-limit)")
all=$(log_count "$(conn_re echo_client client '[a-z]+' '[a-z-]*')")
[[ $all -eq $CONNS ]] || die "$all client decision lines, expected $CONNS"
[[ $on_shm -gt 0 && $limited -gt 0 && $((on_shm + limited)) -eq $CONNS ]] ||
	die "client: $on_shm on shm, $limited fd-limit, of $CONNS ($(why_not shm echo_client client))"
assert_no_moves shm
note "ulimit -n 1024, $CONNS connections: $on_shm on shm, $limited on TCP (fd-limit)"
pass
