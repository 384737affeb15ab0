#!/usr/bin/env bash
# shunt bench on a small setting: every row of the table is there with a
# figure in every column that measures it, the shunt-shm column was really
# on shm (the tool's check against the library's stats), the CSV has the
# documented columns and a row per run and per median, and the SVG is XML
# with the panels, axes and legend the picture needs.
#   SHUNT=build/tools/shunt bash tests/tools/tool_bench.sh
set -euo pipefail
: "${SHUNT:?set SHUNT to the shunt tool}"
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_RULES SHUNT_LOG SHUNT_LOG_FILE \
	SHUNT_DEFAULT_TRANSPORT SHUNT_ENABLE SHUNT_RUNDIR 2>/dev/null || true
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shunt-tool-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: tool_bench: $*"; exit 1; }

# TOOL_BENCH_PINNED=0: as users run it first, not pinned; else each side
# on a CPU of its own (where there are two).
cpus=()
[[ ${TOOL_BENCH_PINNED:-1} == 1 ]] && (($(nproc) >= 2)) && cpus=(--cpus 0,1)
rc=0
"$SHUNT" bench --rounds 1 --duration 0.1 --warmup 100 --sizes 64,512 --connects 200 \
	"${cpus[@]}" --csv "$tmp/b.csv" --plot "$tmp/b.svg" >"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/out" "$tmp/err"
[[ $rc -eq 0 ]] || fail "shunt bench exited with $rc"

python3 - "$tmp/out" "$tmp/b.csv" "$tmp/b.svg" "$(uname -r)" <<'PY' || fail "checks above"
import csv, re, sys, xml.etree.ElementTree as ET
out, csvf, svgf, release = sys.argv[1:]
text = open(out).read()
errors = []
def check(cond, msg):
    if not cond:
        errors.append(msg)

check(re.search(r"^machine: \d+ CPUs .*" + re.escape(release), text, re.M),
      "no machine line with the CPU count and kernel " + release)
cols = ["raw ring", "unix socket", "kernel TCP", "shunt-shm", "shunt-fabric"]
measured = cols[:4]
tables = text.split("\n\n")
med = next(t for t in tables if t.startswith("medians"))
rat = next(t for t in tables if t.startswith("ratio to kernel TCP"))
for t in (med, rat):
    head = t.splitlines()[0]
    for c in cols:
        check(c in head, "column %r missing in %r" % (c, head))
def rows(t):
    r = {}
    for line in t.splitlines()[1:]:
        label, vals = line[:36].strip(), line[36:].split()
        check(len(vals) == 5, "row %r: %d cells" % (label, len(vals)))
        r[label] = dict(zip(cols, vals))
    return r
mr, rr = rows(med), rows(rat)
want = []
for size in (64, 512):
    for p in ("p50", "p90", "p99", "p99.9", "max"):
        want.append(("ping-pong %d B %s (us)" % (size, p), True))
want += [("stream 65536 B writes (Gbit/s)", True), ("messages/s (64 B stream)", True),
         ("connections/s (connect+RTT+close)", False), ("connect+RTT+close p50 (us)", False)]
for label, ring in want:
    check(label in mr, "row %r missing" % label)
    if label not in mr:
        continue
    for c in measured:
        v = mr[label][c]
        if c == "raw ring" and not ring:
            check(v == "-", "%s / %s: %r, expected -" % (label, c, v))
            continue
        check(re.fullmatch(r"[0-9.]+", v) and float(v) > 0, "%s / %s: %r is not a figure" % (label, c, v))
    # the ratio table drops the unit, not the words of the rate rows
    rl = label if label.startswith(("messages/s", "connections/s")) else label.split(" (")[0]
    check(rl in rr, "ratio row %r missing" % rl)
    if rl in rr:
        check(rr[rl]["kernel TCP"] == "1.00x", "ratio of kernel TCP to itself: %r" % rr[rl]["kernel TCP"])
        v = rr[rl]["shunt-shm"]
        check(re.fullmatch(r"[0-9.]+x", v), "%s: shm ratio %r" % (rl, v))
check(re.search(r"^shunt-shm: transport confirmed from the library's stats in 5 run\(s\)$", text, re.M),
      "shm transport not confirmed in every run (2 ping-pongs, stream, message rate, connect)")
check(re.search(r"^shunt-fabric: (not measured: .+|transport confirmed .*)$", text, re.M),
      "no word on shunt-fabric")

rows_ = list(csv.reader(open(csvf)))
check(rows_[0] == ["round", "transport", "test", "size_bytes", "metric", "value", "unit"],
      "CSV header %r" % rows_[0])
body = rows_[1:]
for r in body:
    check(len(r) == 7, "CSV row %r" % r)
    float(r[5])
for c in measured:
    for rnd in ("1", "median"):
        n = sum(1 for r in body if r[0] == rnd and r[1] == c)
        # 10 latency figures; stream, msg/s; 2 connect figures except the ring
        check(n == (12 if c == "raw ring" else 14), "CSV: %d rows of %s round %s" % (n, c, rnd))
check(any(r[2:5] == ["pingpong", "512", "p999_us"] for r in body), "CSV: no 512 B p99.9 row")

ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(svgf).getroot()
check(root.tag == ns + "svg", "SVG root is %r" % root.tag)
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
for t in ["round-trip latency (\u00b5s, log scale)", "fraction of round trips \u2264 x",
          "throughput (Gbit/s)", "messages per second", "connections per second",
          "ping-pong 64 B: round-trip latency CDF (dot: median)",
          "ping-pong 512 B: round-trip latency CDF (dot: median)"] + measured:
    check(t in texts, "SVG: no text %r" % t)
check(len(list(root.iter(ns + "polyline"))) == 8, "SVG: expected 8 CDF lines (4 columns x 2 sizes)")
for p in root.iter(ns + "polyline"):
    pts = p.get("points").split()
    check(len(pts) >= 40, "SVG: a CDF line of %d points" % len(pts))
for e in errors:
    print("FAIL: tool_bench: " + e)
sys.exit(1 if errors else 0)
PY
echo "tool_bench: ok"
