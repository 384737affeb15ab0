#!/usr/bin/env bash
# python3 asyncio echo server and client (asyncio_echo.py), both under shunt:
# several concurrent connections of several MB of random data; the client
# checks the echo, both ends hash every connection (SHA-256), and the hashes
# must agree between the ends and with the run without shunt.
source "$(dirname "$0")/lib.sh"
need python3

CONNS=4
BYTES=${E2E_ASYNCIO_BYTES:-3000000}
SEED=$((RANDOM + 1))
for MODE in plain shunt; do
	phase "$MODE"
	bg server python3 "$E2E_DIR/asyncio_echo.py" server --port-file "$PDIR/port" \
		--conns $CONNS --hashes "$PDIR/server.sha"
	spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	runx python3 "$E2E_DIR/asyncio_echo.py" client --port "$(cat "$PDIR/port")" \
		--conns $CONNS --bytes "$BYTES" --seed $SEED >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "asyncio client failed ($MODE): $(tail -n 2 "$PDIR/client.out")"
	wait_exit "$spid" 30 || die "asyncio server failed ($MODE)"
	grep -q '^PASS' "$PDIR/client.out" || die "no PASS from the client ($MODE)"
	sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) recv_sha256=\2$/bytes=\1 sha256=\2/p' \
		"$PDIR/client.out" | sort >"$PDIR/client.sha"
	[[ $(wc -l <"$PDIR/client.sha") -eq $CONNS ]] || die "client hashes missing or sent != received ($MODE)"
	assert_same_file "$PDIR/client.sha" "$PDIR/server.sha" "client vs server hashes ($MODE)"
done
assert_same_file "$TMP/plain/client.out" "$TMP/shunt/client.out" "client output plain vs shunt"
assert_same_file "$TMP/plain/server.sha" "$TMP/shunt/server.sha" "server hashes plain vs shunt"

phase shunt
check_logs
assert_log_pids ': info: shunt [0-9.]+ enabled' 2
assert_log_count "$(conn_re 'python3[^:]*' client)" $CONNS
assert_log_count "$(conn_re 'python3[^:]*' server)" $CONNS
assert_conn_pairs $CONNS
compat_row "python3 asyncio echo (tests/e2e/asyncio_echo.py)" "$(python3 -c "import platform; print(platform.python_version())")" "pass" "pass, same SHA-256"
pass
