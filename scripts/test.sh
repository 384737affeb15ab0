#!/usr/bin/env bash
# Install what is needed, build, and run the whole test suite:
#   1. the release build (gcc, warnings as errors): unit, end-to-end, bench smoke
#   2. a sanitizer build (clang, ASan + UBSan): unit tests, the fuzzers, and the
#      end-to-end tests that only run the project's own programs
#   3. valgrind over an shm echo run
# Exits non-zero if anything fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
start=$(date +%s)

"$root/scripts/deps.sh"

echo "== release build"
"$root/scripts/build.sh" "$root/build" -DSHUNT_WERROR=ON
(cd "$root/build" && ctest -j"$jobs" --output-on-failure --timeout 300)

echo "== sanitizer build (ASan + UBSan, clang) and fuzzers"
CC=clang "$root/scripts/build.sh" "$root/build-san" -DSHUNT_WERROR=ON \
	-DSHUNT_SANITIZE=address,undefined -DSHUNT_FUZZ=ON
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$root/build-san" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	ctest -j"$jobs" --output-on-failure --timeout 300 -L 'unit|fuzz')
# End-to-end tests that run only the project's own programs (a Debian binary
# cannot load an ASan library); those programs keep memory until exit, so
# leak checking is off there.
(cd "$root/build-san" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	ctest -j"$jobs" --output-on-failure --timeout 300 -L san)

echo "== valgrind"
(cd "$root/build" && ctest --output-on-failure --timeout 300 -L valgrind)

echo "test.sh: all passed in $(( $(date +%s) - start )) s"
