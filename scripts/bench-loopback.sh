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
    python3 - "$work" "$qlog_mb" <<'PY'
import json, sys
w = sys.argv[1]
r = json.load(open(f"{w}/c.json"))
su, ss, sm = open(f"{w}/s.time").read().split()[-3:]
cu, cs, cm = open(f"{w}/c.time").read().split()[-3:]
assert r["complete"], r
print(f"{r['goodput_bps']/1e9:.3f} {float(su)+float(ss):.2f} {int(sm)//1024} {float(cu)+float(cs):.2f} {int(cm)//1024} {r['duration_s']:.3f} {sys.argv[2]}")
PY
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
    python3 - "$work" "$t0" "$t1" "$bytes" <<'PY'
import sys
w, t0, t1, n = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
su, ss, sm = open(f"{w}/s.time").read().split()[-3:]
cu, cs, cm = open(f"{w}/c.time").read().split()[-3:]
d = t1 - t0
print(f"{n*8/d/1e9:.3f} {float(su)+float(ss):.2f} {int(sm)//1024} {float(cu)+float(cs):.2f} {int(cm)//1024} {d:.3f}")
PY
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
    python3 - "$work" <<'PY'
import statistics, sys
w = sys.argv[1]
rows = {m: [list(map(float, l.split())) for l in open(f"{w}/{m}") if l.strip()] for m in ("zstd", "plain")}
med = {m: [statistics.median(c) for c in zip(*r)] for m, r in rows.items()}
for m in ("zstd", "plain"):
    o = med[m]
    print(f"median {m:5}: {o[0]:.3f} Gbit/s, server {o[1]:.2f} CPU-s, client {o[3]:.2f} CPU-s, qlog {o[6]:.0f} MB")
pairs = list(zip(rows["zstd"], rows["plain"]))
g = statistics.median(z[0] / p[0] for z, p in pairs)
c = statistics.median((z[1] + z[3]) / (p[1] + p[3]) for z, p in pairs)
print(f"zstd/plain, median of pairs: goodput {g:.3f}, CPU seconds of both ends {c:.3f}")
PY
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
python3 - "$work" <<'PY'
import statistics, sys, os
w = sys.argv[1]
def med(f):
    rows = [list(map(float, l.split())) for l in open(f) if l.strip()]
    return [statistics.median(c) for c in zip(*rows)] if rows else None
o, t = med(f"{w}/ours"), med(f"{w}/theirs")
print(f"median ours:   {o[0]:.3f} Gbit/s, server {o[1]:.2f} CPU-s / {o[2]:.0f} MB RSS, client {o[3]:.2f} CPU-s / {o[4]:.0f} MB RSS")
if t:
    print(f"median quiche: {t[0]:.3f} Gbit/s, server {t[1]:.2f} CPU-s / {t[2]:.0f} MB RSS, client {t[3]:.2f} CPU-s / {t[4]:.0f} MB RSS")
    print(f"ratio ours/quiche goodput: {o[0]/t[0]:.2f}")
PY
