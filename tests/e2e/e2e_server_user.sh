#!/usr/bin/env bash
# shellcheck disable=SC2031,SC2154
# A server that drops privileges, accelerated as docs/DEPLOY.md ("Servers
# that run as their own user") says: memcached started by root with
# `-u nobody` (it gives up root and its supplementary groups; nobody's
# primary group is nogroup) and a client of another user that is a member
# of that group, with the documented configuration:
#   * a rundir made once by root, mode 2770, owned by the server's primary
#     group (what the tmpfiles.d line of the docs makes), and
#   * shunt.conf:  rundir = <that directory>,  shm_group = <that group>.
# Checked: memcached's connection is accepted by a process running as
# nobody, and shunt stat (as root, reading the shared rundir) shows it and
# the client's on shm with the client's bytes; the values read back are the
# ones written; both ends' decision lines say shm.
# Needs root; prints SKIP otherwise.
source "$(dirname "$0")/lib_shm.sh"

if [[ $(id -u) -ne 0 ]]; then
	echo "SKIP: $E2E_NAME needs root (a server that drops privileges, users)"
	exit 0
fi
need memcached python3 setpriv jq
SERVER_USER=nobody
SERVER_GROUP=$(id -gn "$SERVER_USER")
GID=$(getent group "$SERVER_GROUP" | cut -d: -f3)
CLIENT_UID=61021
VALUES=200

shm_phase server-user shunt
# The users must reach the programs, the library and the logs.
chmod 711 "$TMP"
chmod 1777 "$PDIR" "$LOGDIR"
chmod 755 "$RUNROOT"
for f in "$SHUNT_LIB" "$SHUNT" "$E2E_DIR/memcached_client.py"; do
	setpriv --reuid=$CLIENT_UID --regid=$CLIENT_UID --clear-groups -- test -r "$f" ||
		{ echo "SKIP: $E2E_NAME: $f is not readable by an unprivileged user"; exit 0; }
done

# The documented setup: the shared rundir, and the configuration.
chown "root:$SERVER_GROUP" "$RUNDIR"
chmod 2770 "$RUNDIR"
printf 'rundir = %s\nshm_group = %s\n' "$RUNDIR" "$SERVER_GROUP" >"$PDIR/shunt.conf"
chmod 644 "$PDIR/shunt.conf"
export SHUNT_CONF=$PDIR/shunt.conf

port=$(free_port)
bg memcached memcached -u "$SERVER_USER" -p "$port" -l 127.0.0.1 -U 0 -t 2
mpid=$BG_PID
wait_port "$port" "$mpid"
mem=$(bg_prog_pid "$mpid")
assert_preloaded "$mem"
[[ $(stat -c %u "/proc/$mem") == "$(id -u "$SERVER_USER")" ]] ||
	die "memcached did not drop to $SERVER_USER"

as_user_prefix $CLIENT_UID "$GID"
memcached_client "$port" $VALUES

# What an operator runs: shunt stat on the shared rundir, as root.  The
# client has exited; memcached (as nobody) holds its counters.
stat=$(env "SHUNT_RUNDIR=$RUNDIR" "$SHUNT" stat --json -n memcached | tail -n 1)
read -r uid shm kernel < <(jq -r '.processes[0] | "\(.uid) \(.totals.connections.shm) \(.totals.connections.kernel)"' <<<"$stat")
[[ $uid == "$(id -u "$SERVER_USER")" && $shm == 1 && $kernel == 0 ]] ||
	die "shunt stat: memcached uid=$uid shm=$shm kernel=$kernel, expected uid $(id -u "$SERVER_USER"), shm=1 kernel=0: $stat"
stop "$mpid"

assert_memcached_on_shm
# The server's accept was decided by the process running as nobody.
pid=$(log_lines "$(tp_conn_re shm memcached server)" | sed -n 's/^shunt\[\([0-9]*\)\].*/\1/p')
[[ $pid == "$mem" ]] || die "the accept was decided by pid $pid, not memcached ($mem)"
total=$(sed -n 's/.* bytes=\([0-9]*\) .*/\1/p' "$PDIR/client.out")
note "memcached -u $SERVER_USER and a client of uid $CLIENT_UID (group $SERVER_GROUP): shm, $total bytes of values"
pass_soft
