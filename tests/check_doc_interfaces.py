#!/usr/bin/env python3
"""docs_interfaces: what docs/ARCHITECTURE.md says of the interfaces
("Two interfaces") is read from the code, so the two cannot drift apart:

  - the hooks of struct shunt_transport_ops (core/shunt_transport.h) and
    of the three connection tables (core/shunt_conn.h: life, data, wait)
    are each named in the prose that introduces them;
  - the table "What each transport implements" has one row per hook of
    those four structs and no other, and its shm and fabric cells name
    the function each transport's table sets ("—" where it sets none);
  - the count of libc entry points of preload/shunt_io.c that carry bytes
    (reach the data table) and the list of those that demote instead;
  - every `ops->...` the document writes is a member of the code;
  - every shm/ and fabric/ file it names exists.

    check_doc_interfaces.py SRC
"""
import os
import re
import sys

NAME = "docs_interfaces"
TRANSPORTS = (("shm", "shm"), ("fabric", "fabric"))  # (column, folder)
CONN_TABLES = ("shunt_conn_life_ops", "shunt_conn_data_ops", "shunt_conn_wait_ops")
ALL_TABLES = ("shunt_transport_ops",) + CONN_TABLES
# The prose bullet of each connection table starts "* <word> (`struct X`)".


def read(path):
    with open(path) as f:
        return f.read()


def uncomment(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def members(text, struct):
    """The function-pointer members of struct, in order."""
    m = re.search(r"^struct %s \{(.*?)^\};" % struct, uncomment(text), re.M | re.S)
    if not m:
        return None
    return re.findall(r"\(\s*\*\s*(\w+)\s*\)\s*\(", m.group(1))


def implemented(folder):
    """{struct: {hook: function}} of the tables a transport's files define."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".c"):
            continue
        text = uncomment(read(os.path.join(folder, name)))
        for st, body in re.findall(r"^(?:static )?const struct (shunt_\w+_ops) \w+ = \{(.*?)^\};",
                                   text, re.M | re.S):
            if st in out:
                raise ValueError(f"{folder}: two tables of struct {st}")
            out[st] = dict(re.findall(r"\.(\w+)\s*=\s*&?(\w+)", body))
    return out


def entry_points(text):
    """(carried, demoting) names of the exported calls of shunt_io.c, and
    the names it could not classify."""
    bodies = {}
    for m in re.finditer(r"^SHUNT_EXPORT [^(]*?\b(\w+)\(.*?\n\{\n(.*?)^\}", text, re.M | re.S):
        bodies[m.group(1)] = m.group(2)
    carried, demoting = [], []
    for name, body in bodies.items():
        # (One that reaches the data table carries bytes, even if some
        # flags demote first: preadv2.)
        if re.search(r"->data->|\baccel_(recv|send)\(", body):
            carried.append(name)
        elif "kernel_only(" in body:
            demoting.append(name)
    # A checked variant (__read_chk) carries what the call it returns does.
    moved = True
    while moved:
        moved = False
        for name, body in bodies.items():
            if name in carried or name in demoting:
                continue
            called = re.findall(r"\breturn (\w+)\(", body)
            if any(c in carried for c in called):
                carried.append(name)
                moved = True
    unknown = [n for n in bodies if n not in carried and n not in demoting]
    return carried, demoting, unknown


def main():
    src = sys.argv[1]
    arch = read(f"{src}/docs/ARCHITECTURE.md")
    bad = []
    hooks = {}
    for st in ALL_TABLES:
        hdr = "shunt_transport.h" if st == "shunt_transport_ops" else "shunt_conn.h"
        got = members(read(f"{src}/core/{hdr}"), st)
        if not got:
            print(f"FAIL: {NAME}: no struct {st} with hooks in core/{hdr}: it changed shape")
            return 1
        hooks[st] = got

    m = re.search(r"^## Two interfaces\n(.*?)(?=^## )", arch, re.M | re.S)
    if not m:
        print(f"FAIL: {NAME}: docs/ARCHITECTURE.md has no section \"Two interfaces\"")
        return 1
    sec = m.group(1)

    # Prose: every hook where its struct is introduced.
    m = re.search(r"^\*\*A transport decides\*\*(.*?)\n\n", sec, re.M | re.S)
    prose = {"shunt_transport_ops": m.group(1) if m else ""}
    for st in CONN_TABLES:
        m = re.search(r"^\* \w+ \(`struct %s`\)(.*?)(?=^\* |\n\n)" % st, sec, re.M | re.S)
        prose[st] = m.group(1) if m else ""
    for st in ALL_TABLES:
        if not prose[st]:
            bad.append(f"\"Two interfaces\" introduces no struct {st} (the paragraph or bullet it reads)")
            continue
        named = set(re.findall(r"`(\w+)`", prose[st]))
        missing = [h for h in hooks[st] if h not in named]
        if missing:
            bad.append(f"\"Two interfaces\" does not name {missing} of struct {st}")

    # The table, against the transports' definitions.
    impl = {}
    for col, folder in TRANSPORTS:
        try:
            impl[col] = implemented(f"{src}/{folder}")
        except ValueError as e:
            bad.append(str(e))
            impl[col] = {}
        for st in ALL_TABLES:
            if st not in impl[col]:
                bad.append(f"{folder}/ defines no struct {st}")
    rows = re.findall(r"^\| `(shunt_\w+_ops)` \| `(\w+)` \| ([^|]*?) \| ([^|]*?) \|\s*$", sec, re.M)
    if len(rows) < 10:
        bad.append(f"\"Two interfaces\": its table of hooks has {len(rows)} rows: it changed shape")
    seen = {}
    for st, hook, *cells in rows:
        seen[(st, hook)] = seen.get((st, hook), 0) + 1
        if st not in hooks or hook not in hooks[st]:
            bad.append(f"the table names {st}.{hook}, which core/ does not have")
            continue
        for (col, _), cell in zip(TRANSPORTS, cells):
            want = impl[col].get(st, {}).get(hook)
            got = cell.strip().strip("`")
            if got in ("—", "-", ""):
                got = None
            if got != want:
                bad.append(f"the table says {col} sets {st}.{hook} to {got or '—'}; "
                           f"the code: {want or '—'}")
    for st in ALL_TABLES:
        for hook in hooks[st]:
            if (st, hook) not in seen:
                bad.append(f"the table lacks a row for {st}.{hook}")
    bad += [f"the table has {k[0]}.{k[1]} {n} times" for k, n in seen.items() if n > 1]

    # The libc entry points of the data path.
    carried, demoting, unknown = entry_points(read(f"{src}/preload/shunt_io.c"))
    if unknown:
        bad.append(f"preload/shunt_io.c: cannot tell whether {unknown} carry bytes or demote")
    m = re.search(r"the (\d+) libc\s+entry points of `preload/shunt_io.c` that carry bytes", sec)
    if not m:
        bad.append("\"Two interfaces\" does not count the libc entry points that carry bytes")
    elif int(m.group(1)) != len(carried):
        bad.append(f"\"Two interfaces\" counts {m.group(1)} libc entry points that carry bytes; "
                   f"preload/shunt_io.c has {len(carried)}: {carried}")
    m = re.search(r"its (\d+) others,\s+(.*?),\s+move bytes", sec, re.S)
    if not m:
        bad.append("\"Two interfaces\" does not list the entry points that demote")
    else:
        listed = re.findall(r"`(\w+)`", m.group(2))
        if int(m.group(1)) != len(demoting) or sorted(listed) != sorted(demoting):
            bad.append(f"\"Two interfaces\" says {m.group(1)} entry points demote, {listed}; "
                       f"preload/shunt_io.c: {demoting}")

    # ops-> paths.
    for path in sorted(set(re.findall(r"`(ops->[\w>-]+)`", arch))):
        parts = path.split("->")[1:]
        ok = (parts == ["transport"] or
              (len(parts) == 2 and parts[0] in ("life", "data", "wait") and
               parts[1] in hooks[f"shunt_conn_{parts[0]}_ops"]))
        if not ok:
            bad.append(f"docs/ARCHITECTURE.md writes `{path}`, which struct shunt_conn_ops does not have")

    # Files of the transports.
    for folder, prefix in (("shm", "shm_"), ("fabric", "fab_")):
        for name in sorted(set(re.findall(r"`(?:%s/)?(%s\w+\.[ch])`" % (folder, prefix), arch))):
            if not os.path.exists(f"{src}/{folder}/{name}"):
                bad.append(f"docs/ARCHITECTURE.md names {folder}/{name}, which does not exist")

    for b in bad:
        print(f"FAIL: {NAME}: {b}")
    if bad:
        return 1
    n = sum(len(h) for h in hooks.values())
    print(f"{NAME}: {n} hooks in 4 tables, each named and its shm and fabric functions right; "
          f"{len(carried)} entry points carry bytes, {len(demoting)} demote ({', '.join(demoting)})")
    print(f"PASS: {NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
