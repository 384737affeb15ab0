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
    tests build the way the image does.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

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
            "redis-benchmark.yaml": ["Job"]}
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

    # ---- the ConfigMap's shunt.conf
    cfile = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"shunt-deploy-conf.{os.getpid()}")
    with open(cfile, "w") as f:
        f.write(conf)
    r = subprocess.run([os.path.join(ROOT, "usr/bin/shunt"), "config", "--check", cfile],
                       capture_output=True, text=True)
    os.unlink(cfile)
    if r.returncode != 0:
        err(f"the ConfigMap's shunt.conf does not load: {r.stderr.strip()}")
    m = re.search(r"^rundir\s*=\s*(\S+)\s*$", conf, re.M)
    rundir = m.group(1) if m else None
    if not rundir or len(rundir) > 80:
        err(f"the ConfigMap's rundir {rundir!r}: missing or longer than 80 bytes")

    # ---- the pods
    pods = {"redis-server.yaml": k8s["redis-server.yaml"][0]["spec"]["template"]["spec"],
            "redis-benchmark.yaml": k8s["redis-benchmark.yaml"][0]["spec"]["template"]["spec"]}
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
        rd = inits.get("shunt-rundir")
        if rd:
            if rd["command"][0] != "install" or rd["command"][-1] != rundir:
                err(f"{fname}: shunt-rundir makes {rd['command'][-1]}, the ConfigMap's rundir is {rundir}")
            if not os.access("/usr/bin/install", os.X_OK):
                err("install(1) is not in /usr/bin (coreutils)")
        side = [c for c in inits.values() if c.get("restartPolicy") == "Always"]
        for c in side:
            if not any(os.access(os.path.join(ROOT, d, c["command"][0]), os.X_OK) for d in ("usr/sbin", "usr/bin")):
                err(f"{fname}/{c['name']}: {c['command'][0]} is not in the package")
            facts.setdefault("sidecar", c["command"])
        for c in list(inits.values()) + list(apps.values()):
            m = mounts(c)
            if "--config" in c.get("command", []):
                p = c["command"][c["command"].index("--config") + 1]
                d, key = os.path.split(p)
                if "configMap" not in m.get(d, {}) or key not in cm["data"]:
                    err(f"{fname}/{c['name']}: --config {p} is not a key of the mounted ConfigMap")
            if rundir and (c.get("env") or c["name"] == "shuntd"):
                rmount = [mp for mp, v in m.items() if ("hostPath" in v or "emptyDir" in v)
                          and rundir.startswith(mp.rstrip("/") + "/")]
                if not rmount:
                    err(f"{fname}/{c['name']}: the rundir {rundir} is not inside a volume it mounts")
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
            sc = env.get("SHUNT_CONFIG", "")
            d, key = os.path.split(sc)
            if "configMap" not in mounts(c).get(d, {}) or key not in cm["data"]:
                err(f"{fname}/{c['name']}: SHUNT_CONFIG={sc} is not a key of the mounted ConfigMap")
            facts.setdefault("apps", {})[c["name"]] = {"command": c["command"],
                                                      "mounts": sorted(mnt["mountPath"] for mnt in c["volumeMounts"])}
        facts.setdefault("install", inst["command"])

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
