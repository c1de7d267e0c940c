//! Accuracy and speed of the userspace emulator, measured with the UDP
//! probe on loopback: delivered rate against configured, one-way delay
//! error, loss against the binomial interval, and the highest rate it
//! sustains with 1350-byte datagrams, with its CPU use.
//!
//! `cargo run --release -p harness --example emu-accuracy [-- --json] [--quick]`

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use harness::emu::{EmuConfig, EmuReport, Emulator, Forward};
use harness::link::LinkSpec;
use harness::probe::{self, Measured, Receiver};

const SIZE: usize = 1350;

fn lo() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

struct Run {
    m: Measured,
    err_ms: [f64; 3],
    emu: EmuReport,
    sender_cpu_s: f64,
}

fn run(
    pairs: &[(&str, String)],
    offered: f64,
    burst: usize,
    secs: f64,
    expected: impl Fn(u32) -> u64,
) -> Run {
    let l =
        LinkSpec::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())), Path::new(".")).unwrap();
    let rx = Receiver::bind(None, lo()).unwrap();
    let mut cfg = EmuConfig::new(
        l,
        vec![Forward {
            listen: lo(),
            target: rx.local_addr(),
        }],
    );
    cfg.per_packet_log = false;
    let emu = Emulator::start(cfg).unwrap();
    let sent = probe::send(
        None,
        emu.listen_addrs()[0],
        offered,
        SIZE,
        burst,
        Duration::from_secs_f64(secs),
    )
    .unwrap();
    let arrivals = rx.finish(Duration::from_millis(300)).unwrap();
    let report = emu.stop().unwrap();
    let (m, err_ms) = probe::measure(&sent, &arrivals, expected);
    Run {
        m,
        err_ms,
        emu: report,
        sender_cpu_s: sent.cpu_s,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json = args.iter().any(|a| a == "--json");
    let quick = args.iter().any(|a| a == "--quick");
    let secs = if quick { 1.5 } else { 4.0 };
    let mut out = serde_json::Map::new();
    let mut rows = Vec::new();
    for rate in [10e6, 100e6, 500e6] {
        let r = format!("{}bit", rate as u64);
        // Rate: offer 5% more than the link carries.
        let sat = run(
            &[
                ("rate", r.clone()),
                ("rtt", "20ms".into()),
                ("queue", "1bdp".into()),
            ],
            rate * 1.05,
            1,
            secs,
            |_| 0,
        );
        let rate_err = (sat.m.delivered_bps - rate) / rate * 100.0;
        // Delay: 30% load, 40 ms RTT (20 ms one way) + serialization.
        let owd = run(
            &[("rate", r.clone()), ("rtt", "40ms".into())],
            rate * 0.3,
            1,
            secs,
            move |len| 20_000_000 + (len as f64 * 8.0 * 1e9 / rate) as u64,
        );
        // Loss: 1% random at 50% load.
        let loss = run(
            &[
                ("rate", r.clone()),
                ("rtt", "10ms".into()),
                ("loss", "1%".into()),
                ("queue", "4bdp".into()),
            ],
            rate * 0.5,
            1,
            secs,
            |_| 0,
        );
        let lost = loss.m.sent - loss.m.received;
        let (lo_n, hi_n) = probe::binomial_99(loss.m.sent, 0.01);
        let inside = (lo_n..=hi_n).contains(&(lost as f64));
        let row = serde_json::json!({
            "rate_bps": rate,
            "delivered_bps": sat.m.delivered_bps,
            "rate_error_pct": rate_err,
            "owd_error_ms": {"p50": owd.err_ms[0], "p99": owd.err_ms[1], "max": owd.err_ms[2]},
            "owd_lost": owd.m.sent - owd.m.received,
            "emu_lateness_us": {"p50": owd.emu.lateness.p50_us, "p99": owd.emu.lateness.p99_us},
            "loss": {"sent": loss.m.sent, "lost": lost, "interval99": [lo_n, hi_n], "inside": inside,
                      "emu_loss_drops": loss.emu.up.dropped[0], "other_drops": loss.emu.up.drops() - loss.emu.up.dropped[0]},
            "emu_cpu_pct_saturated": sat.emu.cpu_s / sat.emu.duration_s * 100.0,
        });
        if !json {
            println!(
                "{:>5} Mbit/s  delivered {:>8.3} Mbit/s ({:+.3}%)  owd error p50 {:.3} ms p99 {:.3} ms max {:.3} ms  loss {} of {} (99% interval {:.0}..{:.0}: {})  emu cpu {:.0}%",
                rate / 1e6,
                sat.m.delivered_bps / 1e6,
                rate_err,
                owd.err_ms[0],
                owd.err_ms[1],
                owd.err_ms[2],
                lost,
                loss.m.sent,
                lo_n,
                hi_n,
                if inside { "inside" } else { "OUTSIDE" },
                sat.emu.cpu_s / sat.emu.duration_s * 100.0
            );
        }
        rows.push(row);
    }
    out.insert("accuracy".into(), rows.into());
    // Highest sustained rate: link and offered load equal, datagrams sent
    // in bursts of 8 to keep the sender's own CPU down.
    let mut top = Vec::new();
    for rate in [500e6, 1e9, 1.5e9, 2e9] {
        let r = format!("{}bit", rate as u64);
        let x = run(
            &[
                ("rate", r),
                ("rtt", "10ms".into()),
                ("queue", "2bdp".into()),
            ],
            rate,
            8,
            secs,
            |_| 0,
        );
        let ratio = x.m.received as f64 / x.m.sent.max(1) as f64;
        let row = serde_json::json!({
            "rate_bps": rate,
            "delivered_bps": x.m.delivered_bps,
            "received_fraction": ratio,
            "emu_drops": x.emu.up.drops(),
            "emu_cpu_pct": x.emu.cpu_s / x.emu.duration_s * 100.0,
            "sender_cpu_pct": x.sender_cpu_s / secs * 100.0,
            "lateness_p99_us": x.emu.lateness.p99_us,
        });
        if !json {
            println!(
                "max-rate {:>6} Mbit/s: delivered {:>8.1} Mbit/s, received {:.2}% of sent, emu drops {}, emu cpu {:.0}%, sender cpu {:.0}%, hand-off p99 {:.0} us",
                rate / 1e6,
                x.m.delivered_bps / 1e6,
                ratio * 100.0,
                x.emu.up.drops(),
                x.emu.cpu_s / x.emu.duration_s * 100.0,
                x.sender_cpu_s / secs * 100.0,
                x.emu.lateness.p99_us
            );
        }
        top.push(row);
    }
    out.insert("max_rate".into(), top.into());
    if json {
        println!("{}", serde_json::to_string_pretty(&out).unwrap());
    }
}
