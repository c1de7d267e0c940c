#!/usr/bin/env python3
"""bbr3 beside quiche's BBR2 and CUBIC on the simulator, same links, same
runs (docs/bbr.md, "Beside the others"):

1. one flow at 20 and 100 Mbit/s, 40 ms, drop-tail buffers of 0.5, 1 and
   4 BDP, and 1% random loss with a 1-BDP buffer: utilization, mean queue,
   loss rate;
2. two flows of one algorithm (Jain's index), and RTT fairness: a 20 ms
   and an 80 ms flow on a 20 Mbit/s, 1-BDP link (goodput ratio short/long);
3. coexistence with one CUBIC flow per buffer size: the algorithm's share
   of the two flows' goodput.

Every run is REPS repetitions (each seeds the link and the flows' start
jitter differently) of DURATION; figures are means over repetitions.

LINK=netem runs the same table on kernel netem (through the guest router
where this host's kernel has no netem), where Linux's own TCP can take
part: CCS="tcp:bbr bbr3 bbr2 cubic" puts Linux's tcp_bbr (v1) beside the
others. Real-time runs: slower, and only as good as the host is quiet.

Usage: scripts/bbr-compare.py   (env: CCS, REPS (2), DURATION (30s),
LINK (sim), CCLAB (target/release/cclab), OUT (a temporary directory))
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CCLAB = os.environ.get("CCLAB", os.path.join(ROOT, "target/release/cclab"))
CCS = os.environ.get("CCS", "bbr3 bbr2 cubic").split()
REPS = int(os.environ.get("REPS", "2"))
DURATION = os.environ.get("DURATION", "30s")
OUT = os.environ.get("OUT") or tempfile.mkdtemp(prefix="bbr-compare-")
LINK = os.environ.get("LINK", "sim")


def run(name, link, flows):
    """Runs one scenario; returns its summary."""
    out = os.path.join(OUT, name)
    toml = [f'name = "{name}"', f'duration = "{DURATION}"', f"repetitions = {REPS}", "[link]", f'backend = "{LINK}"']
    toml += [f'{k} = "{v}"' for k, v in link.items()]
    for f in flows:
        toml.append("[[flows]]")
        toml += [f'{k} = "{v}"' for k, v in f.items()]
        toml.append('start_jitter = "500ms"')
    path = out + ".toml"
    os.makedirs(OUT, exist_ok=True)
    with open(path, "w") as fh:
        fh.write("\n".join(toml) + "\n")
    subprocess.run([CCLAB, "run", path, "--qlog-level", "off", "--out", out], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as fh:
        return json.load(fh)


def main():
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"bbr3 beside the others on {LINK}, {REPS} repetitions of {DURATION} each, at {commit} (scripts/bbr-compare.py)\n")
    print("One flow, 40 ms: utilization / mean queue (ms) / loss rate\n")
    conds = [(r, q, "0%") for r in ("20mbit", "100mbit") for q in ("0.5bdp", "1bdp", "4bdp")] + [("20mbit", "1bdp", "1%")]
    head = "| link | " + " | ".join(CCS) + " |"
    print(head + "\n|" + "---|" * (len(CCS) + 1))
    for rate, queue, loss in conds:
        cells = []
        for cc in CCS:
            s = run(f"one-{cc}-{rate}-{queue}-{loss.rstrip('%')}", {"rate": rate, "rtt": "40ms", "queue": queue, "loss": loss}, [{"cc": cc}])
            b = s["bottleneck"]
            cells.append(f"{b['utilization'] * 100:.1f}% / {b['queue_delay_ms_mean']:.1f} / {b['loss_rate'] * 100:.2f}%")
        label = f"{rate}, {queue}" + (f", {loss} loss" if loss != "0%" else "")
        print(f"| {label} | " + " | ".join(cells) + " |")

    print("\nTwo flows, 20 Mbit/s, 1 BDP: Jain's index (same RTT, 40 ms); goodput short/long (20 ms and 80 ms flows, link 20 ms)\n")
    print("| figure | " + " | ".join(CCS) + " |\n|" + "---|" * (len(CCS) + 1))
    jain, ratio = [], []
    for cc in CCS:
        s = run(f"two-{cc}", {"rate": "20mbit", "rtt": "40ms", "queue": "1bdp"}, [{"cc": cc}, {"cc": cc}])
        jain.append(f"{s['jain_fairness']:.3f}")
        s = run(f"rttfair-{cc}", {"rate": "20mbit", "rtt": "20ms", "queue": "1bdp"},
                [{"cc": cc, "rtt": "20ms"}, {"cc": cc, "rtt": "80ms"}])
        g = [f["goodput_bps"] for f in s["flows"]]
        ratio.append(f"{g[0] / g[1]:.2f} ({g[0] / 1e6:.1f} / {g[1] / 1e6:.1f} Mbit/s)")
    print("| Jain, 2 flows | " + " | ".join(jain) + " |")
    print("| short/long, 20 vs 80 ms | " + " | ".join(ratio) + " |")

    print("\nAgainst one CUBIC flow, 20 Mbit/s, 40 ms: the algorithm's share of the goodput\n")
    print("| buffer | " + " | ".join(CCS) + " |\n|" + "---|" * (len(CCS) + 1))
    for queue in ("0.5bdp", "1bdp", "4bdp"):
        cells = []
        for cc in CCS:
            s = run(f"vs-cubic-{cc}-{queue}", {"rate": "20mbit", "rtt": "40ms", "queue": queue}, [{"cc": cc}, {"cc": "cubic"}])
            g = [f["goodput_bps"] for f in s["flows"]]
            cells.append(f"{g[0] / sum(g) * 100:.0f}%")
        print(f"| {queue} | " + " | ".join(cells) + " |")
    print(f"\n(results in {OUT})")


if __name__ == "__main__":
    sys.exit(main())
