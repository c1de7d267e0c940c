#!/usr/bin/env bash
# Kernel netem through the user-mode Linux guest as the router, the QUIC
# endpoints on the host (docs/links.md): what the guest adds and how its
# runs compare with the emulator's IP mode and with sim.
#
# 1. Forwarding delay: one NewReno flow at 20 Mbit/s with no propagation
#    delay, its smallest RTT through the guest router against the same
#    link built on the host's own kernel (tbf only: no netem needed).
# 2. Agreement: NewReno, CUBIC and BBR2 at RATES, RTT, 1 BDP drop-tail on
#    netem (guest router), emu (IP mode) and sim: utilization, mean
#    queueing delay, the guest's and the host's CPU; goals: utilization
#    within 2 points, mean queue within 20% or 2 ms.
# 3. Line rate: CUBIC alone at LINE_RATES, 1 BDP: utilization and the
#    guest's CPU (goal: 95% at 200 Mbit/s).
# 4. Several links: scenarios/parking-lot.toml (three 10 Mbit/s links, one
#    long flow and one short flow per link) with LOT_CCS on netem through
#    the guest and on emu, per link against the sim-vs-emu goals
#    (utilization within 3 points, queueing delay within 20% or 2 ms, loss
#    rate within 25% or 0.2 points).
#
# Env: DURATION (20s), RATES ("20mbit 100mbit"), RTT (40ms), CCS ("newreno
# cubic bbr2"), LINE_RATES ("100mbit 150mbit 200mbit"), LOT_CCS ("newreno
# cubic"), PARTS ("delay agree line lot"), OUT (a temporary directory,
# removed unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp guest-router
DURATION=${DURATION:-20s}
RATES=${RATES:-"20mbit 100mbit"}
RTT=${RTT:-40ms}
CCS=${CCS:-"newreno cubic bbr2"}
LINE_RATES=${LINE_RATES:-"100mbit 150mbit 200mbit"}
LOT_CCS=${LOT_CCS:-"newreno cubic"}
PARTS=${PARTS:-"delay agree line lot"}
[ "$(id -u)" -eq 0 ] || { echo "guest-router: needs root (namespaces, qdiscs, the guest)" >&2; exit 1; }
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi
cclab=./target/release/cclab
run() { # dir, then cclab run arguments
    local dir=$1
    shift
    [ -f "$dir/summary.json" ] && return 0
    echo "guest-router: $*" >&2
    "$cclab" run "$@" --no-packet-log --quiet --out "$dir" >/dev/null
}
for p in $PARTS; do
    case $p in
    delay)
        CCLAB_NETEM_ROUTER=guest run "$OUT/delay-guest" --link netem --cc newreno --rate 20mbit --rtt 0ms --queue 100pkt --duration 10s
        CCLAB_NETEM_ROUTER=host run "$OUT/delay-host" --link netem --cc newreno --rate 20mbit --rtt 0ms --queue 100pkt --duration 10s
        ;;
    agree)
        for rate in $RATES; do
            for cc in $CCS; do
                CCLAB_NETEM_ROUTER=guest run "$OUT/agree-netem-$cc-$rate" --link netem --cc "$cc" --rate "$rate" --rtt "$RTT" --queue 1bdp --duration "$DURATION"
                run "$OUT/agree-emu-$cc-$rate" --link emu --emu-mode ip --cc "$cc" --rate "$rate" --rtt "$RTT" --queue 1bdp --duration "$DURATION"
                run "$OUT/agree-sim-$cc-$rate" --link sim --cc "$cc" --rate "$rate" --rtt "$RTT" --queue 1bdp --duration "$DURATION"
            done
        done
        ;;
    line)
        for rate in $LINE_RATES; do
            CCLAB_NETEM_ROUTER=guest run "$OUT/line-$rate" --link netem --cc cubic --rate "$rate" --rtt "$RTT" --queue 1bdp --duration "$DURATION"
        done
        ;;
    lot)
        for cc in $LOT_CCS; do
            sed "s/^cc = \".*\"/cc = \"$cc\"/" scenarios/parking-lot.toml >"$OUT/lot-$cc.toml"
            CCLAB_NETEM_ROUTER=guest run "$OUT/lot-netem-$cc" "$OUT/lot-$cc.toml" --link netem --duration "$DURATION"
            run "$OUT/lot-emu-$cc" "$OUT/lot-$cc.toml" --link emu --duration "$DURATION"
        done
        ;;
    *) echo "guest-router: PARTS: unknown part $p (delay, agree, line, lot)" >&2; exit 1 ;;
    esac
done
python3 - "$OUT" "$RATES" "$CCS" "$LINE_RATES" "$PARTS" "$LOT_CCS" <<'PY'
import json, os, sys
out, rates, ccs, lines, parts, lot_ccs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split(), sys.argv[6].split()
def load(name):
    p = os.path.join(out, name, "summary.json")
    if not os.path.exists(p):
        return None
    s = json.load(open(p))
    r = s["repetitions"][0]
    f, b = r["flows"][0], r["bottleneck"]
    return dict(util=b["utilization"] * 100, queue=b["queue_delay_ms_mean"], minrtt=f["rtt_ms"]["min"],
                cpu=r.get("cpu_busy"), gcpu=r.get("guest_cpu_busy"), lost=f["lost_packets"], drops=b["drops"])
pct = lambda x: "-" if x is None else f"{x * 100:.0f}%"
if "delay" in parts:
    g, h = load("delay-guest"), load("delay-host")
    print("## Forwarding delay (NewReno, 20 Mbit/s, 0 ms, 100-packet queue, 10 s)\n")
    print("| router | min RTT ms | guest CPU | host CPU |\n|---|---:|---:|---:|")
    for name, r in (("guest (netem in UML)", g), ("host kernel (tbf only)", h)):
        if r:
            print(f"| {name} | {r['minrtt']:.3f} | {pct(r['gcpu'])} | {pct(r['cpu'])} |")
    if g and h:
        print(f"\nThe guest adds {g['minrtt'] - h['minrtt']:.3f} ms to the smallest round trip (goal ≤ 0.2 ms).\n")
if "agree" in parts:
    print(f"## netem through the guest against emu (IP mode) and sim\n")
    print("| cc | rate | netem util % | emu util % | sim util % | netem queue ms | emu queue ms | sim queue ms | guest CPU | host CPU | goals |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for rate in rates:
        for cc in ccs:
            n, e, s = (load(f"agree-{l}-{cc}-{rate}") for l in ("netem", "emu", "sim"))
            if not (n and e and s):
                continue
            ok = lambda a, b: abs(a["util"] - b["util"]) <= 2 and (abs(a["queue"] - b["queue"]) <= max(2, 0.2 * b["queue"]))
            goals = f"{'met' if ok(n, e) else 'missed'} vs emu, {'met' if ok(n, s) else 'missed'} vs sim"
            print(f"| {cc} | {rate} | {n['util']:.1f} | {e['util']:.1f} | {s['util']:.1f} | {n['queue']:.2f} | {e['queue']:.2f} | {s['queue']:.2f} | {pct(n['gcpu'])} | {pct(n['cpu'])} | {goals} |")
    print()
if "line" in parts:
    print("## CUBIC alone through the guest router (1 BDP)\n")
    print("| rate | utilization % | mean queue ms | tc drops | QUIC lost | guest CPU | host CPU |\n|---|---:|---:|---:|---:|---:|---:|")
    for rate in lines:
        r = load(f"line-{rate}")
        if r:
            print(f"| {rate} | {r['util']:.1f} | {r['queue']:.2f} | {r['drops']} | {r['lost']} | {pct(r['gcpu'])} | {pct(r['cpu'])} |")
if "lot" in parts:
    print("\n## Parking lot (three 10 Mbit/s links, 10 ms each way, 1 BDP; netem through the guest against emu)\n")
    print("| cc | link | utilization netem / emu | loss rate netem / emu | queueing delay netem / emu | guest CPU | agree |")
    print("|---|---|---|---|---|---:|---|")
    for cc in lot_ccs:
        pn, pe = (os.path.join(out, f"lot-{l}-{cc}", "summary.json") for l in ("netem", "emu"))
        if not (os.path.exists(pn) and os.path.exists(pe)):
            continue
        n, e = json.load(open(pn)), json.load(open(pe))
        g = n["repetitions"][0].get("guest_cpu_busy")
        for name in sorted(n["links"]):
            a, b = n["links"][name], e["links"][name]
            ua, ub = a["utilization"] * 100, b["utilization"] * 100
            la, lb = (a.get("loss_rate") or 0) * 100, (b.get("loss_rate") or 0) * 100
            qa, qb = a["queue_delay_ms_mean"], b["queue_delay_ms_mean"]
            miss = [m for m, ok in (("utilization", abs(ua - ub) <= 3),
                                    ("queue", abs(qa - qb) <= max(2, 0.2 * max(qa, qb))),
                                    ("loss", abs(la - lb) <= max(0.2, 0.25 * max(la, lb)))) if not ok]
            print(f"| {cc} | {name} | {ua:.1f}% / {ub:.1f}% | {la:.2f}% / {lb:.2f}% | {qa:.1f} / {qb:.1f} ms | {pct(g)} | {'yes' if not miss else 'no: ' + ', '.join(miss)} |")
PY
