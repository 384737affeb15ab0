#!/usr/bin/env bash
# Who may take a fabric connection: only the server the client connected to.
# Two "hosts" (network namespaces joined by veth, 198.18.0.0/15) as in
# fab_e2e.sh.  Subtests (E2E_ONLY=... runs some):
#   source    the server's host has two addresses and its route to the
#             client picks the other one as source: the server's endpoint
#             is bound to the address the client connected to, so the
#             client, which takes connection requests from that address
#             only, still gets its connection on fabric
#   replay    a third party that saw an offer go to the server's agent (a
#             fake agent on B that answers "filed" and keeps it) connects to
#             the client's passive endpoint first, from another address on
#             B's link, with the offer's token: as the first protocol sent
#             it, and as the current one would with the token as its key
#             (no agent secret).  Both are refused; the client, whose server
#             never connects back, replays over TCP at offer_timeout_ms:
#             every byte arrives, once
source "$(dirname "$0")/lib_fabric.sh"

: "${FAB_CONNREQ:?set FAB_CONNREQ (tests/agent/fab_connreq)}"
ADDR_B2=198.18.0.3

# The veth end in B's namespace.
veth_b() { ip -n "$NSB" -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1; }

t_source() {
	fab_hosts
	fab_phase source shunt
	local dev
	dev=$(veth_b)
	ip -n "$NSB" addr add "$ADDR_B2/24" dev "$dev"
	ip -n "$NSB" route change 198.18.0.0/24 dev "$dev" src "$ADDR_B2"
	agent_on A
	agent_on B
	echo_a_to_b 300000
	check_logs
	assert_conns fabric echo_client client 2
	assert_conns fabric echo_server server 2
	assert_log_lacks 'connection request refused'
	note "the server's route leaves from $ADDR_B2: its endpoint still connects back from $ADDR_B"
}

# A fake agent: answers every OFFER "filed" (nothing is), prints it
# ("offer token=HEX port=P ring=N") and keeps the link open.
FAKE_AGENT='
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(8)
print("listening", flush=True)
conns = []
while True:
    c, _ = s.accept()
    conns.append(c)
    buf = b""
    while True:
        while len(buf) < 8:
            d = c.recv(4096)
            if not d:
                break
            buf += d
        if len(buf) < 8:
            break
        n = struct.unpack(">I", buf[4:8])[0]
        while len(buf) < 8 + n:
            buf += c.recv(4096)
        t, body, buf = buf[3], buf[8:8 + n], buf[8 + n:]
        if t != 7:  # OFFER
            break
        token = body[36:52].hex()
        addr = body[92:92 + struct.unpack(">I", body[88:92])[0]]
        ring = struct.unpack(">Q", body[220:228])[0]
        print("offer token=%s port=%d ring=%d" % (token, int.from_bytes(addr[2:4], "big"), ring),
              flush=True)
        c.sendall(b"SD\x02\x08\x00\x00\x00\x01\x00")  # OFFER_ANSWER ok
'

t_replay() {
	need python3
	fab_hosts
	fab_phase replay shunt
	local dev
	dev=$(veth_b)
	ip -n "$NSB" addr add "$ADDR_B2/24" dev "$dev"
	# The client waits long for its server: the third party's window.
	SHUNT_ARGS=(--options "$FAB_OPTS,offer_timeout_ms=8000")
	agent_on A
	MODE=plain
	on_bg B agent python3 -c "$FAKE_AGENT" "$ADDR_B" 7476
	local apid=$BG_PID
	wait_file "$PDIR/agent.out" "$apid"
	on_bg B server "$PROGS/echo_server" --host "$ADDR_B" --port-file "$PDIR/port" --conns 1
	local spid=$BG_PID
	wait_file "$PDIR/port" "$spid"
	MODE=shunt
	on_bg A client "$PROGS/echo_client" --host "$ADDR_B" --port "$(port_of)" --conns 1 \
		--bytes 500000
	local cpid=$BG_PID i line
	for ((i = 0; i < 300; i++)); do
		line=$(grep '^offer ' "$PDIR/agent.out" || true)
		[[ -n $line ]] && break
		kill -0 "$cpid" 2>/dev/null || die "echo_client ended before it offered: $(tail -n 3 "$PDIR/client.err")"
		sleep 0.05
	done
	[[ -n $line ]] || die "no offer reached the fake agent"
	local token port ring
	read -r token port ring < <(sed -n 's/^offer token=\([0-9a-f]*\) port=\([0-9]*\) ring=\([0-9]*\)$/\1 \2 \3/p' <<<"$line")
	local rc=0
	ip netns exec "$NSB" env SHUNT_CONFIG=/dev/null "$FAB_CONNREQ" "$ADDR_A" "$port" "$token" \
		"$ring" "$ADDR_B2" >"$PDIR/connreq.out" 2>"$PDIR/connreq.err" || rc=$?
	[[ $rc -ne 2 ]] || die "fab_connreq could not run: $(cat "$PDIR/connreq.err")"
	[[ $rc -eq 0 ]] || die "the client took a stranger's connection request: $(tr '\n' ' ' <"$PDIR/connreq.out")"
	wait_exit "$cpid" 30 || die "echo_client failed: $(tail -n 3 "$PDIR/client.err")"
	wait_exit "$spid" 30 || die "echo_server failed"
	grep -q '^PASS echo_client' "$PDIR/client.out" || die "no PASS from echo_client"
	grep -q '^PASS echo_server' "$PDIR/server.out" || die "no PASS from echo_server"
	stop "$apid"
	check_logs
	assert_log_has 'echo_client: info: fabric: connection request refused: (not our connection data|not from the server.s address)$' 2
	assert_log_count "echo_client$(moved_re fabric offer-timeout)" 1
	note "a third party with the offer's token: $(tr '\n' ' ' <"$PDIR/connreq.out")- the client replayed over TCP, every byte once"
}

subtest source t_source
subtest replay t_replay
finish_subtests
