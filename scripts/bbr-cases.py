#!/usr/bin/env python3
"""One figure per bbr3 case of docs/bbr.md: runs each scenario of
scenarios/bbr/ on the simulator (qlog level `base`, so the state changes
are logged), and draws from the sender's qlog and the link's samples:
the link's delivered rate with bbr3's max_bw, bw and pacing rate; the
window, bytes in flight and inflight_longterm; the RTT; and the state, as
coloured bands. Writes docs/images/bbr-<case>.svg and prints each case's
figures as a markdown table.

Usage: scripts/bbr-cases.py [CLAB] [OUT]  (CCLAB defaults to
target/release/cclab, OUT to a temporary directory).
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CCLAB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/cclab")
OUT = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="bbr-cases-")
IMAGES = os.path.join(ROOT, "docs/images")
CASES = ["alone", "a1-plateau", "a2-a6-a7-app-limited", "a9-rate-cut", "a18-reordering", "a14-sub-packet-bdp", "a15-rate-up", "a16-rate-down", "a21-shallow-buffer",
         "a12-aggregation-startup", "a13-aggregation-cruise", "a17-policer", "two-flows"]
STATE_COLOURS = {
    "startup": "#fde0c5", "drain": "#f9c6d0", "probe_bw_down": "#d6e9f8", "probe_bw_cruise": "#ffffff",
    "probe_bw_refill": "#e3f4d7", "probe_bw_up": "#c8ebb0", "probe_rtt": "#e6dcf5",
}


def qlog_lines(path):
    data = subprocess.run(["zstd", "-dcf", path], capture_output=True, check=True).stdout.decode()
    for line in data.splitlines():
        yield line.lstrip("\x1e")


def load(case):
    out = os.path.join(OUT, case)
    subprocess.run([CCLAB, "run", os.path.join(ROOT, "scenarios/bbr", case + ".toml"), "--qlog-level", "base",
                    "--out", out], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.load(open(os.path.join(out, "summary.json")))
    sender = os.path.join(out, summary["repetitions"][0]["flows"][0]["qlog"]["sender"])
    states, series, last = [], {}, {}
    for line in qlog_lines(sender):
        if 'congestion_state_updated"' in line:
            e = json.loads(line)
            states.append((e["time"] / 1e3, e["data"]["new"]))
        elif 'recovery_metrics_updated"' in line:
            e = json.loads(line)
            t = e["time"] / 1e3
            for k, v in e["data"].items():
                if isinstance(v, (int, float)):
                    series.setdefault(k, []).append((t, float(v)))
                    last[k] = v
    delivered = []
    for line in open(os.path.join(out, "rep-1", "bottleneck-samples.jsonl")):
        r = json.loads(line)
        if r["dir"] == "down" and r["interval_s"] > 0:
            delivered.append((r["t_s"], r["sent_bytes"] * 8 / r["interval_s"]))
    return summary, states, series, last, delivered


def thin(points, n=1500):
    """At most about n points: each time slot keeps its last value."""
    if len(points) <= n:
        return points
    t0, t1 = points[0][0], points[-1][0]
    slot = (t1 - t0) / n or 1
    out = []
    for p in points:
        if out and int((out[-1][0] - t0) / slot) == int((p[0] - t0) / slot):
            out[-1] = p
        else:
            out.append(p)
    return out


def svg(path, title, t_end, states, panels):
    W, H, left, right, top = 920, 560, 70, 175, 30
    ph = (H - top - 40) / len(panels)
    x = lambda t: left + (W - left - right) * t / t_end
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{left}" y="18" font-size="13">{title}</text>']
    for i, (ylabel, scale, lines) in enumerate(panels):
        y0 = top + i * ph + 8
        y1 = y0 + ph - 22
        for j, (t, s) in enumerate(states):
            te = states[j + 1][0] if j + 1 < len(states) else t_end
            o.append(f'<rect x="{x(t):.1f}" y="{y0:.1f}" width="{max(x(te) - x(t), 0.5):.1f}" height="{y1 - y0:.1f}" '
                     f'fill="{STATE_COLOURS.get(s, "#eee")}"/>')
        ymax = max([v for _, pts, _ in lines for _, v in pts] + [1e-9]) * 1.1
        y = lambda v: y1 - (y1 - y0) * v / ymax
        o.append(f'<rect x="{left}" y="{y0:.1f}" width="{W - left - right}" height="{y1 - y0:.1f}" fill="none" stroke="#888"/>')
        o.append(f'<text x="{left - 6}" y="{y0 + 10:.1f}" text-anchor="end">{ymax / scale:.3g}</text>')
        o.append(f'<text x="{left - 6}" y="{y1:.1f}" text-anchor="end">0</text>')
        o.append(f'<text x="12" y="{(y0 + y1) / 2:.1f}" transform="rotate(-90 12 {(y0 + y1) / 2:.1f})" text-anchor="middle">{ylabel}</text>')
        for k, (name, pts, colour) in enumerate(lines):
            pts = [p for p in thin(pts) if p[0] <= t_end]
            if pts:
                # Steps: a value holds until the next one is logged (qlog
                # logs a metric when it changes), and until the end.
                steps = []
                for (t, v), nxt in zip(pts, pts[1:] + [(t_end, None)]):
                    steps += [(t, v), (nxt[0], v)]
                d = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in steps)
                o.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.2"/>')
            o.append(f'<line x1="{W - right + 10}" x2="{W - right + 28}" y1="{y0 + 12 + 14 * k:.1f}" y2="{y0 + 12 + 14 * k:.1f}" stroke="{colour}" stroke-width="2"/>')
            o.append(f'<text x="{W - right + 32}" y="{y0 + 16 + 14 * k:.1f}">{name}</text>')
    yb = H - 22
    for s in range(0, int(t_end) + 1, max(1, int(t_end) // 10)):
        o.append(f'<text x="{x(s):.1f}" y="{yb}" text-anchor="middle">{s}</text>')
    o.append(f'<text x="{(W - right + left) / 2}" y="{H - 6}" text-anchor="middle">time (s); bands: state</text>')
    for k, (s, c) in enumerate(STATE_COLOURS.items()):
        o.append(f'<rect x="{W - right + 10}" y="{H - 160 + 14 * k}" width="14" height="10" fill="{c}" stroke="#888"/>')
        o.append(f'<text x="{W - right + 28}" y="{H - 151 + 14 * k}">{s}</text>')
    o.append("</svg>")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(o))
    os.replace(path + ".tmp", path)


def main():
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"| case | utilization | mean queue | loss | states entered | figures |\n|---|---|---|---|---|---|")
    for case in CASES:
        summary, states, series, last, delivered = load(case)
        b = summary["bottleneck"]
        t_end = max(t for t, _ in delivered)
        kb = lambda pts: [(t, v / 1e3) for t, v in pts]
        rates = [("link delivered (100 ms)", delivered, "#999999"),
                 ("max_bw", series.get("bbr_max_bw_bps", []), "#d62728"),
                 ("bw", series.get("bbr_bw_bps", []), "#ff7f0e"),
                 ("bw_shortterm", series.get("bbr_bw_shortterm_bps", []), "#e377c2"),
                 ("pacing rate", [(t, v * 8) for t, v in series.get("pacing_rate", [])], "#1f77b4")]
        windows = [("cwnd", kb(series.get("congestion_window", [])), "#2ca02c"),
                   ("in flight", kb(series.get("bytes_in_flight", [])), "#9467bd"),
                   ("inflight_longterm", kb(series.get("bbr_inflight_longterm", [])), "#8c564b"),
                   ("inflight_shortterm", kb(series.get("bbr_inflight_shortterm", [])), "#e377c2"),
                   ("extra_acked", kb(series.get("bbr_extra_acked", [])), "#bcbd22")]
        rtts = [("latest RTT", series.get("latest_rtt", []), "#17becf"),
                ("min_rtt", series.get("bbr_min_rtt_ms", []), "#333333")]
        svg(os.path.join(IMAGES, f"bbr-{case}.svg"), f"bbr3, {case} (scenarios/bbr/{case}.toml), sim, at {commit}",
            t_end, states, [("rate (Mbit/s)", 1e6, rates), ("bytes (kB)", 1, windows), ("RTT (ms)", 1, rtts)])
        counts = {}
        for _, s in states:
            counts[s] = counts.get(s, 0) + 1
        entered = ", ".join(f"{s} {n}" for s, n in counts.items())
        print(f"| {case} | {b['utilization'] * 100:.1f}% | {b['queue_delay_ms_mean']:.2f} ms | {b['loss_rate'] * 100:.2f}% | "
              f"{entered} | max_bw {last.get('bbr_max_bw_bps', 0) / 1e6:.3f} Mbit/s at the end; UP ends: plateau "
              f"{last.get('bbr_up_exits_plateau', 0):.0f}, loss {last.get('bbr_up_exits_loss', 0):.0f}, "
              f"precautionary {last.get('bbr_up_exits_precautionary', 0):.0f} |")
    print(f"\n(scripts/bbr-cases.py at {commit}; figures in docs/images/bbr-*.svg)")


if __name__ == "__main__":
    main()
