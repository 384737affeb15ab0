#!/usr/bin/env bash
# Both ends move a connection to TCP at once, each with more unread bytes
# for the other than the socket holds (tests/progs/demote_both_full): each
# end's replay meets the other's.  Run plainly (the reference), under shunt
# with small socket buffers (SO_SNDBUF/SO_RCVBUF 64 KiB) and its default
# rings, with rings larger than the socket's default buffers (16 MiB), and
# with the reading done in a forked child.  Each end must get every byte the
# other sent, in order, once; an end whose replay waited for room without
# reading waited for the other for ever (the watchdog fails it).
source "$(dirname "$0")/lib.sh"

# check_counts: each end got exactly what the other sent.
check_counts() {
	local ss sg cs cg
	read -r ss sg < <(sed -n 's/^PASS demote_both_full server sent=\([0-9]*\) got=\([0-9]*\)$/\1 \2/p' "$PDIR/out")
	read -r cs cg < <(sed -n 's/^PASS demote_both_full client sent=\([0-9]*\) got=\([0-9]*\)$/\1 \2/p' "$PDIR/out")
	[[ -n $ss && -n $cs ]] || die "no PASS from both ends ($PHASE): $(cat "$PDIR/out" "$PDIR/err")"
	[[ $sg == "$cs" && $cg == "$ss" ]] ||
		die "$PHASE: the server sent $ss and the client got $cg; the client sent $cs and the server got $sg"
	note "$PHASE: server sent $ss, client sent $cs"
}

for run in plain smallbuf bigring fork peek waitall one onepeek onewaitall onefork; do
	args=()
	case $run in
	plain) phase plain plain; args=(--sockbuf 65536) ;;
	smallbuf) phase smallbuf shunt; args=(--sockbuf 65536) ;;
	bigring) phase bigring shunt; SHUNT_ARGS=(--options ring_size=16M) ;;
	fork) phase fork shunt; args=(--sockbuf 65536 --fork) ;;
	peek) phase peek shunt; args=(--sockbuf 65536 --peek) ;;
	waitall) phase waitall shunt; args=(--sockbuf 65536 --waitall) ;;
	one) phase one shunt; args=(--sockbuf 65536 --one) ;;
	onepeek) phase onepeek shunt; args=(--sockbuf 65536 --one --peek) ;;
	onewaitall) phase onewaitall shunt; args=(--sockbuf 65536 --one --waitall) ;;
	onefork) phase onefork shunt; args=(--sockbuf 65536 --one --fork) ;;
	esac
	runx "$PROGS/demote_both_full" "${args[@]}" >"$PDIR/out" 2>"$PDIR/err" ||
		die "demote_both_full failed ($PHASE): $(tail -n 3 "$PDIR/err")"
	unset SHUNT_ARGS
	check_counts
	[[ $run == plain ]] && continue
	check_logs
	# Both ends took shm, one left for the filter and the other followed,
	# and at least one replay read the other's while it waited (the
	# rings hold more than the socket).
	assert_conn_pairs 1
	assert_log_count "$(conn_re 'demote_both_full' client shm)" 1
	assert_log_count 'demote_both_full: info: moved fd=[0-9]+ from=shm transport=kernel reason=(sock-filter|peer-demoted)$' 2
	assert_log_has "demote_both_full: debug: fd=[0-9]+: [0-9]+ bytes of the peer's replay taken while ours waited"
	if [[ $run == fork ]]; then
		assert_log_has 'demote_both_full: debug: fd=[0-9]+: [0-9]+ unread bytes kept for the application'
	fi
	if [[ $run == one* ]]; then
		# The client followed from its data path, and its stash served
		# its reads in place (no spill); but the fork, which turns it
		# into a spill the child and the parent share.
		assert_log_count 'demote_both_full: info: moved fd=[0-9]+ from=shm transport=kernel reason=peer-demoted$' 1
		assert_log_count "demote_both_full: debug: fd=[0-9]+: [0-9]+ bytes of the peer's replay taken while ours waited" 2
		assert_log_count 'demote_both_full: debug: fd=[0-9]+: [0-9]+ unread bytes kept for the application' \
			"$([[ $run == onefork ]] && echo 2 || echo 1)"
	fi
done
pass
