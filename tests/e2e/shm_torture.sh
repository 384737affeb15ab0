#!/usr/bin/env bash
# The shm transport under echo_server/echo_client (tests/progs): every wait
# interface (blocking threads, poll, ppoll, select, pselect, epoll LT/ET/
# ONESHOT, epoll_pwait, epoll_pwait2) and every read/write API mix, several
# connections at once, both directions at once, random call sizes up to the
# programs' 128 KiB buffers (--chunk 4 MiB), IPv4 and IPv6, the default ring
# and a 64 KiB ring (always wrapping, often full).  Each combination runs
# plainly and with both ends under shunt; outputs must be identical, both
# ends' per-connection SHA-256 must agree, and under shunt every connection
# must be on shm at both ends with exact byte counts at close.
# Then msg_torture (tests/progs): whole messages of 1 B .. 4 MiB, each sent
# with one sendmsg()/writev() of up to 64 iovecs, received with MSG_PEEK,
# MSG_WAITALL, readv() and FIONREAD-sized reads, both directions at once;
# MSG_DONTWAIT, SO_RCVTIMEO and SO_SNDTIMEO (partial send) timeouts; and a
# sendfile() tail that moves the connection to TCP mid-stream (reason
# unsupported) without losing a byte.
source "$(dirname "$0")/lib_shm.sh"

BYTES=${E2E_SHM_TORTURE_BYTES:-6000000}
CONNS=3
# server-wait client-wait send-api recv-api host ring
COMBOS=(
	"thread block mix mix 127.0.0.1 default"
	"thread block writev readv ::1 65536"
	"epoll epoll-et write readv 127.0.0.1 65536"
	"epoll-et epoll-oneshot sendmsg recvmsg ::1 default"
	"epoll-oneshot poll writev recv 127.0.0.1 default"
	"poll ppoll send read ::1 65536"
	"ppoll select sendto recvfrom 127.0.0.1 default"
	"select pselect mix mix ::1 65536"
	"pselect epoll-pwait mix mix 127.0.0.1 65536"
	"epoll-pwait2 block mix mix ::1 default"
	"epoll-pwait epoll-pwait2 mix mix 127.0.0.1 default"
	"thread epoll mix mix ::1 65536"
)

run_combo() {
	local i=$1 sw cw sa ra host ring
	read -r sw cw sa ra host ring <<<"${COMBOS[$i]}"
	shm_phase "$MODE-$i"
	SHUNT_ARGS=()
	[[ $ring == default ]] || SHUNT_ARGS=(--options "ring_size=$ring")
	bg server "$PROGS/echo_server" --host "$host" --port-file "$PDIR/port" \
		--conns "$CONNS" --wait "$sw" --send "$sa" --recv "$ra"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	if [[ $MODE == shunt ]]; then
		assert_preloaded "$(bg_prog_pid "$spid")"
	fi
	runx "$PROGS/echo_client" --host "$host" --port "$(cat "$PDIR/port")" \
		--conns "$CONNS" --bytes "$BYTES" --seed $((i + 3)) --wait "$cw" --send "$sa" \
		--recv "$ra" --chunk 4194304 >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "echo_client failed ($MODE, ${COMBOS[$i]})"
	wait_exit "$spid" 30 || die "echo_server failed ($MODE, ${COMBOS[$i]})"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server"
	sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) recv_sha256=\2$/conn bytes=\1 sha256=\2/p' \
		"$PDIR/client.out" | sort >"$PDIR/client.sha"
	grep '^conn ' "$PDIR/server.out" >"$PDIR/server.sha" || true
	[[ $(wc -l <"$PDIR/client.sha") -eq $CONNS ]] || die "client: per-connection hashes missing or sent != echoed"
	assert_same_file "$PDIR/client.sha" "$PDIR/server.sha" "client and server hashes (${COMBOS[$i]})"
	if [[ $MODE == shunt ]]; then
		check_logs
		assert_conns shm echo_client client "$CONNS"
		assert_conns shm echo_server server "$CONNS"
		assert_conn_pairs "$CONNS"
		assert_close shm echo_client "$BYTES" "$BYTES" "$CONNS"
		assert_close shm echo_server "$BYTES" "$BYTES" "$CONNS"
		assert_no_moves shm
		if [[ $host == ::1 ]]; then
			assert_log_count "role=client local=\\[?::1\\]?:[0-9]+ peer=\\[?::1\\]?:[0-9]+ transport=shm" "$CONNS"
		fi
		assert_rundir_clean
	fi
	SHUNT_ARGS=()
}

t0=$SECONDS
for MODE in plain shunt; do
	for i in "${!COMBOS[@]}"; do
		run_combo "$i"
	done
	note "$MODE: ${#COMBOS[@]} combinations in $((SECONDS - t0)) s"
	t0=$SECONDS
done

# host ring
MSG_COMBOS=("127.0.0.1 default" "::1 65536")
MSGS=40
for MODE in plain shunt; do
	for i in "${!MSG_COMBOS[@]}"; do
		read -r host ring <<<"${MSG_COMBOS[$i]}"
		shm_phase "msg-$MODE-$i" "$MODE"
		SHUNT_ARGS=()
		[[ $ring == default ]] || SHUNT_ARGS=(--options "ring_size=$ring")
		runx "$PROGS/msg_torture" --host "$host" --msgs $MSGS --seed $((i + 1)) --sendfile 2000000 \
			>"$PDIR/out" 2>"$PDIR/err" || die "msg_torture failed ($MODE, ${MSG_COMBOS[$i]}): $(tail -n 3 "$PDIR/out" "$PDIR/err")"
		SHUNT_ARGS=()
		grep -q '^PASS msg_torture' "$PDIR/out" || die "no PASS from msg_torture"
		if [[ $MODE == shunt ]]; then
			check_logs
			assert_conns shm msg_torture client 1
			assert_conns shm msg_torture server 1
			assert_conn_pairs 1
			# sendfile() moves the server's end; the client follows
			assert_log_count "msg_torture$(moved_re shm)" 2
			assert_log_count "msg_torture$(moved_re shm unsupported)" 1
			assert_moves_explained shm
			# every message went through the rings before that:
			# bodies + 16-byte headers
			s2c=$(sed -n 's/^s2c msgs=[0-9]* bytes=\([0-9]*\) .*/\1/p' "$PDIR/out")
			c2s=$(sed -n 's/^c2s msgs=[0-9]* bytes=\([0-9]*\) .*/\1/p' "$PDIR/out")
			assert_log_count "$(close_re shm msg_torture "$((s2c + 16 * MSGS))" '[0-9]+')" 1
			assert_log_count "$(close_re shm msg_torture '[0-9]+' "$((s2c + 16 * MSGS))")" 1
			in=$(log_lines "$(close_re shm msg_torture '[0-9]+' "$((s2c + 16 * MSGS))")" | sed -n 's/.*bytes_in=\([0-9]*\) .*/\1/p')
			[[ $in -ge $((c2s + 16 * MSGS)) ]] || die "server's shm bytes_in $in < $((c2s + 16 * MSGS))"
			assert_rundir_clean
		fi
	done
done
for i in "${!MSG_COMBOS[@]}"; do
	assert_same_file "$TMP/msg-plain-$i/out" "$TMP/msg-shunt-$i/out" "msg_torture output plain vs shunt (${MSG_COMBOS[$i]})"
done

for i in "${!COMBOS[@]}"; do
	assert_same_file "$TMP/plain-$i/client.out" "$TMP/shunt-$i/client.out" "client output plain vs shunt (${COMBOS[$i]})"
	assert_same_file "$TMP/plain-$i/server.out" "$TMP/shunt-$i/server.out" "server output plain vs shunt (${COMBOS[$i]})"
done
# Our SHA-256 is sha256sum's (conn 0 of combination 0: seed 3).
want=$("$PROGS/streamgen" $((3 * 1000003)) "$BYTES" 2>/dev/null | sha256)
grep -q "sent_sha256=$want " "$TMP/shunt-0/client.out" || die "conn 0 hash is not sha256sum of its stream"
pass_soft
