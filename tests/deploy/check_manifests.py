#!/usr/bin/env python3
"""deploy_manifests: examples/container, examples/k8s and examples/compose
say the same thing, and everything they name exists.

  * every YAML file parses; the kinds are the expected ones;
  * every command an init container or sidecar runs is in the package
    (DEPLOY_ROOT, the unpacked .deb of the deploy_package fixture) or, for
    `install`, in the Debian base image (coreutils);
  * LD_PRELOAD names libshunt.so in the volume install-into fills, mounted at
    the same path; SHUNT_CONFIG names a key of the ConfigMap where it is
    mounted; every SHUNT_* variable is one the package's library reads; no
    other variable is given to the applications;
  * the ConfigMap's shunt.conf loads (`shunt config --check` of the package),
    its rundir is inside the rundir volume and is the directory the
    shunt-rundir init container makes;
  * compose: the same commands, environment, mount paths and shunt.conf as
    the Kubernetes manifests;
  * Containerfile: its CMD is the sidecar's command, it installs the package
    cpack makes (tests/deploy/package.sh runs its cpack line), and every
    Debian package its build stage installs is in scripts/deps.sh, so the
    tests build the way the image does;
  * every container of every workload (init containers, sidecars, the
    node agent, what the kustomize component adds) has CPU and memory
    requests and a memory limit; every emptyDir a sizeLimit;
  * every agent (the native sidecar, the node agent DaemonSet) has
    liveness and readiness probes on GET /healthz at its agent_port;
  * the NetworkPolicy selects the sidecar's pods, admits agent_port from
    the pods labelled as shunt clients (the Job is) and still admits the
    application's own ports;
  * the node shape: node-agent.yaml's shunt.conf is the component's, it
    loads, its rundir is what the DaemonSet's init container makes, with
    the group of shm_group, which the component gives its pods; the agent
    is root (it reads every user's counters);
  * the kustomize component, rendered (tests/deploy/kustomize_render.py:
    kubectl kustomize where it can, checked against the test's renderer)
    over examples/k8s/kustomize/redis (the same checks as the hand-written
    pods: LD_PRELOAD in the volume install-into fills, SHUNT_CONFIG a key
    of the mounted ConfigMap, the rundir in a mounted volume) and over the
    fixtures of tests/deploy/fixtures/kustomize: every container of every
    Deployment, StatefulSet, DaemonSet and Job gets the two variables and
    the three mounts once, its own entries kept (its own LD_PRELOAD
    replaced); every pod template the init container, the three volumes
    and the group, its own kept; other objects untouched.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kustomize_render  # noqa: E402

SRC = os.environ.get("SHUNT_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
ROOT = os.environ.get("DEPLOY_ROOT", "")
NAME = "deploy_manifests"
errors = []


def err(msg):
    errors.append(msg)
    print(f"FAIL: {NAME}: {msg}", flush=True)


def load(path):
    try:
        with open(path) as f:
            return [d for d in yaml.safe_load_all(f) if d]
    except yaml.YAMLError as e:
        err(f"{path}: {e}")
        return []


def check_component(out, fixture):
    """What the component made of the fixtures, object by object."""
    with open(os.path.join(SRC, "examples/k8s/kustomize/shunt/inject.yaml")) as f:
        inject = yaml.safe_load(f)["spec"]
    with open(os.path.join(SRC, "examples/k8s/kustomize/shunt/pod-template.yaml")) as f:
        pod = yaml.safe_load(f)["spec"]["template"]["spec"]
    before = {(d["kind"], d["metadata"]["name"]): d for d in load(os.path.join(fixture, "workloads.yaml"))}
    after = {(d["kind"], d["metadata"]["name"]): d for d in out}
    extra = set(after) - set(before)
    if extra != {("ConfigMap", "shunt-node-config")}:
        err(f"component: it added {sorted(extra)}, expected only the ConfigMap shunt-node-config")
    names = lambda lst: [x["name"] for x in lst or []]  # noqa: E731
    for k, b in before.items():
        a = after.get(k)
        if k[0] not in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            if a != b:
                err(f"component: {k} changed, and is not a workload it patches")
            continue
        bs, s = b["spec"]["template"]["spec"], a["spec"]["template"]["spec"]
        want_init = names(pod["initContainers"]) + names(bs.get("initContainers"))
        if names(s.get("initContainers")) != want_init:
            err(f"component: {k} init containers {names(s.get('initContainers'))}, expected {want_init}")
        if sorted(names(s["volumes"])) != sorted(names(pod["volumes"]) + names(bs.get("volumes"))):
            err(f"component: {k} volumes {names(s['volumes'])}")
        sc = dict(bs.get("securityContext", {}), supplementalGroups=pod["securityContext"]["supplementalGroups"])
        if s.get("securityContext") != sc:
            err(f"component: {k} securityContext {s.get('securityContext')}, expected {sc}")
        if names(s["containers"]) != names(bs["containers"]):
            err(f"component: {k} containers {names(s['containers'])}, expected {names(bs['containers'])}")
        for bc, c in zip(bs["containers"], s["containers"]):
            own_env = [e for e in bc.get("env", []) if e["name"] not in names(inject["env"])]
            got = c.get("env", [])
            if [e for e in got if e["name"] not in names(inject["env"])] != own_env or \
                    sorted((e["name"], e["value"]) for e in got if e["name"] in names(inject["env"])) != \
                    sorted((e["name"], e["value"]) for e in inject["env"]):
                err(f"component: {k}/{c['name']} env {got}: expected its own {own_env} and shunt's once")
            want_m = bc.get("volumeMounts", []) + inject["volumeMounts"]
            canon = lambda lst: sorted(json.dumps(x, sort_keys=True) for x in lst)  # noqa: E731
            if canon(c.get("volumeMounts", [])) != canon(want_m):
                err(f"component: {k}/{c['name']} mounts {c.get('volumeMounts')}, expected {want_m}")
            rest = {x: y for x, y in c.items() if x not in ("env", "volumeMounts")}
            if rest != {x: y for x, y in bc.items() if x not in ("env", "volumeMounts")}:
                err(f"component: {k}/{c['name']} changed beyond env and mounts")
    print(f"{NAME}: component over {len(before)} fixture objects: workloads injected, others untouched")


def main():
    if not (ROOT and os.path.isfile(os.path.join(ROOT, "usr/bin/shunt"))):
        print(f"FAIL: {NAME}: DEPLOY_ROOT={ROOT!r} is not an unpacked shunt package")
        return 1
    libs = glob.glob(os.path.join(ROOT, "usr/lib/**/shunt/libshunt.so"), recursive=True)
    if len(libs) != 1:
        print(f"FAIL: {NAME}: {len(libs)} libshunt.so in the package")
        return 1
    libbytes = open(libs[0], "rb").read()

    # ---- parse everything
    k8s = {os.path.basename(p): load(p) for p in sorted(glob.glob(os.path.join(SRC, "examples/k8s/*.yaml")))}
    compose = load(os.path.join(SRC, "examples/compose/compose.yaml"))
    kinds = {f: [d["kind"] for d in docs] for f, docs in k8s.items()}
    want = {"shunt-config.yaml": ["ConfigMap", "Secret"], "redis-server.yaml": ["Deployment", "Service"],
            "redis-benchmark.yaml": ["Job"], "networkpolicy.yaml": ["NetworkPolicy"],
            "node-agent.yaml": ["Namespace", "ConfigMap", "DaemonSet"]}
    if kinds != want:
        err(f"examples/k8s kinds {kinds}, expected {want}")
        return 1
    if len(compose) != 1:
        err("compose.yaml is not one document")
        return 1
    compose = compose[0]
    cm = k8s["shunt-config.yaml"][0]
    conf = cm["data"]["shunt.conf"]
    svc = k8s["redis-server.yaml"][1]
    if svc["spec"].get("clusterIP") != "None":
        err("the redis Service must be headless (clusterIP: None): a virtual IP is in no registry")
    renders = {}
    for d in ("examples/k8s/kustomize/redis", "tests/deploy/fixtures/kustomize"):
        try:
            renders[d], how = kustomize_render.render(os.path.join(SRC, d))
            print(f"{NAME}: {d} rendered by {how}")
        except (kustomize_render.RenderError, OSError, subprocess.SubprocessError) as e:
            err(f"{d}: {e}")
            return 1
    configmaps = {cm["metadata"]["name"]: cm["data"], k8s["node-agent.yaml"][1]["metadata"]["name"]:
                  k8s["node-agent.yaml"][1]["data"]}
    for d in renders["examples/k8s/kustomize/redis"]:
        if d["kind"] == "ConfigMap":
            if configmaps.get(d["metadata"]["name"], d["data"]) != d["data"]:
                err(f"the component's ConfigMap {d['metadata']['name']} differs from node-agent.yaml's")
            configmaps[d["metadata"]["name"]] = d["data"]

    # ---- every shunt.conf loads
    rundirs = {}
    for name, data in configmaps.items():
        text = data["shunt.conf"]
        cfile = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"shunt-deploy-conf.{os.getpid()}")
        with open(cfile, "w") as f:
            f.write(text)
        r = subprocess.run([os.path.join(ROOT, "usr/bin/shunt"), "config", "--check", cfile],
                           capture_output=True, text=True)
        os.unlink(cfile)
        if r.returncode != 0:
            err(f"the ConfigMap {name}'s shunt.conf does not load: {r.stderr.strip()}")
        m = re.search(r"^rundir\s*=\s*(\S+)\s*$", text, re.M)
        rundirs[name] = m.group(1) if m else None
        if not rundirs[name] or len(rundirs[name]) > 80:
            err(f"the ConfigMap {name}'s rundir {rundirs[name]!r}: missing or longer than 80 bytes")

    # ---- resources and probes, everywhere
    def workloads():
        """(where, kind, pod spec) of every workload the examples hold."""
        for f, docs in list(k8s.items()) + list(renders.items()):
            for d in docs:
                if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
                    yield f"{f}/{d['metadata']['name']}", d["kind"], d["spec"]["template"]["spec"]

    def conf_of(spec, c):
        """The ConfigMap data a container reads shunt.conf from (--config or
        SHUNT_CONFIG), or None."""
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        cmd = c.get("command", [])
        path = cmd[cmd.index("--config") + 1] if "--config" in cmd else env.get("SHUNT_CONFIG")
        if not path:
            return None
        d, key = os.path.split(path)
        for mnt in c.get("volumeMounts", []):
            v = vols.get(mnt["name"], {})
            if mnt["mountPath"] == d and "configMap" in v and key in configmaps.get(v["configMap"]["name"], {}):
                return v["configMap"]["name"]
        return None

    def agent_port(cmname):
        m = re.search(r"^agent_port\s*=\s*(\d+)", configmaps[cmname]["shunt.conf"], re.M)
        return int(m.group(1)) if m else 7476

    in_fixture = "tests/deploy/fixtures/kustomize"
    for where, kind, spec in workloads():
        if where.startswith(in_fixture):
            continue  # the fixtures' own containers are not ours to size
        for c in spec.get("initContainers", []) + spec["containers"]:
            r = c.get("resources", {})
            if not (r.get("requests", {}).keys() >= {"cpu", "memory"} and "memory" in r.get("limits", {})):
                err(f"{where}/{c['name']}: resources must request cpu and memory and limit memory: {r}")
            if c["command"][0] == "shuntd":
                port = agent_port(conf_of(spec, c) or "?") if conf_of(spec, c) else None
                for probe in ("livenessProbe", "readinessProbe"):
                    g = c.get(probe, {}).get("httpGet", {})
                    if g.get("path") != "/healthz" or g.get("port") != port:
                        err(f"{where}/{c['name']}: {probe} must be GET /healthz on the agent port {port}: {g}")
        for v in spec.get("volumes", []):
            if "emptyDir" in v and not (v["emptyDir"] or {}).get("sizeLimit"):
                err(f"{where}: emptyDir {v['name']} has no sizeLimit")

    # ---- the NetworkPolicy admits the clients to the sidecar's agent
    np = k8s["networkpolicy.yaml"][0]["spec"]
    dep = k8s["redis-server.yaml"][0]["spec"]["template"]
    job = k8s["redis-benchmark.yaml"][0]["spec"]["template"]
    sel = np["podSelector"]["matchLabels"]
    if not sel.items() <= dep["metadata"]["labels"].items():
        err(f"the NetworkPolicy selects {sel}, not the redis pods {dep['metadata']['labels']}")
    ports = {p["containerPort"] for c in dep["spec"]["containers"] + dep["spec"]["initContainers"]
             for p in c.get("ports", [])}
    admitted = {p["port"] for rule in np["ingress"] for p in rule.get("ports", [])}
    if admitted != ports:
        err(f"the NetworkPolicy admits ports {sorted(admitted)}, the pod has {sorted(ports)}")
    agent_rules = [rule for rule in np["ingress"] if 7476 in {p["port"] for p in rule.get("ports", [])}]
    client_sel = [f["podSelector"]["matchLabels"] for rule in agent_rules for f in rule.get("from", [])
                  if "podSelector" in f]
    if not any(c.items() <= job["metadata"]["labels"].items() for c in client_sel):
        err(f"the NetworkPolicy does not admit the Job's pods {job['metadata']['labels']} to the agent")

    # ---- the node shape agrees with itself
    ds = k8s["node-agent.yaml"][2]["spec"]["template"]["spec"]
    node_conf = configmaps["shunt-node-config"]["shunt.conf"]
    with open(os.path.join(SRC, "examples/k8s/kustomize/shunt/shunt.conf")) as f:
        if f.read() != node_conf:
            err("node-agent.yaml's shunt.conf differs from examples/k8s/kustomize/shunt/shunt.conf")
    m = re.search(r"^shm_group\s*=\s*(\d+)\s*$", node_conf, re.M)
    group = int(m.group(1)) if m else None
    mk = {c["name"]: c for c in ds["initContainers"]}.get("shunt-rundir", {}).get("command", [])
    if mk[:1] != ["install"] or mk[-1] != rundirs["shunt-node-config"] or \
            mk[mk.index("-m") + 1] != "2770" or int(mk[mk.index("-g") + 1]) != group:
        err(f"the node agent's init container {mk} does not make {rundirs['shunt-node-config']} 2770 "
            f"of group {group} (shm_group)")
    if not ds.get("hostNetwork") or ds["securityContext"].get("runAsUser") != 0:
        err("the node agent must be on the host network, and root (it reads every user's counters)")
    with open(os.path.join(SRC, "examples/k8s/kustomize/shunt/pod-template.yaml")) as f:
        pt = yaml.safe_load(f)["spec"]["template"]["spec"]
    if pt["securityContext"].get("supplementalGroups") != [group]:
        err(f"the component does not give its pods the rundir's group {group}")

    # ---- the pods
    pods = {"redis-server.yaml": k8s["redis-server.yaml"][0]["spec"]["template"]["spec"],
            "redis-benchmark.yaml": k8s["redis-benchmark.yaml"][0]["spec"]["template"]["spec"]}
    for d in renders["examples/k8s/kustomize/redis"]:
        if d["kind"] in ("Deployment", "Job"):
            pods[f"kustomize/redis/{d['metadata']['name']}"] = d["spec"]["template"]["spec"]
    facts = {}
    for fname, spec in pods.items():
        vols = {v["name"]: v for v in spec["volumes"]}
        inits = {c["name"]: c for c in spec.get("initContainers", [])}
        apps = {c["name"]: c for c in spec["containers"]}
        for c in list(inits.values()) + list(apps.values()):
            for mnt in c.get("volumeMounts", []):
                if mnt["name"] not in vols:
                    err(f"{fname}/{c['name']}: mounts undeclared volume {mnt['name']}")
        mounts = lambda c: {mnt["mountPath"]: vols[mnt["name"]] for mnt in c.get("volumeMounts", [])}  # noqa: E731
        mount_of = lambda c, vname: [mnt["mountPath"] for mnt in c.get("volumeMounts", []) if mnt["name"] == vname]  # noqa: E731

        inst = inits.get("shunt-install")
        if not inst or inst["command"][0] != "/usr/lib/shunt/install-into" or len(inst["command"]) != 2:
            err(f"{fname}: no init container shunt-install running /usr/lib/shunt/install-into VOLUME")
            continue
        if not os.access(ROOT + inst["command"][0], os.X_OK):
            err(f"{fname}: {inst['command'][0]} is not an executable of the package")
        libvol = [mnt["name"] for mnt in inst["volumeMounts"] if mnt["mountPath"] == inst["command"][1]]
        if len(libvol) != 1 or "emptyDir" not in vols[libvol[0]]:
            err(f"{fname}: install-into's {inst['command'][1]} is not an emptyDir mounted there")
            continue
        pod_conf = {conf_of(spec, c) for c in apps.values()}
        if len(pod_conf) != 1 or None in pod_conf:
            err(f"{fname}: the applications do not read one mounted ConfigMap: {pod_conf}")
            continue
        pod_rundir = rundirs[pod_conf.pop()]
        rd = inits.get("shunt-rundir")
        if rd:
            if rd["command"][0] != "install" or rd["command"][-1] != pod_rundir:
                err(f"{fname}: shunt-rundir makes {rd['command'][-1]}, the ConfigMap's rundir is {pod_rundir}")
            if not os.access("/usr/bin/install", os.X_OK):
                err("install(1) is not in /usr/bin (coreutils)")
        side = [c for c in inits.values() if c.get("restartPolicy") == "Always"]
        for c in side:
            if not any(os.access(os.path.join(ROOT, d, c["command"][0]), os.X_OK) for d in ("usr/sbin", "usr/bin")):
                err(f"{fname}/{c['name']}: {c['command'][0]} is not in the package")
            facts.setdefault("sidecar", c["command"])
        for c in list(inits.values()) + list(apps.values()):
            m = mounts(c)
            if "--config" in c.get("command", []) and not conf_of(spec, c):
                err(f"{fname}/{c['name']}: --config is not a key of the mounted ConfigMap")
            if c.get("env") or c["name"] == "shuntd":
                rmount = [mp for mp, v in m.items() if ("hostPath" in v or "emptyDir" in v)
                          and pod_rundir.startswith(mp.rstrip("/") + "/")]
                if not rmount:
                    err(f"{fname}/{c['name']}: the rundir {pod_rundir} is not inside a volume it mounts")
        for c in apps.values():
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            facts.setdefault("env", env)
            if env != facts["env"]:
                err(f"{fname}/{c['name']}: environment {env} differs from {facts['env']}")
            for k in env:
                if k != "LD_PRELOAD" and not k.startswith("SHUNT_"):
                    err(f"{fname}/{c['name']}: {k} is not a variable of shunt")
                elif k.startswith("SHUNT_") and k.encode() + b"\0" not in libbytes:
                    err(f"{fname}/{c['name']}: the library does not read {k}")
            lp = env.get("LD_PRELOAD", "")
            if lp not in [mp + "/libshunt.so" for mp in mount_of(c, libvol[0])]:
                err(f"{fname}/{c['name']}: LD_PRELOAD={lp} is not libshunt.so in the volume install-into fills")
            if not conf_of(spec, c):
                err(f"{fname}/{c['name']}: SHUNT_CONFIG={env.get('SHUNT_CONFIG')} is not a key of the mounted ConfigMap")
            if fname.endswith(".yaml"):  # the hand-written pods: compose says the same
                facts.setdefault("apps", {})[c["name"]] = {
                    "command": c["command"], "mounts": sorted(mnt["mountPath"] for mnt in c["volumeMounts"])}
        facts.setdefault("install", inst["command"])

    check_component(renders[in_fixture], os.path.join(SRC, in_fixture))

    # ---- compose says the same
    svcs = compose.get("services", {})
    if svcs.get("shunt-install", {}).get("command") != facts.get("install"):
        err(f"compose shunt-install runs {svcs.get('shunt-install', {}).get('command')}, k8s {facts.get('install')}")
    if svcs.get("shuntd", {}).get("command") != facts.get("sidecar"):
        err(f"compose shuntd runs {svcs.get('shuntd', {}).get('command')}, k8s {facts.get('sidecar')}")
    if svcs.get("shuntd", {}).get("network_mode") != "service:redis":
        err("compose shuntd must share redis's network namespace (network_mode: service:redis)")
    for name, app in facts.get("apps", {}).items():
        s = svcs.get(name)
        if not s:
            err(f"compose has no service {name}")
            continue
        if s.get("command") != app["command"]:
            err(f"compose {name} runs {s.get('command')}, k8s {app['command']}")
        if s.get("environment") != facts["env"]:
            err(f"compose {name} environment {s.get('environment')}, k8s {facts['env']}")
        paths = sorted([v.split(":")[1] for v in s.get("volumes", [])] + [c["target"].rsplit("/", 1)[0]
                                                                         for c in s.get("configs", [])])
        if paths != app["mounts"]:
            err(f"compose {name} mounts {paths}, k8s {app['mounts']}")
        if [c["target"] for c in s.get("configs", [])] != [facts["env"].get("SHUNT_CONFIG")]:
            err(f"compose {name}: shunt.conf is not at SHUNT_CONFIG")
    with open(os.path.join(SRC, "examples/compose", compose["configs"]["shunt-conf"]["file"])) as f:
        if f.read() != conf:
            err("examples/compose/shunt.conf differs from the ConfigMap's shunt.conf")

    # ---- Containerfile
    with open(os.path.join(SRC, "examples/container/Containerfile")) as f:
        cf = f.read().replace("\\\n", " ")
    lines = [ln.strip() for ln in cf.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    cmd = [ln for ln in lines if ln.startswith("CMD ")]
    if len(cmd) != 1 or json.loads(cmd[0][4:]) != facts.get("sidecar"):
        err(f"Containerfile CMD {cmd} is not the sidecar's command {facts.get('sidecar')}")
    if not any(re.search(r"apt-get install .* /tmp/shunt_\*\.deb", ln) for ln in lines):
        err("the Containerfile's slim stage does not install the package (/tmp/shunt_*.deb)")
    if "COPY --from=build /pkg/*.deb /tmp/" not in lines:
        err("the Containerfile does not copy the package cpack made")
    with open(os.path.join(SRC, "scripts/deps.sh")) as f:
        text = re.sub(r"#.*", "", f.read())
        deps = set(re.findall(r"[a-z0-9][a-z0-9.+-]+", text.split("PACKAGES=(", 1)[1].split(")", 1)[0]))
    build = lines[:[i for i, ln in enumerate(lines) if ln.startswith("FROM ")][1]]
    for ln in build:
        if ln.startswith("RUN ") and "apt-get install" in ln:
            pkgs = [w for w in shlex.split(ln.split("apt-get install", 1)[1].split("&&")[0]) if not w.startswith("-")]
            missing = [p for p in pkgs if p not in deps]
            if missing:
                err(f"the Containerfile's build stage installs {missing}, which scripts/deps.sh does not")

    if errors:
        print(f"FAIL: {NAME}: {len(errors)} problem(s)")
        return 1
    print(f"{NAME}: {len(k8s)} Kubernetes files, compose, Containerfile agree; "
          f"init {' '.join(facts['install'])}, sidecar {' '.join(facts['sidecar'])}, env {sorted(facts['env'])}")
    print(f"PASS: {NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
