#!/usr/bin/env bash
# overhead.sh: what does running under shunt cost on the kernel path?
#
# Usage:
#   bench/overhead.sh --build-dir build [--rounds N] [--iters N] [--duration S]
#                     [--quick] [--check] [--no-pin] [--raw FILE]
#
# Measures, in one run, kernel TCP over loopback without shunt ("plain") and
# under `shunt run --transport kernel` ("shunt"; server and client both
# launched through the shunt tool, so both have libshunt.so preloaded):
#   - ping-pong, 64-byte messages: round-trip p50 / p99
#   - stream, 64 KiB writes: throughput
# Rounds are interleaved (plain first on even rounds, shunt first on odd) so
# drift on a noisy machine hits both sides alike; the table shows the median
# over rounds and the overhead:
#   latency    (shunt - plain) / plain * 100
#   throughput (plain - shunt) / plain * 100
# (positive = shunt costs that much), and, as a cross-check, "paired": the
# median over rounds of each round's own overhead.  It reports how much CPU
# other processes used meanwhile (with a warning above 10%), and ends with
#   overhead: pingpong_p50=+X.X% stream=+Y.Y% (target < 3%)
#
# Options:
#   --build-dir DIR  the CMake build tree (default: <source>/build if it has
#                    the binaries, else `shunt` and `shunt-tcpbench` on PATH)
#   --rounds N       rounds (default 7)
#   --iters N        ping-pong round trips per run (default 100000)
#   --warmup N       ping-pong warm-up round trips per run (default 2000)
#   --duration S     stream seconds per run (default 3)
#   --quick          short runs: 3 rounds, 5000 iters, 0.3 s streams
#                    (later --rounds/--iters/--duration still apply)
#   --check          exit 1 when a median overhead is >= 3%
#   --no-pin         let the scheduler place server and client; by default
#                    the server runs on the first CPU this script may use and
#                    the client on the second (taskset, when there are two
#                    or more); unpinned loopback ping-pong is bimodal on
#                    small VMs (same-CPU vs cross-CPU wakeups), which
#                    drowns a 3% signal
#   --raw FILE       append every raw result line to FILE
# Environment: SHUNT (the shunt tool) and TCPBENCH (shunt-tcpbench) override
# the binaries; SHUNT_LIBRARY is honoured by `shunt run` as usual.
# Exit status: 0 ok, 1 a run failed (or --check failed), 2 usage.

set -u -o pipefail

die() { echo "overhead.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^# Exit status/s/^# \{0,1\}//p' "$0"; }

script_dir=$(cd "$(dirname "$0")" && pwd)
build_dir=""
rounds=7 iters=100000 warmup=2000 duration=3
pp_size=64 stream_size=65536
check=0 pin=1 raw=""
threshold=3

while [ $# -gt 0 ]; do
	case "$1" in
	--build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
	--build-dir=*) build_dir=${1#*=} ;;
	--rounds) rounds=${2:?--rounds needs N}; shift ;;
	--rounds=*) rounds=${1#*=} ;;
	--iters) iters=${2:?--iters needs N}; shift ;;
	--iters=*) iters=${1#*=} ;;
	--warmup) warmup=${2:?--warmup needs N}; shift ;;
	--warmup=*) warmup=${1#*=} ;;
	--duration) duration=${2:?--duration needs seconds}; shift ;;
	--duration=*) duration=${1#*=} ;;
	--quick) rounds=3 iters=5000 warmup=500 duration=0.3 ;;
	--check) check=1 ;;
	--pin) pin=1 ;;
	--no-pin) pin=0 ;;
	--raw) raw=${2:?--raw needs a file}; shift ;;
	--raw=*) raw=${1#*=} ;;
	-h|--help) usage; exit 0 ;;
	*) echo "overhead.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$rounds" in ''|*[!0-9]*|0) echo "overhead.sh: --rounds: expected N >= 1" >&2; exit 2 ;; esac
case "$iters" in ''|*[!0-9]*|0) echo "overhead.sh: --iters: expected N >= 1" >&2; exit 2 ;; esac
case "$warmup" in ''|*[!0-9]*) echo "overhead.sh: --warmup: expected N >= 0" >&2; exit 2 ;; esac
awk -v d="$duration" 'BEGIN { exit !(d + 0 > 0 && d ~ /^[0-9.]+$/) }' ||
	{ echo "overhead.sh: --duration: expected seconds > 0" >&2; exit 2; }

# ---- binaries ---------------------------------------------------------------
if [ -z "$build_dir" ] && [ -x "$script_dir/../build/tools/shunt" ]; then
	build_dir="$script_dir/../build"
fi
if [ -n "$build_dir" ]; then
	[ -d "$build_dir" ] || die "--build-dir $build_dir: no such directory"
	SHUNT=${SHUNT:-$build_dir/tools/shunt}
	TCPBENCH=${TCPBENCH:-$build_dir/bench/shunt-tcpbench}
else
	SHUNT=${SHUNT:-$(command -v shunt || true)}
	TCPBENCH=${TCPBENCH:-$(command -v shunt-tcpbench || true)}
fi
[ -n "$SHUNT" ] && [ -x "$SHUNT" ] ||
	die "shunt tool not found (${SHUNT:-not on PATH}); use --build-dir or SHUNT="
[ -n "$TCPBENCH" ] && [ -x "$TCPBENCH" ] ||
	die "shunt-tcpbench not found (${TCPBENCH:-not on PATH}); use --build-dir or TCPBENCH="

srv_pin=() cli_pin=() pin_desc="not pinned"
if [ "$pin" = 1 ] && command -v taskset >/dev/null; then
	# the first two CPUs of our affinity mask, e.g. "0-1" or "2,5-7"
	cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status |
		awk -F, '{ for (i = 1; i <= NF && n < 2; i++) {
			split($i, r, "-"); if (r[2] == "") r[2] = r[1]
			for (c = r[1]; c <= r[2] && n < 2; c++) { printf "%s%d", n ? " " : "", c; n++ } } }')
	read -r cpu_srv cpu_cli <<<"$cpus"
	if [ -n "${cpu_cli:-}" ]; then
		srv_pin=(taskset -c "$cpu_srv") cli_pin=(taskset -c "$cpu_cli")
		pin_desc="server on CPU $cpu_srv, client on CPU $cpu_cli"
	fi
fi
run_timeout=()
if command -v timeout >/dev/null; then
	run_timeout=(timeout 600)   # a hung run fails instead of hanging CI
fi

# ---- scratch space and cleanup ---------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shunt-overhead.XXXXXX") || die "mktemp failed"
srv_pid=""
cleanup() {
	if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
		kill "$srv_pid" 2>/dev/null
		wait "$srv_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The shunt tool must find libshunt.so and accept the options.
"$SHUNT" run --transport kernel -- true 2>"$tmp/preflight.err" ||
	die "'$SHUNT run --transport kernel -- true' failed: $(cat "$tmp/preflight.err")"

# ---- one measurement ---------------------------------------------------------
# run_one VARIANT MODE: sets result to the client's result line.  Runs in
# the main shell (not in $(...)), so that die's cleanup sees srv_pid.
run_one() {
	local variant=$1 mode=$2 wrap=() fd word port out lib
	if [ "$variant" = shunt ]; then
		wrap=("$SHUNT" run --transport kernel --)
	fi
	local fifo="$tmp/listen.fifo"
	rm -f "$fifo"
	mkfifo "$fifo" || die "mkfifo failed"

	# The server prints "listening PORT" once it accepts connections; the
	# fifo hands that line over without any sleeping or polling.
	"${srv_pin[@]}" "${wrap[@]}" "$TCPBENCH" server --bind 127.0.0.1 --port 0 --once \
		>"$fifo" 2>"$tmp/server.err" &
	srv_pid=$!
	exec {fd}<"$fifo"
	if ! read -r -t 30 -u "$fd" word port || [ "$word" != listening ]; then
		exec {fd}<&-
		die "$variant $mode: server did not start: $(cat "$tmp/server.err")"
	fi

	if [ "$variant" = shunt ]; then
		# Prove the library is really mapped into the server (the client
		# is launched the same way).
		lib=$(tr '\0' '\n' <"/proc/$srv_pid/environ" 2>/dev/null |
			sed -n 's/^LD_PRELOAD=//p' | cut -d: -f1)
		[ -n "$lib" ] && grep -qF "$lib" "/proc/$srv_pid/maps" 2>/dev/null ||
			die "shunt $mode: libshunt.so is not loaded in the server (LD_PRELOAD='$lib')"
	fi

	local cli=("$TCPBENCH" client --host 127.0.0.1 --port "$port" --mode "$mode")
	if [ "$mode" = pingpong ]; then
		cli+=(--size "$pp_size" --iters "$iters" --warmup "$warmup")
	else
		cli+=(--size "$stream_size" --duration "$duration")
	fi
	if ! out=$("${run_timeout[@]}" "${cli_pin[@]}" "${wrap[@]}" "${cli[@]}" 2>"$tmp/client.err"); then
		exec {fd}<&-
		die "$variant $mode: client failed: $(cat "$tmp/client.err")"
	fi
	if ! wait "$srv_pid"; then
		srv_pid=""
		exec {fd}<&-
		die "$variant $mode: server failed: $(cat "$tmp/server.err")"
	fi
	srv_pid=""
	exec {fd}<&-
	# pass on anything either side said (e.g. library log lines)
	if [ -s "$tmp/client.err" ]; then sed "s/^/[$variant $mode client] /" "$tmp/client.err" >&2; fi
	if [ -s "$tmp/server.err" ]; then sed "s/^/[$variant $mode server] /" "$tmp/server.err" >&2; fi
	case "$out" in
	"$mode "*) ;;
	*) die "$variant $mode: unexpected client output: $out" ;;
	esac
	if [ -n "$raw" ]; then echo "$variant $out" >>"$raw"; fi
	result=$out
}

# field LINE KEY: sets value to KEY's number in a result line.
field() {
	value=""
	local w
	for w in $1; do
		case "$w" in "$2="*) value=${w#*=} ;; esac
	done
	case "$value" in
	[0-9]*) ;;
	*) die "no number for $2= in: $1" ;;
	esac
}

median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) printf "%.6f\n", v[(NR + 1) / 2];
		      else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# latency: (shunt - plain) / plain; throughput: (plain - shunt) / plain
pct() { awk -v a="$1" -v b="$2" -v dir="$3" 'BEGIN {
	if (a <= 0) { print "nan"; exit }
	printf "%+.1f\n", (dir == "lat" ? (b - a) : (a - b)) / a * 100 }'; }

# CPU ticks: "busy total" for the machine, and what this script's children used.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat; }
own_ticks() { sed 's/.*) //' "/proc/$$/stat" | awk '{ print $14 + $15 }'; }

# ---- the run -----------------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo "# shunt overhead on the kernel path: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# $(uname -sr), $(nproc) CPUs${cpu:+, $cpu}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$SHUNT" version), $SHUNT, $TCPBENCH"
echo "# rounds=$rounds pingpong: size=$pp_size iters=$iters warmup=$warmup;" \
     "stream: size=$stream_size duration=${duration}s;" \
     "$pin_desc"

read -r busy0 total0 < <(machine_ticks)
own0=$(own_ticks)
pp_p50_plain=() pp_p50_shunt=() pp_p99_plain=() pp_p99_shunt=()
st_plain=() st_shunt=() pr_p50=() pr_p99=() pr_st=()
for ((r = 0; r < rounds; r++)); do
	if ((r % 2 == 0)); then order=(plain shunt); else order=(shunt plain); fi
	declare -A pp=() st=()
	for mode in pingpong stream; do
		for v in "${order[@]}"; do
			run_one "$v" "$mode"
			if [ "$mode" = pingpong ]; then pp[$v]=$result; else st[$v]=$result; fi
		done
	done
	field "${pp[plain]}" p50_us; pp_p50_plain+=("$value")
	field "${pp[shunt]}" p50_us; pp_p50_shunt+=("$value")
	field "${pp[plain]}" p99_us; pp_p99_plain+=("$value")
	field "${pp[shunt]}" p99_us; pp_p99_shunt+=("$value")
	field "${st[plain]}" gbps; st_plain+=("$value")
	field "${st[shunt]}" gbps; st_shunt+=("$value")
	pr_p50+=("$(pct "${pp_p50_plain[r]}" "${pp_p50_shunt[r]}" lat)")
	pr_p99+=("$(pct "${pp_p99_plain[r]}" "${pp_p99_shunt[r]}" lat)")
	pr_st+=("$(pct "${st_plain[r]}" "${st_shunt[r]}" tput)")
	printf 'round %d/%d (%s first): pingpong p50 us plain=%s shunt=%s | stream Gbit/s plain=%s shunt=%s\n' \
		$((r + 1)) "$rounds" "${order[0]}" \
		"${pp_p50_plain[r]}" "${pp_p50_shunt[r]}" "${st_plain[r]}" "${st_shunt[r]}"
	unset pp st
done

m_p50_plain=$(median "${pp_p50_plain[@]}") m_p50_shunt=$(median "${pp_p50_shunt[@]}")
m_p99_plain=$(median "${pp_p99_plain[@]}") m_p99_shunt=$(median "${pp_p99_shunt[@]}")
m_st_plain=$(median "${st_plain[@]}") m_st_shunt=$(median "${st_shunt[@]}")

o_p50=$(pct "$m_p50_plain" "$m_p50_shunt" lat)
o_p99=$(pct "$m_p99_plain" "$m_p99_shunt" lat)
o_st=$(pct "$m_st_plain" "$m_st_shunt" tput)

echo
p_p50=$(median "${pr_p50[@]}") p_p99=$(median "${pr_p99[@]}") p_st=$(median "${pr_st[@]}")
printf '%-32s %10s %10s %9s %9s\n' "metric (median of $rounds)" plain shunt overhead paired
printf '%-32s %10.3f %10.3f %8s%% %+8.1f%%\n' "pingpong ${pp_size} B p50 (us)" "$m_p50_plain" "$m_p50_shunt" "$o_p50" "$p_p50"
printf '%-32s %10.3f %10.3f %8s%% %+8.1f%%\n' "pingpong ${pp_size} B p99 (us)" "$m_p99_plain" "$m_p99_shunt" "$o_p99" "$p_p99"
printf '%-32s %10.3f %10.3f %8s%% %+8.1f%%\n' "stream $((stream_size / 1024)) KiB writes (Gbit/s)" "$m_st_plain" "$m_st_shunt" "$o_st" "$p_st"
# How much CPU did everything else on the machine use meanwhile?  On a
# 2-CPU box even a compiler run makes the comparison meaningless.
read -r busy1 total1 < <(machine_ticks)
own1=$(own_ticks)
others=$(awk -v b=$((busy1 - busy0)) -v t=$((total1 - total0)) -v o=$((own1 - own0)) \
	'BEGIN { x = t > 0 ? (b - o) / t * 100 : 0; printf "%.0f\n", x < 0 ? 0 : x }')
echo "# other load during the run: ${others}% of all CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$others" -ge 10 ]; then
	echo "# WARNING: the machine was busy with other work; these figures are not reliable"
fi
echo "overhead: pingpong_p50=${o_p50}% stream=${o_st}% (target < ${threshold}%)"

if [ "$check" = 1 ]; then
	if ! awk -v a="$o_p50" -v b="$o_st" -v t="$threshold" \
		'BEGIN { exit !(a + 0 < t && b + 0 < t && a != "nan" && b != "nan") }'; then
		echo "overhead.sh: median overhead is ${threshold}% or more" >&2
		exit 1
	fi
fi
exit 0
