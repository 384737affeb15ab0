#!/usr/bin/env bash
# System calls made by number (libc's syscall()) and preadv2/pwritev2 at
# offset -1, on connections both ends accelerate: served on shm, byte-exact.
#
#  * echo_client/echo_server, both under shunt, each pair of calls
#    (write/read, sendto/recvfrom, sendmsg/recvmsg, writev/readv by number;
#    pwritev2/preadv2 through libc and by number), blocking threads and an
#    epoll loop, 1 MiB a connection: the echo checked at every offset, the
#    output equal to a plain run's, every connection on shm, none moved.
#  * sys_calls, a pair in one process: each call's result and errno equal to
#    the kernel's (a plain run): data by number, an offset on a socket
#    (ESPIPE, EINVAL), empty reads, errno of other numbers, RWF_NOWAIT
#    (the connection moves to TCP, reason unsupported, and gives the
#    kernel's answer), close by number (the peer reads EOF), sendmmsg/recvmmsg,
#    ppoll and FIONREAD by number.
#    Without shunt's syscall() the first read by number finds the kernel
#    socket empty and waits for ever.
source "$(dirname "$0")/lib_shm.sh"

BYTES=1048576
PAIRS=("sys-write sys-read" "sys-sendto sys-recvfrom" "sys-sendmsg sys-recvmsg"
	"sys-writev sys-readv" "pwritev2 preadv2" "sys-pwritev2 sys-preadv2")

for mode in plain shunt; do
	i=0
	for p in "${PAIRS[@]}"; do
		read -r snd rcv <<<"$p"
		for w in "block thread" "epoll epoll"; do
			read -r cw sw <<<"$w"
			shm_phase "$mode-$i" "$mode"
			i=$((i + 1))
			bg server "$PROGS/echo_server" --port-file "$PDIR/port" --conns 2 --wait "$sw" \
				--send "$snd" --recv "$rcv"
			spid=$BG_PID
			wait_file "$PDIR/port" "$spid"
			runx "$PROGS/echo_client" --port "$(cat "$PDIR/port")" --conns 2 --bytes "$BYTES" \
				--seed 3 --wait "$cw" --send "$snd" --recv "$rcv" \
				>"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed ($p, $w)"
			wait_exit "$spid" 30 || die "echo_server failed ($p, $w)"
			grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client ($p, $w)"
			grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server ($p, $w)"
			if [[ $mode == shunt ]]; then
				check_logs
				assert_conns shm echo_client client 2
				assert_conns shm echo_server server 2
				assert_conn_pairs 2
				assert_no_moves shm
				assert_close shm echo_client "$BYTES" "$BYTES" 2
				assert_same_file "$TMP/plain-$((i - 1))/client.out" "$PDIR/client.out" \
					"echo_client output, plain vs shunt ($p, $w)"
				assert_same_file "$TMP/plain-$((i - 1))/server.out" "$PDIR/server.out" \
					"echo_server output, plain vs shunt ($p, $w)"
			fi
		done
	done
done

for host in 127.0.0.1 ::1; do
	shm_phase "calls-plain-$host" plain
	runx "$PROGS/sys_calls" --host "$host" >"$PDIR/out" 2>"$PDIR/err" || die "sys_calls failed plainly"
	ref=$PDIR/out
	shm_phase "calls-shunt-$host" shunt
	runx "$PROGS/sys_calls" --host "$host" >"$PDIR/out" 2>"$PDIR/err" || die "sys_calls failed under shunt"
	assert_same_file "$ref" "$PDIR/out" "sys_calls trace, plain vs shunt ($host)"
	check_logs
	assert_conns shm sys_calls client 1
	assert_conns shm sys_calls server 1
	assert_log_count "sys_calls$(moved_re shm unsupported)" 1
	assert_log_count "sys_calls$(moved_re shm)" 2
done
note "$(tr '\n' ';' <"$ref")"
pass
