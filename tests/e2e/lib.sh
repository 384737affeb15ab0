# shellcheck shell=bash disable=SC2030,SC2031 # subtests run in subshells by design
# Helpers for the end-to-end tests.  Each test script sources this file, runs
# its scenario once plainly and once under `shunt run`, compares the results,
# and checks from shunt's per-process log files that the library was loaded
# and decided the connections.
#
# Environment (set by ctest, see CMakeLists.txt; for a manual run set
# SHUNT_BUILD=/path/to/build and the rest is derived):
#   SHUNT      the shunt launcher          SHUNT_LIB  libshunt.so
#   PROGS      directory of tests/progs    KEEP_TMP=1 keep the temp dir
set -euo pipefail

E2E_NAME=$(basename "$0" .sh)
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n "${SHUNT_BUILD:-}" ]]; then
	: "${SHUNT:=$SHUNT_BUILD/tools/shunt}"
	: "${SHUNT_LIB:=$SHUNT_BUILD/preload/libshunt.so}"
	: "${PROGS:=$SHUNT_BUILD/tests/progs}"
fi
: "${SHUNT:?set SHUNT (the shunt launcher) or SHUNT_BUILD}"
: "${SHUNT_LIB:?set SHUNT_LIB (libshunt.so) or SHUNT_BUILD}"
: "${PROGS:?set PROGS (tests/progs build dir) or SHUNT_BUILD}"
# Give background servers a bounded life even if this script is killed.
: "${E2E_BG_LIFETIME:=150}"
# and every foreground program a bounded run time.
: "${E2E_CMD_TIMEOUT:=90}"

# E2E_TRANSPORT=kernel|shm|fabric|auto is passed to `shunt run --transport`
# (unset: shunt's own default); the log checks then expect that transport.
: "${E2E_TRANSPORT:=}"
case "$E2E_TRANSPORT" in
"" | auto) TRANSPORT_RE='(kernel|shm|fabric)' ;;
kernel | shm | fabric) TRANSPORT_RE=$E2E_TRANSPORT ;;
*) echo "FAIL: E2E_TRANSPORT=$E2E_TRANSPORT: not kernel, shm, fabric or auto" && exit 1 ;;
esac
E2E_TAG=$E2E_NAME
if [[ -n "$E2E_TRANSPORT" ]]; then
	E2E_NAME="$E2E_NAME[$E2E_TRANSPORT]"
	E2E_TAG="$E2E_TAG-$E2E_TRANSPORT"
fi
# Reasons for the kernel path when the rule says auto and the peer is plain.
AUTO_KERNEL_REASONS='(no-transport|no-peer-shim)'

# Nothing from the caller's environment may change the runs.
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_RULES SHUNT_LOG SHUNT_LOG_FILE \
	SHUNT_DEFAULT_TRANSPORT SHUNT_ENABLE SHUNT_RUNDIR SHUNT_LIBRARY 2>/dev/null || true
export LC_ALL=C

TMP=$(mktemp -d "${TMPDIR:-/tmp}/shunt-e2e-$E2E_TAG.XXXXXX")
# shunt's runtime directory (registry, rings) belongs on tmpfs.
if [[ -d /dev/shm && -w /dev/shm && "$(stat -f -c %T /dev/shm 2>/dev/null)" == tmpfs ]]; then
	RUNROOT=$(mktemp -d "/dev/shm/shunt-e2e-$E2E_TAG.XXXXXX")
else
	RUNROOT=$TMP/run
fi
BG_PIDS=()
USED_PORTS=" "
LOGDIR=""
MODE=""
_e2e_failed=0

note() { printf '[%s] %s\n' "$E2E_NAME" "$*"; }

# Prints stderr/stdout tails of the current phase's runs and its shunt logs,
# to help whoever reads a failure.
_dump() {
	local f dir=${PDIR:-$TMP}
	for f in "$dir"/*.err "$dir"/*.out; do
		[[ -s "$f" ]] || continue
		printf -- '--- %s (last 15 lines)\n' "${f#"$TMP"/}"
		tail -n 15 "$f" | cut -c1-300
	done
	for f in "$dir"/logs/*.log; do
		[[ -s "$f" ]] || continue
		printf -- '--- %s (last 10 lines)\n' "${f#"$TMP"/}"
		tail -n 10 "$f" | cut -c1-300
	done
}

die() {
	printf 'FAIL: %s: %s\n' "$E2E_NAME" "$*"
	_e2e_failed=1
	_dump || true
	exit 1
}

_cleanup() {
	local rc=$? pid i
	set +e
	for pid in "${BG_PIDS[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${BG_PIDS[@]}"; do
		for ((i = 0; i < 60; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	del_netns_all
	if [[ $rc -ne 0 && $_e2e_failed -eq 0 ]]; then
		printf 'FAIL: %s: exited with status %d (line %s)\n' "$E2E_NAME" "$rc" "${_e2e_line:-?}"
		_dump
	fi
	if [[ "${KEEP_TMP:-0}" == 1 ]]; then
		echo "kept $TMP"
	else
		rm -rf "$TMP"
	fi
	rm -rf "$RUNROOT"
	exit "$rc"
}
trap _cleanup EXIT
trap 'exit 143' TERM INT
trap '_e2e_line=$LINENO' ERR

# need PROG...: every program must be installed (scripts/deps.sh installs them).
need() {
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 || die "$p not installed: run scripts/deps.sh"
	done
}
[[ -x "$SHUNT" ]] || die "shunt launcher not found at $SHUNT (build first)"
[[ -f "$SHUNT_LIB" ]] || die "libshunt.so not found at $SHUNT_LIB (build first)"
[[ -d "$PROGS" ]] || die "test programs not found in $PROGS (build first)"

# An empty configuration so that /etc/shunt/shunt.conf never leaks in.
EMPTY_CONF=$TMP/empty.conf
: >"$EMPTY_CONF"

# free_port: prints a TCP port with no listener on any address, below the
# ephemeral range (so no outgoing connection can take it), not handed out
# before in this test.
free_port() {
	local p i lo=20000 span=12000
	for ((i = 0; i < 200; i++)); do
		p=$((lo + (RANDOM * 32768 + RANDOM) % span))
		[[ "$USED_PORTS" == *" $p "* ]] && continue
		[[ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ]] || continue
		USED_PORTS+="$p "
		echo "$p"
		return 0
	done
	die "no free port"
}

# phase NAME: starts a named part of the test; its files go to $TMP/NAME and
# shunt logs to $LOGDIR=$TMP/NAME/logs.  MODE is plain or shunt.
phase() {
	PHASE=$1
	MODE=${2:-$MODE}
	PDIR=$TMP/$PHASE
	LOGDIR=$PDIR/logs
	if [[ ! -d "$PDIR" ]]; then
		note "== $PHASE ($MODE)"
	fi
	RUNDIR=$RUNROOT/$PHASE
	mkdir -p "$PDIR" "$LOGDIR" "$RUNDIR"
}

# _prefix MODE: sets PFX to the command prefix that runs a program plainly
# or under `shunt run` (debug logs, one file per process in $LOGDIR).  Extra
# launcher options go in the array SHUNT_ARGS; SHUNT_CONF and SHUNT_LOGLEVEL
# replace the defaults.
_prefix() {
	# Every program runs under timeout(1): nothing can hang the suite.
	local -a t=(timeout -k 5 "${2:-$E2E_CMD_TIMEOUT}")
	case "$1" in
	plain) PFX=("${t[@]}" env -u LD_PRELOAD) ;;
	shunt)
		[[ -n "$LOGDIR" ]] || die "run_shunt before phase"
		PFX=("${t[@]}" env "SHUNT_LIBRARY=$SHUNT_LIB" "SHUNT_RUNDIR=$RUNDIR" "$SHUNT" run
			--config "${SHUNT_CONF:-$EMPTY_CONF}" --log "${SHUNT_LOGLEVEL:-debug}"
			--log-file "$LOGDIR/%p.log")
		if [[ -n "$E2E_TRANSPORT" ]]; then
			PFX+=(--transport "$E2E_TRANSPORT")
		fi
		if [[ -n "${SHUNT_ARGS+x}" ]]; then
			PFX+=("${SHUNT_ARGS[@]}")
		fi
		PFX+=(--)
		;;
	*) die "MODE is '$1', not plain or shunt" ;;
	esac
}

# run_plain CMD... / run_shunt CMD...: run CMD without / under shunt.
run_plain() { _prefix plain; "${PFX[@]}" "$@"; }
run_shunt() { _prefix shunt; "${PFX[@]}" "$@"; }
# runx CMD...: run_plain or run_shunt according to MODE.
runx() { _prefix "$MODE"; "${PFX[@]}" "$@"; }

# bg NAME CMD...: starts CMD (plain or under shunt according to MODE) in the
# background, stdout/stderr in $PDIR/NAME.out and .err.  `timeout` runs it in
# its own process group with a bounded lifetime, so nothing outlives the test
# for long even if this script is killed.  Sets BG_PID (= the group id).
bg() {
	local name=$1
	shift
	_prefix "$MODE" "$E2E_BG_LIFETIME"
	"${PFX[@]}" "$@" </dev/null >"$PDIR/$name.out" 2>"$PDIR/$name.err" &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}

# wait_port PORT [PID] [SECONDS=15]: until something listens on PORT
# (checked with ss, so no connection is made).  Fails early if PID died.
wait_port() {
	local port=$1 pid=${2:-} secs=${3:-15} i
	for ((i = 0; i < secs * 20; i++)); do
		if [[ -n "$(ss -Hltn "( sport = :$port )" 2>/dev/null)" ]]; then
			return 0
		fi
		if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
			die "process $pid exited before listening on port $port"
		fi
		sleep 0.05
	done
	die "nothing listening on port $port after ${secs}s"
}

# wait_file FILE [PID] [SECONDS=15]: until FILE exists and is not empty.
wait_file() {
	local f=$1 pid=${2:-} secs=${3:-15} i
	for ((i = 0; i < secs * 20; i++)); do
		[[ -s "$f" ]] && return 0
		if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
			die "process $pid exited before writing $f"
		fi
		sleep 0.05
	done
	die "$f not written after ${secs}s"
}

# wait_exit PID [SECONDS=30]: waits for a background process; returns its
# exit status; fails if it does not end in time.
wait_exit() {
	local pid=$1 secs=${2:-30} i rc
	for ((i = 0; i < secs * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && die "process $pid still running after ${secs}s"
	rc=0
	wait "$pid" || rc=$?
	return "$rc"
}

# stop PID: SIGTERM to the process group, then wait (bounded).
stop() {
	local pid=$1 i
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL -- "-$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# The pid of the real program started by bg (timeout's child).
bg_prog_pid() {
	local pid=$1 c
	c=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null || true)
	echo "${c%% *}"
}

# assert_preloaded PID: libshunt.so is mapped in the process.
assert_preloaded() {
	local pid=$1
	grep -q "$(basename "$SHUNT_LIB")" "/proc/$pid/maps" 2>/dev/null ||
		die "libshunt.so is not mapped in process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))"
}
assert_not_preloaded() {
	local pid=$1
	if grep -q "libshunt" "/proc/$pid/maps" 2>/dev/null; then
		die "libshunt.so is mapped in plain process $pid"
	fi
}

# log_lines REGEX: lines of this phase's shunt logs matching REGEX (ERE).
log_lines() {
	local f
	shopt -s nullglob
	local files=("$LOGDIR"/*.log)
	shopt -u nullglob
	[[ ${#files[@]} -gt 0 ]] || return 0
	cat "${files[@]}" | grep -E -- "$1" || true
}
log_count() { log_lines "$1" | wc -l; }

# assert_log_has REGEX [MIN=1]: at least MIN lines in this phase's logs match.
assert_log_has() {
	local re=$1 min=${2:-1} n
	n=$(log_count "$re")
	[[ $n -ge $min ]] || die "expected >= $min log lines matching /$re/ in $LOGDIR, found $n"
}
# assert_log_count REGEX N: exactly N lines match.
assert_log_count() {
	local re=$1 want=$2 n
	n=$(log_count "$re")
	[[ $n -eq $want ]] || die "expected exactly $want log lines matching /$re/, found $n"
}
assert_log_lacks() {
	local re=$1 n
	n=$(log_count "$re")
	[[ $n -eq 0 ]] || die "expected no log line matching /$re/, found $n: $(log_lines "$re" | head -n 3)"
}
# assert_log_pids REGEX MIN: lines matching REGEX come from >= MIN processes.
assert_log_pids() {
	local re=$1 min=$2 n
	n=$(log_lines "$re" | sed -n 's/^shunt\[\([0-9]*\)\].*/\1/p' | sort -u | wc -l)
	[[ $n -ge $min ]] || die "expected lines matching /$re/ from >= $min processes, found $n"
}

# check_logs: every log line is well formed, sits in the file of its own pid,
# and no line is an error or a warning.  Every conn line has all its fields
# and a transport matching TRANSPORT_RE (E2E_TRANSPORT when set).
check_logs() {
	local f pid bad
	shopt -s nullglob
	for f in "$LOGDIR"/*.log; do
		pid=$(basename "$f" .log)
		bad=$(grep -Ev "^shunt\\[$pid\\] [^ :]+: (debug|info): " "$f" | head -n 3 || true)
		[[ -z "$bad" ]] || die "bad or foreign line in $(basename "$f"): $bad"
	done
	shopt -u nullglob
	bad=$(log_lines ': debug: conn ' |
		grep -Ev ": debug: conn fd=[0-9]+ role=(client|server) local=[^ ]+:[0-9]+ peer=[^ ]+:[0-9]+ transport=$TRANSPORT_RE reason=[a-z-]*\$" |
		head -n 3 || true)
	[[ -z "$bad" ]] || die "malformed conn line: $bad"
	bad=$(log_lines ': debug: close ' |
		grep -Ev ': debug: close fd=[0-9]+ transport=(kernel|shm|fabric) reason=[a-z-]*$' | head -n 3 || true)
	[[ -z "$bad" ]] || die "malformed close line: $bad"
	if [[ "$E2E_TRANSPORT" == kernel ]]; then
		bad=$(log_lines ': debug: conn ' | grep -v ' reason=rule-kernel$' | head -n 3 || true)
		[[ -z "$bad" ]] || die "--transport kernel but: $bad"
	fi
}

# assert_conn_pairs N: N client conn lines each have a server conn line with
# local and peer swapped and the same transport (both ends ran under shunt in
# this phase): the logged addresses are the real ones, and both ends agree on
# the path.
assert_conn_pairs() {
	local want=$1 n
	# A 4-tuple can come back (a port reused by a later connection): pair
	# each client line with one server line, min(count) per tuple.
	n=$( { log_lines ': debug: conn .* role=client ' |
		sed -n 's/.* local=\([^ ]*\) peer=\([^ ]*\) transport=\([a-z]*\) .*/c \1|\2|\3/p'
		log_lines ': debug: conn .* role=server ' |
		sed -n 's/.* local=\([^ ]*\) peer=\([^ ]*\) transport=\([a-z]*\) .*/s \2|\1|\3/p'; } |
		awk '$1 == "c" { c[$2]++ } $1 == "s" { s[$2]++ }
		     END { for (k in c) if (k in s) n += c[k] < s[k] ? c[k] : s[k]; print n + 0 }')
	[[ $n -eq $want ]] ||
		die "expected $want client/server conn line pairs with matching addresses and transport, found $n"
}

# conn_re PROG ROLE [TRANSPORT_RE] [REASON_RE]: regex of a conn decision line.
conn_re() {
	local prog=$1 role=$2 tr=${3:-$TRANSPORT_RE} rs=${4:-[a-z-]*}
	echo "^shunt\\[[0-9]+\\] $prog: debug: conn fd=[0-9]+ role=$role local=[^ ]+ peer=[^ ]+ transport=$tr reason=$rs\$"
}

# assert_started PROG: shunt's startup line from PROG (it is printed at the
# process's first decision: a listen, connect or accept).
assert_started() {
	local prog=$1
	assert_log_has "^shunt\\[[0-9]+\\] $prog: info: shunt [0-9.]+ enabled"
}

sha256() { sha256sum "$@" | cut -d' ' -f1; }

# assert_eq A B WHAT
assert_eq() {
	[[ "$1" == "$2" ]] || die "$3: '$1' != '$2'"
}

# assert_same_file A B WHAT: byte-for-byte equal files.
assert_same_file() {
	cmp -s "$1" "$2" || die "$3: $1 and $2 differ ($(cmp "$1" "$2" 2>&1 | head -n 1))"
}

# random_file PATH BYTES: fixed-size random input.
random_file() {
	head -c "$2" /dev/urandom >"$1"
	[[ $(stat -c %s "$1") -eq $2 ]] || die "could not make $1"
}

pass() {
	echo "PASS: $E2E_NAME"
}

# compat_row PROGRAM VERSION [PLAIN [SHUNT]]: this test's row of the
# compatibility matrix (docs/COMPATIBILITY.md, scripts/compat_matrix.py),
# written to $SHUNT_COMPAT_DIR when ctest sets it and shunt picks the
# transport itself.  The transport column counts the connections of every
# shunt run of the test: their decision lines (log=debug) by transport, the
# reasons of those on the kernel path and of the moves to it; without
# decision lines, the processes' exit summaries.  Call it where the test
# has passed.
compat_row() {
	[[ -n "${SHUNT_COMPAT_DIR:-}" && -z "$E2E_TRANSPORT" ]] || return 0
	local shm=0 kern=0 reasons=""
	shopt -s nullglob
	local logs=("$TMP"/*/logs/*.log "$TMP"/*/*/logs/*.log)
	shopt -u nullglob
	if [[ ${#logs[@]} -gt 0 ]] && grep -qh ': debug: conn fd=' "${logs[@]}"; then
		shm=$(cat "${logs[@]}" | grep -c ': debug: conn fd=.* transport=shm ' || true)
		kern=$(cat "${logs[@]}" | grep -c ': debug: conn fd=.* transport=kernel ' || true)
		reasons=$(cat "${logs[@]}" | sed -n -e 's/.*: debug: conn fd=.* transport=kernel reason=\([a-z-]*\)$/\1/p' \
			-e 's/.*: info: moved fd=.* reason=\([a-z-]*\)$/moved:\1/p' | sort | uniq -c |
			awk '{ printf "%s=%d\n", $2, $1 }' | paste -sd ' ' -)
	elif [[ ${#logs[@]} -gt 0 ]]; then
		shm=$(cat "${logs[@]}" | sed -n 's/.*: info: summary: connections .* shm=\([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
		kern=$(cat "${logs[@]}" | sed -n 's/.*: info: summary: connections .* kernel=\([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
		reasons=$(cat "${logs[@]}" | sed -n 's/.*: info: summary: connections .* fallbacks //p' | tr ' ' '\n' |
			awk -F= 'NF == 2 { n[$1] += $2 } END { for (r in n) printf "%s=%d\n", r, n[r] }' | sort | paste -sd ' ' -)
	fi
	mkdir -p "$SHUNT_COMPAT_DIR"
	printf '%s\t%s\t%s\t%s\tshm %d, kernel %d%s\n' "$1" "$2" "${3:-pass}" "${4:-pass, same results}" \
		"$shm" "$kern" "${reasons:+ ($reasons)}" >"$SHUNT_COMPAT_DIR/$E2E_TAG.tsv"
}

# soft_fail MSG: a failure that must not hide the checks after it: printed
# now, the script (or subtest) fails at its end.
SOFT_FAILS=0
soft_fail() {
	printf 'FAIL: %s: %s\n' "$E2E_NAME" "$*"
	SOFT_FAILS=$((SOFT_FAILS + 1))
}
# pass_soft: PASS, unless a soft failure was printed.
pass_soft() {
	if [[ $SOFT_FAILS -gt 0 ]]; then
		_e2e_failed=1
		printf 'FAIL: %s: %d soft failure(s), see above\n' "$E2E_NAME" "$SOFT_FAILS"
		exit 1
	fi
	pass
}

# ---- what a transport's connections did, from the debug logs:
#   conn fd=N role=client|server local=A peer=B transport=T reason=R
#   T close fd=N bytes_in=X bytes_out=Y
#   moved fd=N from=T transport=kernel reason=R
# Each takes the transport first: shm, fabric.

# tp_conn_re TRANSPORT PROG ROLE: a decision line of PROG/ROLE taking it.
tp_conn_re() { conn_re "$2" "$3" "$1" '-'; }

# why_not TRANSPORT PROG ROLE: "K of M not on T (T':reason xN ...)" for the
# decision lines of PROG/ROLE that did not take it.
why_not() {
	local tp=$1 all lines
	all=$(conn_re "$2" "$3" '[a-z]+' '[a-z-]*')
	lines=$(log_lines "$all" | grep -v " transport=$tp reason=-\$" || true)
	printf '%d of %d not on %s (%s)' "$(grep -c . <<<"$lines" || true)" "$(log_count "$all")" "$tp" \
		"$(sed -n 's/.* transport=\([a-z]*\) reason=\([a-z-]*\)$/\1:\2/p' <<<"$lines" | sort | uniq -c |
			awk '{printf "%s%s x%d", (NR > 1 ? ", " : ""), $2, $1}')"
}

# assert_all_on TRANSPORT PROG ROLE MIN: at least MIN decision lines of
# PROG/ROLE, every one of them on TRANSPORT.  Sets CONN_N to the count.
assert_all_on() {
	local tp=$1 prog=$2 role=$3 min=$4 bad n
	bad=$(log_lines "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')" | grep -v " transport=$tp reason=-\$" | head -n 3 || true)
	[[ -z "$bad" ]] || die "$prog $role connections: $(why_not "$tp" "$prog" "$role"); first: $(head -n 1 <<<"$bad")"
	n=$(log_count "$(conn_re "$prog" "$role" '[a-z]+' '[a-z-]*')")
	[[ $n -ge $min ]] || die "expected >= $min $prog $role connections, found $n"
	# shellcheck disable=SC2034 # read by the callers
	CONN_N=$n
}

# assert_conns TRANSPORT PROG ROLE N: exactly N decision lines of PROG/ROLE,
# every one of them on TRANSPORT.
assert_conns() {
	assert_all_on "$@"
	[[ $CONN_N -eq $4 ]] || die "$2/$3: $CONN_N decision lines, expected $4"
}

# close_re TRANSPORT PROG IN OUT: a close line of PROG on TRANSPORT with
# these byte counts (regexes).
close_re() {
	echo "^shunt\\[[0-9]+\\] $2: debug: $1 close fd=[0-9]+ bytes_in=$3 bytes_out=$4\$"
}
# assert_close TRANSPORT PROG IN OUT N: exactly N such lines, and no other
# close line of PROG on TRANSPORT.
assert_close() {
	local tp=$1 prog=$2 in=$3 out=$4 n=$5 all
	all=$(log_count "$(close_re "$tp" "$prog" '[0-9]+' '[0-9]+')")
	assert_log_count "$(close_re "$tp" "$prog" "$in" "$out")" "$n"
	[[ $all -eq $n ]] || die "$prog: $all $tp close lines, $n with bytes_in=$in bytes_out=$out: $(log_lines "$(close_re "$tp" "$prog" '[0-9]+' '[0-9]+')" | grep -Ev "bytes_in=$in bytes_out=$out\$" | head -n 3)"
}

# moved_re TRANSPORT [REASON]: a connection left TRANSPORT for the kernel
# path (begins with ": info:", so "prog$(moved_re ...)" is PROG's).
moved_re() {
	echo ": info: moved fd=[0-9]+ from=$1 transport=kernel reason=${2:-.*}\$"
}
assert_no_moves() { assert_log_lacks "$(moved_re "$1")"; }
# assert_moves_explained TRANSPORT: every move names a reason (a connection
# on the kernel path always says why).  A soft failure: the bytes and the
# rest are still checked.
assert_moves_explained() {
	local bad
	bad=$(log_lines "$(moved_re "$1")" | grep -Ev 'reason=[a-z][a-z-]*$' | head -n 3 || true)
	[[ -z "$bad" ]] || soft_fail "connection moved to the kernel path without a reason ($PHASE): $bad"
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

# count_listeners PORT: listening sockets on PORT.
count_listeners() { ss -Hltn "( sport = :$1 )" 2>/dev/null | wc -l; }

# ---- private network namespaces (root only): loopback only, their own
# ports and TIME_WAIT table, so a scenario that exhausts ports disturbs no
# other test.  new_netns sets NETNS; every one is deleted at exit.
E2E_NETNS=()
can_netns() { [[ $(id -u) -eq 0 ]] && command -v ip >/dev/null 2>&1; }
new_netns() {
	NETNS=shunt-e2e-$$-${#E2E_NETNS[@]}-$RANDOM
	ip netns add "$NETNS" || die "ip netns add $NETNS failed"
	E2E_NETNS+=("$NETNS")
	ip -n "$NETNS" link set lo up || die "cannot bring lo up in $NETNS"
}
del_netns_all() {
	local n
	for n in "${E2E_NETNS[@]}"; do
		ip netns del "$n" 2>/dev/null
	done
	E2E_NETNS=()
	return 0
}

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

# nginx_conf USER WORKERS EVENTS HTTP: $PDIR/nginx.conf for an nginx in the
# foreground with every file of its own under $PDIR/nginx.  USER: the `user`
# directive's arguments ("" for none); EVENTS: added to the events block;
# HTTP: the http block's own directives and server blocks.
nginx_conf() {
	mkdir -p "$PDIR/nginx"
	{
		[[ -n $1 ]] && printf 'user %s;\n' "$1"
		printf '%s\n' "worker_processes $2;" "daemon off;" "master_process on;" \
			"pid $PDIR/nginx/nginx.pid;" "error_log $PDIR/nginx/error.log warn;" \
			"events { worker_connections 256; $3 }" "http {" "    access_log off;"
		local t
		for t in client_body proxy fastcgi uwsgi scgi; do
			printf '    %s_temp_path %s;\n' "$t" "$PDIR/nginx/${t/client_body/body}"
		done
		printf '%s\n}\n' "$4"
	} >"$PDIR/nginx.conf"
}

# ---- subtests: one script, several independent scenarios.  A failing
# subtest prints its FAIL line and the others still run; the script fails at
# the end if any did.
SUBTESTS_FAILED=()
SUBTESTS_ONLY=${E2E_ONLY:-}   # e.g. E2E_ONLY="late decline" runs those only
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

