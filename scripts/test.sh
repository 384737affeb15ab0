#!/usr/bin/env bash
# Install what is needed, build, and run the whole test suite:
#   1. the release build (gcc, warnings as errors): unit, end-to-end, bench smoke
#   2. a sanitizer build (clang, ASan + UBSan): unit tests, the fuzzers, and the
#      end-to-end tests that only run the project's own programs
#   3. valgrind over an shm echo run
# Every stage runs even when an earlier one failed; the end prints every
# failure of every round, and the exit status is non-zero if there was one.
#
#   scripts/test.sh [--repeat N] [--pressure] [--one-cpu] [-R REGEX]
#     --repeat N   run the suite N times (builds once), every failure reported
#     --pressure   keep every CPU busy with a spinning process meanwhile
#     --one-cpu    run everything on CPU 0 (taskset -c 0)
#     -R REGEX     only the tests whose names match (ctest -R), every stage
# tests/README.md says what each regime is for.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=1 pressure=0 onecpu=0 filter=()
usage() { echo "usage: $0 [--repeat N] [--pressure] [--one-cpu] [-R REGEX]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
	case $1 in
	--repeat) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; repeat=$2; shift 2 ;;
	--pressure) pressure=1; shift ;;
	--one-cpu) onecpu=1; shift ;;
	-R) [[ -n ${2:-} ]] || usage; filter=(-R "$2"); shift 2 ;;
	*) usage ;;
	esac
done
start=$(date +%s)
failures=()   # "round N stage: test" lines
fail_count=0

"$root/scripts/deps.sh" || { echo "test.sh: installing dependencies failed" >&2; exit 1; }

build_failed=()
echo "== release build"
"$root/scripts/build.sh" "$root/build" -DSHUNT_WERROR=ON || build_failed+=(release)
echo "== sanitizer build (ASan + UBSan, clang) and fuzzers"
CC=clang "$root/scripts/build.sh" "$root/build-san" -DSHUNT_WERROR=ON \
	-DSHUNT_SANITIZE=address,undefined -DSHUNT_FUZZ=ON || build_failed+=(sanitizer)

jobs=$(nproc)
pin=()
if [[ $onecpu == 1 ]]; then
	pin=(taskset -c 0)
fi

hogs=()
stop_hogs() {
	local p
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
	hogs=()
}
trap stop_hogs EXIT
if [[ $pressure == 1 ]]; then
	# One busy loop per CPU, each the loop itself (not a shell around it),
	# so killing the pid stops it.
	for ((i = 0; i < $(nproc); i++)); do
		"${pin[@]}" bash -c 'while :; do :; done' &
		hogs+=($!)
	done
	echo "== CPU pressure: ${#hogs[@]} busy processes (${hogs[*]})"
fi

# stage NAME release|sanitizer [ctest args...]: one ctest run in that
# build; its failures are recorded with the round (ctest printed their
# output).
stage() {
	local name=$1 build=$2 dir=$root/build
	shift 2
	[[ $build == sanitizer ]] && dir=$root/build-san
	echo "== round $round: $name"
	if [[ " ${build_failed[*]} " == *" $build "* ]]; then
		echo "(skipped: the $build build failed)"
		return
	fi
	local rc=0
	(cd "$dir" && "${pin[@]}" ctest -j"$jobs" --output-on-failure --timeout 300 "${filter[@]}" "$@") || rc=$?
	if [[ $rc -ne 0 ]]; then
		local f="$dir/Testing/Temporary/LastTestsFailed.log" t
		if [[ -s $f ]]; then
			while IFS=: read -r _ t; do
				failures+=("round $round $name: $t")
				fail_count=$((fail_count + 1))
			done <"$f"
		else
			failures+=("round $round $name: ctest exited with $rc")
			fail_count=$((fail_count + 1))
		fi
	fi
}

for ((round = 1; round <= repeat; round++)); do
	stage release release
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 stage "sanitizer unit+fuzz" sanitizer -L 'unit|fuzz'
	# End-to-end tests that run only the project's own programs (a Debian
	# binary cannot load an ASan library); those programs keep memory until
	# exit, so leak checking is off there.
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 stage "sanitizer e2e" sanitizer -L san
	stage valgrind release -L valgrind
done
stop_hogs

# The compatibility matrix from the rows the end-to-end tests left
# (tests/e2e compat_row, cpython_suite.sh): written next to the build; the
# committed docs/COMPATIBILITY.md is refreshed from it by hand
# (scripts/compat_matrix.py build), as its counts move from run to run.
if [[ -d $root/build/compat ]]; then
	"$root/scripts/compat_matrix.py" "$root/build" "$root/build/COMPATIBILITY.md" ||
		echo "test.sh: the compatibility matrix could not be written"
fi

regime="repeat=$repeat pressure=$pressure one-cpu=$onecpu${filter[*]:+ ${filter[*]}}"
secs=$(($(date +%s) - start))
if [[ ${#build_failed[@]} -gt 0 ]]; then
	failures=("build failed: ${build_failed[*]}" "${failures[@]}")
	fail_count=$((fail_count + 1))
fi
if [[ $fail_count -eq 0 ]]; then
	echo "test.sh: all passed ($regime) in $secs s"
	exit 0
fi
echo
echo "test.sh: $fail_count failure(s) ($regime) in $secs s:"
printf '  %s\n' "${failures[@]}"
exit 1
