#!/usr/bin/env bash
# What a connection to another host costs before anything is accelerated:
# libfabric's start-up, the agent, the per-connection system calls.  Two
# "hosts" (network namespaces joined by veth, 198.18.0.0/15) as in
# fab_e2e.sh.  Subtests (E2E_ONLY=... runs some):
#   auto      default settings (fabric_provider=auto) on hosts without any
#             RDMA device: a fresh process's connection to the other host
#             takes the kernel path (no-rdma-route) at once; the process
#             never maps libfabric, never binds before connecting, never
#             contacts an agent (B's shuntd counts no client)
#   cost      20 and 60 connections in a loop (conn_churn) to a plain server
#             on the other host, under strace -c: the system calls the 40
#             more connections make under shunt, call by call, are exactly
#             those they make without it (default settings, and
#             fabric_provider=tcp with no agent on the server's host)
#   noagent   fabric_provider=tcp, a plain server and no agent on its host:
#             once the first connection found no agent there, the next ones
#             do nothing of the fabric's (no bind of the application's
#             socket), no-agent each
#   loading   fabric_provider=tcp, fabric_load_wait_ms=0 (the default): a
#             process's first connection goes by TCP at once
#             (provider-loading) while libfabric starts on its own thread;
#             once it has started, the next one takes fabric, byte-exact
#   forkexec  a python3 client whose first connection started libfabric
#             forks at once (the fork waits for the start-up): the child's
#             connection and the parent's next one take fabric; then it
#             execs: the new image holds none of libfabric's fds
#   registry  a process that found no shunt listener at an address stops
#             looking there (the registry's generation has not moved), yet
#             finds one that registers later: a client connects twice to a
#             plain server (kernel, no-peer-shim), the server is replaced by
#             a shunt one on the same port, the next connection takes shm
source "$(dirname "$0")/lib_fabric.sh"

# A client that connects once, checks the echo, and says whether libfabric
# is mapped in it (python3: a real program, not one of ours).
ONE_CONN='
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"ping")
got = b""
while len(got) < 4:
    d = s.recv(4)
    if not d:
        sys.exit("eof")
    got += d
assert got == b"ping", got
print("libfabric mapped:", sum("libfabric" in l for l in open("/proc/self/maps")))
'

# agent_clients A|B: how many clients that host's shuntd has accepted (TCP
# and Unix), from its /metrics.
agent_clients() {
	local ns addr
	[[ $1 == A ]] && ns=$NSA addr=$ADDR_A || ns=$NSB addr=$ADDR_B
	ip netns exec "$ns" curl -s "http://$addr:7476/metrics" |
		awk '/^shuntd_clients_total/ {n += $2} END {print n + 0}'
}

no_rdma() {
	if compgen -G '/sys/class/infiniband_verbs/uverbs*' >/dev/null; then
		note "SKIP: this host has an RDMA device: fabric_provider=auto may use it"
		return 1
	fi
}

t_auto() {
	need python3 strace curl
	no_rdma || return 0
	fab_hosts
	fab_phase auto shunt
	SHUNT_ARGS=()
	agent_on A
	agent_on B
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns 1
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	# One agent client: this very scrape.
	assert_eq "$(agent_clients B)" 1 "B's agent clients before"
	# The interpreter itself, not a version manager's shim in front of it:
	# a shim's own subprocesses are not the application under test.
	local py
	py=$(python3 -c 'import sys; print(sys.executable)') || die "python3 cannot say where it is"
	on_run A strace -f -qq -e trace=bind,connect -o "$PDIR/strace" \
		"$py" -c "$ONE_CONN" "$ADDR_B" "$(port_of)" >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "the client failed: $(cat "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "echo_server failed"
	assert_eq "$(cat "$PDIR/client.out")" "libfabric mapped: 0" "libfabric in the client"
	check_logs
	assert_kernel_conns python3 client 1 no-rdma-route
	assert_log_lacks 'fabric: libfabric loaded'
	# No bind before the connect, and no connect but the application's.
	local binds conns
	# Only network connects and the rundirs' sockets count: libc may reach
	# nscd or similar over a Unix socket on some machines.
	binds=$(grep -E 'bind\(' "$PDIR/strace" | grep -cE "AF_INET|$RUNDIR" || true)
	conns=$(grep -E 'connect\(' "$PDIR/strace" | grep -E "AF_INET|$RUNDIR" |
		grep -vc "sin_port=htons($(port_of))" || true)
	[[ $conns == 0 ]] || note "other connects: $(grep -E 'connect\(' "$PDIR/strace" | head -n 5)"
	assert_eq "$binds" 0 "bind calls in the client"
	assert_eq "$conns" 0 "connects other than the application's"
	# The second scrape is the only other client B's agent ever had.
	assert_eq "$(agent_clients B)" 2 "B's agent clients after"
	note "default settings: kernel path (no-rdma-route) at once; no libfabric, no bind, no agent"
}

# syscalls FILE: "name count" per line, from strace -c's table.
syscalls() {
	awk 'NF >= 5 && $1 ~ /^[0-9.]+$/ && $NF != "total" {print $NF, $4}' "$1" | sort
}

# churn_delta TAG N1 N2: runs conn_churn client N1 then N2 connections (one
# process each, under strace -c: its main thread) to the server on B at
# PORT; prints what the N2 - N1 more connections cost, call by call.
churn_delta() {
	local tag=$1 a=$2 b=$3 n run_a=$RUN_A
	for n in "$a" "$b"; do
		# A rundir of its own each: the same first-use work in both.
		RUN_A=$run_a-$tag-$n
		mkdir -m 700 "$RUN_A"
		on_run A strace -c -o "$PDIR/$tag-$n.strace" "$PROGS/conn_churn" client \
			--host "$ADDR_B" --port "$PORT" --conns "$n" --mode loop \
			>"$PDIR/$tag-$n.out" 2>"$PDIR/$tag-$n.err" ||
			die "conn_churn client $tag $n failed: $(tail -n 3 "$PDIR/$tag-$n.err")"
		grep -q '^PASS conn_churn client' "$PDIR/$tag-$n.out" || die "no PASS from conn_churn ($tag $n)"
		syscalls "$PDIR/$tag-$n.strace" >"$PDIR/$tag-$n.calls"
	done
	RUN_A=$run_a
	join -a1 -a2 -e0 -o0,1.2,2.2 "$PDIR/$tag-$a.calls" "$PDIR/$tag-$b.calls" |
		awk '$3 != $2 {printf "%s=%d ", $1, $3 - $2}'
}

t_cost() {
	need strace
	no_rdma || return 0
	fab_hosts
	fab_phase cost shunt
	SHUNT_ARGS=()
	MODE=plain
	on_bg B server "$PROGS/conn_churn" server --host "$ADDR_B" --port-file "$PDIR/port" \
		--conns 1000000 --mode loop
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	PORT=$(port_of)
	local plain shunt
	plain=$(churn_delta plain 20 60)
	MODE=shunt
	# At debug every connection is logged (a getsockname() and a write):
	# measured as deployed.
	SHUNT_LOGLEVEL=info
	shunt=$(churn_delta shunt 20 60)
	[[ $plain == *"connect=40 "* ]] || die "40 more plain connections made: $plain"
	assert_eq "$shunt" "$plain" "system calls of 40 connections under shunt vs plain"
	assert_log_count 'conn_churn: info: summary: connections shm=0 fabric=0 kernel=60 .* fallbacks no-rdma-route=60$' 1
	# A provider named, no agent on B: once the first connection found
	# none, the others cost a lookup in the negative cache.
	SHUNT_ARGS=(--options "$FAB_OPTS")
	# libfabric starts on its thread here, and the first connection waits
	# for it (fabric_load_wait_ms); its threads then run beside the main
	# one, whose futex calls (their locks) and thread stacks (mmap and
	# mprotect, unless glibc's cache has a finished thread's stack to
	# reuse) depend on how they overlap, in either run, not on the number
	# of connections.  So may a bind: the main thread's are shunt's one
	# (the first connection names its offer), a netlink socket libfabric
	# binds to list the interfaces (it binds one on its start thread too)
	# and its passive endpoint; 3 in every run by hand, but a clean-clone
	# CI run saw one more in one of the two runs ('bind=1'), which
	# libfabric's start-up can explain and 40 more connections cannot (one
	# bind each would show 40).  Compared without those, held below one per
	# two connections.
	shunt=$(churn_delta tcp 20 60)
	local timing='futex|mmap|mprotect|munmap|bind' c
	for c in $(grep -Eo "\\b($timing)=-?[0-9]+" <<<"$shunt"); do
		((${c#*=} < 20 && ${c#*=} > -20)) || die "$c: grows with the connections ($shunt)"
	done
	assert_eq "$(sed -E "s/\\b($timing)=-?[0-9]+ //g" <<<"$shunt")" \
		"$(sed -E "s/\\b($timing)=-?[0-9]+ //g" <<<"$plain")" \
		"system calls of 40 connections under shunt (fabric_provider=tcp, no agent) vs plain, those aside"
	assert_log_count 'conn_churn: info: summary: connections shm=0 fabric=0 kernel=60 .* fallbacks no-agent=60$' 1
	stop "$spid"
	note "40 connections to a remote plain server: $shunt under shunt (auto, and tcp without agent), as plain"
}

t_noagent() {
	need strace
	fab_hosts
	fab_phase noagent shunt
	SHUNT_ARGS=(--options "$FAB_OPTS")
	agent_on A
	MODE=plain
	on_bg B server "$PROGS/conn_churn" server --host "$ADDR_B" --port-file "$PDIR/port" \
		--conns 10 --mode loop
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	MODE=shunt
	on_run A strace -f -qq -e trace=bind -o "$PDIR/strace" "$PROGS/conn_churn" client \
		--host "$ADDR_B" --port "$(port_of)" --conns 10 --mode loop >"$PDIR/client.out" \
		2>"$PDIR/client.err" || die "conn_churn client failed: $(tail -n 3 "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "conn_churn server failed"
	check_logs
	# The application's socket is fd 3 each time (libfabric's are moved
	# up): bound by shunt only to name an offer.
	local binds
	binds=$(grep -c 'bind(3,' "$PDIR/strace" || true)
	[[ $binds -le 1 ]] || die "the application's socket was bound $binds times for 10 connections to a host without agent"
	assert_kernel_conns conn_churn client 10 no-agent
	note "no agent on the server's host: 10 connections, no-agent, $binds bound to name an offer"
}

t_registry() {
	new_netns
	local ns=$NETNS port
	fab_phase registry shunt
	RUNDIR=$RUN_A
	SHUNT_ARGS=()
	port=$(free_port)
	MODE=plain
	bg_in "$ns" plain "$PROGS/echo_server" --host 127.0.0.1 --port "$port" --conns 0
	local plain=$BG_PID
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -n $(ip netns exec "$ns" ss -Hltn "( sport = :$port )") ]] && break
		sleep 0.05
	done
	MODE=shunt
	rm -f "$PDIR/cin" "$PDIR/cout"
	mkfifo -m 600 "$PDIR/cin" "$PDIR/cout"
	exec 5<>"$PDIR/cin" 6<>"$PDIR/cout"
	_prefix shunt "$E2E_BG_LIFETIME"
	ip netns exec "$ns" "${PFX[@]}" "$PROGS/hold_echo" client --host 127.0.0.1 --port "$port" \
		<"$PDIR/cin" >"$PDIR/cout" 2>"$PDIR/client.err" 5>&- 6>&- &
	HOLD_C=$!
	BG_PIDS+=("$HOLD_C")
	hold_cmd C "open 1" '^done open$'
	hold_cmd C "open 1" '^done open$'
	stop "$plain"
	# (Without the fifos: holding one, it would keep the client from EOF.)
	{ bg_in "$ns" server "$PROGS/echo_server" --host 127.0.0.1 --port "$port" --conns 0 \
		--port-file "$PDIR/port"; } 5>&- 6>&-
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	hold_cmd C "open 1" '^done open$'
	exec 5>&-
	wait_exit "$HOLD_C" 30 || die "hold_echo client failed: $(tail -n 3 "$PDIR/client.err")"
	exec 6>&-
	stop "$spid"
	check_logs
	log_lines "$(conn_re hold_echo client '[a-z]+' '[a-z-]*')" |
		sed -n 's/.* \(transport=[a-z]* reason=[a-z-]*\)$/\1/p' >"$PDIR/decisions"
	assert_eq "$(tr '\n' ' ' <"$PDIR/decisions")" \
		"transport=kernel reason=no-peer-shim transport=kernel reason=no-peer-shim transport=shm reason=- " \
		"the client's three connections"
	note "no listener twice (looked up once), then a shunt listener on the same port: shm"
}

t_loading() {
	fab_hosts
	fab_phase loading shunt
	SHUNT_ARGS=(--options "fabric_provider=tcp,offer_timeout_ms=3000")
	agent_on A
	agent_on B
	hold_start
	hold_cmd C "open 1" '^done open$'
	local port
	port=$(sed -n 's/^opened [0-9]* port=\([0-9]*\)$/\1/p' <<<"$HOLD_OUT")
	assert_eq "$(hold_conn_line "$port")" "transport=kernel reason=provider-loading" "the first connection"
	# The start-up ends on its own thread; then a connection takes fabric.
	local i
	for ((i = 0; i < 200; i++)); do
		[[ $(log_count 'hold_echo: debug: fabric: provider tcp started in [0-9]+ ms$') -eq 2 ]] && break
		sleep 0.05
	done
	[[ $i -lt 200 ]] || die "libfabric did not start in 10 s: $(log_lines 'fabric: provider')"
	hold_cmd C "open 1" '^done open$'
	port=$(sed -n 's/^opened [0-9]* port=\([0-9]*\)$/\1/p' <<<"$HOLD_OUT")
	assert_eq "$(hold_conn_line "$port")" "transport=fabric reason=-" "the connection after the start-up"
	hold_cmd C "echo 300000" '^echoed '
	hold_end
	check_logs
	assert_log_count "$(conn_re hold_echo server fabric -)" 1
	assert_log_count "$(conn_re hold_echo server kernel no-peer-shim)" 1
	assert_log_count "$(close_re fabric hold_echo 304096 304096)" 2
	assert_log_lacks "$(moved_re fabric)"
	note "first connection provider-loading (TCP at once), the next one on fabric, byte-exact"
}

FORK_EXEC='
import os, socket, sys
host, port, stage = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def one(tag):
    s = socket.create_connection((host, port))
    data = (tag * 5000).encode()
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        d = s.recv(65536)
        if not d:
            sys.exit("eof")
        got += d
    assert got == data
    s.close()
    print("ok", tag, flush=True)
if stage == "fork":
    one("first")
    pid = os.fork()
    if pid == 0:
        one("child")
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    assert st == 0, st
    one("parent")
    one("exec")
    os.execv(sys.executable, [sys.executable, sys.argv[0], host, str(port), "after"])
else:
    fds = []
    for f in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink("/proc/self/fd/" + f))
        except OSError:
            pass
    left = [x for x in fds if x.startswith(("socket:", "anon_inode:"))]
    print("after exec:", len(left), "sockets or anon inodes", flush=True)
'

t_forkexec() {
	need python3
	fab_hosts
	fab_phase forkexec shunt
	SHUNT_ARGS=(--options "fabric_provider=tcp,offer_timeout_ms=3000")
	agent_on A
	agent_on B
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns 0
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	echo "$FORK_EXEC" >"$PDIR/forkexec.py"
	on_run A python3 "$PDIR/forkexec.py" "$ADDR_B" "$(port_of)" fork >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "the client failed: $(tail -n 5 "$PDIR/client.err")"
	assert_eq "$(tr '\n' ' ' <"$PDIR/client.out")" \
		"ok first ok child ok parent ok exec after exec: 0 sockets or anon inodes " "the client's report"
	stop "$spid"
	check_logs
	local first child parent
	first=$(log_lines "$(conn_re python3 client '[a-z]+' '[a-z-]*')" | head -n 1)
	[[ $first == *" transport=kernel reason=provider-loading" ]] || die "first connection: $first"
	# The child (its own log file) and the parent after the fork: fabric.
	child=$(grep -l "python3: debug: conn .* transport=fabric reason=-$" "$LOGDIR"/*.log | wc -l)
	[[ $child -eq 2 ]] || die "fabric connections in $child processes, expected the child and the parent"
	assert_log_count "$(conn_re python3 client fabric -)" 3
	note "fork right after the first connection: child and parent on fabric; exec leaves no libfabric fd"
}

subtest auto t_auto
subtest cost t_cost
subtest noagent t_noagent
subtest loading t_loading
subtest forkexec t_forkexec
subtest registry t_registry
finish_subtests
