#!/usr/bin/env bash
# How fast the virtual-time link runs: simulated seconds per wall second
# (the simulator's own wall time, from each repetition's sim.json), median
# of RUNS runs, one simulation on one core, release build:
#   (a) 1 CUBIC flow, 20 Mbit/s, 40 ms, 60 s, qlog on both ends (core level)
#   (b) the same with qlog off
#   (c) 10 CUBIC flows, 20 Mbit/s, 40 ms, RED, 200 s (wall time and peak RSS)
#   (d) 1 CUBIC flow, 100 Mbit/s, 20 ms, 20 s, qlog core
# Env: RUNS (3), SKIP_C (set to skip the long case).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp bench-sim
RUNS=${RUNS:-3}
cargo build --release -q -p harness -p quic-server -p quic-client   # the one release build every target uses
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
CCLAB=./target/release/cclab
run_case() {
    local name=$1
    shift
    for i in $(seq "$RUNS"); do
        /usr/bin/time -f '%e %M' -o "$DIR/$name-$i.time" \
            "$CCLAB" run --link sim --quiet --no-packet-log "$@" --out "$DIR/$name-$i" >/dev/null
        # Results of one run can be large; keep only what is measured.
        cp "$DIR/$name-$i/rep-1/sim.json" "$DIR/$name-$i.sim.json"
        rm -rf "$DIR/$name-$i"
    done
}
run_case a --cc cubic --rate 20mbit --rtt 40ms --duration 60s --qlog-level core
run_case b --cc cubic --rate 20mbit --rtt 40ms --duration 60s --qlog-level off
[ -z "${SKIP_C:-}" ] && run_case c --cc cubic --flows 10 --rate 20mbit --rtt 40ms --aqm red --duration 200s --qlog-level core
run_case d --cc cubic --rate 100mbit --rtt 20ms --duration 20s --qlog-level core
python3 - "$DIR" "$RUNS" <<'PY'
import json, os, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
labels = {
    "a": "(a) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog core",
    "b": "(b) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog off",
    "c": "(c) 10 flows, 20 Mbit/s, 40 ms, RED, 200 s, qlog core",
    "d": "(d) 1 flow, 100 Mbit/s, 20 ms, 20 s, qlog core",
}
print(f"{'case':<55} {'x real time':>12} {'sim wall s':>11} {'process s':>10} {'peak RSS MB':>12} {'datagrams/s':>12}")
for k, label in labels.items():
    if not os.path.exists(os.path.join(d, f"{k}-1.sim.json")):
        continue
    sims = [json.load(open(os.path.join(d, f"{k}-{i}.sim.json"))) for i in range(1, runs + 1)]
    times = [open(os.path.join(d, f"{k}-{i}.time")).read().split() for i in range(1, runs + 1)]
    sp = statistics.median(s["speedup"] for s in sims)
    wall = statistics.median(s["wall_s"] for s in sims)
    proc = statistics.median(float(t[0]) for t in times)
    rss = statistics.median(int(t[1]) for t in times) / 1024
    dps = statistics.median(s["datagrams"] / s["wall_s"] for s in sims)
    print(f"{label:<55} {sp:12.1f} {wall:11.2f} {proc:10.2f} {rss:12.0f} {dps:12.0f}")
print(f"medians of {runs} runs; speed = simulated seconds / wall seconds of the simulation loop")
PY
