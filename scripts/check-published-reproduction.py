#!/usr/bin/env python3
"""Checks that the published reproduction (docs/reproduction/) says what its
claims.json files say: each paper's counts equal the classes of its claims,
the index table and each REPRODUCTION.md headline give the same numbers
(claims that test a reinterpretation of ours counted apart), no PASS
counted as agreement is within noise or below its minimum effect, and no
FAIL lacks an explanation.

Usage: check-published-reproduction.py [DIR (default docs/reproduction)]
"""
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "lib"))
from verdicts import CLASSES  # noqa: E402


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reproduction")
    problems = []
    index = (root / "README.md").read_text()
    papers = sorted(p for p in root.iterdir() if (p / "claims.json").exists())
    if not papers:
        sys.exit(f"check-published-reproduction: no claims.json under {root}")
    for p in papers:
        c = json.loads((p / "claims.json").read_text())
        counts = c.get("counts")
        if counts is None:
            problems.append(f"{p.name}: claims.json has no counts (published before verdict classes)")
            continue
        derived = {v: 0 for v in CLASSES.values()}
        apart = {k: 0 for k in ("pass", "fail", "pass_within_noise", "fail_within_noise")}
        for cl in c["claims"]:
            k = CLASSES.get(cl.get("class"))
            if k is None:
                problems.append(f"{p.name}/{cl['id']}: unknown class {cl.get('class')!r}")
                continue
            if cl.get("reinterpretation") and k in apart:
                # A reinterpretation of ours is counted apart from the paper's verdicts.
                apart[k] += 1
            else:
                derived[k] += 1
            if cl.get("verdict") == "FAIL" and (cl.get("reason") or "").startswith("no explanation recorded"):
                problems.append(f"{p.name}/{cl['id']}: a FAIL without an explanation (give the claim an if_fail)")
            if cl["class"] == "pass":
                if not cl.get("significant"):
                    problems.append(f"{p.name}/{cl['id']}: counted PASS but not significant")
                eff = cl.get("effect_pct")
                if eff is not None and eff < cl["min_effect_pct"]:
                    problems.append(
                        f"{p.name}/{cl['id']}: counted PASS with effect {eff:.2f}% below its minimum {cl['min_effect_pct']}%"
                    )
        derived["contradictory_pairs"] //= 2
        derived["claims"] = len(c["claims"])
        for k, v in derived.items():
            if counts.get(k) != v:
                problems.append(f"{p.name}: counts.{k} = {counts.get(k)} but the claims give {v}")
        if counts.get("reinterpretation") != apart:
            problems.append(
                f"{p.name}: counts.reinterpretation = {counts.get('reinterpretation')} but the claims give {apart}"
            )
        row = re.search(rf"^\| \[{re.escape(p.name)}\]\(.*$", index, re.M)
        if not row:
            problems.append(f"{p.name}: no row in {root}/README.md")
        else:
            cells = [x.strip() for x in row.group(0).strip("|").split("|")]
            want = [counts[k] for k in ("claims", "pass", "fail", "pass_within_noise", "fail_within_noise", "unmeasured", "na")]
            got = cells[2:9]
            if [str(w) for w in want] != got:
                problems.append(f"{p.name}: README row {got} but claims.json counts {want}")
        md = (p / "REPRODUCTION.md").read_text()
        head = re.search(r"\*\*(\d+) claims: (\d+) PASS, (\d+) FAIL beyond noise; (\d+) PASS and (\d+) FAIL within noise", md)
        if not head:
            problems.append(f"{p.name}: REPRODUCTION.md has no verdict headline")
        else:
            got = [int(x) for x in head.groups()]
            want = [counts[k] for k in ("claims", "pass", "fail", "pass_within_noise", "fail_within_noise")]
            if got != want:
                problems.append(f"{p.name}: REPRODUCTION.md headline {got} but claims.json counts {want}")
    for x in problems:
        print("check-published-reproduction:", x, file=sys.stderr)
    print(f"check-published-reproduction: {len(papers)} paper(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
