#!/usr/bin/env bash
# shunt ab, live and on its error paths.
#  1. redis-server and redis-benchmark, plain and under shunt: the table has
#     both medians, the median of the per-run ratios (recomputed here from
#     the runs it prints), "too few runs for a verdict" with 2 pairs, CPU
#     rows per run and per request; --json and --csv say the same; the shunt
#     side's connections were on shm by the library's own debug log, the
#     plain side ran without the library; the report names the version, the
#     settings, the machine and its load.
#  2. --transport kernel: nothing accelerated, so no verdict at all.
#  3. Bad options, shunt-side settings the library refuses, unwritable
#     output: exit 2 before anything runs (the server would leave a mark).
#  4. A client that fails in one run: that run is reported and kept out,
#     the other pairs count; the exit status says whether enough were left.
#  5. CPU time: the server's start-up is not counted, its work while the
#     client runs is.  --cpus pins each end where it says.
#  6. sockperf (a stand-in that prints recorded output): --mps is added to
#     a ping-pong without it, and a window overflow is explained.
#  7. A server that never listens; a client whose output is not the format
#     asked for; no known format at all.
#   SHUNT=build/tools/shunt bash tests/tools/tool_ab.sh
set -euo pipefail
: "${SHUNT:?set SHUNT to the shunt tool}"
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_RULES SHUNT_LOG SHUNT_LOG_FILE \
	SHUNT_DEFAULT_TRANSPORT SHUNT_ENABLE SHUNT_RUNDIR 2>/dev/null || true
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/../fixtures/ab
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shunt-tool-ab.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: tool_ab: $*"; exit 1; }
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
	fail "redis-server and redis-benchmark are needed (scripts/deps.sh)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
redis_server="redis-server --port $port --save '' --appendonly no --dir $tmp"

# ---- 1. live redis ---------------------------------------------------------
mkdir "$tmp/log"
runs=2
rc=0
SHUNT_LOG=debug SHUNT_LOG_FILE="$tmp/log/%p.log" "$SHUNT" ab --runs $runs --warmup 1 --port "$port" \
	--server "$redis_server" --client "redis-benchmark -p $port -n 2000 -c 4 -t set,get" \
	--options 'spin_us=7' --json "$tmp/ab.json" --csv "$tmp/ab.csv" \
	--keep "$tmp/keep" >"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/out" "$tmp/err"
[[ $rc -eq 0 ]] || fail "shunt ab exited with $rc"

python3 - "$tmp/out" "$tmp/ab.json" "$tmp/ab.csv" "${SHUNT_VERSION:-}" <<'PY' || fail "report checks above"
import csv, json, re, statistics, sys
text = open(sys.argv[1]).read()
doc = json.load(open(sys.argv[2]))
rows = list(csv.DictReader(open(sys.argv[3])))
version = sys.argv[4]
errors = []
lines = text.splitlines()
def line(prefix):
    return next((l for l in lines if l.startswith(prefix)), "")
head = line("figure")
for c in ("plain (median)", "shunt (median)", "shunt/plain", "[95% interval]", "verdict"):
    if c not in head:
        errors.append("header lacks %r: %r" % (c, head))
# the shunt side's settings: this test's environment, then --options
if not re.match(r"^shunt:   [0-9.]+; settings: log=debug log_file=\S+/log/%p\.log spin_us=7; rundir: a private one per run$", line("shunt:")):
    errors.append("no version and settings line: %r" % line("shunt:"))
if version and not line("shunt:").startswith("shunt:   %s;" % version):
    errors.append("version is not %s: %r" % (version, line("shunt:")))
if not re.match(r"^machine: .*CPUs.*load average [0-9.]+; at the end [0-9.]+$", line("machine:")):
    errors.append("machine line: %r" % line("machine:"))
if line("pinning:") != "pinning: none":
    errors.append("pinning line: %r" % line("pinning:"))
if line("output:") != "output:  redis-benchmark":
    errors.append("output not recognised as redis-benchmark")
names = ("SET (req/s)", "GET (req/s)", "SET p50 (ms)", "GET p50 (ms)", "client wall time (s)",
         "server CPU (s)", "client CPU (s)", "server CPU per op (us)", "client CPU per op (us)")
for name in names:
    row = line(name + " ")
    m = re.match(re.escape(name) + r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)x\s+-\s+too few runs for a verdict\s+(.*)\|(.*)$", row)
    if not m:
        errors.append("row %r malformed: %r" % (name, row))
        continue
    plain, shunt, ratio = float(m.group(1)), float(m.group(2)), float(m.group(3))
    ps, ss = m.group(4).split(), m.group(5).split()
    pv, sv = [float(x) for x in ps], [float(x) for x in ss]
    if len(pv) != 2 or len(sv) != 2:
        errors.append("%s: not 2 runs per side: %r" % (name, row))
        continue
    # The printed run values are rounded (0.005 may be 0.0054): the ratio
    # must lie within what the values' rounding allows, and within what
    # the printed ratio's own rounding allows.
    def span(x):
        half = 0.5 * 10 ** -(len(x.split(".")[1]) if "." in x else 0)
        return float(x) - half, float(x) + half
    lo = statistics.median([span(s)[0] / span(p)[1] for p, s in zip(ps, ss) if float(p) > 0])
    hi = statistics.median([span(s)[1] / span(p)[0] for p, s in zip(ps, ss) if span(p)[0] > 0] or [float("inf")])
    rlo, rhi = span(m.group(3))
    want = statistics.median([s / p for p, s in zip(pv, sv) if p > 0])
    if rhi < lo or rlo > hi:
        errors.append("%s: ratio %.3f, but the median of the runs' ratios is %.3f (%.3f..%.3f as rounded)" % (name, ratio, want, lo, hi))
    if "CPU" not in name and not (plain > 0 and shunt > 0):
        errors.append("%s: %r" % (name, row))
    f = next((x for x in doc["figures"] if x["name"] == name), None)
    if not f:
        errors.append("JSON lacks %r" % name)
        continue
    if f["pairs"] != 2 or f["interval"] is not None or f["verdict"] != "too few runs for a verdict":
        errors.append("JSON %s: %s" % (name, f))
    jr = statistics.median([s / p for p, s in zip(f["plain"]["values"], f["shunt"]["values"]) if p])
    if f["ratio"] is None or abs(f["ratio"] - jr) > 1e-6 * jr:
        errors.append("JSON %s: ratio %s, values give %s" % (name, f["ratio"], jr))
    for side in ("plain", "shunt"):
        got = sorted(float(r["value"]) for r in rows if r["figure"] == name and r["side"] == side and r["run"] in ("1", "2"))
        if got != sorted(f[side]["values"]):
            errors.append("CSV %s %s: %s, JSON %s" % (name, side, got, f[side]["values"]))
    v = [r["value"] for r in rows if r["figure"] == name and r["run"] == "verdict"]
    if v != ["too few runs for a verdict"]:
        errors.append("CSV verdict of %s: %s" % (name, v))
if doc["accelerated"] is not True or doc["shunt_transports"]["shm"] < 8 or doc["shunt_transports"]["kernel"]:
    errors.append("JSON shunt side: %s" % doc["shunt_transports"])
if (doc["runs"], doc["warmup"], doc["complete_pairs"], doc["format"]) != (2, 1, 2, "redis-benchmark"):
    errors.append("JSON runs/warmup/pairs/format: %s" % [doc[k] for k in ("runs", "warmup", "complete_pairs", "format")])
details = doc["run_details"]
if len(details) != 4 or not all(d["ok"] and d["ops"] == 4000 and d["server_cpu_s"] is not None for d in details):
    errors.append("JSON run details: %s" % details)
if not all((d["transports"] is None) == (d["side"] == "plain") for d in details):
    errors.append("JSON: transports are the shunt side's only: %s" % details)
m = re.search(r"^shunt side, the server's connections \(library stats, 2 run\(s\)\): shm (\d+), fabric 0, kernel 0$", text, re.M)
if not m or int(m.group(1)) < 8:
    errors.append("the shunt side's stats do not show its connections on shm")
if "NO VERDICT" in text or "failed runs" in text:
    errors.append("a withheld verdict or a failed run where there is none")
for e in errors:
    print("FAIL: tool_ab: " + e)
sys.exit(1 if errors else 0)
PY

# The library's own account, per process: redis-benchmark's connections
# (4 clients, and one that reads the server's configuration) all on shm,
# from exactly $runs + 1 processes (the shunt runs and the warm-up; the
# plain ones had no library), and the server accepted them on shm.
conn_re='^shunt\[[0-9]+\] redis-benchmark: debug: conn fd=[0-9]+ role=client .* transport='
n_shm=$(cat "$tmp"/log/*.log | grep -Ec "${conn_re}shm reason=-\$" || true)
n_all=$(cat "$tmp"/log/*.log | grep -Ec "$conn_re" || true)
[[ $n_shm -ge $(((runs + 1) * 4)) && $n_shm -eq $n_all ]] ||
	fail "redis-benchmark connections: $n_shm on shm of $n_all (expected >= $(((runs + 1) * 4)), all)"
procs=$(grep -lE "$conn_re" "$tmp"/log/*.log | wc -l)
[[ $procs -eq $((runs + 1)) ]] || fail "redis-benchmark logged from $procs processes, expected $((runs + 1))"
n_srv=$(cat "$tmp"/log/*.log | grep -Ec '^shunt\[[0-9]+\] redis-server: debug: conn fd=[0-9]+ role=server .* transport=shm reason=-$' || true)
[[ $n_srv -eq $n_shm ]] || fail "redis-server accepted $n_srv connections on shm, the clients made $n_shm"
for side in plain shunt; do
	for r in 1 2; do
		grep -q 'requests completed' "$tmp/keep/client-$side-$r.txt" ||
			fail "--keep: no client output for $side run $r"
	done
	[[ -s "$tmp/keep/warmup-client-$side-1.txt" ]] || fail "--keep: no warm-up output ($side)"
done
echo "tool_ab: live redis A/B: table, JSON, CSV and the library's logs agree"

# ---- 2. nothing accelerated: no verdict -----------------------------------
rc=0
"$SHUNT" ab --runs 1 --warmup 0 --port "$port" --transport kernel --server "$redis_server" \
	--client "redis-benchmark -p $port -n 200 -c 2 -t get -q" --json "$tmp/k.json" \
	>"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[[ $rc -eq 0 ]] || fail "--transport kernel: exit $rc"
grep -q '^NO VERDICT: the shunt side took no accelerated connection (every one stayed on the kernel path)' "$tmp/out" ||
	fail "--transport kernel: no plain statement that nothing was accelerated"
grep -Eq '^shunt side, the server.s connections \(library stats, 1 run\(s\)\): shm 0, fabric 0, kernel [1-9][0-9]* \(rule-kernel [1-9]' "$tmp/out" ||
	fail "--transport kernel: the server's connections are not shown on the kernel path by rule"
grep -Eq '(better|worse|no significant|too few)' <(grep -E '^(GET|client|server)' "$tmp/out") &&
	fail "--transport kernel: a verdict was given"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["accelerated"] is False and d["settings"] == "default_transport=kernel", d
assert all(f["verdict"] == "none: not accelerated" for f in d["figures"]), d["figures"]
' "$tmp/k.json" || fail "--transport kernel: JSON"
echo "tool_ab: --transport kernel: every verdict withheld, said plainly"

# ---- 3. bad input fails before anything runs ------------------------------
mark=$tmp/server-ran
bad() { # EXPECTED-MESSAGE ARGS...: exit 2, the message, and no server started
	local want=$1 rc=0
	shift
	rm -f "$mark"
	"$SHUNT" ab --runs 1 --server "touch $mark; $redis_server" --client true "$@" >"$tmp/out" 2>&1 || rc=$?
	[[ $rc -eq 2 ]] || { cat "$tmp/out"; fail "ab $*: exit $rc, expected 2"; }
	grep -qF -- "$want" "$tmp/out" || { cat "$tmp/out"; fail "ab $*: no '$want'"; }
	[[ ! -e "$mark" ]] || fail "ab $*: the server ran before the error"
}
bad "the shunt side's settings: SHUNT_OPTIONS: item 1: unknown key 'spn_us'" --options spn_us=5
bad "bad value 'x' for spin_us" --options spin_us=x
bad "bad value 'warp' for default_transport" --transport warp
bad "--config $tmp/nonexistent.conf" --config "$tmp/nonexistent.conf"
printf 'spin_us = 5\nnosuchkey = 1\n' >"$tmp/bad.conf"
bad "$tmp/bad.conf:2: unknown key 'nosuchkey'" --config "$tmp/bad.conf"
bad "--cpus: expected two CPU numbers" --cpus 0
bad "--cpus: CPU 1023 is not one this process may run on" --cpus 0,1023
bad "--json $tmp/no/such/dir/x.json: cannot write there" --json "$tmp/no/such/dir/x.json"
bad "--runs: expected 1..100" --runs 0
bad "--warmup: expected 0..100" --warmup x
bad "unknown option '--bogus'" --bogus
echo "tool_ab: bad options and settings: exit 2, nothing started"

# ---- 4. a failed run is kept out, the rest count --------------------------
# The client fails on its 4th invocation (run 2, whichever side is first).
cat >"$tmp/flaky.sh" <<EOF
n=\$(cat "$tmp/count" 2>/dev/null || echo 0)
echo \$((n + 1)) >"$tmp/count"
echo "invocation \$n"
[ "\$n" -ne 3 ] || { echo "it broke here"; exit 7; }
EOF
rc=0
"$SHUNT" ab --runs 7 --warmup 0 --client "sh $tmp/flaky.sh" --json "$tmp/f.json" >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[[ $rc -eq 0 ]] || fail "one failed run of 7, 6 pairs left: exit $rc, expected 0"
grep -Eq '^  run 2, (plain|shunt): the client failed \(exit status 7\)$' "$tmp/out" || fail "the failed run is not reported"
grep -q '^    | it broke here$' "$tmp/out" || fail "the failed run's output is not shown"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
bad = [x for x in d["run_details"] if not x["ok"]]
assert d["complete_pairs"] == 6 and len(bad) == 1 and bad[0]["run"] == 2, d["run_details"]
assert "exit status 7" in bad[0]["error"] and "it broke here" in bad[0]["output_tail"], bad
w = next(f for f in d["figures"] if f["name"] == "client wall time (s)")
assert w["pairs"] == 6 and w["interval"] is not None and w["coverage"] > 0.95, w
assert w["verdict"] in ("better", "worse", "no significant difference", "none: not accelerated"), w
assert len(w["plain"]["values"]) == 7 and (w["plain"]["values"][1] is None) != (w["shunt"]["values"][1] is None), w
' "$tmp/f.json" || fail "the failed run in JSON"
rm -f "$tmp/count"
rc=0
"$SHUNT" ab --runs 3 --warmup 0 --client "sh $tmp/flaky.sh" >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { cat "$tmp/out"; fail "one failed run of 3: exit $rc, expected 1"; }
grep -q '^shunt ab: 2 of 3 runs succeeded on both sides; 3 needed$' "$tmp/out" || { cat "$tmp/out"; fail "no message for too few runs"; }
grep -q '^client wall time (s) ' "$tmp/out" || fail "the table is missing when runs failed"
echo "tool_ab: a failed run reported and kept out; exit status by the pairs left"

# ---- 5. CPU time: the server's while the client runs ------------------------
cat >"$tmp/cpusrv.py" <<'EOF'
import socket, sys, time
t = time.process_time()
while time.process_time() - t < 0.5:   # start-up work: not the client's doing
    pass
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
if sys.argv[2] == "busy":
    while True:
        pass
time.sleep(600)
EOF
for mode in idle busy; do
	"$SHUNT" ab --runs 1 --warmup 0 --port "$port" --server "exec python3 $tmp/cpusrv.py $port $mode" \
		--client 'sleep 1' --json "$tmp/cpu-$mode.json" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "CPU run ($mode)"; }
done
python3 -c '
import json, sys
idle, busy = (json.load(open(p))["run_details"] for p in sys.argv[1:3])
for d in idle:
    assert d["server_cpu_s"] < 0.25, ("the idle server`s start-up was counted", d)
    assert 0 <= d["client_cpu_s"] < d["wall_s"], d
for d in busy:
    assert d["server_cpu_s"] > 0, ("the busy server`s work was not counted", d)
    assert d["server_cpu_s"] <= d["wall_s"] * 1.2 + 0.05, ("more CPU than one thread can use", d)
' "$tmp/cpu-idle.json" "$tmp/cpu-busy.json" || fail "server CPU time"
echo "tool_ab: server CPU: start-up not counted, work during the client counted"

# --cpus A,B: the client on A, the server on B, on both sides.
last=$(($(nproc) - 1))
"$SHUNT" ab --runs 1 --warmup 0 --port "$port" --cpus "0,$last" --keep "$tmp/keep5" \
	--server "grep Cpus_allowed_list /proc/self/status; exec python3 $tmp/cpusrv.py $port idle" \
	--client 'grep Cpus_allowed_list /proc/self/status' >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--cpus"; }
grep -q "^pinning: server on CPU $last, client on CPU 0$" "$tmp/out" || fail "--cpus: no pinning line"
for side in plain shunt; do
	grep -q "^Cpus_allowed_list:.$last\$" "$tmp/keep5/server-$side-1.txt" || fail "--cpus: $side server not on CPU $last"
	grep -q '^Cpus_allowed_list:.0$' "$tmp/keep5/client-$side-1.txt" || fail "--cpus: $side client not on CPU 0"
done
echo "tool_ab: --cpus pins the server and the client"

# ---- 6. sockperf: --mps added; an overflow explained ------------------------
# A stand-in named sockperf prints its arguments and a recorded output.
mkdir "$tmp/bin"
cat >"$tmp/bin/sockperf" <<EOF
#!/bin/sh
echo "sockperf args: \$*"
case "\$*" in
*overflow*) cat "$fixtures/sockperf_seq_overflow.txt"; exit 6 ;;
*) cat "$fixtures/sockperf_pingpong.txt" ;;
esac
EOF
chmod +x "$tmp/bin/sockperf"
PATH=$tmp/bin:$PATH "$SHUNT" ab --runs 1 --warmup 0 --client 'sockperf ping-pong -i 127.0.0.1 -t 1' \
	--keep "$tmp/keep6" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "sockperf stand-in"; }
grep -q '^sockperf args: ping-pong --mps=10000000 -i 127.0.0.1 -t 1$' "$tmp/keep6/client-shunt-1.txt" ||
	fail "--mps=10000000 was not passed: $(head -n 1 "$tmp/keep6/client-shunt-1.txt")"
grep -q '^client:  sockperf ping-pong --mps=10000000 -i 127.0.0.1 -t 1$' "$tmp/out" || fail "the report does not show the client as run"
grep -q '(--mps=10000000 added by shunt ab: sockperf ping-pong sizes its message window' "$tmp/out" || fail "the report does not say why"
grep -q '^latency p50 (us, RTT/2) ' "$tmp/out" || fail "the recorded sockperf output was not read"
PATH=$tmp/bin:$PATH "$SHUNT" ab --runs 1 --warmup 0 --client 'sockperf pp --mps=max overflow' \
	>"$tmp/out" 2>&1 && fail "a sockperf overflow did not fail"
grep -q "^  run 1, plain: the client failed (exit status 6): sockperf's message-rate window overflowed .*pass a larger --mps, e.g. --mps=10000000$" "$tmp/out" ||
	{ cat "$tmp/out"; fail "the overflow is not explained"; }
grep -q 'sockperf args: pp --mps=max overflow' "$tmp/out" || fail "--mps was added though given"
echo "tool_ab: sockperf: --mps added when missing, overflow explained"

# ---- 7. the other error paths ------------------------------------------------
# A server that exits without listening: an error, at once, with its output.
rc=0
"$SHUNT" ab --runs 1 --warmup 0 --server 'echo no-listen-here; exit 3' --client true --ready-timeout 20 \
	>"$tmp/out2" 2>&1 || rc=$?
cat "$tmp/out2"
[[ $rc -eq 1 ]] || fail "a server that never listens: exit $rc, expected 1"
grep -q 'the server exited before it listened (exit status 3)' "$tmp/out2" || fail "no message for the dead server"
grep -q 'no-listen-here' "$tmp/out2" || fail "the server's output was not shown"

# --format names the program: other output is an error, not a silent table.
rc=0
"$SHUNT" ab --runs 1 --warmup 0 --client 'echo hello' --format wrk >"$tmp/out3" 2>&1 || rc=$?
cat "$tmp/out3"
[[ $rc -eq 1 ]] && grep -q "is not wrk output" "$tmp/out3" || fail "--format wrk on other output: exit $rc"

# No known format: wall time and CPU time, both sides.
"$SHUNT" ab --runs 1 --warmup 0 --client 'sleep 0.05' >"$tmp/out4" 2>&1 || fail "wall-time A/B failed"
grep -Eq '^client wall time \(s\) +0\.[0-9]+ +0\.[0-9]+ +[0-9.]+x ' "$tmp/out4" || { cat "$tmp/out4"; fail "no wall-time row"; }
grep -Eq '^client CPU \(s\) +[0-9.]+ +[0-9.]+ ' "$tmp/out4" || { cat "$tmp/out4"; fail "no CPU row"; }
echo "tool_ab: ok"
