#!/usr/bin/env bash
# shellcheck disable=SC2031,SC2154
# Nested epoll over shm: nest_echo server and client (tests/progs) whose
# event loops sleep in an outer wait over inner epoll sets holding the
# connections -- an outer epoll set (level and edge triggered), poll(),
# select(), two levels of epoll, and EPOLLONESHOT items inside.  Every outer
# wait blocks with no timeout, so a wakeup that does not come hangs the run
# (the program's watchdog fails it).  Per mode:
#   plain-M   both ends plain: the reference output
#   shunt-M   both ends under shunt: the same output, every connection on shm
#             at both ends with exact byte counts, no move to TCP; the
#             server's outer wait slept (> 20 ms) at least once and was woken
#             by data, without burning CPU while asleep
# and two modes again with spin_us=0, so that every wait that finds nothing
# sleeps at once.
source "$(dirname "$0")/lib_shm.sh"

BYTES=${E2E_SHM_NESTED_BYTES:-3000000}
CONNS=3
MODES=(epoll epoll-et poll select deep oneshot)

# run_pair PHASE MODE WAITMODE
run_pair() {
	local name=$1 wm=$3
	shm_phase "$name" "$2"
	bg server "$PROGS/nest_echo" server --mode "$wm" --port-file "$PDIR/port" --conns $CONNS
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	runx "$PROGS/nest_echo" client --mode "$wm" --port "$(cat "$PDIR/port")" --conns $CONNS \
		--bytes "$BYTES" --seed 41 --pause-ms 120 >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "nest_echo client failed ($name): $(tail -n 2 "$PDIR/client.out" "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "nest_echo server failed ($name)"
	grep -q "^PASS nest_echo client conns=$CONNS\$" "$PDIR/client.out" || die "no PASS from the client ($name)"
	grep -q "^PASS nest_echo server conns=$CONNS\$" "$PDIR/server.out" || die "no PASS from the server ($name)"
	# Both ends saw the same bytes on every connection (the client also
	# checked each echoed byte against what it sent).
	diff <(grep '^conn ' "$PDIR/server.out") <(grep '^conn ' "$PDIR/client.out") >/dev/null ||
		die "server and client disagree on the bytes ($name)"
	[[ $(grep -c "^conn bytes=$BYTES " "$PDIR/client.out") -eq $CONNS ]] ||
		die "not every connection echoed $BYTES bytes ($name)"
	check_wait_stats "$name"
}

# check_wait_stats PHASE: the server's counters line.
check_wait_stats() {
	local line waits long spur wall cpu
	line=$(grep '^stat ' "$PDIR/server.err" | tail -n 1)
	[[ -n "$line" ]] || die "no stat line from the server ($1)"
	read -r waits long spur wall cpu < <(sed -n \
		's/^stat waits=\([0-9]*\) long_waits=\([0-9]*\) spurious=\([0-9]*\) idle_wall_ms=\([0-9]*\) idle_cpu_ms=\([0-9]*\)$/\1 \2 \3 \4 \5/p' \
		<<<"$line")
	[[ -n "$cpu" ]] || die "malformed stat line ($1): $line"
	# The client paused twice with the server idle: its outer wait slept
	# and a wakeup ended the sleep (no timeout was given).
	[[ $long -ge 1 ]] || die "the server's outer wait never slept and woke on data ($1): $line"
	# Asleep means asleep: no spinning in the outer wait.
	[[ $((cpu * 5)) -le $((wall + 5)) ]] || die "the server burnt CPU while its outer wait slept ($1): $line"
	# An outer event with nothing in the inner set is allowed now and
	# then (a wakeup already answered), not as a habit.
	[[ $spur -le $((waits / 10 + 5)) ]] || die "too many outer events with nothing inside ($1): $line"
	note "$1: $line"
}

check_shm_phase() {
	check_logs
	assert_conns shm nest_echo client $CONNS
	assert_conns shm nest_echo server $CONNS
	assert_conn_sets
	assert_close shm nest_echo "$BYTES" "$BYTES" $((2 * CONNS))
	assert_no_moves shm
}

for m in "${MODES[@]}"; do
	run_pair "plain-$m" plain "$m"
	run_pair "shunt-$m" shunt "$m"
	check_shm_phase
	assert_same_file "$TMP/plain-$m/server.out" "$TMP/shunt-$m/server.out" "server output plain vs shunt ($m)"
	assert_same_file "$TMP/plain-$m/client.out" "$TMP/shunt-$m/client.out" "client output plain vs shunt ($m)"
done

# No spinning: every wait that finds nothing sleeps at once, so readiness
# arrives while the outer waits are asleep all the time.
echo "spin_us = 0" >"$TMP/nospin.conf"
for m in epoll-et deep; do
	SHUNT_CONF=$TMP/nospin.conf run_pair "nospin-$m" shunt "$m"
	check_shm_phase
	assert_same_file "$TMP/plain-$m/client.out" "$TMP/nospin-$m/client.out" "client output plain vs spin_us=0 ($m)"
done
pass_soft
