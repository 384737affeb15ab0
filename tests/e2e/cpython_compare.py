#!/usr/bin/env python3
"""The CPython stage's judge: per-test results of a run under shunt against
the plain run's, from regrtest's JUnit XML (--junit-xml).

    cpython_compare.py failed SHUNT_XML
        prints the ids of the tests that did not pass under shunt (failure,
        error, skipped), one per line: the plain run reruns them
        (--matchfile).
    cpython_compare.py judge SHUNT_XML PLAIN_XML PLAIN_MODE KNOWN
        prints one line per difference; exits 1 if a test that passed
        plainly did not pass under shunt (and is not listed as `differs` in
        KNOWN).  PLAIN_MODE is `full` (PLAIN_XML has every test) or `rerun`
        (only the tests that did not pass under shunt).  The last line is
        "counts: ..." for the compatibility matrix.
"""
import fnmatch
import sys
import xml.etree.ElementTree as ET


def results(path):
    """{test id: 'pass' | 'fail' | 'skip'}"""
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = tc.get("name", "")
        # regrtest names a case "test.test_x.Class.method" (or with spaces)
        tid = name.split(" ")[0]
        status = "pass"
        for ch in tc:
            if ch.tag in ("failure", "error"):
                status = "fail"
            elif ch.tag == "skipped" and status == "pass":
                status = "skip"
        out[tid] = status
    return out


def known(path):
    """[(pattern, kind, reason)] from the known list."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pat, kind, reason = line.split(None, 2)
            rows.append((pat, kind, reason))
    return rows


def counts(res):
    c = {"pass": 0, "fail": 0, "skip": 0}
    for s in res.values():
        c[s] += 1
    return c


def main(argv):
    if argv[1] == "failed":
        for tid, s in sorted(results(argv[2]).items()):
            if s != "pass":
                print(tid)
        return 0
    shunt, plain, mode, kpath = results(argv[2]), results(argv[3]), argv[4], argv[5]
    kn = [k for k in known(kpath) if k[1] == "differs"]
    bad = 0
    for tid, s in sorted(shunt.items()):
        p = plain.get(tid)
        if s == "pass" or p is None and mode == "rerun":
            continue
        if p == "pass":
            why = next((k for k in kn if fnmatch.fnmatch(tid, k[0])), None)
            if why:
                print(f"differs (listed): {tid}: plain pass, shunt {s}: {why[2]}")
            else:
                print(f"FAIL: {tid}: passes plainly, {s} under shunt")
                bad += 1
        elif s != p and p is not None:
            print(f"note: {tid}: plain {p}, shunt {s}")
    if mode == "full":
        for tid in sorted(set(plain) - set(shunt)):
            if plain[tid] == "pass":
                print(f"FAIL: {tid}: passes plainly, not run under shunt")
                bad += 1
    cs, cp = counts(shunt), counts(plain)
    if mode == "full":
        ptxt = f"{cp['pass']} passed, {cp['fail']} failed, {cp['skip']} skipped"
    else:
        ptxt = (f"rerun of the {len(plain)} not passing under shunt: {cp['pass']} passed, "
                f"{cp['fail']} failed, {cp['skip']} skipped" if plain else "no rerun needed")
    print(f"counts: plain: {ptxt}; shunt: {cs['pass']} passed, {cs['fail']} failed, "
          f"{cs['skip']} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
