#!/usr/bin/env bash
# The fabric transport across two "hosts" (network namespaces joined by veth,
# 198.18.0.0/15), each with its own rundir and shuntd, libfabric's tcp
# provider.  Subtests (E2E_ONLY=... runs some):
#   torture   echo_server/echo_client across the hosts, 3 connections, both
#             directions at once, random call sizes, in pairs of wait
#             interfaces (blocking threads, poll, ppoll, select, pselect,
#             epoll LT/ET/ONESHOT, epoll_pwait2) and read/write API mixes,
#             the default 1 MiB ring and a 64 KiB one: same hashes as the
#             plain run, every connection on fabric at both ends, exact byte
#             counts at close, no demotion
#   fail      the provider "fails" after N bytes (SHUNT_FABRIC_FAIL_AFTER)
#             at the client, at the server, or at both at once, or the
#             client's endpoint goes dead both ways (SHUNT_FABRIC_FAIL_DEAD:
#             the positions are relayed through the agents): every
#             connection moves
#             to TCP (provider-error here, peer-demoted there) and the
#             streams are byte-exact
#   onehost   shunt on one host only (either one): kernel path with
#             no-peer-shim on the shunt side, same bytes
#   noagent   no shuntd on the server's host: kernel path, reason no-agent
#   killpeer  the server is killed (SIGKILL) mid-stream: the client sees the
#             stream end (EOF or an error), never a wrong byte, no hang
#   samehost  client and server in one namespace with its agent: shm, not
#             fabric
#   decline   the server's rule says kernel: it refuses the offer, the client
#             replays over TCP (declined), same bytes
#   fork      a forking server (accept, fork, the child serves): each
#             connection leaves the fabric before the fork (fork-shared at
#             the server, peer-demoted at the client), bytes exact
#   sigterm   a busy fabric client gets SIGTERM (which libfabric's
#             libinfinipath turns into exit()): it ends within 10 s, three
#             rounds
#   late      the server writes N bytes and exits; then the client, with
#             most of them unread in its ring, forks (the child reads them,
#             the parent then sees EOF) or execs (the new image reads them):
#             every byte arrives once, in order (a spill: nobody is left to
#             resend them), with the default ring and a 64 KiB one that wraps
#   stat      stat_hold (tests/progs) holds two connections open across the
#             hosts with known traffic: `shunt stat --rundir` of each host
#             (text and --json, parsed by python3) shows them on fabric,
#             open, with exactly the bytes and calls each program moved
#   agent     hold_echo (tests/progs) holds fabric connections across the
#             hosts while B's shuntd is killed (SIGKILL, with A's, then in
#             a second round SIGTERM): the open ones keep moving bytes,
#             byte-exact and on fabric; new ones while it is down take the
#             kernel path (no-agent), two back to back cost one probe (the
#             negative cache, agent_cache_s=1); once it is restarted and
#             the cache has expired, new ones are on fabric again.
#             Transports and reasons from the logs and `shunt stat --json`
#   fdclose   hold_echo with 3 fabric connections: each end closes every
#             fd but its own sockets (close() up to its limit, then
#             close_range() over the gaps, then closefrom()), then dup2()s
#             /dev/null onto every fd not its own; after each, more bytes:
#             byte-exact, still on fabric (libfabric's fds are protected,
#             the dup2s onto them fail with EBUSY).  Then: connections
#             opened and closed leave no fd behind (libfabric's close()
#             is real), and a forked child closes every fd: there
#             libfabric's are ordinary, it closes its copies, the parent's
#             connection (moved to TCP at the fork) goes on
source "$(dirname "$0")/lib_fabric.sh"

BYTES=${E2E_FAB_BYTES:-4000000}
CONNS=3


# pair PHASE SW CW SEND RECV [ENV_SERVER] [ENV_CLIENT]: echo_server on B,
# echo_client on A; both PASS, per-connection hashes agree.
pair() {
	local sw=$2 cw=$3 sa=$4 ra=$5 es=${6:-} ec=${7:-}
	on_bg B server env $es "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" \
		--conns $CONNS --wait "$sw" --send "$sa" --recv "$ra"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	on_run A env $ec "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns $CONNS \
		--bytes "$BYTES" --seed 7 --wait "$cw" --send "$sa" --recv "$ra" --chunk 4194304 \
		>"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed ($PHASE)"
	wait_exit "$spid" 30 || die "echo_server failed ($PHASE)"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server"
	sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) recv_sha256=\2$/conn bytes=\1 sha256=\2/p' \
		"$PDIR/client.out" | sort >"$PDIR/client.sha"
	grep '^conn ' "$PDIR/server.out" | sort >"$PDIR/server.sha" || true
	[[ $(wc -l <"$PDIR/client.sha") -eq $CONNS ]] || die "client: hashes missing or sent != echoed"
	assert_same_file "$PDIR/client.sha" "$PDIR/server.sha" "client and server hashes ($PHASE)"
}

reference() {
	fab_phase plain plain
	pair plain thread block mix mix
	cp "$PDIR/client.sha" "$TMP/ref.sha"
}

t_torture() {
	fab_hosts
	reference
	local combos=(
		"thread block mix mix default"
		"epoll epoll-et writev readv 65536"
		"epoll-oneshot poll sendmsg recvmsg default"
		"ppoll select send recv 65536"
		"pselect epoll-pwait2 mix mix default"
	) i sw cw sa ra ring
	for i in "${!combos[@]}"; do
		read -r sw cw sa ra ring <<<"${combos[$i]}"
		fab_phase "torture-$i" shunt
		[[ $ring == default ]] || SHUNT_ARGS=(--options "$FAB_OPTS,ring_size=$ring")
		agent_on A
		agent_on B
		pair "torture-$i" "$sw" "$cw" "$sa" "$ra"
		assert_same_file "$TMP/ref.sha" "$PDIR/client.sha" "hashes plain vs fabric (${combos[$i]})"
		check_logs
		assert_conns fabric echo_client client $CONNS
		assert_conns fabric echo_server server $CONNS
		assert_conn_pairs $CONNS
		assert_log_count "$(close_re fabric echo_client "$BYTES" "$BYTES")" $CONNS
		assert_log_count "$(close_re fabric echo_server "$BYTES" "$BYTES")" $CONNS
		assert_log_lacks "$(moved_re fabric)"
		note "${combos[$i]}: $CONNS connections on fabric, byte-exact"
	done
}

t_fail() {
	fab_hosts
	reference
	# Both ends failing at once, each with up to a ring unread by the
	# other: each end's exchange must advance while the single-threaded
	# programs serve their other connections, and both resend at once.
	# "dead": at the client the endpoint stops dead both ways (no DEMOTE
	# leaves or arrives): the positions go through the agents (relay),
	# and the server, whose fabric never failed, learns it that way.
	local cases=("client 1000000" "server 777777" "client 5000" "both 2500000" "dead 1000000")
	local c who n
	for c in "${cases[@]}"; do
		read -r who n <<<"$c"
		fab_phase "fail-$who-$n" shunt
		agent_on A
		agent_on B
		local es="" ec="" k="SHUNT_FABRIC_FAIL_AFTER=$n"
		[[ $who == client || $who == both ]] && ec=$k
		[[ $who == server || $who == both ]] && es=$k
		[[ $who == dead ]] && ec="$k SHUNT_FABRIC_FAIL_DEAD=1"
		pair "fail-$who" epoll poll mix mix "$es" "$ec"
		assert_same_file "$TMP/ref.sha" "$PDIR/client.sha" "hashes plain vs fabric with a failure ($c)"
		check_logs
		assert_conns fabric echo_client client $CONNS
		assert_conns fabric echo_server server $CONNS
		# Every connection left the fabric at both ends, and said why.
		local moved
		moved=$(log_count "$(moved_re fabric '(provider-error|peer-demoted)')")
		[[ $moved -eq $((2 * CONNS)) ]] || die "$c: $moved moves, expected $((2 * CONNS))"
		case $who in
		client | dead) assert_log_count "echo_client$(moved_re fabric provider-error)" $CONNS ;;
		server) assert_log_count "echo_server$(moved_re fabric provider-error)" $CONNS ;;
		esac
		if [[ $who == dead ]]; then
			# Each end's position crossed through the other's agent.
			assert_log_count 'echo_client: debug: fabric: fd=[0-9]+ the peer.s DEMOTE [0-9]+ came through the agents$' $CONNS
			assert_log_count 'echo_server: debug: fabric: fd=[0-9]+ the peer.s DEMOTE [0-9]+ came through the agents$' $CONNS
		fi
		assert_log_lacks 'reset: the endpoint failed'
		note "failure after $n bytes at the $who: $CONNS connections moved to TCP, byte-exact"
	done
}

t_onehost() {
	fab_hosts
	reference
	local side
	for side in client server; do
		fab_phase "onehost-$side" shunt
		agent_on A
		agent_on B
		if [[ $side == client ]]; then
			MODE=plain
			on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns $CONNS
			MODE=shunt
		else
			on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns $CONNS
		fi
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		[[ $side == server ]] && MODE=plain
		on_run A "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns $CONNS \
			--bytes "$BYTES" --seed 7 >"$PDIR/client.out" 2>"$PDIR/client.err" ||
			die "echo_client failed ($PHASE)"
		MODE=shunt
		wait_exit "$spid" 30 || die "echo_server failed ($PHASE)"
		grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server"
		sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) recv_sha256=\2$/conn bytes=\1 sha256=\2/p' \
			"$PDIR/client.out" | sort >"$PDIR/client.sha"
		assert_same_file "$TMP/ref.sha" "$PDIR/client.sha" "hashes plain vs shunt on the $side only"
		check_logs
		if [[ $side == client ]]; then
			assert_log_count "$(conn_re echo_client client kernel no-peer-shim)" $CONNS
		else
			assert_log_count "$(conn_re echo_server server kernel no-peer-shim)" $CONNS
		fi
		assert_log_lacks 'transport=fabric'
		note "shunt on the $side only: kernel path, no-peer-shim"
	done
}

t_noagent() {
	fab_hosts
	reference
	fab_phase noagent shunt
	agent_on A
	pair noagent thread block mix mix
	assert_same_file "$TMP/ref.sha" "$PDIR/client.sha" "hashes plain vs no agent"
	check_logs
	assert_log_count "$(conn_re echo_client client kernel no-agent)" $CONNS
	assert_log_count "$(conn_re echo_server server kernel no-peer-shim)" $CONNS
	note "no agent on the server's host: kernel path, no-agent"
}

t_killpeer() {
	fab_hosts
	fab_phase killpeer shunt
	agent_on A
	agent_on B
	on_bg B server "$PROGS/stream_peer" server --host "$ADDR_B" --port-file "$PDIR/port" --bidi \
		--progress-file "$PDIR/half" --progress-bytes 3000000
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	on_bg A client "$PROGS/stream_peer" client --host "$ADDR_B" --port "$(port_of)" --bidi
	local cpid=$BG_PID
	wait_file "$PDIR/half" "$spid" 30
	kill -KILL "$(bg_prog_pid "$spid")"
	wait_exit "$cpid" 20 || die "stream_peer client exited with status $? after its peer was killed: $(cat "$PDIR/client.out" "$PDIR/client.err" | tail -n 5)"
	grep -Eq '^client: recv bytes.* end=' "$PDIR/client.out" ||
		die "client did not report how its stream ended: $(cat "$PDIR/client.out")"
	check_logs
	assert_conns fabric stream_peer client 1
	note "peer killed: client ended with '$(grep -E '^client: (recv|send)' "$PDIR/client.out" | tr '\n' ' ')'"
}

t_samehost() {
	fab_hosts
	fab_phase samehost shunt
	agent_on B
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns $CONNS
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	on_run B "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns $CONNS \
		--bytes "$BYTES" --seed 7 >"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed"
	wait_exit "$spid" 30 || die "echo_server failed"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	check_logs
	assert_log_count "$(conn_re echo_client client shm -)" $CONNS
	assert_log_count "$(conn_re echo_server server shm -)" $CONNS
	assert_log_lacks 'transport=fabric'
	note "same host: shm"
}

t_decline() {
	fab_hosts
	reference
	fab_phase decline shunt
	agent_on A
	agent_on B
	# The server's rule says kernel: it refuses the offers it finds, and
	# the client replays what it staged over TCP.
	SHUNT_ARGS=(--options "$FAB_OPTS,default_transport=kernel")
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns $CONNS
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	SHUNT_ARGS=(--options "$FAB_OPTS")
	on_run A "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns $CONNS \
		--bytes "$BYTES" --seed 7 >"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed"
	wait_exit "$spid" 30 || die "echo_server failed"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server"
	sed -n 's/^conn [0-9]* bytes=\([0-9]*\) sent_sha256=\([0-9a-f]*\) recv_sha256=\2$/conn bytes=\1 sha256=\2/p' \
		"$PDIR/client.out" | sort >"$PDIR/client.sha"
	assert_same_file "$TMP/ref.sha" "$PDIR/client.sha" "hashes plain vs declined offers"
	check_logs
	assert_log_count "$(conn_re echo_server server kernel rule-kernel)" $CONNS
	assert_log_count "echo_client$(moved_re fabric declined)" $CONNS
	note "offers declined by the server's rule: the client replayed over TCP"
}

t_fork() {
	fab_hosts
	fab_phase fork shunt
	# The server demotes each connection before it forks, one at a time:
	# give the later offers time to be taken.
	SHUNT_ARGS=(--options "$FAB_OPTS,offer_timeout_ms=5000")
	agent_on A
	agent_on B
	on_bg B server "$PROGS/fork_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns $CONNS
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	on_run A "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns $CONNS \
		--bytes "$BYTES" --seed 7 >"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed"
	wait_exit "$spid" 30 || die "fork_server failed"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	grep -q '^PASS fork_server' "$PDIR/server.out" || die "no PASS from fork_server"
	check_logs
	assert_conns fabric echo_client client $CONNS
	assert_conns fabric fork_server server $CONNS
	assert_log_count "fork_server$(moved_re fabric fork-shared)" $CONNS
	assert_log_count "echo_client$(moved_re fabric peer-demoted)" $CONNS
	assert_log_lacks 'reset: the endpoint failed'
	note "accept then fork: $CONNS connections moved to TCP before the fork, byte-exact"
}

# The server writes and exits; only then does the client fork or exec with
# most of the stream unread in its ring.  Nobody can resend those bytes:
# they must reach the reader anyway (a spill), once, in order.
t_late() {
	fab_hosts
	local cases=(
		"fork 600000 1000 default"
		"exec 600000 1000 default"
		"fork 200000 150000 65536"
		"exec 200000 150000 65536"
	) c then n first ring
	for c in "${cases[@]}"; do
		read -r then n first ring <<<"$c"
		fab_phase "late-$then-$ring" shunt
		[[ $ring == default ]] || SHUNT_ARGS=(--options "$FAB_OPTS,ring_size=$ring")
		agent_on A
		agent_on B
		rm -f "$PDIR/gate"
		mkfifo "$PDIR/gate"
		on_bg B server "$PROGS/late_reader" server --host "$ADDR_B" --port-file "$PDIR/port" \
			--bytes "$n"
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		on_bg A client "$PROGS/late_reader" client --host "$ADDR_B" --port "$(port_of)" \
			--bytes "$n" --first "$first" --gate "$PDIR/gate" --then "$then"
		local cpid=$BG_PID
		wait_exit "$spid" 30 || die "late_reader server failed ($c)"
		echo go >"$PDIR/gate"
		wait_exit "$cpid" 30 || die "late_reader client failed ($c): $(tail -n 3 "$PDIR/client.out" "$PDIR/client.err")"
		grep -q "^PASS late_reader $then " "$PDIR/client.out" ||
			die "no PASS from the $then side ($c): $(cat "$PDIR/client.out")"
		check_logs
		assert_conns fabric late_reader client 1
		assert_conns fabric late_reader server 1
		local why=exec
		[[ $then == fork ]] && why=fork-shared
		assert_log_count "late_reader$(moved_re fabric "$why")" 1
		assert_log_count "late_reader: debug: fd=[0-9]+: $((n - first)) unread bytes kept" 1
		assert_log_lacks 'unread bytes lost'
		assert_log_lacks 'closed before the peer took its last bytes'
		note "$then after the peer closed ($c): $((n - first)) unread bytes delivered once"
	done
}

# A busy fabric client gets SIGTERM.  libfabric brings in libinfinipath,
# whose SIGTERM handler calls exit(): shunt's exit-time goodbye then runs on
# the thread the signal interrupted, maybe inside a connection's lock.  The
# process must still end, promptly.
t_sigterm() {
	fab_hosts
	local round
	for round in 1 2 3; do
		fab_phase "sigterm-$round" shunt
		agent_on A
		agent_on B
		on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns 3
		local spid=$BG_PID
		wait_file "$PDIR/port" "$spid"
		on_bg A client "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns 3 \
			--bytes 100000000000 --seed 7 --wait poll --chunk 64
		local cpid=$BG_PID i
		# Busy on fabric: the three connections decided, bytes moving.
		for ((i = 0; i < 400; i++)); do
			[[ $(log_count "$(tp_conn_re fabric echo_client client)") -eq 3 ]] && break
			kill -0 "$cpid" 2>/dev/null || die "echo_client ended early: $(tail -n 3 "$PDIR/client.out")"
			sleep 0.05
		done
		[[ $i -lt 400 ]] || die "the client's connections never came up on fabric"
		local pid
		pid=$(bg_prog_pid "$cpid")
		[[ -n $pid ]] || die "no client process"
		kill -TERM "$pid"
		local rc=0
		wait_exit "$cpid" 10 || rc=$?
		[[ $rc -ne 0 ]] || die "echo_client finished instead of being terminated"
		stop "$spid"
		note "round $round: SIGTERM ended the busy client (status $rc)"
	done
}

# stat_check JSON PID COUNTS ROLE PORTS: the --json of one host has PID with
# one open fabric connection per port, counts as the program printed them
# (see e2e_stat.sh), and matching totals.
stat_check() {
	python3 - "$@" <<'EOF'
import json, sys
doc, pid, counts, role, ports = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def fail(m):
    print("FAIL: fab_e2e: stat: " + m)
    sys.exit(1)
cnt = {}
for line in open(counts):
    f = line.split()
    cnt[int(f[1])] = {k: int(v) for k, v in (x.split("=") for x in f[2:])}
procs = {p["pid"]: p for p in json.load(open(doc))["processes"]}
if pid not in procs:
    fail("pid %d not in %s: %s" % (pid, doc, sorted(procs)))
p = procs[pid]
side = "local" if role == "server" else "peer"
for i, port in enumerate(ports.split(",")):
    xs = [x for x in p["connections"] if x[side].endswith(":" + port)]
    if len(xs) != 1:
        fail("pid %d: %d connections with %s port %s" % (pid, len(xs), side, port))
    x, c = xs[0], cnt[i]
    got = (x["transport"], x["reason"], x["role"], x["state"], x["bytes_in"], x["bytes_out"],
           x["msgs_in"], x["msgs_out"])
    exp = ("fabric", None, role, "open", c["in"], c["out"], c["incalls"], c["outcalls"])
    if got != exp:
        fail("pid %d conn %d: (transport, reason, role, state, bytes_in, bytes_out, msgs_in, "
             "msgs_out) = %s, expected %s" % (pid, i, got, exp))
t = p["totals"]
n = len(cnt)
if t["connections"] != {"shm": 0, "fabric": n, "kernel": 0} or t["open"] != n or t["fallbacks"]:
    fail("pid %d totals %s" % (pid, t))
if (t["bytes_in"], t["bytes_out"]) != (sum(c["in"] for c in cnt.values()),
                                       sum(c["out"] for c in cnt.values())):
    fail("pid %d total bytes in/out %s" % (pid, (t["bytes_in"], t["bytes_out"])))
EOF
}

# text_of FILE PID LOCAL_PORT: transport state bytes_in bytes_out reason of
# that connection in shunt stat's text.
text_of() {
	awk -v pid="$2" -v lp=":$3" '$1 == pid && substr($3, length($3) - length(lp) + 1) == lp {print $5, $6, $7, $8, $11}' "$1"
}

t_stat() {
	need python3
	fab_hosts
	fab_phase stat shunt
	agent_on A
	agent_on B
	ln -sf "$PROGS/stat_hold" "$PDIR/statsrv"
	ln -sf "$PROGS/stat_hold" "$PDIR/statcli"
	local f
	for f in sin sout cin cout; do
		mkfifo -m 600 "$PDIR/$f"
	done
	# Held read-write here so no open blocks (as in e2e_stat.sh).
	exec 3<>"$PDIR/sin" 4<>"$PDIR/sout" 5<>"$PDIR/cin" 6<>"$PDIR/cout"
	RUNDIR=$RUN_B
	_prefix shunt "$E2E_BG_LIFETIME"
	ip netns exec "$NSB" "${PFX[@]}" "$PDIR/statsrv" server --host "$ADDR_B" \
		--port-file "$PDIR/ports" --ports 2 \
		<"$PDIR/sin" >"$PDIR/sout" 2>"$PDIR/server.err" 3>&- 4>&- 5>&- 6>&- &
	local sbg=$!
	BG_PIDS+=("$sbg")
	wait_file "$PDIR/ports" "$sbg"
	local ports pa pb
	ports=$(cat "$PDIR/ports")
	pa=${ports%,*}
	pb=${ports#*,}
	RUNDIR=$RUN_A
	_prefix shunt "$E2E_BG_LIFETIME"
	ip netns exec "$NSA" "${PFX[@]}" "$PDIR/statcli" client --host "$ADDR_B" --port "$ports" \
		<"$PDIR/cin" >"$PDIR/cout" 2>"$PDIR/client.err" 3>&- 4>&- 5>&- 6>&- &
	local cbg=$!
	BG_PIDS+=("$cbg")
	local fd who line
	for fd in 4:server 6:client; do
		who=${fd#*:}
		: >"$PDIR/$who.counts"
		line=
		while read -r -t 30 -u "${fd%%:*}" line && [[ $line != ready ]]; do
			echo "$line" >>"$PDIR/$who.counts"
		done
		[[ $line == ready ]] || die "no 'ready' from the $who: $(cat "$PDIR/$who.counts" "$PDIR/$who.err")"
	done
	local spid cpid
	spid=$(bg_prog_pid "$sbg")
	cpid=$(bg_prog_pid "$cbg")
	[[ -n "$spid" && -n "$cpid" ]] || die "no pids for the programs"
	# Each host's rundir shows its own process's end only.
	"$SHUNT" stat --rundir "$RUN_B" --json >"$PDIR/b.json" || die "shunt stat --rundir B --json failed"
	"$SHUNT" stat --rundir "$RUN_A" --json >"$PDIR/a.json" || die "shunt stat --rundir A --json failed"
	stat_check "$PDIR/b.json" "$spid" "$PDIR/server.counts" server "$pa,$pb" || die "stat --json of host B"
	stat_check "$PDIR/a.json" "$cpid" "$PDIR/client.counts" client "$pa,$pb" || die "stat --json of host A"
	python3 -c 'import json,sys; sys.exit(int(sys.argv[2]) in [p["pid"] for p in json.load(open(sys.argv[1]))["processes"]])' \
		"$PDIR/a.json" "$spid" || die "host A's rundir lists the server of host B"
	# Text: the same numbers in the columns.
	"$SHUNT" stat --rundir "$RUN_B" >"$PDIR/b.txt" || die "shunt stat --rundir B failed"
	"$SHUNT" stat --rundir "$RUN_A" >"$PDIR/a.txt" || die "shunt stat --rundir A failed"
	local i port in out lport
	for i in 0 1; do
		port=$pa
		[[ $i == 1 ]] && port=$pb
		read -r in out < <(sed -n "s/^conn $i out=\([0-9]*\) outcalls=[0-9]* in=\([0-9]*\) .*/\2 \1/p" "$PDIR/server.counts")
		assert_eq "$(text_of "$PDIR/b.txt" "$spid" "$port")" "fabric open $in $out -"
		lport=$(python3 -c 'import json,sys; print([c["local"].rsplit(":",1)[1] for p in json.load(open(sys.argv[1]))["processes"] if p["pid"]==int(sys.argv[2]) for c in p["connections"] if c["peer"].endswith(":"+sys.argv[3])][0])' "$PDIR/a.json" "$cpid" "$port")
		assert_eq "$(text_of "$PDIR/a.txt" "$cpid" "$lport")" "fabric open $out $in -"
	done
	grep -qE "^  total $cpid statcli: connections shm=0 fabric=2 kernel=0 \(open 2\) " "$PDIR/a.txt" ||
		die "client totals line wrong: $(grep "total $cpid" "$PDIR/a.txt")"
	# Both end cleanly: EOF on stdin makes them close and exit 0.
	exec 5>&-
	wait_exit "$cbg" 20 || die "statcli failed: $(cat "$PDIR/client.err")"
	exec 3>&-
	wait_exit "$sbg" 20 || die "statsrv failed: $(cat "$PDIR/server.err")"
	exec 4>&- 6>&-
	check_logs
	assert_conns fabric statcli client 2
	assert_conns fabric statsrv server 2
	note "shunt stat --rundir of each host: 2 fabric connections, open, exact bytes and calls each way (text and --json)"
}

# agent_stat_check JSON PID SPEC: in the --json of host A, process PID has
# exactly the connections SPEC lists ("port:transport:reason ...", reason
# "-" for none), all open.
agent_stat_check() {
	python3 - "$@" <<'PYEOF'
import json, sys
doc, pid, spec = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
procs = {p["pid"]: p for p in json.load(open(doc))["processes"]}
if pid not in procs:
    print("FAIL: fab_e2e/agent: pid %d not in %s" % (pid, doc))
    sys.exit(1)
got = sorted("%s:%s:%s" % (c["local"].rsplit(":", 1)[1], c["transport"], c["reason"] or "-")
             for c in procs[pid]["connections"] if c["state"] == "open")
if got != sorted(spec):
    print("FAIL: fab_e2e/agent: stat --json of pid %d: %s, expected %s" % (pid, got, sorted(spec)))
    sys.exit(1)
PYEOF
}

# agent_open N TRANSPORT REASON: the client opens N connections; each must
# be on TRANSPORT with REASON; their ports go to AGENT_SPEC.
agent_open() {
	local n=$1 tr=$2 rs=$3 port got
	hold_cmd C "open $n" '^done open$'
	for port in $(sed -n 's/^opened [0-9]* port=\([0-9]*\)$/\1/p' <<<"$HOLD_OUT"); do
		got=$(hold_conn_line "$port")
		assert_eq "$got" "transport=$tr reason=$rs" "new connection from port $port ($PHASE)"
		AGENT_SPEC+=" $port:$tr:$rs"
	done
}

t_agent() {
	need python3
	fab_hosts
	fab_phase agent shunt
	# A short negative cache: a restarted agent is found again soon.  The
	# first connection opens libfabric at both ends, which can take longer
	# than the default offer_timeout_ms on a loaded machine.
	SHUNT_ARGS=(--options "$FAB_OPTS,agent_cache_s=1,offer_timeout_ms=5000")
	agent_on A
	agent_on B
	hold_start
	AGENT_SPEC=
	agent_open 2 fabric -
	hold_cmd C "echo 300000" '^echoed '
	local sig probes n i port got
	local probe_re
	probe_re="hold_echo: debug: fabric offer for \\[[^]]*\\]:$(port_of) via its agent: no agent\$"
	for sig in KILL TERM; do
		if [[ $sig == KILL ]]; then
			# Both hosts' (the client's own host's agent has no part
			# in its connections either): shuntd itself, not the
			# timeout(1) it runs under.
			local h apid v
			for h in A B; do
				v=AGENT_PID_$h
				apid=$(bg_prog_pid "${!v}")
				[[ -n $apid ]] || die "no pid for $h's shuntd"
				kill -KILL "$apid"
				wait "${!v}" 2>/dev/null || true
				eval "$v="
			done
		else
			agent_stop B
		fi
		# The open connections do not need the agent.
		hold_cmd C "echo 1000000" '^echoed '
		# New ones do: two back to back, one probe, the second answered
		# by the negative cache.
		probes=$(log_count "$probe_re")
		agent_open 2 kernel no-agent
		n=$(log_count "$probe_re")
		[[ $n -eq $((probes + 1)) ]] || die "SIG$sig: $((n - probes)) probes of B's agent for 2 connections, expected 1 (negative cache)"
		hold_cmd C "echo 200000" '^echoed '
		# Without the fifos: an agent holding one open would keep
		# hold_echo from ever seeing EOF.
		[[ -n $AGENT_PID_A ]] || agent_on A 3>&- 4>&- 5>&- 6>&-
		agent_on B 3>&- 4>&- 5>&- 6>&-
		# Until the cached answer expires, new connections still take
		# the kernel path: one more each try until one is on fabric.
		for ((i = 0; i < 60; i++)); do
			hold_cmd C "open 1" '^done open$'
			port=$(sed -n 's/^opened [0-9]* port=\([0-9]*\)$/\1/p' <<<"$HOLD_OUT")
			got=$(hold_conn_line "$port")
			if [[ $got == "transport=fabric reason=-" ]]; then
				AGENT_SPEC+=" $port:fabric:-"
				break
			fi
			assert_eq "$got" "transport=kernel reason=no-agent" "connection from port $port after the restart"
			AGENT_SPEC+=" $port:kernel:no-agent"
			sleep 0.1
		done
		[[ $got == "transport=fabric reason=-" ]] || die "SIG$sig: no fabric connection within 60 tries after B's agent restarted"
		hold_cmd C "echo 500000" '^echoed '
		"$SHUNT" stat --rundir "$RUN_A" --json >"$PDIR/a-$sig.json" || die "shunt stat --rundir A --json failed"
		agent_stat_check "$PDIR/a-$sig.json" "$HOLD_CPID" "$AGENT_SPEC" || die "stat --json of host A after SIG$sig"
		note "B's agent killed (SIG$sig): open connections kept moving bytes; new ones no-agent (one probe for two), fabric again after the restart"
	done
	hold_cmd C totals '^done totals$'
	hold_end
	check_logs
	assert_log_lacks "$(moved_re fabric)"
	assert_log_lacks 'reset: the endpoint failed'
	# Every fabric connection closed at both ends with exactly the bytes
	# the client moved on it.
	local fabports want got nfab
	fabports=$(tr ' ' '\n' <<<"$AGENT_SPEC" | sed -n 's/^\([0-9]*\):fabric:-$/\1/p')
	nfab=$(wc -w <<<"$fabports")
	want=$(for port in $fabports; do
		sed -n "s/^conn [0-9]* port=$port bytes=\\([0-9]*\\)\$/\\1/p" <<<"$HOLD_OUT"
	done | awk '{print; print}' | sort -n | tr '\n' ' ')
	got=$(log_lines "$(close_re fabric hold_echo '[0-9]+' '[0-9]+')" |
		sed -n 's/.* bytes_in=\([0-9]*\) bytes_out=\1$/\1/p' | sort -n | tr '\n' ' ')
	assert_eq "$got" "$want" "bytes of the fabric close lines (both ends, in=out) vs the client's totals"
	assert_log_count "$(conn_re hold_echo server fabric -)" "$nfab"
	assert_log_count "$(conn_re hold_echo client fabric -)" "$nfab"
}

# fd_cmd S|C CMD: the fd command at one end; checks its report.  After the
# first closeall of an end, all that is open there and not the program's is
# shunt's and libfabric's: later passes find the same and close nothing.
fd_cmd() {
	local who=$1 cmd=$2 open left prev
	hold_cmd "$who" "$cmd" "^$cmd "
	open=$(sed -n 's/.* open=\([0-9]*\) .*/\1/p' <<<"$HOLD_OUT")
	# There were fds it did not open (shunt's, libfabric's) to close.
	[[ ${open:-0} -gt 0 ]] || die "$who $cmd: no fds to close? $HOLD_OUT"
	prev=FD_LEFT_$who
	[[ -z ${!prev:-} || ${!prev} -eq $open ]] ||
		die "$who $cmd: $open fds open, ${!prev} after the previous pass: $HOLD_OUT"
	case $cmd in
	closeall)
		[[ $HOLD_OUT == *" ok=$open "* ]] || die "$who $cmd: not every close() returned 0: $HOLD_OUT"
		;;
	dup2all)
		[[ $HOLD_OUT =~ busy=([0-9]+) && ${BASH_REMATCH[1]} -gt 0 ]] ||
			die "$who $cmd: no dup2 refused (libfabric's fds)? $HOLD_OUT"
		return 0
		;;
	esac
	left=$(sed -n 's/.* left=\([0-9]*\)$/\1/p' <<<"$HOLD_OUT")
	[[ ${left:-0} -gt 0 ]] || die "$who $cmd: nothing left open (libfabric's fds closed?): $HOLD_OUT"
	[[ $cmd == closeall ]] || [[ $left -eq $open ]] || die "$who $cmd: closed what the first pass left: $HOLD_OUT"
	eval "FD_LEFT_$who=$left"
}

t_fdclose() {
	fab_hosts
	fab_phase fdclose shunt
	# Opening libfabric at the first connection can take longer than the
	# default offer_timeout_ms on a loaded machine.
	SHUNT_ARGS=(--options "$FAB_OPTS,offer_timeout_ms=5000")
	agent_on A
	agent_on B
	hold_start
	hold_cmd C "open 3" '^done open$'
	hold_cmd C "echo 500000" '^echoed '
	local cmd who total=$((4096 + 500000))
	# shellcheck disable=SC2034 # read by fd_cmd through ${!prev}
	FD_LEFT_C='' FD_LEFT_S=''
	for cmd in closeall closerange closefrom dup2all; do
		for who in C S; do
			fd_cmd "$who" "$cmd"
			hold_cmd C "echo 500000" '^echoed '
			total=$((total + 500000))
		done
		note "$cmd at both ends: connections still on fabric, byte-exact"
	done
	hold_end
	check_logs
	assert_conns fabric hold_echo client 3
	assert_conns fabric hold_echo server 3
	assert_log_lacks "$(moved_re fabric)"
	assert_log_lacks 'reset: the endpoint failed'
	assert_log_count "$(close_re fabric hold_echo "$total" "$total")" 6
	assert_log_has 'hold_echo: info: dup2 onto fd [0-9]+ refused \(EBUSY\): libfabric uses it$' 2

	# A forked child does not use its parent's libfabric objects: there
	# their fds are ordinary, and a child closing every fd closes them
	# (its copies: the parent's connection, moved to TCP before the fork,
	# goes on).
	fab_phase fdclose-fork shunt
	SHUNT_ARGS=(--options "$FAB_OPTS,offer_timeout_ms=5000")
	agent_on A
	agent_on B
	hold_start
	# libfabric's own close() of its fds closes them: connections come and
	# go without leaving any behind.
	local n left0=
	for n in 1 3 3; do
		hold_cmd C "open $n" '^done open$'
		hold_cmd C "echo 100000" '^echoed '
		hold_cmd C drop '^dropped '
		[[ $HOLD_OUT =~ left=([0-9]+) ]] || die "drop: $HOLD_OUT"
		[[ -z $left0 || ${BASH_REMATCH[1]} -eq $left0 ]] ||
			die "fds left after closing $n connections: ${BASH_REMATCH[1]}, $left0 before (libfabric's not released?)"
		left0=${BASH_REMATCH[1]}
	done
	hold_cmd C "open 1" '^done open$'
	hold_cmd C "echo 100000" '^echoed '
	# First what any process could close (then only shunt's and
	# libfabric's are left), then the child closes what it can.
	hold_cmd C closeall '^closeall '
	hold_cmd C forkclose '^forkclose '
	local open cleft left
	read -r open cleft left < <(sed -n 's/^forkclose open=\([0-9]*\) child_left=\([0-9]*\) left=\([0-9]*\)$/\1 \2 \3/p' <<<"$HOLD_OUT")
	[[ -n $left && $left -eq $open ]] || die "forkclose: the parent lost fds: $HOLD_OUT"
	[[ $cleft -lt $left ]] || die "forkclose: the child could not close its copies of libfabric's fds: $HOLD_OUT"
	hold_cmd C "echo 100000" '^echoed '
	hold_end
	check_logs
	assert_conns fabric hold_echo client 8
	# Every connection at both ends (the forked one's when it left).
	assert_log_count "$(close_re fabric hold_echo 104096 104096)" 16
	assert_log_count "hold_echo$(moved_re fabric fork-shared)" 1
	note "forked child: closed $((left - cleft)) of its copies of libfabric's fds, the parent's connection went on"
}

# Of these, torture and fdclose end connections with the peer's CLOSE (the
# emulated verbs then flushes the receives still posted); the others end
# theirs by failures, kills, demotions or no fabric at all.
case ",${E2E_ONLY:-torture}," in
*,torture,* | *,fdclose,*) ;;
*) FAB_RULES_NO_FLUSH=1 ;;
esac
subtest torture t_torture
subtest fail t_fail
subtest onehost t_onehost
subtest noagent t_noagent
subtest killpeer t_killpeer
subtest samehost t_samehost
subtest fork t_fork
subtest late t_late
subtest sigterm t_sigterm
subtest decline t_decline
subtest stat t_stat
subtest agent t_agent
subtest fdclose t_fdclose
finish_subtests
