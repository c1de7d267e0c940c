#!/usr/bin/env python3
"""Checks `cclab reproduce ... --json` output (stdin or a file): every
expected paper is there, every claim has a verdict (PASS, FAIL or N/A),
every FAIL carries measured figures and a reason, every N/A a reason, no
run failed and nothing was interrupted. Verdicts themselves are results,
not errors: a FAIL with its figures passes this check.

Usage: check-reproduction.py FILE [PAPER...]
"""
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "lib"))
from verdicts import CLASSES  # noqa: E402


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "-"
    want = sys.argv[2:]
    data = json.load(sys.stdin if path == "-" else open(path))
    papers = {p["paper"]: p for p in data.get("papers", [])}
    problems = []
    for w in want:
        if w not in papers:
            problems.append(f"paper {w}: missing from the output")
    counts = {"PASS": 0, "FAIL": 0, "N/A": 0}
    for name, p in papers.items():
        if p.get("interrupted"):
            problems.append(f"{name}: interrupted")
        for f in p.get("failed", []):
            problems.append(f"{name}: run failed: {f}")
        if not p.get("claims"):
            problems.append(f"{name}: no claims")
        for c in p.get("claims", []):
            cid = f"{name}/{c.get('id')}"
            v = c.get("verdict")
            if v not in counts:
                problems.append(f"{cid}: verdict {v!r} is not PASS, FAIL or N/A")
                continue
            counts[v] += 1
            if c.get("class") not in CLASSES:
                problems.append(f"{cid}: class {c.get('class')!r} is not a verdict class")
            if c.get("class") == "unmeasured":
                problems.append(f"{cid}: not measured: {c.get('detail')}")
            if v == "FAIL":
                if not re.search(r"\d", c.get("detail", "")):
                    problems.append(f"{cid}: FAIL without a measured figure")
                if not c.get("reason"):
                    problems.append(f"{cid}: FAIL without a reason")
                if c.get("detail", "").startswith("no measurement"):
                    problems.append(f"{cid}: nothing measured: {c['detail']}")
            if v == "N/A" and not c.get("reason"):
                problems.append(f"{cid}: N/A without a reason")
            if v == "PASS" and not c.get("ours"):
                problems.append(f"{cid}: PASS without a measurement")
    for p in problems:
        print("check-reproduction:", p, file=sys.stderr)
    print(
        f"check-reproduction: {len(papers)} paper(s), "
        f"{sum(counts.values())} claims: {counts['PASS']} PASS, "
        f"{counts['FAIL']} FAIL, {counts['N/A']} N/A; "
        f"{len(problems)} problem(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
