#!/usr/bin/env bash
# Fabric offers countersigned by the client's own agent (issue 14): with
# countersign_key_file on both agents, the server's agent files only offers
# the client's agent signed, and the client's agent signs only for a
# process that passes it a TCP socket holding the offer's client end.  Two
# "hosts" (network namespaces joined by veth, 198.18.0.0/15) as in
# fab_e2e.sh.  Subtests (E2E_ONLY=... runs some):
#   signed   a shunt client and server: every connection on fabric, every
#            byte right; the client's agent signed each offer, the server's
#            agent held each, none refused
#   forged   someone on the client's address (a test program, as root, in
#            A) files offers for a connection it does not hold, whose client
#            runs without shunt: asked to sign with a socket bound to
#            another port, or with none, or garbage fds, A's agent refuses
#            (and keeps no fd); the offer unsigned and one with a made-up
#            signature are refused and counted by B's agent; the server takes
#            the kernel path (no-peer-shim) and echoes every byte
#   nokey    only the server's agent has the key: the client's offers go
#            unsigned, are refused, and the connections take TCP
#            (declined / no-peer-shim) at once, every byte right
# What the forged subtest guards against, on an agent without the check
# (e.g. main before this: SHUNTD_B=/path/to/old/shuntd AGENT_PROTO=1
# CSIGN_B_KEY=0): the forged offer is held, and the subtest fails.
source "$(dirname "$0")/lib_fabric.sh"

AGENT_PROTO=${AGENT_PROTO:-2}
CSIGN_B_KEY=${CSIGN_B_KEY:-1}

# csign_setup [A] [B]: a key file, named in the configuration of the hosts
# given.
csign_setup() {
	KEY=$PDIR/countersign.key
	head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$KEY"
	chmod 600 "$KEY"
	local h
	for h in "$@"; do
		[[ $h == B && $CSIGN_B_KEY == 0 ]] && continue
		[[ $h == A ]] && echo "countersign_key_file = $KEY" >>"$CONF_A"
		[[ $h == B ]] && echo "countersign_key_file = $KEY" >>"$CONF_B"
	done
	return 0
}

# agent_with A|B: agent_on, with SHUNTD_B for B's when set.
agent_with() {
	if [[ $1 == B && -n ${SHUNTD_B:-} ]]; then
		local keep=$SHUNTD
		SHUNTD=$SHUNTD_B
		agent_on B
		SHUNTD=$keep
	else
		agent_on "$1"
	fi
}

# metric A|B NAME [LABELS]: the value of one sample of that host's /metrics.
metric() {
	local ns addr key=$2
	[[ $1 == A ]] && ns=$NSA addr=$ADDR_A || ns=$NSB addr=$ADDR_B
	[[ -n $3 ]] && key="$2{$3}"
	ip netns exec "$ns" curl -s "http://$addr:7476/metrics" |
		KEY=$key awk '$1 == ENVIRON["KEY"] {print $2; f = 1} END {if (!f) print "none"}'
}
assert_metric() {
	local v
	v=$(metric "$1" "$2" "$3")
	[[ $v == "$4" ]] || die "host $1: $2{$3} is $v, expected $4"
}

t_signed() {
	need curl
	fab_hosts
	fab_phase signed shunt
	csign_setup A B
	agent_with A
	agent_with B
	assert_metric A shuntd_countersign_required '' 1
	echo_a_to_b 300000
	check_logs
	assert_conns fabric echo_client client 2
	assert_conns fabric echo_server server 2
	assert_close fabric echo_client 300000 300000 2
	assert_log_lacks 'not countersigned'
	assert_metric A shuntd_countersigns_total 'result="signed"' 2
	assert_metric A shuntd_countersigns_total 'result="refused"' 0
	assert_metric B shuntd_offers_total 'result="held"' 2
	assert_metric B shuntd_offers_total 'result="unsigned"' 0
	assert_metric B shuntd_offers_total 'result="badsig"' 0
	assert_metric B shuntd_takes_total 'result="taken"' 2
	note "two connections on fabric, each offer countersigned by A's agent and held by B's"
}

# The filer: speaks the agent protocol itself.  argv: version, A's
# agent.sock, the victim's client port, the server's port.  Prints one line
# per request with the answer's status.  (The version is that of the offers
# to B's agent, which may be another build's; A's is this one's.)
FILER='
import os, socket, struct, sys
ver, usock, cport, sport = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
A, B = "198.18.0.1", "198.18.0.2"
def mapped(ip): return b"\0" * 10 + b"\xff\xff" + socket.inet_aton(ip)
def frame(t, body, v=2): return b"SD" + bytes([v, t]) + struct.pack(">I", len(body)) + body
def offer(csig=b"", ver=2):
    # The endpoint named: on the client address, the filer'"'"'s own.
    ep = struct.pack("<H", socket.AF_INET) + struct.pack(">H", 45000) + socket.inet_aton(A)
    body = (mapped(A) + mapped(B) + struct.pack(">HH", cport, sport) + b"filer-token-0016" +
            b"tcp".ljust(32, b"\0") + struct.pack(">II", 2, 16) + ep.ljust(128, b"\0") +
            struct.pack(">Q", 1 << 20))
    return body + csig.ljust(32, b"\0") if ver >= 2 else body
def answer(s):
    buf = b""
    while len(buf) < 8 or len(buf) < 8 + struct.unpack(">I", buf[4:8])[0]:
        d = s.recv(4096)
        if not d:
            return "closed"
        buf += d
    return "type=%d status=%d" % (buf[3], buf[8])
def ask_local(fds, t=14, body=None):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(usock)
    socket.send_fds(s, [frame(t, body if body is not None else offer())], fds)
    r = answer(s)
    s.close()
    return r
# 1. Sign, with a TCP socket of ours bound to another port.
other = socket.socket()
other.bind((A, cport + 1))
print("sign-elsewhere", ask_local([other.fileno()]), flush=True)
# 2. Sign with no socket; with garbage fds (a pipe, /dev/null, a UDP socket
# bound to the port); a TAKE with an fd.
print("sign-nofd", ask_local([]), flush=True)
r, w = os.pipe()
dn = os.open("/dev/null", os.O_RDONLY)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind((A, cport))
print("sign-garbage", ask_local([r, w, dn]), flush=True)
print("sign-udp", ask_local([udp.fileno()]), flush=True)
take = mapped(A) + mapped(B) + struct.pack(">HH", cport, sport)
print("take-fd", ask_local([other.fileno()], 12, take), flush=True)
# 3. The offer to B'"'"'s agent: unsigned, then with a made-up signature.
for name, csig in (("offer-unsigned", b""), ("offer-badsig", os.urandom(32))):
    s = socket.create_connection((B, 7476), timeout=5)
    s.sendall(frame(7, offer(csig, ver), ver))
    print(name, answer(s), flush=True)
    s.close()
'

# The victim: a client without shunt, from ADDR_A:PORT, that sends N bytes
# and checks they come back.
VICTIM='
import socket, sys, hashlib
port, sport, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket()
s.bind(("198.18.0.1", port))
s.connect(("198.18.0.2", sport))
data = bytes((i * 7 + 3) & 0xff for i in range(n))
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    got += d
assert got == data, (len(got), len(data))
print("PASS victim bytes=%d" % n)
'

t_forged() {
	need python3 curl
	fab_hosts
	fab_phase forged shunt
	csign_setup A B
	agent_with A
	agent_with B
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns 1
	local spid=$BG_PID sport cport=40123
	wait_file "$PDIR/port" "$spid"
	sport=$(port_of)
	local apid fds0 fds1
	apid=$(bg_prog_pid "$AGENT_PID_A")
	[[ -n $apid && -d /proc/$apid ]] || die "no pid for A's agent"
	fds0=$(ls "/proc/$apid/fd" | wc -l)
	ip netns exec "$NSA" python3 -c "$FILER" "$AGENT_PROTO" "$RUN_A/agent.sock" "$cport" "$sport" \
		>"$PDIR/filer.out" 2>"$PDIR/filer.err" || die "the filer failed: $(tail -n 3 "$PDIR/filer.err")"
	note "filer: $(tr '\n' ';' <"$PDIR/filer.out")"
	local want
	for want in 'sign-elsewhere type=15 status=2' 'sign-nofd type=15 status=2' \
		'sign-garbage type=15 status=2' 'sign-udp type=15 status=2' \
		'take-fd type=13 status=3'; do
		grep -qx "$want" "$PDIR/filer.out" || die "A's agent: expected '$want'"
	done
	grep -qx 'offer-unsigned type=8 status=2' "$PDIR/filer.out" ||
		die "B's agent held an offer nobody countersigned: $(grep offer-unsigned "$PDIR/filer.out")"
	grep -qx 'offer-badsig type=8 status=2' "$PDIR/filer.out" ||
		die "B's agent held an offer with a made-up countersignature: $(grep offer-badsig "$PDIR/filer.out")"
	# Every fd passed was closed (the filer has exited: its own copies are gone).
	fds1=$(ls "/proc/$apid/fd" | wc -l)
	[[ $fds1 -eq $fds0 ]] || die "A's agent holds $fds1 fds, $fds0 before the filer: $(ls -l "/proc/$apid/fd")"
	assert_metric A shuntd_countersigns_total 'result="refused"' 4
	assert_metric A shuntd_countersigns_total 'result="signed"' 0
	assert_metric B shuntd_offers_total 'result="unsigned"' 1
	assert_metric B shuntd_offers_total 'result="badsig"' 1
	assert_metric B shuntd_offers_total 'result="held"' 0
	grep -q "countersign for port $cport refused to pid [0-9]* uid 0: not bound to the offer" \
		"$PDIR/shuntd-A.err" || die "A's agent did not log the refusal"
	# The connection the offers named: its client has no shunt.
	ip netns exec "$NSA" python3 -c "$VICTIM" "$cport" "$sport" 200000 >"$PDIR/victim.out" \
		2>"$PDIR/victim.err" || die "the victim's client failed: $(tail -n 3 "$PDIR/victim.err")"
	grep -q '^PASS victim bytes=200000' "$PDIR/victim.out" || die "no PASS from the victim"
	wait_exit "$spid" 30 || die "echo_server failed"
	grep -q '^PASS echo_server conns=1' "$PDIR/server.out" || die "no PASS from echo_server"
	check_logs
	assert_kernel_conns echo_server server 1 no-peer-shim
	grep -q '^conn bytes=200000 ' "$PDIR/server.out" || die "echo_server did not echo 200000 bytes"
	assert_metric B shuntd_takes_total 'result="taken"' 0
	note "offers for $ADDR_A:$cport, which the filer does not hold, refused; the server stayed on TCP"
}

t_nokey() {
	need curl
	fab_hosts
	fab_phase nokey shunt
	csign_setup B
	agent_with A
	agent_with B
	assert_metric A shuntd_countersign_required '' 0
	echo_a_to_b 100000
	check_logs
	assert_kernel_conns echo_client client 2 declined
	assert_kernel_conns echo_server server 2 no-peer-shim
	assert_log_count 'echo_client: debug: fabric: offer not countersigned' 2
	assert_metric A shuntd_countersigns_total 'result="no_key"' 2
	assert_metric B shuntd_offers_total 'result="unsigned"' 2
	assert_metric B shuntd_offers_total 'result="held"' 0
	note "A's agent has no key: both offers unsigned, refused by B's agent, both connections on TCP"
}

subtest signed t_signed
subtest forged t_forged
subtest nokey t_nokey
finish_subtests
