//! The project's end-to-end demo until the `cclab` harness exists: a real
//! quiche client and server in one process, across an emulated bottleneck
//! (20 Mbit/s, 40 ms RTT, one BDP of drop-tail queue), once per registered
//! algorithm, plugins and quiche built-ins alike.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{run, PathSpec};

fn main() {
    // `--seconds S`: run each algorithm for S seconds instead of a fixed
    // download (the 10-second table of the seed-algorithm issue).
    let args: Vec<String> = std::env::args().collect();
    let seconds: Option<f64> = match args.iter().position(|a| a == "--seconds") {
        Some(i) => match args.get(i + 1).and_then(|v| v.parse().ok()) {
            Some(v) if v > 0.0 => Some(v),
            _ => {
                eprintln!("error: --seconds needs a positive number of seconds");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let spec = PathSpec {
        rate_bps: 20e6,
        one_way_delay: Duration::from_millis(20),
        queue_bytes: 100_000, // 20 Mbit/s x 40 ms
        bytes: if seconds.is_some() {
            1_000_000_000
        } else {
            4_000_000
        },
        deadline: Duration::from_secs_f64(seconds.unwrap_or(30.0)),
        ..Default::default()
    };
    match seconds {
        Some(s) => println!(
            "in-process quiche pair, {} Mbit/s, {} ms RTT, {} kB drop-tail queue, {s} s per algorithm\n",
            spec.rate_bps / 1e6,
            spec.one_way_delay.as_millis() * 2,
            spec.queue_bytes / 1000,
        ),
        None => println!(
            "in-process quiche pair, {} Mbit/s, {} ms RTT, {} kB drop-tail queue, {} MB download\n",
            spec.rate_bps / 1e6,
            spec.one_way_delay.as_millis() * 2,
            spec.queue_bytes / 1000,
            spec.bytes / 1_000_000
        ),
    }
    println!(
        "{:<10} {:>8} {:>9} {:>6} {:>9} {:>9} {:>7} {:>6} {:>9}",
        "algorithm",
        "origin",
        "Mbit/s",
        "util",
        "queue ms",
        "cwnd kB",
        "time s",
        "lost",
        "stall ms"
    );
    for info in cc_algorithms::algorithms() {
        let controller =
            cc_algorithms::parse(&info.example_spec()).expect("registered names parse");
        let out = run(&spec, |c| controller.apply(c));
        let secs = out.elapsed.as_secs_f64();
        let mean_cwnd =
            out.cwnd.iter().map(|s| s.1 as f64).sum::<f64>() / out.cwnd.len().max(1) as f64;
        let goodput = out.received as f64 * 8.0 / secs;
        let done = out.complete || seconds.is_some();
        println!(
            "{:<10} {:>8} {:>9.2} {:>5.0}% {:>9.1} {:>9.1} {:>7.2} {:>6} {:>9.0}{}",
            info.name,
            format!("{:?}", info.origin).to_lowercase(),
            goodput / 1e6,
            goodput / spec.rate_bps * 100.0,
            out.mean_queue_delay.as_secs_f64() * 1e3,
            mean_cwnd / 1e3,
            secs,
            out.server_lost,
            out.longest_stall.as_secs_f64() * 1e3,
            if done { "" } else { "  (incomplete)" }
        );
    }
}
