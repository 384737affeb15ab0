#!/usr/bin/env bash
# io_uring on a connection both ends would accelerate: uring_echo (libc
# socket/accept/connect, liburing recv/send, whose system calls are inline
# and never pass through libc) against echo_server/echo_client, both ends
# under shunt, 1 MiB echoed.  The ring is made before the socket (the
# process is known to use io_uring at its first decision: its connection
# stays on TCP, its listener is never registered) or after the connection
# is established (the connection, already on shm, is demoted before the
# ring exists).  Without this the io_uring end reads the empty kernel
# socket while the bytes wait in a ring: a hang.
#
# Asserted: byte-exact echo (checked at every offset by both programs, and
# the client's SHA-256 equal to a plain run's); the io_uring end's reason
# is io-uring (decision or move line); its peer's is no-peer-shim or
# peer-demoted; no offer waited: offer_timeout_ms is set above the
# programs' time bound, so an offer left unanswered fails the run.
E2E_CMD_TIMEOUT=45
source "$(dirname "$0")/lib_shm.sh"

[[ -x "$PROGS/uring_echo" ]] || { echo "SKIP: $E2E_NAME: uring_echo not built (no liburing)"; exit 0; }
# A kernel without io_uring, or one that forbids it (io_uring_disabled):
# nothing to test.
phase probe plain
if ! "$PROGS/uring_echo" client --port 1 --ring first >"$PDIR/probe.out" 2>&1 &&
	grep -q 'io_uring_queue_init' "$PDIR/probe.out"; then
	echo "SKIP: $E2E_NAME: io_uring is not available here: $(head -n 1 "$PDIR/probe.out")"
	exit 0
fi

BYTES=1048576
SHUNT_ARGS=(--options offer_timeout_ms=60000)

# uring_server RING: uring_echo server (under MODE) + echo_client under shunt.
uring_server() {
	local ring=$1
	MODE=$SMODE
	bg server "$PROGS/uring_echo" server --port-file "$PDIR/port" --ring "$ring"
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	MODE=shunt
	runx "$PROGS/echo_client" --port "$(cat "$PDIR/port")" --conns 1 --bytes "$BYTES" --seed 5 \
		--wait block >"$PDIR/client.out" 2>"$PDIR/client.err" || die "echo_client failed"
	wait_exit "$spid" 30 || die "uring_echo server failed"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	grep -q "^PASS uring_echo server bytes=$BYTES\$" "$PDIR/server.out" || die "no PASS from uring_echo server"
}

# uring_client RING: echo_server under shunt + uring_echo client (under MODE).
uring_client() {
	local ring=$1
	MODE=shunt
	bg server "$PROGS/echo_server" --port-file "$PDIR/port" --conns 1 --wait epoll
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	MODE=$CMODE
	runx "$PROGS/uring_echo" client --port "$(cat "$PDIR/port")" --bytes "$BYTES" --seed 9 \
		--ring "$ring" >"$PDIR/client.out" 2>"$PDIR/client.err" || die "uring_echo client failed"
	wait_exit "$spid" 30 || die "echo_server failed"
	grep -q "^PASS uring_echo client bytes=$BYTES " "$PDIR/client.out" || die "no PASS from uring_echo client"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server"
}

# The references: the io_uring end plain.
shm_phase ref-server shunt
SMODE=plain uring_server first
shm_phase ref-client shunt
CMODE=plain uring_client first

# The ring made first: decided onto TCP, the listener never registered.
shm_phase server-first shunt
SMODE=shunt uring_server first
check_logs
assert_kernel_conns uring_echo server 1 io-uring
assert_kernel_conns echo_client client 1 no-peer-shim
assert_log_has 'uring_echo: info: liburing.s io_uring_queue_init.*\(io-uring\)$'
assert_log_lacks 'offer-timeout'
assert_log_lacks 'uring_echo: debug: listen fd=[0-9]+ registered'
# The process's counters (what shunt stat reads) say it too.
assert_log_has 'uring_echo: info: summary: connections shm=0 fabric=0 kernel=1 .* fallbacks io-uring=1$'
assert_same_file "$TMP/ref-server/client.out" "$PDIR/client.out" "echo_client output, plain vs shunt server"

shm_phase client-first shunt
CMODE=shunt uring_client first
check_logs
assert_kernel_conns uring_echo client 1 io-uring
assert_kernel_conns echo_server server 1 no-peer-shim
assert_log_lacks 'offer-timeout'
assert_same_file "$TMP/ref-client/client.out" "$PDIR/client.out" "uring_echo client output, plain vs shunt"

# A ring made by a bare syscall instruction before the socket: only its
# descriptor tells (the scan at the first decision); decided onto TCP.
if [[ $(uname -m) == x86_64 ]]; then
	shm_phase server-raw shunt
	SMODE=shunt uring_server raw
	check_logs
	assert_kernel_conns uring_echo server 1 io-uring
	assert_kernel_conns echo_client client 1 no-peer-shim
	assert_log_has 'uring_echo: info: an io_uring descriptor is open: .*\(io-uring\)$'
	assert_log_lacks 'offer-timeout'
	assert_same_file "$TMP/ref-server/client.out" "$PDIR/client.out" "echo_client output, plain vs raw-ring server"
fi

# The ring made once the connection is on shm: demoted before the ring
# exists, the peer follows.
shm_phase server-after shunt
SMODE=shunt uring_server after
check_logs
assert_conns shm uring_echo server 1
assert_conns shm echo_client client 1
assert_log_count "uring_echo$(moved_re shm io-uring)" 1
assert_log_count "echo_client$(moved_re shm peer-demoted)" 1
assert_log_has 'uring_echo: info: summary: .* fallbacks io-uring=1$'
assert_log_lacks 'offer-timeout'
assert_same_file "$TMP/ref-server/client.out" "$PDIR/client.out" "echo_client output, plain vs demoted server"

shm_phase client-after shunt
CMODE=shunt uring_client after
check_logs
assert_conns shm uring_echo client 1
assert_log_count "uring_echo$(moved_re shm io-uring)" 1
# The server accepts before or after the client leaves its offer: on shm
# then moved, or on TCP at once; peer-demoted either way.
n=$(($(log_count "echo_server$(moved_re shm peer-demoted)") +
	$(log_count "$(conn_re echo_server server kernel peer-demoted)")))
[[ $n -eq 1 ]] || die "echo_server: expected its connection moved or decided with peer-demoted, found $n"
assert_log_count "$(conn_re echo_server server '[a-z]+' '[a-z-]*')" 1
assert_log_lacks 'offer-timeout'
assert_same_file "$TMP/ref-client/client.out" "$PDIR/client.out" "uring_echo client output, plain vs demoted"

pass
