#!/usr/bin/env bash
# The virtual-time link against the real one: the same scenarios on `sim`
# and on `emu` (real quic-server/quic-client processes through the
# userspace emulator), REPS repetitions each, and a table of the means with
# the agreement goals: utilization within 3 points, mean queueing delay
# within 20% or 2 ms, loss rate (bytes dropped / offered) within 25%
# relative or 0.2 points.
#
# Env: REPS (3), DURATION (15s), CCS ("cubic newreno vegas bbr2 smcc
# westwood+"), OUT (a temporary directory, removed unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp sim-vs-emu
REPS=${REPS:-3}
DURATION=${DURATION:-15s}
CCS=${CCS:-"cubic newreno vegas bbr2 smcc westwood+"}
cargo build --release -q -p harness -p quic-server -p quic-client
if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi
cases=()
for cc in $CCS; do cases+=("$cc:droptail"); done
cases+=("newreno:red")
for c in "${cases[@]}"; do
    cc=${c%%:*}
    aqm=${c#*:}
    for link in sim emu; do
        dir="$OUT/$link-${cc//+/plus}-$aqm"
        [ -f "$dir/summary.json" ] && continue
        echo "sim-vs-emu: $cc, $aqm, $link" >&2
        ./target/release/cclab run --link "$link" --cc "$cc" --aqm "$aqm" \
            --rate 20mbit --rtt 40ms --queue 1bdp --duration "$DURATION" \
            --repetitions "$REPS" --no-packet-log --quiet --out "$dir" >/dev/null
    done
done
python3 - "$OUT" "${cases[@]}" <<'PY'
import json, os, sys
out, cases = sys.argv[1], sys.argv[2:]
def load(link, cc, aqm):
    s = json.load(open(os.path.join(out, f"{link}-{cc.replace('+', 'plus')}-{aqm}", "summary.json")))
    b = s["bottleneck"]
    return (b["utilization"] * 100, b["queue_delay_ms_mean"], (b.get("loss_rate") or 0) * 100,
            b["drops"], s["flows"][0]["goodput_bps"] / 1e6)
print(f"{'case':<20} {'utilization %':>15} {'queue delay ms':>17} {'loss % (bytes)':>17} {'drops':>13} {'goodput Mbit/s':>17}  verdict")
print(f"{'':<20} {'sim':>7} {'emu':>7} {'sim':>8} {'emu':>8} {'sim':>8} {'emu':>8} {'sim':>6} {'emu':>6} {'sim':>8} {'emu':>8}")
fails = 0
for c in cases:
    cc, aqm = c.split(":")
    s, e = load("sim", cc, aqm), load("emu", cc, aqm)
    ok_u = abs(s[0] - e[0]) <= 3
    ok_q = abs(s[1] - e[1]) <= max(2, 0.2 * e[1])
    ok_l = abs(s[2] - e[2]) <= max(0.2, 0.25 * e[2])
    bad = [n for n, ok in (("utilization", ok_u), ("queue delay", ok_q), ("loss", ok_l)) if not ok]
    fails += bool(bad)
    print(f"{cc + ' ' + aqm:<20} {s[0]:7.1f} {e[0]:7.1f} {s[1]:8.2f} {e[1]:8.2f} {s[2]:8.3f} {e[2]:8.3f} {s[3]:6.0f} {e[3]:6.0f} {s[4]:8.2f} {e[4]:8.2f}  {'agree' if not bad else 'differ: ' + ', '.join(bad)}")
print(f"\n{len(cases) - fails} of {len(cases)} cases within every goal (means over the repetitions; sim models endpoint CPU time as zero)")
PY
