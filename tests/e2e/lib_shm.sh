# shellcheck shell=bash disable=SC2030,SC2031,SC2119,SC2120,SC2154
# Helpers for the shared-memory transport's end-to-end tests (shm_*.sh), on
# top of lib.sh.  These tests always run `shunt run` with shunt's default
# transport (auto) and assert, from the per-process debug logs, that shm was
# really used where both ends run shunt (or that it was not, where it must
# not be):
#   conn fd=N role=client|server local=A peer=B transport=shm reason=-
#   shm close fd=N bytes_in=X bytes_out=Y
#   moved fd=N from=shm transport=kernel reason=REASON
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# These tests are about shm: a transport forced from outside would make them
# meaningless.
if [[ -n "$E2E_TRANSPORT" && "$E2E_TRANSPORT" != auto ]]; then
	echo "SKIP: $E2E_NAME tests the shm transport; E2E_TRANSPORT=$E2E_TRANSPORT does not apply"
	exit 0
fi

# shm_phase NAME MODE: lib.sh's phase, with the phase's rundir private (0700).
shm_phase() {
	phase "$@"
	chmod 700 "$RUNDIR"
}

# as_user_prefix UID GROUPS [LIFETIME]: sets PFX (lib.sh's _prefix for
# MODE) so that, under shunt, the program runs as UID with primary group UID
# and the supplementary GROUPS (comma-separated ids): another user sharing
# a rundir through shm_group.  Needs root (setpriv).
as_user_prefix() {
	local uid=$1 groups=$2
	_prefix "$MODE" "${3:-}"
	[[ $MODE == shunt ]] || return 0
	PFX=("${PFX[@]:0:4}" setpriv --reuid="$uid" --regid="$uid" --groups="$groups" -- "${PFX[@]:4}")
}

# memcached_client PORT N: tests/e2e/memcached_client.py (N values set and
# read back) against memcached on PORT, under the prefix PFX (_prefix or
# as_user_prefix); output in $PDIR/client.out.  Fails unless it passes.
memcached_client() {
	"${PFX[@]}" python3 "$E2E_DIR/memcached_client.py" "$1" "$2" >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "memcached client failed: $(tail -n 2 "$PDIR/client.out" "$PDIR/client.err")"
	grep -q "^PASS memcached values=$2 " "$PDIR/client.out" || die "no PASS from the memcached client"
	note "$(cat "$PDIR/client.out")"
}

# assert_memcached_on_shm: after memcached_client, memcached stopped: its one
# connection on shm at both ends, no move to TCP, and every value through
# the rings (sent once, received twice).
assert_memcached_on_shm() {
	local total in out
	check_logs
	assert_shm_conns 'python3[^:]*' client 1
	assert_shm_conns memcached server 1
	assert_conn_pairs 1
	assert_no_moves
	total=$(sed -n 's/.* bytes=\([0-9]*\) .*/\1/p' "$PDIR/client.out")
	read -r in out < <(log_lines "$(shm_close_re 'python3[^:]*' '[0-9]+' '[0-9]+')" |
		sed -n 's/.*bytes_in=\([0-9]*\) bytes_out=\([0-9]*\)$/\1 \2/p')
	[[ -n "$in" && $out -gt $total && $in -gt $((2 * total)) ]] ||
		die "client's shm byte counts (in=$in out=$out) do not cover the values ($total bytes, read twice)"
}

# shm_conn_re PROG ROLE: a decision line of PROG/ROLE on shm.
shm_conn_re() { conn_re "$1" "$2" shm '-'; }

# assert_shm_conns PROG ROLE N: exactly N decision lines of PROG/ROLE, and
# every one of them says transport=shm.
# why_not_shm PROG ROLE: "K of M (reason xN ...)" for the lines not on shm.
why_not_shm() {
	local all not
	all=$(log_count "$(conn_re "$1" "$2" '[a-z]+' '[a-z-]*')")
	not=$(log_lines "$(conn_re "$1" "$2" '[a-z]+' '[a-z-]*')" | grep -v ' transport=shm reason=-$' |
		sed -n 's/.* transport=\([a-z]*\) reason=\([a-z-]*\)$/\1:\2/p' | sort | uniq -c |
		awk '{printf "%s%s x%d", (NR > 1 ? ", " : ""), $2, $1}')
	echo "$(log_lines "$(conn_re "$1" "$2" '[a-z]+' '[a-z-]*')" | grep -vc ' transport=shm reason=-$') of $all not on shm ($not)"
}
assert_shm_conns() {
	local prog=$1 role=$2 n=$3 bad
	bad=$(log_lines "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')" | grep -v ' transport=shm reason=-$' | head -n 3 || true)
	[[ -z "$bad" ]] || die "$prog $role connections: $(why_not_shm "$prog" "$role"); first: $(head -n 1 <<<"$bad")"
	assert_log_count "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')" "$n"
}

# assert_all_shm PROG ROLE MIN: at least MIN decision lines of PROG/ROLE, all
# on shm.  Sets SHM_N to the count.
assert_all_shm() {
	local prog=$1 role=$2 min=$3 bad n
	bad=$(log_lines "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')" | grep -v ' transport=shm reason=-$' | head -n 3 || true)
	[[ -z "$bad" ]] || die "$prog $role connections: $(why_not_shm "$prog" "$role"); first: $(head -n 1 <<<"$bad")"
	n=$(log_count "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')")
	[[ $n -ge $min ]] || die "expected >= $min $prog $role connections, found $n"
	# shellcheck disable=SC2034 # read by the callers
	SHM_N=$n
}

# assert_conn_sets: the set of client conn lines (local, peer, transport)
# is the set of server conn lines with local and peer swapped: both ends
# agree on every connection.  (lib.sh's assert_conn_pairs counts pairs, which
# a 4-tuple used twice in one phase doubles.)
# An optional argument names a client address (ip:port) left out.
assert_conn_sets() {
	local diff skip=${1:-none}
	diff=$(comm -3 <(log_lines ': debug: conn .* role=client ' | grep -vF " local=$skip " |
		sed -n 's/.* local=\([^ ]*\) peer=\([^ ]*\) transport=\([a-z]*\) .*/\1|\2|\3/p' | sort -u) \
		<(log_lines ': debug: conn .* role=server ' | grep -vF " peer=$skip " |
			sed -n 's/.* local=\([^ ]*\) peer=\([^ ]*\) transport=\([a-z]*\) .*/\2|\1|\3/p' | sort -u) | head -n 4)
	[[ -z "$diff" ]] || die "client and server conn lines disagree (client|server tuples): $(echo "$diff" | tr '\n\t' ' ')"
}

# assert_kernel_conns PROG ROLE N REASON: exactly N decision lines of
# PROG/ROLE, all on the kernel path with REASON.
assert_kernel_conns() {
	local prog=$1 role=$2 n=$3 reason=$4 bad
	bad=$(log_lines "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')" | grep -Ev " transport=kernel reason=$reason\$" | head -n 3 || true)
	[[ -z "$bad" ]] || die "$prog $role: expected transport=kernel reason=$reason, got: $bad"
	assert_log_count "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')" "$n"
}

# shm_close_re PROG IN OUT: an "shm close" line of PROG with these counts
# (regexes).
shm_close_re() {
	echo "^shunt\\[[0-9]+\\] $1: debug: shm close fd=[0-9]+ bytes_in=$2 bytes_out=$3\$"
}
# assert_shm_close PROG IN OUT N: exactly N such lines, and no other shm close
# line from PROG.
assert_shm_close() {
	local prog=$1 in=$2 out=$3 n=$4 all
	all=$(log_count "$(shm_close_re "$prog" '[0-9]+' '[0-9]+')")
	assert_log_count "$(shm_close_re "$prog" "$in" "$out")" "$n"
	[[ $all -eq $n ]] || die "$prog: $all shm close lines, $n with bytes_in=$in bytes_out=$out: $(log_lines "$(shm_close_re "$prog" '[0-9]+' '[0-9]+')" | grep -Ev "bytes_in=$in bytes_out=$out\$" | head -n 3)"
}

# moved_re [REASON]: a connection left shm for the kernel path.
# Two spellings: "fd=N moved from shm to the kernel path: R" and
# "moved fd=N from=shm transport=kernel reason=R".
moved_re() {
	local r=${1:-.*}
	echo ": info: (fd=[0-9]+ moved from shm to the kernel path: $r|moved fd=[0-9]+ from=shm transport=kernel reason=$r)\$"
}
assert_no_moves() { assert_log_lacks "$(moved_re)"; }
# soft_fail MSG: a failure that must not hide the checks after it: printed
# now, the script (or subtest) fails at its end.
SOFT_FAILS=0
soft_fail() {
	printf 'FAIL: %s: %s\n' "$E2E_NAME" "$*"
	SOFT_FAILS=$((SOFT_FAILS + 1))
}
# assert_moves_explained: every move names a reason (brief, property 5).
# A soft failure: the bytes and the rest are still checked.
assert_moves_explained() {
	local bad
	bad=$(log_lines "$(moved_re)" | grep -Ev '(kernel path: |reason=)[a-z][a-z-]*$' | head -n 3 || true)
	[[ -z "$bad" ]] || soft_fail "connection moved to the kernel path without a reason ($PHASE): $bad"
}

# assert_rundir_clean: once every process of the phase is gone, nothing of a
# connection (offers, rings, wake sockets) or of a listener is left.  A soft
# failure (a leak, not a wrong byte): the checks after it still run.
assert_rundir_clean() {
	local left f
	# What processes keep between connections (ring arenas, bound wake
	# sockets) goes at exit(), but not with _exit() or a signal: then
	# the next process that uses shm removes what the dead left.  Be
	# that next process, so what is left after it is a real leak.
	timeout -k 5 30 env "SHUNT_LIBRARY=$SHUNT_LIB" "SHUNT_RUNDIR=$RUNDIR" "$SHUNT" run \
		--config "$EMPTY_CONF" --log error -- "$PROGS/listen_once" ||
		soft_fail "the sweeping process failed ($PHASE)"
	left=$(find "$RUNDIR/o" -mindepth 1 2>/dev/null | head -n 5 || true)
	# A listener killed by a signal runs no code: its registry name stays,
	# but its lock is gone, so clients skip it and the next process that
	# uses shm removes it.  A name still locked by nobody alive is a leak.
	for f in "$RUNDIR"/l/*; do
		[[ -e $f ]] || continue
		flock -n -x "$f" true || left+=" $f (still locked)"
	done
	[[ -z "$left" ]] || soft_fail "left in the rundir after every process exited ($PHASE): $(echo "$left" | tr '\n' ' ')"
}

# count_listeners PORT: listening sockets on PORT.
count_listeners() { ss -Hltn "( sport = :$1 )" 2>/dev/null | wc -l; }

# ---- private network namespaces (root only): loopback only, their own
# ports and TIME_WAIT table, so a scenario that exhausts ports disturbs no
# other test.  new_netns sets NETNS; every one is deleted at exit.
SHM_NETNS=()
can_netns() { [[ $(id -u) -eq 0 ]] && command -v ip >/dev/null 2>&1; }
new_netns() {
	NETNS=shunt-e2e-$$-${#SHM_NETNS[@]}-$RANDOM
	ip netns add "$NETNS" || die "ip netns add $NETNS failed"
	SHM_NETNS+=("$NETNS")
	ip -n "$NETNS" link set lo up || die "cannot bring lo up in $NETNS"
}
del_netns_all() {
	local n
	for n in "${SHM_NETNS[@]}"; do
		ip netns del "$n" 2>/dev/null
	done
	SHM_NETNS=()
	return 0
}
trap '_shm_rc=$?; set +e; del_netns_all; (exit $_shm_rc); _cleanup' EXIT

# bg_in NS NAME CMD... / run_in NS CMD...: bg / runx inside namespace NS
# (empty: this one).
bg_in() {
	local ns=$1 name=$2 pre=()
	shift 2
	[[ -n "$ns" ]] && pre=(ip netns exec "$ns")
	_prefix "$MODE" "$E2E_BG_LIFETIME"
	"${pre[@]}" "${PFX[@]}" "$@" </dev/null >"$PDIR/$name.out" 2>"$PDIR/$name.err" &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}
run_in() {
	local ns=$1 pre=()
	shift
	[[ -n "$ns" ]] && pre=(ip netns exec "$ns")
	_prefix "$MODE"
	"${pre[@]}" "${PFX[@]}" "$@"
}

# ---- subtests: one script, several independent scenarios.  A failing
# subtest prints its FAIL line and the others still run; the script fails at
# the end if any did.
SUBTESTS_FAILED=()
SUBTESTS_ONLY=${SHM_ONLY:-}   # e.g. SHM_ONLY="late decline" runs those only
_sub_cleanup() {
	local rc=$? pid
	set +e
	if [[ $rc -ne 0 && $rc -ne 143 && $_e2e_failed -eq 0 && $SOFT_FAILS -eq 0 ]]; then
		printf 'FAIL: %s: exited with status %d (line %s)\n' "$E2E_NAME" "$rc" "${_e2e_line:-?}"
		_dump
	fi
	for pid in "${BG_PIDS[@]}"; do
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	del_netns_all
	exit "$rc"
}
# subtest NAME FUNC [ARGS...]
subtest() {
	local name=$1 t0=$SECONDS rc
	shift
	if [[ -n "$SUBTESTS_ONLY" && " $SUBTESTS_ONLY " != *" $name "* ]]; then
		return 0
	fi
	set +e
	(
		set -e
		BG_PIDS=()
		E2E_NAME="$E2E_NAME/$name"
		SOFT_FAILS=0
		trap _sub_cleanup EXIT
		trap 'exit 143' TERM INT
		trap '_e2e_line=$LINENO' ERR
		"$@"
		[[ $SOFT_FAILS -eq 0 ]] || exit 1
	)
	rc=$?
	set -e
	if [[ $rc -eq 0 ]]; then
		note "ok $name ($((SECONDS - t0)) s)"
	else
		[[ $rc -eq 143 ]] && exit 143
		SUBTESTS_FAILED+=("$name")
		note "FAILED $name ($((SECONDS - t0)) s)"
	fi
}
finish_subtests() {
	if [[ $SOFT_FAILS -gt 0 ]]; then
		SUBTESTS_FAILED+=("(top level)")
	fi
	if [[ ${#SUBTESTS_FAILED[@]} -gt 0 ]]; then
		_e2e_failed=1
		printf 'FAIL: %s: failed subtests: %s\n' "$E2E_NAME" "${SUBTESTS_FAILED[*]}"
		exit 1
	fi
	pass
}
# shm_pass: PASS, unless a soft failure was printed.
shm_pass() {
	if [[ $SOFT_FAILS -gt 0 ]]; then
		_e2e_failed=1
		printf 'FAIL: %s: %d soft failure(s), see above\n' "$E2E_NAME" "$SOFT_FAILS"
		exit 1
	fi
	pass
}
