#!/usr/bin/env python3
"""The table of scripts/netem-vs-emu.sh, from its output directory.

Usage: netem-vs-emu-table.py OUT "LADDER" RATE CASE...   (CASE = cc:aqm, RATE e.g. 20mbit)

Queueing delay and loss are given twice: as each backend's summary states
them (emu: per-packet sojourn and dropped bytes; netem: from tc's counters,
see harness/src/run.rs `from_samples`), and computed the same way for both
from bottleneck-samples.jsonl (backlog drained at the link rate, weighted by
packets sent; drops / (sent + drops) in packets), which is the fair
comparison.
"""
import glob
import json
import os
import statistics
import subprocess
import sys

RATE = 20e6  # the runs' rate, bit/s (set from the command line)


def read_lines(path):
    if path.endswith(".zst"):
        out = subprocess.run(["zstd", "-dcq", path], check=True, capture_output=True).stdout
        return out.decode().splitlines()
    with open(path) as f:
        return f.read().splitlines()


def samples(rep_dir):
    for name in ("bottleneck-samples.jsonl", "bottleneck-samples.jsonl.zst"):
        p = os.path.join(rep_dir, name)
        if os.path.exists(p):
            return [json.loads(l) for l in read_lines(p) if l.strip()]
    return []


def same_way(rep_dir, direction="down"):
    s = [x for x in samples(rep_dir) if x["dir"] == direction]
    pk = sum(x["sent_packets"] for x in s)
    drops = max((x["drops_total"] for x in s), default=0)
    qd = sum(x["queue_bytes"] * 8 / RATE * x["sent_packets"] for x in s) / pk * 1e3 if pk else 0.0
    return qd, (drops / (pk + drops) * 100 if pk + drops else 0.0)


def run_figures(out, link, cc, aqm):
    d = os.path.join(out, f"{link}-{cc}-{aqm}")
    s = json.load(open(os.path.join(d, "summary.json")))
    reps = s["repetitions"]
    per = [same_way(os.path.join(d, f"rep-{r['rep']}")) for r in reps]
    b = s["bottleneck"]
    return {
        "util": b["utilization"] * 100,
        "qd": b["queue_delay_ms_mean"],
        "qd_same": statistics.mean(p[0] for p in per),
        "loss": (b.get("loss_rate") or 0) * 100,
        "loss_same": statistics.mean(p[1] for p in per),
        "drops": statistics.mean(r["bottleneck"]["drops"] for r in reps),
        "goodput": s["flows"][0]["goodput_bps"] / 1e6,
        "rtt": s["flows"][0]["rtt_ms"]["mean"] if s["flows"][0].get("rtt_ms") else float("nan"),
    }


def main():
    global RATE
    out, ladder, rate, cases = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4:]
    RATE = float(rate.lower().removesuffix("mbit")) * 1e6
    result = {"probe": {}, "ladder": {}, "runs": {}}
    print("UDP probe, 40 ms RTT, 1 BDP drop-tail (rate counted as each link counts bytes)")
    print(f"{'rate':>8} {'link':>6} {'delivered Mbit/s':>17} {'error %':>8} {'owd p50 ms':>11} {'p99 ms':>8} {'lost at 30%':>12}")
    for r in ("10", "20"):
        for link in ("netem", "emu"):
            p = json.load(open(os.path.join(out, f"{link}-probe-{r}.json")))
            rate, delay = p["rate"], p["delay"]
            result["probe"][f"{link}-{r}"] = p
            print(f"{r + ' Mb':>8} {link:>6} {rate['delivered_wire_bps'] / 1e6:>17.3f} {rate['rate_error_pct']:>+8.2f} "
                  f"{delay['measured']['owd_ms'][0]:>11.3f} {delay['measured']['owd_ms'][1]:>8.3f} "
                  f"{delay['measured']['sent'] - delay['measured']['received']:>12}")
    print()
    print("Each AQM alone, UDP at 105% of 10 Mbit/s, 40 ms, 2 BDP, 8 s (netem / emu)")
    print(f"{'aqm':<10} {'owd p50 ms':>17} {'owd p99 ms':>17} {'loss %':>15} {'kernel drops':>13}")
    result["aqm"] = {}
    for a in ("droptail", "codel", "red", "pie", "fq_codel"):
        try:
            n, e = (json.load(open(os.path.join(out, f"{l}-aqm-{a}.json")))["rate"] for l in ("netem", "emu"))
        except FileNotFoundError:
            continue
        kd = max((q.get("drops", 0) for q in n.get("kernel_qdiscs") or []), default=0)
        result["aqm"][a] = {"netem": n["measured"], "emu": e["measured"], "kernel_drops": kd}
        print(f"{a:<10} {n['measured']['owd_ms'][0]:>8.1f} / {e['measured']['owd_ms'][0]:<6.1f} "
              f"{n['measured']['owd_ms'][1]:>8.1f} / {e['measured']['owd_ms'][1]:<6.1f} "
              f"{n['measured']['loss_rate'] * 100:>6.2f} / {e['measured']['loss_rate'] * 100:<6.2f} {kd:>13}")
    print()
    print("netem alone at rising rates, where it ran: trusted = rate within 1% and one-way delay p50 within 1 ms of the configured 20 ms")
    print(f"{'rate':>8} {'rate error %':>13} {'owd p50 - 20 ms':>16} {'p99 - 20':>10}  trusted")
    highest = None
    for r in ladder:
        f = os.path.join(out, f"netem-ladder-{r}.json")
        if not os.path.exists(f):
            continue
        p = json.load(open(f))
        # One-way delay against the configured 20 ms alone: at 30% load a
        # token bucket with tokens passes a packet at once (a veth has no
        # serialization time), so netem's p50 sits below emu's by one
        # packet's serialization.
        over = p["delay"]["measured"]["owd_ms"][0] - 20.0
        ok = abs(p["rate"]["rate_error_pct"]) <= 1.0 and abs(over) <= 1.0
        if ok and (highest is None or float(r) > highest):
            highest = float(r)
        result["ladder"][r] = {"rate_error_pct": p["rate"]["rate_error_pct"], "owd_p50_over_delay_ms": over,
                               "owd_ms": p["delay"]["measured"]["owd_ms"], "trusted": ok}
        print(f"{r + ' Mb':>8} {p['rate']['rate_error_pct']:>+13.2f} {over:>+16.3f} "
              f"{p['delay']['measured']['owd_ms'][1] - 20.0:>+10.3f}  {'yes' if ok else 'no'}")
    print(f"highest trusted rate: {highest if highest is not None else 'none'} Mbit/s")
    result["highest_trusted_mbit"] = highest
    print()
    print(f"QUIC flows, {RATE / 1e6:g} Mbit/s, 40 ms, 1 BDP; means over repetitions (netem / emu)")
    hdr = ["utilization %", "queue ms (own)", "queue ms (same)", "loss % (own)", "loss % (same)", "drops", "goodput Mb/s", "RTT mean ms"]
    print(f"{'case':<18}" + "".join(f"{h:>20}" for h in hdr))
    keys = ["util", "qd", "qd_same", "loss", "loss_same", "drops", "goodput", "rtt"]
    for c in cases:
        cc, aqm = c.split(":")
        n, e = run_figures(out, "netem", cc, aqm), run_figures(out, "emu", cc, aqm)
        result["runs"][c] = {"netem": n, "emu": e}
        print(f"{c:<18}" + "".join(f"{n[k]:>9.2f} / {e[k]:<8.2f}" for k in keys))
    with open(os.path.join(out, "table.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
