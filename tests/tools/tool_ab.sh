#!/usr/bin/env bash
# shunt ab, live: redis-server and redis-benchmark, plain and under shunt.
# The table has both columns, the figures redis-benchmark printed and their
# ratio; the shunt side's connections were on shm by the library's own
# debug log (independent of what shunt ab says), and the plain side ran
# without the library.  Then the error paths: a server that never listens,
# and a client whose output is not the format asked for.
#   SHUNT=build/tools/shunt bash tests/tools/tool_ab.sh
set -euo pipefail
: "${SHUNT:?set SHUNT to the shunt tool}"
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_RULES SHUNT_LOG SHUNT_LOG_FILE \
	SHUNT_DEFAULT_TRANSPORT SHUNT_ENABLE SHUNT_RUNDIR 2>/dev/null || true
export LC_ALL=C
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shunt-tool-ab.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: tool_ab: $*"; exit 1; }
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
	fail "redis-server and redis-benchmark are needed (scripts/deps.sh)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

mkdir "$tmp/log"
runs=2
rc=0
SHUNT_LOG=debug SHUNT_LOG_FILE="$tmp/log/%p.log" "$SHUNT" ab --runs $runs --port "$port" \
	--server "redis-server --port $port --save '' --appendonly no --dir $tmp" \
	--client "redis-benchmark -p $port -n 2000 -c 4 -t set,get -q" \
	--keep "$tmp/keep" >"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/out" "$tmp/err"
[[ $rc -eq 0 ]] || fail "shunt ab exited with $rc"

python3 - "$tmp/out" <<'PY' || fail "table checks above"
import re, sys
text = open(sys.argv[1]).read()
errors = []
head = next((l for l in text.splitlines() if l.startswith("figure")), "")
for c in ("plain (median)", "shunt (median)", "ratio shunt/plain"):
    if c not in head:
        errors.append("header lacks %r: %r" % (c, head))
if "output:  redis-benchmark" not in text:
    errors.append("output not recognised as redis-benchmark")
for name in ("SET (req/s)", "GET (req/s)", "SET p50 (ms)", "GET p50 (ms)", "client wall time (s)"):
    row = next((l for l in text.splitlines() if l.startswith(name + " ")), None)
    if not row:
        errors.append("no row %r" % name)
        continue
    m = re.match(re.escape(name) + r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)x \((better|worse|same)\)\s+(.*)\|(.*)$", row)
    if not m:
        errors.append("row %r malformed: %r" % (name, row))
        continue
    plain, shunt, ratio = float(m.group(1)), float(m.group(2)), float(m.group(3))
    if not (plain > 0 and shunt > 0):
        errors.append("%s: %r" % (name, row))
        continue
    if abs(ratio - shunt / plain) > 0.01 + 0.01 * ratio:
        errors.append("%s: ratio %.2f, but %g / %g = %.3f" % (name, ratio, shunt, plain, shunt / plain))
    if len(m.group(5).split()) != 2 or len(m.group(6).split()) != 2:
        errors.append("%s: not 2 runs per side: %r" % (name, row))
m = re.search(r"^shunt side, the server's connections \(library stats, 2 run\(s\)\): shm (\d+), fabric 0, kernel 0$", text, re.M)
if not m or int(m.group(1)) < 8:
    errors.append("the shunt side's stats do not show its connections on shm")
for e in errors:
    print("FAIL: tool_ab: " + e)
sys.exit(1 if errors else 0)
PY

# The library's own account, per process: redis-benchmark's connections
# (4 clients, and one that reads the server's configuration) all on shm,
# from exactly $runs processes (the shunt runs; the plain ones had no
# library), and the server accepted them on shm.
conn_re='^shunt\[[0-9]+\] redis-benchmark: debug: conn fd=[0-9]+ role=client .* transport='
n_shm=$(cat "$tmp"/log/*.log | grep -Ec "${conn_re}shm reason=-\$" || true)
n_all=$(cat "$tmp"/log/*.log | grep -Ec "$conn_re" || true)
[[ $n_shm -ge $((runs * 4)) && $n_shm -eq $n_all ]] ||
	fail "redis-benchmark connections: $n_shm on shm of $n_all (expected >= $((runs * 4)), all)"
procs=$(grep -lE "$conn_re" "$tmp"/log/*.log | wc -l)
[[ $procs -eq $runs ]] || fail "redis-benchmark logged from $procs processes, expected $runs (one per shunt run)"
n_srv=$(cat "$tmp"/log/*.log | grep -Ec '^shunt\[[0-9]+\] redis-server: debug: conn fd=[0-9]+ role=server .* transport=shm reason=-$' || true)
[[ $n_srv -eq $n_shm ]] || fail "redis-server accepted $n_srv connections on shm, the clients made $n_shm"
for side in plain shunt; do
	for r in 1 2; do
		grep -q 'requests per second' "$tmp/keep/client-$side-$r.txt" ||
			fail "--keep: no client output for $side run $r"
	done
done

# A server that exits without listening: an error, at once, with its output.
rc=0
"$SHUNT" ab --runs 1 --server 'echo no-listen-here; exit 3' --client true --ready-timeout 20 \
	>"$tmp/out2" 2>&1 || rc=$?
cat "$tmp/out2"
[[ $rc -eq 1 ]] || fail "a server that never listens: exit $rc, expected 1"
grep -q 'the server exited before it listened (exit status 3)' "$tmp/out2" || fail "no message for the dead server"
grep -q 'no-listen-here' "$tmp/out2" || fail "the server's output was not shown"

# --format names the program: other output is an error, not a silent table.
rc=0
"$SHUNT" ab --runs 1 --client 'echo hello' --format wrk >"$tmp/out3" 2>&1 || rc=$?
cat "$tmp/out3"
[[ $rc -eq 1 ]] && grep -q "is not wrk output" "$tmp/out3" || fail "--format wrk on other output: exit $rc"

# No known format: wall time, both sides.
"$SHUNT" ab --runs 1 --client 'sleep 0.05' >"$tmp/out4" 2>&1 || fail "wall-time A/B failed"
grep -Eq '^client wall time \(s\) +0\.[0-9]+ +0\.[0-9]+ +[0-9.]+x ' "$tmp/out4" || { cat "$tmp/out4"; fail "no wall-time row"; }
echo "tool_ab: ok"
