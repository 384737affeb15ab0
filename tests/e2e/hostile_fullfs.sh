#!/usr/bin/env bash
# A full runtime directory (issue: a file in tmpfs sized with ftruncate is a
# hole, and touching a page of it when the filesystem is full raises SIGBUS
# in the application).  Root: mounts small tmpfs filesystems as the rundir.
#   full   a 256 KiB tmpfs filled to the last block: every connection stays
#          on TCP, nothing crashes, every byte arrives.
#   small  a 1 MiB tmpfs with room for the counters but not for the rings
#          of 1 MiB: ring-alloc, then TCP; 3 MiB each way, checked.
#   fits   the same tmpfs with 64 KiB rings: shm, 3 MiB each way, and the
#          memory the rings use was reserved before it was touched.
# Every run must end with exit status 0 at both ends: a signal would show
# as 128+N.
source "$(dirname "$0")/lib.sh"
need mount umount
[[ $(id -u) -eq 0 ]] || { echo "SKIP: $E2E_NAME needs root (mount)"; exit 0; }

MNTS=()
cleanup_mounts() { local m; for m in "${MNTS[@]}"; do umount -l "$m" 2>/dev/null; done; }
trap 'e2e_rc=$?; cleanup_mounts; (exit $e2e_rc); _cleanup' EXIT

mount_tmpfs() { # DIR SIZE
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2,mode=0700" tmpfs "$1" || die "mount tmpfs $2 on $1"
	MNTS+=("$1")
}

# run_pair PHASE BYTES [shunt options]: echo_server + echo_client (2
# connections of BYTES each way) under shunt with the phase's rundir.
run_pair() {
	local bytes=$1
	shift
	SHUNT_ARGS=(--options "log=debug${1:+,$1}")
	port=$(free_port)
	bg server "$PROGS/echo_server" --port "$port" --conns 2
	local spid=$BG_PID
	wait_port "$port" "$spid"
	runx "$PROGS/echo_client" --port "$port" --conns 2 --bytes "$bytes" >"$PDIR/client.out" \
		2>"$PDIR/client.err"
	local rc=$?
	[[ $rc -eq 0 ]] || die "echo_client exited with status $rc ($PHASE)"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client ($PHASE)"
	wait_exit "$spid" 30
	rc=$?
	[[ $rc -eq 0 ]] || die "echo_server exited with status $rc ($PHASE)"
	unset SHUNT_ARGS
}

phase full shunt
mount_tmpfs "$RUNDIR" 256k
# Fill it to the last block.
dd if=/dev/zero of="$RUNDIR/filler" bs=4k 2>/dev/null || true
[[ $(stat -f -c %a "$RUNDIR") -eq 0 ]] || die "the tmpfs still has free blocks"
run_pair 200000 || true
# Nothing could be made there: no decision can say shm.
assert_log_lacks ' transport=shm '
note "full: no SIGBUS, every byte arrived over TCP"

phase small shunt
mount_tmpfs "$RUNDIR" 1m
run_pair 3000000 "ring_size=1m" || true
assert_log_lacks ' transport=shm '
assert_log_has "$(conn_re echo_client client kernel ring-alloc)" 1
note "small: 1 MiB rings do not fit, ring-alloc, TCP"

phase fits shunt
mount_tmpfs "$RUNDIR" 1m
run_pair 3000000 "ring_size=64k" || true
assert_log_count "$(conn_re echo_client client shm)" 2
assert_log_count "$(conn_re echo_server server shm)" 2
note "fits: 64 KiB rings, shm, 3 MB each way"
pass
