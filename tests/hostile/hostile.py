#!/usr/bin/env python3
"""Hostile and broken environments (issue 14): no crash, no hijack, no hang,
nothing lost.

    hostile.py fifo|...

Each scenario plants or provokes one hostile condition and checks the real
outcome: the bytes an application moves, the transport its connection took
(from the library's log), the agent's answers and its /metrics.  Helpers
(the agent protocol written in Python, agents, listeners, rundirs) are
tests/agent/agent_e2e.py's.

Environment (set by ctest): SHUNTD, RDV_PROBE, SHUNT_LIB, PROGS.
Prints "FAIL: ..." and exits 1 on failure.
"""
import os
import re
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
import agent_e2e as ae  # noqa: E402
from agent_e2e import check, fail, note  # noqa: E402

SCENARIO = sys.argv[1] if len(sys.argv) > 1 else "?"
ae.NAME = "hostile_" + SCENARIO


RELAY, RELAY_ANSWER = 10, 11


def netns_inode():
    return os.stat("/proc/self/ns/net").st_ino


def regname(ip, port):
    """core/shunt_regname.c: the registry entry of a loopback listener."""
    return "n%d-%s-%d" % (netns_inode(), ae.mapped(ip).hex(), port)


def plain_server(host="127.0.0.1"):
    """echo_server without shunt: (proc, port)."""
    pf = os.path.join(tempfile.mkdtemp(prefix="hostile-port-"), "port")
    ae.CLEANUP.append(os.path.dirname(pf))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    p = subprocess.Popen([os.path.join(ae.PROGS, "echo_server"), "--host", host, "--port", "0",
                          "--port-file", pf, "--conns", "0"], env=env,
                         stdout=subprocess.DEVNULL)
    ae.PROCS.append(p)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        check(p.poll() is None, "echo_server exited")
        if os.path.exists(pf) and os.path.getsize(pf) > 0:
            with open(pf) as f:
                return p, int(f.read().strip())
        time.sleep(0.02)
    fail("echo_server did not start")


def shunt_env(rundir, logdir, extra=None):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_PRELOAD": ae.SHUNT_LIB,
           "SHUNT_RUNDIR": rundir, "SHUNT_CONFIG": "/dev/null", "SHUNT_LOG": "debug",
           "SHUNT_LOG_FILE": os.path.join(logdir, "%p.log")}
    env.update(extra or {})
    return env


def logs(logdir):
    out = ""
    for f in sorted(os.listdir(logdir)):
        with open(os.path.join(logdir, f)) as fh:
            out += fh.read()
    return out


def echo_client(port, env, timeout=20, conns=1, nbytes=10000, what="echo_client"):
    """echo_client under shunt: checks its exit and its PASS line; returns its
    output.  A hang is a failure, never a wait without end."""
    cmd = [os.path.join(ae.PROGS, "echo_client"), "--port", str(port), "--conns", str(conns),
           "--bytes", str(nbytes)]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{what} hung ({timeout} s)")
    check(r.returncode == 0 and "PASS echo_client" in r.stdout,
          f"{what} failed ({r.returncode}): {r.stdout[-300:]}{r.stderr[-300:]}")
    return r.stdout


def mkfifo(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mkfifo(path, 0o600)


# ---- item 10: a FIFO planted in the rundir -----------------------------------

def t_fifo():
    """FIFOs where the registry entry of a destination, a counters file and
    an offer would be: a shunt client's connect() finishes on the kernel path
    with a reason, the bytes echo; shuntd answers a QUERY for that
    destination and serves /metrics; nothing waits for a FIFO writer."""
    rd = ae.make_rundir()
    srv, port = plain_server()
    # The library makes l/ o/ s/ at its first use; shuntd makes f/ r/.
    fifos = [os.path.join(rd, "l", regname("127.0.0.1", port)),
             os.path.join(rd, "s", "1"),
             os.path.join(rd, "o", "a-1-0"),
             os.path.join(rd, "f", ae.offer_key("127.0.0.1", 40001, "127.0.0.1", port)),
             os.path.join(rd, "r", "0123456789abcdef.s")]
    for f in fifos:
        mkfifo(f)
    logdir = tempfile.mkdtemp(prefix="hostile-logs-")
    ae.CLEANUP.append(logdir)
    echo_client(port, shunt_env(rd, logdir), what="a shunt client with FIFOs in the rundir")
    log = logs(logdir)
    m = re.search(r"conn fd=\d+ role=client .*transport=(\S+)(?: reason=(\S+))?", log)
    check(m and m.group(1) == "kernel" and m.group(2),
          f"the client's connection: no kernel decision with a reason in the log:\n{log[-800:]}")
    note(f"client connect() with FIFOs in l/ s/ o/: kernel path ({m.group(2)}), bytes echoed")

    agent = ae.Agent(rd, ae.free_port())
    c = ae.Conn(agent.addr, timeout=5)
    try:
        r = c.request(ae.QUERY, ae.query_body("127.0.0.1", port))
    except OSError:
        r = None
    check(r == (ae.QUERY_ANSWER, b"\1"), f"QUERY for a FIFO'd registry entry answered {r!r}")
    c.close()
    s = agent.metrics()
    ae.expect(s, "shuntd_queries_total", 1, result="none")
    for f in fifos:
        check(stat.S_ISFIFO(os.lstat(f).st_mode) or not os.path.exists(f),
              f"{f} became something else")
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    srv.kill()
    note("shuntd with FIFOs in l/ s/ o/ f/ r/: QUERY answered, /metrics served, clean stop")


# ---- item 14: a private rundir others can write, or someone else's -----------

def shunt_pair(rd, logdir, uid=None, extra=None):
    """A shunt echo_server and a shunt echo_client (as uid) over loopback;
    returns the transport the client's connection took and the log."""
    env = shunt_env(rd, logdir, extra)
    if rd is None:
        del env["SHUNT_RUNDIR"]
    srv, port = ae.listener(rd or "", "127.0.0.1", uid=uid, env_extra={
        k: v for k, v in env.items() if k not in ("PATH", "LD_PRELOAD")})
    cmd = [os.path.join(ae.PROGS, "echo_client"), "--port", str(port), "--bytes", "10000"]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=20,
                           preexec_fn=ae.as_user(uid))
    except subprocess.TimeoutExpired:
        fail("echo_client hung")
    check(r.returncode == 0 and "PASS echo_client" in r.stdout,
          f"echo_client failed: {r.stdout[-300:]}{r.stderr[-300:]}")
    srv.kill()
    srv.wait()
    log = logs(logdir)
    m = re.search(r"conn fd=\d+ role=client .*transport=(\S+)", log)
    check(m, f"no decision for the client in the log:\n{log[-800:]}")
    return m.group(1), log


def t_rundir():
    """A private rundir (no shm_group) writable by its group is refused with
    a warning, as one writable by others is: a group member could plant
    offers and registry entries.  A default rundir another user made first
    (/dev/shm/shunt-$UID) is refused with a warning naming it, not skipped
    in silence."""
    rd = ae.make_rundir()
    logdir = tempfile.mkdtemp(prefix="hostile-logs-")
    ae.CLEANUP.append(logdir)
    tp, log = shunt_pair(rd, logdir)
    check(tp == "shm", f"a private rundir (0700): transport {tp}, expected shm")
    os.chmod(rd, 0o770)
    logdir = tempfile.mkdtemp(prefix="hostile-logs-")
    ae.CLEANUP.append(logdir)
    tp, log = shunt_pair(rd, logdir)
    check(tp == "kernel", f"a group-writable private rundir was used: transport {tp}")
    check(re.search(rf"warn: rundir {re.escape(rd)} .*writable by its group", log),
          f"no warning about the group-writable rundir:\n{log[-800:]}")
    note("private rundir writable by its group: refused with a warning, connection on TCP")

    # Someone else's /dev/shm/shunt-$UID (and /tmp/shunt-$UID).
    victim, squatter = 61021, 61022
    squatted = [f"/dev/shm/shunt-{victim}", f"/tmp/shunt-{victim}"]
    for d in squatted:
        subprocess.run(["rm", "-rf", d])
        os.mkdir(d, 0o755)
        os.chown(d, squatter, squatter)
        ae.CLEANUP.append(d)
    logdir = tempfile.mkdtemp(prefix="hostile-logs-")
    ae.CLEANUP.append(logdir)
    os.chmod(logdir, 0o777)
    tp, log = shunt_pair(None, logdir, uid=victim)
    check(tp == "kernel", f"transport {tp} with both default rundirs squatted")
    for d in squatted:
        check(re.search(rf"warn: rundir {re.escape(d)} .*belongs to uid {squatter}", log),
              f"no warning naming {d} and its owner:\n{log[-800:]}")
    note("default rundirs made by another user: refused, each named in a warning")


# ---- item 13: root's agent in a user's rundir --------------------------------

def stale_socket(path, uid):
    """A Unix datagram socket name nobody has bound any more (a wake socket
    of a dead process), owned by uid."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.close()
    os.chown(path, uid, uid)


def wait_metric(agent, name, want, what, timeout=15, **labels):
    deadline = time.monotonic() + timeout
    while True:
        s = agent.metrics()
        if ae.val(s, name, **labels) >= want:
            return s
        check(time.monotonic() < deadline, f"{what}: {name}{labels} never reached {want}")
        time.sleep(0.1)


def t_owner():
    """Root's shuntd serving a user's rundir never acts there with root's
    rights: the user owns the directories and can swap any name for a
    symlink between a check and a use.  Here l/ becomes a link to a root
    directory while the agent runs; its sweep (which removes registry
    entries nobody holds) must not remove root's file there.  The
    directories and agent.sock it makes are the user's."""
    if os.geteuid() != 0:
        print(f"[{ae.NAME}] SKIP: needs root")
        return
    user = ae.NOBODY
    rd = ae.make_rundir(user)
    victim = tempfile.mkdtemp(prefix="hostile-victim-")
    ae.CLEANUP.append(victim)
    precious = os.path.join(victim, "precious")
    with open(precious, "w") as f:
        f.write("root's\n")
    agent = ae.Agent(rd, ae.free_port())
    for sub in ("l", "o", "s", "r", "agent.sock"):
        st = os.lstat(os.path.join(rd, sub))
        check(st.st_uid == user, f"{sub} made by root's agent belongs to uid {st.st_uid}, "
              f"not the rundir's owner {user}")
    # The user, as the owner of l/'s parent, swaps l/ for a link.
    os.rename(os.path.join(rd, "l"), os.path.join(rd, "l.old"))
    os.symlink(victim, os.path.join(rd, "l"))
    # A stale wake socket in o/: the same sweep removes it after l/.
    stale_socket(os.path.join(rd, "o", "0123456789abcdef.s"), user)
    wait_metric(agent, "shuntd_swept_total", 1, "the periodic sweep", kind="shm")
    check(os.path.exists(precious), "root's agent removed a root file through a link "
          "the rundir's owner planted")
    # r/ swapped likewise: a relayed position for a client end here is
    # filed there, as the rundir's owner.
    os.rename(os.path.join(rd, "r"), os.path.join(rd, "r.old"))
    os.symlink(victim, os.path.join(rd, "r"))
    u = ae.Conn(os.path.join(rd, "agent.sock"))
    body = (ae.mapped("127.0.0.1") + ae.mapped("127.0.0.1") + struct.pack(">HH", 40001, 5000) +
            b"relay-token-16b!" + struct.pack(">Q", 7) + b"\1")
    r = u.request(RELAY, body)
    u.close()
    check(sorted(os.listdir(victim)) == ["precious"],
          f"root's agent filed into a root directory through a planted link: "
          f"{sorted(os.listdir(victim))} (answer {r!r})")
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    note("root agent in a user's rundir: its sweep follows no planted link with root's "
         "rights; what it makes is the user's")


# ---- item 11: shuntd at its fd limit -------------------------------------------

def limited_agent(rd, soft, hard):
    """An agent started under RLIMIT_NOFILE soft:hard."""
    wrap = os.path.join(tempfile.mkdtemp(prefix="hostile-wrap-"), "shuntd")
    ae.CLEANUP.append(os.path.dirname(wrap))
    with open(wrap, "w") as f:
        f.write(f"#!/bin/sh\nexec prlimit --nofile={soft}:{hard} -- {ae.SHUNTD} \"$@\"\n")
    os.chmod(wrap, 0o755)
    real, ae.SHUNTD = ae.SHUNTD, wrap
    try:
        return ae.Agent(rd, ae.free_port())
    finally:
        ae.SHUNTD = real


def nofile(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    fail("no Max open files line")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def t_shuntd_fdlimit():
    """More idle agent clients than the agent has fds for: the agent raises
    its soft limit to the hard one, caps its clients below what it has, so
    the longest idle one makes room for a newcomer, and never spins."""
    rd = ae.make_rundir()
    srv, sport = ae.listener(rd, "127.0.0.1")
    agent = limited_agent(rd, 64, 4096)
    check(nofile(agent.p.pid) == 4096, f"soft fd limit {nofile(agent.p.pid)}, not raised to 4096")
    agent.stop()
    agent = limited_agent(rd, 64, 64)
    idle = []
    for i in range(80):
        try:
            c = ae.Conn(agent.addr)
            r = c.request(ae.QUERY, ae.query_body("127.0.0.1", sport))
        except OSError as e:
            r = e
        check(r == (ae.QUERY_ANSWER, b"\0"), f"idle client {i} was not served ({r!r})")
        idle.append(c)
    t0, c0 = time.monotonic(), cpu_s(agent.p.pid)
    fresh = ae.Conn(agent.addr)
    r = fresh.request(ae.QUERY, ae.query_body("127.0.0.1", sport))
    check(r == (ae.QUERY_ANSWER, b"\0"), f"a new client behind 80 idle ones was not served ({r!r})")
    fresh.close()
    # Not speed: whether the agent sleeps.  A loop on EMFILE keeps a core
    # busy (~1 s a second); an agent that waits uses next to nothing.
    time.sleep(1)
    used = (cpu_s(agent.p.pid) - c0) / (time.monotonic() - t0)
    check(used < 0.3, f"the agent used {used:.0%} of a CPU while idle clients held its fds")
    s = agent.metrics()
    open_now = ae.val(s, "shuntd_clients_open")
    check(open_now <= 64 - 16, f"{open_now} clients open under a limit of 64 fds")
    for c in idle:
        c.close()
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    note(f"fd limit 64: soft limit raised when allowed; 80 idle clients, the newest served, "
         f"{int(open_now)} kept, {used:.0%} CPU")

    # So few fds that accept() itself fails, with no idle client to drop:
    # clients that connect and say nothing (cut at the read deadline, 1 s).
    agent = limited_agent(rd, 12, 12)
    silent = [socket.create_connection(agent.addr) for _ in range(10)]
    t0, c0 = time.monotonic(), cpu_s(agent.p.pid)
    time.sleep(0.5)
    used = (cpu_s(agent.p.pid) - c0) / (time.monotonic() - t0)
    check(used < 0.3, f"the agent used {used:.0%} of a CPU at EMFILE")
    fresh = ae.Conn(agent.addr, timeout=5)
    r = fresh.request(ae.QUERY, ae.query_body("127.0.0.1", sport))
    check(r == (ae.QUERY_ANSWER, b"\0"), f"a client behind EMFILE was not served ({r!r})")
    fresh.close()
    for c in silent:
        c.close()
    s = agent.metrics()
    check(ae.val(s, "shuntd_accept_pauses_total") >= 1, "accepting never rested at EMFILE")
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    srv.kill()
    note(f"fd limit 12: accept() at EMFILE rests ({used:.0%} CPU), served again once fds free")


# ---- item 2: an unauthenticated peer floods the agent ---------------------------

def tree(rd):
    out = set()
    for d, dirs, files in os.walk(rd):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), rd))
    return out


def flood(agent, src_ip, mtype, bodies, batch=200):
    """Send one frame per body from src_ip, batch by batch, reading each
    batch's answers; returns the answers' statuses."""
    sk = socket.socket()
    sk.bind((src_ip, 0))
    sk.settimeout(10)
    sk.connect(agent.addr)
    c = ae.Conn.__new__(ae.Conn)
    c.s, c.buf = sk, b""
    statuses = []
    for i in range(0, len(bodies), batch):
        chunk = bodies[i:i + batch]
        c.send(b"".join(ae.frame(mtype, b) for b in chunk))
        for _ in chunk:
            r = c.recv_frame()
            check(r and len(r[1]) == 1, f"no answer in the flood from {src_ip}: {r!r}")
            statuses.append(r[1][0])
    c.close()
    return statuses


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def t_flood():
    """No secret: anyone may send offers and relays.  17 sources x 600
    offers for a live listener: the agent holds them in memory, at most 512
    per source and 8192 in all, refuses the rest (counted by reason), and
    nothing of it becomes a file.  2000 relays from one source: 64 filed.
    A held offer is still taken by the listener's owner."""
    rd = ae.make_rundir()
    srv, sport = ae.listener(rd, "127.0.0.1")
    agent = ae.Agent(rd, ae.free_port())
    before, rss0 = tree(rd), rss_kib(agent.p.pid)
    held = refused = 0
    for k in range(17):
        ip = f"127.0.0.{k + 1}"
        bodies = [ae.offer_body(ip, 1024 + i, "127.0.0.1", sport) for i in range(600)]
        st = flood(agent, ip, ae.OFFER, bodies)
        held += st.count(0)
        refused += st.count(2)
        check(st.count(0) + st.count(2) == 600, f"answers other than held/refused: {set(st)}")
    check(held == 8192, f"{held} offers held, expected 8192 (512 for each of 16 sources)")
    s = agent.metrics()
    ae.expect(s, "shuntd_offers_total", 8192, result="held")
    ae.expect(s, "shuntd_offers_total", 16 * 88, result="source_full")
    ae.expect(s, "shuntd_offers_total", 600, result="table_full")
    ae.expect(s, "shuntd_pending", 8192, kind="offer")
    grown = rss_kib(agent.p.pid) - rss0
    check(grown < 16 * 1024, f"the agent grew by {grown} KiB holding 8192 offers")
    note(f"10200 offers from 17 sources: 8192 held (+{grown} KiB), 1408 over a source's cap, "
         f"600 over the table's")

    relays = [ae.mapped("127.0.0.2") + ae.mapped("127.0.0.1") + struct.pack(">HH", 1024 + i, sport)
              + b"relay-token-16b!" + struct.pack(">Q", i) + b"\1" for i in range(2000)]
    st = flood(agent, "127.0.0.1", RELAY, relays)
    check(st.count(0) == 64, f"{st.count(0)} relays filed from one source, expected 64")
    files = os.listdir(os.path.join(rd, "r"))
    check(len(files) == 64, f"{len(files)} files in r/ after 2000 relays, expected 64")
    s = agent.metrics()
    ae.expect(s, "shuntd_relays_total", 64, result="filed")
    ae.expect(s, "shuntd_relays_total", 2000 - 64, result="source_full")
    check(tree(rd) - before == {os.path.join("r", f) for f in files},
          f"the flood made files: {sorted(tree(rd) - before)[:10]}")
    note("2000 relays from one source: 64 filed; no other file made")

    # The listener's owner (root here) still takes what is held for it.
    rc, out, err = ae.probe(["take", rd, "127.0.0.5", 1024, "127.0.0.1", sport])
    check(rc == 0 and "take ok" in out, f"a held offer was not taken: {out}{err}")
    ae.expect(agent.metrics(), "shuntd_pending", 8191, kind="offer")
    rc, _ = agent.stop()
    check(rc == 0, f"shuntd exited {rc}")
    srv.kill()
    note("a held offer taken by the listener's owner after the flood")


# ---- item 16: fork while another thread holds one of shunt's locks -------------

def t_fork():
    """For each of the library's locks (core, shm, fabric): a thread holds
    it while the main thread forks.  The child must find every lock free,
    echo 4000 bytes over a new connection (shm, to a shunt echo_server),
    and exit; the parent connects again afterwards.  fork_locks runs under
    libshunt-testhooks.so, the library with test hooks (fork_hook.c)."""
    hooks, prog = os.environ.get("TESTHOOKS_LIB", ""), os.environ.get("FORK_LOCKS", "")
    check(os.path.exists(hooks) and os.path.exists(prog), "TESTHOOKS_LIB, FORK_LOCKS not built")
    rd = ae.make_rundir()
    srv, port = ae.listener(rd, "127.0.0.1")
    logdir = tempfile.mkdtemp(prefix="hostile-logs-")
    ae.CLEANUP.append(logdir)
    env = shunt_env(rd, logdir)
    env["LD_PRELOAD"] = hooks
    try:
        r = subprocess.run([prog, str(port)], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        so = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        fail(f"fork_locks hung; so far:\n{so}")
    out = r.stdout
    for line in out.splitlines():
        if line.startswith("FAIL"):
            fail(line[len("FAIL: "):] + f"\n{out}")
    check(r.returncode == 0, f"fork_locks exited {r.returncode}: {out}{r.stderr[-500:]}")
    names = re.findall(r"^lock (\S+): child ok transport=(\S+)", out, re.M)
    want = {"shunt_registry.c:reg_mu", "shunt_rendezvous.c:route_mu", "shm_arena.c:arena_mu",
            "shm_wake.c:wpool_mu", "shm_conn.c:pool.mu", "shunt_spill.c:pool.mu",
            "fab_prov.c:mu", "fab_watch.c:mu", "fab_pending.c:offers_mu", "fab_conn.c:bufs_mu",
            "fab_conn.c:pool.mu", "fab_rdv.c:cache_lock", "fab_rdv.c:kept_lock"}
    got = {n for n, _ in names}
    check(want <= got, f"locks not tried: {sorted(want - got)}")
    check(all(t == "shm" for _, t in names), f"a child's connection was not on shm: {names}")
    check("parent after" in out and out.rstrip().endswith("shm"), f"the parent's last connection: {out}")
    srv.kill()
    note(f"fork with each of {len(got)} locks held by another thread: every child found them "
         "free and echoed over shm")


# ---- item 6: a ring lock left held ---------------------------------------------

def t_lock():
    """A value no live end holds, planted in a ring's read lock (a holder
    killed inside it, or a peer that wrote there): the reader takes the lock
    over and gets its bytes; a demotion on the other side only looks at it
    and goes on; bytes arrive over TCP both ways.  lock_plant runs both ends
    in one process under shunt, with 64 KiB rings, and finds the headers in
    the rundir; its alarm turns a hang into a failure."""
    prog = os.environ.get("LOCK_PLANT", "")
    check(os.path.exists(prog), "LOCK_PLANT not built")
    rd = ae.make_rundir()
    logdir = tempfile.mkdtemp(prefix="hostile-logs-")
    ae.CLEANUP.append(logdir)
    env = shunt_env(rd, logdir, {"SHUNT_RING_SIZE": "64k"})
    try:
        r = subprocess.run([prog, rd], env=env, capture_output=True, text=True, timeout=50)
    except subprocess.TimeoutExpired:
        fail("lock_plant hung past its own alarm")
    out = r.stdout
    check(r.returncode == 0 and "PASS lock_plant" in out,
          f"lock_plant exited {r.returncode}:\n{out}{r.stderr[-500:]}\n{logs(logdir)[-800:]}")
    check(re.search(r"moved .*reason=stdio", logs(logdir)),
          f"no stdio demotion in the log:\n{logs(logdir)[-800:]}")
    note("planted ring lock: the reader took it over, the demoter looked past it; "
         "bytes exact over shm and then TCP")


SCENARIOS = {"fifo": t_fifo, "rundir": t_rundir, "owner": t_owner,
             "shuntd_fdlimit": t_shuntd_fdlimit, "flood": t_flood, "fork": t_fork,
             "lock": t_lock}


def main():
    for need in (ae.SHUNTD, ae.SHUNT_LIB, ae.PROGS):
        check(need and os.path.exists(need), f"missing {need!r} (SHUNTD, SHUNT_LIB, PROGS)")
    check(SCENARIO in SCENARIOS, f"usage: hostile.py {'|'.join(SCENARIOS)}")
    try:
        SCENARIOS[SCENARIO]()
    except (OSError, subprocess.SubprocessError) as e:
        fail(f"{type(e).__name__}: {e}")
    finally:
        for p in ae.PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        for d in ae.CLEANUP:
            subprocess.run(["rm", "-rf", d])
    print(f"PASS {ae.NAME}")


if __name__ == "__main__":
    main()
