#!/usr/bin/env bash
# log=info is quiet in processes that decide nothing.  A shell script run
# under shunt starts many processes (subshells, command substitutions,
# pipelines, exec'd programs) that never listen, connect or accept: none of
# them may print shunt's startup line or an exit summary.  A process that
# does connect prints exactly two lines, the startup line at its first
# decision and its summary at exit; its subshells still print nothing.
source "$(dirname "$0")/lib.sh"
E2E_TRANSPORT=""          # one connection to a plain server: the kernel path
need python3

SCRIPT='for i in 1 2 3; do x=$(echo "$i" | cat); done; sh -c true; (ls / >/dev/null); wait'

phase quiet shunt
SHUNT_LOGLEVEL=info
run_shunt bash -c "$SCRIPT" >"$PDIR/out" 2>"$PDIR/err" || die "the script failed under shunt"
unset SHUNT_LOGLEVEL
[[ ! -s "$PDIR/err" ]] || die "stderr: $(head -c 300 "$PDIR/err")"
assert_log_lacks .
note "a script whose processes decide nothing: no line at log=info"

phase one-connection shunt
# The server runs plainly, so the connection takes the kernel path
# (no-peer-shim) and the test does not depend on a transport.
MODE=plain
hport=$(free_port)
bg http python3 -m http.server "$hport" --bind 127.0.0.1 --directory "$PDIR"
wait_port "$hport" "$BG_PID"
MODE=shunt
SHUNT_LOGLEVEL=info
run_shunt bash -c "exec 3<>/dev/tcp/127.0.0.1/$hport
printf 'GET / HTTP/1.0\r\n\r\n' >&3
cat <&3 >/dev/null
$SCRIPT" >"$PDIR/out" 2>"$PDIR/err" || die "the connecting script failed under shunt"
unset SHUNT_LOGLEVEL
check_logs
assert_log_count . 2
assert_log_pids . 1
assert_log_count '^shunt\[[0-9]+\] bash: info: shunt [0-9.]+ enabled: log=info ' 1
assert_log_count '^shunt\[[0-9]+\] bash: info: summary: connections shm=0 fabric=0 kernel=1 ' 1
note "the process that connected: its startup line and its summary, nothing from the others"
pass
