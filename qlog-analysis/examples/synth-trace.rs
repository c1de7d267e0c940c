//! Writes a synthetic quiche-0.30-style trace of at least SIZE_MB
//! megabytes: `cargo run --release -p qlog-analysis --example synth-trace -- OUT SIZE_MB`.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(out), Some(mb)) = (args.get(1), args.get(2).and_then(|s| s.parse::<u64>().ok()))
    else {
        eprintln!("usage: synth-trace OUT SIZE_MB");
        std::process::exit(2);
    };
    // About 300 bytes per sent packet, with its share of ACKs and metrics.
    let packets = mb * 1_000_000 / 290 + 1;
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(out).unwrap());
    let t = qlog_analysis::synth::write_quiche_trace(&mut f, packets, 200).unwrap();
    f.flush().unwrap();
    println!(
        "{out}: {} bytes, {} packets sent, {} ACKs, {} metrics updates, {} lost",
        t.bytes, t.sent, t.received, t.metrics, t.lost
    );
}
