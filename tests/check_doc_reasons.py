#!/usr/bin/env python3
"""docs_reasons: every reason code of core/shunt_reason.h is explained
in docs/TROUBLESHOOTING.md (a row of its table), listed in shunt(1)
(REASON CODES) and in docs/ARCHITECTURE.md (a row of the table under
"Reason codes"), and none names a code the header does not have, so the
header and the documents cannot drift apart.

    check_doc_reasons.py SRC
"""
import re
import sys

NAME = "docs_reasons"


def main():
    src = sys.argv[1]
    with open(f"{src}/core/shunt_reason.h") as f:
        header = f.read()
    codes = [c for c in re.findall(r'^\s*X\(\w+,\s*"([^"]*)"\)', header, re.M) if c]
    if len(codes) < 10:
        print(f"FAIL: {NAME}: found only {codes} in shunt_reason.h: the X() list changed shape")
        return 1
    with open(f"{src}/docs/TROUBLESHOOTING.md") as f:
        page = f.read()
    with open(f"{src}/docs/man/shunt.1") as f:
        man = f.read()
    with open(f"{src}/docs/ARCHITECTURE.md") as f:
        arch = f.read()
    # The page's table: "| `code` | means | what to do |".
    rows = re.findall(r"^\| `([a-z-]+)` \|[^|]+\|[^|]+\|\s*$", page, re.M)
    # shunt(1): the REASON CODES section, one ".TP" / ".B code" per code.
    m = re.search(r"^\.SH REASON CODES\n(.*?)(?=^\.SH )", man, re.M | re.S)
    listed = re.findall(r"^\.TP\n\.B ([a-z-]+)$", m.group(1), re.M) if m else []
    # ARCHITECTURE.md: "| `code` | set by | when |" under "### Reason codes".
    m = re.search(r"^### Reason codes\n(.*?)(?=^#)", arch, re.M | re.S)
    arch_rows = re.findall(r"^\| `([a-z-]+)` \|[^|]+\|[^|]+\|\s*$", m.group(1), re.M) if m else []
    bad = []
    for where, got in (("docs/TROUBLESHOOTING.md", rows), ("shunt.1 REASON CODES", listed),
                       ("docs/ARCHITECTURE.md Reason codes", arch_rows)):
        missing = [c for c in codes if c not in got]
        unknown = [c for c in got if c not in codes]
        twice = sorted({c for c in got if got.count(c) > 1})
        if missing:
            bad.append(f"{where} lacks {missing}")
        if unknown:
            bad.append(f"{where} names codes shunt_reason.h does not have: {unknown}")
        if twice:
            bad.append(f"{where} lists {twice} more than once")
    for b in bad:
        print(f"FAIL: {NAME}: {b}")
    if bad:
        return 1
    print(f"{NAME}: {len(codes)} reason codes, each in docs/TROUBLESHOOTING.md, shunt(1) and docs/ARCHITECTURE.md")
    print(f"PASS: {NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
