#!/usr/bin/env bash
# shunt stat and the exit summary line, checked against known traffic.
#
# stat_hold (tests/progs) opens two connections between a server and a client
# process, both under shunt: one on shm, one on the kernel path (a client
# rule forces it; the server then finds no offer), with known byte counts
# each way, and keeps them open.  Then:
#   * shunt stat and shunt stat --json (parsed with python3's json) show, per
#     connection, the transport, reason, and exactly the bytes and calls each
#     program says it moved; per-process totals agree;
#   * the shared memory each holds for rings (ring_size 256k): the client
#     reserved one slot (4096 + 2 x ring) for its one shm connection and
#     maps nothing else; the server reserved nothing and maps the client's
#     arena (whole slots of that size);
#   * -p and -n keep only the chosen process; bad arguments fail with 2;
#   * -i 2 -c 2 --json: the second sample's rates times its interval are the
#     bytes the client sent in between (it is told to send 1 MB after the
#     first sample, and says when it is done);
#   * a process killed with SIGKILL leaves a stale file: shunt stat ignores
#     it and removes it; the survivor's totals keep its closed connections;
#   * at exit with log=info each process prints one summary line with the
#     same numbers (client exits with its connections still open, server
#     after closing them); a forked child that exits and one that execs
#     print none (the exec'd program must not repeat the parent's totals);
#     a child that sends on an inherited connection prints its own bytes only.
# Synchronisation is by fifos: the programs print "ready"/"sent" lines the
# test reads, and exit when the test closes their stdin.
source "$(dirname "$0")/lib.sh"

E2E_TRANSPORT=""          # this test chooses its own transports
need python3
MODE=shunt
# A known ring size: each shm connection reserves a slot of a header page
# and two rings in its client's arena.
RING=262144
SLOT=$((4096 + 2 * RING))
printf 'ring_size = 256k\n' >"$TMP/ring.conf"
SHUNT_CONF=$TMP/ring.conf

# The traffic stat_hold makes on connection I (see stat_hold.c).
c2s() { echo $((1000 * ($1 + 1) * 7 + 13)); }
s2c() { echo $((1000 * ($1 + 1) * 3 + 5)); }

stat_cmd() { env "SHUNT_RUNDIR=$RUNDIR" "$SHUNT" stat "$@"; }

# start_pair [CLIENT_ARGS...]: statsrv and statcli (symlinks to stat_hold, so
# the two have their own program names) connected on two ports; the kernel
# one (PB) by a client rule.  fds: 3/4 server stdin/stdout, 5/6 client's.
start_pair() {
	ln -sf "$PROGS/stat_hold" "$PDIR/statsrv"
	ln -sf "$PROGS/stat_hold" "$PDIR/statcli"
	local f
	for f in sin sout cin cout; do
		rm -f "$PDIR/$f"
		mkfifo -m 600 "$PDIR/$f"
	done
	# Opened read-write here, so the programs' opens never block; the
	# programs get their own read-only / write-only ends.
	exec 3<>"$PDIR/sin" 4<>"$PDIR/sout" 5<>"$PDIR/cin" 6<>"$PDIR/cout"
	_prefix shunt "$E2E_BG_LIFETIME"
	"${PFX[@]}" "$PDIR/statsrv" server --port-file "$PDIR/ports" --ports 2 \
		<"$PDIR/sin" >"$PDIR/sout" 2>"$PDIR/server.err" 3>&- 4>&- 5>&- 6>&- &
	SRV_BG=$!
	BG_PIDS+=("$SRV_BG")
	wait_file "$PDIR/ports" "$SRV_BG"
	PORTS=$(cat "$PDIR/ports")
	PA=${PORTS%,*}
	PB=${PORTS#*,}
	SHUNT_ARGS=(--options "rule=kernel client * 127.0.0.1:$PB")
	_prefix shunt "$E2E_BG_LIFETIME"
	unset SHUNT_ARGS
	"${PFX[@]}" "$PDIR/statcli" client --port "$PORTS" "$@" \
		<"$PDIR/cin" >"$PDIR/cout" 2>"$PDIR/client.err" 3>&- 4>&- 5>&- 6>&- &
	CLI_BG=$!
	BG_PIDS+=("$CLI_BG")
	# Each prints its counts, then "ready".
	read_until_ready 4 "$PDIR/server.counts"
	read_until_ready 6 "$PDIR/client.counts"
	SRV_PID=$(bg_prog_pid "$SRV_BG")
	CLI_PID=$(bg_prog_pid "$CLI_BG")
	[[ -n "$SRV_PID" && -n "$CLI_PID" ]] || die "no pids for the programs"
}

# read_until_ready FD FILE: lines from FD into FILE up to "ready".
read_until_ready() {
	local line
	: >"$2"
	while :; do
		read -r -t 30 -u "$1" line || die "no 'ready' from fd $1 ($(cat "$2"))"
		[[ "$line" == ready ]] && return 0
		echo "$line" >>"$2"
	done
}

# ---------------------------------------------------------------------------
phase live
chmod 700 "$RUNDIR"
start_pair

# The programs' own view of what they moved, and the connections' ports.
cat >"$PDIR/check.py" <<'EOF'
import json, sys

def counts(path):
    out = {}
    for line in open(path):
        f = line.split()
        kv = dict(x.split("=") for x in f[2:])
        out[int(f[1])] = {k: int(v) for k, v in kv.items()}
    return out

def fail(msg):
    print("FAIL: e2e_stat: " + msg)
    sys.exit(1)

def check_sample(doc, srv_pid, cli_pid, pa, pb, srv, cli, srv_reason, extra_out=0):
    procs = {p["pid"]: p for p in doc["processes"]}
    for pid, name in ((srv_pid, "statsrv"), (cli_pid, "statcli")):
        if pid not in procs:
            fail("pid %d (%s) not in shunt stat --json: %s" % (pid, name, sorted(procs)))
        if procs[pid]["program"] != name:
            fail("pid %d program %r, expected %r" % (pid, procs[pid]["program"], name))
    want = {
        # (pid, port on our side or the peer's) -> transport, reason, counts
        "cli-shm": (cli_pid, "peer", pa, "shm", None, cli[0], "client"),
        "cli-kernel": (cli_pid, "peer", pb, "kernel", "rule-kernel", cli[1], "client"),
        "srv-shm": (srv_pid, "local", pa, "shm", None, srv[0], "server"),
        "srv-kernel": (srv_pid, "local", pb, "kernel", srv_reason, srv[1], "server"),
    }
    for tag, (pid, side, port, tp, reason, c, role) in want.items():
        conns = [x for x in procs[pid]["connections"] if x[side].endswith(":%d" % port)]
        if len(conns) != 1:
            fail("%s: %d connections with %s port %d" % (tag, len(conns), side, port))
        x = conns[0]
        out = c["out"] + (extra_out if tag == "cli-shm" else 0)
        got = (x["transport"], x["reason"], x["role"], x["bytes_out"], x["bytes_in"],
               x["msgs_in"], x["state"])
        exp = (tp, reason, role, out, c["in"], c["incalls"], "open")
        if extra_out and tag == "srv-shm":
            # The server drains what the client sent after "ready": by
            # this sample some or all of it.
            if not c["in"] <= x["bytes_in"] <= c["in"] + extra_out:
                fail("srv-shm: bytes_in %d not within [%d, %d]"
                     % (x["bytes_in"], c["in"], c["in"] + extra_out))
            got = got[:4] + got[6:]
            exp = exp[:4] + exp[6:]
        if got != exp:
            fail("%s: (transport, reason, role, bytes_out, bytes_in, msgs_in, state) = %s, expected %s"
                 % (tag, got, exp))
        if extra_out == 0 and x["msgs_out"] != c["outcalls"]:
            fail("%s: msgs_out %d, program made %d write calls" % (tag, x["msgs_out"], c["outcalls"]))
    for pid, fb, mine in ((cli_pid, {"rule-kernel": 1}, cli), (srv_pid, {srv_reason: 1}, srv)):
        t = procs[pid]["totals"]
        if t["connections"] != {"shm": 1, "fabric": 0, "kernel": 1} or t["open"] != 2:
            fail("pid %d totals %s" % (pid, t))
        if t["fallbacks"] != fb:
            fail("pid %d fallbacks %s, expected %s" % (pid, t["fallbacks"], fb))
        bout = sum(c["out"] for c in mine.values()) + (extra_out if pid == cli_pid else 0)
        bin_ = sum(c["in"] for c in mine.values())
        if pid == cli_pid and (t["bytes_out"], t["bytes_in"]) != (bout, bin_):
            fail("pid %d total bytes out/in %s, expected %s"
                 % (pid, (t["bytes_out"], t["bytes_in"]), (bout, bin_)))
    return procs

if __name__ == "__main__":
    mode = sys.argv[1]
    srv_pid, cli_pid, pa, pb = map(int, sys.argv[2:6])
    srv, cli = counts(sys.argv[6]), counts(sys.argv[7])
    srv_reason = sys.argv[8]
    if mode == "one":
        doc = json.load(open(sys.argv[9]))
        check_sample(doc, srv_pid, cli_pid, pa, pb, srv, cli, srv_reason)
    elif mode == "filter":
        doc = json.load(open(sys.argv[9]))
        want = [int(x) for x in sys.argv[10].split(",") if x]
        got = [p["pid"] for p in doc["processes"]]
        if got != want:
            fail("filter %s: pids %s, expected %s" % (sys.argv[11], got, want))
    elif mode == "rates":
        lines = open(sys.argv[9]).read().splitlines()
        if len(lines) != 2:
            fail("-i 2 -c 2 --json gave %d lines" % len(lines))
        a, b = json.loads(lines[0]), json.loads(lines[1])
        sent = int(sys.argv[10])
        check_sample(a, srv_pid, cli_pid, pa, pb, srv, cli, srv_reason)
        if (a["sample"], b["sample"]) != (1, 2):
            fail("sample numbers %s %s" % (a["sample"], b["sample"]))
        pb_ = check_sample(b, srv_pid, cli_pid, pa, pb, srv, cli, srv_reason, extra_out=sent)
        x = [c for c in pb_[cli_pid]["connections"] if c["peer"].endswith(":%d" % pa)][0]
        r = x["rates"]
        if not r or not (1.5 < r["seconds"] < 4):
            fail("rates of the second sample: %s" % r)
        if abs(r["bytes_out"] * r["seconds"] - sent) > 1e-6 * sent + 1:
            fail("rate %.3f B/s over %.6f s is not the %d bytes sent" % (r["bytes_out"], r["seconds"], sent))
        if r["bytes_in"] != 0:
            fail("bytes_in rate %s, nothing was received" % r["bytes_in"])
        for y in pb_[cli_pid]["connections"]:
            if y is not x and (y.get("rates") or {}).get("bytes_out", 1) != 0:
                fail("idle connection %s has rates %s" % (y["peer"], y.get("rates")))
    elif mode == "stale":
        doc = json.load(open(sys.argv[9]))
        procs = {p["pid"]: p for p in doc["processes"]}
        if cli_pid in procs:
            fail("killed pid %d still listed" % cli_pid)
        if doc["stale_removed"] != 1:
            fail("stale_removed %s, expected 1" % doc["stale_removed"])
        t = procs[srv_pid]["totals"]
        # The server saw EOF and closed both: closed totals keep them.
        if t["open"] != 0 or t["connections"] != {"shm": 1, "fabric": 0, "kernel": 1}:
            fail("server totals after its peer died: %s" % t)
        if procs[srv_pid]["connections"]:
            fail("server still lists connections: %s" % procs[srv_pid]["connections"])
        if t["bytes_out"] != sum(c["out"] for c in srv.values()):
            fail("server closed bytes_out %d, expected %d" % (t["bytes_out"], sum(c["out"] for c in srv.values())))
        want_in = sum(c["in"] for c in srv.values()) + int(sys.argv[10])
        if t["bytes_in"] != want_in:
            fail("server closed bytes_in %d, expected %d" % (t["bytes_in"], want_in))
    print("ok " + mode)
EOF

# The reason the server side logged for the kernel connection (no offer came).
SRV_REASON=$(log_lines "^shunt\[$SRV_PID\] .*conn fd=[0-9]+ role=server .* transport=kernel reason=" |
	sed -n 's/.* reason=\([a-z-]*\)$/\1/p' | head -n 1)
[[ -n "$SRV_REASON" ]] || die "no server decision line for the kernel connection"
ARGS=("$SRV_PID" "$CLI_PID" "$PA" "$PB" "$PDIR/server.counts" "$PDIR/client.counts" "$SRV_REASON")

# JSON: every connection, exact counts.
stat_cmd --json >"$PDIR/stat.json" || die "shunt stat --json failed"
python3 "$PDIR/check.py" one "${ARGS[@]}" "$PDIR/stat.json" || die "shunt stat --json is wrong"

# Ring memory: the client made the one shm connection's slot, the server
# maps the client's arena.
python3 - "$PDIR/stat.json" "$SRV_PID" "$CLI_PID" "$SLOT" <<'PY' || die "ring memory in shunt stat --json is wrong"
import json, sys
doc = json.load(open(sys.argv[1]))
srv, cli, slot = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
procs = {p["pid"]: p["rings"] for p in doc["processes"]}
if procs[cli] != {"reserved_bytes": slot, "mapped_bytes": 0}:
    sys.exit("FAIL: e2e_stat: client rings %s, expected one slot of %d reserved, nothing mapped"
             % (procs[cli], slot))
s = procs[srv]
if s["reserved_bytes"] != 0 or s["mapped_bytes"] < slot or s["mapped_bytes"] % slot:
    sys.exit("FAIL: e2e_stat: server rings %s, expected nothing reserved and whole slots "
             "of %d mapped" % (s, slot))
PY

# Text: the same numbers in the columns.
stat_cmd >"$PDIR/stat.txt" || die "shunt stat failed"
assert_eq "$(head -n 1 "$PDIR/stat.txt")" "# rundir $RUNDIR" "the rundir read, named first"
sed -n 2p "$PDIR/stat.txt" | grep -q '^PID .*PROGRAM .*LOCAL .*PEER .*TRANS .*BYTES_IN .*BYTES_OUT .*MSGS_IN .*MSGS_OUT .*REASON .*SPIN% .*SLEEPS' ||
	die "no header line: $(sed -n 2p "$PDIR/stat.txt")"
text_line() { # PID LOCAL_PORT -> fields: transport state bytes_in bytes_out reason
	awk -v pid="$1" -v lp=":$2" '$1 == pid && substr($3, length($3) - length(lp) + 1) == lp {print $5, $6, $7, $8, $11}' "$PDIR/stat.txt"
}
LPORT_CLI_A=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([c["local"].rsplit(":",1)[1] for p in d["processes"] if p["pid"]==int(sys.argv[2]) for c in p["connections"] if c["peer"].endswith(":"+sys.argv[3])][0])' "$PDIR/stat.json" "$CLI_PID" "$PA")
assert_eq "$(text_line "$SRV_PID" "$PA")" "shm open $(c2s 0) $(s2c 0) -"
assert_eq "$(text_line "$SRV_PID" "$PB")" "kernel open $(c2s 1) $(s2c 1) $SRV_REASON"
assert_eq "$(text_line "$CLI_PID" "$LPORT_CLI_A")" "shm open $(s2c 0) $(c2s 0) -"
grep -qE "^  total $CLI_PID statcli: connections shm=1 fabric=0 kernel=1 \(open 2\) bytes in=$(($(s2c 0) + $(s2c 1))) out=$(($(c2s 0) + $(c2s 1))) .* rings reserved=$SLOT mapped=0 fallbacks rule-kernel=1$" "$PDIR/stat.txt" ||
	die "client totals line wrong: $(grep "total $CLI_PID" "$PDIR/stat.txt")"
grep -qE "^  total $SRV_PID statsrv: .* rings reserved=0 mapped=[1-9][0-9]* fallbacks " "$PDIR/stat.txt" ||
	die "server totals line: no ring memory: $(grep "total $SRV_PID" "$PDIR/stat.txt")"
note "stat and stat --json: transports, reasons and byte counts as sent; ring memory: the client's slot ($SLOT bytes reserved), the server's mapping"

# Filters.
stat_cmd --json -p "$CLI_PID" >"$PDIR/p.json" || die "stat -p failed"
python3 "$PDIR/check.py" filter "${ARGS[@]}" "$PDIR/p.json" "$CLI_PID" "-p" || die "-p"
"$SHUNT" stat --rundir "$RUNDIR" --json -n statsrv >"$PDIR/n.json" || die "stat --rundir -n failed"
python3 "$PDIR/check.py" filter "${ARGS[@]}" "$PDIR/n.json" "$SRV_PID" "-n statsrv" || die "-n"
stat_cmd --json -n 'stat*' >"$PDIR/n2.json" || die "stat -n glob failed"
python3 "$PDIR/check.py" filter "${ARGS[@]}" "$PDIR/n2.json" \
	"$(printf '%s\n' "$SRV_PID" "$CLI_PID" | sort -n | paste -sd,)" "-n stat*" || die "-n glob"
stat_cmd --json -n nosuchprog >"$PDIR/n3.json" || die "stat -n nosuchprog failed"
python3 "$PDIR/check.py" filter "${ARGS[@]}" "$PDIR/n3.json" "" "-n nosuchprog" || die "-n none"
stat_cmd -p "$CLI_PID" | awk -v pid="$CLI_PID" '!/^(# |PID |  total )/ && $1 != pid {bad = 1} END {exit bad}' ||
	die "stat -p $CLI_PID shows other processes"
# Nothing to show is said, never a bare header; a -p that finds nothing is
# an error: no such process, or one without shunt counters (this shell).
stat_cmd -n nosuchprog >"$PDIR/none.txt" || die "stat -n nosuchprog failed"
assert_eq "$(cat "$PDIR/none.txt")" "# rundir $RUNDIR
# no process named 'nosuchprog' uses shunt in $RUNDIR" "stat -n of nothing"
mkdir -m 700 "$PDIR/emptyrun"
"$SHUNT" stat --rundir "$PDIR/emptyrun" >"$PDIR/none.txt" || die "stat of an empty rundir failed"
assert_eq "$(tail -n 1 "$PDIR/none.txt")" "# no process uses shunt in $PDIR/emptyrun" "stat of an empty rundir"
nopid() {
	local rc=0 msg
	msg=$(stat_cmd "$@" 2>&1 >/dev/null) || rc=$?
	[[ $rc -eq 1 ]] || die "shunt stat $*: exit $rc, expected 1"
	grep -q "^shunt stat: $EXPECT" <<<"$msg" || die "shunt stat $*: message '$msg'"
}
EXPECT="no process 2147483646\$" nopid -p 2147483646
EXPECT="process $$ has no shunt counters in $RUNDIR" nopid -p $$
EXPECT="process $$ has no shunt counters" nopid -p $$ --json

# -l: the listener registry.  The server listens on PA and PB (127.0.0.1):
# both entries live, held by the server's pid; the client holds none.
stat_cmd -l --json >"$PDIR/l.json" || die "shunt stat -l --json failed"
python3 - "$PDIR/l.json" "$RUNDIR" "$SRV_PID" "$PA" "$PB" <<'PY' || die "shunt stat -l --json is wrong"
import json, sys
doc = json.load(open(sys.argv[1]))
rundir, srv, pa, pb = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ls = {l["port"]: l for l in doc["listeners"]}
if doc["rundir"] != rundir or sorted(ls) != sorted([pa, pb]):
    sys.exit("FAIL: e2e_stat: -l: rundir %s, ports %s" % (doc["rundir"], sorted(ls)))
for port in (pa, pb):
    l = ls[port]
    want = ("127.0.0.1:%d" % port, "127.0.0.1", "netns", "live", [{"pid": srv, "program": "statsrv"}])
    got = (l["local"], l["address"], l["scope"], l["state"], l["processes"])
    if got != want or not isinstance(l["netns"], int):
        sys.exit("FAIL: e2e_stat: -l port %d: %s, expected %s" % (port, got, want))
PY
stat_cmd -l -p "$SRV_PID" >"$PDIR/l.txt" || die "shunt stat -l -p failed"
grep -Eq "^127\.0\.0\.1:$PA +netns:[0-9]+ +[^ ]+ +live +$SRV_PID/statsrv\$" "$PDIR/l.txt" ||
	die "shunt stat -l -p: $(cat "$PDIR/l.txt")"
EXPECT="process $CLI_PID holds no listener" nopid -l -p "$CLI_PID"
note "the rundir named, nothing found said, -p of nothing an error; -l lists the registry"

# Bad arguments: exit status 2 and a message naming the problem.
bad_arg() {
	local rc=0 msg
	msg=$(stat_cmd "$@" 2>&1 >/dev/null) || rc=$?
	[[ $rc -eq 2 ]] || die "shunt stat $*: exit $rc, expected 2"
	grep -q "^shunt stat: $EXPECT" <<<"$msg" || die "shunt stat $*: message '$msg'"
}
EXPECT="-p needs a process id" bad_arg -p abc
EXPECT="-p needs a process id" bad_arg -p 0
EXPECT="-i needs a number of seconds" bad_arg -i 0
EXPECT="-i needs a number of seconds" bad_arg -i x
EXPECT="-c needs -i" bad_arg -c 3
EXPECT="-c needs a count" bad_arg -i 1 -c 0
EXPECT="unknown option" bad_arg --bogus
EXPECT="unexpected 'extra'" bad_arg extra
EXPECT="-p needs an argument" bad_arg -p
EXPECT="-l shows the registry once" bad_arg -l -i 1
rc=0
env "SHUNT_RUNDIR=$RUNDIR" "$SHUNT" stat --rundir "$PDIR/nonexistent" >/dev/null 2>&1 || rc=$?
[[ $rc -eq 1 ]] || die "stat --rundir of a missing directory: exit $rc, expected 1"
note "filters and argument errors"

# Rates: -i 2 -c 2; 1 MB sent by the client between the two samples.
mkfifo -m 600 "$PDIR/rates"
exec 7<>"$PDIR/rates"
stat_cmd --json -i 2 -c 2 >"$PDIR/rates" 7>&- 3>&- 4>&- 5>&- 6>&- &
STAT_BG=$!
read -r -t 30 -u 7 first || die "no first sample from stat -i"
SENT=1000000
echo "send 0 $SENT" >&5
read -r -t 30 -u 6 line || die "client did not say it sent"
[[ "$line" == "sent 0 $SENT" ]] || die "client said '$line'"
read -r -t 30 -u 7 second || die "no second sample from stat -i"
wait "$STAT_BG" || die "shunt stat -i 2 -c 2 failed"
exec 7>&-
printf '%s\n%s\n' "$first" "$second" >"$PDIR/rates.jsonl"
python3 "$PDIR/check.py" rates "${ARGS[@]}" "$PDIR/rates.jsonl" "$SENT" || die "rates wrong"
note "-i rates: the second sample's rate x interval = the $SENT bytes sent"

# Stale: SIGKILL the client; its file stays with a free lock.
kill -KILL "$CLI_PID"
wait "$CLI_BG" 2>/dev/null || true
[[ -f "$RUNDIR/s/$CLI_PID" ]] || die "the killed client left no stats file (nothing to test)"
# The server closes both connections when it reads EOF, and says so.
for i in 1 2; do
	read -r -t 30 -u 4 line || die "server did not close its connections"
	[[ "$line" == "closed "[01] ]] || die "server said '$line'"
done
stat_cmd --json >"$PDIR/stale.json" || die "stat after kill failed"
python3 "$PDIR/check.py" stale "${ARGS[@]}" "$PDIR/stale.json" "$SENT" || die "stale handling wrong"
[[ ! -e "$RUNDIR/s/$CLI_PID" ]] || die "stale file $RUNDIR/s/$CLI_PID not removed"
[[ -f "$RUNDIR/s/$SRV_PID" ]] || die "the live server's file was removed"
note "stale file of a killed process ignored and removed; closed totals kept"
exec 3>&- 5>&-
wait_exit "$SRV_BG" 20 || die "server failed: $(cat "$PDIR/server.err")"
exec 4>&- 6>&-

# ---------------------------------------------------------------------------
# Exit summary at log=info.  The client exits with its connections open
# (--no-close) after a child that exit()s and a child that execs
# "stat_hold noop" (which loads the library anew) and a child that sends
# 5000 bytes on the inherited shm connection; the
# server closes its connections at the client's EOF, then exits.
phase summary
chmod 700 "$RUNDIR"
SHUNT_LOGLEVEL=info
FORK_SENT=5000
start_pair --no-close --fork-exit --fork-exec "$PROGS/stat_hold" --fork-send "0:$FORK_SENT"
exec 5>&-
wait_exit "$CLI_BG" 20 || die "client failed: $(cat "$PDIR/client.err")"
exec 3>&-
wait_exit "$SRV_BG" 20 || die "server failed: $(cat "$PDIR/server.err")"
exec 4>&- 6>&-
unset SHUNT_LOGLEVEL
CIN=$(($(s2c 0) + $(s2c 1)))
COUT=$(($(c2s 0) + $(c2s 1)))
# SRV_REASON: the same scenario as phase live, where the debug log said it.
assert_log_count ': info: summary: ' 3
assert_log_count "^shunt\[$CLI_PID\] statcli: info: summary: connections shm=1 fabric=0 kernel=1 bytes in=$CIN out=$COUT fallbacks rule-kernel=1\$" 1
assert_log_count "^shunt\[$SRV_PID\] statsrv: info: summary: connections shm=1 fabric=0 kernel=1 bytes in=$((COUT + FORK_SENT)) out=$CIN fallbacks $SRV_REASON=1\$" 1
# The child that used an inherited connection counts what it sent, and only
# that; its parent's line above does not include it.
CHILD_LINE=$(log_lines "statcli: info: summary: connections shm=0 fabric=0 kernel=0 bytes in=0 out=$FORK_SENT fallbacks none\$")
[[ $(grep -c . <<<"$CHILD_LINE") -eq 1 && "$CHILD_LINE" != "shunt[$CLI_PID]"* ]] ||
	die "no summary of its own from the child that sent on an inherited connection: '$CHILD_LINE'"
note "one exit summary per process, with the numbers sent; a forked child counts only its own bytes; none from the children that did nothing or exec'd"

pass
