#!/usr/bin/env bash
# How fast the virtual-time link runs, median of RUNS runs, each one
# simulation pinned to one core (taskset -c 0), release build:
#   (a) 1 CUBIC flow, 20 Mbit/s, 40 ms, 60 s, qlog metrics / core / off
#   (c) 10 CUBIC flows, 20 Mbit/s, 40 ms, RED, 200 s, qlog metrics
#   (d) 1 CUBIC flow, 100 Mbit/s, 20 ms, 20 s, qlog metrics / core
#   (e) 1 CUBIC flow, 1 Gbit/s, 20 ms, 10 s, qlog off
# For each: x real time (simulated seconds / the whole process's wall
# time, startup and result writing included), the loop's own speed (from
# sim.json), simulated traffic (payload Mbit/s delivered per wall second,
# one core), datagrams per wall second, peak RSS.
# Env: RUNS (3), SKIP_C (set to skip the 200 s case), SMALL_PACKETS
# (avoid, the default, or allow: quiche's own).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp bench-sim
RUNS=${RUNS:-3}
SMALL=${SMALL_PACKETS:-avoid}
echo "# small_packets = $SMALL, ack_policy = immediate"
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk   # the one release build every target uses
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
CCLAB=./target/release/cclab
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 0)
run_case() {
    local name=$1
    shift
    for i in $(seq "$RUNS"); do
        /usr/bin/time -f '%e %M' -o "$DIR/$name-$i.time" \
            "${PIN[@]}" "$CCLAB" run --link sim --quiet --no-packet-log --small-packets "$SMALL" "$@" --out "$DIR/$name-$i" >/dev/null
        # Results of one run can be large; keep only what is measured.
        cp "$DIR/$name-$i/rep-1/sim.json" "$DIR/$name-$i.sim.json"
        cp "$DIR/$name-$i/summary.json" "$DIR/$name-$i.summary.json"
        rm -rf "$DIR/$name-$i"
    done
}
A=(--cc cubic --rate 20mbit --rtt 40ms --duration 60s)
run_case a-metrics "${A[@]}" --qlog-level metrics
run_case a-core "${A[@]}" --qlog-level core
run_case a-off "${A[@]}" --qlog-level off
[ -z "${SKIP_C:-}" ] && run_case c --cc cubic --flows 10 --rate 20mbit --rtt 40ms --aqm red --duration 200s --qlog-level metrics
D=(--cc cubic --rate 100mbit --rtt 20ms --duration 20s)
run_case d-metrics "${D[@]}" --qlog-level metrics
run_case d-core "${D[@]}" --qlog-level core
run_case e-off --cc cubic --rate 1gbit --rtt 20ms --duration 10s --qlog-level off
python3 - "$DIR" "$RUNS" <<'PY'
import json, os, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
labels = {
    "a-metrics": "(a) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog metrics",
    "a-core": "(a) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog core",
    "a-off": "(a) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog off",
    "c": "(c) 10 flows, 20 Mbit/s, RED, 200 s, qlog metrics",
    "d-metrics": "(d) 1 flow, 100 Mbit/s, 20 ms, 20 s, qlog metrics",
    "d-core": "(d) 1 flow, 100 Mbit/s, 20 ms, 20 s, qlog core",
    "e-off": "(e) 1 flow, 1 Gbit/s, 20 ms, 10 s, qlog off",
}
print(f"{'case':<52} {'x real':>7} {'process s':>10} {'loop x':>7} {'Mbit/s/core':>12} {'datagrams/s':>12} {'RSS MB':>7}")
for k, label in labels.items():
    if not os.path.exists(os.path.join(d, f"{k}-1.sim.json")):
        continue
    sims = [json.load(open(os.path.join(d, f"{k}-{i}.sim.json"))) for i in range(1, runs + 1)]
    sums = [json.load(open(os.path.join(d, f"{k}-{i}.summary.json"))) for i in range(1, runs + 1)]
    times = [open(os.path.join(d, f"{k}-{i}.time")).read().split() for i in range(1, runs + 1)]
    procs = [float(t[0]) for t in times]
    proc = statistics.median(procs)
    xreal = statistics.median(s["simulated_s"] / p for s, p in zip(sims, procs))
    loop = statistics.median(s["speedup"] for s in sims)
    mbps = statistics.median(sum(f["bytes"] for f in su["flows"]) * 8 / 1e6 / p for su, p in zip(sums, procs))
    dps = statistics.median(s["datagrams"] / p for s, p in zip(sims, procs))
    rss = statistics.median(int(t[1]) for t in times) / 1024
    print(f"{label:<52} {xreal:7.1f} {proc:10.2f} {loop:7.1f} {mbps:12.0f} {dps:12.0f} {rss:7.0f}")
print(f"medians of {runs} runs, one core each; x real = simulated s / process wall s (startup and writing included); loop x = the simulation loop alone")
PY
