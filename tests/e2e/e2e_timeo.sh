#!/usr/bin/env bash
# Receive timeouts a blocking read does not see being set
# (tests/progs/timeo_inherit): one set on the socket before connect(), one on
# the listener that the accepted socket inherits.  shunt asks a socket for
# its timeout only when one may be set (set through setsockopt in this
# process, inherited from such a listener, a socket made elsewhere, or shared
# by a fork): both reads must still end with EAGAIN in time, on shm, as the
# kernel's do.
source "$(dirname "$0")/lib.sh"

for MODE in plain shunt; do
	phase "$MODE"
	runx "$PROGS/timeo_inherit" >"$PDIR/out" 2>"$PDIR/err" ||
		die "timeo_inherit failed ($MODE): $(tail -n 3 "$PDIR/out" "$PDIR/err")"
	grep -q '^PASS timeo_inherit' "$PDIR/out" || die "no PASS ($MODE)"
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "timeo_inherit output plain vs shunt"

phase shunt
check_logs
# On the transport this run expects (shm; kernel in the e2e_kernel_ run).
assert_log_count "$(conn_re timeo_inherit client)" 1
assert_log_count "$(conn_re timeo_inherit server)" 1
assert_conn_pairs 1
pass
