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
label() {
    case $1 in
    a-metrics) echo "(a) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog metrics" ;;
    a-core) echo "(a) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog core" ;;
    a-off) echo "(a) 1 flow, 20 Mbit/s, 40 ms, 60 s, qlog off" ;;
    c) echo "(c) 10 flows, 20 Mbit/s, RED, 200 s, qlog metrics" ;;
    d-metrics) echo "(d) 1 flow, 100 Mbit/s, 20 ms, 20 s, qlog metrics" ;;
    d-core) echo "(d) 1 flow, 100 Mbit/s, 20 ms, 20 s, qlog core" ;;
    e-off) echo "(e) 1 flow, 1 Gbit/s, 20 ms, 10 s, qlog off" ;;
    esac
}
# median: the median of a column of numbers on standard input.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-52s %7s %10s %7s %12s %12s %7s\n' case "x real" "process s" "loop x" "Mbit/s/core" "datagrams/s" "RSS MB"
for k in a-metrics a-core a-off c d-metrics d-core e-off; do
    [ -f "$DIR/$k-1.sim.json" ] || continue
    # Per run: x real, process s, loop x, Mbit/s per core, datagrams/s, RSS MB.
    for i in $(seq "$RUNS"); do
        read -r wall kb <"$DIR/$k-$i.time"
        jq -rn --argjson w "$wall" --argjson kb "$kb" --slurpfile s "$DIR/$k-$i.sim.json" --slurpfile su "$DIR/$k-$i.summary.json" \
            '"\($s[0].simulated_s / $w) \($w) \($s[0].speedup) \([$su[0].flows[].bytes] | add * 8 / 1e6 / $w) \($s[0].datagrams / $w) \($kb / 1024)"'
    done >"$DIR/$k.rows"
    col() { cut -d' ' -f"$1" "$DIR/$k.rows" | median; }
    printf '%-52s %7.1f %10.2f %7.1f %12.0f %12.0f %7.0f\n' "$(label "$k")" "$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)"
done
echo "medians of $RUNS runs, one core each; x real = simulated s / process wall s (startup and writing included); loop x = the simulation loop alone"
