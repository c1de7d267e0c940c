#!/usr/bin/env bash
# `make demo` in a short form: the same `cclab demo` on the userspace
# emulator, two algorithms for 2 s each, from the workspace's release build;
# checks its table, demo.json and report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ws-build.sh >/dev/null
out=target/test-demo
rm -rf "$out"
./target/release/cclab demo --cc cubic --cc vegas --duration 2s --out "$out" | tee "$out.txt"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = json.load(open(os.path.join(out, "demo.json")))
names = sorted(r["cc"] for r in rows)
assert names == ["cubic", "vegas"], f"demo.json rows: {names}, want cubic and vegas"
for r in rows:
    assert "error" not in r, f"{r['cc']} failed: {r['error']}"
    assert r["goodput_bps"] > 1e6, f"{r['cc']}: goodput {r['goodput_bps']} bit/s"
assert os.path.getsize(os.path.join(out, "report.html")) > 10000, "report.html is missing or tiny"
print(f"test-demo: {names}: demo.json and report.html written")
PY
grep -q "2 algorithms in" "$out.txt" || { echo "test-demo: FAILED: no closing line in the table output" >&2; exit 1; }
