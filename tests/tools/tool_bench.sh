#!/usr/bin/env bash
# shunt bench on a small setting, two placements per run (the two runs,
# tool_bench and tool_bench_unpinned, cover all four):
#   TOOL_BENCH_PINNED=1 (default)  --placement pinned,neighbour --cpus 0,1
#                                  (pinned is skipped, with the reason, on
#                                  one CPU)
#   TOOL_BENCH_PINNED=0            --placement free,oversub --pairs 3
# Checked: every row of every placement's table is there with a figure in
# every column that measures it, the CPU rows and the idle connection's
# CPU are non-negative figures, the shunt-shm column was really on shm in
# every run (the tool's check against the library's stats), REGRESSION
# marks only rows shunt lost by more than the margin and agrees with the
# exit status (0 or 3: speed is never judged here), the targets block is
# complete, the CSV has the documented columns and a row per figure, run
# and median, the SVG is XML with the panels, axes and legend the picture
# needs, and nothing the run started (servers, clients, the neighbour's
# busy loop) outlives it.  Bad options exit 2.
#   SHUNT=build/tools/shunt bash tests/tools/tool_bench.sh
set -euo pipefail
: "${SHUNT:?set SHUNT to the shunt tool}"
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_RULES SHUNT_LOG SHUNT_LOG_FILE \
	SHUNT_DEFAULT_TRANSPORT SHUNT_ENABLE SHUNT_RUNDIR 2>/dev/null || true
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shunt-tool-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: tool_bench: $*"; exit 1; }

for bad in "--placement bogus" "--placement free,free" "--placement ''" "--cpus 0,0" \
	"--cpus 1" "--pairs 0" "--pairs 100000" "--confirm 2" "--confirm -1" "--confirm 1.5"; do
	rc=0
	eval "\"\$SHUNT\" bench $bad" >"$tmp/out" 2>&1 || rc=$?
	[[ $rc -eq 2 ]] || fail "shunt bench $bad: exit status $rc, expected 2 ($(head -c 300 "$tmp/out"))"
	grep -q "^shunt bench: " "$tmp/out" || fail "shunt bench $bad: no message: $(cat "$tmp/out")"
done

# One CPU: the pinned placement cannot be set up, and says why; the others
# run.  Nothing at all to run is a failure.
if [[ ${TOOL_BENCH_PINNED:-1} == 1 ]] && command -v taskset >/dev/null; then
	rc=0
	taskset -c 0 "$SHUNT" bench --placement pinned,neighbour --only tcp --rounds 1 \
		--duration 0.05 --warmup 10 --sizes 64 --connects 10 >"$tmp/out" 2>&1 || rc=$?
	[[ $rc -eq 0 ]] || fail "one CPU: exit status $rc: $(cat "$tmp/out")"
	grep -q "^== placement pinned: skipped: needs two CPUs; this process may use 1 ==$" \
		"$tmp/out" || fail "one CPU: pinned not skipped with its reason: $(cat "$tmp/out")"
	grep -q "^ping-pong 64 B p50 (us)  *- *- *[0-9.][0-9.]* " "$tmp/out" ||
		fail "one CPU: neighbour not measured: $(cat "$tmp/out")"
	rc=0
	taskset -c 0 "$SHUNT" bench --placement pinned --only tcp >"$tmp/out" 2>&1 || rc=$?
	[[ $rc -eq 1 ]] || fail "one CPU, pinned only: exit status $rc, expected 1"
	grep -q "none of the placements asked for can be set up here" "$tmp/out" ||
		fail "one CPU, pinned only: no message: $(cat "$tmp/out")"
fi

if [[ ${TOOL_BENCH_PINNED:-1} == 1 ]]; then
	places=pinned,neighbour sizes=64,512 opts=()
	(($(nproc) >= 2)) && opts=(--cpus 0,1)
else
	places=free,oversub sizes=64 opts=(--pairs 3)
fi
# A session of its own: whatever the run starts stays in it (servers and
# clients make process groups, not sessions), so what is left is visible.
rc=0
setsid --wait bash -c 'echo $$ >"$0/sid"; exec "$@"' "$tmp" "$SHUNT" bench --rounds 1 --confirm 3 --duration 0.1 \
	--warmup 100 --sizes "$sizes" --connects 50 --placement "$places" "${opts[@]}" \
	--csv "$tmp/b.csv" --plot "$tmp/b.svg" >"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/out" "$tmp/err"
[[ $rc -eq 0 || $rc -eq 3 ]] || fail "shunt bench exited with $rc"
sid=$(cat "$tmp/sid")
for ((i = 0; i < 50; i++)); do
	left=$(ps -eo sid=,pid=,args= | awk -v s="$sid" '$1 == s' || true)
	[[ -z $left ]] && break
	sleep 0.1
done
[[ -z $left ]] || fail "processes of the run left behind: $left"

python3 - "$tmp/out" "$tmp/b.csv" "$tmp/b.svg" "$(uname -r)" "$rc" "$places" "$sizes" \
	"$(nproc)" <<'PY' || fail "checks above"
import csv, re, sys, xml.etree.ElementTree as ET
out, csvf, svgf, release, rc, places, sizes, ncpu = sys.argv[1:]
rc, places, sizes, ncpu = int(rc), places.split(","), [int(s) for s in sizes.split(",")], int(ncpu)
text = open(out).read()
errors = []
def check(cond, msg):
    if not cond:
        errors.append(msg)

check(re.search(r"^machine: \d+ CPUs .*" + re.escape(release), text, re.M),
      "no machine line with the CPU count and kernel " + release)
check(re.search(r"^load average \(1 minute\): [0-9.]+ at the start, [0-9.]+ at the end$", text, re.M),
      "no load average line")
cols = ["raw ring", "unix socket", "kernel TCP", "shunt-shm", "shunt-fabric"]
measured = cols[:4]
W = 42

# the placements: each a block "== placement NAME: ... ==" up to the next
blocks = re.split(r"^(?=== placement )", text, flags=re.M)
run = []
for p in places:
    b = next((x for x in blocks if x.startswith("== placement %s:" % p)), None)
    check(b is not None, "no block for placement %s" % p)
    if b is None:
        continue
    if b.startswith("== placement %s: skipped: " % p):
        check(p == "pinned" and ncpu < 2, "placement %s skipped: %s" % (p, b.splitlines()[0]))
        continue
    run.append((p, b))

want = []  # (label, ratio label, measured by the ring, CPU row)
for size in sizes:
    for q in ("p50", "p90", "p99", "p99.9", "max"):
        want.append(("ping-pong %d B %s (us)" % (size, q), "ping-pong %d B %s" % (size, q), True, False))
    want.append(("ping-pong %d B round trips/s" % size, "ping-pong %d B round trips/s" % size, True, False))
    want.append(("ping-pong %d B CPU (us/RTT, both ends)" % size, "ping-pong %d B CPU" % size, True, True))
small = min(sizes)
want += [("stream 65536 B writes (Gbit/s)", "stream 65536 B writes", True, False),
         ("stream CPU (us/MB, both ends)", "stream CPU", True, True),
         ("messages/s (%d B stream)" % small, "messages/s (%d B stream)" % small, True, False),
         ("messages CPU (ns/msg, both ends)", "messages CPU", True, True),
         ("connections/s (connect+RTT+close)", "connections/s (connect+RTT+close)", False, False),
         ("connect+RTT+close p50 (us)", "connect+RTT+close p50", False, False),
         ("connection CPU (us/conn, both ends)", "connection CPU", False, True),
         ("idle connection CPU (us/s, both ends)", "idle connection CPU", True, True)]
judged = re.compile(r"(p50|p90|p99|p99\.9|round trips/s|stream 65536 B writes)$|^(messages|connections)/s \(")

marked = 0
for p, b in run:
    parts = b.split("\n\n")
    med = next((t for t in parts if t.startswith("medians")), "")
    rat = next((t for t in parts if t.startswith("ratio to kernel TCP")), "")
    check(med and rat, "%s: no medians or ratio table" % p)
    if p == "oversub":
        check("(all pairs at once: latencies are the median of the pairs', rates their sum" in b,
              "oversub: no word on how pairs combine")
    def rows(t):
        r = {}
        for line in t.splitlines()[1:]:
            label, rest = line[:W].strip(), line[W:]
            vals = rest.split()[:5]
            check(len(vals) == 5, "%s: row %r: %d cells" % (p, label, len(vals)))
            r[label] = (dict(zip(cols, vals)), rest)
        return r
    mr, rr = rows(med), rows(rat)
    for label, rlabel, ring, cpu in want:
        check(label in mr, "%s: row %r missing" % (p, label))
        check(rlabel in rr, "%s: ratio row %r missing" % (p, rlabel))
        if label not in mr or rlabel not in rr:
            continue
        for c in measured:
            v = mr[label][0][c]
            if c == "raw ring" and not ring:
                check(v == "-", "%s: %s / %s: %r, expected -" % (p, label, c, v))
                continue
            check(re.fullmatch(r"[0-9.]+", v) is not None and (cpu or float(v) > 0),
                  "%s: %s / %s: %r is not a figure" % (p, label, c, v))
        check(mr[label][0]["shunt-fabric"] == "-" or "shunt-fabric: transport confirmed" in text,
              "%s: %s: a fabric figure, but fabric not confirmed" % (p, label))
        cells, rest = rr[rlabel]
        if rlabel.startswith("idle"):
            check(all(cells[c] == "-" for c in cols), "%s: idle has no ratio: %r" % (p, cells))
            continue
        check(cells["kernel TCP"] == "1.00x", "%s: kernel TCP to itself: %r" % (p, cells["kernel TCP"]))
        shm = cells["shunt-shm"]
        check(re.fullmatch(r"[0-9.]+x", shm) is not None, "%s: %s: shm ratio %r" % (p, rlabel, shm))
        if "REGRESSION" in rest:
            marked += 1
            check(judged.search(rlabel) is not None, "%s: %s marked, but not a judged row" % (p, rlabel))
            check(rest.rstrip().endswith("REGRESSION shunt-shm"), "%s: mark %r" % (p, rest))
            check(float(shm[:-1]) <= 0.95, "%s: %s marked at ratio %s" % (p, rlabel, shm))  # shown rounded
        elif judged.search(rlabel) and re.fullmatch(r"[0-9.]+x", shm):
            pass  # not marked: better, within the margin, or rounds overlapping

m = re.search(r"^regressions: (none|(\d+) row\(s\) where shunt is worse than kernel TCP:)$", text, re.M)
check(m is not None, "no regressions line")
if m:
    n = int(m.group(2) or 0)
    check(n == marked, "regressions: %d listed, %d marked in the tables" % (n, marked))
check((rc == 3) == (marked > 0), "exit status %d with %d row(s) marked" % (rc, marked))
t = text.split("targets (informative, not in the exit status):\n", 1)
check(len(t) == 2, "no targets block")
if len(t) == 2:
    lines = t[1].splitlines()[:8]
    check(all(l.startswith("  ") for l in lines), "targets: %r" % lines)
    for l in lines:
        check(re.search(r"\): (met|not met)$|: not checked: .+$", l) is not None, "target line %r" % l)
# a suspect row's test ran again, --confirm 3 rounds of kernel TCP and
# shunt-shm: the CSV's rounds c1 to c3
conf = {(r[0], r[1], r[3], r[4]) for r in csv.reader(open(csvf))
        if r[1][:1] == "c" and r[1][1:].isdigit() and r[2] == "shunt-shm"}
check(all(k[1] in ("c1", "c2", "c3") for k in conf), "CSV: confirmation rounds %r" % sorted(conf))
for k in conf:
    for c in ("c1", "c2", "c3"):
        check((k[0], c, k[2], k[3]) in conf, "CSV: confirmation %r without round %s" % (k, c))
    check(any(r[0] == k[0] and r[1] == k[1] and r[2] == "kernel TCP" and r[3] == k[2]
              for r in csv.reader(open(csvf))), "CSV: confirmation %r without kernel TCP" % (k,))
for m_ in re.finditer(r"^  not confirmed: (\w+): (.+): shunt-shm [0-9.]+x in the 1 rounds, not worse in 3 more$",
                      text, re.M):
    check(any(k[0] == m_.group(1) for k in conf), "not confirmed without confirmation rounds: %r" % m_.group(0))
nruns = len(run) * (len(sizes) + 4) + len({(k[0], k[1], k[2], k[3] if k[2] == "pingpong" else "")
                                            for k in conf})
check(re.search(r"^shunt-shm: transport confirmed from the library's stats in %d run\(s\)$" % nruns, text, re.M),
      "shm transport not confirmed in every run (%d: ping-pongs, stream, message rate, connect, idle)" % nruns)
check(re.search(r"^shunt-fabric: (not measured: .+|transport confirmed .*)$", text, re.M),
      "no word on shunt-fabric")

rows_ = list(csv.reader(open(csvf)))
head = ["placement", "round", "transport", "test", "size_bytes", "metric", "value", "unit", "regression", "note"]
check(rows_[0] == head, "CSV header %r" % rows_[0])
body = rows_[1:]
for r in body:
    check(len(r) == 10, "CSV row %r" % r)
mach = [r for r in body if r[3] == "machine"]
check([r[5] for r in mach] == ["load_average_start", "load_average_end"], "CSV machine rows %r" % mach)
check(mach and release in mach[0][9], "CSV: the machine line")
ns = len(sizes)
for p in places:
    pr = [r for r in body if r[0] == p and r[3] == "placement"]
    check(len(pr) == 1, "CSV: placement row of %s: %r" % (p, pr))
    if pr and pr[0][5] == "skipped":
        continue
    if pr and p == "oversub":
        check(pr[0][6] == "3", "CSV: oversub pairs %r" % pr[0])
    for c in measured:
        for rnd in ("1", "median"):
            got = [r for r in body if r[0] == p and r[1] == rnd and r[2] == c and r[3] != "target"]
            # per size: 5 latencies, round trips/s and CPU (both, client,
            # server); stream, message rate: a figure and its CPU; connect:
            # 2 figures and CPU; idle: both, client, server.  The ring has
            # no connection and one CPU figure per test.
            n = 7 * ns + 7 if c == "raw ring" else 9 * ns + 16
            check(len(got) == n, "CSV: %d rows of %s %s round %s, expected %d" % (len(got), p, c, rnd, n))
            for r in got:
                v = float(r[6])
                if r[5].startswith(("cpu_", "idle_")):
                    check(v >= 0, "CSV: negative CPU %r" % r)
                reg = r[8]
                if rnd == "median" and c == "shunt-shm":
                    want_reg = r[5] in ("p50_us", "p90_us", "p99_us", "p999_us", "round_trips_per_s",
                                        "throughput_gbps", "messages_per_s", "connections_per_s",
                                        "connect_p50_us")
                    check(reg in (("yes", "no") if want_reg else ("",)), "CSV: regression %r in %r" % (reg, r))
                else:
                    check(reg == "", "CSV: regression %r in %r" % (reg, r))
    check(any(r[0] == p and r[2] == "shunt-shm" and r[5] == "idle_cpu_us_per_s_server" for r in body),
          "CSV: no idle CPU of the shm server in %s" % p)
check(sum(1 for r in body if r[3] == "target") == 18, "CSV: not 18 target rows (8, and 10 of sizes against the raw ring)")
check(sum(1 for r in body if r[8] == "yes") == marked, "CSV: regression=yes rows != rows marked")
check(any(r[3:6] == ["pingpong", str(sizes[-1]), "p999_us"] for r in body), "CSV: no %d B p99.9 row" % sizes[-1])

ns_ = "{http://www.w3.org/2000/svg}"
root = ET.parse(svgf).getroot()
check(root.tag == ns_ + "svg", "SVG root is %r" % root.tag)
texts = ["".join(t.itertext()) for t in root.iter(ns_ + "text")]
first = run[0][0] if run else places[0]
check(any(t.startswith("shunt bench, placement %s: medians of 1 round(s)" % first) for t in texts),
      "SVG: no title naming placement %s" % first)
for t in ["round-trip latency (\u00b5s, log scale)", "fraction of round trips \u2264 x",
          "throughput (Gbit/s)", "messages per second", "connections per second"] + \
         ["ping-pong %d B: round-trip latency CDF (dot: median)" % s for s in sizes] + measured:
    check(t in texts, "SVG: no text %r" % t)
check(len(list(root.iter(ns_ + "polyline"))) == 4 * ns, "SVG: expected %d CDF lines (4 columns x %d sizes)" % (4 * ns, ns))
for pl in root.iter(ns_ + "polyline"):
    pts = pl.get("points").split()
    check(len(pts) >= 40, "SVG: a CDF line of %d points" % len(pts))
for e in errors:
    print("FAIL: tool_bench: " + e)
sys.exit(1 if errors else 0)
PY
echo "tool_bench: ok"
