#!/usr/bin/env bash
# shellcheck disable=SC2031,SC2154
# shm between two network namespaces on one host (as between containers that
# share a volume): a veth pair, 198.18.0.1/24 and 198.18.0.2/24 (benchmarking
# range, 198.18.0.0/15 only), echo_server in one namespace, echo_client in
# the other.
#   plain    both plain: the reference output
#   shared   both under shunt with ONE rundir: every connection on shm at
#            both ends, exact byte counts, same output as plain; spin_us=0,
#            so every wait that finds nothing sleeps and is woken from the
#            other namespace (the client sends its first byte once the
#            server is seen asleep); the server under strace (when there is one)
#            binds its wake sockets by name in o/ (a name crosses
#            namespaces, an abstract one does not), none abstract, and
#            reads wakeup datagrams from them
#   separate both under shunt, each with its own rundir: they cannot see
#            each other, so kernel path with no-peer-shim, same output
# Needs root (ip netns); prints SKIP otherwise.
source "$(dirname "$0")/lib_shm.sh"

if [[ $(id -u) -ne 0 ]]; then
	echo "SKIP: $E2E_NAME needs root to create network namespaces"
	exit 0
fi
need ip

NSA=shunt-e2e-$$-a
NSB=shunt-e2e-$$-b
VA=shv$$a
VB=shv$$b
ADDR_A=198.18.0.1
ADDR_B=198.18.0.2
BYTES=${E2E_SHM_NETNS_BYTES:-4000000}
CONNS=3

netns_cleanup() {
	local pid
	set +e
	for pid in "${BG_PIDS[@]}"; do
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	ip netns del "$NSA" 2>/dev/null
	ip netns del "$NSB" 2>/dev/null
	ip link del "$VA" 2>/dev/null
	return 0
}
trap '_rc=$?; set +e; netns_cleanup; (exit $_rc); _cleanup' EXIT

ip netns add "$NSA" || die "ip netns add $NSA failed"
ip netns add "$NSB" || die "ip netns add $NSB failed"
ip link add "$VA" type veth peer name "$VB" || die "cannot create a veth pair"
ip link set "$VA" netns "$NSA"
ip link set "$VB" netns "$NSB"
ip -n "$NSA" addr add "$ADDR_A/24" dev "$VA"
ip -n "$NSB" addr add "$ADDR_B/24" dev "$VB"
for ns in "$NSA" "$NSB"; do
	ip -n "$ns" link set lo up
done
ip -n "$NSA" link set "$VA" up
ip -n "$NSB" link set "$VB" up
[[ $(stat -L -c %i /proc/self/ns/net) != $(ip netns exec "$NSA" stat -L -c %i /proc/self/ns/net) ]] ||
	die "namespace $NSA is the host's"

# bg_ns NS NAME CMD...: bg inside namespace NS.
bg_ns() {
	local ns=$1 name=$2
	shift 2
	_prefix "$MODE" "$E2E_BG_LIFETIME"
	ip netns exec "$ns" ${TRACE[@]+"${TRACE[@]}"} "${PFX[@]}" "$@" \
		</dev/null >"$PDIR/$name.out" 2>"$PDIR/$name.err" &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}

# run_pair NAME MODE SERVER_RUNDIR CLIENT_RUNDIR
run_pair() {
	local name=$1 srun=$3 crun=$4
	shm_phase "$name" "$2"
	RUNDIR=$srun
	bg_ns "$NSA" server "$PROGS/echo_server" --host "$ADDR_A" --port-file "$PDIR/port" \
		--conns $CONNS --wait epoll
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	RUNDIR=$crun
	local -a gate=()
	[[ -n ${GATED:-} ]] && gate=(--gate "$PDIR/gate")
	_prefix "$MODE"
	ip netns exec "$NSB" "${PFX[@]}" "$PROGS/echo_client" --host "$ADDR_A" \
		--port "$(cat "$PDIR/port")" --conns $CONNS --bytes "$BYTES" --seed 31 --wait epoll-et \
		${gate[@]+"${gate[@]}"} >"$PDIR/client.out" 2>"$PDIR/client.err" &
	local cpid=$!
	BG_PIDS+=("$cpid")
	if [[ -n ${GATED:-} ]]; then
		# Every connection accepted (its decision logged) and the server
		# asleep in epoll before the client's first byte: that byte must
		# wake it from the other namespace.
		local i sprog
		for ((i = 0; i < 300; i++)); do
			(($(log_count "role=server .*transport=shm") >= CONNS)) && break
			kill -0 "$cpid" 2>/dev/null || break
			sleep 0.05
		done
		(($(log_count "role=server .*transport=shm") >= CONNS)) ||
			die "the server took $(log_count "role=server .*transport=shm") of $CONNS connections on shm before the client sent ($name)"
		sprog=$(desc_pid "$spid" echo_server) || die "no echo_server process under $spid"
		wait_asleep "$sprog" "$EPOLL_NRS"
		: >"$PDIR/gate"
	fi
	wait_exit "$cpid" 120 ||
		die "echo_client in $NSB failed ($name): $(tail -n 2 "$PDIR/client.out" "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "echo_server in $NSA failed ($name)"
	RUNDIR=$RUNROOT/$name
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client ($name)"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server ($name)"
}

run_pair plain plain "$RUNROOT/plain" "$RUNROOT/plain"

TRACE=()
command -v strace >/dev/null 2>&1 &&
	TRACE=(strace -f -qq -e trace=bind,recvfrom -e signal=none -o "$TMP/shared.strace")
SHUNT_ARGS=(--options spin_us=0)
GATED=${EPOLL_NRS:+1}
run_pair shared shunt "$RUNROOT/shared" "$RUNROOT/shared"
unset SHUNT_ARGS GATED
TRACE=()
check_logs
if [[ -e $TMP/shared.strace ]]; then
	named=$(grep -F "sun_path=\"$RUNROOT/shared/o/" "$TMP/shared.strace" |
		grep -cE '^[0-9]+ +bind\(.*\.sw?"\}, [0-9]+\) = 0$' || true)
	abstract=$(grep -cF 'sun_path=@"shunt-w-' "$TMP/shared.strace" || true)
	woke=$(grep -cE 'recvfrom\([0-9]+, "\\0", 64, MSG_DONTWAIT, NULL, NULL\) = 1$' \
		"$TMP/shared.strace" || true)
	((named >= CONNS)) || die "the server bound $named wake sockets by name in o/ for $CONNS connections"
	((abstract == 0)) || die "the server bound $abstract wake sockets in the abstract namespace"
	((woke >= 1)) || die "the server read no wakeup datagram from the other namespace"
	note "server: $named wake sockets named in o/, $woke wakeup datagrams read across namespaces"
else
	note "no strace: wake sockets and wakeups across namespaces not observed"
fi
assert_conns shm echo_client client $CONNS
assert_conns shm echo_server server $CONNS
assert_conn_pairs $CONNS
assert_log_count "role=client local=$ADDR_B:[0-9]+ peer=$ADDR_A:[0-9]+ transport=shm" $CONNS
assert_close shm echo_client "$BYTES" "$BYTES" $CONNS
assert_close shm echo_server "$BYTES" "$BYTES" $CONNS
assert_no_moves shm
assert_rundir_clean

mkdir -p "$RUNROOT/separate-a" "$RUNROOT/separate-b"
chmod 700 "$RUNROOT/separate-a" "$RUNROOT/separate-b"
run_pair separate shunt "$RUNROOT/separate-a" "$RUNROOT/separate-b"
check_logs
assert_kernel_conns echo_client client $CONNS "(no-peer-shim|no-rdma-route)"
assert_kernel_conns echo_server server $CONNS no-peer-shim
assert_log_lacks ': debug: shm close '

for n in shared separate; do
	assert_same_file "$TMP/plain/client.out" "$TMP/$n/client.out" "client output plain vs $n"
	assert_same_file "$TMP/plain/server.out" "$TMP/$n/server.out" "server output plain vs $n"
done
want=$("$PROGS/streamgen" $((31 * 1000003)) "$BYTES" 2>/dev/null | sha256)
grep -q "sent_sha256=$want recv_sha256=$want$" "$TMP/shared/client.out" || die "conn 0 echo is not sha256sum of its stream"
pass_soft
