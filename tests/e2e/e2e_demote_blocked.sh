#!/usr/bin/env bash
# A writer blocked on a full ring while its reader moves the connection to
# TCP (tests/progs/demote_blocked: the reader wraps its socket in a FILE,
# which sends nothing).  The writer's wait must notice that it left the rings and carry
# on over the socket, every byte once, in order.  Run plainly, under shunt
# with its defaults, and with a long spin (spin_us=1000000, ring_size=64k):
# the writer is then inside its spin when the move happens, the window in
# which a wait that only asked "ready?" went to sleep for ever.
source "$(dirname "$0")/lib.sh"

for run in plain shunt spin; do
	case $run in
	plain) phase plain plain; full=32768 ;;
	shunt) phase shunt shunt; full=65536; SHUNT_ARGS=(--options ring_size=64k) ;;
	spin) phase spin shunt; full=65536; SHUNT_ARGS=(--options ring_size=64k,spin_us=1000000) ;;
	esac
	runx "$PROGS/demote_blocked" --bytes 4000000 --full $full >"$PDIR/out" 2>"$PDIR/err" ||
		die "demote_blocked failed ($PHASE): $(tail -n 3 "$PDIR/err")"
	grep -q '^PASS demote_blocked' "$PDIR/out" || die "no PASS ($PHASE)"
	unset SHUNT_ARGS
	[[ $run == plain ]] && continue
	check_logs
	# Both ends took shm, then the reader moved (fdopen) and the writer
	# followed.
	assert_conn_pairs 1
	assert_log_count "$(conn_re demote_blocked client shm)" 1
	assert_log_count 'demote_blocked: info: moved fd=[0-9]+ from=shm transport=kernel reason=stdio$' 1
	assert_log_count 'demote_blocked: info: moved fd=[0-9]+ from=shm transport=kernel reason=peer-demoted$' 1
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "output plain vs shunt"
assert_same_file "$TMP/plain/out" "$TMP/spin/out" "output plain vs shunt (long spin)"
pass
