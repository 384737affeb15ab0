#!/usr/bin/env python3
"""Writes the compatibility matrix (docs/COMPATIBILITY.md) from the rows the
suite's end-to-end tests leave in BUILD/compat/ (tests/e2e/lib.sh
compat_row, tests/e2e/cpython_suite.sh): program, version, result plainly,
result under shunt, the transport the connections took.

    scripts/compat_matrix.py BUILD [OUT]      (OUT: - for stdout;
                                                default docs/COMPATIBILITY.md)

Run it after the suite (ctest -L 'e2e' in BUILD); commit the file it
writes.  A row missing from BUILD/compat (its test did not pass, or was not
run) is kept from the committed file, marked as not rerun."""
import glob
import os
import platform
import sys

HEAD = """# Compatibility matrix

Programs run by the test suite plainly and under `shunt run` on one host
(both ends under shunt, so shm is the transport to take), written by
`scripts/compat_matrix.py` from the rows the end-to-end tests leave in the
build (`compat/`): do not edit by hand.  "plain" and "under shunt" are each
test's own verdicts (its bytes, values and exit codes compared).  The
transport column counts connection ends as shunt decided them (each end
decides: a pair on shm counts 2), from shunt's logs of every process of the
test: on shm, on the kernel path with its reason, and `moved:R` for an end
that left shm for TCP with reason R (`peer-demoted`: its peer moved first);
docs/TROUBLESHOOTING.md explains each code.  The CPython rows, logged at
`info`, add up the processes' exit summaries instead.  The CPython rows run CPython's own socket tests
(Debian's `libpython3.11-testsuite`) under shunt and compare every test with
a plain run (`tests/e2e/cpython_suite.sh`; the tests not held to it are in
`tests/e2e/cpython_known.txt`).  By default the suite reruns plainly only
the tests that did not pass under shunt, and its plain column says so; a
run with `CPYTHON_PLAIN=full` runs the whole plain suite and counts it.

| program | version | plain | under shunt | transport taken |
|---|---|---|---|---|
"""


def rows_from(build):
    rows = {}
    for path in sorted(glob.glob(os.path.join(build, "compat", "*.tsv"))):
        with open(path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) == 5:
                    rows[cols[0]] = cols
    return rows


def rows_committed(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if not line.startswith("| ") or line.startswith("| program ") or line.startswith("|---"):
                continue
            cols = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if len(cols) == 5:
                rows[cols[0]] = cols
    return rows


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = argv[2] if len(argv) > 2 else os.path.join(root, "docs", "COMPATIBILITY.md")
    new = rows_from(build)
    if not new:
        print(f"compat_matrix: no rows in {build}/compat: run the suite first", file=sys.stderr)
        return 1
    old = rows_committed(out) if out != "-" else {}
    for k, cols in old.items():
        if k not in new:
            new[k] = cols[:4] + [cols[4] + " (not rerun)" if "(not rerun)" not in cols[4] else cols[4]]
    text = HEAD
    for k in sorted(new, key=lambda s: (not s.startswith("CPython"), s.lower())):
        text += "| " + " | ".join(c.replace("|", "/") for c in new[k]) + " |\n"
    text += f"\nHost of the last run: {platform.system()} {platform.release()}, {os.cpu_count()} CPUs.\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)
        print(f"compat_matrix: {len(new)} rows -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
