#!/usr/bin/env python3
"""Copies a full `cclab reproduce all` output (REPRODUCTION.md, claims.json
and the figures of every paper, not the runs) into docs/reproduction/ and
writes its index, so the latest full reproduction can be read without
running it.

Each paper's published claims.json gains `run_commits`: the commits its runs
were made at, read from every run's metadata.json; they must all be the
build's commit (runs are reused only under the same build). Only a
reproduction whose runs were all made by the publishing invocation's
`cclab reproduce` (from scratch) is published. Runs made from a tree with
uncommitted changes (`-dirty`) are refused unless --allow-dirty.

It also runs `cclab reproduce all --quick` with the same build and records
every claim's quick figures in docs/reproduction/quick-figures.json, which
`make test` compares with a fresh quick run (`cclab reproduce --fingerprint-check`):
a change that moves what runs measure fails it until the pages are
re-published.

Usage: publish-reproduction.py [--allow-dirty] [RESULTS_DIR (default results/reproduce)]
"""
import json
import pathlib
import shutil
import subprocess
import sys
import time


def not_counted(n):
    """The claims shown but not counted, in words."""
    parts = []
    if n["contradictory_pairs"]:
        parts.append(f"{n['contradictory_pairs']} contradictory pair(s)")
    if n["duplicates"]:
        parts.append(f"{n['duplicates']} duplicate(s)")
    if n["guaranteed"]:
        parts.append(f"{n['guaranteed']} guaranteed")
    return ", ".join(parts) or "–"


def reinterpreted(n):
    """The verdicts on reinterpretations of ours, counted apart."""
    r = n["reinterpretation"]
    if not any(r.values()):
        return "–"
    return f"{r['pass']} PASS, {r['fail']} FAIL; {r['pass_within_noise']} + {r['fail_within_noise']} within noise"


def main():
    args = [a for a in sys.argv[1:] if a != "--allow-dirty"]
    allow_dirty = len(args) < len(sys.argv) - 1
    src = pathlib.Path(args[0] if args else "results/reproduce")
    dst = pathlib.Path("docs/reproduction")
    papers = sorted(p for p in src.iterdir() if (p / "claims.json").exists())
    if not papers:
        sys.exit(f"publish-reproduction: no claims.json under {src}")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    rows = []
    tot = {}
    total_wall = 0.0
    for p in papers:
        claims = json.loads((p / "claims.json").read_text())
        if claims.get("quick"):
            sys.exit(f"publish-reproduction: {p.name} is a --quick run; publish full runs only")
        out = dst / p.name
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        claims.pop("dir", None)
        commits = sorted(
            {
                json.loads(m.read_text()).get("git_revision", "unknown")
                for m in p.rglob("metadata.json")
            }
        )
        if not commits:
            sys.exit(f"publish-reproduction: {p.name}: no run metadata.json under {p}")
        dirty = [c for c in commits if c.endswith("-dirty") or c == "unknown"]
        if dirty and not allow_dirty:
            sys.exit(
                f"publish-reproduction: {p.name}: runs made at {', '.join(dirty)} "
                "(uncommitted changes, or no git): re-run from a clean tree, or pass --allow-dirty"
            )
        claims["run_commits"] = commits
        (out / "claims.json").write_text(json.dumps(claims, indent=2) + "\n")
        shutil.copy(p / "REPRODUCTION.md", out / "REPRODUCTION.md")
        for f in p.glob("fig-*.svg"):
            shutil.copy(f, out / f.name)
        if claims.get("ran") != claims.get("runs"):
            sys.exit(
                f"publish-reproduction: {p.name}: {claims.get('ran')} of {claims.get('runs')} runs were made "
                "by this invocation; publish a reproduction run from scratch (the rest were reused)"
            )
        n = claims["counts"]
        for k, v in n.items():
            if isinstance(v, dict):
                t = tot.setdefault(k, {})
                for kk, vv in v.items():
                    t[kk] = t.get(kk, 0) + vv
            else:
                tot[k] = tot.get(k, 0) + v
        total_wall += claims["wall_s"]
        rows.append(
            f"| [{p.name}]({p.name}/REPRODUCTION.md) | {claims['title']} | {n['claims']} "
            f"| {n['pass']} | {n['fail']} | {n['pass_within_noise']} | {n['fail_within_noise']} "
            f"| {n['unmeasured']} | {n['na']} | {not_counted(n)} | {reinterpreted(n)} | {claims['runs']} | {claims['wall_s']:.0f} s "
            f"| `{claims['build']['git_revision']}` |"
        )
    index = [
        "# The seed papers, reproduced",
        "",
        f"`cclab reproduce all` on the `sim` link from scratch, published at commit `{commit}`, "
        f"{time.strftime('%Y-%m-%d')}, on a 2-core machine: {total_wall:.0f} s of wall time for the five "
        "papers; the last column names the build that made every run (a run is reused only by the "
        "same build). Regenerate with `make reproduce && python3 scripts/publish-reproduction.py`; "
        "`cclab reproduce --check-published docs/reproduction` (in `make test`) checks this table against the "
        "published claims.json files.",
        "",
        "| paper | title | claims | PASS | FAIL | PASS within noise | FAIL within noise | not measured | N/A | not counted | our reinterpretations (apart) | runs | wall time | build |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        f"| **total** | | {tot['claims']} | {tot['pass']} | {tot['fail']} | {tot['pass_within_noise']} "
        f"| {tot['fail_within_noise']} | {tot['unmeasured']} | {tot['na']} | {not_counted(tot)} | {reinterpreted(tot)} | | | |",
        "",
        "PASS and FAIL count a claim only when the two sides' 95% confidence intervals over the "
        "repetitions do not overlap (the means differ by more than the sum of the half-widths; "
        "`harness/src/reproduce/expr.rs`, `separated`) and the difference is at least the claim's "
        "minimum effect (2% of the larger side unless the claim states another); the rest are within "
        "noise and are evidence neither way. A claim that repeats another's phenomenon on the same "
        "runs, each of a pair the paper states both ways, and an outcome our setup guarantees are "
        "shown in the paper's page but not counted. A claim that tests a reinterpretation of ours "
        "(an equation the paper prints that cannot be run as printed, rewritten) is counted in its "
        "own column, never as the paper's PASS or FAIL. "
        "A FAIL is a result: each carries the measured figures and the likely reason. "
        "Every choice made where a paper is silent is in its scenarios "
        "(`scenarios/reproduce/<paper>/`) and listed at the end of its REPRODUCTION.md.",
        "",
    ]
    (dst / "README.md").write_text("\n".join(index))
    # The quick figures of the same build, for make test's staleness check.
    quick_dir = pathlib.Path("target/reproduce-publish-quick")
    shutil.rmtree(quick_dir, ignore_errors=True)
    subprocess.run(
        ["./target/release/cclab", "reproduce", "all", "--quick", "--quiet", "--out", str(quick_dir),
         "--fingerprint-write", str(dst / "quick-figures.json")],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    print(f"publish-reproduction: {len(papers)} paper(s) into {dst}")


if __name__ == "__main__":
    main()
