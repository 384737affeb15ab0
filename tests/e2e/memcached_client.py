#!/usr/bin/env python3
"""memcached_client.py PORT N: a memcached text-protocol client (the socket
module only, so it is a plain program for shunt): N random values set,
read back (single and multi get), checked; prints
"PASS memcached values=N bytes=B sha256=H".  Used by shm_programs.sh and
e2e_server_user.sh."""
import hashlib, os, random, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(int.from_bytes(os.urandom(8), "little"))
s = socket.create_connection(("127.0.0.1", port))
buf = b""
def line():
    global buf
    while b"\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise SystemExit("FAIL: memcached closed the connection")
        buf += d
    l, buf = buf.split(b"\r\n", 1)
    return l
def exact(k):
    global buf
    while len(buf) < k:
        d = s.recv(65536)
        if not d:
            raise SystemExit("FAIL: memcached closed the connection")
        buf += d
    b, buf = buf[:k], buf[k:]
    return b
def get_many(keys):
    s.sendall(b"get " + b" ".join(keys) + b"\r\n")
    got = {}
    while True:
        l = line()
        if l == b"END":
            return got
        _, k, flags, size = l.split()
        got[k] = (int(flags), exact(int(size)))
        if exact(2) != b"\r\n":
            raise SystemExit("FAIL: no CRLF after a value")
vals = {}
for i in range(n):
    k = b"key:%d:%x" % (i, rnd.getrandbits(32))
    v = rnd.randbytes(rnd.choice([1, 10, 100, 1000, 10000, 100000, rnd.randint(1, 500000)]))
    vals[k] = (i, v)
    s.sendall(b"set %s %d 0 %d\r\n" % (k, i, len(v)) + v + b"\r\n")
    r = line()
    if r != b"STORED":
        raise SystemExit("FAIL: set %r: %r" % (k, r))
for k, (i, v) in vals.items():
    got = get_many([k])
    if got.get(k) != (i, v):
        raise SystemExit("FAIL: get %r: wrong value" % k)
keys = list(vals)
for j in range(0, len(keys), 50):
    got = get_many(keys[j:j + 50])
    for k in keys[j:j + 50]:
        if got.get(k) != vals[k]:
            raise SystemExit("FAIL: multi-get %r: wrong value" % k)
s.sendall(b"get no:such:key\r\n")
if line() != b"END":
    raise SystemExit("FAIL: a missing key returned something")
total = sum(len(v) for _, v in vals.values())
h = hashlib.sha256(b"".join(v for _, v in vals.values())).hexdigest()
s.close()
print("PASS memcached values=%d bytes=%d sha256=%s" % (n, total, h))
