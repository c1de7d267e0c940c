#!/usr/bin/env bash
# Results of the shipped single-link scenarios at another revision against
# this checkout's: each scenario on sim (DURATION, one repetition, per-packet
# log and qlog on), every file of both result directories compared byte
# for byte except those that hold wall-clock facts (metadata.json,
# status.json, sim.json). For a change that must not move single-link
# results (a restructuring, a new feature off by default).
#
# Usage: scripts/compare-revisions.sh REV   (make compare-revisions REV=...)
# Env: SCENARIOS (default below), DURATION (6s), OUT (a temporary
# directory, removed unless set). REV is built once in a worktree under
# target/rev/ (its own target directory: a full build the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: compare-revisions.sh REV}
sha=$(git rev-parse --short "$rev^{commit}")
. scripts/lib/stamp.sh
stamp "compare-revisions REV=$sha"
SCENARIOS=${SCENARIOS:-"default six-flows vegas-vs-reno-red reproduce/br-tcp/cbq reproduce/ewphcc/wired reproduce/dcm-plus/path reproduce/smcc/bottleneck reproduce/tcp-exp/dumbbell"}
DURATION=${DURATION:-6s}
wt=target/rev/$sha
if ! [ -x "$wt/target/release/cclab" ]; then
    [ -d "$wt/src" ] || git worktree add --detach "$wt/src" "$sha" >&2
    (cd "$wt/src" && ./patches/bootstrap.sh >&2 && CARGO_TARGET_DIR="$PWD/../target" cargo build --release -q -p harness --bin cclab)
fi
cargo build --release -q -p harness --bin cclab
if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"
differ=0
for s in $SCENARIOS; do
    n=${s//\//_}
    for side in old new; do
        bin=target/release/cclab
        [ $side = old ] && bin=$wt/target/release/cclab
        rm -rf "${OUT:?}/$side/$n"
        "$bin" run "scenarios/$s.toml" --link sim --duration "$DURATION" --repetitions 1 \
            --out "$OUT/$side/$n" --quiet >/dev/null
    done
    d=$(diff -rq "$OUT/old/$n" "$OUT/new/$n" | grep -v -e metadata.json -e status.json -e sim.json || true)
    files=$(find "$OUT/new/$n" -type f | wc -l)
    if [ -z "$d" ]; then
        echo "$s: identical ($files files)"
    else
        echo "$s: DIFFERS"
        echo "$d" | sed 's/^/  /'
        differ=$((differ + 1))
    fi
done
echo "compare-revisions: $differ of $(echo $SCENARIOS | wc -w) scenario(s) differ from $sha"
[ $differ -eq 0 ]
