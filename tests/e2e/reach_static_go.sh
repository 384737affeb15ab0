#!/usr/bin/env bash
# Programs LD_PRELOAD cannot reach: Go programs (the runtime makes its own
# system calls; built here with and without cgo) and statically linked C
# programs (no PT_INTERP), each as server and as client against a peer
# under shunt, every program started with `shunt run`.
#
# Asserted: the echo byte-exact (echo_client checks every offset; the Go
# client's output file equals its input); `shunt run` said on stderr, before
# the program ran, that it cannot be accelerated and why; the shunt peer's
# connection is on TCP with no-peer-shim and no offer waited
# (offer_timeout_ms is set above the programs' time bound, so an offer left
# unanswered fails the run); `shunt doctor --program` gives program-go,
# program-static, or program for a dynamically linked C program.
E2E_CMD_TIMEOUT=45
source "$(dirname "$0")/lib_shm.sh"

GODIR=$PROGS/go
mkdir -p "$GODIR"
if command -v go >/dev/null 2>&1; then
	# No network, a cache of the build tree's own.
	for v in "cgo 1" "nocgo 0"; do
		read -r name cgo <<<"$v"
		env GOCACHE="$GODIR/cache" GOPATH="$GODIR/path" GOPROXY=off GOFLAGS= GO111MODULE=off \
			CGO_ENABLED="$cgo" go build -o "$GODIR/goecho_$name" "$E2E_DIR/../progs/go/goecho.go" \
			>"$TMP/go-$name.log" 2>&1 || die "go build ($name) failed: $(tail -n 5 "$TMP/go-$name.log")"
	done
	GOS=(goecho_cgo goecho_nocgo)
else
	note "no go: the Go cases are skipped"
	GOS=()
fi
[[ -x "$PROGS/echo_server_static" ]] || note "no static libc: the static C cases are skipped"

BYTES=1048576
SHUNT_ARGS=(--options offer_timeout_ms=60000)
random_file "$TMP/in" "$BYTES"

# said_unreachable WHAT: shunt run's line on the program's stderr ($1: file).
said_unreachable() {
	grep -Eq "^shunt: .* cannot be accelerated: .*$2" "$1" ||
		die "shunt run did not say the program cannot be accelerated ($2): $(head -n 3 "$1")"
}

# A reference: echo_client against echo_server, both plain.
phase ref plain
bg server "$PROGS/echo_server" --port-file "$PDIR/port" --conns 1 --wait thread
spid=$BG_PID
wait_file "$PDIR/port" "$spid"
runx "$PROGS/echo_client" --port "$(cat "$PDIR/port")" --conns 1 --bytes "$BYTES" --seed 11 \
	--wait block >"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed (ref)"
wait_exit "$spid" 30 || die "echo_server failed (ref)"

# unreachable_server NAME WHAT PROG ARGS...: PROG (under shunt run) serves
# echo_client (under shunt); @PDIR@ in ARGS is the phase's directory.
unreachable_server() {
	local name=$1 what=$2 a=() x
	shift 2
	shm_phase "server-$name" shunt
	for x in "$@"; do a+=("${x//@PDIR@/$PDIR}"); done
	bg server "${a[@]}"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	runx "$PROGS/echo_client" --port "$(cat "$PDIR/port")" --conns 1 --bytes "$BYTES" --seed 11 \
		--wait block >"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed ($name)"
	wait_exit "$spid" 30 || die "the server failed ($name)"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client ($name)"
	assert_same_file "$TMP/ref/client.out" "$PDIR/client.out" "echo_client output, plain vs $name"
	said_unreachable "$PDIR/server.err" "$what"
	check_logs
	assert_kernel_conns echo_client client 1 no-peer-shim
	assert_log_lacks 'offer-timeout'
	assert_log_lacks ' role=server '
}

# unreachable_client NAME WHAT PROG ARGS...: PROG (under shunt run) is the
# client of echo_server (under shunt); @PORT@ and @PDIR@ in ARGS are filled in.
unreachable_client() {
	local name=$1 what=$2
	shift 2
	shm_phase "client-$name" shunt
	bg server "$PROGS/echo_server" --port-file "$PDIR/port" --conns 1 --wait epoll
	local spid=$BG_PID a=() x
	wait_file "$PDIR/port" "$spid"
	for x in "$@"; do
		x=${x//@PDIR@/$PDIR}
		a+=("${x//@PORT@/$(cat "$PDIR/port")}")
	done
	runx "${a[@]}" >"$PDIR/client.out" 2>"$PDIR/client.err" || die "the client failed ($name)"
	wait_exit "$spid" 30 || die "echo_server failed ($name)"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server ($name)"
	said_unreachable "$PDIR/client.err" "$what"
	check_logs
	assert_kernel_conns echo_server server 1 no-peer-shim
	assert_log_lacks 'offer-timeout'
	assert_log_lacks ' role=client '
}

for g in "${GOS[@]}"; do
	unreachable_server "$g" 'is a Go program' "$GODIR/$g" server @PDIR@/port 1
	grep -q "^PASS goecho server conns=1 bytes=$BYTES\$" "$PDIR/server.out" || die "no PASS from $g server"
	unreachable_client "$g" 'is a Go program' "$GODIR/$g" client @PORT@ "$TMP/in" @PDIR@/echoed
	grep -q "^PASS goecho client bytes=$BYTES\$" "$PDIR/client.out" || die "no PASS from $g client"
	assert_same_file "$TMP/in" "$PDIR/echoed" "what $g sent and what came back"
done

if [[ -x "$PROGS/echo_server_static" ]]; then
	unreachable_server static 'statically linked \(no PT_INTERP\)' \
		"$PROGS/echo_server_static" --port-file @PDIR@/port --conns 1 --wait epoll
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server_static"
	unreachable_client static 'statically linked \(no PT_INTERP\)' \
		"$PROGS/echo_client_static" --port @PORT@ --conns 1 --bytes "$BYTES" --seed 11 --wait block
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client_static"
	assert_same_file "$TMP/ref/client.out" "$PDIR/client.out" "echo_client_static output, plain vs shunt peer"
fi

# shunt doctor --program gives the same answer.
phase doctor shunt
doctor_says() {
	local prog=$1 level=$2 code=$3 rc=0
	env "SHUNT_RUNDIR=$RUNDIR" "$SHUNT" doctor --config "$EMPTY_CONF" --program "$prog" \
		>"$PDIR/doctor.out" 2>&1 || rc=$?
	grep -Eq "^$level +$code: " "$PDIR/doctor.out" ||
		die "shunt doctor --program $prog: no '$level $code' finding: $(grep -i program "$PDIR/doctor.out")"
	[[ $level != FAIL || $rc -eq 1 ]] || die "shunt doctor --program $prog: exit $rc with a FAIL"
}
doctor_says "$PROGS/echo_server" OK program
for g in "${GOS[@]}"; do
	doctor_says "$GODIR/$g" FAIL program-go
done
if [[ -x "$PROGS/echo_server_static" ]]; then
	doctor_says "$PROGS/echo_server_static" FAIL program-static
fi
# A dynamically linked program under shunt run says nothing of the kind.
grep -q 'cannot be accelerated' "$TMP"/server-*/client.err "$TMP"/client-*/server.err 2>/dev/null &&
	die "shunt run said a dynamically linked program cannot be accelerated"
pass
