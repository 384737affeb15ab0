#!/usr/bin/env bash
# Connections closed while in an epoll set, then a new one in that set
# (tests/progs/epoll_reuse), as event-loop servers with connection churn do:
# nginx closes connections without EPOLL_CTL_DEL.  Every echo compared; the
# idle set must sleep through an epoll_wait.  (A closed connection's wake sockets
# are kept for the next one; their registration in the set must go with
# the connection, or the next connection's wakeups are reported for a
# number that is no longer theirs, never drained, and every wait returns at
# once: the idle wait then spends its whole timeout on the CPU.)  A fourth
# connection, edge-triggered as nginx registers it, must hear its peer's
# exit with EPOLLIN and then sleep while still open.  Under shunt all four
# connections are on shm at both ends.
source "$(dirname "$0")/lib.sh"

for MODE in plain shunt; do
	phase "$MODE"
	runx "$PROGS/epoll_reuse" --rounds 20 >"$PDIR/out" 2>"$PDIR/err" ||
		die "epoll_reuse failed ($MODE): $(tail -n 3 "$PDIR/out" "$PDIR/err")"
	grep -q '^PASS epoll_reuse' "$PDIR/out" || die "no PASS ($MODE)"
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "epoll_reuse output plain vs shunt"

phase shunt
check_logs
assert_log_count "$(conn_re epoll_reuse client)" 4
assert_log_count "$(conn_re epoll_reuse server)" 4
assert_conn_pairs 4
pass
