#!/usr/bin/env bash
# valgrind (memcheck) over both ends of an shm echo: the server and the
# client run with libshunt.so preloaded, under valgrind, and must exit 0 with
# no error reported; the transfer must have used shm.
# Usage: valgrind_echo.sh LIBSHUNT PROGS_DIR
set -euo pipefail
lib=$1 progs=$2
tmp=$(mktemp -d)
trap 'kill $spid 2>/dev/null || true; rm -rf "$tmp" /dev/shm/shunt-vg-$$' EXIT
mkdir -m 700 /dev/shm/shunt-vg-$$
# The server under valgrind may take seconds to reach accept() on a loaded
# machine; the offer must not time out meanwhile (the test is about memory
# errors on the shm path, not about the deadline).
export SHUNT_RUNDIR=/dev/shm/shunt-vg-$$ SHUNT_LOG=debug SHUNT_LOG_FILE=$tmp/%p.log \
	SHUNT_OFFER_TIMEOUT_MS=60000
vg=(valgrind -q --error-exitcode=99 --leak-check=no --trace-children=no)
LD_PRELOAD=$lib "${vg[@]}" "$progs/echo_server" --port-file "$tmp/port" --conns 2 \
	--wait epoll >"$tmp/server.out" 2>&1 &
spid=$!
for _ in $(seq 600); do [[ -s $tmp/port ]] && break; sleep 0.05; done
[[ -s $tmp/port ]] || { echo "FAIL: server did not start"; cat "$tmp/server.out"; exit 1; }
rc=0
LD_PRELOAD=$lib "${vg[@]}" "$progs/echo_client" --port "$(cat "$tmp/port")" --conns 2 \
	--bytes 300000 --wait poll >"$tmp/client.out" 2>&1 || rc=$?
wait $spid || rc=$((rc ? rc : $?))
cat "$tmp/client.out" "$tmp/server.out"
[[ $rc == 0 ]] || { echo "FAIL: exit status $rc (99 = valgrind found errors)"; exit 1; }
n=$(cat "$tmp"/*.log | grep -c 'debug: conn .*transport=shm reason=-' || true)
[[ $n == 4 ]] || { echo "FAIL: expected 4 shm connection decisions, found $n"; cat "$tmp"/*.log; exit 1; }
echo "PASS valgrind_echo: both ends clean under memcheck, 4 shm decisions"
