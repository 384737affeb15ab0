# shellcheck shell=bash disable=SC2030,SC2031,SC2154
# Helpers for the fabric transport's end-to-end tests (fab_*.sh), on top of
# lib_shm.sh (whose phases they share) and lib.sh (whose assertions take the
# transport: fabric here).  Two "hosts" are two network
# namespaces joined by a veth pair, 198.18.0.1/24 (A) and 198.18.0.2/24 (B)
# (198.18.0.0/15 only), each with its own rundir and its own shuntd.  Both
# ends run `shunt run` with fabric_provider=$FAB_PROVIDER (tcp unless the
# test's entry names another) and assert from the debug logs.
# FAB_EMULATE=verbs: the verbs provider's rules are enforced on it
# (SHUNT_FABRIC_EMULATE, fabric/fab_verbs.c) and the test fails unless the
# code meant for verbs ran (every rule checked at least once), breaking
# none.
source "$(dirname "${BASH_SOURCE[0]}")/lib_shm.sh"

FAB_PROVIDER=${FAB_PROVIDER:-tcp}
FAB_PROVIDER=${FAB_PROVIDER//+/;} # (ctest cannot pass a ';')
FAB_EMULATE=${FAB_EMULATE:-}
if ! can_netns; then
	echo "SKIP: $E2E_NAME needs root to create network namespaces"
	exit 0
fi
# A provider the transport cannot run on: the reason, from the transport's
# own judgement (shunt-fabtest check).
if [[ -n ${FABTEST:-} ]]; then
	_fit=$("$FABTEST" check "$FAB_PROVIDER" 2>&1) ||
		{
			echo "SKIP: $E2E_NAME on provider '$FAB_PROVIDER': ${_fit#unfit: }"
			exit 0
		}
fi
[[ $FAB_PROVIDER == tcp && -z $FAB_EMULATE ]] || note "provider $FAB_PROVIDER${FAB_EMULATE:+, $FAB_EMULATE rules enforced}"
if [[ -n $FAB_EMULATE ]]; then
	export SHUNT_FABRIC_EMULATE=$FAB_EMULATE
fi
SHUNTD=${SHUNTD:-$(dirname "$SHUNT")/shuntd}
[[ -x "$SHUNTD" ]] || die "shuntd not found at $SHUNTD"

ADDR_A=198.18.0.1
ADDR_B=198.18.0.2
# shunt run options of every shim in these tests.  The offer bound is
# raised from its 500 ms default: these tests assert which transport each
# connection took, and on a loaded machine a server that accepts three
# connections in turn can take longer than that to connect back.  For the
# same reason a process's first connection waits for libfabric's start-up
# (by default it would go by TCP meanwhile: fab_start.sh tests that).
FAB_OPTS="fabric_provider=$FAB_PROVIDER,offer_timeout_ms=3000,fabric_load_wait_ms=30000"

# fab_rules_check: with FAB_EMULATE=verbs, every process's last count of
# the verbs rules (a debug line at each connection's end) over the whole
# test: none broken, and each rule checked in some process — receives
# posted and consumed for CQ data, contexts, registered local buffers,
# virtual addresses, provider keys, 4-byte CQ data, receives flushed at
# the peer's CLOSE.
fab_rules_check() {
	[[ -n $FAB_EMULATE ]] || return 0
	local lines
	lines=$(cat "$TMP"/*/logs/*.log 2>/dev/null | grep -E 'fabric: verbs rules' || true)
	[[ -n $lines ]] || die "verbs rules enforced, but no fabric connection reported them"
	local k max
	local -a rules=(recv_posted recv_taken contexts local virt keys cq_data)
	# Flushed receives come only where a connection ends with the peer's
	# CLOSE; a test whose connections all end otherwise says so.
	[[ -n ${FAB_RULES_NO_FLUSH:-} ]] || rules+=(flushed)
	for k in "${rules[@]}"; do
		max=$(grep -oE " $k=[0-9]+" <<<"$lines" | cut -d= -f2 | sort -n | tail -n 1)
		[[ ${max:-0} -gt 0 ]] || die "the code meant for verbs never ran: $k=0 in every process"
	done
	max=$(grep -oE " broken=[0-9]+" <<<"$lines" | cut -d= -f2 | sort -n | tail -n 1)
	[[ ${max:-0} -eq 0 ]] || die "verbs rules broken ($max): $(grep -h 'breaks a verbs rule' "$TMP"/*/logs/*.log | head -n 3)"
	note "verbs rules: $(tail -n 1 <<<"$lines" | sed 's/.*(process so far): //') (a process's)"
}
if [[ -n $FAB_EMULATE ]]; then
	eval "_fab_finish_subtests() $(declare -f finish_subtests | tail -n +2)"
	finish_subtests() {
		fab_rules_check
		_fab_finish_subtests
	}
fi

# fab_hosts: two namespaces NSA, NSB joined by a veth pair.
fab_hosts() {
	new_netns
	NSA=$NETNS
	new_netns
	NSB=$NETNS
	local va=fv$$a$RANDOM vb=fv$$b$RANDOM
	va=${va:0:15}
	vb=${vb:0:15}
	ip link add "$va" type veth peer name "$vb" || die "cannot create a veth pair"
	ip link set "$va" netns "$NSA"
	ip link set "$vb" netns "$NSB"
	ip -n "$NSA" addr add "$ADDR_A/24" dev "$va"
	ip -n "$NSB" addr add "$ADDR_B/24" dev "$vb"
	ip -n "$NSA" link set "$va" up
	ip -n "$NSB" link set "$vb" up
}

# fab_phase NAME MODE: a phase with one private rundir per host (RUN_A,
# RUN_B) and a shunt.conf per host (CONF_A, CONF_B) naming it.
fab_phase() {
	shm_phase "$@"
	rm -f "$PDIR/port" "$PDIR/half"
	RUN_A=$RUNDIR-a
	RUN_B=$RUNDIR-b
	mkdir -p "$RUN_A" "$RUN_B"
	chmod 700 "$RUN_A" "$RUN_B"
	CONF_A=$PDIR/a.conf
	CONF_B=$PDIR/b.conf
	printf 'rundir = %s\n' "$RUN_A" >"$CONF_A"
	printf 'rundir = %s\n' "$RUN_B" >"$CONF_B"
	SHUNT_ARGS=(--options "$FAB_OPTS")
}

# agent_on A|B: start shuntd on that host (foreground, logs in
# $PDIR/shuntd-X.err); sets AGENT_PID_X.
agent_on() {
	local h=$1 ns conf old
	[[ $h == A ]] && ns=$NSA conf=$CONF_A || ns=$NSB conf=$CONF_B
	agent_stop "$h"
	ip netns exec "$ns" timeout -k 5 "$E2E_BG_LIFETIME" "$SHUNTD" --config "$conf" \
		</dev/null >"$PDIR/shuntd-$h.out" 2>"$PDIR/shuntd-$h.err" &
	BG_PIDS+=("$!")
	eval "AGENT_PID_$h=$!"
	local i
	for ((i = 0; i < 200; i++)); do
		grep -q 'serving on' "$PDIR/shuntd-$h.err" 2>/dev/null && return 0
		kill -0 "$!" 2>/dev/null || die "shuntd on $h exited: $(tail -n 3 "$PDIR/shuntd-$h.err")"
		sleep 0.05
	done
	die "shuntd on $h did not start"
}

# agent_stop A|B: SIGTERM to that host's shuntd, if it runs.
agent_stop() {
	local v=AGENT_PID_$1
	if [[ -n "${!v:-}" ]]; then
		kill -TERM "${!v}" 2>/dev/null || true
		wait "${!v}" 2>/dev/null || true
		eval "$v="
	fi
}

# on_bg A|B NAME CMD... / on_run A|B CMD...: bg_in / run_in on that host,
# with that host's rundir.
on_bg() {
	local h=$1
	shift
	if [[ $h == A ]]; then RUNDIR=$RUN_A; bg_in "$NSA" "$@"; else RUNDIR=$RUN_B; bg_in "$NSB" "$@"; fi
}
on_run() {
	local h=$1
	shift
	if [[ $h == A ]]; then RUNDIR=$RUN_A; run_in "$NSA" "$@"; else RUNDIR=$RUN_B; run_in "$NSB" "$@"; fi
}

# The port a server bound, written by --port-file.
port_of() { cat "$PDIR/${1:-port}"; }

# echo_a_to_b BYTES: echo_server on B (2 connections), echo_client on A
# sending BYTES over each; both must finish with PASS, every byte checked.
echo_a_to_b() {
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns 2
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	on_run A "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns 2 --bytes "$1" \
		>"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed"
	wait_exit "$spid" 30 || die "echo_server failed"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	grep -q '^PASS echo_server conns=2' "$PDIR/server.out" || die "no PASS from echo_server"
}

# ---- hold_echo (tests/progs): connections held open across events, driven
# by commands.  hold_start starts its server on B and its client on A, each
# reading commands from a fifo (fds 3/4: server in/out, 5/6: client
# in/out; transcripts in $PDIR/server.out, client.out); sets HOLD_S,
# HOLD_C (background pids) and HOLD_SPID, HOLD_CPID (the programs').
hold_start() {
	local f
	for f in sin sout cin cout; do
		rm -f "$PDIR/$f"
		mkfifo -m 600 "$PDIR/$f"
	done
	# Held read-write here so no open blocks (as in e2e_stat.sh).
	exec 3<>"$PDIR/sin" 4<>"$PDIR/sout" 5<>"$PDIR/cin" 6<>"$PDIR/cout"
	RUNDIR=$RUN_B
	_prefix shunt "$E2E_BG_LIFETIME"
	ip netns exec "$NSB" "${PFX[@]}" "$PROGS/hold_echo" server --host "$ADDR_B" \
		--port-file "$PDIR/port" \
		<"$PDIR/sin" >"$PDIR/sout" 2>"$PDIR/server.err" 3>&- 4>&- 5>&- 6>&- &
	HOLD_S=$!
	BG_PIDS+=("$HOLD_S")
	wait_file "$PDIR/port" "$HOLD_S"
	RUNDIR=$RUN_A
	_prefix shunt "$E2E_BG_LIFETIME"
	ip netns exec "$NSA" "${PFX[@]}" "$PROGS/hold_echo" client --host "$ADDR_B" \
		--port "$(port_of)" \
		<"$PDIR/cin" >"$PDIR/cout" 2>"$PDIR/client.err" 3>&- 4>&- 5>&- 6>&- &
	HOLD_C=$!
	BG_PIDS+=("$HOLD_C")
	# timeout(1) forks the program: wait until it has, and the child has
	# become hold_echo (a pid read earlier may be a passing process).
	local i
	for ((i = 0; i < 200; i++)); do
		HOLD_SPID=$(bg_prog_pid "$HOLD_S")
		HOLD_CPID=$(bg_prog_pid "$HOLD_C")
		if [[ -n $HOLD_SPID && -n $HOLD_CPID &&
			$(cat "/proc/$HOLD_SPID/comm" 2>/dev/null) == hold_echo &&
			$(cat "/proc/$HOLD_CPID/comm" 2>/dev/null) == hold_echo ]]; then
			return 0
		fi
		kill -0 "$HOLD_C" 2>/dev/null || die "hold_echo client exited: $(tail -n 3 "$PDIR/client.err")"
		sleep 0.05
	done
	die "no pids for hold_echo"
}

# hold_conn_line PORT: the client's decision line for its connection from
# local port PORT ("transport=X reason=Y").
hold_conn_line() {
	log_lines "$(conn_re hold_echo client '[a-z]+' '[a-z-]*')" | grep -F " local=$ADDR_A:$1 " |
		sed -n 's/.* \(transport=[a-z]* reason=[a-z-]*\)$/\1/p'
}
