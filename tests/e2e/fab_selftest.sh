#!/usr/bin/env bash
# The fabric self-test (fabric/fab_selftest.c) on one provider
# (FAB_PROVIDER; FAB_EMULATE=verbs enforces the verbs provider's rules on
# it): one connection from this host to itself through the transport's own
# code, 8 MiB each way through 64 KiB rings, every byte checked.  No root
# needed (127.0.0.1).
#   - a provider the transport cannot run on: SKIP, with the reason the
#     transport gives (shunt-fabtest check)
#   - otherwise shunt-fabtest passes, and `shunt doctor
#     --fabric-selftest=PROVIDER` reports the same as an OK finding
#   - with the verbs rules: every rule was checked (the code meant for
#     verbs ran: receives posted and consumed for CQ data, contexts,
#     registered local buffers, virtual addresses, provider keys, 4-byte
#     CQ data) and none was broken
source "$(dirname "$0")/lib.sh"

: "${FABTEST:?set FABTEST (shunt-fabtest)}"
FAB_PROVIDER=${FAB_PROVIDER:-tcp}
FAB_PROVIDER=${FAB_PROVIDER//+/;} # (ctest cannot pass a ';')
FAB_EMULATE=${FAB_EMULATE:-}
E2E_NAME="$E2E_NAME[$FAB_PROVIDER${FAB_EMULATE:+ with $FAB_EMULATE rules}]"
if ! fit=$("$FABTEST" check "$FAB_PROVIDER" 2>&1); then
	echo "SKIP: $E2E_NAME: ${fit#unfit: }"
	exit 0
fi
[[ -z $FAB_EMULATE ]] || export SHUNT_FABRIC_EMULATE=$FAB_EMULATE

phase selftest shunt
out=$PDIR/report
"$FABTEST" run "$FAB_PROVIDER" 127.0.0.1 $((8 << 20)) 65536 >"$out" 2>"$PDIR/err" ||
	die "shunt-fabtest failed: $(cat "$out" "$PDIR/err" | tail -n 12)"
grep -qx 'result: PASS' "$out" || die "no PASS in the report: $(cat "$out")"
grep -qx "bytes server->client: 8388608 of 8388608 checked" "$out" || die "bytes: $(cat "$out")"
grep -qx "bytes client->server: 8388608 of 8388608 checked" "$out" || die "bytes: $(cat "$out")"
if [[ -n $FAB_EMULATE ]]; then
	rules=$(sed -n 's/^verbs rules: //p' "$out")
	[[ -n $rules ]] || die "no verbs rules line: $(cat "$out")"
	for k in recv_posted recv_taken contexts local virt keys cq_data flushed; do
		v=$(grep -oE "(^| )$k=[0-9]+" <<<"$rules" | cut -d= -f2)
		[[ ${v:-0} -gt 0 ]] || die "the code meant for verbs never ran: $k=${v:-0} ($rules)"
	done
	grep -q ' broken=0$' <<<"$rules" || die "verbs rules broken: $rules; $(cat "$PDIR/err")"
	note "verbs rules: $rules"
fi
# A warning means something went wrong on the way (a close that lost bytes).
! grep -q 'warn' "$PDIR/err" || die "warnings: $(cat "$PDIR/err")"

# The same through shunt doctor, as a user would run it and send it back.
SHUNT_FABTEST=$FABTEST "$SHUNT" doctor --fabric-selftest="$FAB_PROVIDER" >"$PDIR/doctor" 2>&1 || true
grep -E '^OK +fabric-selftest: fabric self-test passed: provider: ' "$PDIR/doctor" |
	grep -q "result: PASS" || die "shunt doctor: $(grep -i selftest "$PDIR/doctor")"
note "$(grep -o 'connected: .*' "$out" | head -n 1); $(grep -o 'ring: .*' "$out")"
pass
