#!/usr/bin/env bash
# redis-cli against redis-server, both under shunt: many random keys and
# values written (--pipe, binary-safe -x, plain arguments), read back with
# MGET/GET, and compared byte for byte with the input and with the same run
# without shunt.
source "$(dirname "$0")/lib.sh"
need redis-server redis-cli python3

NKEYS=400
# Fixed inputs for both runs.
python3 - "$TMP" "$NKEYS" <<'PY'
import base64, os, random, sys
tmp, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(int.from_bytes(os.urandom(8), "little"))
keys, vals = [], []
for i in range(n):
    k = "key:%d:%s" % (i, base64.b32encode(rnd.randbytes(5)).decode())
    v = base64.b64encode(rnd.randbytes(rnd.randint(1, 15000))).decode()
    keys.append(k); vals.append(v)
def bulk(s):
    b = s.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)
with open(tmp + "/set.resp", "wb") as f:
    for k, v in zip(keys, vals):
        f.write(b"*3\r\n" + bulk("SET") + bulk(k) + bulk(v))
with open(tmp + "/keys", "w") as f:
    f.write("\n".join(keys) + "\n")
with open(tmp + "/expect.mget", "w") as f:
    f.write("".join(v + "\n" for v in vals))
PY
random_file "$TMP/bin.dat" 200000
cp "$TMP/bin.dat" "$TMP/expect.bin" && echo >>"$TMP/expect.bin"
mapfile -t KEYS <"$TMP/keys"

for MODE in plain shunt; do
	phase "$MODE"
	port=$(free_port)
	bg redis redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --protected-mode no --dir "$PDIR" --logfile ''
	rpid=$BG_PID
	wait_port "$port" "$rpid"
	cli() { runx redis-cli -h 127.0.0.1 -p "$port" "$@"; }

	cli --pipe <"$TMP/set.resp" >"$PDIR/pipe.out" 2>&1 || die "redis-cli --pipe failed ($MODE)"
	grep -q "errors: 0, replies: $NKEYS" "$PDIR/pipe.out" ||
		die "redis-cli --pipe: $(tail -n 1 "$PDIR/pipe.out") ($MODE)"
	[[ $(cli -x SET binkey <"$TMP/bin.dat") == OK ]] || die "SET -x binkey failed ($MODE)"
	for i in 1 2 3 4 5; do
		[[ $(cli SET "arg key $i" "value with spaces $i and ümlaut") == OK ]] || die "SET arg $i ($MODE)"
	done
	cli --raw MGET "${KEYS[@]}" >"$PDIR/mget.out" || die "MGET failed ($MODE)"
	cli --raw GET binkey >"$PDIR/bin.out" || die "GET binkey failed ($MODE)"
	for i in 1 2 3 4 5; do cli --raw GET "arg key $i"; done >"$PDIR/args.out"
	cli DBSIZE >"$PDIR/dbsize.out"
	assert_same_file "$PDIR/mget.out" "$TMP/expect.mget" "MGET of $NKEYS values ($MODE)"
	assert_same_file "$PDIR/bin.out" "$TMP/expect.bin" "binary value ($MODE)"
	assert_eq "$(cat "$PDIR/dbsize.out")" $((NKEYS + 6)) "DBSIZE ($MODE)"
	cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait_exit "$rpid" 20 || die "redis-server exited with status $? ($MODE)"
done

for f in mget.out bin.out args.out dbsize.out pipe.out; do
	assert_same_file "$TMP/plain/$f" "$TMP/shunt/$f" "$f plain vs shunt"
done
grep -q 'value with spaces 5 and ümlaut' "$TMP/shunt/args.out" || die "argument values not read back"

phase shunt
check_logs
assert_started redis-server
assert_started redis-cli
# one connection per redis-cli process, each in its own log file
assert_log_pids "$(conn_re 'redis-cli' client)" 14
assert_log_has "$(conn_re 'redis-server' server)" 14
assert_conn_pairs "$(log_count ': debug: conn .* role=server ')"
compat_row "redis-server + redis-cli (--pipe, -x, MGET)" "$(redis-server --version | sed -n "s/.* v=\([^ ]*\).*/\1/p")" "pass" "pass, same values"
pass
