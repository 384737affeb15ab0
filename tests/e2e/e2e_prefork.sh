#!/usr/bin/env bash
# A prefork server (listen, fork N workers, each accepts and echoes):
# tests/progs/prefork_echo, plain and under shunt.  Every worker must accept
# (N connections echoed while all are open), data is checked byte for byte,
# the workers exit 0 after the listener is shut down, and the two runs print
# the same.  Under shunt the accept decisions must be logged by the worker
# processes themselves (their own pids), not by the parent.
source "$(dirname "$0")/lib.sh"

W=4 ROUNDS=3
for MODE in plain shunt; do
	phase "$MODE"
	runx "$PROGS/prefork_echo" --workers $W --bytes 1000000 --rounds $ROUNDS \
		>"$PDIR/out" 2>"$PDIR/err" || die "prefork_echo failed ($MODE): $(tail -n 3 "$PDIR/out")"
	grep -q '^PASS prefork_echo' "$PDIR/out" || die "no PASS ($MODE)"
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "prefork_echo output plain vs shunt"

phase shunt
check_logs
assert_started prefork_echo
total=$((W * (ROUNDS + 1)))
assert_log_count "$(conn_re 'prefork_echo' client)" $total
assert_log_count "$(conn_re 'prefork_echo' server)" $total
assert_conn_pairs $total
# client decisions all in the parent; server decisions in W distinct workers
assert_log_pids 'role=server' $W
[[ $(log_lines 'role=client' | sed 's/\].*//' | sort -u | wc -l) -eq 1 ]] ||
	die "client connections logged by more than one process"
parent=$(log_lines 'role=client' | head -n 1 | sed 's/^shunt\[\([0-9]*\)\].*/\1/')
if log_lines 'role=server' | grep -q "^shunt\\[$parent\\]"; then
	die "accept decisions logged under the parent's pid $parent (stale pid after fork?)"
fi
# each worker logs into its own file
[[ $(ls "$LOGDIR" | wc -l) -ge $((W + 1)) ]] || die "expected >= $((W + 1)) per-process log files"
pass
