//! `cclab demo`: every registered algorithm alone on the default link,
//! one [`harness::run::run`] each; then demo.json, report.html and the
//! table of results.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use cc_algorithms::AlgorithmInfo;
use harness::link::units::parse_duration_ns;
use harness::link::{Backend, LinkSpec};
use harness::run::{RunConfig, RunError};
use harness::scenario::{FlowSpec, Scenario};

use crate::common::{bad_input, bin_dir, default_out, stop_flag};

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Result directory (default results/demo-<time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seconds per algorithm.
    #[arg(long, default_value = "7s")]
    duration: String,
    /// Only this algorithm (a registered name, as `cclab list` shows);
    /// repeat for several. Default: every registered algorithm.
    #[arg(long = "cc", value_name = "NAME")]
    cc: Vec<String>,
    /// Print the summary table as JSON.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// `cclab demo`.
pub fn demo(a: DemoArgs) -> anyhow::Result<i32> {
    let duration = &a.duration;
    let dur = parse_duration_ns(duration)
        .filter(|&d| d >= 1_000_000_000)
        .unwrap_or_else(|| {
            bad_input(format!(
                "--duration: `{duration}` is not a time of at least 1s"
            ))
        });
    let out = a.out.unwrap_or_else(|| default_out("demo"));
    let stop = stop_flag()?;
    let mut rows = Vec::new();
    let algs = chosen(&a.cc);
    let started = Instant::now();
    for (i, alg) in algs.iter().enumerate() {
        // Required rates (br-tcp's reservation) get half the link.
        let spec = alg.example_spec().replace("=40mbit", "=10mbit");
        if !a.quiet {
            eprint!("[{:>2}/{}] {:<28} ", i + 1, algs.len(), spec);
        }
        let Some(row) = run_alg(alg, &spec, dur, &out, &stop, a.quiet) else {
            eprintln!("\ncclab: interrupted");
            return Ok(130);
        };
        rows.push(row);
    }
    let report = write_results(&out, &algs, &rows)?;
    if a.json {
        crate::common::print_json(&rows)?;
    } else {
        print_table(&rows);
        println!(
            "\n{} algorithms in {:.0} s; results in {}",
            rows.len(),
            started.elapsed().as_secs_f64(),
            out.display()
        );
        if let Some(report) = report {
            println!("report: {}", report.display());
        }
    }
    Ok(0)
}

/// The registered algorithms named by `--cc` (all when none is), in
/// registry order; an unknown name is refused with the list of names.
fn chosen(names: &[String]) -> Vec<&'static AlgorithmInfo> {
    let all: Vec<_> = cc_algorithms::algorithms().collect();
    for n in names {
        if !all.iter().any(|a| a.name == n.as_str()) {
            let known: Vec<&str> = all.iter().map(|a| a.name).collect();
            bad_input(format!(
                "--cc: `{n}` is not a registered algorithm; known: {}",
                known.join(", ")
            ));
        }
    }
    all.into_iter()
        .filter(|a| names.is_empty() || names.iter().any(|n| n == a.name))
        .collect()
}

/// An algorithm's run name, which names its directory under the demo's.
fn run_name(alg: &AlgorithmInfo) -> String {
    alg.name.replace('+', "plus")
}

/// Runs `spec` alone for `dur` ns on the default link, on the emulator:
/// its row of demo.json (with the error if it failed), or `None` if
/// interrupted.
fn run_alg(
    alg: &AlgorithmInfo,
    spec: &str,
    dur: u64,
    out: &Path,
    stop: &Arc<AtomicBool>,
    quiet: bool,
) -> Option<serde_json::Value> {
    let link = LinkSpec {
        backend: Backend::Emu,
        ..Default::default()
    };
    let sc = Scenario {
        name: run_name(alg),
        duration_ns: dur,
        link,
        flows: vec![FlowSpec::download(spec.to_string())],
        ..Scenario::default()
    };
    let cfg = RunConfig {
        out: out.join(&sc.name),
        bin_dir: bin_dir(),
        backend: Backend::Emu,
        quiet: true,
        stop: stop.clone(),
        threads: 0,
        qlog_level: quic_app::QlogLevel::Core,
        per_packet_log: false,
        emu_mode: harness::emu::EmuMode::Relay,
        netem_router: None,
        count_syscalls: false,
    };
    match harness::run::run(&sc, &cfg) {
        Ok(s) => {
            let f = &s.flows[0];
            if !quiet {
                eprintln!(
                    "{:>6.2} Mbit/s  util {:>5.1}%  queue {:>5.1} ms  lost {:>5}",
                    f.goodput_bps / 1e6,
                    s.bottleneck.utilization * 100.0,
                    s.bottleneck.queue_delay_ms_mean,
                    f.lost_packets
                        .map_or("\u{2014}".into(), |l| format!("{l:.0}"))
                );
            }
            Some(serde_json::json!({
                "cc": spec,
                "goodput_bps": f.goodput_bps,
                "utilization": s.bottleneck.utilization,
                "queue_delay_ms_mean": s.bottleneck.queue_delay_ms_mean,
                "lost_packets": f.lost_packets,
                "rtt_ms": f.rtt_ms,
                "completed": f.completed == 1,
                "results": cfg.out,
            }))
        }
        Err(RunError::Interrupted) => None,
        Err(e) => {
            if !quiet {
                eprintln!("failed: {e}");
            }
            Some(serde_json::json!({"cc": spec, "error": e.to_string()}))
        }
    }
}

/// Writes demo.json and report.html (over the runs that left a
/// directory): the report's path if it was written.
fn write_results(
    out: &Path,
    algs: &[&AlgorithmInfo],
    rows: &[serde_json::Value],
) -> anyhow::Result<Option<PathBuf>> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("demo.json"), serde_json::to_vec_pretty(rows)?)?;
    let report = out.join("report.html");
    let dirs: Vec<PathBuf> = algs
        .iter()
        .map(|a| out.join(run_name(a)))
        .filter(|d| d.exists())
        .collect();
    let report_ok = harness::report::write(&dirs, &report)
        .map_err(|e| eprintln!("cclab: report: {e}"))
        .is_ok();
    Ok(report_ok.then_some(report))
}

/// The results, one algorithm a line.
fn print_table(rows: &[serde_json::Value]) {
    println!(
        "\n{:<28} {:>10} {:>7} {:>9} {:>7} {:>8}",
        "algorithm", "Mbit/s", "util", "queue ms", "lost", "RTT ms"
    );
    for r in rows {
        if let Some(e) = r.get("error") {
            println!("{:<28} failed: {}", r["cc"].as_str().unwrap_or(""), e);
            continue;
        }
        println!(
            "{:<28} {:>10.2} {:>6.1}% {:>9.1} {:>7} {:>8.1}",
            r["cc"].as_str().unwrap_or(""),
            r["goodput_bps"].as_f64().unwrap_or(0.0) / 1e6,
            r["utilization"].as_f64().unwrap_or(0.0) * 100.0,
            r["queue_delay_ms_mean"].as_f64().unwrap_or(0.0),
            r["lost_packets"]
                .as_f64()
                .map_or("\u{2014}".into(), |l| format!("{l:.0}")),
            r["rtt_ms"]["mean"].as_f64().unwrap_or(0.0)
        );
    }
}
