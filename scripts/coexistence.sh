#!/usr/bin/env bash
# Coexistence with Linux TCP: each QUIC algorithm against one Linux CUBIC
# flow on the same bottleneck (RATE, RTT, 1-BDP drop-tail, DURATION), on
# each backend: the emulator's IP mode (`--link emu`, the host kernel's
# TCP; needs root and /dev/net/tun) and netem (on this host if its kernel
# has netem, else through the guest router: the qdiscs in a user-mode
# Linux guest, both endpoints on this host, this host kernel's TCP;
# CCLAB_NETEM_ROUTER=vm runs the netem part the old way, everything in one
# `cclab vm` guest with the guest kernel's TCP). Prints per algorithm and backend the
# QUIC flow's and the TCP flow's goodput, the QUIC flow's share (mean over
# the repetitions, their range in brackets), Jain's index and how busy the
# machine's CPUs were; and whether the two backends' shares are within 10
# points. The algorithms and the base scenario are those of the sweep
# scenarios/coexistence/vs-linux-cubic.toml (its last, tcp:cubic, is the
# control: Linux CUBIC against itself). docs/coexistence.md explains the
# table.
#
# Env: REPS (3), DURATION (30s), RATE (20mbit), RTT (40ms), CCS (the
# sweep's list), BACKENDS ("emu netem"), OUT (target/coexistence; finished
# runs are kept and skipped, so a second call resumes), CCLAB_VM_KIND (uml).
set -euo pipefail
cd "$(dirname "$0")/.."
SWEEP=scenarios/coexistence/vs-linux-cubic.toml
REPS=${REPS:-3}
DURATION=${DURATION:-30s}
RATE=${RATE:-20mbit}
RTT=${RTT:-40ms}
BACKENDS=${BACKENDS:-"emu netem"}
OUT=${OUT:-target/coexistence}
KIND=${CCLAB_VM_KIND:-uml}
cclab=./target/release/cclab
# The base scenario and the grid, from the sweep file.
read -r BASE GRID <<<"$(python3 - "$SWEEP" <<'PY'
import os, sys, tomllib
sw = tomllib.load(open(sys.argv[1], "rb"))
base = os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), sw["scenario"]))
ccs = [f["cc"] for f in tomllib.load(open(base, "rb"))["flows"]]
if len(ccs) != 2 or ccs[1] != "tcp:cubic":
    sys.exit(f"{base}: expected two flows, the second tcp:cubic, not {ccs}")
print(base, " ".join(sw["grid"]["flows.0.cc"]))
PY
)"
[ -n "${BASE:-}" ] || { echo "coexistence: cannot read $SWEEP" >&2; exit 2; }
CCS=${CCS:-$GRID}
export REPS DURATION RATE RTT OUT CCS BASE
# Every point of one backend. Resumable: a complete run stays.
part() {
    local link=$1 cc dir
    mkdir -p "$OUT"
    for cc in $CCS; do
        dir="$OUT/$link-${RATE}-${RTT}-${cc//[+:]/_}"
        [ -f "$dir/summary.json" ] && continue
        rm -rf "$dir" "$dir.partial"
        echo "coexistence: $cc vs tcp:cubic on $link ($RATE, $RTT, $REPS x $DURATION)" >&2
        $cclab run "$BASE" --link "$link" --cc "$cc" --cc tcp:cubic --rate "$RATE" --rtt "$RTT" \
            --queue 1bdp --duration "$DURATION" --repetitions "$REPS" --qlog-level metrics \
            --no-packet-log --quiet --out "$dir" > /dev/null
    done
}

if [ "${1:-}" = --part ]; then
    part "$2"
    exit 0
fi

. scripts/lib/stamp.sh
stamp coexistence
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
times=()
for link in $BACKENDS; do
    SECONDS=0
    if [ "$link" = netem ] && [ "${CCLAB_NETEM_ROUTER:-}" = vm ] && ! $cclab link probe --json 2>/dev/null | grep -q '"netem": true'; then
        echo "coexistence: netem in a $KIND guest (cclab vm)" >&2
        $cclab vm --kind "$KIND" --quiet -- "$0" --part netem
        link="netem (guest)"
    else
        part "$link"
    fi
    times+=("$link ${SECONDS} s")
done
echo "coexistence: wall time per backend: $(printf '%s; ' "${times[@]}")" >&2
python3 - "$OUT" "$RATE" "$RTT" "$BACKENDS" $CCS <<'PY'
import json, os, statistics, sys
out, rate, rtt, backends, ccs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5:]
def load(link, cc):
    p = os.path.join(out, f"{link}-{rate}-{rtt}-{cc.replace('+', '_').replace(':', '_')}", "summary.json")
    if not os.path.exists(p):
        return None
    s = json.load(open(p))
    shares, busy = [], []
    for r in s["repetitions"]:
        g = [f["goodput_bps"] for f in r["flows"]]
        if sum(g) > 0:
            shares.append(100 * g[0] / sum(g))
        if r.get("cpu_busy") is not None:
            busy.append(100 * r["cpu_busy"])
    f = s["flows"]
    return dict(quic=f[0]["goodput_bps"] / 1e6, tcp=f[1]["goodput_bps"] / 1e6,
                share=statistics.mean(shares) if shares else float("nan"),
                lo=min(shares, default=float("nan")), hi=max(shares, default=float("nan")),
                jain=s.get("jain_fairness") or float("nan"),
                busy=max(busy) if busy else float("nan"), reps=len(s["repetitions"]))
print(f"# each QUIC algorithm against one Linux CUBIC flow: {rate}, {rtt}, 1-BDP drop-tail; "
      "share = the QUIC flow's part of the two goodputs (mean over repetitions, [min-max]); "
      "CPU = the machine's busiest repetition")
head = f"{'QUIC algorithm':<20}"
for b in backends:
    head += f" | {b + ': QUIC Mbit/s':>17} {'TCP':>6} {'QUIC share %':>18} {'TCP %':>5} {'Jain':>5} {'CPU %':>5}"
print(head + (" | agree (10 points)" if len(backends) == 2 else ""))
fails = 0
for cc in ccs:
    label = cc + (" (control)" if cc.startswith("tcp:") else "")
    row, shares = f"{label:<20}", []
    for b in backends:
        r = load(b, cc)
        if r is None:
            row += f" | {'(not run)':>17} {'':>6} {'':>18} {'':>5} {'':>5} {'':>5}"
            continue
        shares.append(r["share"])
        rng = f"{r['share']:5.1f} [{r['lo']:.0f}-{r['hi']:.0f}]"
        row += (f" | {r['quic']:17.2f} {r['tcp']:6.2f} {rng:>18} {100 - r['share']:5.1f}"
                f" {r['jain']:5.3f} {r['busy']:5.0f}")
    if len(backends) == 2 and len(shares) == 2:
        d = abs(shares[0] - shares[1])
        fails += d > 10
        row += f" | {'yes' if d <= 10 else 'no'} ({d:.1f})"
    print(row)
if len(backends) == 2:
    print(f"\n{len(ccs) - fails} of {len(ccs)} algorithms with the backends' shares within 10 points")
PY
