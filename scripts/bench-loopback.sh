#!/usr/bin/env bash
# Loopback throughput of quic-server + quic-client: an unshaped download of
# BYTES (default 1 GB), REPS times (default 3), with congestion control CC
# (default cubic). Prints goodput, CPU seconds and peak RSS of each endpoint
# per run, and the medians.
#
# QUICHE_APPS=DIR (a directory with quiche's own quiche-server and
# quiche-client binaries, built from a quiche checkout) measures them too,
# interleaved run by run with ours, and prints the ratio.
#
# QLOG=LEVEL (off, metrics, packets/core, base, extra; default off) has
# both ends write qlog (deleted after each run; its size is the last
# column). QLOG_COMPRESS=true|false picks zstd or plain files (default:
# zstd). QLOG_COMPARE=1 runs ours with zstd and with plain qlog in turn,
# run by run, and prints the goodput and CPU ratios (zstd / plain): the
# cost of compressing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp bench-loopback

bytes=${BYTES:-1000000000}
reps=${REPS:-3}
cc=${CC:-cubic}
work=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT

./patches/bootstrap.sh
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk   # the one release build every target uses
bin=target/release

wait_listening() { # file -> address
    for _ in $(seq 100); do
        if grep -q "listening on" "$1" 2>/dev/null; then
            awk '/listening on/ {print $3; exit}' "$1"; return 0
        fi
        sleep 0.05
    done
    echo "server did not start" >&2; return 1
}

qlog=${QLOG:-off}

# median FILE COLUMN: the median of a column of numbers.
median() {
    cut -d' ' -f"$2" "$1" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# cpu_mb TIMEFILE: "CPU-seconds MB" from /usr/bin/time -f "%U %S %M".
cpu_mb() {
    tail -n 1 "$1" | awk '{ printf "%.2f %d", $1 + $2, $3 / 1024 }'
}

ours() { # [zstd or plain qlog: true|false]
    local q=(--qlog-level "$qlog")
    if [ "$qlog" != off ]; then
        rm -rf "$work/qlog"; q+=(--qlog-dir "$work/qlog")
        if [ -n "${1:-${QLOG_COMPRESS:-}}" ]; then q+=(--qlog-compress "${1:-$QLOG_COMPRESS}"); fi
    fi
    /usr/bin/time -f "%U %S %M" -o "$work/s.time" "$bin/quic-server" --listen 127.0.0.1:0 --cc "$cc" --quiet "${q[@]}" >"$work/s.out" 2>"$work/s.err" &
    local spid=$!
    local addr; addr=$(wait_listening "$work/s.out")
    /usr/bin/time -f "%U %S %M" -o "$work/c.time" "$bin/quic-client" "https://$addr/bytes/$bytes" --json "${q[@]}" >"$work/c.json"
    pkill -INT -P "$spid" || true; wait "$spid" || true
    local qlog_mb=0
    if [ -d "$work/qlog" ]; then qlog_mb=$(du -sm "$work/qlog" | cut -f1); rm -rf "$work/qlog"; fi
    jq -e .complete "$work/c.json" >/dev/null || { echo "quic-client: incomplete: $(cat "$work/c.json")" >&2; return 1; }
    printf '%.3f %s %s %.3f %s\n' "$(jq .goodput_bps/1e9 "$work/c.json")" "$(cpu_mb "$work/s.time")" \
        "$(cpu_mb "$work/c.time")" "$(jq .duration_s "$work/c.json")" "$qlog_mb"
}

theirs() {
    local root="$work/www"
    mkdir -p "$root"
    [ -f "$root/blob" ] || head -c "$bytes" /dev/zero >"$root/blob"
    local port=$((20000 + RANDOM % 20000))
    /usr/bin/time -f "%U %S %M" -o "$work/s.time" "$QUICHE_APPS/quiche-server" --listen "127.0.0.1:$port" --root "$root" \
        --cert "$QUICHE_CERT" --key "$QUICHE_KEY" --cc-algorithm "$cc" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.3
    local t0; t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S %M" -o "$work/c.time" "$QUICHE_APPS/quiche-client" --no-verify \
        "https://127.0.0.1:$port/blob" >"$work/body" 2>/dev/null
    local t1; t1=$(date +%s.%N)
    pkill -TERM -P "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
    local got; got=$(stat -c %s "$work/body")
    [ "$got" -eq "$bytes" ] || { echo "quiche-client got $got of $bytes bytes" >&2; return 1; }
    local d; d=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    printf '%.3f %s %s %.3f\n' "$(awk -v n="$bytes" -v d="$d" 'BEGIN { print n * 8 / d / 1e9 }')" \
        "$(cpu_mb "$work/s.time")" "$(cpu_mb "$work/c.time")" "$d"
}

if [ -n "${QLOG_COMPARE:-}" ]; then
    [ "$qlog" != off ] || qlog=core
    echo "loopback download of $bytes bytes, cc=$cc, qlog $qlog, zstd and plain in turn, $reps runs each"
    echo "qlog      run  Gbit/s  server-cpu-s  server-MB  client-cpu-s  client-MB  seconds  qlog-MB"
    : >"$work/zstd"; : >"$work/plain"
    for i in $(seq "$reps"); do
        for mode in zstd plain; do
            flag=true; [ "$mode" = plain ] && flag=false
            line=$(ours "$flag"); printf '%-9s %-4s %s\n' "$mode" "$i" "$line"; echo "$line" >>"$work/$mode"
        done
    done
    for m in zstd plain; do
        printf 'median %-5s: %.3f Gbit/s, server %.2f CPU-s, client %.2f CPU-s, qlog %.0f MB\n' "$m" \
            "$(median "$work/$m" 1)" "$(median "$work/$m" 2)" "$(median "$work/$m" 4)" "$(median "$work/$m" 7)"
    done
    # Per pair (a zstd run and the plain run after it): goodput and both
    # ends' CPU seconds, zstd over plain.
    paste -d' ' "$work/zstd" "$work/plain" | awk '{print $1 / $8, ($2 + $4) / ($9 + $11)}' >"$work/pairs"
    printf 'zstd/plain, median of pairs: goodput %.3f, CPU seconds of both ends %.3f\n' \
        "$(median "$work/pairs" 1)" "$(median "$work/pairs" 2)"
    exit 0
fi

echo "loopback download of $bytes bytes, cc=$cc, qlog $qlog, $reps runs each"
echo "impl      run  Gbit/s  server-cpu-s  server-MB  client-cpu-s  client-MB  seconds  qlog-MB"
: >"$work/ours"; : >"$work/theirs"
for i in $(seq "$reps"); do
    line=$(ours); echo "ours      $i    $line"; echo "$line" >>"$work/ours"
    if [ -n "${QUICHE_APPS:-}" ]; then
        line=$(theirs); echo "quiche    $i    $line"; echo "$line" >>"$work/theirs"
    fi
done
printf 'median ours:   %.3f Gbit/s, server %.2f CPU-s / %.0f MB RSS, client %.2f CPU-s / %.0f MB RSS\n' \
    "$(median "$work/ours" 1)" "$(median "$work/ours" 2)" "$(median "$work/ours" 3)" "$(median "$work/ours" 4)" "$(median "$work/ours" 5)"
if [ -s "$work/theirs" ]; then
    printf 'median quiche: %.3f Gbit/s, server %.2f CPU-s / %.0f MB RSS, client %.2f CPU-s / %.0f MB RSS\n' \
        "$(median "$work/theirs" 1)" "$(median "$work/theirs" 2)" "$(median "$work/theirs" 3)" "$(median "$work/theirs" 4)" "$(median "$work/theirs" 5)"
    printf 'ratio ours/quiche goodput: %.2f\n' "$(awk -v a="$(median "$work/ours" 1)" -v b="$(median "$work/theirs" 1)" 'BEGIN { print a / b }')"
fi
