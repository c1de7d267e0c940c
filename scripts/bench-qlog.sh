#!/usr/bin/env bash
# qlog-analysis summary against jq on the same large quiche-format file,
# side by side: wall time and peak memory. SIZE_MB (default 520) sets the
# file size; RUNS (default 3) the repetitions, interleaved.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp bench-qlog
SIZE_MB=${SIZE_MB:-520}
RUNS=${RUNS:-3}
DIR=${BENCH_DIR:-target/bench-qlog}
mkdir -p "$DIR"
FILE="$DIR/synthetic-${SIZE_MB}MB.sqlog"
cargo build --release -q -p qlog-analysis --bin qlog-analysis --example synth-trace
if [ ! -s "$FILE" ]; then
    target/release/examples/synth-trace "$FILE" "$SIZE_MB"
fi
command -v jq >/dev/null || { echo "jq is not installed; apt-get install jq" >&2; exit 1; }
ls -l "$FILE"
measure() { # label, command...
    local label=$1; shift
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" "$@" > /dev/null
    read -r secs kb < "$DIR/time.txt"
    echo "$label $secs $kb"
}
results=()
for i in $(seq "$RUNS"); do
    results+=("$(measure ours target/release/qlog-analysis summary --json "$FILE")")
    results+=("$(measure jq jq --seq -c 'select(.name == "quic:recovery_metrics_updated")' "$FILE")")
done
printf '%s\n' "${results[@]}" | jq -rRs '
def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
[split("\n")[] | select(length > 0) | split(" ") | {name: .[0], s: (.[1] | tonumber), kb: (.[2] | tonumber)}]
| group_by(.name) | map({name: .[0].name, s: map(.s), med: (map(.s) | median), rss: (map(.kb) | max / 1024)}) as $by
| ($by[] | "\(.name) runs \(.s) s  median \(.med * 100 | round / 100) s  peak RSS \(.rss * 10 | round / 10) MB"),
  "ratio jq/ours (medians): \(($by[] | select(.name == "jq") | .med) / ($by[] | select(.name == "ours") | .med) * 100 | round / 100)x"'
