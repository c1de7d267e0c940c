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
printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics
rows = [l.split() for l in sys.stdin if l.strip()]
by = {}
for name, s, kb in rows:
    by.setdefault(name, []).append((float(s), int(kb)))
med = {k: statistics.median(s for s, _ in v) for k, v in by.items()}
for k, v in by.items():
    print(f"{k:5} runs {[s for s, _ in v]} s  median {med[k]:.2f} s  peak RSS {max(m for _, m in v)/1024:.1f} MB")
ratio = med["jq"] / med["ours"]
print(f"ratio jq/ours (medians): {ratio:.2f}x")
'
