#!/usr/bin/env python3
"""What a quick reproduction measured, to tell whether docs/reproduction/ is
still the current code's.

  reproduction-fingerprint.py write QUICK.json OUT.json
      OUT.json: every claim's measured figures in QUICK.json (the output of
      `cclab reproduce all --quick --json`), to 6 significant digits, with
      the build that made them. publish-reproduction.py writes it next to
      the published pages.
  reproduction-fingerprint.py check QUICK.json PUBLISHED.json
      Exit 1, naming the claims whose figures moved, when QUICK.json does not
      give the figures PUBLISHED.json recorded: the code changed what a run
      measures since docs/reproduction/ was published (sim runs are
      deterministic, so any difference is a change, not noise).

`make test`'s reproduce-quick stage runs the check.
"""
import json
import sys


def figures(quick):
    out = {}
    for p in quick["papers"]:
        for c in p["claims"]:
            out[f"{p['paper']}/{c['id']}"] = [
                [m["label"], f"{m['mean']:.6g}", f"{m['ci95']:.6g}", m["n"]] for m in c.get("ours", [])
            ]
    return out


def builds(quick):
    return sorted({p["build"]["git_revision"] for p in quick["papers"]})


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    mode, quick_path, other = sys.argv[1:]
    quick = json.load(open(quick_path))
    now = figures(quick)
    if mode == "write":
        doc = {
            "about": "every claim's figures in `cclab reproduce all --quick` at the build that published "
            "docs/reproduction/; scripts/reproduction-fingerprint.py check compares a new quick run with them",
            "builds": builds(quick),
            "claims": now,
        }
        with open(other + ".tmp", "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        import os

        os.replace(other + ".tmp", other)
        print(f"reproduction-fingerprint: {len(now)} claims into {other}")
        return 0
    try:
        pub = json.load(open(other))
    except FileNotFoundError:
        print(f"reproduction-fingerprint: {other} is missing; publish with "
              "`make reproduce && python3 scripts/publish-reproduction.py`", file=sys.stderr)
        return 1
    was = pub["claims"]
    moved = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
    if not moved:
        print(f"reproduction-fingerprint: the {len(now)} claims' quick figures are the published build's "
              f"({', '.join(pub['builds'])})")
        return 0
    print(
        f"reproduction-fingerprint: docs/reproduction/ predates a change that alters what runs measure: "
        f"{len(moved)} of {len(now)} claims' quick figures differ from those of the published build "
        f"({', '.join(pub['builds'])}; now {', '.join(builds(quick))}). Re-publish: "
        "`make reproduce && python3 scripts/publish-reproduction.py`.",
        file=sys.stderr,
    )
    for k in moved[:20]:
        print(f"  {k}: published {was.get(k, 'absent')} now {now.get(k, 'absent')}", file=sys.stderr)
    if len(moved) > 20:
        print(f"  ... and {len(moved) - 20} more", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
