#!/usr/bin/env bash
# shunt bench --netns on a tiny setting (needs root; SKIP otherwise): the
# tool builds two network namespaces joined by veth (198.18.0.0/15) with a
# shuntd each, runs kernel TCP and shunt-fabric across them (the free
# placement), and removes them.  Checked: every row has a figure in both columns, every fabric run
# was confirmed on fabric from the library's stats (fabric is only taken
# between hosts, so this also shows the runs crossed the pair), the table
# says it ran across namespaces, and no namespace, agent or veth is left.
#   SHUNT=build/tools/shunt bash tests/tools/tool_bench_netns.sh
set -euo pipefail
: "${SHUNT:?set SHUNT to the shunt tool}"
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_RULES SHUNT_LOG SHUNT_LOG_FILE \
	SHUNT_DEFAULT_TRANSPORT SHUNT_ENABLE SHUNT_RUNDIR 2>/dev/null || true
fail() { echo "FAIL: tool_bench_netns: $*"; exit 1; }
if [[ $(id -u) -ne 0 ]] || ! ip netns list >/dev/null 2>&1; then
	echo "SKIP: tool_bench_netns needs root to create network namespaces"
	exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shunt-tool-bench-netns.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

rc=0
# Not under timeout(1): its pid names the namespaces (ctest bounds the time).
"$SHUNT" bench --netns --fabric yes --only tcp,fabric --placement free --rounds 1 --confirm 0 \
	--duration 0.1 --warmup 100 --sizes 64 --connects 20 >"$tmp/out" 2>"$tmp/err" &
bpid=$!
# The namespaces exist while it runs (its pid names them).
for ((i = 0; i < 200; i++)); do
	ip netns list | grep -q "^shunt-bench-$bpid-b" && break
	kill -0 "$bpid" 2>/dev/null || break
	sleep 0.05
done
ip netns list | grep -q "^shunt-bench-$bpid-a" || seen=no
wait "$bpid" || rc=$?
cat "$tmp/out" "$tmp/err"
# 3: a row where fabric lost to kernel TCP (speed is not judged here)
[[ $rc -eq 0 || $rc -eq 3 ]] || fail "shunt bench --netns exited with $rc"
[[ ${seen:-yes} == yes ]] || fail "namespace shunt-bench-$bpid-a never seen while it ran"
if ip netns list | grep -q "^shunt-bench-$bpid-"; then
	fail "namespaces left behind: $(ip netns list | grep "^shunt-bench-$bpid-")"
fi
ip -o link | grep -q "sbv$((bpid % 1000000))[ab]" && fail "veth left behind"
pgrep -f "shunt-bench-$bpid" >/dev/null && fail "processes left in its namespaces"

python3 - "$tmp/out" <<'PY' || fail "checks above"
import re, sys
text = open(sys.argv[1]).read()
errors = []
def check(cond, msg):
    if not cond:
        errors.append(msg)
cols = ["raw ring", "unix socket", "kernel TCP", "shunt-shm", "shunt-fabric"]
med = next(t for t in text.split("\n\n") if t.startswith("medians"))
rows = {}
for line in med.splitlines()[1:]:
    rows[line[:42].strip()] = dict(zip(cols, line[42:].split()))
for label in ["ping-pong 64 B p50 (us)", "ping-pong 64 B p99.9 (us)", "ping-pong 64 B max (us)",
              "stream 65536 B writes (Gbit/s)", "messages/s (64 B stream)",
              "connections/s (connect+RTT+close)", "connect+RTT+close p50 (us)",
              "ping-pong 64 B CPU (us/RTT, both ends)", "idle connection CPU (us/s, both ends)"]:
    check(label in rows, "row %r missing" % label)
    for c in ("kernel TCP", "shunt-fabric"):
        v = rows.get(label, {}).get(c, "")
        check(re.fullmatch(r"[0-9.]+", v) and (float(v) > 0 or "CPU" in label),
              "%s / %s: %r is not a figure" % (label, c, v))
    for c in ("raw ring", "unix socket", "shunt-shm"):
        check(rows.get(label, {}).get(c) == "-", "%s / %s measured, not asked for" % (label, c))
check(re.search(r"^shunt-fabric: transport confirmed from the library's stats in 5 run\(s\)$", text, re.M),
      "fabric not confirmed in every run (ping-pong, stream, message rate, connect, idle)")
check(re.search(r"^regressions: (none|\d+ row)", text, re.M), "no regressions line (fabric is judged)")
check(re.search(r"^--netns: kernel TCP and shunt-fabric ran across two network namespaces .*198\.18\.0\.1 -> 198\.18\.0\.2", text, re.M),
      "no --netns line")
for e in errors:
    print("FAIL: tool_bench_netns: " + e)
sys.exit(1 if errors else 0)
PY
echo "tool_bench_netns: ok"
