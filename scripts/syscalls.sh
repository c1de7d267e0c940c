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

python3 scripts/syscalls-table.py "$OUT" "$bin" "${JSON:-}" $CASES
