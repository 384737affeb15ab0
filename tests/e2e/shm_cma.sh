#!/usr/bin/env bash
# shm single copy (shm/shm_cma.c), with tests/progs/cma_peer: every byte
# checked at its offset, and from the logs and `shunt stat` whether the
# single copy was used.
#   mixed     64 MiB each way, writes and reads of sizes across cma_min (1 B
#             to 8 MiB): exact, and single copies in both directions
#   posted    8 writes of 2 MiB, each once the reader sleeps in its read:
#             all 16 MiB by single copy, shown by `shunt stat --json`
#             (single_copy_in/out) while the connection is open
#   off       the same with the default configuration (cma_min = 0: off):
#             exact, no single copy
#   kill      the writer SIGKILLed while it copies 256 MiB into the reader's
#             buffer: the reader gives the copy up and reads EOF
#   fault     the reader's buffer half unmapped (the read returns the mapped
#             part), then unmapped (EFAULT, as the kernel says): every byte
#             arrives by the ring
#   noptrace  both ends unprivileged, the reader not dumpable: the writer's
#             copy is refused (EPERM) and every byte goes by the ring
#             (root only: needs another uid; skipped otherwise)
source "$(dirname "$0")/lib_shm.sh"

# run_cma NAME [ARGS...]: cma_peer NAME under shunt, its PASS, clean logs,
# its connection on shm at both ends.
run_cma() {
	local name=$1
	shift
	runx "$PROGS/cma_peer" "$name" "$@" >"$PDIR/out" 2>"$PDIR/err" ||
		die "cma_peer $name failed: $(tail -n 3 "$PDIR/out" "$PDIR/err")"
	grep -q "^PASS cma_peer $name" "$PDIR/out" || die "no PASS from cma_peer $name"
	note "$(cat "$PDIR/out")"
	check_logs
	assert_conns shm cma_peer server 1
	assert_conns shm cma_peer client 1
}

# Single copy is off by default: every phase but "off" turns it on.
printf 'cma_min = 256k\n' >"$TMP/cma.conf"
chmod 644 "$TMP/cma.conf"
export SHUNT_CONF=$TMP/cma.conf

single_re() { echo "^shunt\\[[0-9]+\\] cma_peer: debug: shm single copy fd=[0-9]+ in=$1 out=$2\$"; }

shm_phase mixed shunt
run_cma mixed --bytes $((64 << 20))
# Each process both read and wrote some bytes in one copy.
assert_log_count "$(single_re '[1-9][0-9]*' '[1-9][0-9]*')" 2

shm_phase posted shunt
bg posted "$PROGS/cma_peer" posted --hold "$PDIR/hold"
pid=$BG_PID
wait_file "$PDIR/hold.ready" "$pid"
env "SHUNT_RUNDIR=$RUNDIR" "$SHUNT" stat --json >"$PDIR/stat.json" || die "shunt stat --json failed"
touch "$PDIR/hold.go"
wait_exit "$pid" 60 || die "cma_peer posted failed: $(tail -n 3 "$PDIR/posted.out" "$PDIR/posted.err")"
grep -q '^PASS cma_peer posted' "$PDIR/posted.out" || die "no PASS from cma_peer posted"
check_logs
/usr/bin/python3 - "$PDIR/stat.json" <<'EOF' || die "shunt stat does not show the single copy: $(cat "$PDIR/stat.json")"
import json, sys
def conns(d):
    if isinstance(d, dict):
        if "single_copy_in" in d:
            yield d
        for v in d.values():
            yield from conns(v)
    elif isinstance(d, list):
        for v in d:
            yield from conns(v)
hit = [c for c in conns(json.load(open(sys.argv[1])))
       if c["transport"] == "shm" and c["single_copy_in"] == 16 << 20 and c["bytes_in"] >= 16 << 20]
sys.exit(0 if hit else 1)
EOF
assert_log_has "$(single_re 16777216 0)"
assert_log_has "$(single_re 0 16777216)"

shm_phase off shunt
SHUNT_CONF=$EMPTY_CONF run_cma posted
assert_log_lacks 'single copy (in|out)'

shm_phase kill shunt
run_cma kill
assert_log_has 'cma_peer: debug: fd=[0-9]+ single copy: the writer died in it$'

shm_phase fault shunt
run_cma fault
# The first single copy stopped at the hole, after the mapped MiB.
assert_log_has 'cma_peer: debug: fd=[0-9]+ single copy in: 1048576 bytes$'

if [[ $(id -u) -eq 0 ]]; then
	need setpriv
	shm_phase noptrace shunt
	chmod 711 "$TMP"
	chmod 1777 "$PDIR" "$LOGDIR"
	chmod 1777 "$RUNROOT"
	chown 65534:65534 "$RUNDIR"
	chmod 644 "$EMPTY_CONF"
	as_user_prefix 65534 65534
	"${PFX[@]}" "$PROGS/cma_peer" noptrace >"$PDIR/out" 2>"$PDIR/err" ||
		die "cma_peer noptrace failed: $(tail -n 3 "$PDIR/out" "$PDIR/err")"
	grep -q '^PASS cma_peer noptrace' "$PDIR/out" || die "no PASS from cma_peer noptrace"
	check_logs
	assert_log_has 'single copy refused \(Operation not permitted\): by the ring$'
	assert_log_lacks 'single copy (in|out):'
else
	note "noptrace skipped: needs root to run as another uid"
fi

pass
