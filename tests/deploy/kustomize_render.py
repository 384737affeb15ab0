#!/usr/bin/env python3
"""Render a kustomization that uses the shunt component
(examples/k8s/kustomize/shunt), with `kubectl kustomize` where it can, and
with a small renderer of this file where it cannot.

Debian 12's kubectl (kubernetes-client 1.20) embeds kustomize v2, which
predates components (kustomize v3.7) and the replacements that create
fields (v4): it cannot render the component, so it is not a dependency of
the tests.  This renderer knows exactly what the component uses and refuses
anything else:

  * kustomization: `resources` (files), `components` (directories);
  * component: `resources` (files; local-config ones are dropped from the
    output), `configMapGenerator` (files, without a name hash, labels),
    `patches` (a strategic merge patch file with a target kind regex),
    `replacements` (source kind, name and field path; targets selected by
    kind; field paths with `*` and `[name=value]`, create);
  * strategic merge as kustomize does it for pod templates: maps merged,
    lists of named entries merged by name (new entries first, as kustomize
    puts them), other lists replaced.

When a kubectl with a kustomize that has components is installed, render()
runs both and fails if they differ, so this renderer is held to the real
one wherever the real one exists.

    kustomize_render.py DIR     print the rendered YAML and which renderer
"""
import copy
import os
import re
import shutil
import subprocess
import sys

import yaml

LOCAL_CONFIG = "config.kubernetes.io/local-config"


class RenderError(Exception):
    pass


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def only(d, allowed, where):
    extra = set(d) - set(allowed)
    if extra:
        raise RenderError(f"{where}: {sorted(extra)} is more than this renderer knows")


# ---- strategic merge (the subset pod templates need) --------------------------

def named_list(v):
    return isinstance(v, list) and v and all(isinstance(x, dict) and "name" in x for x in v)


def smp(dst, patch):
    for k, pv in patch.items():
        dv = dst.get(k)
        if isinstance(pv, dict) and isinstance(dv, dict):
            smp(dv, pv)
        elif named_list(pv) and (dv is None or named_list(dv)):
            dv = list(dv or [])
            new = []
            for item in pv:
                old = next((x for x in dv if x["name"] == item["name"]), None)
                if old is None:
                    new.append(copy.deepcopy(item))
                else:
                    smp(old, item)
            dst[k] = new + dv
        else:
            dst[k] = copy.deepcopy(pv)


# ---- field paths: a.b.*.c.[name=x] ---------------------------------------------

def split_path(p):
    return [s for s in re.findall(r"\[[^\]]*\]|[^.\[\]]+", p)]


def get_path(node, parts):
    for s in parts:
        if s.startswith("["):
            k, v = s[1:-1].split("=", 1)
            node = next((x for x in node if isinstance(x, dict) and str(x.get(k)) == v), None)
        elif isinstance(node, list):
            node = node[int(s)]
        else:
            node = node.get(s)
        if node is None:
            raise RenderError(f"source path part {s} not found")
    return node


def set_path(node, parts, value, create):
    """Sets value at parts under node; '*' fans out over a list."""
    s, rest = parts[0], parts[1:]
    if s == "*":
        for x in node if isinstance(node, list) else []:
            set_path(x, rest, value, create)
        return
    if s.startswith("["):
        k, v = s[1:-1].split("=", 1)
        i = next((i for i, x in enumerate(node) if isinstance(x, dict) and str(x.get(k)) == v), None)
        if i is None:
            if not create:
                return
            node.append({k: v})
            i = len(node) - 1
        if not rest:
            node[i] = copy.deepcopy(value)
        else:
            set_path(node[i], rest, value, create)
        return
    if isinstance(node, list):
        i = int(s)
        if not rest:
            node[i] = copy.deepcopy(value)
        else:
            set_path(node[i], rest, value, create)
        return
    if not rest:
        node[s] = copy.deepcopy(value)
        return
    if s not in node or node[s] is None:
        if not create:
            return
        node[s] = [] if rest[0].startswith("[") else {}
    set_path(node[s], rest, value, create)


# ---- the kustomization -------------------------------------------------------------

def component(d, docs):
    k = yaml.safe_load(open(os.path.join(d, "kustomization.yaml")))
    if k.get("kind") != "Component":
        raise RenderError(f"{d}: not a kustomize Component")
    only(k, ("apiVersion", "kind", "resources", "configMapGenerator", "patches", "replacements"), d)
    for r in k.get("resources", []):
        docs += load_docs(os.path.join(d, r))
    for g in k.get("configMapGenerator", []):
        only(g, ("name", "files", "options"), f"{d}: configMapGenerator")
        opts = g.get("options", {})
        only(opts, ("disableNameSuffixHash", "labels"), f"{d}: configMapGenerator options")
        if opts.get("disableNameSuffixHash") is not True:
            raise RenderError(f"{d}: a generated name hash is more than this renderer knows")
        data = {}
        for f in g["files"]:
            with open(os.path.join(d, f)) as fh:
                data[os.path.basename(f)] = fh.read()
        md = {"name": g["name"]}
        if opts.get("labels"):
            md["labels"] = dict(opts["labels"])
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data})
    for p in k.get("patches", []):
        only(p, ("path", "target"), f"{d}: patches")
        only(p["target"], ("kind",), f"{d}: patch target")
        patch = yaml.safe_load(open(os.path.join(d, p["path"])))
        kind = re.compile(p["target"]["kind"])
        for doc in docs:
            if kind.fullmatch(doc["kind"]) and not doc.get("metadata", {}).get("annotations", {}).get(LOCAL_CONFIG):
                smp(doc, {k2: v for k2, v in patch.items() if k2 not in ("apiVersion", "kind", "metadata")})
    for r in k.get("replacements", []):
        only(r, ("source", "targets"), f"{d}: replacements")
        src = r["source"]
        only(src, ("kind", "name", "fieldPath"), f"{d}: replacement source")
        sdoc = [x for x in docs if x["kind"] == src["kind"] and x["metadata"]["name"] == src["name"]]
        if len(sdoc) != 1:
            raise RenderError(f"{d}: replacement source {src['kind']}/{src['name']}: {len(sdoc)} found")
        value = get_path(sdoc[0], split_path(src["fieldPath"]))
        for t in r["targets"]:
            only(t, ("select", "fieldPaths", "options"), f"{d}: replacement target")
            only(t["select"], ("kind",), f"{d}: replacement select")
            only(t.get("options", {}), ("create",), f"{d}: replacement options")
            for doc in docs:
                if doc["kind"] != t["select"]["kind"]:
                    continue
                for fp in t["fieldPaths"]:
                    set_path(doc, split_path(fp), value, t.get("options", {}).get("create", False))


def render_python(d):
    k = yaml.safe_load(open(os.path.join(d, "kustomization.yaml")))
    only(k, ("resources", "components"), d)
    docs = []
    for r in k.get("resources", []):
        docs += load_docs(os.path.join(d, r))
    for c in k.get("components", []):
        component(os.path.normpath(os.path.join(d, c)), docs)
    return [x for x in docs if not x.get("metadata", {}).get("annotations", {}).get(LOCAL_CONFIG)]


def kubectl_with_components():
    """A kubectl whose kustomize has components (v3.7) and replacements
    that create fields (v4), or None.  KUBECTL names another one, or none
    when it is empty (to run the test's renderer alone)."""
    k = os.environ.get("KUBECTL", shutil.which("kubectl") or "")
    if not k:
        return None
    try:
        out = subprocess.run([k, "version", "--client"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"Kustomize Version: v(\d+)", out)
    return k if m and int(m.group(1)) >= 4 else None


def key(doc):
    return (doc["kind"], doc["metadata"]["name"])


def render(d):
    """(docs, how): the rendered documents, and which renderer made them.
    With a capable kubectl both run and must agree."""
    mine = render_python(d)
    k = kubectl_with_components()
    if not k:
        return mine, "the test's renderer (no kubectl with kustomize v4 or later)"
    r = subprocess.run([k, "kustomize", d], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RenderError(f"kubectl kustomize {d}: {r.stderr.strip()[-400:]}")
    real = [x for x in yaml.safe_load_all(r.stdout) if x]
    a, b = {key(x): x for x in real}, {key(x): x for x in mine}
    if a.keys() != b.keys():
        raise RenderError(f"kubectl made {sorted(a)}, the test's renderer {sorted(b)}")
    for kk in a:
        if a[kk] != b[kk]:
            raise RenderError(f"{kk}: kubectl and the test's renderer differ:\n"
                              f"kubectl: {yaml.safe_dump(a[kk])}\nrenderer: {yaml.safe_dump(b[kk])}")
    return real, f"kubectl kustomize ({k}), equal to the test's renderer"


if __name__ == "__main__":
    docs, how = render(sys.argv[1])
    print(f"# rendered by {how}")
    print(yaml.safe_dump_all(docs, sort_keys=False), end="")
