#!/usr/bin/env bash
# Interop: quiche's own example HTTP/3 client (examples/http3-client.rs of
# the quiche 0.30.0 crate, unpatched, run with its default options: just a
# URL) fetches BYTES (default 10 MB) from quic-server over loopback, REPS
# times (default 3). Checks the body's size and content, prints bytes, time
# and goodput per run; then once from a DCTCP server, whose ECN validation
# must fail against this client without ECN. Ends with
# "quiche-example-client: N passed, N failed"; exits 1 if any run failed.
#
# The example is built from the pristine crate in cargo's registry cache
# (brought there through patches/fetch, as patches/bootstrap.sh does), in
# target/quiche-example with its own lock file and target directory.
#
# QUICHE_CLIENT=PATH (quiche's quiche-client from its apps/, built from a
# quiche checkout) runs it too, with --no-verify only (quic-server's
# certificate is self-signed): it starts with the reserved version
# 0xbabababa by default, so this checks Version Negotiation as well.
set -euo pipefail
cd "$(dirname "$0")/.."

bytes=${BYTES:-10000000}
reps=${REPS:-3}
ex=target/quiche-example
manifest=patches/fetch/Cargo.toml

./patches/bootstrap.sh
cargo fetch --locked --manifest-path "$manifest" >&2
src_manifest=$(cargo metadata --locked --format-version 1 --manifest-path "$manifest" |
    grep -o '"manifest_path":"[^"]*/quiche-0\.30\.0/Cargo\.toml"' | head -n 1 |
    sed 's/^"manifest_path":"//; s/"$//')
if [ -z "$src_manifest" ] || [ ! -f "$src_manifest" ]; then
    echo "error: the pristine quiche 0.30.0 crate is not in cargo's registry cache" >&2
    exit 1
fi
if [ ! -f "$ex/quiche/Cargo.toml" ]; then
    rm -rf "$ex/quiche"
    mkdir -p "$ex"
    cp -R "$(dirname "$src_manifest")" "$ex/quiche"
    chmod -R u+w "$ex/quiche"
    # Its own workspace: the copy sits inside ours, whose [patch] must not
    # apply to it.
    printf '\n[workspace]\n' >>"$ex/quiche/Cargo.toml"
fi
cargo build --release -q --example http3-client \
    --manifest-path "$ex/quiche/Cargo.toml" --target-dir "$ex/target"
client="$ex/target/release/examples/http3-client"
cargo build --release -q -p quic-server

work=$(mktemp -d)
spid=
cleanup() {
    if [ -n "$spid" ]; then kill -INT "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# start_server [ARGS...]: quic-server on a free loopback port, with ARGS;
# sets spid and addr.
start_server() {
    target/release/quic-server --listen 127.0.0.1:0 "$@" >"$work/s.out" 2>"$work/s.err" &
    spid=$!
    addr=
    for _ in $(seq 200); do
        addr=$(awk '/listening on/ {print $3; exit}' "$work/s.out" 2>/dev/null || true)
        [ -n "$addr" ] && break
        sleep 0.05
    done
    if [ -z "$addr" ]; then
        echo "error: quic-server $* did not start: $(cat "$work/s.err")" >&2
        exit 1
    fi
}
start_server --qlog-level off

# What the server sends: "cclab-bulk-data-" over and over.
expect_head=$(head -c 64 < <(yes -- cclab-bulk-data- | tr -d '\n'))
passed=0
failed=0
# fetch LABEL CLIENT [ARGS...]: REPS downloads, each checked.
fetch() {
    local label=$1
    shift
    for rep in $(seq "$reps"); do
        t0=$(date +%s.%N)
        if timeout 120 "$@" "https://$addr/bytes/$bytes" >"$work/body" 2>"$work/c.err"; then ok=1; else ok=0; fi
        t1=$(date +%s.%N)
        got=$(stat -c %s "$work/body")
        head=$(head -c 64 "$work/body")
        secs=$(echo "$t1 - $t0" | bc -l)
        if [ "$ok" = 1 ] && [ "$got" = "$bytes" ] && [ "$head" = "$expect_head" ]; then
            passed=$((passed + 1))
            printf '%s run %d: %d bytes in %.3f s (%.1f Mbit/s), body checked\n' \
                "$label" "$rep" "$got" "$secs" "$(echo "$got * 8 / $secs / 1000000" | bc -l)"
        else
            failed=$((failed + 1))
            printf '%s run %d: FAILED: exit ok=%s, %s of %s bytes in %.3f s; client stderr: %s\n' \
                "$label" "$rep" "$ok" "$got" "$bytes" "$secs" "$(tail -c 500 "$work/c.err")"
        fi
    done
}
fetch http3-client "$client"
if [ -n "${QUICHE_CLIENT:-}" ]; then
    fetch quiche-client "$QUICHE_CLIENT" --no-verify
fi
kill -INT "$spid"
wait "$spid" || true
spid=
grep -h "stopped:" "$work/s.err" || true
if [ -n "${QUICHE_CLIENT:-}" ]; then
    # One Version Negotiation (or more) per quiche-client connection.
    vn=$(sed -n 's/.* \([0-9]*\) version negotiations.*/\1/p' "$work/s.err")
    if [ "${vn:-0}" -ge "$reps" ]; then
        passed=$((passed + 1))
        echo "version negotiation: $vn packets for $reps quiche-client connections"
    else
        failed=$((failed + 1))
        echo "version negotiation: FAILED: ${vn:-no} packets for $reps quiche-client connections"
    fi
fi

# ECN against a peer without it: a DCTCP server sends ECT(0) while it
# tests the path; the unpatched client reports no ECN counts, so the
# server's validation must fail (RFC 9000, Section 13.4.2) and the
# transfer still complete.
mkdir -p "$work/q"
start_server --cc dctcp --qlog-dir "$work/q" --qlog-level extra --qlog-compress false
reps_all=$reps
reps=1
fetch "http3-client, DCTCP server" "$client"
reps=$reps_all
kill -INT "$spid"
wait "$spid" || true
spid=
states=$(cat "$work"/q/server-* 2>/dev/null | grep -o '"name":"quic:ecn_state_updated","data":{[^}]*}' | sed 's/.*"new":"\([a-z]*\)".*/\1/' | tr '\n' ' ')
if echo "$states" | grep -q "failed"; then
    passed=$((passed + 1))
    echo "ECN: the DCTCP server's validation against a client without ECN: ${states}"
else
    failed=$((failed + 1))
    echo "ECN: FAILED: the DCTCP server's validation states were: ${states:-none}"
fi
echo "quiche-example-client: $passed passed, $failed failed"
[ "$failed" = 0 ]
