#!/usr/bin/env bash
# System calls per data packet, counted over the whole endpoint processes
# (every thread, from exec to exit) with the kernel's own counters
# (`perf stat -e raw_syscalls:sys_enter`, which does not slow the process
# the way strace's stops would), for QUIC through quic-server/quic-client
# and for Linux TCP through tcp-bulk, on the emulator (20 and 100 Mbit/s,
# 40 ms, one BDP of drop-tail, DURATION each, one repetition).
#
# Data packets: the sender's qlog (`quic:packet_sent` carrying stream data,
# qlog-analysis's packets.data_packets) for QUIC, TCP_INFO's data_segs_out
# (the last tcp-bulk record) for TCP. Goals (issue 34): QUIC at most 3 per
# data packet at 20 Mbit/s and at most 2 at 100 Mbit/s.
#
# Env: DURATION (10s), CASES ("newreno:20mbit cubic:20mbit bbr2:20mbit
# newreno:100mbit cubic:100mbit bbr2:100mbit tcp:cubic:20mbit
# tcp:cubic:100mbit"), ACK (the QUIC flows' ack_policy; immediate, the
# default), JSON (a file for the table as JSON), ENDPOINTS (a directory
# with another build's endpoint binaries to count), OUT (a temporary
# directory, removed unless set), QUIC_IO (the endpoints' socket path:
# auto, the default, takes io_uring where the kernel has it; epoll counts
# the epoll path). Needs root for the TCP cases (the emulator's IP mode);
# installs Debian's linux-perf when perf is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/stamp.sh
stamp syscalls
DURATION=${DURATION:-10s}
CASES=${CASES:-"newreno:20mbit cubic:20mbit bbr2:20mbit newreno:100mbit cubic:100mbit bbr2:100mbit tcp:cubic:20mbit tcp:cubic:100mbit"}
ACK=${ACK:-immediate}

if ! perf stat -e raw_syscalls:sys_enter -x, -o /dev/null true 2>/dev/null; then
    echo "syscalls: installing linux-perf (perf stat counts the system calls)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null ||
        { echo "syscalls: error: perf is missing and linux-perf could not be installed" >&2; exit 1; }
    perf stat -e raw_syscalls:sys_enter -x, -o /dev/null true ||
        { echo "syscalls: error: perf cannot count raw_syscalls:sys_enter here (tracefs, perf_event_paranoid)" >&2; exit 1; }
fi

cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk -p qlog-analysis
bin=$PWD/target/release
# ENDPOINTS=DIR counts another build's quic-server, quic-client and
# tcp-bulk (an earlier commit's, say) through this build's cclab.
ends=${ENDPOINTS:-$bin}
if [ -z "${OUT:-}" ]; then
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"

# Wrappers in place of the endpoint binaries (CCLAB_BIN_DIR): each asks
# the watcher below for a counter on its own pid (a file want.PID), waits
# until it is open (ready.PID), then execs the real binary, so the counts
# cover the endpoint from its start to its exit, every thread included,
# and cclab's signals reach it as ever. The counters (`perf stat -p`) run
# from this script, in the host's network namespace and a session of their
# own: cclab clears a namespace by killing what runs in it and stops some
# endpoints by signalling their process group, and neither may stop a
# counter before it has written. A count that is missing fails the run
# rather than reading as zero.
events="raw_syscalls:sys_enter"
for s in io_uring_enter sendmsg sendmmsg sendto recvmsg recvmmsg recvfrom epoll_wait epoll_pwait timerfd_settime read write futex getsockopt ppoll; do
    events="$events,syscalls:sys_enter_$s"
done
wrap=$OUT/bin
mkdir -p "$wrap"
for b in quic-server quic-client tcp-bulk; do
    cat >"$wrap/$b" <<EOF
#!/usr/bin/env bash
: >"\$SYSCALLS_DIR/want.\$\$"
for _ in \$(seq 500); do
    [ -e "\$SYSCALLS_DIR/ready.\$\$" ] && break
    sleep 0.01
done
exec "$ends/$b" "\$@"
EOF
    chmod +x "$wrap/$b"
done
# watch DIR: attaches a counter to every pid that asks, until DIR/stop.
watch() {
    local dir=$1 w pid p
    while [ ! -e "$dir/stop" ]; do
        for w in "$dir"/want.*; do
            [ -e "$w" ] || continue
            pid=${w##*.}
            rm -f "$w"
            setsid perf stat -x, -o "$dir/$pid.csv" -e "$events" -p "$pid" 2>/dev/null &
            p=$!
            for _ in $(seq 500); do
                ls -l /proc/$p/fd 2>/dev/null | grep -q perf_event && break
                sleep 0.01
            done
            : >"$dir/ready.$pid"
        done
        sleep 0.01
    done
}

for c in $CASES; do
    case $c in
    tcp:*) cc=${c%:*} rate=${c##*:} ;;
    *) cc=${c%%:*} rate=${c#*:} ;;
    esac
    dir=$OUT/${cc//:/-}-$rate
    [ -f "$dir/summary.json" ] && continue
    rm -rf "$dir" "$dir.counts"
    mkdir -p "$dir.counts"
    echo "syscalls: $cc at $rate, $DURATION" >&2
    scen=$OUT/${cc//:/-}-$rate.toml
    if [[ $cc == tcp:* ]]; then
        flow="cc = \"$cc\""
    else
        flow="cc = \"$cc\"
ack_policy = \"$ACK\""
    fi
    cat >"$scen" <<EOF
name = "syscalls-${cc//:/-}-$rate"
duration = "$DURATION"
[link]
rate = "$rate"
rtt = "40ms"
queue = "1bdp"
[[flows]]
$flow
EOF
    watch "$dir.counts" &
    watcher=$!
    SYSCALLS_DIR=$dir.counts CCLAB_BIN_DIR=$wrap "$bin/cclab" run "$scen" --link emu \
        --repetitions 1 --quiet --out "$dir" >/dev/null
    : >"$dir.counts/stop"
    wait "$watcher"
    # perf writes its counts when the endpoint exits; wait for the last.
    for _ in $(seq 100); do
        pgrep -f "perf stat -x, -o $dir.counts" >/dev/null || break
        sleep 0.1
    done
done

python3 - "$OUT" "$bin" "${JSON:-}" $CASES <<'PY'
import glob, json, os, subprocess, sys
out, bin_dir, json_path, cases = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows = []
for c in cases:
    if c.startswith("tcp:"):
        cc, rate = c.rsplit(":", 1)
    else:
        cc, rate = c.split(":", 1)
    d = os.path.join(out, f"{cc.replace(':', '-')}-{rate}")
    counts, procs = {}, 0
    for f in glob.glob(d + ".counts/*.csv"):
        procs += 1
        if os.path.getsize(f) == 0:
            sys.exit(f"syscalls: error: {f} is empty: perf stopped before writing its counts")
        for line in open(f):
            parts = line.strip().split(",")
            if len(parts) < 3 or not parts[0].strip().isdigit():
                continue
            name = "raw_syscalls" if parts[2].startswith("raw_syscalls") else parts[2].split(":")[-1].replace("sys_enter_", "")
            counts[name] = counts.get(name, 0) + int(parts[0])
    s = json.load(open(os.path.join(d, "summary.json")))
    flow = s["repetitions"][0]["flows"][0]
    if cc.startswith("tcp:"):
        path = next(os.path.join(d, v) for k, v in flow["tcp_records"].items() if "send" in k)
        last = {}
        for line in open(path):
            if line.strip():
                rec = json.loads(line)
                last = rec if "data_segs_out" in rec else last
        packets = int(last.get("data_segs_out", 0))
    else:
        q = os.path.join(d, flow["qlog"]["sender"])
        a = json.loads(subprocess.run([os.path.join(bin_dir, "qlog-analysis"), "summary", "--json", q],
                                      check=True, capture_output=True, text=True).stdout)
        packets = a["files"][0]["connections"][0]["packets"]["data_packets"]
    total = counts.get("raw_syscalls", 0)
    rows.append({
        "cc": cc, "rate": rate, "processes": procs, "data_packets": packets,
        "syscalls": total, "per_packet": total / packets if packets else None,
        "by_call": {k: v / packets for k, v in sorted(counts.items()) if k != "raw_syscalls" and v},
        "utilization": s["bottleneck"]["utilization"],
    })
hdr = f"{'flow':<12} {'rate':>8} {'data pkts':>10} {'syscalls':>10} {'per pkt':>8}  {'util %':>6}  per packet by call"
print(hdr)
fails = []
for r in rows:
    by = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["by_call"].items(), key=lambda kv: -kv[1]) if v >= 0.01)
    print(f"{r['cc']:<12} {r['rate']:>8} {r['data_packets']:>10} {r['syscalls']:>10} {r['per_packet'] or 0:>8.2f}  {r['utilization']*100:>6.1f}  {by}")
    if not r["cc"].startswith("tcp:"):
        goal = 3 if r["rate"] == "20mbit" else 2 if r["rate"] == "100mbit" else None
        if goal is not None and (r["per_packet"] is None or r["per_packet"] > goal):
            fails.append(f"{r['cc']} at {r['rate']}: {r['per_packet']:.2f} > {goal}")
print("goals (QUIC, issue 34): <= 3 per data packet at 20 Mbit/s, <= 2 at 100 Mbit/s: " +
      ("met" if not fails else "missed: " + "; ".join(fails)))
if json_path:
    tmp = json_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1)
    os.replace(tmp, json_path)
PY
