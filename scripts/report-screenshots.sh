#!/usr/bin/env bash
# Screenshots of the HTML report for the documentation: every registered
# algorithm alone on the demo's link (20 Mbit/s, 40 ms RTT, 1 BDP drop-tail)
# plus 0.1% random loss (so repetitions differ and the scatter shows error
# bars), 10 s, 3 repetitions, on the virtual-time link. Writes
# docs/images/report-*.png (the page's top and each figure as Chromium
# draws it) and keeps the report in target/report-screenshots/.
#
# Usage: scripts/report-screenshots.sh [OUT_DIR]   (default docs/images)
#        CCLAB=path/to/cclab scripts/report-screenshots.sh   (skip the build)
# Needs Chromium (scripts/ensure-chromium.sh installs it). About a minute
# on 2 cores once cclab is built.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib/stamp.sh"
stamp report-screenshots
images=${1:-$root/docs/images}
work=$root/target/report-screenshots
if [ -n "${CCLAB:-}" ]; then
    cclab=$CCLAB
else
    cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk --manifest-path "$root/Cargo.toml"
    cclab=$root/target/release/cclab
fi
rm -rf "$work"
mkdir -p "$work" "$images"

# Every algorithm; a required rate parameter (BR-TCP's reservation) gets
# half the link, as `cclab demo` does.
list=$("$cclab" list --json)
jq -r '.[] | select(any(.params[]; .default == null and .unit != "bit/s"))
    | "report-screenshots: skipping \(.name): required parameters"' <<<"$list" >&2
specs=$(jq -r '[.[] | [.params[] | select(.default == null)] as $req | select(all($req[]; .unit == "bit/s"))
    | .name + (if $req == [] then "" else ":" + ($req | map(.name + "=10mbit") | join(",")) end)
    | tojson] | join(", ")' <<<"$list")

cat >"$work/sweep.toml" <<EOF
scenario = "$root/scenarios/default.toml"
repetitions = 3
seed = 1
[grid]
"flows.0.cc" = [$specs]
"duration" = ["10s"]
"link.loss" = ["0.1%"]
EOF

"$cclab" sweep "$work/sweep.toml" --link sim --quiet --out "$work/sweep"
"$cclab" report "$work/sweep" --out "$work/report.html"
CCLAB_REPORT_PAGE=$work/report.html CCLAB_REPORT_SHOTS=$work/shots \
    cargo test --workspace --release -q --manifest-path "$root/Cargo.toml" --test report_chromium -- --ignored --nocapture
for f in page fig-scatter fig-cwnd fig-rtt fig-goodput fig-queue; do
    cp "$work/shots/$f.png" "$images/report-${f#fig-}.png"
done
ls -1 "$images"/report-*.png
