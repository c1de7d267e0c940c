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
python3 - "$DIR" "$RUNS" <<'PY'
import json, statistics, sys, os
d, runs = sys.argv[1], int(sys.argv[2])
ov = [json.load(open(os.path.join(d, f"o{i}", "summary.json")))["repetitions"][0]["overhead_s"] for i in range(1, runs + 1)]
print(f"harness overhead per run (set-up + tear-down), {runs} runs: median {statistics.median(ov):.3f} s, max {max(ov):.3f} s")
s = json.load(open(os.path.join(d, "fast", "summary.json")))
rep = s["repetitions"][0]
cpu, dur = rep["emu_cpu"]
cores = os.cpu_count()
print(f"100 Mbit/s, 20 ms RTT, one CUBIC flow: goodput {rep['flows'][0]['goodput_bps']/1e6:.1f} Mbit/s, utilization {rep['bottleneck']['utilization']*100:.1f}%")
print(f"  emulator thread: {cpu:.2f} CPU s over {dur:.1f} s = {cpu/dur*100:.0f}% of one core; left for the endpoints: {cores - cpu/dur:.2f} of {cores} cores")
PY
