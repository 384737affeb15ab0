#!/usr/bin/env bash
# A blocking recv() interrupted by a caught signal (tests/progs/sig_restart):
# restarted after a SA_RESTART handler, EINTR after one without (whatever
# other handlers the process has), and EINTR whatever the handler when the
# socket has a receive timeout, as the kernel's socket calls do; handlers set
# with sigaction(), signal() and siginterrupt().  Same output plain and
# under shunt, on shm.
source "$(dirname "$0")/lib.sh"

for MODE in plain shunt; do
	phase "$MODE"
	runx "$PROGS/sig_restart" >"$PDIR/out" 2>"$PDIR/err" ||
		die "sig_restart failed ($MODE): $(tail -n 3 "$PDIR/out" "$PDIR/err")"
	grep -q '^PASS sig_restart' "$PDIR/out" || die "no PASS ($MODE)"
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "sig_restart output plain vs shunt"

phase shunt
check_logs
# On the transport this run expects (shm; kernel in the e2e_kernel_ run).
assert_log_count "$(conn_re sig_restart client)" 5
assert_log_count "$(conn_re sig_restart server)" 5
assert_conn_pairs 5
pass
