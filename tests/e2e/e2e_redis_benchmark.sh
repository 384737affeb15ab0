#!/usr/bin/env bash
# redis-server + redis-benchmark (SET/GET, plain and pipelined), both under
# shunt, against the same run without shunt: every test must complete with a
# non-zero rate, the server must shut down cleanly on SHUTDOWN, and under
# shunt the benchmark's connections must be decided on both sides.
source "$(dirname "$0")/lib.sh"
need redis-server redis-benchmark redis-cli

N=${E2E_REDIS_N:-20000}
CLIENTS=10
for MODE in plain shunt; do
	phase "$MODE"
	port=$(free_port)
	bg redis redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --protected-mode no --dir "$PDIR" --logfile ''
	rpid=$BG_PID
	wait_port "$port" "$rpid"
	for pipe in 1 16; do
		runx redis-benchmark -h 127.0.0.1 -p "$port" -n "$N" -c $CLIENTS -P $pipe -t set,get --csv \
			>"$PDIR/bench-$pipe.csv" 2>"$PDIR/bench-$pipe.err" ||
			die "redis-benchmark -P $pipe failed ($MODE)"
		for t in SET GET; do
			rps=$(sed -n "s/^\"$t\",\"\\([0-9.]*\\)\".*/\\1/p" "$PDIR/bench-$pipe.csv")
			[[ -n "$rps" ]] || die "no $t result from redis-benchmark -P $pipe ($MODE)"
			awk -v r="$rps" 'BEGIN { exit !(r > 0) }' || die "$t rate is $rps ($MODE, -P $pipe)"
			echo "$t $pipe $rps" >>"$PDIR/rates"
			note "$MODE: $t -P $pipe: $rps requests/s"
		done
	done
	[[ $MODE == shunt ]] && assert_preloaded "$(bg_prog_pid "$rpid")"
	runx redis-cli -h 127.0.0.1 -p "$port" SHUTDOWN NOSAVE >"$PDIR/shutdown.out" 2>&1 || true
	wait_exit "$rpid" 20 || die "redis-server exited with status $? ($MODE)"
done

# Kernel path only: the unpipelined rates must be of the same order (a loose
# bound: the runs are short; the overhead target is checked by bench/).
while read -r t pipe plain_rps; do
	[[ $pipe == 1 ]] || continue
	shunt_rps=$(awk -v t="$t" -v p="$pipe" '$1 == t && $2 == p { print $3 }' "$TMP/shunt/rates")
	awk -v a="$plain_rps" -v b="$shunt_rps" 'BEGIN { exit !(b > a / 5) }' ||
		die "$t -P $pipe under shunt: $shunt_rps requests/s vs $plain_rps plain"
done <"$TMP/plain/rates"

phase shunt
check_logs
assert_started redis-server
assert_started redis-benchmark
# 2 runs x (CLIENTS benchmark connections + at least 1 for the CONFIG query)
assert_log_has "$(conn_re 'redis-benchmark' client)" $((2 * CLIENTS))
assert_log_has "$(conn_re 'redis-server' server)" $((2 * CLIENTS + 1))
assert_conn_pairs "$(log_count ': debug: conn .* role=server ')"
assert_log_has 'redis-cli: debug: conn fd=[0-9]+ role=client ' 1
compat_row "redis-server + redis-benchmark (SET/GET, -P 1 and 16)" "$(redis-server --version | sed -n "s/.* v=\([^ ]*\).*/\1/p")" "pass" "pass, rates of the same order"
pass
