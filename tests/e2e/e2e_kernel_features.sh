#!/usr/bin/env bash
# The kernel's own socket semantics on shm connections (both ends in one
# process, under shunt), each run plainly and under shunt with the outputs
# compared line by line, and the path each connection took read from
# shunt's log:
#   peer_closed_send  sends after the peer closed: the first accepted, the
#                     next EPIPE with SIGPIPE, MSG_NOSIGNAL without; stays shm
#   nb_sendfile       sendfile() on a non-blocking socket in a one-thread
#                     loop, the reader behind (and, --reverse, the reader's
#                     own bytes unread by the writer): no wait, every byte
#                     in order; stays shm (the call copies into the ring)
#   listen_churn      40 listeners made and closed: shunt keeps no fd for
#                     one that is gone (an application's margin under its
#                     fd limit is its own)
#   kernel_features   one run per row of docs/TROUBLESHOOTING.md "Kernel-only
#                     socket features": works on shm, or moves to TCP (or
#                     stays there) with its reason
source "$(dirname "$0")/lib_shm.sh"

# run_both NAME CMD...: CMD plainly and under shunt (phase NAME-plain /
# NAME-shunt), same stdout; leaves the shunt phase current.
run_both() {
	local name=$1
	shift
	local m
	for m in plain shunt; do
		shm_phase "$name-$m" "$m"
		runx "$@" >"$PDIR/out" 2>"$PDIR/err" || die "$name ($m) failed: $(tail -n 3 "$PDIR/out" "$PDIR/err")"
	done
	assert_same_file "$TMP/$name-plain/out" "$TMP/$name-shunt/out" "$name: output plain vs shunt"
	check_logs
}

# on_shm PROG N: N connections of PROG at each end, all on shm, none moved.
on_shm() {
	assert_conns shm "$1" client "$2"
	assert_conns shm "$1" server "$2"
	assert_no_moves shm
}

# moved PROG REASON: the connection moved to TCP for REASON at one end and
# followed at the other.
moved() {
	assert_conns shm "$1" client 1
	assert_conns shm "$1" server 1
	assert_log_count "$1$(moved_re shm "$2")" 1
	assert_log_count "$1$(moved_re shm peer-demoted)" 1
}

t_peer_closed_send() {
	run_both peer_closed_send "$PROGS/peer_closed_send"
	grep -q "^first send: 5 ok sigpipe=0$" "$PDIR/out" || die "first send not accepted"
	grep -q "^second send: -1 Broken pipe sigpipe=1$" "$PDIR/out" || die "second send: no EPIPE/SIGPIPE"
	on_shm peer_closed_send 1
}

t_nb_sendfile() {
	run_both nb_sendfile "$PROGS/nb_sendfile" 127.0.0.1 "$TMP"
	grep -q "checked, 0 back$" "$PDIR/out" || die "no checked stream"
	on_shm nb_sendfile 1
	run_both nb_sendfile-reverse "$PROGS/nb_sendfile" --reverse 127.0.0.1 "$TMP"
	grep -q "checked, 524288 back$" "$PDIR/out" || die "no checked stream (reverse)"
	on_shm nb_sendfile 1
}

t_listen_churn() {
	shm_phase listen_churn-plain plain
	runx "$PROGS/listen_churn" 0 >"$PDIR/out" 2>"$PDIR/err" || die "listen_churn (plain): $(cat "$PDIR/out" "$PDIR/err")"
	# shunt's own: the arena, the stats file, the offers' lock, the log.
	shm_phase listen_churn-shunt shunt
	runx "$PROGS/listen_churn" 4 >"$PDIR/out" 2>"$PDIR/err" || die "listen_churn (shunt): $(cat "$PDIR/out" "$PDIR/err")"
	check_logs
	on_shm listen_churn 40
}

t_row() {
	local row=$1 P=kernel_features unavailable=0
	run_both "kf-$row" "$PROGS/kernel_features" "$row"
	grep -q ": unavailable:" "$PDIR/out" && unavailable=1
	case $row in
	ktls | repair)
		if [[ $unavailable == 1 ]]; then
			note "$row: $(grep unavailable "$PDIR/out")"
			on_shm $P 1
		elif [[ $row == ktls ]]; then
			moved $P ktls
		else
			moved $P tcp-repair
		fi
		;;
	zerocopy) moved $P zerocopy ;;
	oob) moved $P oob ;;
	fastopen)
		[[ $unavailable == 0 ]] || die "Fast Open unavailable plainly"
		assert_log_count "$(conn_re $P client kernel fastopen)" 2
		assert_log_count "$(conn_re $P server kernel no-peer-shim)" 2
		assert_log_count "$(conn_re $P client shm -)" 1
		assert_log_count "$(conn_re $P server shm -)" 1
		assert_no_moves shm
		;;
	filter)
		# On the connection: moved.  On the listener: its accepted
		# connection kept on TCP, the client declined.
		assert_log_count "$P$(moved_re shm sock-filter)" 1
		assert_log_count "$P$(moved_re shm peer-demoted)" 1
		assert_log_count "$(conn_re $P server kernel sock-filter)" 1
		assert_log_count "$P$(moved_re shm declined)" 1
		;;
	queues | info | linger) on_shm $P 1 ;;
	*) die "no expectations for row $row" ;;
	esac
}

subtest peer_closed_send t_peer_closed_send
subtest nb_sendfile t_nb_sendfile
subtest listen_churn t_listen_churn
for row in ktls zerocopy oob fastopen filter repair queues info linger; do
	subtest "$row" t_row "$row"
done
finish_subtests
compat_row "tests/progs: peer_closed_send, nb_sendfile, listen_churn, kernel_features (9 rows)" \
	"shunt ${SHUNT_VERSION:-}" "pass" "pass, same output; moves and reasons as docs/TROUBLESHOOTING.md says"
pass
