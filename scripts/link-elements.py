#!/usr/bin/env python3
"""The policer and aggregation link elements, and recovery from scheduled
changes, measured (docs/links.md):
each algorithm on the plain link (20 Mbit/s, 40 ms, 1 BDP drop-tail) and on
the shipped scenarios scenarios/changes/aggregation.toml (data every 4 ms,
ACKs every 8 ms) and scenarios/changes/policer.toml (10 Mbit/s, 50 kB), on
the simulator, 20 s each. Prints per run the goodput, utilization, mean
queue, packets lost, and what the sender saw: its RTT samples (min, mean,
p95) and, for bbr3, max_bw and extra_acked at the end (from its qlog).

Then each algorithm through the shipped change scenarios
(scenarios/changes/rate-drop, black-hole, delay-jump, wifi-suspension) and
each change's recovery time from summary.json (`bottleneck.recoveries`:
until the link carries 90% of the capacity in force for 0.5 s).

The runs are deterministic (sim): one repetition each.

Usage: scripts/link-elements.py   (env: CCLAB (target/release/cclab), OUT
(a temporary directory), JSON=1 for the rows as JSON)
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CCLAB = os.environ.get("CCLAB", os.path.join(ROOT, "target/release/cclab"))
OUT = os.environ.get("OUT") or tempfile.mkdtemp(prefix="link-elements-")
ALGOS = ["newreno", "cubic", "vegas", "bbr2", "bbr3"]
LINKS = [("plain", None), ("aggregation", "scenarios/changes/aggregation.toml"),
         ("policer", "scenarios/changes/policer.toml")]


def bbr_state(summary, out):
    """bbr3's last max_bw and extra_acked from the sender's qlog."""
    sender = os.path.join(out, summary["repetitions"][0]["flows"][0]["qlog"]["sender"])
    data = subprocess.run(["zstd", "-dcf", sender], capture_output=True, check=True).stdout.decode()
    last = {}
    for line in data.splitlines():
        if 'recovery_metrics_updated"' in line:
            for k, v in json.loads(line.lstrip("\x1e"))["data"].items():
                if k in ("bbr_max_bw_bps", "bbr_extra_acked"):
                    last[k] = v
    return last


def run(link, scenario, cc):
    out = os.path.join(OUT, f"{link}-{cc}")
    args = [CCLAB, "run"] + ([os.path.join(ROOT, scenario)] if scenario else
                             ["--rate", "20mbit", "--rtt", "40ms", "--queue", "1bdp"])
    args += ["--link", "sim", "--cc", cc, "--duration", "20s", "--qlog-level", "metrics", "--out", out]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = json.load(open(os.path.join(out, "summary.json")))
    f, b = s["flows"][0], s["bottleneck"]
    row = {"link": link, "cc": cc, "goodput_mbps": f["goodput_bps"] / 1e6, "utilization": b["utilization"],
           "queue_ms": b["queue_delay_ms_mean"], "lost": f["lost_packets"], "rtt_ms": f["rtt_ms"]}
    if cc == "bbr3":
        row.update(bbr_state(s, out))
    return row


CHANGES = ["rate-drop", "black-hole", "delay-jump", "wifi-suspension"]


def recoveries(scenario, cc):
    out = os.path.join(OUT, f"change-{scenario}-{cc}")
    subprocess.run([CCLAB, "run", os.path.join(ROOT, "scenarios/changes", scenario + ".toml"), "--link", "sim",
                    "--cc", cc, "--qlog-level", "metrics", "--out", out], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = json.load(open(os.path.join(out, "summary.json")))
    return s["bottleneck"].get("recoveries", [])


def fmt_recoveries(rs):
    """One cell: each change's recovery, or for a repeating one the mean
    and how many of its times recovered."""
    if not rs:
        return "no change"
    groups = {}
    for r in rs:
        groups.setdefault(r["change"], []).append(r["recovery_s"])
    cells = []
    for change, times in groups.items():
        got = [t for t in times if t is not None]
        if len(times) == 1:
            cells.append(f"{change}: " + (f"{got[0]:.1f} s" if got else "not recovered"))
        else:
            mean = f"{sum(got) / len(got):.2f} s" if got else "-"
            cells.append(f"{change} (x{len(times)}): {mean}, {len(got)} recovered")
    return "; ".join(cells)


def main():
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    rows = [run(link, sc, cc) for cc in ALGOS for link, sc in LINKS]
    rec = {(sc, cc): recoveries(sc, cc) for cc in ALGOS for sc in CHANGES}
    if os.environ.get("JSON") == "1":
        json.dump({"commit": commit, "rows": rows,
                   "recoveries": [{"scenario": sc, "cc": cc, "recoveries": r} for (sc, cc), r in rec.items()]},
                  sys.stdout, indent=1)
        return
    print("| algorithm | link | goodput | utilization | mean queue | lost | RTT min / mean / p95 | bbr3 max_bw, extra_acked |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        rtt = r["rtt_ms"] or {}
        bbr = (f"{r['bbr_max_bw_bps'] / 1e6:.3f} Mbit/s, {r['bbr_extra_acked'] / 1e3:.1f} kB"
               if "bbr_max_bw_bps" in r else "")
        print(f"| {r['cc']} | {r['link']} | {r['goodput_mbps']:.2f} Mbit/s | {r['utilization'] * 100:.1f}% | "
              f"{r['queue_ms']:.2f} ms | {r['lost']:.0f} | {rtt.get('min', 0):.1f} / {rtt.get('mean', 0):.1f} / "
              f"{rtt.get('p95', 0):.1f} ms | {bbr} |")
    print(f"\n(make link-elements at {commit}; sim, 20 s, one run each)")
    print("\n| algorithm | " + " | ".join(CHANGES) + " |")
    print("|---|" + "---|" * len(CHANGES))
    for cc in ALGOS:
        print(f"| {cc} | " + " | ".join(fmt_recoveries(rec[(sc, cc)]) for sc in CHANGES) + " |")
    print(f"\n(make link-elements at {commit}; recovery: until the link carries 90% of the capacity in force "
          "for 0.5 s, to the samples' 100 ms)")


if __name__ == "__main__":
    main()
