#!/usr/bin/env python3
"""Copies a full `cclab reproduce all` output (REPRODUCTION.md, claims.json
and the figures of every paper, not the runs) into docs/reproduction/ and
writes its index, so the latest full reproduction can be read without
running it.

Each paper's published claims.json gains `run_commits`: the commits its runs
were made at, read from every run's metadata.json (runs are reused while
their scenario is unchanged, so they may be older than the reproduction);
the index names them. Runs made from a tree with uncommitted changes
(`-dirty`) are refused unless --allow-dirty.

Usage: publish-reproduction.py [--allow-dirty] [RESULTS_DIR (default results/reproduce)]
"""
import json
import pathlib
import shutil
import subprocess
import sys
import time


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
        n = {v: sum(c["verdict"] == v for c in claims["claims"]) for v in ("PASS", "FAIL", "N/A")}
        rows.append(
            f"| [{p.name}]({p.name}/REPRODUCTION.md) | {claims['title']} | {len(claims['claims'])} "
            f"| {n['PASS']} | {n['FAIL']} | {n['N/A']} | {claims['runs']} | {claims['wall_s']:.0f} s "
            f"| {', '.join('`' + c[:12] + '`' for c in commits)} |"
        )
    index = [
        "# The seed papers, reproduced",
        "",
        f"`cclab reproduce all` on the `sim` link, published at commit `{commit}`, "
        f"{time.strftime('%Y-%m-%d')}, on a 2-core machine; the last column names the "
        "commits the runs were made at (read from each run's metadata.json). Regenerate with "
        "`make reproduce && python3 scripts/publish-reproduction.py`.",
        "",
        "| paper | title | claims | PASS | FAIL | N/A | runs | wall time | runs made at |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "A FAIL is a result: each carries the measured figures and the likely reason. "
        "Every choice made where a paper is silent is in its scenarios "
        "(`scenarios/reproduce/<paper>/`) and listed at the end of its REPRODUCTION.md.",
        "",
    ]
    (dst / "README.md").write_text("\n".join(index))
    print(f"publish-reproduction: {len(papers)} paper(s) into {dst}")


if __name__ == "__main__":
    main()
