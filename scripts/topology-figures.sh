#!/usr/bin/env bash
# Figures for topologies (docs/topologies.md), printed as markdown:
#  1. RTT fairness on sim: scenarios/rtt-fairness.toml (20 ms and 80 ms
#     flows, 20 Mbit/s, 1-BDP drop-tail, 60 s) for each algorithm of CCS:
#     each flow's base RTT from the summary against its configured RTT,
#     goodputs and their ratio, against the inverse RTT ratio (4).
#  2. The parking lot of scenarios/parking-lot.toml (three 10 Mbit/s
#     links, one long flow, one short flow per link) on sim and on emu for
#     each algorithm of LOT_CCS: per link utilization, loss rate, mean
#     queueing delay, against the sim-vs-emu goals (utilization within 3
#     points, queueing delay within 20% or 2 ms, loss rate within 25% or
#     0.2 points), and each flow's goodput.
#  3. With NETEM=1: the same parking lot at 2 Mbit/s per link (a rate a
#     one-CPU user-mode Linux guest keeps up with), NewReno, 15 s, on sim,
#     emu and kernel netem (`cclab run --vm` where the host has no netem).
# Env: CCS ("newreno cubic"), LOT_CCS ("newreno cubic"), REPS (3),
# LOT_DURATION (30s), NETEM (unset), OUT (a temporary directory, removed
# unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp topology-figures
CCS=${CCS:-"newreno cubic"}
LOT_CCS=${LOT_CCS:-"newreno cubic"}
REPS=${REPS:-3}
LOT_DURATION=${LOT_DURATION:-30s}
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"
# A copy of a scenario with every flow's algorithm replaced.
with_cc() { sed "s/^cc = \".*\"/cc = \"$2\"/" "$1" >"$3"; }
for cc in $CCS; do
    with_cc scenarios/rtt-fairness.toml "$cc" "$OUT/rtt-$cc.toml"
    # The control: both flows at 20 ms.
    sed 's/^rtt = "80ms"/rtt = "20ms"/' "$OUT/rtt-$cc.toml" >"$OUT/rtt-$cc-equal.toml"
    for v in "" -equal; do
        d="$OUT/rtt-$cc$v"
        [ -f "$d/summary.json" ] && continue
        echo "topology-figures: rtt-fairness$v, $cc, sim" >&2
        ./target/release/cclab run "$OUT/rtt-$cc$v.toml" --link sim --repetitions "$REPS" \
            --no-packet-log --quiet --out "$d" >/dev/null
    done
done
for cc in $LOT_CCS; do
    with_cc scenarios/parking-lot.toml "$cc" "$OUT/lot-$cc.toml"
    for link in sim emu; do
        d="$OUT/lot-$cc-$link"
        [ -f "$d/summary.json" ] && continue
        echo "topology-figures: parking lot, $cc, $link" >&2
        ./target/release/cclab run "$OUT/lot-$cc.toml" --link "$link" --repetitions "$REPS" \
            --duration "$LOT_DURATION" --no-packet-log --quiet --out "$d" >/dev/null
    done
done
if [ -n "${NETEM:-}" ]; then
    sed -e 's/^rate = "10mbit"/rate = "2mbit"/' -e 's/^cc = ".*"/cc = "newreno"/' \
        scenarios/parking-lot.toml >"$OUT/lot-2mbit.toml"
    for link in sim emu netem; do
        d="$OUT/lot-2mbit-$link"
        [ -f "$d/summary.json" ] && continue
        echo "topology-figures: parking lot at 2 Mbit/s, newreno, $link" >&2
        vm=()
        if [ $link = netem ] && ! ./target/release/cclab link probe --json 2>/dev/null | grep -q '"netem": true'; then
            vm=(--vm)
            # The guest writes its results under the host's /tmp only.
            d=$(mktemp -u /tmp/cclab-topology-netem.XXXXXX)
        fi
        ./target/release/cclab run "$OUT/lot-2mbit.toml" --link "$link" "${vm[@]}" --repetitions "$REPS" \
            --duration 15s --no-packet-log --quiet --out "$d" >/dev/null
        [ "$d" = "$OUT/lot-2mbit-$link" ] || mv "$d" "$OUT/lot-2mbit-$link"
    done
fi
python3 - "$OUT" "$CCS" "$LOT_CCS" "$REPS" "$LOT_DURATION" <<'PY'
import json, os, sys
out, ccs, lot_ccs, reps, lot_dur = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4], sys.argv[5]
load = lambda d: json.load(open(os.path.join(out, d, "summary.json")))
print(f"\n**RTT fairness** (sim, scenarios/rtt-fairness.toml: 20 Mbit/s, 1-BDP drop-tail at 20 ms, 60 s, {reps} repetitions; means)\n")
print("| algorithm | base RTT 20 ms flow | base RTT 80 ms flow | goodput 20 ms | goodput 80 ms | ratio | Jain | utilization | control: ratio at 20 ms / 20 ms |")
print("|---|---|---|---|---|---|---|---|---|")
for cc in ccs:
    s, c = load(f"rtt-{cc}"), load(f"rtt-{cc}-equal")
    f = s["flows"]
    g0, g1 = f[0]["goodput_bps"] / 1e6, f[1]["goodput_bps"] / 1e6
    c0, c1 = c["flows"][0]["goodput_bps"], c["flows"][1]["goodput_bps"]
    print(f"| {cc} | {f[0]['base_rtt_ms']:.2f} ms | {f[1]['base_rtt_ms']:.2f} ms | {g0:.2f} Mbit/s | {g1:.2f} Mbit/s "
          f"| {g0 / g1:.2f} | {s['jain_fairness']:.3f} | {s['bottleneck']['utilization'] * 100:.1f}% | {c0 / c1:.2f} |")
print("\nThe inverse RTT ratio is 4; a share going with 1/RTT^2 would be 16. The control runs the same")
print("scenario with both flows at 20 ms: how far one algorithm's two flows split when RTT plays no part.")
print(f"\n**Parking lot** (scenarios/parking-lot.toml: three 10 Mbit/s links, 10 ms each way, 1-BDP drop-tail; "
      f"{lot_dur}, {reps} repetitions; means; agreement: utilization within 3 points, queueing delay within 20% or 2 ms, "
      "loss rate within 25% or 0.2 points)\n")
print("| algorithm | link | utilization sim / emu | drops sim / emu | loss rate sim / emu | queueing delay sim / emu | Jain sim / emu | agree |")
print("|---|---|---|---|---|---|---|---|")
bad = 0
for cc in lot_ccs:
    s, e = load(f"lot-{cc}-sim"), load(f"lot-{cc}-emu")
    for name in sorted(s["links"]):
        a, b = s["links"][name], e["links"][name]
        ua, ub = a["utilization"] * 100, b["utilization"] * 100
        la, lb = (a.get("loss_rate") or 0) * 100, (b.get("loss_rate") or 0) * 100
        qa, qb = a["queue_delay_ms_mean"], b["queue_delay_ms_mean"]
        ok_u = abs(ua - ub) <= 3
        ok_q = abs(qa - qb) <= max(2, 0.2 * max(qa, qb))
        ok_l = abs(la - lb) <= max(0.2, 0.25 * max(la, lb))
        miss = [n for n, ok in (("utilization", ok_u), ("queue", ok_q), ("loss", ok_l)) if not ok]
        bad += bool(miss)
        print(f"| {cc} | {name} | {ua:.1f}% / {ub:.1f}% | {a['drops']:.0f} / {b['drops']:.0f} | {la:.2f}% / {lb:.2f}% | {qa:.1f} / {qb:.1f} ms "
              f"| {a['jain_fairness']:.3f} / {b['jain_fairness']:.3f} | {'yes' if not miss else 'no: ' + ', '.join(miss)} |")
print("\n| algorithm | flow | path | goodput sim | goodput emu |")
print("|---|---|---|---|---|")
paths = ["l1, l2, l3", "l1", "l2", "l3"]
for cc in lot_ccs:
    s, e = load(f"lot-{cc}-sim"), load(f"lot-{cc}-emu")
    for i, (a, b) in enumerate(zip(s["flows"], e["flows"])):
        print(f"| {cc} | {i} | {paths[i] if i < len(paths) else '?'} | {a['goodput_bps'] / 1e6:.2f} Mbit/s | {b['goodput_bps'] / 1e6:.2f} Mbit/s |")
print(f"\n{bad} link row(s) outside the goals.")
if os.path.exists(os.path.join(out, "lot-2mbit-netem", "summary.json")):
    print(f"\n**Parking lot at 2 Mbit/s per link on three backends** (NewReno, 15 s, {reps} repetitions; means)\n")
    print("| backend | goodput long / short flows (Mbit/s) | utilization l1, l2, l3 | drops l1, l2, l3 | loss rate l1, l2, l3 | queueing delay l1, l2, l3 (ms) |")
    print("|---|---|---|---|---|---|")
    for link in ["sim", "emu", "netem"]:
        s = load(f"lot-2mbit-{link}")
        g = [f["goodput_bps"] / 1e6 for f in s["flows"]]
        L = [s["links"][n] for n in sorted(s["links"])]
        short = ", ".join("%.2f" % x for x in g[1:])
        util = ", ".join("%.1f%%" % (l["utilization"] * 100) for l in L)
        loss = ", ".join("%.2f%%" % ((l.get("loss_rate") or 0) * 100) for l in L)
        queue = ", ".join("%.1f" % l["queue_delay_ms_mean"] for l in L)
        drops = ", ".join("%.0f" % l["drops"] for l in L)
        print(f"| {link} | {g[0]:.2f} / {short} | {util} | {drops} | {loss} | {queue} |")
PY
