#!/usr/bin/env python3
"""docs_doctor: every finding of shunt doctor (tools/shunt_doctor_codes.h,
SHUNT_DOCTOR_FINDINGS) is a row of the table in docs/TROUBLESHOOTING.md
("shunt doctor"), with the same level and the same fix (the page may put
words in `backticks`), and the page names no finding the table does not
have: the tool and the page cannot drift apart.

    check_doc_findings.py SRC
"""
import re
import sys

NAME = "docs_doctor"


def norm(text):
    return " ".join(text.replace("`", "").split())


def main():
    src = sys.argv[1]
    with open(f"{src}/tools/shunt_doctor_codes.h") as f:
        header = f.read().replace("\\\n", " ")
    table = {}
    for m in re.finditer(r'X\(\s*\w+,\s*"([^"]+)",\s*(OK|WARN|FAIL),\s*((?:"[^"]*"\s*)+)\)', header):
        table[m.group(1)] = (m.group(2), norm("".join(re.findall(r'"([^"]*)"', m.group(3)))))
    if len(table) < 20:
        print(f"FAIL: {NAME}: found only {sorted(table)} in shunt_doctor_codes.h: the X() list changed shape")
        return 1
    with open(f"{src}/docs/TROUBLESHOOTING.md") as f:
        page = f.read()
    m = re.search(r"^## shunt doctor\b.*?\n(.*?)(?=^## )", page, re.M | re.S)
    if not m:
        print(f"FAIL: {NAME}: docs/TROUBLESHOOTING.md has no '## shunt doctor' section")
        return 1
    rows = re.findall(r"^\| `([a-z-]+)` \| (OK|WARN|FAIL) \|[^|]+\|([^|]+)\|\s*$", m.group(1), re.M)
    bad = []
    seen = {}
    for code, level, fix in rows:
        if code in seen:
            bad.append(f"the page lists {code} twice")
        seen[code] = (level, norm(fix))
    for code, (level, fix) in table.items():
        if code not in seen:
            bad.append(f"the page lacks {code}")
            continue
        if seen[code][0] != level:
            bad.append(f"{code}: level {seen[code][0]} on the page, {level} in the tool")
        if seen[code][1] != fix:
            bad.append(f"{code}: what to do differs:\n  page: {seen[code][1]}\n  tool: {fix}")
    for code in seen:
        if code not in table:
            bad.append(f"the page names {code}, which the tool does not have")
    for b in bad:
        print(f"FAIL: {NAME}: {b}")
    if bad:
        return 1
    print(f"{NAME}: {len(table)} findings, each in docs/TROUBLESHOOTING.md with its level and fix")
    print(f"PASS: {NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
