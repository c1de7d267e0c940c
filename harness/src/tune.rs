//! `cclab tune smcc`: SMCC's offline mode. For each network condition
//! (bottleneck rate x base RTT) a particle swarm searches Vegas's
//! `(alpha, beta)`; each particle is evaluated by a real run on the
//! emulated link, and its fitness is SMCC's (see `cc_algorithms::smcc`):
//!
//! ```text
//! fitness = goodput / capacity  -  delta x queueing delay / base RTT  -  lambda x loss rate
//! ```
//!
//! with the run's mean queueing delay at the bottleneck and the sender's
//! lost packets over the packets it sent (payload bytes / 1200 + lost).
//! The best values per condition go to a TOML table that
//! `smcc:table=FILE` loads. Every evaluation's run directory is kept under
//! the work directory.

use std::path::{Path, PathBuf};

use cc_algorithms::pso::Swarm;
use cc_algorithms::smcc::{fitness, keep_order, pso_config, repair, SmccTable, TableEntry};

use crate::link::LinkSpec;
use crate::run::{RunConfig, RunError};
use crate::scenario::{FlowSpec, Scenario};

/// How to tune.
#[derive(Clone, Debug)]
pub struct TuneConfig {
    /// The link (rate and RTT are replaced per condition).
    pub link: LinkSpec,
    /// Bottleneck rates, bit/s.
    pub rates: Vec<f64>,
    /// Round-trip times, ns.
    pub rtts_ns: Vec<u64>,
    /// Particles.
    pub swarm: usize,
    /// Iterations.
    pub iterations: usize,
    /// Length of each evaluation run, ns.
    pub duration_ns: u64,
    /// Upper bound of alpha and beta, packets.
    pub max: f64,
    /// Queueing-delay weight.
    pub delta: f64,
    /// Loss weight.
    pub lambda: f64,
    /// Swarm seed.
    pub seed: u64,
}

/// One evaluation's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Evaluation {
    /// Condition index.
    pub condition: usize,
    /// alpha, beta.
    pub params: [f64; 2],
    /// Its fitness.
    pub fitness: f64,
    /// goodput / capacity.
    pub utilization: f64,
    /// Mean queueing delay, ms.
    pub queue_ms: f64,
    /// Loss rate.
    pub loss_rate: f64,
}

/// Runs the tuning; writes the table to `out` (atomically) and returns it.
pub fn tune(
    cfg: &TuneConfig,
    base: &RunConfig,
    work: &Path,
    out: &Path,
    mut progress: impl FnMut(&Evaluation, usize, usize),
) -> Result<(SmccTable, Vec<Evaluation>), RunError> {
    let max = cfg.max.max(2.0);
    let conditions: Vec<(f64, u64)> = cfg
        .rates
        .iter()
        .flat_map(|&r| cfg.rtts_ns.iter().map(move |&t| (r, t)))
        .collect();
    let total = conditions.len() * cfg.swarm.max(1) * cfg.iterations.max(1);
    let mut done = 0;
    let mut entries = Vec::new();
    let mut evals = Vec::new();
    for (c, &(rate, rtt)) in conditions.iter().enumerate() {
        let mut swarm = Swarm::new(
            pso_config(cfg.swarm, cfg.iterations.max(1), max, cfg.seed + c as u64),
            keep_order,
        );
        let mut link = cfg.link.clone();
        for d in [&mut link.up, &mut link.down] {
            d.rate_bps = rate;
            d.trace = None;
        }
        link.up.delay_ns = rtt / 2;
        link.down.delay_ns = rtt - rtt / 2;
        let mut n = 0;
        while !swarm.finished() {
            let [a, b] = repair(max)(swarm.candidate());
            let sc = Scenario {
                name: format!("tune-smcc-{c}-{n}"),
                duration_ns: cfg.duration_ns,
                repetitions: 1,
                seed: cfg.seed,
                link: link.clone(),
                flows: vec![FlowSpec::download(format!(
                    "vegas:alpha={a:.4},beta={b:.4}"
                ))],
                cross: Vec::new(),
            };
            let mut rc = base.clone();
            rc.out = work.join(format!("cond-{c}")).join(format!("eval-{n:03}"));
            rc.quiet = true;
            let s = crate::run::run(&sc, &rc)?;
            let f = &s.flows[0];
            let util = f.goodput_bps / rate;
            let queue_ms = s.bottleneck.queue_delay_ms_mean;
            let sent = f.bytes / 1200.0 + f.lost_packets;
            let loss = if sent > 0.0 {
                f.lost_packets / sent
            } else {
                0.0
            };
            let fitness = fitness(
                util,
                queue_ms / (rtt as f64 / 1e6),
                loss,
                cfg.delta,
                cfg.lambda,
            );
            swarm.report(fitness);
            let e = Evaluation {
                condition: c,
                params: [a, b],
                fitness,
                utilization: util,
                queue_ms,
                loss_rate: loss,
            };
            done += 1;
            progress(&e, done, total);
            evals.push(e);
            n += 1;
        }
        let ([a, b], f) = swarm.best();
        let [a, b] = repair(max)([a, b]);
        entries.push(TableEntry {
            rtt_ms: rtt as f64 / 1e6,
            rate_bps: rate,
            alpha: (a * 1000.0).round() / 1000.0,
            beta: (b * 1000.0).round() / 1000.0,
            fitness: f,
        });
    }
    let table = SmccTable {
        entry: entries,
        path: out.to_path_buf(),
    };
    let text = format!(
        "# SMCC offline table, written by `cclab tune smcc` at {}.\n# Use it with --cc smcc:table={}\n# Each entry: the best (alpha, beta) found for a condition (base RTT, bottleneck rate).\n\n{}",
        crate::run::now_rfc3339(),
        out.display(),
        toml::to_string(&table).unwrap_or_default()
    );
    if let Some(p) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(p)?;
    }
    let tmp = out.with_extension("toml.part");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, out)?;
    Ok((table, evals))
}

/// The default work directory for a table.
pub fn default_work(out: &Path) -> PathBuf {
    out.with_extension("runs")
}
