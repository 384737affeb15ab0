#!/usr/bin/env python3
"""The Kubernetes example of examples/k8s, built from Linux primitives, no
container engine: a "pod" is a network namespace, each of its containers a
mount namespace of its own inside it (tests/deploy/container.sh), volumes
are directories bind-mounted at their mountPath, the images are the Debian
package unpacked (the shunt sidecar image) and this host's programs (redis).

Everything a container runs comes from the manifests as they are: the init
containers' and the sidecar's commands, the applications' commands, their
environment (LD_PRELOAD and SHUNT_CONFIG only), users, volumes and the
ConfigMap's shunt.conf.  The Service name "redis" resolves (in the
container's /etc/hosts) to the redis pod's address, as a headless Service's
DNS name does.

  node 1: pod A  redis-server.yaml (init shunt-rundir, init shunt-install,
                 sidecar shuntd, redis-server), 198.18.0.1 and 198.18.1.1
          pod B  redis-benchmark.yaml (init containers, redis-benchmark),
                 198.18.0.2; node 1's hostPath rundir is shared with pod A
  node 2: pod C  redis-benchmark.yaml again, 198.18.1.2, its own node's
                 rundir
  node 1, the node shape: the DaemonSet of node-agent.yaml on node 1's
          host network; pods D (198.18.2.1) and E (198.18.2.2): the redis
          Deployment and the redis-benchmark Job of
          examples/k8s/kustomize/redis, rendered with the shunt component
          (kustomize_render.py), as two users

Subtests (DEPLOY_ONLY="shm remote fabric node" selects):
  shm     pod B's redis-benchmark and redis-cli on shm with pod A's redis:
          results checked, shunt stat (run in the sidecar) shows shm
  remote  pod C, the manifests unchanged: no RDMA between the "nodes", so
          fabric_provider = auto keeps every connection on kernel TCP
          (no-rdma-route), and redis-server never loads libfabric
  fabric  pods A and C with the documented test override
          SHUNT_OPTIONS=fabric_provider=tcp (redis restarted with it): pod
          C's redis-benchmark and redis-cli on fabric through pod A's agent
  node    the node agent ready (/healthz), the rundir it makes (2770, group
          7476); pod E's redis-benchmark (uid 1000) and redis-cli on shm
          with pod D's redis (uid 999); shunt stat run in the node agent
          counts exactly those connections

Needs root (prints SKIP otherwise).  Environment: DEPLOY_ROOT (the unpacked
package, from the deploy_package fixture), SHUNT_SRC (the source tree).
"""
import atexit
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kustomize_render  # noqa: E402

NAME = "deploy_pods"
SRC = os.environ.get("SHUNT_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
IMG = os.environ.get("DEPLOY_ROOT", "")
CONTAINER_SH = os.path.join(SRC, "tests/deploy/container.sh")
K8S = os.path.join(SRC, "examples/k8s")
ONLY = os.environ.get("DEPLOY_ONLY", "").split()


class Fail(Exception):
    pass


def note(msg):
    print(f"{NAME}: {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(cmd, timeout=30, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def load(path):
    with open(path) as f:
        return list(yaml.safe_load_all(f))


def find(docs, kind):
    for d in docs:
        if d and d.get("kind") == kind:
            return d
    raise Fail(f"no {kind} in the manifest")


class World:
    """Namespaces, work directory and background processes of one run."""

    def __init__(self):
        self.tag = f"shd{os.getpid()}"
        self.netns = []
        self.links = 0
        self.bg = []
        self.work = tempfile.mkdtemp(prefix="shunt-deploy-", dir="/dev/shm")
        os.chmod(self.work, 0o755)
        self.configmaps = {}
        for d in load(os.path.join(K8S, "shunt-config.yaml")) + load(os.path.join(K8S, "node-agent.yaml")):
            if d and d["kind"] == "ConfigMap":
                self.configmaps[d["metadata"]["name"]] = d["data"]

    def ns(self, name):
        n = f"{self.tag}-{name}"
        check(run(["ip", "netns", "add", n]).returncode == 0, f"ip netns add {n} failed")
        self.netns.append(n)
        run(["ip", "-n", n, "link", "set", "lo", "up"])
        return n

    def link(self, a, addr_a, b, addr_b):
        self.links += 1
        va, vb = f"{self.tag}l{self.links}a", f"{self.tag}l{self.links}b"
        for cmd in (["ip", "link", "add", va, "type", "veth", "peer", "name", vb],
                    ["ip", "link", "set", va, "netns", a], ["ip", "link", "set", vb, "netns", b],
                    ["ip", "-n", a, "addr", "add", addr_a + "/24", "dev", va],
                    ["ip", "-n", b, "addr", "add", addr_b + "/24", "dev", vb],
                    ["ip", "-n", a, "link", "set", va, "up"], ["ip", "-n", b, "link", "set", vb, "up"]):
            r = run(cmd)
            check(r.returncode == 0, f"{' '.join(cmd)}: {r.stderr.strip()}")

    def cleanup(self):
        for p in self.bg:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for n in self.netns:
            run(["ip", "netns", "del", n])
        if os.environ.get("KEEP_TMP"):
            note(f"kept {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)


class Pod:
    """One pod of a manifest's pod template, on a node, in a netns."""

    def __init__(self, world, name, node, netns, spec, hosts):
        self.w, self.name, self.node, self.netns, self.spec = world, name, node, netns, spec
        self.hosts = hosts
        self.dir = os.path.join(world.work, "pods", name)
        os.makedirs(self.dir)
        self.volumes = {v["name"]: self.volume(v) for v in spec.get("volumes", [])}
        self.procs = {}

    def volume(self, v):
        if "emptyDir" in v:  # the kubelet makes it 0777
            d = os.path.join(self.dir, "vol-" + v["name"])
            os.makedirs(d)
            os.chmod(d, 0o777)
            return d
        if "hostPath" in v:  # one per node
            d = os.path.join(self.w.work, "nodes", self.node, v["hostPath"]["path"].strip("/"))
            check(v["hostPath"].get("type") == "DirectoryOrCreate" or os.path.isdir(d),
                  f"hostPath {v['hostPath']} must exist")
            os.makedirs(d, exist_ok=True)
            return d
        if "configMap" in v:
            data = self.w.configmaps.get(v["configMap"]["name"])
            check(data is not None, f"no ConfigMap {v['configMap']['name']}")
            d = os.path.join(self.dir, "cm-" + v["name"])
            os.makedirs(d)
            os.chmod(d, 0o755)
            for k, text in data.items():
                with open(os.path.join(d, k), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(d, k), 0o644)
            return d
        raise Fail(f"volume kind of {v} not modelled")

    def user(self, c):
        sc = dict(self.spec.get("securityContext", {}))
        sc.update(c.get("securityContext", {}))
        return f"{sc.get('runAsUser', 0)}:{sc.get('runAsGroup', sc.get('runAsUser', 0))}"

    def groups(self):
        return ",".join(str(g) for g in self.spec.get("securityContext", {}).get("supplementalGroups", []))

    def resolve(self, c, argv0):
        """The program of a container: from the shunt image (the unpacked
        package) or, for the base image's tools and other images, this host."""
        if c["image"].startswith("shunt:"):
            if argv0.startswith("/"):
                if os.path.exists(IMG + argv0):
                    return IMG + argv0
            else:
                for d in ("/usr/sbin", "/usr/bin"):
                    if os.path.exists(os.path.join(IMG + d, argv0)):
                        return os.path.join(IMG + d, argv0)
        p = argv0 if argv0.startswith("/") else shutil.which(argv0)
        check(p and os.path.exists(p), f"{c['name']}: {argv0} is neither in the package nor on this host")
        return p

    def argv(self, c, command=None):
        cmd = list(command or (c.get("command", []) + c.get("args", [])))
        check(cmd, f"{c['name']}: no command")
        pre = ["ip", "netns", "exec", self.netns, "unshare", "-m", "--propagation", "private",
               CONTAINER_SH, "--user", self.user(c)]
        if self.groups():
            pre += ["--groups", self.groups()]
        for m in c.get("volumeMounts", []):
            pre += ["--mount", f"{self.volumes[m['name']]}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")]
        for e in c.get("env", []):
            check("value" in e, f"{c['name']}: env {e['name']} is not a plain value")
            pre += ["--env", f"{e['name']}={e['value']}"]
        for h in self.hosts:
            pre += ["--host", h]
        return pre + ["--", self.resolve(c, cmd[0])] + cmd[1:]

    def env(self):
        return dict(os.environ, DEPLOY_WORK=self.w.work)

    def exec(self, c, timeout=60, command=None):
        r = run(self.argv(c, command), timeout=timeout, env=self.env())
        self.log(c["name"], r.stdout, r.stderr)
        return r

    def start(self, c):
        out = open(os.path.join(self.dir, c["name"] + ".out"), "w")
        err = open(os.path.join(self.dir, c["name"] + ".err"), "w")
        p = subprocess.Popen(self.argv(c), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=self.env())
        self.w.bg.append(p)
        self.procs[c["name"]] = p
        return p

    def log(self, name, out, err):
        with open(os.path.join(self.dir, name + ".out"), "a") as f:
            f.write(out)
        with open(os.path.join(self.dir, name + ".err"), "a") as f:
            f.write(err)

    def err(self, name):
        with open(os.path.join(self.dir, name + ".err")) as f:
            return f.read()

    def probe(self, c, kind):
        """One httpGet probe of container c, as the kubelet makes it (from
        the pod's network namespace): (HTTP status, body)."""
        probe = c.get(kind, {}).get("httpGet")
        check(probe, f"{c['name']} has no httpGet {kind}")
        url = f"http://127.0.0.1:{probe['port']}{probe['path']}"
        r = run(["ip", "netns", "exec", self.netns, "curl", "-s", "-o", "-", "-w", "\n%{http_code}", url])
        body, _, code = r.stdout.rpartition("\n")
        return (int(code) if code.isdigit() else 0), body

    def wait_ready(self, c, secs=10):
        """A container's readinessProbe answers 200, then its livenessProbe
        does too."""
        for _ in range(secs * 20):
            if self.probe(c, "readinessProbe")[0] == 200:
                code, body = self.probe(c, "livenessProbe")
                check(code == 200, f"{self.name}/{c['name']}: ready, but its livenessProbe says {code} {body!r}")
                return
            check(self.procs[c["name"]].poll() is None,
                  f"{self.name}/{c['name']} exited: {self.err(c['name'])[-300:]}")
            time.sleep(0.05)
        raise Fail(f"{self.name}/{c['name']}: readinessProbe not 200 after {secs} s")

    def init(self):
        """The init containers in order; a native sidecar (restartPolicy
        Always) is started and must be ready before the next one."""
        for c in self.spec.get("initContainers", []):
            if c.get("restartPolicy") == "Always":
                self.start(c)
                self.wait_ready(c)
                note(f"{self.name}: sidecar {c['name']} ready")
            else:
                r = self.exec(c)
                check(r.returncode == 0, f"{self.name}: init container {c['name']} failed "
                      f"({r.returncode}): {r.stderr.strip()[-300:]}")

    def container(self, name):
        for c in self.spec.get("containers", []) + self.spec.get("initContainers", []):
            if c["name"] == name:
                return c
        raise Fail(f"{self.name}: no container {name}")


def wait_listen(netns, port, proc, secs=10):
    for _ in range(secs * 20):
        if run(["ip", "netns", "exec", netns, "ss", "-Hltn", f"( sport = :{port} )"]).stdout.strip():
            return
        check(proc.poll() is None, f"process exited before listening on {port}")
        time.sleep(0.05)
    raise Fail(f"nothing listens on {port} in {netns}")


SUMMARY = re.compile(r"summary: connections shm=(\d+) fabric=(\d+) kernel=(\d+)")


def summary(text, who):
    m = SUMMARY.findall(text)
    check(m, f"{who}: no shunt summary line on stderr (log=info in the ConfigMap): {text[-300:]}")
    return tuple(int(x) for x in m[-1])


def bench_results(out, who):
    rows = {}
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if len(f) >= 2 and f[0] in ("SET", "GET"):
            rows[f[0]] = float(f[1])
    check(set(rows) == {"SET", "GET"} and all(v > 0 for v in rows.values()),
          f"{who}: redis-benchmark printed no SET and GET rates: {out[-300:]}")
    return rows


def stat_proc(pod, program, rundir=None, may_be_absent=False):
    """shunt stat --json run in the agent's container, as
    `kubectl exec -c shuntd redis-... -- shunt stat ...` would: the one
    process named PROGRAM."""
    rundir = rundir or RUNDIR
    c = pod.container("shuntd")
    r = pod.exec(c, command=["shunt", "stat", "--rundir", rundir, "--json", "-n", program])
    check(r.returncode == 0, f"shunt stat failed: {r.stderr.strip()}")
    procs = json.loads(r.stdout.splitlines()[-1])["processes"]
    if not procs and may_be_absent:  # no connection yet, no counters yet
        return {"totals": {"connections": {"shm": 0, "fabric": 0, "kernel": 0}, "fallbacks": {}}}
    check(len(procs) == 1, f"shunt stat: {len(procs)} {program} processes in {rundir}")
    return procs[0]


def stat_totals(pod, program, rundir=None, may_be_absent=False):
    return stat_proc(pod, program, rundir, may_be_absent)["totals"]


def with_options(spec, options):
    """The pod spec with SHUNT_OPTIONS=OPTIONS added to every container that
    preloads the library: the documented way to change one setting for a
    pod without another ConfigMap."""
    spec = copy.deepcopy(spec)
    for c in spec.get("containers", []):
        if any(e["name"] == "LD_PRELOAD" for e in c.get("env", [])):
            c["env"].append({"name": "SHUNT_OPTIONS", "value": options})
    return spec


def client_run(pod, want, reason=None):
    """The Job's redis-benchmark, then redis-cli with the same environment
    reading what it wrote; both must be on transport WANT, all of them (on
    the kernel path, all for REASON)."""
    c = pod.container("redis-benchmark")
    pod.init()
    t0 = time.monotonic()
    r = pod.exec(c, timeout=60)
    check(r.returncode == 0, f"{pod.name}: redis-benchmark failed ({r.returncode}): {r.stderr[-300:]}")
    rates = bench_results(r.stdout, f"{pod.name}/redis-benchmark")
    n = summary(r.stderr, f"{pod.name}/redis-benchmark")
    idx = {"shm": 0, "fabric": 1, "kernel": 2}[want]
    conns = n[idx]
    check(n[idx] >= 4 and sum(n) == n[idx],
          f"{pod.name}: redis-benchmark connections shm={n[0]} fabric={n[1]} kernel={n[2]}, all on {want} expected"
          f" ({[ln for ln in r.stderr.splitlines() if 'fallback' in ln or 'warn' in ln][:3]})")
    if reason:
        check(re.search(rf"summary: .* fallbacks {reason}={conns}$", r.stderr, re.M),
              f"{pod.name}: redis-benchmark's fallbacks are not {reason}={conns}: "
              f"{[ln for ln in r.stderr.splitlines() if 'summary' in ln]}")
    note(f"{pod.name}: redis-benchmark on {want}{' (' + reason + ')' if reason else ''}: {n[idx]} connections, SET {rates['SET']:.0f}/s "
         f"GET {rates['GET']:.0f}/s ({time.monotonic() - t0:.1f} s)")
    # What the benchmark stored, read back over the accelerated path and
    # plainly (no shunt) from inside the server's pod: the same bytes.
    key = "key:__rand_int__"
    h = c["command"][c["command"].index("-h") + 1]
    r = pod.exec(c, command=["redis-cli", "-h", h, "-p", "6379", "--no-raw", "GET", key])
    check(r.returncode == 0, f"{pod.name}: redis-cli failed: {r.stderr[-300:]}")
    n = summary(r.stderr, f"{pod.name}/redis-cli")
    check(n[idx] == 1 and sum(n) == 1, f"{pod.name}: redis-cli connection not on {want}: {n}")
    return r.stdout, conns + 1


RUNDIR = None


def main():
    global RUNDIR, IMG
    if os.geteuid() != 0:
        print(f"SKIP: {NAME} needs root (network and mount namespaces)")
        return 0
    check(IMG and os.path.isfile(os.path.join(IMG, "usr/lib/shunt/install-into")),
          f"DEPLOY_ROOT={IMG!r} is not an unpacked shunt package (deploy_package fixture)")
    for p in ("redis-server", "redis-benchmark", "redis-cli", "curl", "ss", "setpriv", "unshare"):
        check(shutil.which(p), f"{p} is not installed (scripts/deps.sh)")
    # Each container gets its own /tmp, /run, /opt and /etc: an image tree
    # under one of them (a build tree in /tmp) would be hidden there, so it
    # is copied out first.
    masked = ("/tmp/", "/run/", "/opt/", "/etc/")
    if any((IMG + "/").startswith(m) for m in masked):
        staged = tempfile.mkdtemp(prefix="shunt-deploy-img.", dir="/var/tmp")
        os.chmod(staged, 0o755)  # containers run as other users
        atexit.register(shutil.rmtree, staged, True)
        shutil.copytree(IMG, os.path.join(staged, "root"), symlinks=True)
        IMG = os.path.join(staged, "root")
    for bad in masked:
        check(not (IMG + "/").startswith(bad), f"DEPLOY_ROOT must not be under {bad}")

    server = find(load(os.path.join(K8S, "redis-server.yaml")), "Deployment")["spec"]["template"]["spec"]
    job = find(load(os.path.join(K8S, "redis-benchmark.yaml")), "Job")["spec"]["template"]["spec"]
    conf = find(load(os.path.join(K8S, "shunt-config.yaml")), "ConfigMap")["data"]["shunt.conf"]
    m = re.search(r"^rundir\s*=\s*(\S+)", conf, re.M)
    check(m, "no rundir in the ConfigMap")
    RUNDIR = m.group(1)

    w = World()
    failed = []
    try:
        na, nb, nc = w.ns("a"), w.ns("b"), w.ns("c")
        w.link(na, "198.18.0.1", nb, "198.18.0.2")   # node 1, pod to pod
        w.link(na, "198.18.1.1", nc, "198.18.1.2")   # to node 2
        a = Pod(w, "redis-a", "node1", na, server, [])
        a.init()
        state = {}

        def start_redis(spec):
            """pod A's redis container (of SPEC), listening, preloaded."""
            c = next(x for x in spec["containers"] if x["name"] == "redis")
            p = a.start(c)
            wait_listen(na, 6379, p)
            maps = open(f"/proc/{p.pid}/maps").read()
            check("/opt/shunt/libshunt.so" in maps, "redis-server has not mapped /opt/shunt/libshunt.so")
            state["redis"] = p
            return maps

        maps = start_redis(server)
        # fabric_provider = auto and no RDMA device: a listen() that other
        # hosts reach needs no libfabric (fabric/fab_prov.c), so the
        # server never loads it.
        libs = [l.split()[-1] for l in maps.splitlines() if "libfabric.so" in l]
        check(not libs, f"redis-server loaded libfabric without RDMA (fabric_provider = auto): {libs}")
        note(f"pod {a.name}: redis-server {state['redis'].pid} preloaded from the volume, no libfabric")

        def plain_get(netns=None):
            r = run(["ip", "netns", "exec", netns or na, "redis-cli", "-p", "6379", "--no-raw",
                     "GET", "key:__rand_int__"])
            check(r.returncode == 0, f"plain redis-cli: {r.stderr}")
            return r.stdout

        def sub(pod_name, netns, node, host, want, jobspec=job, reason=None):
            """The Job on a pod, then what redis-server's counters say (read
            with shunt stat in the sidecar), then one plain read of what it
            stored: exactly the Job's connections on WANT, one kernel-path
            connection (the plain read, no-peer-shim), the same value."""
            before = stat_totals(a, "redis-server", may_be_absent=True)
            pod = Pod(w, pod_name, node, netns, jobspec, [host + " redis"])
            got, conns = client_run(pod, want, reason)
            if want == "fabric":
                # The application image need not have libfabric: the
                # volume has it, and libshunt.so's RPATH finds it there.
                maps = open(f"/proc/{state['redis'].pid}/maps").read()
                deps = sorted({l.split()[-1] for l in maps.splitlines() if "/opt/shunt/deps/" in l})
                check("/opt/shunt/deps/libfabric.so.1" in maps and
                      "/opt/shunt/deps/librdmacm.so.1" in maps,
                      f"redis-server does not take libfabric and its dependencies from the volume: {deps}")
            plain = plain_get()
            check(got.strip() not in ("", "(nil)") and got == plain,
                  f"value over {want} {got!r} != plain {plain!r}")
            t = stat_totals(a, "redis-server")
            d = {k: t["connections"][k] - before["connections"][k] for k in ("shm", "fabric", "kernel")}
            kernel = conns + 1 if want == "kernel" else 1
            check(d[want] == (kernel if want == "kernel" else conns) and d["kernel"] == kernel
                  and sum(d.values()) == conns + 1,
                  f"shunt stat in the sidecar: redis-server got {d}, expected {want}={conns} and one plain")
            # The server finds no offer for a connection its client kept on
            # TCP, whatever the client's own reason.
            check(t["fallbacks"].get("no-peer-shim", 0) - before["fallbacks"].get("no-peer-shim", 0) == kernel,
                  f"redis-server's kernel-path connections are not all no-peer-shim: {t['fallbacks']}")
            note(f"shunt stat --rundir {RUNDIR} in the sidecar: redis-server +{d}")

        def fabric():
            """The documented test override, in both pods: redis restarted
            with it, then the Job."""
            tcp = with_options(server, "fabric_provider=tcp")
            state["redis"].kill()
            state["redis"].wait(10)
            maps = start_redis(tcp)
            libs = [l.split()[-1] for l in maps.splitlines() if "libfabric.so" in l]
            check(libs and all(p.startswith("/opt/shunt/deps/") for p in libs),
                  f"redis-server (fabric_provider=tcp) has not loaded libfabric from the volume at listen(): {libs}")
            # Every connection asserted on fabric: the first waits for
            # libfabric's start-up rather than go by TCP meanwhile.
            sub("bench-c2", nc, "node2", "198.18.1.1", "fabric",
                with_options(job, "fabric_provider=tcp,fabric_load_wait_ms=30000"))

        subs = (("shm", lambda: sub("bench-b", nb, "node1", "198.18.0.1", "shm")),
                ("remote", lambda: sub("bench-c", nc, "node2", "198.18.1.1", "kernel", reason="no-rdma-route")),
                ("fabric", fabric),
                ("node", lambda: node_shape(w, plain_get)))
        for name, fn in subs:
            if ONLY and name not in ONLY:
                continue
            t0 = time.monotonic()
            try:
                fn()
                note(f"ok {name} ({time.monotonic() - t0:.1f} s)")
            except (Fail, subprocess.TimeoutExpired, OSError, KeyError, ValueError,
                    kustomize_render.RenderError) as e:
                print(f"FAIL: {NAME}/{name}: {e}", flush=True)
                failed.append(name)
        check(state["redis"].poll() is None, f"redis-server exited: {a.err('redis')[-300:]}")
        check("warn" not in a.err("shuntd") and "error" not in a.err("shuntd"),
              f"shuntd complained: {a.err('shuntd')[-300:]}")
    except (Fail, subprocess.TimeoutExpired, OSError) as e:
        print(f"FAIL: {NAME}: {e}", flush=True)
        return 1
    finally:
        w.cleanup()
    if failed:
        print(f"FAIL: {NAME}: failed subtests: {' '.join(failed)}")
        return 1
    print(f"PASS: {NAME}")
    return 0


def node_shape(w, plain_get):
    """The node agent of node-agent.yaml on node 1's host network, and the
    redis Deployment and Job of examples/k8s/kustomize/redis rendered with
    the shunt component, run as rendered, as users 999 and 1000."""
    docs = load(os.path.join(K8S, "node-agent.yaml"))
    ds = find(docs, "DaemonSet")["spec"]["template"]["spec"]
    rendered, how = kustomize_render.render(os.path.join(K8S, "kustomize/redis"))
    note(f"examples/k8s/kustomize/redis rendered by {how}")
    for d in rendered:
        if d["kind"] == "ConfigMap":
            check(w.configmaps.get(d["metadata"]["name"]) == d["data"],
                  f"the component's ConfigMap {d['metadata']['name']} is not node-agent.yaml's")
    dep = find(rendered, "Deployment")["spec"]["template"]["spec"]
    job = find(rendered, "Job")["spec"]["template"]["spec"]
    conf = w.configmaps["shunt-node-config"]["shunt.conf"]
    rundir = re.search(r"^rundir\s*=\s*(\S+)", conf, re.M).group(1)
    group = int(re.search(r"^shm_group\s*=\s*(\d+)", conf, re.M).group(1))

    check(ds.get("hostNetwork"), "the node agent is not on the host network")
    host = w.ns("n1")  # node 1's own network namespace
    agent = Pod(w, "shuntd-n1", "node1", host, ds, [])
    agent.init()
    c = agent.container("shuntd")
    agent.start(c)
    agent.wait_ready(c)
    st = os.stat(os.path.join(agent.volumes["shunt-run"], os.path.relpath(rundir, "/run/shunt")))
    check((st.st_mode & 0o7777, st.st_gid) == (0o2770, group),
          f"the node rundir is {st.st_mode & 0o7777:o} group {st.st_gid}, expected 2770 group {group}")
    note(f"node agent ready on node 1's host network; {rundir} 2770 group {group}")

    nd, ne = w.ns("d"), w.ns("e")
    w.link(nd, "198.18.2.1", ne, "198.18.2.2")
    server = Pod(w, "redis-d", "node1", nd, dep, [])
    server.init()
    p = server.start(server.container("redis"))
    wait_listen(nd, 6379, p)
    check("/opt/shunt/libshunt.so" in open(f"/proc/{p.pid}/maps").read(),
          "the rendered redis has not mapped /opt/shunt/libshunt.so")
    client = Pod(w, "bench-e", "node1", ne, job, ["198.18.2.1 redis"])
    got, conns = client_run(client, "shm")
    plain = plain_get(nd)
    check(got.strip() not in ("", "(nil)") and got == plain, f"value over shm {got!r} != plain {plain!r}")
    proc = stat_proc(agent, "redis-server", rundir)
    t = proc["totals"]["connections"]
    users = {server.user(server.container("redis")), client.user(client.container("redis-benchmark"))}
    check(proc["uid"] == 999 and t["shm"] == conns and t["kernel"] == 1,
          f"shunt stat in the node agent: redis-server uid {proc['uid']} {t}, expected uid 999, "
          f"shm={conns} and the plain read")
    p.kill()
    p.wait(10)
    note(f"node shape: redis and redis-benchmark as {sorted(users)}, {conns} connections on shm "
         f"through the node's rundir; shunt stat in the node agent agrees")


if __name__ == "__main__":
    sys.exit(main())
