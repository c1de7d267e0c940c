//! `cclab tune`: the request from the flags planned by
//! [`harness::tune::request::plan`], searched by [`harness::tune::tune`];
//! then the table, or what a shard or an interrupted search left.

use std::path::PathBuf;

use harness::tune::{request, Outcome, Progress, TuneError};

use crate::common::{bad_input, bin_dir, stop_flag};

/// `cclab tune` arguments.
#[derive(clap::Args)]
pub struct TuneArgs {
    /// The algorithm to tune (any registered one with numeric parameters;
    /// `cclab list` shows them), or a tuning preset an algorithm defines
    /// (`cclab list` shows them too), which sets the algorithm, parameters
    /// and objective.
    algorithm: String,
    /// A parameter to search and its range: NAME=LO..HI (repeatable), within
    /// the range the registry allows.
    #[arg(long = "param", value_name = "NAME=LO..HI")]
    params: Vec<String>,
    /// What to maximise: a named objective (`cclab list` shows them) or an
    /// expression over utilization, goodput, goodput_mbps, queue_delay,
    /// p95_queue_delay, base_rtt, rtt, p95_rtt, loss_rate, drop_rate, jain,
    /// flows (delays in ms), e.g. 'utilization - 0.5*p95_queue_delay/base_rtt'.
    /// Required except for a preset.
    #[arg(long)]
    objective: Option<String>,
    /// A network condition to tune for: rate=RATE,rtt=TIME[,loss=P,flows=N]
    /// (repeatable; each gets its own search and table entry; default
    /// rate=20mbit,rtt=40ms).
    #[arg(long = "conditions", value_name = "rate=..,rtt=..")]
    conditions: Vec<String>,
    /// Bottleneck rates (repeatable): every pair with --rtt is a condition.
    #[arg(long = "rate")]
    rates: Vec<String>,
    /// Round-trip times (repeatable), see --rate.
    #[arg(long = "rtt")]
    rtts: Vec<String>,
    /// Parameters held fixed: a spec of the algorithm, e.g. vegas:gamma=2.
    #[arg(long)]
    base: Option<String>,
    /// A scenario file to evaluate in (its flows running the algorithm get
    /// the candidate; the condition sets rate, RTT, loss and their count);
    /// default: one download over a 1 BDP drop-tail link.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Queue limit of the default scenario.
    #[arg(long, default_value = "1bdp")]
    queue: String,
    /// Queue management of the default scenario.
    #[arg(long, default_value = "droptail")]
    aqm: String,
    /// Where evaluations run: sim (virtual time, the default: fast and
    /// repeatable) or emu (real processes on the userspace emulator).
    #[arg(long, default_value = "sim")]
    link: String,
    /// Length of each evaluation run (default: the scenario's, 6s).
    #[arg(long)]
    duration: Option<String>,
    /// The optimiser: pso (particle swarm, inertia 0.9 to 0.4) or cmaes
    /// (CMA-ES, the `cmaes` crate).
    #[arg(long, default_value = "pso")]
    optimizer: String,
    /// Particles (pso, default 6) or population (cmaes, default 4 + 3 ln d).
    #[arg(long)]
    swarm: Option<usize>,
    /// Iterations (pso) or generations (cmaes), default 5.
    #[arg(long)]
    iterations: Option<usize>,
    /// Seed of the optimiser.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Link seeds each point is measured on (its value is their mean).
    #[arg(long, default_value_t = 1)]
    seeds: usize,
    /// Fresh link seeds the best and the defaults are compared on at the end.
    #[arg(long, default_value_t = 3)]
    validate: usize,
    /// Evaluations at once (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run only shard I of N of the pending batch and exit (job arrays; a
    /// later call without --shard, or the next wave, advances the search).
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// The table to write (TOML); load it with --cc ALG:table=FILE.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The work directory: every evaluation, result.json, convergence.svg
    /// (default: next to the table, TABLE.runs). Running the same command
    /// again resumes from it.
    #[arg(long)]
    work: Option<PathBuf>,
    /// Keep every evaluation's run directory (WORK/runs/); by default only
    /// its metrics are kept (WORK/evals/, naming spec, condition and seed).
    #[arg(long)]
    keep_runs: bool,
    /// Print result.json on standard output.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

fn parse_shard(s: &str) -> Option<(usize, usize)> {
    let (i, n) = s.split_once('/')?;
    let (i, n) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
    (n > 0 && i < n).then_some((i, n))
}

fn fmt_eta(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let s = s.round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn show_progress(p: &Progress) {
    let value = if let Some(e) = &p.last.error {
        format!("refused ({})", e.lines().next().unwrap_or(""))
    } else {
        harness::tune::output::brief(&p.last.metrics)
    };
    let best: Vec<String> = p
        .best
        .iter()
        .map(|b| {
            if b.is_finite() {
                format!("{b:.3}")
            } else {
                "-".into()
            }
        })
        .collect();
    eprintln!(
        "[{}/{}] {} | {} seed {}: {} | best so far {} | ETA {}",
        p.done,
        p.total,
        p.last.key.condition.label(),
        p.last.key.spec,
        p.last.key.seed,
        value,
        best.join(", "),
        fmt_eta(p.eta_s)
    );
}

fn request(a: &TuneArgs) -> request::Request {
    request::Request {
        algorithm: a.algorithm.clone(),
        base: a.base.clone(),
        params: a.params.clone(),
        objective: a.objective.clone(),
        conditions: a.conditions.clone(),
        rates: a.rates.clone(),
        rtts: a.rtts.clone(),
        scenario: a.scenario.clone(),
        queue: a.queue.clone(),
        aqm: a.aqm.clone(),
        link: a.link.clone(),
        duration: a.duration.clone(),
        optimizer: a.optimizer.clone(),
        swarm: a.swarm,
        iterations: a.iterations,
        seed: a.seed,
        seeds: a.seeds,
        validate: a.validate,
    }
}

fn announce(cfg: &harness::tune::TuneConfig, jobs: usize, work: &std::path::Path) {
    eprintln!(
        "tune {}: {} parameter(s), {} condition(s), objective {}, {} x {} ({}), {} job(s); work directory {}",
        cfg.space.algorithm,
        cfg.space.dims(),
        cfg.conditions.len(),
        cfg.objective,
        cfg.optimizer.population,
        cfg.optimizer.iterations,
        cfg.optimizer.kind.name(),
        jobs,
        work.display()
    );
}

/// `cclab tune`.
pub fn tune(a: TuneArgs) -> anyhow::Result<i32> {
    let (cfg, scenario) =
        request::plan(&request(&a)).unwrap_or_else(|e| bad_input(format!("tune: {e}")));
    let shard = a.shard.as_deref().map(|s| {
        parse_shard(s)
            .unwrap_or_else(|| bad_input(format!("--shard: `{s}` is not I/N with 0 <= I < N")))
    });
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/tune-{}.toml", a.algorithm)));
    let work = a
        .work
        .clone()
        .unwrap_or_else(|| harness::tune::default_work(&out));
    let backend =
        harness::link::Backend::parse(&cfg.backend).unwrap_or(harness::link::Backend::Sim);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = a.jobs.unwrap_or(backend.default_jobs(cores));
    let quiet = a.quiet;
    if !quiet {
        announce(&cfg, jobs, &work);
    }
    let shown = |p: &Progress| {
        if !quiet {
            show_progress(p)
        }
    };
    let exec = harness::tune::Exec {
        run: harness::run::RunConfig {
            out: work.clone(),
            bin_dir: bin_dir(),
            backend,
            quiet: true,
            stop: stop_flag()?,
            threads: 0,
            qlog_level: quic_app::QlogLevel::Metrics,
            per_packet_log: true,
            emu_mode: harness::emu::EmuMode::Relay,
            netem_router: None,
            count_syscalls: false,
        },
        jobs,
        shard,
        keep_runs: a.keep_runs,
        progress: &shown,
    };
    let r = harness::tune::tune(&cfg, &scenario, &exec, &work, &out);
    finish(r, &a, &out, &work)
}

fn finish(
    r: Result<Outcome, TuneError>,
    a: &TuneArgs,
    out: &std::path::Path,
    work: &std::path::Path,
) -> anyhow::Result<i32> {
    match r {
        Ok(Outcome::Done(r)) => {
            if a.json {
                crate::common::print_json(&r)?;
            } else {
                print!("{}", harness::tune::output::summary_text(&r, out, work));
            }
            Ok(0)
        }
        Ok(Outcome::Sharded { ran, pending }) => {
            eprintln!(
                "cclab tune: shard {} ran {ran} of the pending batch's {pending} evaluations; run the command again without --shard (or the next wave) to advance",
                a.shard.as_deref().unwrap_or("")
            );
            Ok(0)
        }
        Err(TuneError::Run(harness::run::RunError::Interrupted)) => {
            eprintln!(
                "cclab tune: interrupted; the evaluations so far are kept in {}: run the same command again to resume",
                work.display()
            );
            Ok(130)
        }
        Err(TuneError::Input(e)) => bad_input(format!("tune: {e}")),
        Err(e) => Err(e.into()),
    }
}
