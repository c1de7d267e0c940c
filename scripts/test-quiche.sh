#!/usr/bin/env bash
# The patched quiche's own library tests (about 1180: recovery, every
# built-in controller, the frame and packet code, and the tests our patch
# series adds: the quiche::cc interface, persistent congestion of the
# built-in controllers, set_cubic_params, the pacers' credit, the ACK
# policy, ECN, the sim clock and RNG), run where the patches live, so a
# change to the series that breaks quiche fails `make test`.
#
# quiche is a [patch] dependency of the workspace, not a member, so cargo
# does not run its tests. This copies .patched/quiche to
# target/quiche-tests/src, makes it a workspace of its own, and runs
# `cargo test --lib` there with the lock file patches/quiche-tests.Cargo.lock
# (quiche's dev-dependencies are not in the workspace's lock). BoringSSL
# comes from the workspace's build when one exists (BORING_BSSL_PATH), so
# only Rust crates compile: about 75 s cold, 30 s to run the tests.
#
# Two upstream tests are skipped by name: they fail identically on the
# pristine quiche 0.30.0 crate with boring-sys 5.4.0 (a 6-byte difference
# in a packet's expected size, BBR2/gcongestion only), so they say nothing
# of our patches. The script checks that every test the series adds ran.
#
# --each-step checks the series one patch at a time, as a reviewer would
# take it: for k = 1..N it builds pristine quiche plus patches 1..k
# (patches/bootstrap.sh --first k) in target/quiche-tests/src and runs the
# same suite there, which must compile, pass, and run every test patches
# 1..k add. Not part of `make test`: N builds of quiche, about 45 s each
# once the dependencies are built.
#
# Usage: scripts/test-quiche.sh [--each-step]
# Env: QUICHE_TESTS_UPDATE_LOCK=1 re-resolves the lock file (then commit it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. scripts/lib/ci.sh

each_step=0
case "${1:-}" in
"") ;;
--each-step) each_step=1 ;;
*)
    echo "usage: scripts/test-quiche.sh [--each-step]" >&2
    exit 2
    ;;
esac

dir=target/quiche-tests
src=$dir/src
lock=patches/quiche-tests.Cargo.lock
say() { echo "test-quiche: $*" >&2; }
mapfile -t series < <(patches/bootstrap.sh --list)
SECONDS=0

# The workspace's BoringSSL, when its release build made one with the same
# boring-sys version and no features.
if [ -z "${BORING_BSSL_PATH:-}" ] &&
    [ "$(lock_version "$lock" boring-sys)" = "$(lock_version Cargo.lock boring-sys)" ]; then
    for out in target/release/build/boring-sys-*/out; do
        if [ -f "$out/build/libssl.a" ] && [ -f "$out/build/libcrypto.a" ] &&
            [ -f "$out/boringssl/include/openssl/ssl.h" ]; then
            export BORING_BSSL_PATH=$root/$out/build BORING_BSSL_INCLUDE_PATH=$root/$out/boringssl/include
            say "using the workspace's BoringSSL ($out)"
            break
        fi
    done
fi
[ -n "${BORING_BSSL_PATH:-}" ] || say "building a BoringSSL of its own (no workspace release build with the same boring-sys): minutes"

skip=(
    tests::sends_ack_only_pkt_when_full_cwnd_and_ack_elicited::cc_algorithm_name_2___bbr2_gcongestion__
    tests::sends_ack_only_pkt_when_full_cwnd_and_ack_elicited_despite_max_unacknowledging::cc_algorithm_name_2___bbr2_gcongestion__
)
skip_args=()
for s in "${skip[@]}"; do skip_args+=(--skip "$s"); done

# Makes the patched tree in $src a workspace of its own with our lock file.
prepare_src() {
    rm -rf "$src/target"
    printf '\n# Added by scripts/test-quiche.sh: a workspace of its own.\n[workspace]\n' >>"$src/Cargo.toml"
    if [ "${QUICHE_TESTS_UPDATE_LOCK:-0}" = 1 ] || ! [ -f "$lock" ]; then
        (cd "$src" && cargo generate-lockfile)
        cp "$src/Cargo.lock" "$lock"
        say "wrote $lock"
    else
        cp "$lock" "$src/Cargo.lock"
    fi
}

# run_suite K: runs the suite in $src, which carries patches 1..K of the
# series, and checks that the tests those patches add ran. Sets `passed`,
# `result`, `n_test` and `n_rstest`.
run_suite() {
    local k=$1 out=$dir/test-output.txt rc
    set +e
    (cd "$src" && CARGO_TARGET_DIR="$root/$dir/target" cargo test -q --locked --lib --features qlog -- \
        "${skip_args[@]}") >"$out" 2>&1
    rc=$?
    set -e
    if [ $rc -ne 0 ]; then
        tail -n 60 "$out" >&2
        say "FAILED (cargo test exit status $rc; full output in $out)"
        exit 1
    fi
    result=$(grep -E '^test result: ok\. [0-9]+ passed' "$out" | tail -n 1)
    passed=$(sed -E 's/^test result: ok\. ([0-9]+) passed.*/\1/' <<<"$result")
    [ "${passed:-0}" -ge 1000 ] || { say "FAILED: only ${passed:-0} tests passed (expected over 1000)"; exit 1; }

    # The tests the patches add must be among those that ran: each
    # `#[test]` by its name, each `#[rstest]` by its cases (rstest makes a
    # module of the test's name with one test per case, and every rstest
    # the series adds has at least two). The name is the first `fn` after
    # the attribute, past any other attributes (`#[case(...)]`, `#[cfg(...)]`).
    local listing added t kind cases files=()
    for p in "${series[@]:0:k}"; do files+=("patches/quiche/$p"); done
    listing=$(cd "$src" && CARGO_TARGET_DIR="$root/$dir/target" cargo test -q --locked --lib --features qlog -- --list 2>/dev/null)
    added=$(awk '/^\+ *#\[(test|rstest)\]/ { kind = ($0 ~ /rstest/) ? "rstest" : "test"; next }
        kind != "" && /^\+.*fn [a-z_0-9]+/ { match($0, /fn [a-z_0-9]+/); print kind, substr($0, RSTART + 3, RLENGTH - 3); kind = "" }' \
        "${files[@]}")
    local missing=()
    n_test=0 n_rstest=0
    while read -r kind t; do
        [ -n "$kind" ] || continue
        if [ "$kind" = test ]; then
            n_test=$((n_test + 1))
            grep -q "::$t: test" <<<"$listing" || missing+=("$t")
        else
            n_rstest=$((n_rstest + 1))
            cases=$(grep -c "::$t::[A-Za-z_0-9]*: test" <<<"$listing" || true)
            [ "$cases" -ge 2 ] || missing+=("$t (rstest: $cases cases listed)")
        fi
    done <<<"$added"
    [ ${#missing[@]} -eq 0 ] || { say "FAILED: tests the series adds did not run: ${missing[*]}"; exit 1; }
    # The whole series adds both kinds: finding neither means the check
    # read nothing.
    if [ "$k" -eq ${#series[@]} ] && { [ "$n_test" -eq 0 ] || [ "$n_rstest" -eq 0 ]; }; then
        say "FAILED: found $n_test #[test] and $n_rstest #[rstest] tests in the series: the name check read nothing"
        exit 1
    fi
}

if [ $each_step = 0 ]; then
    ./patches/bootstrap.sh
    rm -rf "$src"
    mkdir -p "$dir"
    cp -R .patched/quiche "$src"
    chmod -R u+w "$src"
    prepare_src
    run_suite ${#series[@]}
    say "the series' $n_test #[test] and $n_rstest #[rstest] tests all ran"
    say "$result"
    say "passed in ${SECONDS} s ($passed tests, ${#skip[@]} upstream failures skipped by name; the patches' own tests included)"
    exit 0
fi

report=()
for k in $(seq 1 ${#series[@]}); do
    t0=$SECONDS
    ./patches/bootstrap.sh --first "$k" "$root/$src"
    prepare_src
    run_suite "$k"
    line=$(printf '%2d/%d %-42s %4d passed; the %2d tests of patches 1-%d ran; %3d s' \
        "$k" ${#series[@]} "${series[k - 1]}" "$passed" $((n_test + n_rstest)) "$k" $((SECONDS - t0)))
    say "step $line"
    report+=("$line")
done
say "every step of the series compiles and passes (${#skip[@]} upstream failures skipped by name), in ${SECONDS} s:"
printf '  %s\n' "${report[@]}" >&2
