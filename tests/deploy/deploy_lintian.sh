#!/usr/bin/env bash
# deploy_lintian: the package of the deploy_package fixture is lintian
# clean: no error, no warning (the overrides in packaging/lintian-overrides
# say why each one is there).
#   deploy_lintian.sh BUILD
set -euo pipefail
BUILD=$1
command -v lintian >/dev/null || { echo "FAIL: deploy_lintian: lintian is not installed (scripts/deps.sh)"; exit 1; }
deb=$(ls "$BUILD"/deploy/pkg/shunt_*.deb 2>/dev/null | head -n 1 || true)
[[ -f "$deb" ]] || { echo "FAIL: deploy_lintian: no package (deploy_package fixture)"; exit 1; }
out=$(lintian --allow-root "$deb" 2>&1 || true)
bad=$(grep -E '^[EW]: ' <<<"$out" || true)
if [[ -n "$bad" ]]; then
	echo "$out"
	echo "FAIL: deploy_lintian: $(wc -l <<<"$bad") error(s)/warning(s) from lintian"
	exit 1
fi
[[ -z "$out" ]] || echo "$out"
echo "PASS: deploy_lintian"
