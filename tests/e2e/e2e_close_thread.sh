#!/usr/bin/env bash
# close() from one thread while others wait on the socket in epoll_wait,
# read, poll, recv with SO_RCVTIMEO (tests/progs/close_thread): no hang, no
# crash, and exactly the kernel's behaviour (the trace printed must be the
# same plain and under shunt).
source "$(dirname "$0")/lib.sh"

for MODE in plain shunt; do
	phase "$MODE"
	runx "$PROGS/close_thread" >"$PDIR/out" 2>"$PDIR/err" ||
		die "close_thread failed ($MODE): $(tail -n 3 "$PDIR/out")"
	grep -q '^PASS close_thread' "$PDIR/out" || die "no PASS ($MODE)"
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "close_thread output plain vs shunt"

phase shunt
check_logs
assert_started close_thread
assert_log_count "$(conn_re 'close_thread' client)" 7
assert_log_count "$(conn_re 'close_thread' server)" 7
assert_conn_pairs 7
pass
