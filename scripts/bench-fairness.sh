#!/usr/bin/env bash
# Fairness of two flows of one algorithm on the default link (20 Mbit/s,
# 40 ms RTT, 1 BDP drop-tail) with real processes on the userspace
# emulator: Jain's index per repetition and the mean, for quiche's CUBIC
# with HyStart++ on (its default) and off (cubic:hystart=0). (For Reno,
# harness/tests/fidelity.rs asserts Jain > 0.9 over 30 s; SPECS="reno"
# shows its figures.) About 2 minutes with the defaults.
#
# Env: REPS (2), DURATION (30s), SPECS ("cubic cubic:hystart=0").
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp bench-fairness
REPS=${REPS:-2}
DURATION=${DURATION:-30s}
SPECS=${SPECS:-"cubic cubic:hystart=0"}
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
echo "two flows of each spec, $DURATION, $REPS repetitions, emu, 20 Mbit/s, 40 ms, 1 BDP drop-tail"
i=0
for spec in $SPECS; do
    i=$((i + 1))
    ./target/release/cclab run --link emu --cc "$spec" --flows 2 --duration "$DURATION" \
        --repetitions "$REPS" --no-packet-log --quiet --out "$DIR/$i" >/dev/null
    python3 - "$DIR/$i/summary.json" "$spec" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
reps = [r["jain_fairness"] for r in s["repetitions"]]
ci = (s.get("ci95") or {}).get("jain_fairness")
print(f"{sys.argv[2]:<16} Jain per repetition {', '.join(f'{j:.3f}' for j in reps)}; mean {s['jain_fairness']:.3f}"
      + (f" ± {ci:.3f}" if ci is not None else ""))
PY
done
