#!/usr/bin/env bash
# Our plugins against Linux's own implementations of the same algorithms
# (docs/kernel-vs-plugin.md). For each pair, newreno / tcp:reno,
# vegas / tcp:vegas, westwood+ / tcp:westwood, mimd / tcp:scalable, quiche's
# cubic / tcp:cubic and, for information, bbr2 / tcp:bbr: one flow alone on
# the same kernel netem link (RATE, 40 ms RTT, 1-BDP drop-tail; newreno/reno
# and vegas/vegas also on RED, non-gentle with weight 2^-9 as Linux RED can
# be set), REPS repetitions of DURATION. On a host whose kernel has no
# netem, netem runs through the guest router (`cclab run --link netem`:
# the qdiscs in a user-mode Linux guest, the QUIC endpoints and Linux's
# reno, cubic and bbr on this host, the Linux algorithms only the guest's
# kernel has, vegas, westwood and scalable, at both ends in the guest);
# CCLAB_NETEM_ROUTER=vm runs the whole netem part in ONE `cclab vm` guest
# instead (the old layout: every endpoint in the guest).
#
# Beside them, as references without the guest's one slow CPU:
#  - each plugin case on `sim` (virtual time, the same link elements;
#    endpoint CPU time counts as zero);
#  - with EMU=1 (the default) the pairs this host's kernel has (reno, cubic,
#    bbr) through the userspace emulator's IP mode (`--link emu --emu-mode
#    ip`, root): plugin and Linux through one emulated link, native CPU.
# With CONTROLS=1 (the default), controls that each change one mechanism
# of the QUIC side (newreno, vegas, westwood+ on drop-tail), on netem in the
# guest and on sim: `ack_policy = "rfc9000"` (an ACK every second packet,
# as Linux's delayed ACKs), `pacing = "off"` (Linux paces none of these
# algorithms without the fq qdisc), `mtu = 1472` (1500-byte IP packets, as
# TCP's 1448-byte segments with timestamps), all three together, and for
# vegas `linux_slow_start=1` (tcp_vegas.c's slow start), `beta=4.99`
# (tcp_vegas.c truncates its diff to an integer, so it holds while
# 2 <= diff < 5) and both with the three transport controls ("linux").
#
# In the old layout the QUIC endpoints, not the link, limited a paced
# QUIC flow at 10 Mbit/s (every system call trapped into the one-CPU
# guest kernel); the table gives every run's host and guest CPU use, and
# sim and emu show the plugins without the guest (docs/kernel-vs-plugin.md).
#
# Prints the tables (utilization, mean queueing delay, loss, mean cwnd in
# packets, the goals: Vegas's queueing delay within 1 ms of tcp_vegas's,
# NewReno's and Westwood+'s utilization within 5 points of Linux's) and
# writes the cwnd and queue trajectories of the first repetition, plugin
# and Linux side by side per pair, as SVG into FIGS.
#
# Env: REPS (3), DURATION (30s), RATE (10mbit), OUT (target/kernel-vs-plugin;
# resumable: finished runs are kept), FIGS ($OUT/figures), EMU (1),
# CONTROLS (1; 0 skips them), CCLAB_VM_KIND (uml).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
DURATION=${DURATION:-30s}
RATE=${RATE:-10mbit}
OUT=${OUT:-target/kernel-vs-plugin}
FIGS=${FIGS:-$OUT/figures}
EMU=${EMU:-1}
CONTROLS=${CONTROLS:-1}
export REPS DURATION RATE OUT FIGS EMU CONTROLS
KIND=${CCLAB_VM_KIND:-uml}
RED="red:gentle=false,wq=0.001953125"
cclab=./target/release/cclab
# plugin:linux pairs; the RED case runs the first two.
PAIRS=("newreno:reno" "vegas:vegas" "westwood+:westwood" "mimd:scalable" "cubic:cubic" "bbr2:bbr")
RED_PAIRS=("newreno:reno" "vegas:vegas")
# Pairs whose Linux algorithm this host's kernel has (for EMU=1).
HOST_PAIRS=("newreno:reno" "cubic:cubic" "bbr2:bbr")
CONTROL_CCS=("newreno" "vegas" "westwood+")
CONTROL_KINDS=("ack" "nopace" "mtu" "all")

# A case is NAME|CC|AQM|CONTROL; its result directory is $OUT/BACKEND/NAME.
slug() { local s=${1//:/-}; s=${s//+/plus}; s=${s//=/}; echo "${s//,/-}"; }
case_of() { # CC AQM [CONTROL]
    local n
    n="$(slug "$1")-$2${3:+-$3}"
    echo "$n|$1|$2|${3:-}"
}
main_cases() {
    local p
    for p in "${PAIRS[@]}"; do
        case_of "${p%%:*}" droptail
        case_of "tcp:${p#*:}" droptail
    done
    for p in "${RED_PAIRS[@]}"; do
        case_of "${p%%:*}" red
        case_of "tcp:${p#*:}" red
    done
}
control_cases() {
    [ "$CONTROLS" = 1 ] || return 0
    local cc k
    for cc in "${CONTROL_CCS[@]}"; do
        for k in "${CONTROL_KINDS[@]}"; do case_of "$cc" droptail "$k"; done
    done
    case_of vegas droptail linuxss
    case_of vegas droptail band
    case_of vegas droptail linux
}
plugin_cases() { main_cases | grep -v '|tcp:'; control_cases; }
emu_cases() {
    local p
    for p in "${HOST_PAIRS[@]}"; do
        case_of "${p%%:*}" droptail
        case_of "tcp:${p#*:}" droptail
    done
    case_of newreno red
    case_of tcp:reno red
}

# The scenario file of a case (QUIC's knobs only on QUIC flows).
scenario() { # NAME CC AQM CONTROL FILE
    local cc=$2 aqm=$3 ctl=$4
    [ "$aqm" = red ] && aqm=$RED
    case $ctl in
        linuxss) cc="$cc:linux_slow_start=1" ;;
        band) cc="$cc:beta=4.99" ;;
        linux) cc="$cc:linux_slow_start=1,beta=4.99" ;;
    esac
    {
        echo "# kernel-vs-plugin case $1 (written by scripts/kernel-vs-plugin.sh)"
        echo "name = \"kvp-$1\""
        echo "duration = \"$DURATION\""
        echo "repetitions = $REPS"
        echo "[link]"
        echo "rate = \"$RATE\""
        echo "rtt = \"40ms\""
        echo "queue = \"1bdp\""
        echo "aqm = \"$aqm\""
        echo "[[flows]]"
        echo "cc = \"$cc\""
        case $ctl in
            ack) echo 'ack_policy = "rfc9000"' ;;
            nopace) echo 'pacing = "off"' ;;
            mtu) echo 'mtu = 1472' ;;
            all | linux) printf '%s\n' 'ack_policy = "rfc9000"' 'pacing = "off"' 'mtu = 1472' ;;
        esac
    } >"$5"
}

# Runs one case on BACKEND unless it is done; on netem also notes how busy
# the (guest's) CPUs were over the run, from /proc/stat.
run_case() { # BACKEND NAME|CC|AQM|CONTROL
    local backend=$1 name cc aqm ctl dir f a b
    IFS='|' read -r name cc aqm ctl <<<"$2"
    dir="$OUT/$backend/$name"
    [ -f "$dir/summary.json" ] && return 0
    rm -rf "$dir" "$dir.partial"
    mkdir -p "$OUT/$backend" "$OUT/scenarios"
    f="$OUT/scenarios/$name.toml"
    scenario "$name" "$cc" "$aqm" "$ctl" "$f"
    local link=(--link "$backend")
    [ "$backend" = emu ] && link+=(--emu-mode ip)
    echo "kernel-vs-plugin: $backend $name" >&2
    a=$(awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
    $cclab run "$f" "${link[@]}" --qlog-level metrics --no-packet-log --quiet --out "$dir" >/dev/null </dev/null
    b=$(awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
    echo "$a $b" | awk '{printf "{\"busy\": %.4f}\n", 1 - ($3-$1)/($4-$2)}' >"$dir/cpu.json"
}

if [ "${1:-}" = --part ]; then
    [ "$2" = netem ] || { echo "kernel-vs-plugin: unknown part $2" >&2; exit 2; }
    SECONDS=0
    cases=$(main_cases)
    while read -r c; do run_case netem "$c"; done <<<"$cases"
    main_s=$SECONDS
    if [ "$CONTROLS" = 1 ]; then
        cases=$(control_cases)
        while read -r c; do run_case netem "$c"; done <<<"$cases"
    fi
    echo "kernel-vs-plugin: netem runs ${main_s} s, controls $((SECONDS - main_s)) s" >&2
    exit 0
fi

. scripts/lib/stamp.sh
stamp kernel-vs-plugin
cargo build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk -p qlog-analysis
mkdir -p "$OUT"
SECONDS=0
if $cclab link probe --json 2>/dev/null | grep -q '"netem": true'; then
    echo "kernel-vs-plugin: netem on this host" >&2
    scripts/kernel-vs-plugin.sh --part netem
elif [ "${CCLAB_NETEM_ROUTER:-}" != vm ]; then
    echo "kernel-vs-plugin: netem through the guest router (the endpoints on this host, or in the guest for vegas, westwood, scalable)" >&2
    scripts/kernel-vs-plugin.sh --part netem
else
    echo "kernel-vs-plugin: netem in one $KIND guest (cclab vm)" >&2
    $cclab vm --kind "$KIND" --quiet --rw "$(realpath "$OUT")" -- scripts/kernel-vs-plugin.sh --part netem
fi
netem_s=$SECONDS
echo "kernel-vs-plugin: load average after the netem part $(cut -d" " -f1-3 /proc/loadavg)" >&2
cases=$(plugin_cases)
while read -r c; do run_case sim "$c"; done <<<"$cases"
sim_s=$((SECONDS - netem_s))
emu_s=0
if [ "$EMU" = 1 ]; then
    cases=$(emu_cases)
    while read -r c; do run_case emu "$c"; done <<<"$cases"
    emu_s=$((SECONDS - netem_s - sim_s))
fi
echo "kernel-vs-plugin: netem ${netem_s} s (guest boot included), sim ${sim_s} s, emu ${emu_s} s, total ${SECONDS} s" >&2
mkdir -p "$FIGS"
python3 - "$OUT" "$FIGS" "$RATE" "$DURATION" "$REPS" "${PAIRS[*]}" "${RED_PAIRS[*]}" "${HOST_PAIRS[*]}" \
    "$(main_cases | tr '\n' ' ')" "$(control_cases | tr '\n' ' ')" "$(emu_cases | tr '\n' ' ')" <<'PY'
import csv, glob, json, os, re, statistics, subprocess, sys

out, figs, rate_s, duration_s, reps = sys.argv[1:6]
pairs = [p.split(":") for p in sys.argv[6].split()]
red_pairs = [p.split(":") for p in sys.argv[7].split()]
host_pairs = [p.split(":") for p in sys.argv[8].split()]
main = {c.split("|")[0]: c.split("|") for c in sys.argv[9].split()}
controls = [c.split("|") for c in sys.argv[10].split()]
emu_cases = {c.split("|")[0]: c.split("|") for c in sys.argv[11].split()}
m = re.fullmatch(r"([0-9.]+)(k|m|g)?bit", rate_s)
RATE = float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9, None: 1}[m.group(2)]
DUR = float(duration_s.rstrip("s"))
QLA = "./target/release/qlog-analysis"


def slug(cc):
    return cc.replace(":", "-").replace("+", "plus").replace("=", "").replace(",", "-")


def name(cc, aqm, ctl=""):
    return f"{slug(cc)}-{aqm}" + (f"-{ctl}" if ctl else "")


def mtu_of(d):
    m = re.search(r"^mtu = (\d+)", open(os.path.join(d, "scenario.toml")).read(), re.M)
    return int(m.group(1)) if m else 1350


def lines(path):
    if path.endswith(".zst"):
        return subprocess.run(["zstd", "-dcq", path], check=True, capture_output=True, text=True).stdout.splitlines()
    return open(path).read().splitlines()


def tcp_samples(d, rep):
    """(t, cwnd in segments) of a TCP sender's TCP_INFO samples."""
    s = json.load(open(os.path.join(d, "summary.json")))
    f = s["repetitions"][rep - 1]["flows"][0]
    out = []
    for l in lines(os.path.join(d, f["tcp_records"]["sender"])):
        r = json.loads(l)
        if r.get("type") == "sample":
            out.append((r["t"], r["cwnd"]))
    return out


def quic_cwnd(d, rep):
    """(t, cwnd in packets) from the QUIC sender's qlog."""
    s = json.load(open(os.path.join(d, "summary.json")))
    f = s["repetitions"][rep - 1]["flows"][0]
    q = os.path.join(d, f["qlog"]["sender"])
    txt = subprocess.run([QLA, "series", q], check=True, capture_output=True, text=True).stdout
    mtu = mtu_of(d)
    rows = list(csv.DictReader(txt.splitlines()))
    s = [(float(r["t_s"]), float(r["value"]) / mtu) for r in rows if r["series"] == "cwnd"]
    # the window is logged when it changes: hold the last value to the
    # sender's last logged event
    end = max((float(r["t_s"]) for r in rows if r["t_s"]), default=0)
    if s and end > s[-1][0]:
        s.append((end, s[-1][1]))
    return s


def cwnd_series(d, rep=1):
    if is_tcp(d):
        return tcp_samples(d, rep)
    return quic_cwnd(d, rep)


def is_tcp(d):
    return json.load(open(os.path.join(d, "summary.json")))["flows"][0]["cc"].startswith("tcp:")


def samples(d, rep):
    p = os.path.join(d, f"rep-{rep}", "bottleneck-samples.jsonl")
    return [json.loads(l) for l in lines(p) if l.strip()] if os.path.exists(p) else []


def queue_series(d, rep=1):
    return [(x["t_s"], x["queue_bytes"] * 8 / RATE * 1e3) for x in samples(d, rep) if x["dir"] == "down"]


def same_way_qd(d, rep, after=0.0):
    """Backlog drained at the link rate, weighted by packets sent (the same
    for every backend: netem's own figure, and emu's and sim's from their
    100 ms samples), over the samples from `after` seconds on."""
    s = [x for x in samples(d, rep) if x["dir"] == "down" and x["t_s"] >= after]
    pk = sum(x["sent_packets"] for x in s)
    return sum(x["queue_bytes"] * 8 / RATE * x["sent_packets"] for x in s) / pk * 1e3 if pk else None


def load(backend, n):
    d = os.path.join(out, backend, n)
    if not os.path.exists(os.path.join(d, "summary.json")):
        return None
    s = json.load(open(os.path.join(d, "summary.json")))
    b, f = s["bottleneck"], s["flows"][0]
    rs = s["repetitions"]
    tcp = f["cc"].startswith("tcp:")
    if tcp:
        # time-weighted snd_cwnd (segments) = cwnd_mean (bytes) / snd_mss
        mss = [next(json.loads(l)["mss"] for l in lines(os.path.join(d, r["flows"][0]["tcp_records"]["sender"])) if '"sample"' in l) for r in rs]
        cw = [r["flows"][0]["cwnd_mean"] / m for r, m in zip(rs, mss)]
    else:
        cw = [r["flows"][0]["cwnd_mean"] / mtu_of(d) for r in rs if r["flows"][0]["cwnd_mean"] is not None]
    cpu = os.path.join(d, "cpu.json")
    qs = [same_way_qd(d, r["rep"]) for r in rs]
    q2 = [same_way_qd(d, r["rep"], DUR / 2) for r in rs]
    return {
        "dir": d,
        "util": b["utilization"] * 100,
        "util_ci": s.get("ci95", {}).get("utilization", 0) * 100,
        "qd": b["queue_delay_ms_mean"],
        "qd_ci": s.get("ci95", {}).get("queue_delay_ms_mean", 0),
        "qd_same": statistics.mean(qs) if all(q is not None for q in qs) else None,
        "qd_late": statistics.mean(q2) if all(q is not None for q in q2) else None,
        "loss": (b.get("loss_rate") or 0) * 100,
        "drops": statistics.mean(r["bottleneck"]["drops"] for r in rs),
        "cwnd": statistics.mean(cw) if cw else None,
        "goodput": f["goodput_bps"] / 1e6,
        "rtt": f["rtt_ms"]["mean"] if f.get("rtt_ms") else None,
        "lost": f.get("retransmitted_packets") if tcp else f.get("lost_packets"),
        "busy": json.load(open(cpu))["busy"] * 100 if os.path.exists(cpu) else None,
        # the guest router's CPU while the flows ran (absent in the old layout)
        "gbusy": statistics.mean(r["guest_cpu_busy"] for r in rs) * 100
        if all(r.get("guest_cpu_busy") is not None for r in rs) else None,
        "reps": len(rs),
    }


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def goal(plugin, p, k):
    """The issue's goals: (verdict text) or '' for pairs without one."""
    if p is None or k is None:
        return "missing"
    if plugin == "vegas":
        d = p["qd"] - k["qd"]
        return f"queue {d:+.2f} ms: {'met' if abs(d) <= 1 else 'MISSED'} (1 ms)"
    if plugin in ("newreno", "westwood+"):
        d = p["util"] - k["util"]
        return f"util {d:+.1f} pt: {'met' if abs(d) <= 5 else 'MISSED'} (5 pt)"
    return ""


def table(title, rows, backend_p, backend_k, note, busy=False):
    print(f"\n{title}\n")
    hdr = "| case | utilization % plugin / Linux | queueing delay ms plugin / Linux | 2nd half ms plugin / Linux | loss % plugin / Linux | cwnd pkts plugin / Linux |"
    sep = "|---|---|---|---|---|---|"
    if busy:
        hdr += " CPU busy % host / guest: plugin; Linux |"
        sep += "---|"
    print(hdr + " goal |")
    print(sep + "---|")
    for label, plugin, pn, kn in rows:
        p, k = load(backend_p, pn), load(backend_k, kn)
        if p is None and k is None:
            continue
        g = lambda r, key, spec: fmt(r[key] if r else None, spec)
        line = (f"| {label} | {g(p,'util','.1f')} / {g(k,'util','.1f')} | {g(p,'qd','.2f')} / {g(k,'qd','.2f')} "
                f"| {g(p,'qd_late','.2f')} / {g(k,'qd_late','.2f')} "
                f"| {g(p,'loss','.2f')} / {g(k,'loss','.2f')} | {g(p,'cwnd','.1f')} / {g(k,'cwnd','.1f')} |")
        if busy:
            line += f" {g(p,'busy','.0f')} / {g(p,'gbusy','.0f')}; {g(k,'busy','.0f')} / {g(k,'gbusy','.0f')} |"
        print(line + f" {goal(plugin, p, k)} |")
    print(f"\n{note}")


rows = [(f"{p} / tcp:{k}, drop-tail", p, name(p, "droptail"), name("tcp:" + k, "droptail")) for p, k in pairs]
rows += [(f"{p} / tcp:{k}, RED", p, name(p, "red"), name("tcp:" + k, "red")) for p, k in red_pairs]
kind = "kernel netem"
table(f"**Plugin and Linux on {kind}** ({rate_s}, 40 ms, 1 BDP; {reps} x {duration_s}; means over repetitions)",
      rows, "netem", "netem",
      "Queueing delay and loss from tc's counters (backlog every 20 ms drained at the link rate; drops / packets); "
      "2nd half: the same queueing delay over the second half of each repetition. "
      "cwnd: QUIC bytes / max datagram size (1350, or the mtu), TCP snd_cwnd (segments of 1448 B), time-weighted. "
      "CPU busy: host, the share of the machine's CPU time not idle over the run (all repetitions, setup included; "
      "in the old layout, the guest's); guest, the guest router's CPU while the flows ran (— in the old layout).", busy=True)
emu_rows = [r for r in rows if r[2] in emu_cases]
if emu_rows and any(load("emu", r[2]) for r in emu_rows):
    table(f"**Plugin and Linux through the userspace emulator's IP mode on this host** (native CPU; same link)",
          emu_rows, "emu", "emu",
          "Queueing delay: the emulator's per-packet sojourn (2nd half: from its 100 ms samples, as for netem); loss: dropped bytes / offered.")
# The plugin without the guest's CPU limit (sim) against Linux in the guest:
# different links, so the queueing delay is computed the same way from
# both's samples.
print(f"\n**Plugin on sim (virtual time, endpoint CPU counts as zero) against Linux on netem**\n")
print("| case | utilization % sim / Linux | queueing delay ms (samples) sim / Linux | 2nd half ms sim / Linux | loss % sim / Linux | cwnd pkts sim / Linux | goal |")
print("|---|---|---|---|---|---|---|")
for label, plugin, pn, kn in rows:
    p, k = load("sim", pn), load("netem", kn)
    if p is None or k is None:
        continue
    pq = dict(p, qd=p["qd_same"])
    kq = dict(k, qd=k["qd_same"])
    print(f"| {label} | {p['util']:.1f} / {k['util']:.1f} | {fmt(pq['qd'],'.2f')} / {fmt(kq['qd'],'.2f')} "
          f"| {fmt(p['qd_late'],'.2f')} / {fmt(k['qd_late'],'.2f')} | {p['loss']:.2f} / {k['loss']:.2f} "
          f"| {fmt(p['cwnd'],'.1f')} / {fmt(k['cwnd'],'.1f')} | {goal(plugin, pq, kq)} |")
print("\nQueueing delay for both from the bottleneck samples (backlog drained at the link rate, weighted by packets sent); "
      "loss: sim in bytes, netem in packets.")
if controls:
    print(f"\n**Controls** (one QUIC-side mechanism changed; drop-tail; netem and sim)\n")
    print("| plugin | control | utilization % netem / sim | queueing delay ms netem / sim | 2nd half ms netem / sim | loss % netem / sim | cwnd pkts netem / sim | CPU busy % host / guest (netem) |")
    print("|---|---|---|---|---|---|---|---|")
    what = {"": "none (as above)", "ack": "ack_policy rfc9000", "nopace": "pacing off", "mtu": "mtu 1472",
            "all": "rfc9000 + pacing off + mtu 1472", "linuxss": "linux_slow_start=1",
            "band": "beta=4.99 (Linux's hold band)", "linux": "linux_slow_start=1, beta=4.99, rfc9000, pacing off, mtu 1472"}
    ccs = []
    for n, cc, aqm, ctl in controls:
        if cc not in ccs:
            ccs.append(cc)
    for cc in ccs:
        for ctl in [""] + [c[3] for c in controls if c[1] == cc]:
            n = name(cc, "droptail", ctl)
            a, s = load("netem", n), load("sim", n)
            g = lambda r, key, spec: fmt(r[key] if r else None, spec)
            print(f"| {cc} | {what[ctl]} | {g(a,'util','.1f')} / {g(s,'util','.1f')} | {g(a,'qd','.2f')} / {g(s,'qd','.2f')} "
                  f"| {g(a,'qd_late','.2f')} / {g(s,'qd_late','.2f')} "
                  f"| {g(a,'loss','.2f')} / {g(s,'loss','.2f')} | {g(a,'cwnd','.1f')} / {g(s,'cwnd','.1f')} | {g(a,'busy','.0f')} / {g(a,'gbusy','.0f')} |")
        k = load("netem", name("tcp:" + dict(pairs)[cc], "droptail"))
        if k:
            print(f"| tcp:{dict(pairs)[cc]} | (Linux) | {k['util']:.1f} | {k['qd']:.2f} | {fmt(k['qd_late'],'.2f')} | {k['loss']:.2f} | {fmt(k['cwnd'],'.1f')} | {fmt(k['busy'],'.0f')} / {fmt(k['gbusy'],'.0f')} |")


# ---- figures: small SVG writer (no plotting library needed) ----
COL = {"plugin": "#1f5fa8", "sim": "#7a7a7a", "linux": "#b8461b"}


def nice(v):
    if v <= 0:
        return 1
    import math
    e = 10 ** math.floor(math.log10(v))
    for f in (1, 2, 2.5, 5, 10):
        if f * e >= v:
            return f * e
    return 10 * e


def svg_figure(path, title, ylabel, rows, cols):
    """rows: [(row label, [series or None per column])]; series = [(t, v)]."""
    pw, ph, ml, mr, mt, mb, rowgap = 300, 120, 46, 12, 22, 26, 14
    lw = 150
    W = lw + len(cols) * (pw + ml + mr)
    H = 40 + len(rows) * (ph + mt + mb + rowgap)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="8" y="20" font-size="14">{title}</text>']
    for ri, (label, series) in enumerate(rows):
        y0 = 40 + ri * (ph + mt + mb + rowgap)
        top = max([v for s in series if s for _, v in s] + [1])
        ymax = nice(top * 1.05)
        for li, part in enumerate(label.split("\n")):
            o.append(f'<text x="8" y="{y0 + mt + ph / 2 + li * 14}">{part}</text>')
        for ci, s in enumerate(series):
            x0 = lw + ci * (pw + ml + mr) + ml
            yt = y0 + mt
            o.append(f'<text x="{x0}" y="{yt - 6}" fill="{cols[ci][1]}">{cols[ci][0]}</text>')
            o.append(f'<rect x="{x0}" y="{yt}" width="{pw}" height="{ph}" fill="none" stroke="#999" stroke-width="0.6"/>')
            for k in range(5):
                yv = ymax * k / 4
                yy = yt + ph - ph * k / 4
                o.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e5e5e5" stroke-width="0.6"/>')
                o.append(f'<text x="{x0 - 4}" y="{yy + 4:.1f}" text-anchor="end">{yv:g}</text>')
            step = nice(DUR / 6)
            t = 0.0
            while t <= DUR + 1e-9:
                xx = x0 + pw * t / DUR
                o.append(f'<text x="{xx:.1f}" y="{yt + ph + 13}" text-anchor="middle">{t:g}</text>')
                t += step
            if ci == 0:
                o.append(f'<text x="{x0 - 34}" y="{yt + ph / 2}" transform="rotate(-90 {x0 - 34} {yt + ph / 2})" text-anchor="middle">{ylabel}</text>')
            if ri == len(rows) - 1:
                o.append(f'<text x="{x0 + pw / 2}" y="{yt + ph + 25}" text-anchor="middle">time (s)</text>')
            if not s:
                o.append(f'<text x="{x0 + pw / 2}" y="{yt + ph / 2}" text-anchor="middle" fill="#999">not run</text>')
                continue
            # step plot; per pixel column only the first, lowest, highest
            # and last value, so fast oscillations keep their envelope
            s = [(min(t, DUR), v) for t, v in s if t >= 0]
            cols_ = {}
            for t, v in s:
                cols_.setdefault(min(int(pw * t / DUR), pw - 1), []).append(v)
            pts = []
            prev = None
            for xi in sorted(cols_):
                vs = cols_[xi]
                lo, hi = min(vs), max(vs)
                seq = [vs[0]] + ([lo, hi] if vs.index(lo) < vs.index(hi) else [hi, lo]) + [vs[-1]]
                if prev is not None:
                    pts.append(f"{x0 + xi},{prev:g}")  # the value held until here
                for v in seq:
                    yy = round(yt + ph - ph * min(v, ymax) / ymax, 1)
                    if yy != prev:
                        pts.append(f"{x0 + xi},{yy:g}")
                        prev = yy
            o.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{cols[ci][1]}" stroke-width="1"/>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o))
    print(f"wrote {path}", file=sys.stderr)


def series_of(backend, n, fn):
    d = os.path.join(out, backend, n)
    return fn(d) if os.path.exists(os.path.join(d, "summary.json")) else None


cols = [("plugin, netem (guest)", COL["plugin"]), ("plugin, sim", COL["sim"]), ("Linux, netem (guest)", COL["linux"])]
fig_rows = [(lab.replace(" / ", " /\n"), pn, kn) for lab, _, pn, kn in rows]
svg_figure(os.path.join(figs, "cwnd.svg"), f"Congestion window (packets), repetition 1: {rate_s}, 40 ms, 1 BDP", "cwnd (packets)",
           [(lab, [series_of("netem", pn, cwnd_series), series_of("sim", pn, cwnd_series), series_of("netem", kn, cwnd_series)])
            for lab, pn, kn in fig_rows], cols)
svg_figure(os.path.join(figs, "queue.svg"), f"Bottleneck queue (ms at the link rate), repetition 1: {rate_s}, 40 ms, 1 BDP", "queue (ms)",
           [(lab, [series_of("netem", pn, queue_series), series_of("sim", pn, queue_series), series_of("netem", kn, queue_series)])
            for lab, pn, kn in fig_rows], cols)
er = [(lab, pn, kn) for lab, pn, kn in fig_rows if pn in emu_cases]
if er and any(load("emu", pn) for _, pn, _ in er):
    svg_figure(os.path.join(figs, "cwnd-emu.svg"), f"Congestion window (packets), repetition 1, userspace emulator (IP mode) on this host", "cwnd (packets)",
               [(lab, [series_of("emu", pn, cwnd_series), series_of("emu", kn, cwnd_series)]) for lab, pn, kn in er],
               [("plugin, emu", COL["plugin"]), ("Linux, emu", COL["linux"])])
if controls:
    cr = []
    for n, cc, aqm, ctl in controls:
        cr.append((f"{cc}\n{ctl}", [series_of("netem", n, cwnd_series), series_of("sim", n, cwnd_series)]))
    svg_figure(os.path.join(figs, "cwnd-controls.svg"), "Congestion window (packets), repetition 1, controls", "cwnd (packets)", cr,
               [("plugin, netem (guest)", COL["plugin"]), ("plugin, sim", COL["sim"])])
print(f"\nfigures in {figs}/")
PY
