//! `cclab harm`: the reference against its own kind and against the
//! candidate, per queue limit, and the harm the candidate does
//! ([`harness::harm`]).

use std::path::PathBuf;

use harness::cli::LinkArgs;
use harness::harm::{HarmPlan, HarmReport};
use harness::run::RunConfig;
use harness::scenario::Scenario;

use crate::common::{bad_input, bin_dir, qlog_level, resolve_scenario_backend, stop_flag};

#[derive(clap::Args)]
pub struct HarmArgs {
    /// The algorithm harmed (its spec, such as newreno or cubic:beta=0.7).
    #[arg(long)]
    reference: String,
    /// The algorithm judged.
    #[arg(long)]
    candidate: String,
    /// The link, as `cclab run` takes it (the defaults: 20 Mbit/s, 40 ms,
    /// drop-tail, on sim unless --link says otherwise); `--queue` takes
    /// several limits, comma-separated (1bdp,4bdp), one point each.
    #[command(flatten)]
    link: LinkArgs,
    /// Each run's length.
    #[arg(long, default_value = "30s")]
    duration: String,
    /// Repetitions of each run (flows start within the first 100 ms, at
    /// times drawn per repetition).
    #[arg(long, default_value_t = 3)]
    repetitions: u32,
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
    if a.link.link_file.is_some() {
        bad_input("--link-file is for `cclab emu` and `cclab link show`; give `cclab harm` the link as flags");
    }
    let level = qlog_level(&a.qlog_level);
    if level == quic_app::QlogLevel::Off {
        bad_input("--qlog-level off: harm needs each flow's RTT and losses from its qlog; use metrics or more");
    }
    let queues: Vec<String> = a
        .link
        .queue
        .as_deref()
        .unwrap_or("1bdp")
        .split(',')
        .map(|q| q.trim().to_string())
        .filter(|q| !q.is_empty())
        .collect();
    if queues.is_empty() {
        bad_input("--queue: give at least one queue limit, such as 1bdp or 1bdp,4bdp");
    }
    // The link flags but the queue (each point's own), on sim by default.
    let mut o: Vec<(String, toml::Value)> = crate::run::link_overrides(&a.link)
        .into_iter()
        .filter(|(k, _)| k != "link.queue")
        .collect();
    if a.link.link.is_none() {
        o.push(("link.backend".into(), "sim".into()));
    }
    o.push(("duration".into(), a.duration.clone().into()));
    o.push(("repetitions".into(), i64::from(a.repetitions).into()));
    let base = Scenario {
        name: "harm".into(),
        ..Scenario::default()
    }
    .with_overrides(&o, "command line")
    .unwrap_or_else(|e| bad_input(e));
    let plan = HarmPlan::new(&base, &a.reference, &a.candidate, queues.clone())
        .unwrap_or_else(|e| bad_input(e));
    let sc = plan
        .scenario(&queues[0], &a.candidate)
        .unwrap_or_else(|e| bad_input(e));
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
        netem_router: None,
        count_syscalls: false,
    };
    let r = harness::harm::run_harm(&plan, &cfg)?;
    if a.json {
        crate::common::print_json(&r)?;
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
