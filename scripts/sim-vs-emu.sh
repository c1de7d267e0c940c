#!/usr/bin/env bash
# The virtual-time link against the real one: the same scenarios on `sim`
# and on `emu` (real quic-server/quic-client processes through the
# userspace emulator), REPS repetitions each, and a table of the means with
# the agreement goals: utilization within 3 points, mean queueing delay
# within 20% or 2 ms, loss rate (bytes dropped / offered) within 25%
# relative or 0.2 points; and the sender's packets: mean data packet size
# within 20%, share of small data packets (under 95% of the largest)
# within 20% relative or 1 point, ACKs per data packet within 20%.
#
# Env: REPS (3), DURATION (15s), CCS ("cubic newreno vegas bbr2 smcc
# westwood+"), SMALL ("avoid allow": the small_packets modes to run),
# RATES ("20mbit": the link rates; the queue is one BDP at each), RTT
# (40ms), BUSY (0: this many busy processes, CPU spinners, run beside the
# emu runs, to check that a loaded host does not move them), OUT (a
# temporary directory, removed unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp sim-vs-emu
REPS=${REPS:-3}
DURATION=${DURATION:-15s}
CCS=${CCS:-"cubic newreno vegas bbr2 smcc westwood+"}
SMALL=${SMALL:-"avoid allow"}
RATES=${RATES:-20mbit}
RTT=${RTT:-40ms}
BUSY=${BUSY:-0}
echo "# rates $RATES, RTT $RTT, $BUSY busy processes beside the emu runs"
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
. scripts/lib/spinners.sh
if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d)
    tmp_out=$OUT
fi
cases=()
for rate in $RATES; do
    for sp in $SMALL; do
        for cc in $CCS; do cases+=("$cc:droptail:$sp:$rate"); done
        cases+=("newreno:red:$sp:$rate")
    done
done
for c in "${cases[@]}"; do
    IFS=: read -r cc aqm sp rate <<<"$c"
    for link in sim emu; do
        dir="$OUT/$link-${cc//+/plus}-$aqm-$sp-$rate"
        [ -f "$dir/summary.json" ] && continue
        echo "sim-vs-emu: $cc, $aqm, small_packets $sp, $rate, $link" >&2
        if [ "$link" = emu ]; then
            start_spinners "$BUSY"
        fi
        ./target/release/cclab run --link "$link" --cc "$cc" --aqm "$aqm" \
            --rate "$rate" --rtt "$RTT" --queue 1bdp --duration "$DURATION" \
            --small-packets "$sp" \
            --repetitions "$REPS" --no-packet-log --quiet --out "$dir" >/dev/null
        stop_spinners
    done
done
python3 - "$OUT" "${cases[@]}" <<'PY'
import json, os, sys
out, cases = sys.argv[1], sys.argv[2:]
def load(link, cc, aqm, sp, rate):
    s = json.load(open(os.path.join(out, f"{link}-{cc.replace('+', 'plus')}-{aqm}-{sp}-{rate}", "summary.json")))
    b, f = s["bottleneck"], s["flows"][0]
    return (b["utilization"] * 100, b["queue_delay_ms_mean"], (b.get("loss_rate") or 0) * 100,
            b["drops"], f["goodput_bps"] / 1e6, f.get("data_packet_bytes_mean") or 0,
            (f.get("data_packet_small_share") or 0) * 100, f.get("acks_per_data_packet") or 0)
print(f"{'case':<35} {'utilization %':>15} {'queue delay ms':>17} {'loss % (bytes)':>17} {'drops':>13} {'goodput Mbit/s':>17} {'data pkt B':>11} {'small %':>11} {'ACK/pkt':>11}  verdict")
print(f"{'':<35} {'sim':>7} {'emu':>7} {'sim':>8} {'emu':>8} {'sim':>8} {'emu':>8} {'sim':>6} {'emu':>6} {'sim':>8} {'emu':>8} {'sim':>5} {'emu':>5} {'sim':>5} {'emu':>5} {'sim':>5} {'emu':>5}")
fails = 0
for c in cases:
    cc, aqm, sp, rate = c.split(":")
    s, e = load("sim", cc, aqm, sp, rate), load("emu", cc, aqm, sp, rate)
    ok_u = abs(s[0] - e[0]) <= 3
    ok_q = abs(s[1] - e[1]) <= max(2, 0.2 * e[1])
    ok_l = abs(s[2] - e[2]) <= max(0.2, 0.25 * e[2])
    ok_p = abs(s[5] - e[5]) <= 0.2 * e[5]
    ok_s = abs(s[6] - e[6]) <= max(1, 0.2 * e[6])
    ok_a = abs(s[7] - e[7]) <= 0.2 * e[7]
    bad = [n for n, ok in (("utilization", ok_u), ("queue delay", ok_q), ("loss", ok_l),
                           ("packet size", ok_p), ("small share", ok_s), ("ACKs", ok_a)) if not ok]
    fails += bool(bad)
    print(f"{cc + ' ' + aqm + ' ' + sp + ' ' + rate:<35} {s[0]:7.1f} {e[0]:7.1f} {s[1]:8.2f} {e[1]:8.2f} {s[2]:8.3f} {e[2]:8.3f} {s[3]:6.0f} {e[3]:6.0f} {s[4]:8.2f} {e[4]:8.2f} {s[5]:5.0f} {e[5]:5.0f} {s[6]:5.1f} {e[6]:5.1f} {s[7]:5.2f} {e[7]:5.2f}  {'agree' if not bad else 'differ: ' + ', '.join(bad)}")
print(f"\n{len(cases) - fails} of {len(cases)} cases within every goal (means over the repetitions; sim models endpoint CPU time as zero)")
PY
