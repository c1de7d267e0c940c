#!/usr/bin/env bash
# Every seed paper's evaluation, shortened (fewer repetitions, shorter runs),
# on the virtual-time link; checks that every claim got a verdict with its
# figures (`--expect`), and that they are the figures docs/reproduction/ was
# published with (`--fingerprint-check`). Verdicts are results, not test
# failures. Uses the workspace's one release build (scripts/ws-build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ws-build.sh >/dev/null
rm -rf target/reproduce-quick
# docs/reproduction/ must be the current code's: the same quick figures as
# the build that published it (sim runs are deterministic).
./target/release/cclab reproduce all --quick --quiet --out target/reproduce-quick \
    --expect br-tcp,dcm-plus,ewphcc,smcc,tcp-exp --fingerprint-check docs/reproduction/quick-figures.json >/dev/null
# ... and the check sees a change: the same figures with one claim's mean
# altered must be refused (every run is reused).
jq '(.claims | to_entries | map(select(.value | length > 0)) | sort_by(.key) | .[0].key) as $k
    | .claims[$k][0][1] = "altered"' docs/reproduction/quick-figures.json >target/quick-figures-altered.json
if ./target/release/cclab reproduce all --quick --quiet --out target/reproduce-quick \
    --fingerprint-check target/quick-figures-altered.json >/dev/null 2>&1; then
    echo "reproduce-quick: the fingerprint check accepted an altered figure" >&2
    exit 1
fi
