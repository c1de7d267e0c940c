#!/usr/bin/env python3
"""The table of scripts/syscalls.sh: system calls per data packet from the
perf counts each endpoint process left in OUT/<case>.counts/, the data
packets from the sender's qlog (QUIC) or TCP_INFO records (Linux TCP), and
the issue-34 goals.

Usage: syscalls-table.py OUT BIN_DIR JSON_PATH|"" CASE...
"""
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
