//! `cclab harm`: the reference against its own kind and against the
//! candidate, per queue limit, and the harm the candidate does
//! ([`harness::harm`]).

use std::path::PathBuf;

use harness::harm::{HarmPlan, HarmReport};
use harness::run::RunConfig;

use crate::common::{bad_input, bin_dir, qlog_level, resolve_scenario_backend, stop_flag};

#[derive(clap::Args)]
pub struct HarmArgs {
    /// The algorithm harmed (its spec, such as newreno or cubic:beta=0.7).
    #[arg(long)]
    reference: String,
    /// The algorithm judged.
    #[arg(long)]
    candidate: String,
    /// Bottleneck rate.
    #[arg(long, default_value = "20mbit")]
    rate: String,
    /// Round-trip propagation delay.
    #[arg(long, default_value = "40ms")]
    rtt: String,
    /// Queue limits, one point each (repeat or comma-separate: 1bdp,4bdp).
    #[arg(long, value_delimiter = ',', default_value = "1bdp")]
    queue: Vec<String>,
    /// AQM of the bottleneck (as `[link] aqm`).
    #[arg(long, default_value = "droptail")]
    aqm: String,
    /// Each run's length.
    #[arg(long, default_value = "30s")]
    duration: String,
    /// Repetitions of each run (flows start within the first 100 ms, at
    /// times drawn per repetition).
    #[arg(long, default_value_t = 3)]
    repetitions: u32,
    /// Backend: sim (the default), emu, netem or auto.
    #[arg(long, default_value = "sim")]
    link: String,
    /// Output directory: harm.json and each run's result directory.
    #[arg(long)]
    out: PathBuf,
    /// How much qlog both ends write (the loss rate needs per-packet
    /// events: `packets` or more; with `metrics` it is left out).
    #[arg(long, default_value = "packets")]
    qlog_level: String,
    /// Print harm.json instead of the table.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// `cclab harm`.
pub fn harm(a: &HarmArgs) -> anyhow::Result<i32> {
    if a.repetitions == 0 {
        bad_input("--repetitions: must be at least 1");
    }
    let level = qlog_level(&a.qlog_level);
    if level == quic_app::QlogLevel::Off {
        bad_input("--qlog-level off: harm needs each flow's RTT and losses from its qlog; use metrics or more");
    }
    let plan = HarmPlan {
        reference: a.reference.clone(),
        candidate: a.candidate.clone(),
        link: format!(
            "backend = {:?}\nrate = {:?}\nrtt = {:?}\naqm = {:?}",
            a.link, a.rate, a.rtt, a.aqm
        ),
        queues: a.queue.clone(),
        duration: a.duration.clone(),
        repetitions: a.repetitions,
        start_jitter: "100ms".into(),
    };
    let first = a
        .queue
        .first()
        .unwrap_or_else(|| bad_input("--queue: give at least one"));
    let sc = plan
        .scenario(first, &a.candidate)
        .unwrap_or_else(|e| bad_input(e));
    for q in &a.queue {
        if let Err(e) = plan.scenario(q, &a.candidate) {
            bad_input(e);
        }
    }
    let backend = resolve_scenario_backend(&sc);
    let cfg = RunConfig {
        out: a.out.clone(),
        bin_dir: bin_dir(),
        backend,
        quiet: a.quiet,
        stop: stop_flag()?,
        threads: 0,
        qlog_level: level,
        per_packet_log: false,
        // Linux TCP flows (`tcp:NAME`) need the emulator's IP mode.
        emu_mode: crate::common::emu_mode(None, &sc, backend),
    };
    let r = harness::harm::run_harm(&plan, &cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", table(&r));
        println!("(written to {})", a.out.join("harm.json").display());
    }
    Ok(if r.interrupted { 130 } else { 0 })
}

/// The report as a markdown table: one row per queue limit and metric.
fn table(r: &HarmReport) -> String {
    let mut s = format!(
        "harm of {} to {} ({} runs of {}):\n\n| queue | metric | {} vs {} | {} vs {} | {} | harm |\n|---|---|---|---|---|---|\n",
        r.candidate,
        r.reference,
        r.repetitions,
        r.duration,
        r.reference,
        r.reference,
        r.reference,
        r.candidate,
        r.candidate
    );
    for p in &r.points {
        for f in &p.figures {
            let v = |x: f64| match f.metric {
                "throughput_bps" => format!("{:.2} Mbit/s", x / 1e6),
                "loss_rate" => format!("{:.3}%", x * 100.0),
                _ => format!("{x:.1} ms"),
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.3} |\n",
                p.queue,
                f.metric,
                v(f.x),
                v(f.y),
                v(f.candidate),
                f.harm
            ));
        }
    }
    s
}
