#!/usr/bin/env bash
# Kernel netem against our userspace emulator: the same link descriptions
# and scenarios on `--link netem` (on this host if its kernel has netem,
# else in a user-mode Linux guest through `cclab vm`) and on `--link emu`
# (this host), and a table side by side:
#
#  - a paced UDP probe (`cclab link measure`) at 10 and 20 Mbit/s, 40 ms
#    RTT: delivered rate at 105% load, one-way delay at 30% load;
#  - the probe on netem at rising rates: the highest rate at which netem's
#    rate stays within 1% and its delay within 1 ms where it runs (in a
#    guest, the guest's CPU and timers set that limit);
#  - each AQM (drop-tail, CoDel, RED, PIE, fq_codel) alone under a 10%
#    overload (5%) of paced UDP at 10 Mbit/s, 40 ms, 2 BDP: one-way delay and loss;
#  - QUIC flows (REPS x DURATION) at RATE (20 Mbit/s), 40 ms, 1 BDP: cubic and
#    newreno on drop-tail; cubic and vegas on RED with the same parameters
#    on both (non-gentle, weight 2^-9, as Linux RED can be set); cubic on
#    CoDel (5 ms, 100 ms).
#
# Env: REPS (3), DURATION (15s), RATE (20mbit), OUT (target/netem-vs-emu),
# LADDER ("5 10 20 50 100 200", Mbit/s), CCLAB_VM_KIND (uml).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
DURATION=${DURATION:-15s}
OUT=${OUT:-target/netem-vs-emu}
LADDER=${LADDER:-"5 10 20 50 100 200"}
RATE=${RATE:-20mbit}
export REPS DURATION OUT LADDER RATE
KIND=${CCLAB_VM_KIND:-uml}
CASES=("cubic:droptail" "newreno:droptail" "cubic:red" "vegas:red" "cubic:codel")
RED="red:gentle=false,wq=0.001953125"
cclab=./target/release/cclab

aqm_of() {
    case $1 in
        red) echo "$RED" ;;
        *) echo "$1" ;;
    esac
}

# One backend's share: probes, then the runs. Resumable: finished files stay.
part() {
    local link=$1
    mkdir -p "$OUT"
    for r in 10 20; do
        f="$OUT/$link-probe-$r.json"
        [ -s "$f" ] || $cclab link measure --link "$link" --rate "${r}mbit" --rtt 40ms --queue 1bdp --for 4s --json > "$f.part" && mv "$f.part" "$f"
    done
    # Each queue discipline alone under a 5% overload of UDP (no
    # congestion control in the way): 10 Mbit/s, 40 ms, 2 BDP, 8 s.
    for a in droptail codel red pie fq_codel; do
        f="$OUT/$link-aqm-$a.json"
        [ -s "$f" ] || $cclab link measure --link "$link" --rate 10mbit --rtt 40ms --queue 2bdp --aqm "$(aqm_of "$a")" --for 8s --json > "$f.part" && mv "$f.part" "$f"
    done
    if [ "$link" = netem ]; then
        for r in $LADDER; do
            f="$OUT/netem-ladder-$r.json"
            [ -s "$f" ] || $cclab link measure --link netem --rate "${r}mbit" --rtt 40ms --queue 1bdp --for 3s --json > "$f.part" && mv "$f.part" "$f"
        done
    fi
    for c in "${CASES[@]}"; do
        cc=${c%%:*}
        aqm=${c#*:}
        dir="$OUT/$link-$cc-$aqm"
        [ -f "$dir/summary.json" ] && continue
        rm -rf "$dir"
        echo "netem-vs-emu: $link $cc $aqm" >&2
        $cclab run --link "$link" --cc "$cc" --aqm "$(aqm_of "$aqm")" --rate "$RATE" --rtt 40ms \
            --queue 1bdp --duration "$DURATION" --repetitions "$REPS" --qlog-level metrics \
            --no-packet-log --quiet --out "$dir" > /dev/null
    done
}

if [ "${1:-}" = --part ]; then
    part "$2"
    exit 0
fi

. scripts/lib/stamp.sh
stamp netem-vs-emu
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
SECONDS=0
if $cclab link probe --json 2>/dev/null | grep -q '"netem": true'; then
    echo "netem-vs-emu: netem on this host" >&2
    part netem
else
    echo "netem-vs-emu: netem in a $KIND guest (cclab vm)" >&2
    $cclab vm --kind "$KIND" --quiet -- "$0" --part netem
fi
netem_s=$SECONDS
part emu
echo "netem-vs-emu: netem side ${netem_s} s (boot included), emu side $((SECONDS - netem_s)) s" >&2
python3 scripts/netem-vs-emu-table.py "$OUT" "$LADDER" "$RATE" "${CASES[@]}"
