#!/usr/bin/env bash
# The waits of each shape the wait policy learns from (docs/ARCHITECTURE.md,
# "Waiting"), both ends under shunt on shm: ping-pong of 64 B, 16 KiB and
# 64 KiB messages, pinned on two CPUs and not pinned, and a server that
# computes 5, 100 and 1000 us per message before it answers (shunt-tcpbench
# --think).  Each run must check every echo (the client stamps and checks a
# sequence number in each message), take shm at both ends and never move to
# TCP.  How fast each runs is shunt bench's to say (--sizes, --think), not
# this test's.
source "$(dirname "$0")/lib_shm.sh"

TCPB=$(dirname "$SHUNT_LIB")/../bench/shunt-tcpbench
[[ -x $TCPB ]] || { echo "SKIP: $E2E_NAME needs shunt-tcpbench (built with the benchmarks)"; exit 0; }
cpus=$(nproc)
# Pinning goes through taskset, a Debian binary, which cannot load a
# sanitizer build of the library (label san): there the pinned cases run
# where the scheduler puts them, the shapes and checks unchanged.
# (No grep -q on the pipe: under pipefail nm's SIGPIPE would fail it.)
if [[ $(nm -D --undefined-only "$SHUNT_LIB" 2>/dev/null) == *" __asan_"* ]]; then
	cpus=1
fi
# name size think pin iters
CASES=(
	"p64 64 0 pinned 3000"
	"p16k 16384 0 pinned 2000"
	"p64k 65536 0 pinned 1000"
	"f64 64 0 free 3000"
	"f16k 16384 0 free 2000"
	"think5 64 5 pinned 2000"
	"think100 64 100 pinned 500"
	"think1000 64 1000 free 100"
)

for c in "${CASES[@]}"; do
	read -r name size think pin iters <<<"$c"
	shm_phase "$name" shunt
	cpu_s=() cpu_c=()
	if [[ $pin == pinned ]] && ((cpus >= 2)); then
		cpu_s=(taskset -c 1) cpu_c=(taskset -c 0)
	fi
	port=$(free_port)
	bg server "${cpu_s[@]}" "$TCPB" server --port "$port" --once
	spid=$BG_PID
	wait_port "$port" "$spid"
	runx "${cpu_c[@]}" "$TCPB" client --port "$port" --mode pingpong --size "$size" \
		--iters "$iters" --warmup 100 --think "$think" >"$PDIR/client.out" 2>"$PDIR/client.err" ||
		die "client failed ($c): $(tail -n 2 "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "server failed ($c): $(tail -n 2 "$PDIR/server.err")"
	grep -Eq "^pingpong size=$size iters=$iters p50_us=[0-9.]+ " "$PDIR/client.out" ||
		die "no ping-pong line ($c): $(cat "$PDIR/client.out")"
	note "$name: $(cut -d' ' -f3-4 "$PDIR/client.out")"
	check_logs
	assert_conns shm 'shunt-tcpbench' client 1
	assert_conns shm 'shunt-tcpbench' server 1
	assert_no_moves shm
	# Every message through the rings: the header and the round trips.
	total=$(((iters + 100) * size))
	read -r in out < <(log_lines "$(close_re shm 'shunt-tcpbench' '[0-9]+' '[0-9]+')" |
		sed -n 's/.*bytes_in=\([0-9]*\) bytes_out=\([0-9]*\)$/\1 \2/p' | sort -n | tail -n 1)
	[[ -n "$in" && $in -ge $total && $out -ge $total ]] ||
		die "shm byte counts (in=$in out=$out) do not cover the round trips ($total bytes) ($c)"
	assert_rundir_clean
done
pass
