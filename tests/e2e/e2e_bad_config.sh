#!/usr/bin/env bash
# Bad configuration never takes a program down: with a broken file (unknown
# key at line 3, bad value), an unreadable one (a directory, a missing file),
# a rule with a bad prefix, or bad SHUNT_OPTIONS, libshunt.so injected into
# curl / redis-cli (as a sidecar does: LD_PRELOAD + SHUNT_* in the
# environment) prints exactly one error line naming the file:line, disables
# itself, and the program gets the right result.  `shunt config --check`
# rejects the same files with the same message; `shunt run --config` names it.
source "$(dirname "$0")/lib.sh"
need curl redis-server redis-cli python3

phase setup plain
mkdir -p "$TMP/www"
random_file "$TMP/www/file.bin" 300000
want=$(sha256 "$TMP/www/file.bin")
hport=$(free_port)
bg http python3 -m http.server "$hport" --bind 127.0.0.1 --directory "$TMP/www"
wait_port "$hport" "$BG_PID"
rport=$(free_port)
bg redis redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
	--daemonize no --protected-mode no --dir "$PDIR" --logfile ''
wait_port "$rport" "$BG_PID"

C=$TMP/conf
mkdir -p "$C" "$C/a-directory.conf"
printf 'log = debug\n# a comment\nno_such_key = 1\n' >"$C/unknown-key.conf"
printf '# rules\nauto * * 10.0.0.0/33\n' >"$C/bad-prefix.conf"
printf 'spin_us = lots\n' >"$C/bad-value.conf"
printf 'log = info\nkernel client * 127.0.0.1:1-1024\n' >"$C/good.conf"

# inject CONFIG OPTIONS PROG ARGS...: runs PROG with libshunt.so preloaded
# and SHUNT_CONFIG=CONFIG (SHUNT_OPTIONS=OPTIONS when not empty); stdout to
# $PDIR/out, stderr to $PDIR/err.
inject() {
	local conf=$1 opts=$2
	shift 2
	local -a e=(env "LD_PRELOAD=$SHUNT_LIB" "SHUNT_CONFIG=$conf")
	[[ -n "$opts" ]] && e+=("SHUNT_OPTIONS=$opts")
	timeout -k 5 60 "${e[@]}" "$@" >"$PDIR/out" 2>"$PDIR/err"
}

# expect_one_error PROG WHERE WHAT: stderr is exactly one shunt error line,
# from PROG, naming WHERE (file:line or variable) and mentioning WHAT.
expect_one_error() {
	local prog=$1 where=$2 what=$3 n line
	n=$(grep -c '^shunt\[' "$PDIR/err" || true)
	[[ $n -eq 1 ]] || die "$PHASE: expected exactly one shunt line on stderr, got $n: $(head -c 600 "$PDIR/err")"
	line=$(grep '^shunt\[' "$PDIR/err")
	[[ "$line" =~ ^shunt\[[0-9]+\]\ $prog:\ error:\ (.*)\;\ shunt\ disabled,\ connections\ use\ the\ kernel\ path$ ]] ||
		die "$PHASE: malformed error line: $line"
	local msg=${BASH_REMATCH[1]}
	[[ "$msg" == "$where"* ]] || die "$PHASE: message does not start with '$where': $line"
	[[ "$msg" == *"$what"* ]] || die "$PHASE: message does not mention '$what': $line"
	# nothing else on stderr
	[[ $(grep -vc '^shunt\[' "$PDIR/err" || true) -eq 0 ]] || die "$PHASE: other output on stderr: $(head -c 300 "$PDIR/err")"
}

# The program fetches two URLs (IPv4 and IPv6 would need a v6 server; two
# connections to the same server show the message is per process, not per
# connection).
curl_case() {
	local name=$1 conf=$2 opts=$3 where=$4 what=$5
	phase "$name" plain
	inject "$conf" "$opts" curl -sS --fail -H 'Connection: close' \
		-o "$PDIR/f1" "http://127.0.0.1:$hport/file.bin" -o "$PDIR/f2" "http://127.0.0.1:$hport/file.bin" ||
		die "$name: curl failed: $(head -c 300 "$PDIR/err")"
	assert_eq "$(sha256 "$PDIR/f1")" "$want" "$name: first download"
	assert_eq "$(sha256 "$PDIR/f2")" "$want" "$name: second download"
	expect_one_error curl "$where" "$what"
}
redis_case() {
	local name=$1 conf=$2 opts=$3 where=$4 what=$5
	phase "$name" plain
	inject "$conf" "$opts" redis-cli -h 127.0.0.1 -p "$rport" PING ||
		die "$name: redis-cli failed: $(head -c 300 "$PDIR/err")"
	assert_eq "$(cat "$PDIR/out")" PONG "$name: redis-cli PING"
	expect_one_error redis-cli "$where" "$what"
}

curl_case unknown-key "$C/unknown-key.conf" "" "$C/unknown-key.conf:3: " "no_such_key"
curl_case bad-prefix "$C/bad-prefix.conf" "" "$C/bad-prefix.conf:2: " "/33"
redis_case bad-value "$C/bad-value.conf" "" "$C/bad-value.conf:1: " "lots"
redis_case directory "$C/a-directory.conf" "" "$C/a-directory.conf" "directory"
redis_case missing "$C/missing.conf" "" "$C/missing.conf" "No such file"
curl_case bad-options "$C/good.conf" "spin_us=1,frobnicate=2" "SHUNT_OPTIONS" "frobnicate"
curl_case bad-env-rule "$C/good.conf" "rule=kernel * * ::1/129" "SHUNT_OPTIONS" "129"

# Control: the good file gives no error and shunt runs (info startup line).
phase good plain
inject "$C/good.conf" "" redis-cli -h 127.0.0.1 -p "$rport" PING || die "good config: redis-cli failed"
assert_eq "$(cat "$PDIR/out")" PONG "good config: PING"
grep -q '^shunt\[[0-9]*\] redis-cli: info: shunt [0-9.]* enabled' "$PDIR/err" ||
	die "good config: no startup line: $(head -c 300 "$PDIR/err")"
grep -q ': error:' "$PDIR/err" && die "good config: error reported: $(cat "$PDIR/err")"

# shunt config --check: rejects each bad file naming file:line, accepts the good one.
phase check plain
for f in unknown-key:3 bad-prefix:2 bad-value:1; do
	file=$C/${f%%:*}.conf
	if "$SHUNT" config --check "$file" >"$PDIR/out" 2>"$PDIR/err"; then
		die "shunt config --check accepted $file"
	fi
	grep -qF "$file:${f##*:}: " "$PDIR/out" "$PDIR/err" ||
		die "shunt config --check $file does not name line ${f##*:}: $(cat "$PDIR/err")"
done
"$SHUNT" config --check "$C/good.conf" >"$PDIR/out" 2>"$PDIR/err" ||
	die "shunt config --check rejected a good file: $(cat "$PDIR/err")"

# shunt run --config with a broken file: the launcher names file:line once.
# (If it runs the command, the command must succeed; if it refuses, it must
# say why and exit 2.)
phase run plain
rc=0
SHUNT_LIBRARY=$SHUNT_LIB timeout 60 "$SHUNT" run --config "$C/unknown-key.conf" -- \
	redis-cli -h 127.0.0.1 -p "$rport" PING >"$PDIR/out" 2>"$PDIR/err" || rc=$?
[[ $(grep -c "unknown-key.conf:3: " "$PDIR/err" || true) -eq 1 ]] ||
	die "shunt run --config: file:line not named exactly once: $(cat "$PDIR/err")"
if [[ $rc -eq 0 ]]; then
	assert_eq "$(cat "$PDIR/out")" PONG "shunt run with a broken config: PING"
else
	assert_eq "$rc" 2 "shunt run --config broken: exit status"
	note "shunt run refuses a broken --config (exit 2) instead of running the command"
fi
pass
