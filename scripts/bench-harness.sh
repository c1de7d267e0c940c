#!/usr/bin/env bash
# Harness overhead per run (set-up + tear-down on the emu backend: server
# processes, emulator, client spawn, teardown), and the CPU the emulator
# leaves to the endpoints while it carries a 100 Mbit/s QUIC flow.
# RUNS (default 7) short runs for the overhead.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp bench-harness
RUNS=${RUNS:-7}
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
for i in $(seq "$RUNS"); do
    ./target/release/cclab run --cc cubic --duration 1s --no-packet-log --quiet --out "$DIR/o$i" >/dev/null
done
./target/release/cclab run --cc cubic --rate 100mbit --rtt 20ms --duration 10s --quiet --no-packet-log --out "$DIR/fast" >/dev/null
# The median overhead of the short runs, then the fast run's figures.
for i in $(seq "$RUNS"); do jq '.repetitions[0].overhead_s' "$DIR/o$i/summary.json"; done | jq -rs --argjson n "$RUNS" \
    'sort | (if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end) as $m | "harness overhead per run (set-up + tear-down), \($n) runs: median \($m * 1000 | round / 1000) s, max \(max * 1000 | round / 1000) s"'
jq -r --argjson cores "$(nproc)" '.repetitions[0] | .emu_cpu as [$cpu, $dur]
    | "100 Mbit/s, 20 ms RTT, one CUBIC flow: goodput \(.flows[0].goodput_bps / 1e5 | round / 10) Mbit/s, utilization \(.bottleneck.utilization * 1000 | round / 10)%",
      "  emulator thread: \($cpu * 100 | round / 100) CPU s over \($dur * 10 | round / 10) s = \($cpu / $dur * 100 | round)% of one core; left for the endpoints: \(($cores - $cpu / $dur) * 100 | round / 100) of \($cores) cores"' \
    "$DIR/fast/summary.json"
