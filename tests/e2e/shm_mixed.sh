#!/usr/bin/env bash
# Mixed peers: a client under shunt talking to a plain server, and a plain
# client talking to a server under shunt (echo_server/echo_client, IPv4 and
# IPv6, event loop and blocking threads).  The streams must be byte-exact
# (same output as a run with both ends plain), the plain end must not have
# libshunt.so mapped, and the shunt end must say transport=kernel with reason
# no-peer-shim for every connection, with no shm close and no move.  And a
# shunt client against a plain server on a port whose shunt listener was
# killed (a stale registry entry): no-peer-shim too.
source "$(dirname "$0")/lib_shm.sh"

BYTES=${E2E_SHM_MIXED_BYTES:-4000000}
CONNS=3
# name server-mode client-mode server-wait client-wait host
CASES=(
	"ref plain plain epoll epoll-et 127.0.0.1"
	"c4 plain shunt epoll epoll-et 127.0.0.1"
	"s4 shunt plain epoll epoll-et 127.0.0.1"
	"ref6 plain plain thread block ::1"
	"c6 plain shunt thread block ::1"
	"s6 shunt plain thread block ::1"
)

for c in "${CASES[@]}"; do
	read -r name smode cmode sw cw host <<<"$c"
	shm_phase "$name" "server=$smode,client=$cmode"
	MODE=$smode
	bg server "$PROGS/echo_server" --host "$host" --port-file "$PDIR/port" --conns "$CONNS" --wait "$sw"
	spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	if [[ $smode == plain ]]; then
		assert_not_preloaded "$(bg_prog_pid "$spid")"
	else
		assert_preloaded "$(bg_prog_pid "$spid")"
	fi
	MODE=$cmode
	runx "$PROGS/echo_client" --host "$host" --port "$(cat "$PDIR/port")" --conns "$CONNS" \
		--bytes "$BYTES" --seed 17 --wait "$cw" >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "echo_client failed ($c)"
	wait_exit "$spid" 30 || die "echo_server failed ($c)"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client ($c)"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server ($c)"
	check_logs
	case $name in
	ref*)
		assert_log_count '.' 0
		;;
	c*)
		assert_started echo_client
		assert_kernel_conns echo_client client "$CONNS" no-peer-shim
		assert_log_lacks 'echo_server'
		assert_log_lacks ': debug: shm close '
		assert_log_lacks "$(moved_re shm)"
		assert_log_count 'echo_client: debug: close fd=[0-9]+ transport=kernel reason=no-peer-shim$' "$CONNS"
		;;
	s*)
		assert_started echo_server
		assert_kernel_conns echo_server server "$CONNS" no-peer-shim
		assert_log_lacks 'echo_client'
		assert_log_lacks ': debug: shm close '
		assert_log_lacks "$(moved_re shm)"
		assert_log_count 'echo_server: debug: close fd=[0-9]+ transport=kernel reason=no-peer-shim$' "$CONNS"
		;;
	esac
	assert_rundir_clean
done

# A stale registration: a shunt server on PORT is killed with SIGKILL (its
# registry entry stays behind), a plain server takes the port; a shunt client
# must see that no shunt listener is alive there (no offer, no wait).
shm_phase stale "server=shunt+plain,client=shunt"
port=$(free_port)
MODE=shunt
bg dead "$PROGS/echo_server" --port "$port" --port-file "$PDIR/port.dead" --conns 1
wait_file "$PDIR/port.dead" "$BG_PID"
[[ -n "$(find "$RUNDIR/l" -name "*-$port")" ]] || die "the shunt server did not register port $port"
kill -KILL "$(bg_prog_pid "$BG_PID")"
wait_exit "$BG_PID" 10 || true
[[ -n "$(find "$RUNDIR/l" -name "*-$port")" ]] || note "(the dead server's entry is already gone)"
MODE=plain
bg server "$PROGS/echo_server" --port "$port" --port-file "$PDIR/port" --conns $CONNS --wait epoll
spid=$BG_PID
wait_file "$PDIR/port" "$spid"
MODE=shunt
t0=$(date +%s%N)
runx "$PROGS/echo_client" --port "$port" --conns $CONNS --bytes "$BYTES" --seed 17 --wait epoll-et \
	>"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed (stale)"
ms=$((($(date +%s%N) - t0) / 1000000))
wait_exit "$spid" 30 || die "echo_server failed (stale)"
assert_same_file "$TMP/ref/client.out" "$PDIR/client.out" "client output, plain vs stale"
assert_kernel_conns echo_client client "$CONNS" no-peer-shim
assert_log_lacks "echo_client$(moved_re shm)"
note "client against the stale registration: $ms ms"
[[ -z "$(find "$RUNDIR/l" -name "*-$port")" ]] || die "the dead server's registry entry is still there after a client found it dead"

for n in c4 s4; do
	assert_same_file "$TMP/ref/client.out" "$TMP/$n/client.out" "client output, plain vs $n"
	assert_same_file "$TMP/ref/server.out" "$TMP/$n/server.out" "server output, plain vs $n"
done
for n in c6 s6; do
	assert_same_file "$TMP/ref6/client.out" "$TMP/$n/client.out" "client output, plain vs $n"
	assert_same_file "$TMP/ref6/server.out" "$TMP/$n/server.out" "server output, plain vs $n"
done
want=$("$PROGS/streamgen" $((17 * 1000003)) "$BYTES" 2>/dev/null | sha256)
grep -q "sent_sha256=$want recv_sha256=$want$" "$TMP/c4/client.out" || die "conn 0 echo is not sha256sum of its stream"
pass_soft
