#!/usr/bin/env bash
# The workspace's one build: `cargo test --workspace --release --no-run`,
# which makes the test executables and the binaries (cclab, quic-server,
# quic-client, qlog-analysis) in target/release from one feature set, so
# every stage of `make test` (the tests, the embedding examples' BoringSSL,
# the quiche tests, the reproduction, the report, Slurm, netem, the demo)
# uses the same build and nothing compiles twice. A no-op when up to date.
#
# Prints shell assignments for `eval` on standard output:
#   bin_<name>          each binary (dashes as underscores)
#   test_<pkg>__<name>  each test executable (integration tests by name;
#                       a crate's unit tests as <pkg>__lib or __bin_<name>)
#   bssl_out bssl_version bssl_features   boring-sys's build (its BoringSSL)
# Compiler messages go to standard error.
set -euo pipefail
cd "$(dirname "$0")/.."
./patches/bootstrap.sh >&2
json=$(mktemp)
trap 'rm -f "$json"' EXIT
cargo test --workspace --release --no-run --message-format=json-render-diagnostics >"$json"
jq -rn -f scripts/lib/cargo-artifacts.jq "$json"
