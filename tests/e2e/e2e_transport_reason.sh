#!/usr/bin/env bash
# Decisions and reasons.  `shunt run --transport kernel` gives rule-kernel on
# both sides; with the default (auto) and a peer that does not run shunt the
# connection takes the kernel path with reason no-transport (no accelerated
# transport built) or no-peer-shim; with both ends under shunt both ends
# agree on the path.  Rules (role, program glob, address, port range, IPv6)
# choose per connection, first match wins; SHUNT_OPTIONS overrides the file;
# enable=no gives reason disabled; a client near its fd limit stays on
# TCP with fd-limit; log=info prints only the startup line with
# the version.  echo_client checks the data in every case.
source "$(dirname "$0")/lib.sh"

: "${SHUNT_VERSION:=}"
E2E_TRANSPORT=""          # this test chooses its own transports
TRANSPORT_RE='(kernel|shm|fabric)'

# echo_pair HOST [PORT] [SERVER_MODE] [CLIENT_MODE] [CLIENT_ARGS...]:
# echo_server + echo_client (2 connections), each plain or under shunt
# (default both under shunt).
echo_pair() {
	local host=$1 port=${2:-0} smode=${3:-shunt} cmode=${4:-shunt}
	shift 4 2>/dev/null || shift $#
	MODE=$smode bg server "$PROGS/echo_server" --host "$host" --port "$port" \
		--port-file "$PDIR/port" --conns 2 --wait epoll
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	MODE=$cmode runx "$PROGS/echo_client" --host "$host" --port "$(cat "$PDIR/port")" --conns 2 \
		--bytes 300000 --wait poll "$@" >"$PDIR/client.out" 2>"$PDIR/client.err" || die "$PHASE: echo_client failed"
	wait_exit "$spid" 20 || die "$PHASE: echo_server failed"
	grep -q '^PASS' "$PDIR/client.out" || die "$PHASE: no PASS from echo_client"
	rm -f "$PDIR/port"
}

MODE=shunt

phase transport-kernel
SHUNT_ARGS=(--transport kernel)
echo_pair 127.0.0.1
unset SHUNT_ARGS
check_logs
assert_log_count "$(conn_re echo_client client kernel rule-kernel)" 2
assert_log_count "$(conn_re echo_server server kernel rule-kernel)" 2
assert_log_count ': debug: close fd=[0-9]+ transport=kernel reason=rule-kernel$' 4
assert_conn_pairs 2

phase default-plain-server
echo_pair 127.0.0.1 0 plain shunt
check_logs
assert_log_count "$(conn_re echo_client client kernel "$AUTO_KERNEL_REASONS")" 2
assert_log_lacks 'role=server'

phase default-plain-client
echo_pair 127.0.0.1 0 shunt plain
check_logs
assert_log_count "$(conn_re echo_server server kernel "$AUTO_KERNEL_REASONS")" 2
assert_log_lacks 'role=client'

phase default-both
echo_pair 127.0.0.1
check_logs
assert_log_count "$(conn_re echo_client client)" 2
assert_log_count "$(conn_re echo_server server)" 2
assert_log_lacks 'reason=(rule-kernel|disabled)$'
assert_conn_pairs 2

phase rules-role-glob
# the server pinned to kernel by a program glob: the clients (auto) must end
# on the kernel path too, for a reason other than a rule of theirs
printf 'kernel server echo_serv* *\nauto * * *\n' >"$PDIR/shunt.conf"
SHUNT_CONF=$PDIR/shunt.conf
echo_pair 127.0.0.1
check_logs
assert_log_count "$(conn_re echo_server server kernel rule-kernel)" 2
# A client decides before the server does: it offers shm (or stays on the
# kernel path when no shunt listener is registered), and one that offered
# moves to TCP when the server declines.
n_kernel=$(log_count "$(conn_re echo_client client kernel '[a-z-]+')")
n_offer=$(log_count "$(conn_re echo_client client shm '')")
n_moved=$(log_count '^shunt\[[0-9]+\] echo_client: info: moved fd=[0-9]+ from=shm transport=kernel reason=declined$')
[[ $((n_kernel + n_offer)) -eq 2 && $n_moved -eq $n_offer ]] ||
	die "clients: $n_kernel on the kernel path, $n_offer offered shm, $n_moved declined (want 2 in all, every offer declined)"
assert_log_lacks 'role=client .* reason=rule-kernel$'

phase rules-port
port=$(free_port)
# first match wins: the port rule comes before a catch-all auto
printf 'kernel client * 127.0.0.1:%d\nauto client * 127.0.0.0/8\n' "$port" >"$PDIR/shunt.conf"
SHUNT_CONF=$PDIR/shunt.conf
echo_pair 127.0.0.1 "$port"
check_logs
assert_log_count "$(conn_re echo_client client kernel rule-kernel)" 2
assert_log_count "$(conn_re echo_server server kernel '[a-z-]+')" 2
assert_log_lacks 'role=server .* reason=rule-kernel$'

phase rules-port-miss
# a rule for other ports does not match
printf 'kernel client * 127.0.0.1:%d-%d\n' $((port + 1)) $((port + 100)) >"$PDIR/shunt.conf"
SHUNT_CONF=$PDIR/shunt.conf
echo_pair 127.0.0.1 "$port" plain shunt
check_logs
assert_log_count "$(conn_re echo_client client kernel "$AUTO_KERNEL_REASONS")" 2

phase rules-ipv6
printf 'auto client * 127.0.0.1\nkernel client * ::1/128\n' >"$PDIR/shunt.conf"
SHUNT_CONF=$PDIR/shunt.conf
echo_pair ::1
check_logs
assert_log_count "$(conn_re echo_client client kernel rule-kernel)" 2
assert_log_has 'role=client local=\[?::1\]?:[0-9]+ peer=\[?::1\]?:[0-9]+ ' 2
assert_conn_pairs 2

phase options-env
# SHUNT_OPTIONS (via --options) overrides the file's default transport
printf 'default_transport = auto\n' >"$PDIR/shunt.conf"
SHUNT_CONF=$PDIR/shunt.conf
SHUNT_ARGS=(--options 'default_transport=kernel')
echo_pair 127.0.0.1
unset SHUNT_ARGS
check_logs
assert_log_count "$(conn_re echo_client client kernel rule-kernel)" 2
assert_log_count "$(conn_re echo_server server kernel rule-kernel)" 2
unset SHUNT_CONF

phase disabled
SHUNT_ARGS=(--options 'enable=no')
echo_pair 127.0.0.1
unset SHUNT_ARGS
check_logs
assert_log_has ': info: shunt [0-9.]+ disabled' 2
assert_log_count "$(conn_re echo_client client kernel disabled)" 2
assert_log_count "$(conn_re echo_server server kernel disabled)" 2

phase env-cleared
# The client empties its environment before its first socket call: the
# settings it was started with (here --transport kernel and the log file)
# must still apply.
SHUNT_ARGS=(--transport kernel)
echo_pair 127.0.0.1 0 shunt shunt --clearenv
unset SHUNT_ARGS
check_logs
assert_log_count "$(conn_re echo_server server kernel rule-kernel)" 2
assert_log_count "$(conn_re echo_client client kernel rule-kernel)" 2

phase fd-limit
# A client whose open-file limit leaves no room for shunt's own descriptors
# (rings, wake socket) keeps its connections on TCP, reason fd-limit, and
# runs as it would without shunt.
MODE=shunt bg server "$PROGS/echo_server" --host 127.0.0.1 --port 0 \
	--port-file "$PDIR/port" --conns 2 --wait epoll
spid=$BG_PID
wait_file "$PDIR/port" "$spid"
_prefix shunt
prlimit --nofile=40:40 -- "${PFX[@]}" "$PROGS/echo_client" --host 127.0.0.1 --port "$(cat "$PDIR/port")" \
	--conns 2 --bytes 300000 --wait poll >"$PDIR/client.out" 2>"$PDIR/client.err" || die "fd-limit: echo_client failed"
wait_exit "$spid" 20 || die "fd-limit: echo_server failed"
grep -q '^PASS' "$PDIR/client.out" || die "fd-limit: no PASS from echo_client"
check_logs
assert_log_count "$(conn_re echo_client client kernel fd-limit)" 2
assert_log_count "$(conn_re echo_server server kernel no-peer-shim)" 2

phase info-level
SHUNT_LOGLEVEL=info
echo_pair 127.0.0.1
unset SHUNT_LOGLEVEL
check_logs
if [[ -n "$SHUNT_VERSION" ]]; then
	assert_log_count "^shunt\\[[0-9]+\\] echo_client: info: shunt $SHUNT_VERSION enabled" 1
	assert_log_count "^shunt\\[[0-9]+\\] echo_server: info: shunt $SHUNT_VERSION enabled" 1
else
	assert_log_count '^shunt\[[0-9]+\] echo_client: info: shunt [0-9]+\.[0-9]+\.[0-9]+ enabled' 1
fi
assert_log_lacks ': debug: '
pass
