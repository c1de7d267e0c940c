#!/usr/bin/env bash
# Results that should not move with the host's load: each algorithm on the
# emulator (20 Mbit/s, 40 ms, one BDP of drop-tail, DURATION, REPS
# repetitions) on a quiet host, then again with two busy processes (CPU
# spinners, one per core here) running beside the endpoints and the
# emulator, and a table of both with the goals of issue 34: utilization
# within 2 points and mean queueing delay within 20% (or 2 ms).
#
# Env: CCS ("newreno cubic bbr2"), PACING (the flows' pacing, `on` by
# default; e.g. `on:credit=0` for a pacer without credit), RATE (20mbit),
# DURATION (30s), REPS (3), BUSY (2: the busy processes), JSON (a file for
# the table as JSON), OUT (a temporary directory, removed unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp host-load
CCS=${CCS:-"newreno cubic bbr2"}
PACING=${PACING:-on}
RATE=${RATE:-20mbit}
DURATION=${DURATION:-30s}
REPS=${REPS:-3}
BUSY=${BUSY:-2}
cargo build --release -q -p harness -p quic-server -p quic-client
. scripts/lib/spinners.sh
if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d)
    tmp_out=$OUT
fi
mkdir -p "$OUT"
for load in quiet loaded; do
    if [ "$load" = loaded ]; then
        start_spinners "$BUSY"
    fi
    for cc in $CCS; do
        dir=$OUT/$load-${cc//+/plus}
        [ -f "$dir/summary.json" ] && continue
        rm -rf "$dir"
        echo "host-load: $cc, $load ($(cut -d' ' -f1 /proc/loadavg) load)" >&2
        scen=$OUT/$cc.toml
        cat >"$scen" <<EOF
name = "host-load-$cc"
duration = "$DURATION"
[link]
rate = "$RATE"
rtt = "40ms"
queue = "1bdp"
[[flows]]
cc = "$cc"
pacing = "$PACING"
EOF
        ./target/release/cclab run "$scen" --link emu --repetitions "$REPS" \
            --no-packet-log --qlog-level metrics --quiet --out "$dir" >/dev/null
    done
    stop_spinners
done
python3 - "$OUT" "${JSON:-}" "$PACING" $CCS <<'PY'
import json, os, sys
out, json_path, pacing, ccs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def load(load, cc):
    s = json.load(open(os.path.join(out, f"{load}-{cc.replace('+', 'plus')}", "summary.json")))
    b = s["bottleneck"]
    return b["utilization"] * 100, b.get("utilization_ci95", 0) * 100, b["queue_delay_ms_mean"]
print(f"pacing = \"{pacing}\"")
print(f"{'cc':<10} {'utilization %':>21} {'queue delay ms':>23}  verdict")
print(f"{'':<10} {'quiet':>7} {'loaded':>7} {'diff':>5} {'quiet':>7} {'loaded':>7} {'diff':>7}")
rows, fails = [], 0
for cc in ccs:
    (uq, _, qq), (ul, _, ql) = load("quiet", cc), load("loaded", cc)
    du, dq = ul - uq, ql - qq
    ok_u = abs(du) <= 2
    ok_q = abs(dq) <= max(2.0, 0.2 * qq)
    ok = ok_u and ok_q
    fails += not ok
    why = [] if ok else (["utilization"] if not ok_u else []) + (["queue"] if not ok_q else [])
    print(f"{cc:<10} {uq:>7.1f} {ul:>7.1f} {du:>+5.1f} {qq:>7.2f} {ql:>7.2f} {dq:>+7.2f}  {'ok' if ok else 'MISSED (' + ', '.join(why) + ')'}")
    rows.append({"cc": cc, "pacing": pacing, "quiet": {"utilization": uq, "queue_delay_ms": qq},
                 "loaded": {"utilization": ul, "queue_delay_ms": ql}, "ok": ok})
print(f"goals: utilization within 2 points, mean queue within 20% or 2 ms: {len(ccs) - fails} of {len(ccs)} met")
if json_path:
    tmp = json_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1)
    os.replace(tmp, json_path)
PY
