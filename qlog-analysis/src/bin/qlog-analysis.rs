//! `qlog-analysis`: summaries, series, plots and qvis files from qlog.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use qlog_analysis::summary::{aggregate, summarize_file, FileSummary};

#[derive(Parser)]
#[command(
    name = "qlog-analysis",
    version,
    about = "Read qlog from any QUIC implementation"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Per-connection summary; fairness across files, utilization with --capacity.
    Summary {
        /// qlog files (.qlog, .sqlog, .json; gzip or zstd too).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Link capacity, for utilization (tc units: 20mbit).
        #[arg(long)]
        capacity: Option<String>,
        /// Goodput bin width in seconds.
        #[arg(long, default_value_t = 0.1)]
        bin: f64,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qlog-analysis: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn bad_input(msg: impl std::fmt::Display) -> ! {
    eprintln!("qlog-analysis: {msg}");
    std::process::exit(2);
}

fn parse_rate(s: &str) -> f64 {
    qlog_analysis::units::parse_rate(s)
        .filter(|r| *r > 0.0)
        .unwrap_or_else(|| {
            bad_input(format!(
                "--capacity: `{s}` is not a rate such as 20mbit, 500kbit or 1gbit"
            ))
        })
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.cmd {
        Cmd::Summary {
            files,
            json,
            capacity,
            bin,
        } => {
            if !(bin > 0.0 && bin.is_finite()) {
                bad_input(format!("--bin: {bin} is not a positive number of seconds"));
            }
            let capacity = capacity.as_deref().map(parse_rate);
            let mut all: Vec<FileSummary> = Vec::new();
            let mut failed = false;
            for f in &files {
                match summarize_file(f, bin) {
                    Ok(s) => all.push(s),
                    Err(e) => {
                        eprintln!("qlog-analysis: {e}");
                        failed = true;
                    }
                }
            }
            let conns: Vec<_> = all.iter().flat_map(|f| f.connections.iter()).collect();
            let agg = aggregate(&conns, capacity);
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({"files": all, "aggregate": agg})
                    )?
                );
            } else {
                for f in &all {
                    if f.read.skipped > 0 || f.read.truncated {
                        println!(
                            "{}: skipped {} malformed record(s){}; first: {}",
                            f.file,
                            f.read.skipped,
                            if f.read.truncated {
                                ", file truncated"
                            } else {
                                ""
                            },
                            f.read.first_problem.as_deref().unwrap_or("")
                        );
                    }
                    for s in &f.connections {
                        println!(
                            "{} [trace {}] {} {} ({})",
                            s.file, s.trace, s.vantage_point, s.format, s.title
                        );
                        println!(
                            "  duration {:.3} s, {} application bytes ({})",
                            s.duration_s, s.bytes, s.bytes_basis
                        );
                        if let Some(g) = &s.goodput {
                            println!(
                                "  goodput {:.3} Mbit/s (bins of {} s: p50 {:.3}, p95 {:.3})",
                                g.mean_bps / 1e6,
                                g.bin_s,
                                g.bin_p50_bps / 1e6,
                                g.bin_p95_bps / 1e6
                            );
                        }
                        if let Some(r) = &s.rtt_ms {
                            println!(
                                "  rtt ({}) min {:.3} mean {:.3} p95 {:.3} ms, inflation {}",
                                s.rtt_source,
                                r.min,
                                r.mean,
                                r.p95,
                                s.rtt_inflation.map_or("-".into(), |x| format!("{x:.3}"))
                            );
                        }
                        println!(
                            "  loss {} packets ({:.4}%, from {:?}), retransmitted {} bytes",
                            s.loss.packets,
                            s.loss.rate * 100.0,
                            s.loss.source,
                            s.retransmitted_bytes
                        );
                        if let Some(c) = &s.cwnd {
                            println!("  cwnd mean {:.0} bytes, cv {:.3}", c.mean, c.cv);
                        }
                        if !s.time_in_state_s.is_empty() {
                            let st: Vec<String> = s
                                .time_in_state_s
                                .iter()
                                .map(|(k, v)| format!("{k} {v:.3} s"))
                                .collect();
                            println!("  states: {}", st.join(", "));
                        }
                        println!(
                            "  events {}: metrics {} (cwnd {}), sent {}, received {}, packet_lost {}",
                            s.counts.events,
                            s.counts.metrics_updated,
                            s.counts.cwnd_points,
                            s.counts.packets_sent,
                            s.counts.packets_received,
                            s.counts.packet_lost_events
                        );
                    }
                }
                if conns.len() > 1 || capacity.is_some() {
                    println!(
                        "{} connection(s) with data: total goodput {:.3} Mbit/s, Jain's fairness {}{}",
                        agg.connections,
                        agg.total_goodput_bps / 1e6,
                        agg.jain_fairness.map_or("-".into(), |j| format!("{j:.4}")),
                        agg.utilization.map_or(String::new(), |u| format!(", utilization {:.2}%", u * 100.0))
                    );
                }
            }
            Ok(if failed { 1 } else { 0 })
        }
    }
}
