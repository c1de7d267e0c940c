//! The project's end-to-end demo until the `cclab` harness exists: a real
//! quiche client and server in one process, across an emulated bottleneck
//! (20 Mbit/s, 40 ms RTT, one BDP of drop-tail queue), once per registered
//! algorithm, plugins and quiche built-ins alike.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{run, PathSpec};

fn main() {
    let spec = PathSpec {
        rate_bps: 20e6,
        one_way_delay: Duration::from_millis(20),
        queue_bytes: 100_000, // 20 Mbit/s x 40 ms
        bytes: 4_000_000,
        ..Default::default()
    };
    println!(
        "in-process quiche pair, {} Mbit/s, {} ms RTT, {} kB drop-tail queue, {} MB download\n",
        spec.rate_bps / 1e6,
        spec.one_way_delay.as_millis() * 2,
        spec.queue_bytes / 1000,
        spec.bytes / 1_000_000
    );
    println!(
        "{:<10} {:>8} {:>14} {:>12} {:>10} {:>8}",
        "algorithm", "origin", "goodput Mbit/s", "mean cwnd kB", "time s", "lost"
    );
    for info in cc_algorithms::algorithms() {
        let controller =
            cc_algorithms::parse(&info.example_spec()).expect("registered names parse");
        let out = run(&spec, |c| controller.apply(c));
        let secs = out.elapsed.as_secs_f64();
        let mean_cwnd =
            out.cwnd.iter().map(|s| s.1 as f64).sum::<f64>() / out.cwnd.len().max(1) as f64;
        println!(
            "{:<10} {:>8} {:>14.2} {:>12.1} {:>10.2} {:>8}{}",
            info.name,
            format!("{:?}", info.origin).to_lowercase(),
            out.received as f64 * 8.0 / secs / 1e6,
            mean_cwnd / 1e3,
            secs,
            out.server_lost,
            if out.complete { "" } else { "  (incomplete)" }
        );
    }
}
