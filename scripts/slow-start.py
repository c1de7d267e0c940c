#!/usr/bin/env python3
"""Slow start as a choice, measured (docs/slow-start.md): one flow of each
slow start on the simulator's drop-tail links, and what its summary.json
reports of the first slow start (`slow_start`: exit time, reason, window,
overshoot losses, peak queue), with the time the window first reached the
BDP plus the buffer (from the sender's qlog), and the issue's judged
figure: the exit within one RTT of that moment, with at most 20% of
standard slow start's overshoot losses.

The runs are deterministic (sim, no start jitter): one repetition each.

Usage: scripts/slow-start.py   (env: CCLAB (target/release/cclab), OUT (a
temporary directory), DURATION (4s), JSON=1 for the rows as JSON)
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CCLAB = os.environ.get("CCLAB", os.path.join(ROOT, "target/release/cclab"))
OUT = os.environ.get("OUT") or tempfile.mkdtemp(prefix="slow-start-")
DURATION = os.environ.get("DURATION", "4s")

# (label, spec): ours, then quiche's built-ins with and without their
# HyStart++ (unpaced: quiche 0.30 paces neither).
ALGOS = [
    ("newreno standard", "newreno"),
    ("newreno hystart++", "newreno:slow_start=hystart++"),
    ("newreno search", "newreno:slow_start=search"),
    ("westwood+ hystart++", "westwood+:slow_start=hystart++"),
    ("westwood+ search", "westwood+:slow_start=search"),
    ("reno (quiche) no hystart", "reno:hystart=0"),
    ("reno (quiche) hystart++", "reno"),
    ("cubic (quiche) hystart++", "cubic"),
]
LINKS = [("20mbit", 20e6, q) for q in (1, 2, 4)] + [("100mbit", 100e6, q) for q in (1, 4)]
RTT_MS = 40.0


def run(name, rate, queue, cc):
    out = os.path.join(OUT, name)
    toml = "\n".join([
        f'name = "{name}"', f'duration = "{DURATION}"', "[link]", 'backend = "sim"',
        f'rate = "{rate}"', f'rtt = "{RTT_MS:g}ms"', f'queue = "{queue}bdp"',
        "[[flows]]", f'cc = "{cc}"',
    ]) + "\n"
    os.makedirs(OUT, exist_ok=True)
    path = out + ".toml"
    with open(path, "w") as fh:
        fh.write(toml)
    subprocess.run([CCLAB, "run", path, "--qlog-level", "base", "--out", out], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as fh:
        summary = json.load(fh)
    flow = summary["repetitions"][0]["flows"][0]
    return summary, flow, os.path.join(out, flow["qlog"]["sender"])


def first_cwnd_at_least(qlog, limit):
    """Seconds at which the sender's logged window first reached `limit`."""
    text = subprocess.run(["zstd", "-dc", qlog], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        line = line.lstrip("\x1e")
        if "metrics_updated" not in line:
            continue
        e = json.loads(line)
        c = e.get("data", {}).get("congestion_window")
        if c is not None and c >= limit:
            return e["time"] / 1000.0
    return None


def main():
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    rows = []
    for rate, bps, q in LINKS:
        bdp = bps / 8 * RTT_MS / 1000
        limit = bdp * (1 + q)
        standard_lost = None
        for label, cc in ALGOS:
            name = f"{rate}-{q}bdp-{cc.replace(':', '-').replace('=', '-').replace('+', 'p')}"
            summary, flow, qlog = run(name, rate, q, cc)
            ss = flow.get("slow_start") or {}
            reach = first_cwnd_at_least(qlog, limit)
            end = ss.get("end_s")
            lost = ss.get("lost_packets")
            if label.startswith("newreno standard"):
                standard_lost = lost
            share = lost / standard_lost if lost is not None and standard_lost else None
            # "Within one RTT": the exit (end of slow start and CSS) no later
            # than one RTT after the window reached BDP + buffer, the RTT
            # being the base RTT plus the full buffer's delay then.
            rtt_then = RTT_MS * (1 + q) / 1000
            within = end is not None and (reach is None or end <= reach + rtt_then)
            judged = within and share is not None and share <= 0.2
            rows.append({
                "link": f"{rate} {q} BDP", "algorithm": label, "spec": cc,
                "exit_s": ss.get("exit_s"), "end_s": end, "reason": ss.get("exit_reason"),
                "exit_cwnd_kb": (ss.get("exit_cwnd_bytes") or 0) / 1000,
                "lost": lost, "share_of_standard": share,
                "peak_queue_ms": ss.get("peak_queue_ms"),
                "reached_bdp_plus_buffer_s": reach,
                "end_after_reach_ms": None if end is None or reach is None else (end - reach) * 1000,
                "utilization": summary["bottleneck"]["utilization"],
                "judged": judged if label.startswith("newreno") else None,
            })
    if os.environ.get("JSON"):
        json.dump({"commit": commit, "rows": rows}, sys.stdout, indent=1)
        print()
        return
    print(f"Slow start on sim, 40 ms, drop-tail, one flow, {DURATION}, at {commit} (scripts/slow-start.py)\n")
    print("| link | slow start | exit (ms) | reason | cwnd at exit (kB) | window at BDP+buffer (ms) | end - that (ms) | overshoot losses | of standard's | peak queue (ms) | utilization | judged |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda x, f: "-" if x is None else format(x, f)
    for r in rows:
        judged = {True: "met", False: "missed", None: ""}[r["judged"]]
        print(f"| {r['link']} | {r['algorithm']} | {fmt(r['exit_s'] and r['exit_s'] * 1000, '.0f')} | {r['reason']} "
              f"| {r['exit_cwnd_kb']:.0f} | {fmt(r['reached_bdp_plus_buffer_s'] and r['reached_bdp_plus_buffer_s'] * 1000, '.0f')} "
              f"| {fmt(r['end_after_reach_ms'], '+.0f')} | {fmt(r['lost'], 'd')} | {fmt(r['share_of_standard'], '.0%')} "
              f"| {fmt(r['peak_queue_ms'], '.1f')} | {r['utilization']:.1%} | {judged} |")


if __name__ == "__main__":
    main()
