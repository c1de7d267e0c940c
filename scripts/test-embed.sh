#!/usr/bin/env bash
# Checks that cclab's plugins work in other people's quiche applications, and
# that the documentation's walkthroughs say what the code does:
#
#  1. The code docs/embedding.md and docs/writing-a-plugin.md quote matches
#     the files, block by block, and every link of the docs resolves
#     (scripts/check-docs.py).
#  2. The example plugin (cc-algorithms/src/fixed.rs) passes its unit tests
#     and `cclab list` shows it.
#  3. Builds the standalone projects in examples/embed/ (--locked; offline
#     once their crates are in cargo's cache), checked by rustfmt and clippy.
#  4. (a) examples/embed/quiche-client, a plain quiche client, downloads from
#     our quic-server with vegas:alpha=1,beta=3, and uploads to it with
#     fixed:window=20; (b) our quic-client downloads from
#     examples/embed/tokio-quiche-server running vegas:alpha=1,beta=3. Each
#     must move every byte, and the sending plugin's own state (its
#     metrics, which only the plugin logs) must be in that end's qlog.
#
# Everything runs on loopback. Exit status 0 when every check passed.
#
# Builds. The workspace side is scripts/ws-build.sh (`cargo test --workspace
# --release --no-run`, the build every stage of `make test` shares), so after
# it this costs nothing: the binaries, the plugin's unit tests and BoringSSL
# all come from it.
# The examples build into one target directory, EMBED_TARGET_DIR (default
# target/embed), so the crates they share compile once; it is apart from
# the workspace's: an example is a workspace of its own, and cargo hashes a
# path dependency by where it lies relative to the workspace root, so an
# example could not reuse the workspace's compiled quiche or cc-algorithms
# anyway. (Sharing needs quiche as an rlib only, see patches/README.md:
# quiche's staticlib and cdylib files were named without a hash, and the
# two examples' quiche builds overwrote each other's.)
# What the examples do share is BoringSSL,
# the bulk of a cold build: boring-sys is handed the workspace's BoringSSL
# (BORING_BSSL_PATH, BORING_BSSL_INCLUDE_PATH) when both lock the same
# boring-sys version and the workspace enables none of its features, so an
# example compiles only Rust crates (its dependencies without debug info):
# 198 s cold for both on 2 busy cores (302 s with a target directory each),
# 10 s warm.
# An EMBED_TARGET_DIR outside the checkout (a CI cache, say) keeps the
# examples' builds across fresh clones: then they recompile only quiche,
# cc-algorithms and themselves (about 20 s).
# EMBED_BYTES (default 10000000) is the size of each transfer.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target="${EMBED_TARGET_DIR:-$root/target/embed}"
bytes="${EMBED_BYTES:-10000000}"
started=$(date +%s)

fail() {
    echo "test-embed: FAIL: $*" >&2
    exit 1
}
step() { echo "test-embed: $*" >&2; }

tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

. scripts/lib/ci.sh
./patches/bootstrap.sh

# 1. The documentation's quoted code against the files (and its links).
step "quoted code blocks and links of README.md and docs/ (scripts/check-docs.py)"
python3 scripts/check-docs.py || fail "the docs' quoted code differs from the files, or a link is broken (see above)"

# 2. The example plugin: its unit tests, and `cclab list`. The workspace's
# one release build (scripts/ws-build.sh, made if missing or stale) gives
# the binaries, the plugin's unit-test executable and the BoringSSL the
# examples link.
step "example plugin: unit tests, cclab list; workspace binaries"
eval "$(./scripts/ws-build.sh)" || fail "the workspace does not build"
plugin_tests=${test_cc_algorithms__lib:-}
for v in bin_cclab bin_quic_server bin_quic_client plugin_tests; do
    [ -n "${!v}" ] || fail "cargo test --workspace --no-run did not report $v"
done
tests_out=$(cd cc-algorithms && "$plugin_tests" -q fixed:: 2>&1) ||
    { echo "$tests_out" >&2; fail "the fixed plugin's unit tests failed"; }
tail -n 3 <<<"$tests_out"
grep -Eq 'test result: ok\. [1-9]' <<<"$tests_out" || fail "no unit tests of the fixed plugin ran"
listing=$("$bin_cclab" list) || fail "cclab list failed"
grep -Eq '^fixed +Plugin' <<<"$listing" || fail "cclab list does not show the fixed plugin"
grep -Eq '^ +window +packets +default 10 ' <<<"$listing" || fail "cclab list does not show fixed's window parameter"

# 3. The examples. Each is built once with clippy-driver as the compiler of
# its own crate (RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` does), so one
# build gives both the binary and clippy's verdict: `cargo clippy` works in
# check mode, whose build-script outputs are separate, and would run
# boring-sys's build script a second time for each example. Dependencies are
# built without debug info (the examples' own crates keep theirs).
clippy=$(command -v clippy-driver || true)
if [ -z "$clippy" ]; then
    under_ci && fail "clippy-driver not found (rustup component add clippy): under CI the examples' clippy check cannot be skipped"
    step "SKIPPED: the examples' clippy check: clippy-driver not found (rustup component add clippy)"
fi
# The workspace's BoringSSL (libssl.a and libcrypto.a in build/, boring-sys's
# patched headers in boringssl/include/), usable when an example locks the
# same boring-sys version and the workspace enables none of its features.
bssl=$bssl_out
bssl_why=
if [ -z "$bssl" ]; then
    bssl_why="cargo reported no boring-sys build script run"
elif [ -n "$bssl_features" ]; then
    bssl_why="the workspace's boring-sys has features $bssl_features"
elif ! [ -f "$bssl/build/libssl.a" ] || ! [ -f "$bssl/build/libcrypto.a" ] ||
    ! [ -f "$bssl/boringssl/include/openssl/x509v3.h" ]; then
    bssl_why="no BoringSSL build in $bssl"
fi
for ex in quiche-client tokio-quiche-server; do
    manifest="$root/examples/embed/$ex/Cargo.toml"
    ex_target="$target"
    step "building examples/embed/$ex (into $ex_target)"
    if ! CARGO_TARGET_DIR="$ex_target" cargo fetch --locked --offline --manifest-path "$manifest" 2>/dev/null; then
        CARGO_TARGET_DIR="$ex_target" cargo fetch --locked --manifest-path "$manifest" ||
            fail "$ex: cargo fetch --locked failed. If cc-algorithms gained a dependency, refresh the lock file: cargo update -p cc-algorithms --manifest-path $manifest"
    fi
    cargo fmt --manifest-path "$manifest" -- --check || fail "$ex is not rustfmt-clean"
    bssl_env=()
    ex_bssl=$(lock_version "$root/examples/embed/$ex/Cargo.lock" boring-sys)
    why=$bssl_why
    [ -n "$why" ] || [ "$ex_bssl" = "$bssl_version" ] || why="boring-sys $ex_bssl here, $bssl_version in the workspace"
    if [ -n "${BORING_BSSL_PATH:-}" ]; then
        : # the caller's own BoringSSL, which the workspace uses too
    elif [ -z "$why" ]; then
        bssl_env=(BORING_BSSL_PATH="$bssl/build" BORING_BSSL_INCLUDE_PATH="$bssl/boringssl/include")
    else
        step "$ex: building a BoringSSL of its own, which takes minutes ($why)"
    fi
    env "${bssl_env[@]}" CARGO_TARGET_DIR="$ex_target" RUSTC_WORKSPACE_WRAPPER="$clippy" \
        cargo rustc -q --locked --offline --config 'profile.dev.package."*".debug=false' \
        --manifest-path "$manifest" --bin "$ex" -- -D warnings ||
        fail "$ex does not build, or is not clippy-clean"
done
client_ex="$target/debug/quiche-client"
server_ex="$target/debug/tokio-quiche-server"

# Starts a server in the background (its stdout in $1); sets $port.
start_server() {
    local out=$1
    shift
    : >"$out"
    "$@" >"$out" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$out" | head -n 1 || true)
        [ -n "$port" ] && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    cat "$out" >&2
    fail "$1 did not start"
}

# The number of qlog records (lines) in file $1 that contain every one of
# the strings $2...
count_records() {
    local out
    out=$(grep -F -- "$2" "$1" || true)
    shift 2
    for s in "$@"; do out=$(grep -F -- "$s" <<<"$out" || true); done
    if [ -z "$out" ]; then echo 0; else wc -l <<<"$out"; fi
}

# 4a. quiche-client against quic-server.
step "(a) examples/embed/quiche-client against quic-server"
start_server "$tmp/a-server.out" "$bin_quic_server" --listen 127.0.0.1:0 --cc cubic --qlog-level off
url="https://127.0.0.1:$port"

"$client_ex" "$url/bytes/$bytes" --cc vegas:alpha=1,beta=3 --qlog-dir "$tmp/a-get" >"$tmp/a-get.out" ||
    { cat "$tmp/a-get.out" >&2; fail "(a) quiche-client's download failed"; }
cat "$tmp/a-get.out" >&2
grep -q "status 200, received $bytes bytes" "$tmp/a-get.out" || fail "(a) the download did not deliver $bytes bytes"
q=$(ls "$tmp"/a-get/client-*.sqlog)
grep -q '"title":"quiche-client cc=vegas:alpha=1,beta=3"' "$q" || fail "(a) the qlog does not name the spec"
n=$(count_records "$q" quic:recovery_metrics_updated '"vegas_diff"')
m=$(count_records "$q" quic:recovery_metrics_updated '"vegas_base_rtt_ms"')
[ "$n" -ge 1 ] && [ "$m" -ge 1 ] || fail "(a) no Vegas state (vegas_diff, vegas_base_rtt_ms) in $q"
step "(a) download: $bytes bytes; client qlog: $n metrics updates with vegas_diff, $m with vegas_base_rtt_ms"

"$client_ex" "$url/upload" --upload "$bytes" --cc fixed:window=20 --qlog-dir "$tmp/a-post" >"$tmp/a-post.out" ||
    { cat "$tmp/a-post.out" >&2; fail "(a) quiche-client's upload failed"; }
cat "$tmp/a-post.out" >&2
grep -q "status 200, uploaded $bytes bytes (the server counted $bytes)" "$tmp/a-post.out" ||
    fail "(a) the server did not count $bytes uploaded bytes"
q=$(ls "$tmp"/a-post/client-*.sqlog)
n=$(count_records "$q" quic:recovery_metrics_updated '"fixed_window_packets":20.0')
w=$(count_records "$q" quic:recovery_metrics_updated '"congestion_window":24000')
s=$(count_records "$q" quic:congestion_state_updated '"new":"fixed"')
[ "$n" -ge 1 ] && [ "$w" -ge 1 ] && [ "$s" -ge 1 ] ||
    fail "(a) fixed:window=20's state (fixed_window_packets 20, cwnd 24000 = 20 x 1200 B, state fixed) is not in $q"
step "(a) upload: $bytes bytes; client qlog: fixed_window_packets 20, cwnd 24000 B, state 'fixed'"

# 4b. quic-client against tokio-quiche-server.
step "(b) quic-client against examples/embed/tokio-quiche-server"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=localhost -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null ||
    fail "openssl could not make a test certificate"
start_server "$tmp/b-server.out" "$server_ex" --listen 127.0.0.1:0 --cert "$tmp/cert.pem" --key "$tmp/key.pem" \
    --cc vegas:alpha=1,beta=3 --qlog-dir "$tmp/b-qlog" --connections 1
server_pid=${pids[-1]}
"$bin_quic_client" "https://127.0.0.1:$port/bytes/$bytes" --json --qlog-level off >"$tmp/b-client.json" ||
    { cat "$tmp/b-client.json" >&2; fail "(b) quic-client's download from tokio-quiche-server failed"; }
jq -r '"test-embed: (b) quic-client: \(.bytes) bytes, status \(.status), \(.goodput_bps / 1e5 | round / 10) Mbit/s"' \
    "$tmp/b-client.json" >&2
jq -e --argjson want "$bytes" '.complete and .status == 200 and .bytes == $want' "$tmp/b-client.json" >/dev/null ||
    fail "(b) quic-client did not receive $bytes bytes"
# The server exits once the connection has ended (--connections 1).
for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
wait "$server_pid" || fail "(b) tokio-quiche-server exited with an error: $(cat "$tmp/b-server.out")"
q=$(ls "$tmp"/b-qlog/server-*.sqlog)
grep -q '"title":"tokio-quiche-server cc=vegas:alpha=1,beta=3"' "$q" || fail "(b) the qlog does not name the spec"
n=$(count_records "$q" quic:recovery_metrics_updated '"vegas_diff"')
m=$(count_records "$q" quic:recovery_metrics_updated '"vegas_base_rtt_ms"')
[ "$n" -ge 10 ] && [ "$m" -ge 1 ] || fail "(b) too little Vegas state in $q ($n updates with vegas_diff, $m with vegas_base_rtt_ms)"
step "(b) download: $bytes bytes; server qlog: $n metrics updates with vegas_diff, $m with vegas_base_rtt_ms"

echo "test-embed: all checks passed in $(($(date +%s) - started)) s"
