#!/usr/bin/env bash
# deploy_package (ctest fixture of the deploy tests): builds the Debian
# package with the very command of the Containerfile's build stage (its
# `RUN cd /build && cpack ...` line, /build and /pkg mapped to this build
# directory and BUILD/deploy/pkg), then unpacks it with dpkg -x into
# BUILD/deploy/root: the "sidecar image" of the other deploy tests.
#   package.sh SRC BUILD
set -euo pipefail
SRC=$1 BUILD=$2
OUT=$BUILD/deploy/pkg ROOT=$BUILD/deploy/root
die() { echo "FAIL: deploy_package: $*"; exit 1; }
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing"

# The RUN line of the Containerfile that makes the package.
mapfile -t runs < <(sed -n 's/^RUN \(.*cpack .*\)$/\1/p' "$SRC/examples/container/Containerfile")
[[ ${#runs[@]} -eq 1 ]] || die "expected one RUN line with cpack in the Containerfile, found ${#runs[@]}"
cmd=${runs[0]}
[[ $cmd == "cd /build && cpack -G DEB -B /pkg" ]] || die "the Containerfile's cpack line changed: $cmd (update this test)"
cmd=${cmd//\/build/$BUILD}
cmd=${cmd//\/pkg/$OUT}

rm -rf "$OUT" "$ROOT"
mkdir -p "$OUT"
echo "deploy_package: $cmd"
sh -c "$cmd" >"$BUILD/deploy/cpack.log" 2>&1 || { tail -n 20 "$BUILD/deploy/cpack.log"; die "cpack failed"; }
shopt -s nullglob
debs=("$OUT"/shunt_*.deb)
[[ ${#debs[@]} -eq 1 ]] || die "expected one shunt_*.deb in $OUT, found ${#debs[@]}"
dpkg-deb -x "${debs[0]}" "$ROOT" || die "dpkg-deb -x failed"
echo "deploy_package: ${debs[0]} ($(stat -c %s "${debs[0]}") bytes) unpacked into $ROOT"
echo "PASS: deploy_package"
