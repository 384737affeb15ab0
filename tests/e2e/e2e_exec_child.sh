#!/usr/bin/env bash
# A child that inherits a connected socket across execve
# (tests/progs/exec_child): the exec'd program (itself, fd passed by number in
# argv; then /bin/cat with the socket as stdin and stdout) reads data sent
# before and after its exec and answers on the socket; FD_CLOEXEC sockets are
# gone after exec.  Plain and under shunt must print the same.
source "$(dirname "$0")/lib.sh"

for MODE in plain shunt; do
	phase "$MODE"
	runx "$PROGS/exec_child" --bytes 4000000 >"$PDIR/out" 2>"$PDIR/err" ||
		die "exec_child failed ($MODE): $(tail -n 3 "$PDIR/out")"
	grep -q '^PASS exec_child' "$PDIR/out" || die "no PASS ($MODE)"
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "exec_child output plain vs shunt"

phase shunt
check_logs
assert_started exec_child
assert_log_count "$(conn_re 'exec_child' client)" 3
assert_log_count "$(conn_re 'exec_child' server)" 3
assert_conn_pairs 3
# the exec'd programs made no connection of their own
assert_log_lacks '^shunt\[[0-9]+\] cat: debug: conn '
[[ $(log_lines ': debug: conn ' | sed 's/\].*//' | sort -u | wc -l) -eq 1 ]] ||
	die "connections logged by more than one process"
pass
