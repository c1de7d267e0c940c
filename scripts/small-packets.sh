#!/usr/bin/env bash
# Every algorithm in both small_packets modes, on sim (20 Mbit/s, 40 ms,
# 1 BDP drop-tail, DURATION, qlog core): goodput, the sender's mean data
# packet and share of small ones (under 95% of its largest), utilization,
# the sender's losses, and the process wall time. What `small_packets =
# "avoid"` (the default) changes against quiche's own `allow`.
# Env: DURATION (10s), CCS (every algorithm `cclab list` shows).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp small-packets
DURATION=${DURATION:-10s}
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
CCLAB=./target/release/cclab
CCS=${CCS:-$("$CCLAB" list | awk '/^[a-z0-9+-]+ +(Plugin|Builtin)/ {print $1}')}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
printf '%-10s %-6s %9s %9s %8s %7s %6s %7s\n' cc mode "Mbit/s" "pkt B" "small %" "util %" lost "wall s"
for cc in $CCS; do
    spec=$cc
    # BR-TCP needs its reservation: half the link.
    [ "$cc" = br-tcp ] && spec="br-tcp:reserved=10000000"
    for mode in allow avoid; do
        out="$DIR/${cc//+/plus}-$mode"
        start=$(date +%s%N)
        "$CCLAB" run --link sim --cc "$spec" --rate 20mbit --rtt 40ms --queue 1bdp \
            --duration "$DURATION" --small-packets "$mode" --no-packet-log --quiet --out "$out" >/dev/null
        wall=$(( ($(date +%s%N) - start) / 1000000 ))
        jq -r --arg cc "$cc" --arg mode "$mode" --arg wall "$wall" '
            .flows[0] as $f | .bottleneck as $b |
            [$cc, $mode, ($f.goodput_bps / 1e6), ($f.data_packet_bytes_mean // 0),
             (($f.data_packet_small_share // 0) * 100), ($b.utilization * 100),
             ($f.lost_packets // 0), (($wall | tonumber) / 1000)] |
            "\(.[0]) \(.[1]) \(.[2]) \(.[3]) \(.[4]) \(.[5]) \(.[6]) \(.[7])"' "$out/summary.json" |
            awk '{printf "%-10s %-6s %9.2f %9.0f %8.1f %7.1f %6.0f %7.2f\n", $1, $2, $3, $4, $5, $6, $7, $8}'
        rm -rf "$out"
    done
done
