#!/usr/bin/env bash
# shellcheck disable=SC2031,SC2154
# Servers that drop privileges after they listen, run as their users run
# them, with no shunt configuration:
#   * nginx's workers switch to nobody (nginx's own default `user`) while
#     the master stays root: the workers take their connections on shm
#     through the master's broker (shm/shm_broker.c), every byte right, no
#     client waiting out an offer (offer-timeout);
#   * a program that calls setuid() itself after listen() (echo_server
#     --user nobody, no privileged process left): its clients see the mark
#     in the registry and connect over TCP at once (server-cred);
#   * memcached -u nobody drops privileges before it listens: its listener
#     never reaches root's registry (no-peer-shim).
# Needs root; prints SKIP otherwise.
source "$(dirname "$0")/lib_shm.sh"

if [[ $(id -u) -ne 0 ]]; then
	echo "SKIP: $E2E_NAME needs root (servers that drop privileges)"
	exit 0
fi
need nginx curl memcached python3
CONNS=8

shm_phase nginx shunt
# nobody must reach the files it serves and write its shunt log.
chmod 711 "$TMP"
chmod 1777 "$LOGDIR"
mkdir -p "$TMP/www"
chmod 755 "$TMP/www"
random_file "$TMP/www/f.bin" 300000
chmod 644 "$TMP/www/f.bin"
want=$(sha256 "$TMP/www/f.bin")
port=$(free_port)
nginx_conf "nobody nogroup" 2 "use epoll;" "    default_type application/octet-stream;
    server { listen 127.0.0.1:$port; root $TMP/www; }"
bg nginx nginx -p "$PDIR/nginx" -e "$PDIR/nginx/error.log" -c "$PDIR/nginx.conf"
npid=$BG_PID
wait_port "$port" "$npid"
for i in $(seq 1 $CONNS); do
	runx curl -sS --fail -o "$PDIR/get.$i" "http://127.0.0.1:$port/f.bin" 2>"$PDIR/curl.err" ||
		die "curl $i failed: $(cat "$PDIR/curl.err")"
	assert_eq "$(sha256 "$PDIR/get.$i")" "$want" "download $i"
done
workers=$(pgrep -u nobody -P "$(bg_prog_pid "$npid")" | wc -l)
[[ $workers -ge 1 ]] || die "no nginx worker runs as nobody"
stop "$npid"
check_logs
# The clients on shm, the workers (nobody) accepting on shm.
assert_log_count "$(conn_re curl client shm '-')" $CONNS
assert_log_count "$(conn_re nginx server shm '-')" $CONNS
assert_log_lacks 'reason=offer-timeout$'
assert_log_lacks "$(conn_re curl client kernel '[a-z-]+')"
assert_log_count 'credentials changed: .* offers from this host are opened by the process that registered the listeners' "$workers"
note "nginx workers as nobody: $CONNS curl connections on shm through the broker"

shm_phase self-setuid shunt
chmod 711 "$TMP"
chmod 1777 "$LOGDIR"
# The port is written once it dropped them (by nobody, in a directory it
# may write): no client connects before.
mkdir -m 1777 "$PDIR/pf"
bg server "$PROGS/echo_server" --port 0 --port-file "$PDIR/pf/port" --conns 2 --wait epoll \
	--user nobody
spid=$BG_PID
wait_file "$PDIR/pf/port" "$spid"
[[ $(stat -c %U "$PDIR/pf/port") == nobody ]] || die "echo_server did not drop privileges"
runx "$PROGS/echo_client" --port "$(cat "$PDIR/pf/port")" --conns 2 --bytes 200000 --wait poll \
	>"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed: $(cat "$PDIR/client.err")"
wait_exit "$spid" 20 || die "echo_server failed"
grep -q '^PASS' "$PDIR/client.out" || die "no PASS from echo_client"
check_logs
assert_log_count "$(conn_re echo_client client kernel server-cred)" 2
assert_log_lacks 'reason=offer-timeout$'
note "a server that calls setuid() itself, with no privileged process left: server-cred at once"

shm_phase memcached shunt
chmod 711 "$TMP"
chmod 1777 "$LOGDIR"
port=$(free_port)
bg memcached memcached -u nobody -p "$port" -l 127.0.0.1 -U 0 -t 2
mpid=$BG_PID
wait_port "$port" "$mpid"
mem=$(bg_prog_pid "$mpid")
assert_preloaded "$mem"
[[ $(stat -c %u "/proc/$mem") == "$(id -u nobody)" ]] || die "memcached did not drop to nobody"
_prefix shunt
memcached_client "$port" 100
stop "$mpid"
check_logs
# memcached gives up root before it listens: its listener never made it
# into root's registry, so the client finds no shunt listener at all.
assert_log_count "$(conn_re 'python3[^:]*' client kernel no-peer-shim)" 1
assert_log_lacks 'reason=offer-timeout$'
pass
