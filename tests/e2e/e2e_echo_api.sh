#!/usr/bin/env bash
# echo_server and echo_client (tests/progs) over every socket data call and
# every wait interface shunt interposes, IPv4 and IPv6, several connections
# at once: the client checks the echo byte for byte, both ends print a SHA-256
# per connection, and the plain and shunt runs must print the same.
source "$(dirname "$0")/lib.sh"

BYTES=${E2E_ECHO_BYTES:-2000000}
CONNS=3
# server-wait client-wait send-api recv-api host
COMBOS=(
	"thread block mix mix 127.0.0.1"
	"epoll poll write read 127.0.0.1"
	"epoll-et epoll-et sendmsg recvmsg 127.0.0.1"
	"poll select writev readv 127.0.0.1"
	"select ppoll send recv 127.0.0.1"
	"pselect epoll-oneshot sendto recvfrom 127.0.0.1"
	"epoll-oneshot epoll-pwait mix mix 127.0.0.1"
	"epoll-pwait2 pselect mix mix ::1"
	"ppoll epoll-pwait2 mix mix ::1"
	"epoll-pwait epoll mix mix ::1"
)

# Our SHA-256 must agree with sha256sum(1) (the stream of conn 0, seed 7).
want=$("$PROGS/streamgen" $((7 * 1000003)) "$BYTES" 2>/dev/null | sha256)
got=$("$PROGS/streamgen" $((7 * 1000003)) "$BYTES" 2>&1 >/dev/null)
assert_eq "$got" "$want" "streamgen SHA-256 vs sha256sum"

run_combo() {
	local i=$1 sw cw sa ra host
	read -r sw cw sa ra host <<<"${COMBOS[$i]}"
	phase "$MODE-$i"
	bg server "$PROGS/echo_server" --host "$host" --port-file "$PDIR/port" \
		--conns "$CONNS" --wait "$sw" --send "$sa" --recv "$ra"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	if [[ $MODE == shunt ]]; then
		assert_preloaded "$(bg_prog_pid "$spid")"
	else
		assert_not_preloaded "$(bg_prog_pid "$spid")"
	fi
	runx "$PROGS/echo_client" --host "$host" --port "$(cat "$PDIR/port")" \
		--conns "$CONNS" --bytes "$BYTES" --seed 7 --wait "$cw" --send "$sa" --recv "$ra" \
		>"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed ($MODE, ${COMBOS[$i]})"
	wait_exit "$spid" 30 || die "echo_server failed ($MODE, ${COMBOS[$i]})"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server"
	# Both ends saw the same streams.
	sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) .*/conn bytes=\1 sha256=\2/p' \
		"$PDIR/client.out" | sort >"$PDIR/client.sha"
	grep '^conn ' "$PDIR/server.out" >"$PDIR/server.sha" || true
	[[ $(wc -l <"$PDIR/client.sha") -eq $CONNS ]] || die "client printed no per-connection hashes"
	assert_same_file "$PDIR/client.sha" "$PDIR/server.sha" "client and server hashes (${COMBOS[$i]})"
	if [[ $MODE == shunt ]]; then
		check_logs
		assert_started echo_server
		assert_started echo_client
		assert_log_count "$(conn_re 'echo_client' client)" "$CONNS"
		assert_log_count "$(conn_re 'echo_server' server)" "$CONNS"
		assert_log_has "echo_client: debug: close fd=[0-9]+ transport=" "$CONNS"
		assert_log_has "echo_server: debug: close fd=[0-9]+ transport=" "$CONNS"
		assert_conn_pairs "$CONNS"
		if [[ $host == ::1 ]]; then
			assert_log_has "role=client local=\\[?::1\\]?:[0-9]+ peer=\\[?::1\\]?:[0-9]+ " "$CONNS"
		fi
	fi
}

for MODE in plain shunt; do
	for i in "${!COMBOS[@]}"; do
		run_combo "$i"
	done
done

for i in "${!COMBOS[@]}"; do
	assert_same_file "$TMP/plain-$i/client.out" "$TMP/shunt-$i/client.out" "client output plain vs shunt (${COMBOS[$i]})"
	assert_same_file "$TMP/plain-$i/server.out" "$TMP/shunt-$i/server.out" "server output plain vs shunt (${COMBOS[$i]})"
done
grep -q "sent_sha256=$want " "$TMP/plain-0/client.out" || die "conn 0 hash is not sha256sum of its stream"
pass
