#!/usr/bin/env bash
# dup2/dup3/F_DUPFD over live TCP sockets (tests/progs/dup2_socket): moving a
# socket to another number, dup2 over a live socket (its connection must
# close), numbers near RLIMIT_NOFILE (raised at run time from a low soft
# limit, so shunt's fd table must grow), close-on-exec flags, shared
# O_NONBLOCK, EOF only when the last number closes, reuse of freed numbers.
source "$(dirname "$0")/lib.sh"

for MODE in plain shunt; do
	phase "$MODE"
	# Start low so that the program raises the limit itself.
	(ulimit -Sn 1024 && runx "$PROGS/dup2_socket") >"$PDIR/out" 2>"$PDIR/err" ||
		die "dup2_socket failed ($MODE): $(tail -n 3 "$PDIR/out")"
	grep -q '^PASS dup2_socket' "$PDIR/out" || die "no PASS ($MODE)"
	if grep -q NOTE "$PDIR/err"; then note "$(grep NOTE "$PDIR/err")"; fi
done
assert_same_file "$TMP/plain/out" "$TMP/shunt/out" "dup2_socket output plain vs shunt"

phase shunt
check_logs
assert_started dup2_socket
assert_log_count "$(conn_re 'dup2_socket' client)" 3
assert_log_count "$(conn_re 'dup2_socket' server)" 3
assert_conn_pairs 3
# the original numbers were closed and the moved ones too
assert_log_has 'dup2_socket: debug: close fd=100 transport=' 1
high=$(sed -n 's/^dup2_socket: high fd \([0-9]*\)$/\1/p' "$PDIR/err")
[[ -n "$high" ]] || die "dup2_socket did not print its high fd"
assert_log_has "dup2_socket: debug: close fd=$high transport=" 2
assert_log_has "dup2_socket: debug: close fd=$((high + 1000)) transport=$TRANSPORT_RE" 1
pass
