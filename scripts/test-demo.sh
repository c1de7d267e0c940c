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
fail() { echo "test-demo: FAILED: $*" >&2; exit 1; }
# Both algorithms, neither failed, each above 1 Mbit/s.
jq -e '(map(.cc) | sort) == ["cubic", "vegas"]
       and all(.[]; (has("error") | not) and .goodput_bps > 1e6)' "$out/demo.json" >/dev/null ||
    fail "demo.json: $(jq -c 'map({cc, goodput_bps, error})' "$out/demo.json" 2>&1), want cubic and vegas above 1 Mbit/s"
[ "$(stat -c %s "$out/report.html" 2>/dev/null || echo 0)" -gt 10000 ] || fail "report.html is missing or tiny"
echo "test-demo: cubic, vegas: demo.json and report.html written"
grep -q "2 algorithms in" "$out.txt" || fail "no closing line in the table output"
