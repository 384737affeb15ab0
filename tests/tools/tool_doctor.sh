#!/usr/bin/env bash
# shellcheck disable=SC1091,SC2016,SC2034 # lib.sh is sourced by path and reads MODE, SHUNT_ARGS, SHUNT_CONF
# shunt doctor (issue 15): each finding, the exit status, and --to's
# transport and reason, against real rundirs, a real shuntd and real
# servers:
#   healthy     a private tmpfs rundir: OK, exit 0; --json; a bad key and a
#               bad --to are usage errors (2); a rundir that cannot be made
#   disk        a rundir on a disk file system: WARN rundir-disk
#   perms       group-writable, world-writable, readable, another user's
#               rundir, a group-writable room, a replaceable parent
#   small       a 1 MiB tmpfs (mounted in a private mount namespace) too
#               small for 100 connections: FAIL rundir-space; enough for one
#   agent       a shuntd with a secret: the same secret OK; another, none,
#               and an agent without one each reported as such; an agent
#               serving another rundir
#   local       --to a live shunt listener (shm; then a real client takes
#               shm), a client rule and a server rule (declined, checked
#               with a real client), a dead registry entry (left in
#               place), a plain server
#   privdrop    --to nginx (master root, worker nobody) on a group rundir:
#               the users it accepts as now, trusted by shm_group (a client
#               gets shm), peer-cred without it
#   broker      --to the same nginx on root's private rundir: its worker
#               marked the entry local, shm through the master's broker (and
#               a client gets shm)
#   refusing    --to a server that dropped privileges itself (echo_server
#               --user nobody): it marked the entry refusing, FAIL
#               to-server-cred, kernel server-cred (and a client gets that)
#   remote      --to a server in another network namespace (198.18.0.0/15),
#               without and with a shuntd there: no-agent, no-rdma-route,
#               fabric, no-peer-shim, a secret the agent does not have; the
#               agent filed no offer; then a real client takes fabric
# In every --to case the server saw no connection (no socket on its port
# but the listener, by ss; no accept in its log), and then a real client
# gets the transport and reason the doctor said.
#   SHUNT_BUILD=build bash tests/tools/tool_doctor.sh
if [[ $(id -u) -eq 0 ]] && command -v ip >/dev/null 2>&1; then
	# two hosts as network namespaces, agents (sources lib_shm.sh, lib.sh)
	source "$(dirname "$0")/../e2e/lib_fabric.sh"
	HOSTS=1
else
	source "$(dirname "$0")/../e2e/lib_shm.sh"
	HOSTS=0
fi
SHUNTD=${SHUNTD:-$(dirname "$SHUNT")/shuntd}

SECRET1=doctor-secret-0123456789
SECRET2=doctor-secret-9876543210

# doc_phase NAME MODE: a phase with a private rundir and a configuration
# naming it (DCONF), on an agent port nothing else uses (APORT).
doc_phase() {
	shm_phase "$@"
	APORT=$(free_port)
	DCONF=$PDIR/doctor.conf
	printf 'rundir = %s\nagent_port = %s\nagent_timeout_ms = 2000\n' "$RUNDIR" "$APORT" >"$DCONF"
	SHUNT_CONF=$DCONF
}

# doctor NAME [ARGS...]: shunt doctor (in namespace DOC_NS when set) with
# ARGS; output in $PDIR/NAME.out and .err, exit status in DOC_RC.
doctor() {
	local name=$1 pre=()
	shift
	[[ -n "${DOC_NS:-}" ]] && pre=(ip netns exec "$DOC_NS")
	DOC_RC=0
	DOC_OUT=$PDIR/$name.out
	"${pre[@]}" timeout -k 5 60 "$SHUNT" doctor "$@" >"$DOC_OUT" 2>"$PDIR/$name.err" || DOC_RC=$?
}
# expect_rc N: the last doctor's exit status.
expect_rc() {
	[[ $DOC_RC -eq $1 ]] || die "shunt doctor exited $DOC_RC, expected $1: $(cat "$DOC_OUT" "${DOC_OUT%.out}.err")"
}
# has LEVEL CODE [TEXT]: a finding line "LEVEL CODE: ..." (containing TEXT).
has() {
	grep -E "^$1 +$2: " "$DOC_OUT" | grep -qF -- "${3:-}" ||
		die "no '$1 $2${3:+ ... $3}' finding: $(cat "$DOC_OUT")"
}
lacks() {
	! grep -qE "^(OK|WARN|FAIL) +$1: " "$DOC_OUT" || die "unexpected $1 finding: $(grep -E " $1: " "$DOC_OUT")"
}
# to_is TRANSPORT REASON: --to's verdict ("-": accelerated).
to_is() {
	grep -qE "^to [^ ]+: transport=$1 reason=$2\$" "$DOC_OUT" ||
		die "expected transport=$1 reason=$2: $(grep -A1 '^to ' "$DOC_OUT" || cat "$DOC_OUT")"
}

# no_conns ADDR PORT [NS]: no socket on ADDR:PORT (in namespace NS) but
# the listener: the doctor connected to no server.
no_conns() {
	local pre=() other
	[[ -n "${3:-}" ]] && pre=(ip netns exec "$3")
	other=$("${pre[@]}" ss -Htan "( src $1:$2 or dst $1:$2 )" | grep -v '^LISTEN' || true)
	[[ -z "$other" ]] || die "a connection to the server at $1:$2: $other"
}

# wait_registered PORT DIR: until a shunt listener has registered PORT in
# DIR's registry.
wait_registered() {
	local i
	for ((i = 0; i < 300; i++)); do
		compgen -G "$2/l/*-$1" >/dev/null && return 0
		sleep 0.05
	done
	die "no registry entry for port $1 in $2/l"
}

# A directory on a disk file system (not tmpfs or ramfs), or nothing.
disk_dir() {
	local d
	for d in "$TMP" "$PWD" /var/tmp; do
		case $(stat -f -c %T "$d" 2>/dev/null) in
		tmpfs | ramfs | "") ;;
		*) echo "$d" && return 0 ;;
		esac
	done
}

t_healthy() {
	doc_phase healthy plain
	doctor ok --config "$DCONF" --connections 10
	expect_rc 0
	has OK config "$DCONF"
	has OK rundir "$RUNDIR: the rundir setting"
	has OK rundir-perm "private: mode 0700, owner uid $(id -u)"
	has OK rundir-fs tmpfs
	has OK rundir-room "10 connections with ring_size 1.0 MiB take 20.0 MiB"
	has OK rundir-clean
	has WARN agent-absent "no shuntd answers on port $APORT"
	has OK fabric
	grep -q '^shunt doctor: WARN (0 FAIL, 1 WARN, ' "$DOC_OUT" || die "summary: $(tail -n 1 "$DOC_OUT")"
	doctor json --config "$DCONF" --connections 10 --json
	expect_rc 0
	python3 - "$DOC_OUT" "$RUNDIR" <<'PY' || die "--json: $(cat "$DOC_OUT")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "WARN" and d["rundir"] == sys.argv[2] and d["to"] is None, d
codes = {f["code"]: f for f in d["findings"]}
assert codes["rundir-perm"]["level"] == "OK", codes
assert codes["agent-absent"]["level"] == "WARN" and codes["agent-absent"]["fix"].startswith("needed only")
assert d["counts"] == {"ok": len(d["findings"]) - 1, "warn": 1, "fail": 0}, d["counts"]
PY
	# A setting the library would refuse: a usage error, as for shunt run.
	doctor badkey --config "$DCONF" --options spn_us=1
	expect_rc 2
	grep -q "unknown key 'spn_us'" "$PDIR/badkey.err" || die "bad key: $(cat "$PDIR/badkey.err")"
	[[ ! -s "$DOC_OUT" ]] || die "bad key: a report was printed"
	doctor badto --config "$DCONF" --to 127.0.0.1
	expect_rc 2
	doctor badn --config "$DCONF" --connections 0
	expect_rc 2
	# A rundir that cannot be made.
	doctor missing --config "$DCONF" --options "rundir=$TMP/absent/rd"
	expect_rc 1
	has FAIL rundir-missing "$TMP/absent is absent"
	doctor long --config "$DCONF" --options "rundir=/dev/shm/$(printf 'x%.0s' {1..90})"
	expect_rc 1
	has FAIL rundir-too-long
	note "healthy rundir OK (exit 0), --json, usage errors 2, a missing and a long rundir FAIL"
}

t_disk() {
	doc_phase disk plain
	local d
	d=$(disk_dir)
	[[ -n "$d" ]] || { note "SKIP: no disk file system writable here"; return 0; }
	local rd
	rd=$(mktemp -d "$d/shunt-doctor-rd.XXXXXX")
	chmod 700 "$rd"
	doctor disk --config "$DCONF" --options "rundir=$rd" --connections 1
	rm -rf "$rd"
	expect_rc 0
	has WARN rundir-disk "$rd is on $(stat -f -c %T "$d" | sed 's,ext2/ext3,ext4,')"
	lacks rundir-fs
	note "a rundir on disk: WARN rundir-disk, exit 0"
}

t_perms() {
	doc_phase perms plain
	chmod 770 "$RUNDIR"
	doctor groupw --config "$DCONF" --connections 1
	expect_rc 1
	has FAIL rundir-group-writable "(the rundir): group-writable (mode 0770) without shm_group"
	chmod 703 "$RUNDIR"
	doctor worldw --config "$DCONF" --connections 1
	expect_rc 1
	has FAIL rundir-world-writable "writable by others (mode 0703)"
	chmod 755 "$RUNDIR"
	doctor readable --config "$DCONF" --connections 1
	expect_rc 0
	has WARN rundir-readable "readable by others (mode 0755)"
	chmod 700 "$RUNDIR"
	mkdir -m 770 "$RUNDIR/l"
	chmod 770 "$RUNDIR/l"
	doctor roomw --config "$DCONF" --connections 1
	expect_rc 1
	has FAIL rundir-group-writable "($(basename l))"
	rmdir "$RUNDIR/l"
	if [[ $(id -u) -eq 0 ]]; then
		chown 65534 "$RUNDIR"
		doctor owner --config "$DCONF" --connections 1
		expect_rc 1
		has FAIL rundir-owner "owned by uid 65534, not by uid 0"
		chown 0 "$RUNDIR"
	fi
	local open=$PDIR/open
	mkdir -m 777 "$open"
	chmod 777 "$open"
	mkdir -m 700 "$open/rd"
	doctor parent --config "$DCONF" --options "rundir=$open/rd" --connections 1
	expect_rc 0
	has WARN rundir-parent "$open (mode 0777"
	note "group- and world-writable rundir and room, another user's: FAIL; readable, a writable parent: WARN"
}

t_small() {
	doc_phase small plain
	if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null; then
		note "SKIP: mounting a tmpfs needs root and unshare"
		return 0
	fi
	local mnt=$PDIR/mnt
	mkdir -m 700 "$mnt"
	# A private mount namespace: the mount goes with the doctor.
	small() {
		local name=$1
		shift
		DOC_RC=0
		DOC_OUT=$PDIR/$name.out
		unshare -m --propagation private sh -c 'mount -t tmpfs -o size=1m,mode=0700 tmpfs "$1" &&
			shift && exec "$@"' sh "$mnt" "$SHUNT" doctor --config "$DCONF" \
			--options "rundir=$mnt" "$@" >"$DOC_OUT" 2>"$PDIR/$name.err" || DOC_RC=$?
	}
	small full
	expect_rc 1
	has FAIL rundir-space "free of 1.0 MiB; 100 connections with ring_size 1.0 MiB take 200.4 MiB"
	has OK rundir-fs tmpfs
	small fits --connections 1 --options "rundir=$mnt,ring_size=64k"
	expect_rc 0
	has OK rundir-room "1 connections with ring_size 64.0 KiB take 132.0 KiB"
	mountpoint -q "$mnt" && die "the test's tmpfs is still mounted"
	note "a 1 MiB tmpfs: FAIL rundir-space for 100 connections, OK for one"
}

# agent_start [SECRET]: shuntd with this phase's configuration (and the
# secret), until it serves; AGENT_PID.
agent_start() {
	local conf=$PDIR/shuntd.conf
	cp "$DCONF" "$conf"
	[[ -z "${1:-}" ]] || printf 'agent_secret = %s\n' "$1" >>"$conf"
	: >"$PDIR/shuntd.err"
	bg shuntd "$SHUNTD" --config "$conf"
	AGENT_PID=$BG_PID
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q 'serving on' "$PDIR/shuntd.err" && return 0
		kill -0 "$AGENT_PID" 2>/dev/null || die "shuntd exited: $(cat "$PDIR/shuntd.err")"
		sleep 0.05
	done
	die "shuntd did not start"
}

t_agent() {
	doc_phase agent plain
	agent_start "$SECRET1"
	doctor same --config "$DCONF" --options "agent_secret=$SECRET1" --connections 1
	expect_rc 0
	has OK agent "answers on 127.0.0.1:$APORT (the secret proven both ways) and serves $RUNDIR; /healthz ok"
	grep -q "shuntd ${SHUNT_VERSION:-[0-9.]*} answers" "$DOC_OUT" || die "agent version: $(grep agent "$DOC_OUT")"
	doctor other --config "$DCONF" --options "agent_secret=$SECRET2" --connections 1
	expect_rc 1
	has FAIL agent-secret "refused our proof of the secret: it has another secret"
	doctor none --config "$DCONF" --connections 1
	expect_rc 1
	has FAIL agent-secret "requires a secret and none is configured here"
	# An agent serving another rundir than ours.
	local rd2=$RUNDIR-other
	mkdir -m 700 "$rd2"
	doctor elsewhere --config "$DCONF" --options "agent_secret=$SECRET1,rundir=$rd2" --connections 1
	rm -rf "$rd2"
	expect_rc 0
	has WARN agent-rundir "does not serve $rd2"
	stop "$AGENT_PID"
	agent_start
	doctor nosecret --config "$DCONF" --options "agent_secret=$SECRET1" --connections 1
	expect_rc 1
	has FAIL agent-secret "it has no secret configured, and this host's shims have one"
	doctor plainagent --config "$DCONF" --connections 1
	expect_rc 0
	has OK agent "(no secret)"
	stop "$AGENT_PID"
	note "an agent's secret: the same OK; another, none, or none at the agent FAIL, each said; another rundir WARN"
}

t_local() {
	doc_phase local shunt
	# A live shunt listener.
	bg server "$PROGS/echo_server" --port-file "$PDIR/port" --conns 1
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	local p
	p=$(cat "$PDIR/port")
	wait_registered "$p" "$RUNDIR"
	doctor live --config "$DCONF" --connections 1 --to "127.0.0.1:$p"
	expect_rc 0
	has OK to "127.0.0.1:$p: shm: a live shunt listener ("
	has OK to "/echo_server uid $(id -u)"
	to_is shm -
	grep -qF "conn fd=? role=client local=127.0.0.1:? peer=127.0.0.1:$p transport=shm reason=-" "$DOC_OUT" ||
		die "no log line: $(cat "$DOC_OUT")"
	doctor livejson --config "$DCONF" --connections 1 --to "127.0.0.1:$p" --json
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["to"]; assert (t["transport"], t["reason"]) == ("shm", ""), t' \
		"$DOC_OUT" || die "--json to: $(cat "$DOC_OUT")"
	# A client rule keeping it on TCP, for a program named by --program.
	doctor rule --config "$DCONF" --options 'rule=kernel client myclient *' --connections 1 \
		--to "127.0.0.1:$p" --program myclient
	expect_rc 0
	has WARN to-rule "a rule of the environment (kernel)"
	to_is kernel rule-kernel
	no_conns 127.0.0.1 "$p"
	assert_log_lacks ' role=server '
	# What the doctor said is what a client gets.
	runx "$PROGS/echo_client" --port "$p" --bytes 100000 >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "echo_client failed: $(cat "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "echo_server failed"
	assert_conns shm echo_server server 1
	assert_conns shm echo_client client 1

	# A server whose rule keeps its connections on TCP: it declines.
	printf 'kernel server echo_server *\n' >>"$DCONF"
	bg server2 "$PROGS/echo_server" --port-file "$PDIR/port2" --conns 1
	spid=$BG_PID
	wait_file "$PDIR/port2" "$spid"
	p=$(cat "$PDIR/port2")
	wait_registered "$p" "$RUNDIR"
	doctor srule --config "$DCONF" --connections 1 --to "127.0.0.1:$p"
	expect_rc 0
	has WARN to-server-rule "the rule for echo_server as a server keeps connections from 127.0.0.1 on TCP"
	to_is kernel declined
	grep -qF "transport=shm reason=-, then moved fd=? from=shm transport=kernel reason=declined" "$DOC_OUT" ||
		die "no decline in the log line: $(cat "$DOC_OUT")"
	no_conns 127.0.0.1 "$p"
	runx "$PROGS/echo_client" --port "$p" --bytes 1000 >"$PDIR/client2.out" 2>"$PDIR/client2.err" ||
		die "echo_client failed: $(cat "$PDIR/client2.err")"
	wait_exit "$spid" 30 || die "echo_server failed"
	assert_log_has "echo_client$(moved_re shm declined)"
	sed -i '$d' "$DCONF"

	# A dead listener: its registry entry stays, its lock is gone.
	bg server3 "$PROGS/echo_server" --port-file "$PDIR/port3"
	spid=$BG_PID
	wait_file "$PDIR/port3" "$spid"
	p=$(cat "$PDIR/port3")
	wait_registered "$p" "$RUNDIR"
	local prog entry
	prog=$(bg_prog_pid "$spid")
	kill -KILL "$prog"
	wait_exit "$spid" 30 || true
	entry=$(compgen -G "$RUNDIR/l/*-$p")
	doctor dead --config "$DCONF" --connections 1 --to "127.0.0.1:$p"
	expect_rc 1
	has FAIL to-stale "is stale: its listener is gone"
	to_is kernel no-peer-shim
	[[ -e "$entry" ]] || die "the doctor removed the stale entry $entry"
	has WARN rundir-stale "l/ 1"

	# A plain server: nothing registered.
	MODE=plain
	bg plainsrv "$PROGS/echo_server" --port-file "$PDIR/port4"
	spid=$BG_PID
	wait_file "$PDIR/port4" "$spid"
	p=$(cat "$PDIR/port4")
	doctor plain --config "$DCONF" --connections 1 --to "127.0.0.1:$p"
	expect_rc 1
	has FAIL to-not-shunt "a server not under shunt (or under another rundir) listens on that port"
	to_is kernel no-peer-shim
	no_conns 127.0.0.1 "$p"
	MODE=shunt
	runx "$PROGS/echo_client" --port "$p" --bytes 1000 >"$PDIR/client4.out" 2>"$PDIR/client4.err" ||
		die "echo_client failed: $(cat "$PDIR/client4.err")"
	assert_log_count "$(conn_re echo_client client kernel no-peer-shim)" 1
	stop "$spid"
	note "--to: a live listener shm (and a client gets shm), rules, a server's rule declined (and a client is), a dead entry, a plain server; no connection made"
}

# start_nginx PORT GROUP: nginx (master root, one worker nobody:GROUP) on
# 127.0.0.1:PORT under shunt, answering 204; its wrapper's pid in BG_PID.
start_nginx() {
	nginx_conf "nobody $2" 1 "" "    server { listen 127.0.0.1:$1; return 204; }"
	bg nginx nginx -p "$PDIR/nginx" -e "$PDIR/nginx/error.log" -c "$PDIR/nginx.conf"
}

# curl_204 PORT: one request under shunt to start_nginx's server, answered
# 204.
curl_204() {
	runx curl -sS -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$1/" >"$PDIR/curl.out" 2>"$PDIR/curl.err" ||
		die "curl failed: $(cat "$PDIR/curl.err")"
	[[ $(cat "$PDIR/curl.out") == 204 ]] || die "nginx answered $(cat "$PDIR/curl.out")"
}

# A server that drops privileges after listen(): nginx, whose master (root)
# registers the listener and whose workers accept as nobody, on the rundir
# docs/DEPLOY.md gives it (root's, group nogroup, 2770, shm_group =
# nogroup): the doctor sees the users it accepts as now, and that they
# trust our offer by the group; without shm_group here they would not.
t_privdrop() {
	doc_phase privdrop shunt
	if [[ $(id -u) -ne 0 ]] || ! command -v nginx >/dev/null; then
		note "SKIP: needs root and nginx"
		return 0
	fi
	local group
	group=$(id -gn nobody)
	# (the workers, as nobody, read the configuration and write their logs)
	chmod 711 "$TMP"
	chmod 1777 "$PDIR" "$LOGDIR"
	chmod 755 "$RUNROOT"
	chown "root:$group" "$RUNDIR"
	chmod 2770 "$RUNDIR"
	printf 'shm_group = %s\n' "$group" >>"$DCONF"
	chmod 644 "$DCONF"
	local p npid
	p=$(free_port)
	start_nginx "$p" "$group"
	npid=$BG_PID
	wait_port "$p" "$npid"
	wait_registered "$p" "$RUNDIR"
	# Until the worker runs (as nobody) and holds the entry too.
	local i
	for ((i = 0; i < 300; i++)); do
		doctor shared --config "$DCONF" --connections 1 --to "127.0.0.1:$p"
		grep -q "/nginx uid $(id -u nobody)" "$DOC_OUT" && break
		sleep 0.05
	done
	expect_rc 0
	has OK rundir-perm "shared with group $(id -g nobody): mode 2770, owner uid 0"
	has OK to "/nginx uid 0"
	has OK to "/nginx uid $(id -u nobody)"
	has OK to "; the server dropped privileges after listen() (registered by uid 0), trusting our offer (shm_group)"
	to_is shm -
	doctor private --config "$DCONF" --options shm_group= --connections 1 --to "127.0.0.1:$p"
	expect_rc 1
	has FAIL to-peer-cred "but our offer (uid 0, group $(id -g nobody)) is not trusted by"
	to_is kernel offer-timeout
	no_conns 127.0.0.1 "$p"
	assert_log_lacks ' role=server '
	# What the doctor said is what a client gets: a worker accepts on shm.
	curl_204 "$p"
	stop "$npid"
	assert_conns shm nginx server 1
	assert_conns shm curl client 1
	note "a server that dropped privileges after listen(): seen, trusted by shm_group (a client gets shm), not without it"
}

# nginx on root's private rundir: its worker (nobody) cannot open the
# rundir, marks the entry local, and takes offers through the master's
# broker; the doctor says shm, and a client gets it.
t_broker() {
	doc_phase broker shunt
	if [[ $(id -u) -ne 0 ]] || ! command -v nginx >/dev/null; then
		note "SKIP: needs root and nginx"
		return 0
	fi
	chmod 711 "$TMP"
	chmod 1777 "$PDIR" "$LOGDIR"
	chmod 644 "$DCONF"
	local p npid i
	p=$(free_port)
	start_nginx "$p" "$(id -gn nobody)"
	npid=$BG_PID
	wait_port "$p" "$npid"
	wait_registered "$p" "$RUNDIR"
	# Until the worker has dropped privileges and marked the entry (its
	# size, shunt_registry_mark()).
	for ((i = 0; i < 300; i++)); do
		[[ -n $(find "$RUNDIR/l" -name "*-$p" -size +0c) ]] && break
		sleep 0.05
	done
	doctor broker --config "$DCONF" --connections 1 --to "127.0.0.1:$p"
	expect_rc 0
	has OK to "through the broker of the process that registered it"
	has OK to "/nginx uid $(id -u nobody)"
	to_is shm -
	no_conns 127.0.0.1 "$p"
	assert_log_lacks ' role=server '
	# What the doctor said is what a client gets.
	curl_204 "$p"
	stop "$npid"
	assert_log_count "$(conn_re curl client shm -)" 1
	assert_log_count "$(conn_re nginx server shm -)" 1
	note "nginx's workers as nobody on root's rundir: OK shm through the broker (and a client gets it)"
}

# A server that drops privileges itself after listen(), with no root
# process left: it marks its entry refusing; the doctor reports
# server-cred, and a client goes to TCP at once.
t_refusing() {
	doc_phase refusing shunt
	if [[ $(id -u) -ne 0 ]]; then
		note "SKIP: needs root"
		return 0
	fi
	chmod 711 "$TMP"
	chmod 1777 "$PDIR" "$LOGDIR"
	chmod 644 "$DCONF"
	local p spid
	# The port is written once it dropped them and marked the entry.
	bg server "$PROGS/echo_server" --port 0 --port-file "$PDIR/port" --conns 1 --user nobody
	spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	p=$(cat "$PDIR/port")
	doctor refusing --config "$DCONF" --connections 1 --to "127.0.0.1:$p"
	expect_rc 1
	has FAIL to-server-cred "registered by uid 0, marked refusing"
	has FAIL to-server-cred "/echo_server uid $(id -u nobody)"
	to_is kernel server-cred
	no_conns 127.0.0.1 "$p"
	assert_log_lacks ' role=server '
	# What the doctor said is what a client gets.
	runx "$PROGS/echo_client" --port "$p" --conns 1 --bytes 10000 >"$PDIR/client.out" 2>&1 ||
		die "echo_client failed: $(cat "$PDIR/client.out")"
	wait_exit "$spid" 20 || die "echo_server failed"
	assert_log_count "$(conn_re echo_client client kernel server-cred)" 1
	note "a server that dropped privileges itself and cannot open the rundir: FAIL to-server-cred, kernel server-cred (and a client gets it)"
}

# agent_metric NS NAME: a counter of the agent on that host's /metrics.
agent_metric() {
	local addr=$ADDR_B
	[[ $1 == "$NSA" ]] && addr=$ADDR_A
	ip netns exec "$1" curl -s --max-time 5 "http://$addr:7476/metrics" |
		awk -v k="$2" '$1 == k { print $2 }'
}

t_remote() {
	if [[ $HOSTS -ne 1 ]]; then
		note "SKIP: two hosts need root (network namespaces)"
		return 0
	fi
	need curl
	fab_hosts
	fab_phase remote shunt
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns 4
	local spid=$BG_PID p
	wait_file "$PDIR/port" "$spid"
	p=$(port_of)
	wait_registered "$p" "$RUN_B"
	DOC_NS=$NSA
	local to=(--config "$CONF_A" --connections 1 --to "$ADDR_B:$p")
	doctor noagent "${to[@]}" --options fabric_provider=tcp,agent_timeout_ms=2000
	expect_rc 1
	has FAIL to-no-agent "no agent at $ADDR_B:7476 answered"
	to_is kernel no-agent
	doctor auto "${to[@]}"
	expect_rc 0
	has WARN to-no-rdma-route "fabric_provider = auto and no RDMA device here"
	to_is kernel no-rdma-route
	agent_on B
	doctor fabric "${to[@]}" --options fabric_provider=tcp,agent_timeout_ms=2000
	expect_rc 0
	has OK to "fabric (tcp): the agent at $ADDR_B:7476 knows a live shunt listener at $ADDR_B:$p"
	has WARN fabric-tcp
	to_is fabric -
	doctor other --config "$CONF_A" --connections 1 --to "$ADDR_B:$((p == 65535 ? p - 1 : p + 1))" \
		--options fabric_provider=tcp,agent_timeout_ms=2000
	expect_rc 1
	has FAIL to-remote-not-shunt "knows no live shunt listener"
	to_is kernel no-peer-shim
	doctor secret "${to[@]}" --options "fabric_provider=tcp,agent_timeout_ms=2000,agent_secret=$SECRET1"
	expect_rc 1
	has FAIL to-agent-secret "refused our proof of the secret"
	to_is kernel declined
	DOC_NS=
	# Asked, not offered: the server saw nothing, the agent filed nothing.
	no_conns "$ADDR_B" "$p" "$NSB"
	assert_log_lacks ' role=server '
	[[ $(agent_metric "$NSB" 'shuntd_offers_total{result="held"}') == 0 ]] ||
		die "the agent filed an offer for the doctor"
	[[ $(agent_metric "$NSB" 'shuntd_queries_total{result="live"}') -ge 1 ]] ||
		die "the agent counted no QUERY"
	# What the doctor said is what a client gets: a secret the agent
	# lacks, fabric, auto, no agent.
	client() {
		SHUNT_ARGS=(--options "$1")
		on_run A "$PROGS/echo_client" --host "$ADDR_B" --port "$p" --bytes 100000 \
			>"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed: $(cat "$PDIR/client.err")"
	}
	client "$FAB_OPTS,agent_secret=$SECRET1"
	client "$FAB_OPTS"
	[[ $(agent_metric "$NSB" 'shuntd_offers_total{result="held"}') == 1 ]] ||
		die "the client's offer was not filed"
	client offer_timeout_ms=3000
	agent_stop B
	client "$FAB_OPTS"
	wait_exit "$spid" 30 || die "echo_server failed"
	assert_log_count "$(conn_re echo_server server fabric -)" 1
	assert_log_count "$(conn_re echo_client client kernel declined)" 1
	assert_log_count "$(conn_re echo_client client fabric -)" 1
	assert_log_count "$(conn_re echo_client client kernel no-rdma-route)" 1
	assert_log_count "$(conn_re echo_client client kernel no-agent)" 1
	note "--to another host: no agent, auto, fabric, no listener, a secret the agent lacks; nothing filed, no connection; clients get what it said"
}

subtest healthy t_healthy
subtest disk t_disk
subtest perms t_perms
subtest small t_small
subtest agent t_agent
subtest local t_local
subtest privdrop t_privdrop
subtest broker t_broker
subtest refusing t_refusing
subtest remote t_remote
finish_subtests
