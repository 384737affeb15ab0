#!/usr/bin/env bash
# deploy_deb: the Debian package of the deploy_package fixture holds what it
# must (library, tools, man pages, example config, systemd unit, install-into,
# computed dependencies), and `shunt run` from the unpacked tree accelerates
# a pair: redis-server and redis-benchmark, both under the tree's own shunt,
# on shm (decision lines of both ends and shunt stat), with the library the
# tree's.  Runs in a private network namespace (root) so the port is ours.
#   deploy_deb.sh BUILD
set -euo pipefail
BUILD=$1
ROOT=$BUILD/deploy/root
die() { echo "FAIL: deploy_deb: $*"; exit 1; }
trap 'echo "FAIL: deploy_deb: unexpected status $? at line $LINENO"' ERR
if [[ $(id -u) -ne 0 ]]; then
	echo "SKIP: deploy_deb needs root (a private network namespace)"
	exit 0
fi
if [[ -z "${DEPLOY_IN_NS:-}" ]]; then
	exec unshare -n env DEPLOY_IN_NS=1 bash "$0" "$@"
fi
ip link set lo up
for p in redis-server redis-benchmark dpkg-deb; do
	command -v $p >/dev/null || die "$p is not installed (scripts/deps.sh)"
done
deb=$(ls "$BUILD"/deploy/pkg/shunt_*.deb 2>/dev/null | head -n 1)
[[ -f "$deb" && -d "$ROOT" ]] || die "no package: run the deploy_package fixture (ctest -L deploy)"

# ---- what the package holds
dep=$(dpkg-deb -f "$deb" Depends)
[[ $dep == *libfabric1* && $dep == *libc6* ]] || die "Depends not computed from the binaries: '$dep'"
for f in usr/bin/shunt usr/sbin/shuntd usr/lib/shunt/install-into \
	usr/share/man/man1/shunt.1.gz usr/share/man/man5/shunt.conf.5.gz usr/share/man/man8/shuntd.8.gz \
	usr/share/doc/shunt/examples/shunt.conf usr/share/doc/shunt/copyright usr/share/doc/shunt/DEPLOY.md \
	usr/share/doc/shunt/QUICKSTART.md usr/share/doc/shunt/TROUBLESHOOTING.md; do
	[[ -e "$ROOT/$f" ]] || die "the package lacks /$f"
done
lib=$(find "$ROOT/usr/lib" -name libshunt.so -path '*/shunt/*' | head -n 1)
[[ -n "$lib" ]] || die "the package lacks libshunt.so (in a shunt/ directory of the libdir)"
for x in usr/bin/shunt usr/sbin/shuntd usr/lib/shunt/install-into; do
	[[ -x "$ROOT/$x" ]] || die "/$x is not executable"
done
unit=$(find "$ROOT/lib/systemd/system" "$ROOT/usr/lib/systemd/system" -name shuntd.service 2>/dev/null | head -n 1 || true)
[[ -n "$unit" ]] || die "the package lacks the systemd unit shuntd.service"
exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
[[ -x "$ROOT$exe" ]] || die "the unit starts $exe, which the package does not hold"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/shunt/shunt.conf ||
	die "/etc/shunt/shunt.conf is not a conffile"
"$ROOT/usr/bin/shunt" config --check "$ROOT/etc/shunt/shunt.conf" >/dev/null ||
	die "the package's /etc/shunt/shunt.conf does not load"
for p in "$ROOT"/usr/share/man/man*/*.gz; do
	gzip -t "$p" || die "$p is not gzip"
done
# The license the package states is LICENSE's, word for word: the
# copyright file's last paragraph (the license's text) against LICENSE below its
# copyright line (blanks and Debian's " ." paragraph marks aside).
words() { tr -s ' \n\t' '\n\n\n' | grep -vx '\.' | grep -v '^$'; }
cp=$ROOT/usr/share/doc/shunt/copyright
grep -qx 'License: BSD-2-clause' "$cp" || die "the copyright file does not state BSD-2-clause"
grep -qx 'Copyright: 2026 The shunt authors' "$cp" || die "the copyright file does not name The shunt authors"
diff <(awk '/^License: BSD-2-clause$/ { t = ""; next } { t = t $0 "\n" } END { printf "%s", t }' "$cp" | words) \
	<(sed '1,/^Copyright/d' "${SHUNT_SRC:?}/LICENSE" | words) >/dev/null ||
	die "the copyright file's license text differs from LICENSE"

# ---- shunt run from the unpacked tree
T=$(mktemp -d /dev/shm/shunt-deploy-deb.XXXXXX)
spid=
cleanup() {
	[[ -z "$spid" ]] || { kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; }
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -m 0700 "$T/run" "$T/log"
unset LD_PRELOAD SHUNT_CONFIG SHUNT_OPTIONS SHUNT_LIBRARY SHUNT_RUNDIR
run=("$ROOT/usr/bin/shunt" run --config /dev/null --log debug --log-file "$T/log/%p.log" --options "rundir=$T/run" --)
(cd "$T" && exec "${run[@]}" redis-server --port 6379 --save "" --appendonly no) >"$T/server.out" 2>&1 &
spid=$!
for ((i = 0; i < 200; i++)); do
	[[ -n "$(ss -Hltn '( sport = :6379 )')" ]] && break
	kill -0 "$spid" 2>/dev/null || die "redis-server under the package's shunt exited: $(tail -n 3 "$T/server.out")"
	sleep 0.05
done
grep -qF "$lib" "/proc/$spid/maps" || die "redis-server has not mapped the package's $lib"
"${run[@]}" redis-benchmark -p 6379 -n 500 -c 2 -t set,get --csv >"$T/bench.out" 2>&1 ||
	die "redis-benchmark failed: $(tail -n 3 "$T/bench.out")"
if ! grep -q '^"SET","[1-9]' "$T/bench.out" || ! grep -q '^"GET","[1-9]' "$T/bench.out"; then
	die "no SET and GET rates: $(cat "$T/bench.out")"
fi
stat=$("$ROOT/usr/bin/shunt" stat --rundir "$T/run" --json -n redis-server | tail -n 1)
shm=$(jq '.processes[0].totals.connections.shm' <<<"$stat")
kern=$(jq '.processes[0].totals.connections.kernel' <<<"$stat")
[[ $shm -ge 2 && $kern -eq 0 ]] || die "shunt stat of redis-server: shm=$shm kernel=$kern: $stat"
c=$(cat "$T"/log/*.log | grep -Ec 'redis-benchmark: debug: conn .* role=client .* transport=shm reason=-$' || true)
nc=$(cat "$T"/log/*.log | grep -E 'redis-benchmark: debug: conn ' | grep -vc 'transport=shm' || true)
[[ $c -eq $shm && $nc -eq 0 ]] || die "redis-benchmark: $c client connections on shm, $nc not, server counted $shm"
echo "deploy_deb: $deb: $shm connections on shm from the unpacked tree"
echo "PASS: deploy_deb"
