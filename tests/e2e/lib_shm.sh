# shellcheck shell=bash disable=SC2030,SC2031,SC2119,SC2120,SC2154
# Helpers for the shared-memory transport's end-to-end tests (shm_*.sh), on
# top of lib.sh (whose assertions take the transport: shm here).  These
# tests always run `shunt run` with shunt's default transport (auto) and
# assert, from the per-process debug logs, that shm was really used where
# both ends run shunt (or that it was not, where it must not be).
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

# The kernel's system calls behind poll() and epoll_wait() (shunt waits in
# ppoll and epoll_pwait; libc's own calls may use the others).  Empty
# where unknown: a test that needs them skips.
case $(uname -m) in
x86_64) POLL_NRS="7 271" EPOLL_NRS="232 281 441" ;;
aarch64) POLL_NRS="73" EPOLL_NRS="22 441" ;;
*) POLL_NRS="" EPOLL_NRS="" ;;
esac

# wait_asleep PID "SYSCALL...": until PID's only thread sleeps (state S) in
# one of these system calls (numbers, from /proc/PID/syscall): asleep in
# the kernel's wait, shunt's wake sockets armed.
wait_asleep() {
	local pid=$1 nrs=$2 i st='' nr=''
	for ((i = 0; i < 300; i++)); do
		st=$(sed -n 's/.*) \([A-Z]\) .*/\1/p' "/proc/$pid/stat" 2>/dev/null || true)
		read -r nr _ <"/proc/$pid/syscall" 2>/dev/null || nr=''
		[[ $st == S && " $nrs " == *" $nr "* ]] && return 0
		kill -0 "$pid" 2>/dev/null || die "process $pid exited"
		sleep 0.05
	done
	die "process $pid never slept in its wait (state $st, system call $nr)"
}

# desc_pid PID COMM: the first descendant of PID (itself included) whose
# command is COMM, or nothing: the program behind wrappers (ip netns exec,
# strace, timeout, shunt run).
desc_pid() {
	local pid=$1 comm=$2 c k
	[[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]] && echo "$pid" && return 0
	c=$(cat /proc/"$pid"/task/*/children 2>/dev/null || true)
	for k in $c; do
		desc_pid "$k" "$comm" && return 0
	done
	return 1
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
	assert_conns shm 'python3[^:]*' client 1
	assert_conns shm memcached server 1
	assert_conn_pairs 1
	assert_no_moves shm
	total=$(sed -n 's/.* bytes=\([0-9]*\) .*/\1/p' "$PDIR/client.out")
	read -r in out < <(log_lines "$(close_re shm 'python3[^:]*' '[0-9]+' '[0-9]+')" |
		sed -n 's/.*bytes_in=\([0-9]*\) bytes_out=\([0-9]*\)$/\1 \2/p')
	[[ -n "$in" && $out -gt $total && $in -gt $((2 * total)) ]] ||
		die "client's shm byte counts (in=$in out=$out) do not cover the values ($total bytes, read twice)"
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
	# (o/.pending, the page of announced offers, and o/.names, the table
	# offers are named in, live as long as the rundir, as l/.generation
	# does.)
	left=$(find "$RUNDIR/o" -mindepth 1 ! -path "$RUNDIR/o/.pending" ! -path "$RUNDIR/o/.names" \
		2>/dev/null | head -n 5 || true)
	# A listener killed by a signal runs no code: its registry name stays,
	# but its lock is gone, so clients skip it and the next process that
	# uses shm removes it.  A name still locked by nobody alive is a leak.
	for f in "$RUNDIR"/l/*; do
		[[ -e $f ]] || continue
		flock -n -x "$f" true || left+=" $f (still locked)"
	done
	[[ -z "$left" ]] || soft_fail "left in the rundir after every process exited ($PHASE): $(echo "$left" | tr '\n' ' ')"
}

# ---- hold_echo (tests/progs), driven by commands; each script has its own
# hold_start (where the two programs run).

# hold_cmd S|C CMD LAST_RE [SECONDS=60]: CMD to a hold_echo server or client
# started by a hold_start (fds 3/4: server in/out, 5/6: client in/out;
# HOLD_S, HOLD_C), its answer read up to the line matching LAST_RE (ERE; the
# lines in HOLD_OUT).  Fails if the program exits; the bound only turns a
# hang into a failure.
hold_cmd() {
	local who=$1 cmd=$2 last=$3 secs=${4:-60} in=5 out=6 pid=$HOLD_C name=client line part='' t0=$SECONDS
	[[ $who == S ]] && in=3 out=4 pid=$HOLD_S name=server
	echo "$cmd" >&"$in"
	echo "> $cmd" >>"$PDIR/$name.out"
	HOLD_OUT=
	while :; do
		if read -r -t 1 -u "$out" line; then
			line=$part$line part=
			echo "$line" >>"$PDIR/$name.out"
			HOLD_OUT+="$line"$'\n'
			[[ $line =~ $last ]] && return 0
			continue
		fi
		# A read that times out mid-line keeps what it read.
		part+=$line
		kill -0 "$pid" 2>/dev/null || die "hold_echo $name exited during '$cmd': $(tail -n 3 "$PDIR/$name.err")"
		((SECONDS - t0 < secs)) || die "hold_echo $name: no '$last' after '$cmd' in ${secs}s"
	done
}

# hold_end: EOF to both; each closes its connections and exits 0.
hold_end() {
	exec 5>&-
	wait_exit "$HOLD_C" 30 || die "hold_echo client failed: $(tail -n 3 "$PDIR/client.err")"
	exec 3>&-
	wait_exit "$HOLD_S" 30 || die "hold_echo server failed: $(tail -n 3 "$PDIR/server.err")"
	exec 4>&- 6>&-
}
