#!/usr/bin/env bash
# shellcheck disable=SC2034,SC2030,SC2031 # MODE, SHUNT_LOGLEVEL read by lib.sh; subshells by design
# CPython's own socket tests (Debian's libpython3.11-testsuite) under shunt:
# the peer's test suite as a stage of ours.  CPYTHON_GROUP names the
# modules (one ctest test per group, so ctest -j spreads them):
#   socket       test_socket test_selectors
#   socketserver test_socketserver (regrtest -u network: loopback only)
#   ssl          test_ssl
#   asyncio      test_asyncio.test_sock_lowlevel test_streams test_sendfile
#                test_server
#   events       test_asyncio.test_events
#   http         test_httplib test_urllib2_localnet
# Both ends of every connection are in the one test process (threads) or
# its children, all under `shunt run`: shm.  Per test, from regrtest's
# JUnit XML (tests/e2e/cpython_compare.py): every test that passes plainly
# passes under shunt.  CPYTHON_PLAIN=full runs the plain suite first and
# compares every test; the default (rerun) runs the plain suite only on the
# tests that failed or were skipped under shunt, which decides the same
# question in half the time.  tests/e2e/cpython_known.txt lists the tests
# not held to it, each with its reason.  shunt's exit summaries must count
# shm connections: acceleration happened.  The group's row of the
# compatibility matrix goes to $SHUNT_COMPAT_DIR (scripts/compat_matrix.py).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
if [[ ! -x $PY || ! -f /usr/lib/python3.11/test/test_socket.py ]]; then
	echo "SKIP: $E2E_NAME: Debian's python3 and libpython3.11-testsuite are not installed (scripts/deps.sh)"
	exit 0
fi
if [[ -n "$E2E_TRANSPORT" && "$E2E_TRANSPORT" != auto ]]; then
	echo "SKIP: $E2E_NAME runs with shunt's default transport"
	exit 0
fi
group=${CPYTHON_GROUP:?set CPYTHON_GROUP}
res=()
case $group in
socket) mods=(test_socket test_selectors) ;;
socketserver) mods=(test_socketserver) res=(-u network) ;;
ssl) mods=(test_ssl) ;;
asyncio) mods=(test_asyncio.test_sock_lowlevel test_asyncio.test_streams test_asyncio.test_sendfile test_asyncio.test_server) ;;
events) mods=(test_asyncio.test_events) ;;
http) mods=(test_httplib test_urllib2_localnet) ;;
*) die "unknown CPYTHON_GROUP $group" ;;
esac
E2E_NAME="${E2E_NAME}[$group]"
KNOWN=$E2E_DIR/cpython_known.txt
COMPARE=$E2E_DIR/cpython_compare.py
: "${CPYTHON_PLAIN:=rerun}"
# Each module's own bound on a test (regrtest --timeout: a hang prints its
# traceback and ends the run), and the whole run's.
: "${CPYTHON_TEST_TIMEOUT:=240}"
: "${CPYTHON_RUN_TIMEOUT:=900}"
ignore=$TMP/ignore.txt
awk '!/^#/ && $2 == "skip" { print $1 }' "$KNOWN" >"$ignore"
SHUNT_LOGLEVEL=info # read by lib.sh's _prefix

# regrtest MODE XML [regrtest args...]: the modules plainly or under shunt;
# fails the test when regrtest produced no XML (a hang, a crash).
regrtest() {
	local mode=$1 xml=$2 t0=$SECONDS
	shift 2
	MODE=$mode
	_prefix "$mode" "$CPYTHON_RUN_TIMEOUT"
	# The tests' own temporary files and children go under $PDIR.
	(cd "$PDIR" && "${PFX[@]}" "$PY" -m test --timeout "$CPYTHON_TEST_TIMEOUT" --ignorefile "$ignore" \
		"${res[@]}" --junit-xml "$xml" "$@" >"$PDIR/regrtest.out" 2>&1) || true
	[[ -s $xml ]] || die "regrtest ($mode) wrote no results: $(grep -E 'Timeout|Error|Thread 0x|File ' "$PDIR/regrtest.out" | head -n 12)"
	note "$mode: $(grep -E '^(Tests result|Total duration)' "$PDIR/regrtest.out" | tr '\n' ' ') ($((SECONDS - t0)) s)"
}

if [[ $CPYTHON_PLAIN == full ]]; then
	phase plain plain
	regrtest plain "$PDIR/result.xml" "${mods[@]}"
fi
phase shunt shunt
regrtest shunt "$PDIR/result.xml" "${mods[@]}"
check_logs

# Acceleration happened: the processes' exit summaries count shm connections.
shm_n=$(log_lines ': info: summary: connections ' | sed -n 's/.* shm=\([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
kern_n=$(log_lines ': info: summary: connections ' | sed -n 's/.* kernel=\([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
reasons=$(log_lines ': info: summary: connections ' | sed -n 's/.* fallbacks //p' | tr ' ' '\n' |
	awk -F= 'NF == 2 { n[$1] += $2 } END { for (r in n) printf "%s=%d\n", r, n[r] }' | sort | paste -sd ' ' -)
[[ $shm_n -gt 0 ]] || die "no connection on shm (summaries: $(log_lines ': info: summary: ' | head -n 3))"
note "connections: shm=$shm_n kernel=$kern_n ${reasons:+(moved or kept on TCP: $reasons)}"

if [[ $CPYTHON_PLAIN == rerun ]]; then
	phase plain plain
	"$PY" "$COMPARE" failed "$TMP/shunt/result.xml" >"$PDIR/rerun.txt"
	if [[ -s $PDIR/rerun.txt ]]; then
		note "plain: rerunning the $(wc -l <"$PDIR/rerun.txt") tests that did not pass under shunt"
		regrtest plain "$PDIR/result.xml" --matchfile "$PDIR/rerun.txt" "${mods[@]}"
	else
		printf '<testsuites></testsuites>\n' >"$PDIR/result.xml"
	fi
fi

rc=0
"$PY" "$COMPARE" judge "$TMP/shunt/result.xml" "$TMP/plain/result.xml" "$CPYTHON_PLAIN" "$KNOWN" >"$TMP/judge.txt" || rc=$?
grep -v '^counts: ' "$TMP/judge.txt" | head -n 40 || true
counts=$(sed -n 's/^counts: //p' "$TMP/judge.txt")
note "$counts"

if [[ -n "${SHUNT_COMPAT_DIR:-}" ]]; then
	mkdir -p "$SHUNT_COMPAT_DIR"
	ver=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
	verdict=pass
	[[ $rc -eq 0 ]] || verdict=FAIL
	printf 'CPython test suite: %s\tDebian python3 %s\t%s\t%s\tshm %d, kernel %d%s\n' \
		"${mods[*]}" "$ver" "${counts%%; shunt:*}" "${counts##*shunt: } ($verdict)" "$shm_n" "$kern_n" \
		"${reasons:+ ($reasons)}" | sed 's/plain: //; s/ )/)/' >"$SHUNT_COMPAT_DIR/cpython-$group.tsv"
fi
[[ $rc -eq 0 ]] || die "tests that pass plainly did not pass under shunt (see above)"
pass
