#!/usr/bin/env python3
"""End-to-end tests of shuntd and the remote rendezvous (issue 4).

    agent_e2e.py protocol|hostile|secret|metrics|health|group|netns

Environment (set by ctest): SHUNTD, RDV_PROBE, SHUNT_LIB, PROGS.

The protocol is spoken here by an independent implementation (Python's
struct, hmac, hashlib), so these tests also check the C encoder, decoder and
SHA-256 against another one.  Prints "FAIL: ..." and exits 1 on failure.
"""
import hashlib
import hmac
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

SHUNTD = os.environ.get("SHUNTD", "")
RDV_PROBE = os.environ.get("RDV_PROBE", "")
SHUNT_LIB = os.environ.get("SHUNT_LIB", "")
PROGS = os.environ.get("PROGS", "")
NAME = "agent_" + (sys.argv[1] if len(sys.argv) > 1 else "?")

(HELLO, CHALLENGE, AUTH, AUTH_OK, QUERY, QUERY_ANSWER, OFFER, OFFER_ANSWER, ERROR, RELAY,
 RELAY_ANSWER, TAKE, TAKE_ANSWER) = range(1, 14)
E_VERSION, E_MALFORMED, E_OVERSIZED, E_AUTH, E_UNEXPECTED, E_BUSY = range(1, 7)
NOBODY = 65534
CLEANUP = []
PROCS = []  # killed at exit, so no child outlives a failed test
AGENTS = []  # their logs are shown when a test fails


def fail(msg):
    print(f"FAIL: {NAME}: {msg}", flush=True)
    for a in AGENTS:
        print(f"--- shuntd log (last 20 lines)\n" + "\n".join(a.log().splitlines()[-20:]))
    raise SystemExit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def note(msg):
    print(f"[{NAME}] {msg}", flush=True)


# ---- the wire protocol, written independently of agent/agent_proto.c ------

PROTO_VERSION = 2


def frame(mtype, body, version=PROTO_VERSION, length=None):
    n = len(body) if length is None else length
    return b"SD" + bytes([version, mtype]) + struct.pack(">I", n) + body


def mapped(ip):
    if ":" in ip:
        return socket.inet_pton(socket.AF_INET6, ip)
    return b"\0" * 10 + b"\xff\xff" + socket.inet_aton(ip)


def query_body(ip, port):
    return mapped(ip) + struct.pack(">H", port)


def offer_body(cip, cport, sip, sport, token=b"python-token-16!", addrlen=16, ring=65536,
               provider=b"tcp", csig=b""):
    return (mapped(cip) + mapped(sip) + struct.pack(">HH", cport, sport) + token +
            provider.ljust(32, b"\0") + struct.pack(">II", 2, addrlen) +
            (b"\x02" * min(addrlen, 128)).ljust(128, b"\0") + struct.pack(">Q", ring) +
            csig.ljust(32, b"\0"))


def mac(secret, label, a, b):
    return hmac.new(secret, label + b"\0" + a + b, hashlib.sha256).digest()


class Conn:
    def __init__(self, addr, timeout=3.0):
        if isinstance(addr, str):
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(addr)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def recv_frame(self):
        """(type, body), or None when the agent closed."""
        while True:
            if len(self.buf) >= 8:
                check(self.buf[:3] == b"SD" + bytes([PROTO_VERSION]), f"bad frame header {self.buf[:8]!r}")
                n = struct.unpack(">I", self.buf[4:8])[0]
                if len(self.buf) >= 8 + n:
                    t, body = self.buf[3], self.buf[8:8 + n]
                    self.buf = self.buf[8 + n:]
                    return t, body
            d = self.s.recv(4096)
            if not d:
                return None
            self.buf += d

    def closed(self, timeout=3.0):
        """True when the agent closes the connection within timeout."""
        self.s.settimeout(timeout)
        try:
            while True:
                d = self.s.recv(4096)
                if not d:
                    return True
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.s.close()

    def request(self, mtype, body):
        self.send(frame(mtype, body))
        return self.recv_frame()


def authenticate(c, secret):
    cn = os.urandom(32)
    t, sn = c.request(HELLO, cn)
    check(t == CHALLENGE and len(sn) == 32, "no CHALLENGE for HELLO")
    r = c.request(AUTH, mac(secret, b"shuntd-client", sn, cn))
    return r, mac(secret, b"shuntd-agent", cn, sn)


# ---- processes --------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Agent:
    def __init__(self, rundir, port, conf_extra="", ns=None, listen=None):
        self.rundir, self.port, self.ns = rundir, port, ns
        self.conf = os.path.join(tempfile.mkdtemp(prefix="shuntd-conf-"), "shunt.conf")
        CLEANUP.append(os.path.dirname(self.conf))
        with open(self.conf, "w") as f:
            f.write(f"rundir = {rundir}\nagent_port = {port}\nagent_timeout_ms = 250\n"
                    + conf_extra)
        cmd = [SHUNTD, "--config", self.conf, "-v"]
        if listen:
            cmd += ["--listen", listen]
        if ns:
            cmd = ["ip", "netns", "exec", ns] + cmd
        self.err = open(self.conf + ".err", "w+")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHUNT_")}
        self.p = subprocess.Popen(cmd, stderr=self.err, stdout=subprocess.DEVNULL, env=env)
        PROCS.append(self.p)
        AGENTS.append(self)
        self.addr = (listen or "127.0.0.1", port)
        self.wait_ready()

    def wait_ready(self):
        sock = os.path.join(self.rundir, "agent.sock")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            check(self.p.poll() is None, f"shuntd exited: {self.log()}")
            if os.path.exists(sock) and "serving on" in self.log():
                return
            time.sleep(0.02)
        fail("shuntd did not start")

    def log(self):
        self.err.seek(0)
        return self.err.read()

    scrapes = 0

    def get(self, path):
        """GET path on the agent port: (head, body); the whole answer up
        to the agent's close, Content-Length checked."""
        req = f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode()
        if self.ns:
            out = subprocess.run(["ip", "netns", "exec", self.ns, "python3", "-c",
                                  "import socket,sys;s=socket.create_connection(sys.argv[1:3]);"
                                  "s.sendall(sys.argv[3].encode());"
                                  "d=b''\nwhile True:\n x=s.recv(65536)\n if not x: break\n d+=x\n"
                                  "sys.stdout.buffer.write(d)", self.addr[0], str(self.port),
                                  req.decode()],
                                 capture_output=True, timeout=10).stdout
        else:
            c = Conn(self.addr)
            c.send(req)
            out = b""
            while True:
                d = c.s.recv(65536)
                if not d:
                    break
                out += d
            c.close()
        head, _, body = out.partition(b"\r\n\r\n")
        m = re.search(rb"Content-Length: (\d+)", head)
        check(m and int(m.group(1)) == len(body), f"GET {path}: Content-Length does not match the body")
        return head, body

    def metrics(self):
        self.scrapes += 1
        head, body = self.get("/metrics")
        check(head.startswith(b"HTTP/1.1 200 OK"), f"/metrics answered {head[:40]!r}")
        text = body.decode()
        samples = check_exposition(text)
        promtool(text)
        return samples

    def stop(self):
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail("shuntd did not exit within 5 s of SIGTERM")
        return rc, time.monotonic() - t0


def as_user(uid, groups=()):
    """preexec_fn: become uid (its own primary group), with groups."""
    def become():
        os.setgroups(list(groups))
        os.setgid(uid)
        os.setuid(uid)
    return become if uid else None


def listener(rundir, host, uid=None, ns=None, groups=(), env_extra=None):
    """echo_server under libshunt (a live shunt listener); returns (proc, port)."""
    pf = os.path.join(tempfile.mkdtemp(prefix="shuntd-port-"), "port")
    CLEANUP.append(os.path.dirname(pf))
    os.chmod(os.path.dirname(pf), 0o777)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_PRELOAD": SHUNT_LIB,
           "SHUNT_RUNDIR": rundir, "SHUNT_CONFIG": "/dev/null"}
    env.update(env_extra or {})
    cmd = [os.path.join(PROGS, "echo_server"), "--host", host, "--port", "0",
           "--port-file", pf, "--conns", "0"]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, preexec_fn=as_user(uid, groups))
    PROCS.append(p)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        check(p.poll() is None, "echo_server exited")
        if os.path.exists(pf) and os.path.getsize(pf) > 0:
            with open(pf) as f:
                port = int(f.read().strip() or 0)
            # The registry entry is made in listen(), before the port file.
            return p, port
        time.sleep(0.02)
    fail("echo_server did not start")


def probe(args, env_extra=None, uid=None, ns=None):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SHUNT_CONFIG": "/dev/null"}
    env.update(env_extra or {})
    cmd = [RDV_PROBE] + [str(a) for a in args]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60,
                       preexec_fn=as_user(uid))
    return r.returncode, r.stdout, r.stderr


def make_rundir(uid=0):
    base = tempfile.mkdtemp(prefix="shuntd-", dir="/dev/shm")
    CLEANUP.append(base)
    os.chmod(base, 0o755)
    rd = os.path.join(base, "rd")
    os.mkdir(rd, 0o700)
    os.chown(rd, uid, uid)
    return rd


def offer_key(cip, cport, sip, sport):
    """shunt_tuple_key: FNV-1a over the in-memory struct shunt_tuple (ports in
    host order, little endian here), then h ^= h >> 29."""
    t = mapped(cip) + mapped(sip) + struct.pack("<HH", cport, sport)
    h = 0xcbf29ce484222325
    for b in t:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    h ^= h >> 29
    return "%016x" % h


# ---- Prometheus text format, strictly ----------------------------------------

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
VALUE_RE = re.compile(r"^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)|[+-]?Inf|NaN)$")


def check_exposition(text):
    """Parses the text exposition format 0.0.4 and rejects anything it does
    not allow; returns {(name, frozenset(labels)): value}."""
    check(text.endswith("\n"), "exposition does not end with a newline")
    typed, helped, done, samples = {}, set(), set(), {}
    current = None
    for ln, line in enumerate(text.split("\n")[:-1], 1):
        where = f"/metrics line {ln}: {line!r}"
        check(line != "" and line == line.strip(), f"{where}: empty or padded line")
        if line.startswith("#"):
            parts = line.split(" ", 3)
            check(len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE"),
                  f"{where}: a comment that is neither HELP nor TYPE")
            fam = parts[2]
            check(NAME_RE.match(fam), f"{where}: bad metric name")
            check(fam not in done, f"{where}: family {fam} is not contiguous")
            if current and current != fam:
                done.add(current)
            current = fam
            if parts[1] == "TYPE":
                check(len(parts) == 4 and parts[3] in ("counter", "gauge", "histogram",
                                                       "summary", "untyped"),
                      f"{where}: bad TYPE")
                check(fam not in typed, f"{where}: second TYPE")
                check(not any(k[0] == fam for k in samples), f"{where}: TYPE after samples")
                typed[fam] = parts[3]
            else:
                check(len(parts) == 4 and parts[3], f"{where}: empty HELP")
                check(fam not in helped, f"{where}: second HELP")
                helped.add(fam)
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)(?: (-?\d+))?$", line)
        check(m, f"{where}: not a sample line")
        name, labels, value = m.group(1), m.group(2), m.group(3)
        check(name == current, f"{where}: sample outside its family's TYPE block")
        check(name in typed, f"{where}: sample without TYPE")
        if typed[name] == "counter":
            check(name.endswith("_total"), f"{where}: counter not named *_total")
        lab = []
        if labels:
            inner = labels[1:-1]
            pos = 0
            while pos < len(inner):
                lm = LABEL_RE.match(inner, pos)
                check(lm, f"{where}: bad label set")
                lab.append((lm.group(1), lm.group(2)))
                pos = lm.end()
                if pos < len(inner):
                    check(inner[pos] == ",", f"{where}: bad label separator")
                    pos += 1
            check(len({k for k, _ in lab}) == len(lab), f"{where}: repeated label")
        check(VALUE_RE.match(value), f"{where}: bad value")
        key = (name, frozenset(lab))
        check(key not in samples, f"{where}: duplicate series")
        v = float(value)
        if typed[name] == "counter":
            check(v >= 0, f"{where}: negative counter")
        samples[key] = v
    return samples


def promtool(text):
    pt = shutil.which("promtool")
    if not pt:
        return
    r = subprocess.run([pt, "check", "metrics"], input=text, capture_output=True, text=True)
    check(r.returncode == 0, f"promtool check metrics: {r.stdout}{r.stderr}")


def val(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    check(key in samples, f"/metrics has no {name}{labels}")
    return samples[key]


def expect(samples, name, want, **labels):
    got = val(samples, name, **labels)
    check(got == want, f"{name}{labels} = {got}, expected {want}")


# ---- scenarios ------------------------------------------------------------------

def t_protocol():
    rd = make_rundir(NOBODY)
    port = free_port()
    # The listener runs as another user than the agent: the offer must be
    # filed as that user's, readable by its shim.
    srv, sport = listener(rd, "127.0.0.1", uid=NOBODY)
    dead, dport = listener(rd, "127.0.0.1", uid=NOBODY)
    dead.kill()
    dead.wait()
    agent = Agent(rd, port)

    c = Conn(agent.addr)
    check(c.request(QUERY, query_body("127.0.0.1", sport)) == (QUERY_ANSWER, b"\0"),
          "QUERY for a live shunt listener did not answer live")
    check(c.request(QUERY, query_body("127.0.0.1", dport)) == (QUERY_ANSWER, b"\1"),
          "QUERY for a dead listener did not answer none")
    check(c.request(QUERY, query_body("127.0.0.1", free_port())) == (QUERY_ANSWER, b"\1"),
          "QUERY for an absent listener did not answer none")
    c.close()
    # Over the Unix socket too (local shims).
    u = Conn(os.path.join(rd, "agent.sock"))
    check(u.request(QUERY, query_body("127.0.0.1", sport)) == (QUERY_ANSWER, b"\0"),
          "QUERY over the Unix socket failed")
    u.close()
    note("QUERY live/dead/absent answered")

    # OFFER through fab_rdv_offer(): held in the agent's memory for the
    # listener's uid (nothing is written to the rundir); fab_rdv_take() as
    # that user gets it once over agent.sock, another user never.
    before = sorted(os.listdir(rd))
    env = {"SHUNT_AGENT_PORT": str(port), "SHUNT_RUNDIR": make_rundir()}
    rc, out, err = probe(["offer", "127.0.0.1", sport, "127.0.0.1", 40001], env)
    check(rc == 0 and "offer 0 result=ok" in out, f"offer not held: {out}{err}")
    expect(agent.metrics(), "shuntd_pending", 1, kind="offer")
    check(sorted(os.listdir(rd)) == before and not os.path.exists(os.path.join(rd, "f")),
          f"an offer became a file: {sorted(os.listdir(rd))}")
    rc, out, _ = probe(["take", rd, "127.0.0.1", 40001, "127.0.0.1", sport])
    check(rc == 1, "another user took the offer")
    expect(agent.metrics(), "shuntd_pending", 1, kind="offer")
    rc, out, err = probe(["take", rd, "127.0.0.1", 40001, "127.0.0.1", sport], uid=NOBODY)
    check(rc == 0 and "token=" + b"rdv-probe-token!".hex() in out and "provider=tcp" in out
          and "ring=65536" in out, f"take: {out}{err}")
    rc, out, _ = probe(["take", rd, "127.0.0.1", 40001, "127.0.0.1", sport], uid=NOBODY)
    check(rc == 1, "an offer was taken twice")
    # A take for another tuple finds nothing.
    rc, out, _ = probe(["take", rd, "127.0.0.1", 40002, "127.0.0.1", sport], uid=NOBODY)
    check(rc == 1, "take found an offer for a tuple never offered")
    # No listener: answered, nothing held.
    rc, out, err = probe(["offer", "127.0.0.1", dport, "127.0.0.1", 40003], env)
    check("offer 0 result=no-listener" in out, f"offer to a dead listener: {out}{err}")
    expect(agent.metrics(), "shuntd_pending", 0, kind="offer")
    # TAKE is for local shims: over TCP it is out of turn.
    c = Conn(agent.addr)
    c.send(frame(TAKE, offer_body("127.0.0.1", 40001, "127.0.0.1", sport)[:36]))
    check(c.recv_frame() == (ERROR, bytes([E_UNEXPECTED])), "TAKE over TCP was not refused")
    c.close()
    note("OFFER held for the listener's owner, taken once by it alone, none for a dead listener")

    # An offer whose client address is not the agent client's own.
    c = Conn(agent.addr)
    check(c.request(OFFER, offer_body("198.18.5.5", 40004, "127.0.0.1", sport)) ==
          (OFFER_ANSWER, b"\2"), "an offer for someone else's address was not refused")
    c.close()

    s = agent.metrics()
    expect(s, "shuntd_requests_total", 4, type="query")
    expect(s, "shuntd_requests_total", 3, type="offer")
    expect(s, "shuntd_offers_total", 1, result="held")
    expect(s, "shuntd_offers_total", 1, result="no_listener")
    expect(s, "shuntd_offers_total", 1, result="refused")
    expect(s, "shuntd_takes_total", 1, result="taken")
    expect(s, "shuntd_takes_total", 1, result="refused")
    expect(s, "shuntd_takes_total", 2, result="none")
    expect(s, "shuntd_queries_total", 2, result="live")
    expect(s, "shuntd_queries_total", 2, result="none")
    expect(s, "shuntd_clients_total", 5, listener="unix")  # a QUERY, four TAKEs

    rc, took = agent.stop()
    check(rc == 0, f"shuntd exited {rc} on SIGTERM")
    check(took < 1.0, f"shuntd took {took:.2f} s to stop")
    check(not os.path.exists(os.path.join(rd, "agent.sock")), "agent.sock left behind")
    srv.kill()
    note(f"SIGTERM: exit 0 in {took * 1000:.0f} ms")


def t_hostile():
    rd = make_rundir()
    port = free_port()
    srv, sport = listener(rd, "127.0.0.1")
    agent = Agent(rd, port)
    good = None

    def good_still_served(fresh=True):
        # A fresh connection each time: an idle one is cut at the read
        # deadline like any other.
        nonlocal good
        if fresh:
            if good:
                good.close()
            good = Conn(agent.addr)
        t0 = time.monotonic()
        r = good.request(QUERY, query_body("127.0.0.1", sport))
        check(r == (QUERY_ANSWER, b"\0"), "the good client was not served")
        return time.monotonic() - t0

    # Garbage: closed at once, no answer.
    c = Conn(agent.addr)
    c.send(b"\x00\xffgarbage that is not a frame\r\n")
    check(c.closed(2), "garbage did not close the client")
    good_still_served()
    # Bad magic after a good start.
    c = Conn(agent.addr)
    c.send(b"SX\x01\x05")
    check(c.closed(2), "bad magic did not close the client")
    # Oversized: ERROR(oversized), then closed.
    c = Conn(agent.addr)
    c.send(frame(QUERY, b"", length=1 << 20))
    check(c.recv_frame() == (ERROR, bytes([E_OVERSIZED])), "no ERROR(oversized)")
    check(c.closed(2), "oversized frame did not close the client")
    # Another version.
    c = Conn(agent.addr)
    c.send(frame(QUERY, query_body("127.0.0.1", sport), version=9))
    check(c.recv_frame() == (ERROR, bytes([E_VERSION])), "no ERROR(version)")
    check(c.closed(2), "bad version did not close the client")
    # Wrong length for the type, a field out of bounds.
    c = Conn(agent.addr)
    c.send(frame(QUERY, query_body("127.0.0.1", sport) + b"x"))
    check(c.recv_frame() == (ERROR, bytes([E_MALFORMED])), "no ERROR(malformed) for length")
    c = Conn(agent.addr)
    c.send(frame(OFFER, offer_body("127.0.0.1", 1, "127.0.0.1", sport, addrlen=200)))
    check(c.recv_frame() == (ERROR, bytes([E_MALFORMED])), "no ERROR(malformed) for addrlen")
    # A valid message out of turn.
    c = Conn(agent.addr)
    c.send(frame(QUERY_ANSWER, b"\0"))
    check(c.recv_frame() == (ERROR, bytes([E_UNEXPECTED])), "no ERROR(unexpected)")
    # HTTP other than GET /metrics.
    for req, status in ((b"GET /nope HTTP/1.1\r\n\r\n", b"404"),
                        (b"HEAD /metrics HTTP/1.1\r\n\r\n", b"405")):
        c = Conn(agent.addr)
        c.send(req)
        got = c.s.recv(200)
        check(got.startswith(b"HTTP/1.1 " + status), f"{req!r} answered {got[:30]!r}")
        check(c.closed(2), "HTTP error did not close")
    # Truncated: half a frame, then the client hangs up.
    c = Conn(agent.addr)
    c.send(frame(QUERY, query_body("127.0.0.1", sport))[:11])
    c.close()
    good_still_served()

    # A slow client holding half a frame: the good one is served meanwhile,
    # and the slow one is cut at the read deadline (1 s here).
    slow = Conn(agent.addr)
    slow.send(b"SD\x02")
    t0 = time.monotonic()
    for i in range(5):
        check(good_still_served(fresh=i == 0) < 0.5, "the good client waited behind a slow one")
    good.close()
    good = None
    check(slow.closed(5), "the slow client was never cut")
    cut = time.monotonic() - t0
    check(0.8 <= cut <= 2.5, f"slow client cut after {cut:.2f} s, deadline is 1 s")
    good_still_served()
    note(f"hostile clients closed, slow one cut after {cut * 1000:.0f} ms, good one served")

    # The good client has been idle less than its deadline each time.
    s = agent.metrics()
    # garbage, bad magic, wrong length, addrlen, truncated (cut mid-frame)
    expect(s, "shuntd_errors_total", 5, reason="malformed")
    expect(s, "shuntd_errors_total", 1, reason="oversized")
    expect(s, "shuntd_errors_total", 1, reason="version")
    expect(s, "shuntd_errors_total", 1, reason="unexpected")
    expect(s, "shuntd_errors_total", 1, reason="timeout")
    expect(s, "shuntd_errors_total", 0, reason="auth")
    # garbage, magic, oversized, version, length, addrlen, unexpected,
    # 2 http, truncated, slow, 4 good ones, this scrape.
    expect(s, "shuntd_clients_total", 16, listener="tcp")
    expect(s, "shuntd_requests_total", 8, type="query")
    expect(s, "shuntd_errors_total", 0, reason="io")
    expect(s, "shuntd_errors_total", 2, reason="http")
    good.close()
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    srv.kill()


def t_secret():
    rd = make_rundir()
    port = free_port()
    srv, sport = listener(rd, "127.0.0.1")
    secret = b"correct-horse-battery-staple-42"
    sdir = tempfile.mkdtemp(prefix="shuntd-secret-")
    CLEANUP.append(sdir)
    sfile = os.path.join(sdir, "secret")
    with open(sfile, "wb") as f:
        f.write(secret + b"\n")
    os.chmod(sfile, 0o644)
    # A secret file others can read is refused.
    bad = subprocess.run([SHUNTD], env={"SHUNT_CONFIG": "/dev/null", "SHUNT_RUNDIR": rd,
                                        "SHUNT_AGENT_PORT": str(port),
                                        "SHUNT_AGENT_SECRET_FILE": sfile},
                         capture_output=True, text=True, timeout=10)
    check(bad.returncode == 1 and "group or others" in bad.stderr,
          f"a world-readable secret file was accepted: {bad.stderr}")
    os.chmod(sfile, 0o600)
    agent = Agent(rd, port, conf_extra=f"agent_secret_file = {sfile}\n")

    c = Conn(agent.addr)
    check(c.request(QUERY, query_body("127.0.0.1", sport)) == (ERROR, bytes([E_AUTH])),
          "an unauthenticated QUERY was served")
    check(c.closed(2), "not closed after ERROR(auth)")
    c = Conn(agent.addr)
    r, _ = authenticate(c, b"the-wrong-secret-of-some-length")
    check(r == (ERROR, bytes([E_AUTH])), f"a wrong secret was accepted: {r}")
    c = Conn(agent.addr)
    r, agent_mac = authenticate(c, secret)
    check(r == (AUTH_OK, agent_mac), "the right secret was refused, or the agent's proof is wrong")
    check(c.request(QUERY, query_body("127.0.0.1", sport)) == (QUERY_ANSWER, b"\0"),
          "no answer after authentication")
    c.close()
    # The secret never travels: nothing above contained it (HMAC only).
    # Local shims on the Unix socket need no secret (the rundir is private).
    u = Conn(os.path.join(rd, "agent.sock"))
    check(u.request(QUERY, query_body("127.0.0.1", sport)) == (QUERY_ANSWER, b"\0"),
          "the Unix socket asked for the secret")
    u.close()

    base = {"SHUNT_AGENT_PORT": str(port), "SHUNT_RUNDIR": make_rundir(),
            "SHUNT_AGENT_CACHE_S": "0"}
    rc, out, err = probe(["offer", "127.0.0.1", sport, "127.0.0.1", 40011],
                         dict(base, SHUNT_AGENT_SECRET=secret.decode()))
    check("result=ok" in out, f"fab_rdv_offer with the right secret: {out}{err}")
    rc, out, err = probe(["offer", "127.0.0.1", sport, "127.0.0.1", 40012],
                         dict(base, SHUNT_AGENT_SECRET="not-the-secret-at-all"))
    check("result=refused" in out, f"fab_rdv_offer with a wrong secret: {out}{err}")
    rc, out, err = probe(["offer", "127.0.0.1", sport, "127.0.0.1", 40013], base)
    check("result=refused" in out, f"fab_rdv_offer without the secret: {out}{err}")
    rc, out, err = probe(["take", rd, "127.0.0.1", 40012, "127.0.0.1", sport])
    check(rc == 1, f"an unauthenticated offer was held: {out}{err}")
    rc, out, err = probe(["take", rd, "127.0.0.1", 40011, "127.0.0.1", sport])
    check(rc == 0, f"the authenticated offer was not held: {out}{err}")

    s = agent.metrics()
    # unauthenticated QUERY, wrong python secret, wrong C secret, C without
    expect(s, "shuntd_errors_total", 4, reason="auth")
    expect(s, "shuntd_offers_total", 1, result="held")
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    srv.kill()
    note("secret: wrong and missing refused, right accepted, agent proved itself")


HOLD_CLIENT = r"""
import socket, sys
port, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
conns = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    data = bytes((i * 7 + j) & 0xff for j in range(size))
    s.sendall(data)
    got = b""
    while len(got) < size:
        d = s.recv(65536)
        if not d:
            sys.exit("eof")
        got += d
    if got != data:
        sys.exit("echo mismatch")
    conns.append(s)
print("ready", flush=True)
sys.stdin.read()
"""


def t_metrics():
    rd = make_rundir()
    port = free_port()
    srv, sport = listener(rd, "127.0.0.1")
    # Leftovers of dead processes and of an earlier agent, swept when the
    # agent starts: a registry entry nobody holds, a relayed position
    # nobody took for 200 s, a half-written temporary; a fresh one stays.
    for d in ("l", "r"):
        os.makedirs(os.path.join(rd, d), exist_ok=True)
    stale = {os.path.join(rd, "l", "g-00000000000000000000ffffc6120063-9"): 0,
             os.path.join(rd, "r", "00000000deadbeef.c"): 200,
             os.path.join(rd, "r", ".00000000deadbeef.c.1.0"): 20}
    for path, age in stale.items():
        open(path, "w").close()
        os.utime(path, (time.time() - age, time.time() - age))
    fresh = os.path.join(rd, "r", "00000000cafef00d.s")
    open(fresh, "w").close()
    agent = Agent(rd, port)
    s = agent.metrics()  # served after the startup sweep (one thread)
    for path in stale:
        check(not os.path.exists(path), f"{path} was not swept")
    check(os.path.exists(fresh), "a fresh offer was swept")
    expect(s, "shuntd_swept_total", 1, kind="registry")
    expect(s, "shuntd_swept_total", 2, kind="relay")
    os.unlink(fresh)
    # Known workload: 3 plain clients (kernel path on the server, 1000 B
    # each) and one shunt process with 4 shm connections of 5000 B each,
    # held open while we look.
    for i in range(3):
        s = socket.create_connection(("127.0.0.1", sport))
        s.sendall(b"k" * 1000)
        got = b""
        while len(got) < 1000:
            got += s.recv(4096)
        s.close()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_PRELOAD": SHUNT_LIB,
           "SHUNT_RUNDIR": rd, "SHUNT_CONFIG": "/dev/null"}
    held = subprocess.Popen([sys.executable, "-c", HOLD_CLIENT, str(sport), "4", "5000"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    PROCS.append(held)
    check(held.stdout.readline().strip() == "ready", "the shm client failed")
    s = agent.metrics()
    expect(s, "shunt_processes", 2)
    expect(s, "shunt_connections_total", 8, transport="shm")
    expect(s, "shunt_connections_open", 8, transport="shm")
    expect(s, "shunt_connections_total", 3, transport="kernel")
    expect(s, "shunt_bytes_total", 40000, transport="shm", direction="in")
    expect(s, "shunt_bytes_total", 40000, transport="shm", direction="out")
    fb = sum(v for (n, _), v in s.items() if n == "shunt_fallbacks_total")
    check(fb == 3, f"fallbacks sum {fb}, expected 3")
    held.stdin.close()
    held.wait(timeout=10)
    # The process is gone; its numbers stay in the counters.
    deadline = time.monotonic() + 5
    while True:
        s = agent.metrics()
        if val(s, "shunt_processes") == 1 and val(s, "shunt_connections_open", transport="shm") == 0:
            break
        check(time.monotonic() < deadline, "the exited client is still counted as live")
        time.sleep(0.05)
    expect(s, "shunt_connections_total", 8, transport="shm")
    expect(s, "shunt_bytes_total", 40000, transport="shm", direction="in")
    expect(s, "shunt_connections_total", 3, transport="kernel")
    expect(s, "shuntd_requests_total", agent.scrapes, type="metrics")
    srv.kill()
    agent.stop()
    note("metrics: strict format, promtool, values of a known workload, counters survive exit")


def t_health():
    """GET /healthz: 200 "ok" while the rundir is usable, 503 with the
    reason while it is not, 200 again once it is back; never counted as a
    bad request, and the agent serves everyone meanwhile."""
    rd = make_rundir()
    port = free_port()
    srv, sport = listener(rd, "127.0.0.1")
    agent = Agent(rd, port)

    def health(want, why=None):
        head, body = agent.get("/healthz")
        status = head.split(b"\r\n", 1)[0]
        check(status == {200: b"HTTP/1.1 200 OK", 503: b"HTTP/1.1 503 Service Unavailable"}[want],
              f"/healthz answered {status!r}, expected {want} ({body!r})")
        check(b"Content-Type: text/plain\r\n" in head + b"\r\n", f"/healthz content type: {head!r}")
        if want == 200:
            check(body == b"ok\n", f"/healthz body {body!r}")
        else:
            check(why.encode() in body and body.endswith(b"\n"), f"/healthz body {body!r}, expected {why!r}")

    health(200)
    # Someone opens the rundir to the world: the agent must not trust it.
    os.chmod(rd, 0o707)
    health(503, "writable by others")
    os.chmod(rd, 0o700)
    health(200)
    # A subdirectory the agent files offers into is gone.
    f = os.path.join(rd, "r")
    os.rename(f, f + ".away")
    health(503, "r/ is missing")
    os.rename(f + ".away", f)
    health(200)
    # The whole rundir is gone (a tmpfs remounted, a volume replaced).
    os.rename(rd, rd + ".away")
    health(503, "No such file or directory")
    os.rename(rd + ".away", rd)
    health(200)
    # Meanwhile the agent served queries as before, and counted no error.
    c = Conn(agent.addr)
    check(c.request(QUERY, query_body("127.0.0.1", sport)) == (QUERY_ANSWER, b"\0"),
          "a live listener was not found while /healthz was probed")
    c.close()
    s = agent.metrics()
    expect(s, "shuntd_errors_total", 0, reason="http")
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    srv.kill()
    note("/healthz: 200 ok; 503 for a world-writable rundir, a missing r/, a missing rundir; 200 again")


def t_group():
    """A rundir shared with a group (shm_group), made by root as a node's
    init step would, and the agent started before any shim: the
    subdirectories it makes are the group's (2770), so a member's shim
    accepts them and registers its listener there."""
    gid, uid = 61010, 61011
    rd = make_rundir()
    os.chown(rd, 0, gid)
    os.chmod(rd, 0o2770)
    os.chmod(os.path.dirname(rd), 0o755)
    agent = Agent(rd, free_port())
    for sub in "losr":
        st = os.stat(os.path.join(rd, sub))
        check((st.st_mode & 0o7777, st.st_gid) == (0o2770, gid),
              f"{sub}/ made by the agent: mode {st.st_mode & 0o7777:o} group {st.st_gid}, "
              f"expected 2770 group {gid}")
    srv, sport = listener(rd, "127.0.0.1", uid=uid, groups=(gid,),
                          env_extra={"SHUNT_SHM_GROUP": str(gid)})
    c = Conn(agent.addr)
    check(c.request(QUERY, query_body("127.0.0.1", sport)) == (QUERY_ANSWER, b"\0"),
          "the member's listener is not in the registry the agent prepared")
    c.close()
    entries = os.listdir(os.path.join(rd, "l"))
    check(entries and all(os.stat(os.path.join(rd, "l", e)).st_uid == uid for e in entries),
          f"registry entries {entries} are not the member's")
    srv.kill()
    agent.stop()
    note("group rundir: subdirectories 2770 of the group, a member's listener registered")


def t_netns():
    tag = f"agnt{os.getpid() % 100000}"  # veth names: at most 15 bytes
    na, nb = f"{NAME}-{os.getpid()}-a", f"{NAME}-{os.getpid()}-b"
    ipa, ipb, ghost = "198.18.77.1", "198.18.77.2", "198.18.77.3"

    def sh(*cmd):
        subprocess.run(cmd, check=True, capture_output=True)

    try:
        sh("ip", "netns", "add", na)
        sh("ip", "netns", "add", nb)
        sh("ip", "link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}y")
        sh("ip", "link", "set", f"{tag}x", "netns", na)
        sh("ip", "link", "set", f"{tag}y", "netns", nb)
        for ns, dev, ip in ((na, f"{tag}x", ipa), (nb, f"{tag}y", ipb)):
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        rd = make_rundir()
        port = 17476
        srv, sport = listener(rd, ipb, ns=nb)
        agent = Agent(rd, port, ns=nb, listen=ipb)
        env = {"SHUNT_AGENT_PORT": str(port), "SHUNT_RUNDIR": make_rundir(),
               "SHUNT_AGENT_TIMEOUT_MS": "300", "SHUNT_AGENT_CACHE_S": "2"}
        rc, out, err = probe(["offer", ipb, sport, ipa, 40021], env, ns=na)
        check("offer 0 result=ok" in out, f"cross-host offer: {out}{err}")
        rc, out, err = probe(["take", rd, ipa, 40021, ipb, sport], ns=nb)
        check(rc == 0 and "provider=tcp" in out, f"cross-host take: {out}{err}")
        # Claiming another host's client address: refused.
        rc, out, err = probe(["offer", ipb, sport, "198.18.77.9", 40022], env, ns=na)
        check("result=refused" in out, f"spoofed client address: {out}{err}")
        rc, out, err = probe(["offer", ipb, sport + 1 if sport < 65535 else 1, ipa, 40023],
                             env, ns=na)
        check("result=no-listener" in out, f"no listener: {out}{err}")
        note("offers across the veth pair: filed and taken, spoofed refused")

        # Issue 14 item 3: a second offer for one connection (someone
        # sharing the client's address, before or after the client) leaves
        # none to take: the server's shim takes the kernel path.
        s0 = agent.metrics()
        rc, out, err = probe(["offer", ipb, sport, ipa, 40031], env, ns=na)
        check("result=ok" in out, f"first offer for 40031: {out}{err}")
        rc, out, err = probe(["offer", ipb, sport, ipa, 40031], env, ns=na)
        check("result=refused" in out, f"a second offer for one connection: {out}{err}")
        rc, out, err = probe(["take", rd, ipa, 40031, ipb, sport], ns=nb)
        check(rc == 1 and "take none" in out, f"a contested connection's offer was taken: {out}{err}")
        s1 = agent.metrics()
        for fam, res in (("shuntd_offers_total", "contested"), ("shuntd_takes_total", "contested")):
            d = val(s1, fam, result=res) - val(s0, fam, result=res)
            check(d == 1, f"{fam}{{result={res}}} moved by {d}, not 1")
        note("a second offer for one connection: refused, none taken, counted as contested")

        # One process's offers to a host share one connection to its agent,
        # kept open between them (fab_rdv.c): three offers, one client.
        s0 = agent.metrics()
        rc, out, err = probe(["offer", ipb, sport, ipa, 40026, 3], env, ns=na)
        check(out.count("result=ok") == 3, f"three offers from one process: {out}{err}")
        s1 = agent.metrics()
        # (The second scrape is a client too.)
        links = val(s1, "shuntd_clients_total", listener="tcp") - \
            val(s0, "shuntd_clients_total", listener="tcp") - 1
        offers = val(s1, "shuntd_requests_total", type="offer") - \
            val(s0, "shuntd_requests_total", type="offer")
        check(links == 1 and offers == 3,
              f"three offers from one process: {links} agent connections, {offers} offers; expected 1, 3")
        note("three offers from one process over one kept agent connection")

        # Negative cache: nothing answers at ghost (no such neighbour), so the
        # first offer takes the whole bound, the next ones return at once
        # until the TTL (2 s) passes, then one probe again.
        bound = 300
        rc, out, err = probe(["offer", ghost, 5000, ipa, 40024, 5, 2300], env, ns=na)
        rows = [re.match(r"offer (\d+) result=(\S+) ms=([\d.]+)", l) for l in out.splitlines()]
        check(len(rows) == 6 and all(rows), f"negative cache run: {out}{err}")
        ms = [float(r.group(3)) for r in rows]
        check(all(r.group(2) == "no-agent" for r in rows), f"not all no-agent: {out}")
        check(0.9 * bound <= ms[0] <= 1.5 * bound + 100, f"first probe took {ms[0]} ms")
        check(all(m < bound / 10 for m in ms[1:5]), f"cached offers were not immediate: {ms}")
        check(0.9 * bound <= ms[5] <= 1.5 * bound + 100,
              f"after the TTL the host was not probed again: {ms[5]} ms")
        note(f"negative cache: first {ms[0]:.0f} ms, cached {max(ms[1:5]):.1f} ms, "
             f"after TTL {ms[5]:.0f} ms (bound {bound} ms)")

        # A host with shunt but no agent on the port: refused at once, cached.
        agent.stop()
        rc, out, err = probe(["offer", ipb, sport, ipa, 40025, 3], env, ns=na)
        rows = re.findall(r"result=(\S+) ms=([\d.]+)", out)
        check(len(rows) == 3 and all(r[0] == "no-agent" for r in rows), f"no agent: {out}{err}")
        srv.kill()
    finally:
        for ns in (na, nb):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def main():
    for need in (SHUNTD, RDV_PROBE, SHUNT_LIB, PROGS):
        check(need and os.path.exists(need), f"missing {need!r} (SHUNTD, RDV_PROBE, ...)")
    scen = {"protocol": t_protocol, "hostile": t_hostile, "secret": t_secret,
            "metrics": t_metrics, "health": t_health, "group": t_group,
            "netns": t_netns}
    check(len(sys.argv) == 2 and sys.argv[1] in scen, f"usage: agent_e2e.py {'|'.join(scen)}")
    if sys.argv[1] in ("netns", "protocol", "group") and os.geteuid() != 0:
        print(f"[{NAME}] SKIP: needs root (network namespaces, a listener of another uid)")
        return
    try:
        scen[sys.argv[1]]()
    except (OSError, subprocess.SubprocessError) as e:
        fail(f"{type(e).__name__}: {e}")
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        for d in CLEANUP:
            shutil.rmtree(d, ignore_errors=True)
    print(f"PASS {NAME}")


if __name__ == "__main__":
    main()
