#!/usr/bin/env bash
# shellcheck disable=SC2031,SC2154
# shm between two users who share a group (shm_group): echo_server runs as
# uid A, echo_client as uid B, both unprivileged, with their own primary
# groups and the shared group G as a supplementary one (setpriv, numeric ids:
# no user is created).  The server makes the rundir.
#   plain     both plain: the reference output
#   group     shm_group = G at both ends: the rundir and its subdirectories
#             are G's (2770), every connection on shm at both ends, exact
#             byte counts, same output as plain
#   samegroup shm_group = G, both ends uid A: same uid is still fine
#   private   no shm_group: A's rundir is A's alone (0700), B cannot use it
#             (a warning), so the kernel path: ring-alloc at B (no rundir to
#             make rings in), no-peer-shim at A; same output
#   untrusted the group's rundir of "group", but the server (A) without
#             shm_group: a private rundir must not be writable by a group
#             (its members could plant offers), so A refuses it (a warning)
#             and registers nothing: ring-alloc at A, no-peer-shim at B; same
#             output
#   worldw    shm_group = G at both ends, but the rundir is world-writable
#             (2777, A's, group G): refused by both (a warning each, its
#             mode left alone), kernel path, ring-alloc; same output
# Needs root (setpriv); prints SKIP otherwise.
source "$(dirname "$0")/lib_shm.sh"

if [[ $(id -u) -ne 0 ]]; then
	echo "SKIP: $E2E_NAME needs root to run processes as other users"
	exit 0
fi
need setpriv

UID_A=61001
UID_B=61002
GID_G=61000
BYTES=${E2E_SHM_GROUP_BYTES:-2000000}
CONNS=2

# The two users must reach the programs, the library, the logs and the
# rundir: traversable parents, world-writable (sticky) output directories,
# and the rundir's parent like /dev/shm (1777) so the server can make it.
chmod 711 "$TMP"
chmod 1777 "$RUNROOT"
for d in "$SHUNT_LIB" "$PROGS/echo_server" "$SHUNT"; do
	setpriv --reuid=$UID_A --regid=$UID_A --clear-groups -- test -r "$d" ||
		{ echo "SKIP: $E2E_NAME: $d is not readable by an unprivileged user"; exit 0; }
done
# spin_us = 0: every wait sleeps, so every wakeup must cross from one user
# to the other (a wake socket the peer may not write to hangs the run).
printf 'shm_group = %s\nspin_us = 0\n' $GID_G >"$TMP/group.conf"
chmod 644 "$TMP/group.conf" "$EMPTY_CONF"

# as UID: the command prefix run as UID, supplementary group G.
as_prefix() { as_user_prefix "$1" "$GID_G" "${2:-}"; }

# run_pair NAME MODE SERVER_UID CLIENT_UID SERVER_CONF CLIENT_CONF [KEEP_RUNDIR]
run_pair() {
	local name=$1 suid=$3 cuid=$4 sconf=$5 cconf=$6 keep=${7:-}
	shm_phase "$name" "$2"
	chmod 1777 "$PDIR" "$LOGDIR"
	if [[ -n "$keep" ]]; then
		RUNDIR=$RUNROOT/$keep
	else
		rmdir "$RUNDIR" # the server makes it
	fi
	SHUNT_CONF=$sconf as_prefix "$suid" "$E2E_BG_LIFETIME"
	"${PFX[@]}" "$PROGS/echo_server" --port-file "$PDIR/port" --conns $CONNS --wait epoll \
		</dev/null >"$PDIR/server.out" 2>"$PDIR/server.err" &
	local spid=$!
	BG_PIDS+=("$spid")
	wait_file "$PDIR/port" "$spid"
	SHUNT_CONF=$cconf as_prefix "$cuid"
	"${PFX[@]}" "$PROGS/echo_client" --port "$(cat "$PDIR/port")" --conns $CONNS \
		--bytes "$BYTES" --seed 23 --wait epoll-et >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "echo_client failed ($name): $(tail -n 2 "$PDIR/client.out" "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "echo_server failed ($name)"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client ($name)"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server ($name)"
	assert_same_file "$TMP/plain/client.out" "$PDIR/client.out" "client output plain vs $name"
	assert_same_file "$TMP/plain/server.out" "$PDIR/server.out" "server output plain vs $name"
}

# The processes really ran as the users: their log files are theirs.
assert_log_owners() {
	local want=$1 role=$2 f n=0
	while read -r f; do
		[[ $(stat -c %u "$f") == "$want" ]] || die "$role log $f is not uid $want's ($PHASE)"
		n=$((n + 1))
	done < <(grep -l "role=$role " "$LOGDIR"/*.log)
	[[ $n -ge 1 ]] || die "no $role log ($PHASE)"
}

assert_mode() {
	local got
	got=$(stat -c '%a %g' "$1")
	[[ $got == "$2" ]] || die "$1: mode and group '$got', expected '$2' ($PHASE)"
}

run_pair plain plain 0 0 "$EMPTY_CONF" "$EMPTY_CONF"

run_pair group shunt $UID_A $UID_B "$TMP/group.conf" "$TMP/group.conf"
check_logs
assert_log_owners $UID_A server
assert_log_owners $UID_B client
assert_conns shm echo_client client $CONNS
assert_conns shm echo_server server $CONNS
assert_conn_sets
assert_close shm echo_client "$BYTES" "$BYTES" $CONNS
assert_close shm echo_server "$BYTES" "$BYTES" $CONNS
assert_no_moves shm
for d in "$RUNDIR" "$RUNDIR/l" "$RUNDIR/o" "$RUNDIR/s"; do
	assert_mode "$d" "2770 $GID_G"
done
[[ $(stat -c %u "$RUNDIR") == "$UID_A" ]] || die "the rundir is not the server's ($PHASE)"

run_pair samegroup shunt $UID_A $UID_A "$TMP/group.conf" "$TMP/group.conf"
check_logs
assert_conns shm echo_client client $CONNS
assert_conns shm echo_server server $CONNS
assert_close shm echo_client "$BYTES" "$BYTES" $CONNS
assert_no_moves shm

run_pair private shunt $UID_A $UID_B "$EMPTY_CONF" "$EMPTY_CONF"
assert_mode "$RUNDIR" "700 $UID_A"
# B's one complaint, and nothing else above info from anyone.
assert_log_count ': warn: rundir .* is not usable' 1
bad=$(cat "$LOGDIR"/*.log | grep -Ev ': (debug|info): |: warn: rundir .* is not usable' | head -n 3 || true)
[[ -z "$bad" ]] || die "unexpected log lines ($PHASE): $bad"
assert_log_owners $UID_B client
assert_kernel_conns echo_client client $CONNS ring-alloc
assert_kernel_conns echo_server server $CONNS no-peer-shim
assert_log_lacks ': debug: shm close '

run_pair untrusted shunt $UID_A $UID_B "$EMPTY_CONF" "$TMP/group.conf" group
assert_log_count ': warn: rundir .* is not usable \(writable by its group, and shm_group is not set\)' 1
bad=$(cat "$LOGDIR"/*.log | grep -Ev ': (debug|info): |: warn: rundir .* is not usable' | head -n 3 || true)
[[ -z "$bad" ]] || die "unexpected log lines ($PHASE): $bad"
assert_kernel_conns echo_server server $CONNS ring-alloc
assert_kernel_conns echo_client client $CONNS no-peer-shim
mkdir "$RUNROOT/ww"
chown $UID_A:$GID_G "$RUNROOT/ww"
chmod 2777 "$RUNROOT/ww"
run_pair worldw shunt $UID_A $UID_B "$TMP/group.conf" "$TMP/group.conf" ww
assert_mode "$RUNDIR" "2777 $GID_G"
assert_log_count ': warn: rundir .* is not usable' 2
bad=$(cat "$LOGDIR"/*.log | grep -Ev ': (debug|info): |: warn: rundir .* is not usable' | head -n 3 || true)
[[ -z "$bad" ]] || die "unexpected log lines ($PHASE): $bad"
assert_kernel_conns echo_client client $CONNS ring-alloc
assert_kernel_conns echo_server server $CONNS ring-alloc
[[ -z "$(ls -A "$RUNDIR")" ]] || die "something was made in the world-writable rundir: $(ls -A "$RUNDIR")"
pass_soft
