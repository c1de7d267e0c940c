#!/usr/bin/env bash
# `make test`: every stage in order, each timed; stops at the first failure
# and prints the time each stage took (also on failure). One release build
# (scripts/ws-build.sh) serves every stage: the tests, the binaries the
# reproduction, report, demo, Slurm and netem stages run, clippy's build
# scripts, and the BoringSSL the embedding examples and quiche's own tests
# link.
#
# Under CI (CI=true) a stage that cannot run fails, naming what is missing
# (scripts/lib/ci.sh); elsewhere it prints one SKIPPED line and passes.
#
# Env: TEST_STAGES="build tests ..." runs only those stages (in this order).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/ci.sh

stages=(
    "docs|python3 scripts/check-docs.py"
    "build|./scripts/ws-build.sh >/dev/null"
    "published|./target/release/cclab reproduce --check-published docs/reproduction"
    "tests|cargo test --workspace --release"
    "quiche|./scripts/test-quiche.sh"
    "embed|./scripts/test-embed.sh"
    "fmt|cargo fmt --all -- --check"
    "clippy|cargo clippy --release --workspace --all-targets -- -D warnings"
    "reproduce-quick|./scripts/reproduce-quick.sh"
    "demo|./scripts/test-demo.sh"
    "report|cargo test --workspace --release --test report_chromium -- --ignored --nocapture"
    "slurm|cargo test --workspace --release --test slurm -- --ignored --nocapture"
    "netem|./scripts/test-netem.sh"
)

names=() secs=() results=()
summary() {
    local i total=0
    echo
    echo "make test: stages (wall seconds) at $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo -dirty), CI=${CI:-unset}, $(nproc) cores"
    for i in "${!names[@]}"; do
        printf '  %-16s %6s s  %s\n' "${names[i]}" "${secs[i]}" "${results[i]}"
        total=$((total + secs[i]))
    done
    printf '  %-16s %6s s (%d min %02d s)\n' total "$total" $((total / 60)) $((total % 60))
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
want=" ${TEST_STAGES:-} "
for s in "${stages[@]}"; do
    name=${s%%|*}
    cmd=${s#*|}
    [ -z "${TEST_STAGES:-}" ] || [[ $want == *" $name "* ]] || continue
    echo "==> make test: $name: $cmd" >&2
    t0=$SECONDS
    bash -c "$cmd" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    names+=("$name")
    secs+=($((SECONDS - t0)))
    if [ "$rc" -ne 0 ]; then
        results+=("FAILED (exit status $rc)")
        summary
        echo "make test: FAILED at stage $name" >&2
        exit 1
    fi
    skipped=$(grep -c 'SKIPPED' "$log")
    if [ "$skipped" -gt 0 ]; then
        results+=("ok, $skipped SKIPPED line(s): $(grep -m1 -o 'SKIPPED.*' "$log" | cut -c1-90)")
    else
        results+=("ok")
    fi
done
summary
echo "make test: all stages passed"
