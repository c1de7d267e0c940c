//! `qlog-analysis`: summaries, series, plots and qvis files from qlog.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use qlog_analysis::analysis::Analyzer;
use qlog_analysis::summary::{
    aggregate, describe_conditions, describe_markers, summarize_file, FileSummary,
};

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
        /// qlog files (.qlog, .sqlog, .json; gzip or zstd too, such as
        /// the .sqlog.zst files quic-server and quic-client write).
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
    /// Every series of one file as CSV (long format: trace,series,t_s,value,label).
    Series {
        /// The qlog file.
        file: PathBuf,
        /// CSV on standard output (the only format; the flag is accepted for clarity).
        #[arg(long)]
        csv: bool,
        /// Goodput bin width in seconds.
        #[arg(long, default_value_t = 0.1)]
        bin: f64,
    },
    /// PNG and SVG plots of cwnd, RTT and goodput, flows overlaid.
    Plot {
        /// qlog files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output directory.
        #[arg(long, short)]
        out: PathBuf,
        /// Goodput bin width in seconds.
        #[arg(long, default_value_t = 0.1)]
        bin: f64,
    },
    /// Convert to qlog 0.3 JSON that qvis opens.
    Qvis {
        /// The qlog file (any flavour).
        input: PathBuf,
        /// The output file.
        #[arg(short = 'o', long = "out")]
        output: PathBuf,
        /// Print what was done as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A file's name without its compression and qlog extensions
/// (`server-ab.sqlog.zst` is `server-ab`).
fn label_of(f: &std::path::Path) -> String {
    let name = f
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = [".zst", ".gz"]
        .iter()
        .find_map(|e| name.strip_suffix(e))
        .unwrap_or(&name);
    let name = [".sqlog", ".qlog", ".json"]
        .iter()
        .find_map(|e| name.strip_suffix(e))
        .unwrap_or(name);
    name.to_string()
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

fn check_bin(bin: f64) {
    if !(bin > 0.0 && bin.is_finite()) {
        bad_input(format!("--bin: {bin} is not a positive number of seconds"));
    }
}

fn analyse(
    path: &std::path::Path,
    bin: f64,
) -> anyhow::Result<(Analyzer, qlog_analysis::ReadStats)> {
    let mut a = Analyzer::new(bin, true);
    let stats = qlog_analysis::read_file(path, &mut a)?;
    if stats.skipped > 0 {
        eprintln!(
            "qlog-analysis: {}: skipped {} malformed record(s){}; first: {}",
            path.display(),
            stats.skipped,
            if stats.truncated {
                ", file truncated"
            } else {
                ""
            },
            stats.first_problem.as_deref().unwrap_or("")
        );
    }
    Ok((a, stats))
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.cmd {
        Cmd::Series { file, csv: _, bin } => {
            check_bin(bin);
            let (a, _) = analyse(&file, bin)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            qlog_analysis::series::write_csv_header(&mut out)?;
            for (i, c) in a.connections.iter().enumerate() {
                qlog_analysis::series::write_csv(&mut out, i, c)?;
            }
            use std::io::Write;
            out.flush()?;
            Ok(0)
        }
        Cmd::Plot { files, out, bin } => {
            check_bin(bin);
            let mut analysed = Vec::new();
            for f in &files {
                let (a, _) = analyse(f, bin)?;
                let stem = label_of(f);
                let short: String = stem.chars().take(24).collect();
                analysed.push((short, a));
            }
            let mut flows = Vec::new();
            for (name, a) in &analysed {
                for (i, c) in a.connections.iter().enumerate() {
                    let label = if a.connections.len() > 1 {
                        format!("{name}#{i}")
                    } else {
                        name.clone()
                    };
                    flows.push(qlog_analysis::plot::Flow { label, conn: c });
                }
            }
            for p in qlog_analysis::plot::plot_all(&flows, &out)? {
                println!("{}", p.display());
            }
            Ok(0)
        }
        Cmd::Qvis {
            input,
            output,
            json,
        } => {
            let done = qlog_analysis::qvis::export(&input, &output)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&done)?);
            } else {
                println!(
                    "{}: {} trace(s), {} events{}",
                    output.display(),
                    done.traces,
                    done.events,
                    if done.read.skipped > 0 {
                        format!(" ({} malformed record(s) skipped)", done.read.skipped)
                    } else {
                        String::new()
                    }
                );
            }
            Ok(0)
        }
        Cmd::Summary {
            files,
            json,
            capacity,
            bin,
        } => {
            check_bin(bin);
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
                        if let Some(c) = &s.conditions {
                            println!("  conditions: {}", describe_conditions(c));
                        }
                        if s.conditions.is_some() || !s.markers.is_empty() || s.markers_dropped > 0
                        {
                            println!("  {}", describe_markers(&s.markers, s.markers_dropped));
                        }
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

#[cfg(test)]
mod tests {
    use super::label_of;
    use std::path::Path;

    #[test]
    fn labels_drop_qlog_and_compression_extensions() {
        assert_eq!(label_of(Path::new("d/server-ab.sqlog.zst")), "server-ab");
        assert_eq!(label_of(Path::new("server-ab.sqlog")), "server-ab");
        assert_eq!(label_of(Path::new("t.qlog.gz")), "t");
        assert_eq!(label_of(Path::new("x.json")), "x");
        assert_eq!(label_of(Path::new("odd.name")), "odd.name");
    }
}
