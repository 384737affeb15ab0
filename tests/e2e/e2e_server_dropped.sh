#!/usr/bin/env bash
# shellcheck disable=SC2031,SC2154
# Servers that drop privileges after they listen, run as their users run
# them, with no shunt configuration: nginx's workers switch to nobody (nginx's
# own default `user`), memcached runs with `-u nobody` (it drops them
# before it listens).  The new user cannot
# open root's private rundir, so the server could never take an offer.  The
# clients must see that from the registry and connect over TCP at once with
# reason server-cred, never wait out an offer (offer-timeout), and every
# byte must be right.
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
assert_log_count "$(conn_re curl client kernel server-cred)" $CONNS
assert_log_lacks 'reason=offer-timeout$'
assert_log_lacks "$(conn_re curl client shm '-')"
note "nginx workers as nobody: $CONNS curl connections on TCP with server-cred"

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
