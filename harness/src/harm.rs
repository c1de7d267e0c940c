//! Harm: how much a candidate algorithm takes from a reference flow
//! sharing its bottleneck, measured against what the reference suffers
//! from its own kind (Ware, Mukerjee, Seshan and Sherry, "Beyond Jain's
//! Fairness Index: Setting the Bar for the Deployment of Congestion
//! Control Algorithms", HotNets 2019).
//!
//! Two runs per point, the same link and the same start: the reference
//! against a second reference flow, and the reference against the
//! candidate. For each metric, `x` is the reference's figure against its
//! own kind (the mean of its two flows, which play the same part) and `y`
//! its figure against the candidate:
//!
//! - a metric where more is better (throughput): harm = (x − y) / x;
//! - a metric where less is better (RTT, loss rate): harm = (y − x) / y;
//!
//! either way 0 when the candidate leaves the reference no worse off than
//! its own kind does (the value is then negative, and clamped; the
//! report keeps `x` and `y`), and 1 when it takes everything (no
//! throughput left, or every bit of delay or loss caused by it).
//!
//! [`run_harm`] runs the points; `cclab harm` is its command line.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::run::{self, RunConfig, RunSummary};
use crate::scenario::Scenario;

/// One metric's harm: the reference's figure against its own kind (`x`),
/// against the candidate (`y`), and the harm between them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HarmFigure {
    /// `throughput_bps`, `rtt_mean_ms`, `rtt_p95_ms` or `loss_rate`.
    pub metric: &'static str,
    /// Whether more is better (throughput) or less (delay, loss).
    pub more_is_better: bool,
    /// The reference's figure against its own kind.
    pub x: f64,
    /// The reference's figure against the candidate.
    pub y: f64,
    /// The candidate's own figure in that run, for context.
    pub candidate: f64,
    /// In [0, 1]; see the module's text.
    pub harm: f64,
}

/// Harm of `y` against `x` (see the module's text): in [0, 1], 0 when a
/// figure is missing (NaN) or not positive where it divides.
pub fn harm(x: f64, y: f64, more_is_better: bool) -> f64 {
    let h = if more_is_better {
        if x > 0.0 {
            (x - y) / x
        } else {
            0.0
        }
    } else if y > 0.0 {
        (y - x) / y
    } else {
        0.0
    };
    if h.is_finite() {
        h.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The figures of one flow of a run summary that harm compares.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowFigures {
    /// Goodput, bit/s.
    pub throughput_bps: f64,
    /// Mean RTT, ms.
    pub rtt_mean_ms: f64,
    /// 95th percentile RTT, ms.
    pub rtt_p95_ms: f64,
    /// Packets the sender declared lost over those it sent.
    pub loss_rate: f64,
}

impl FlowFigures {
    /// Flow `i` of a run's summary (its means over the repetitions).
    pub fn of(s: &RunSummary, i: usize) -> Option<FlowFigures> {
        let f = s.flows.get(i)?;
        let rtt = f.rtt_ms.as_ref();
        Some(FlowFigures {
            throughput_bps: f.goodput_bps,
            rtt_mean_ms: rtt.map_or(f64::NAN, |r| r.mean),
            rtt_p95_ms: rtt.map_or(f64::NAN, |r| r.p95),
            loss_rate: f.loss_rate.unwrap_or(f64::NAN),
        })
    }

    fn mean(a: FlowFigures, b: FlowFigures) -> FlowFigures {
        FlowFigures {
            throughput_bps: (a.throughput_bps + b.throughput_bps) / 2.0,
            rtt_mean_ms: (a.rtt_mean_ms + b.rtt_mean_ms) / 2.0,
            rtt_p95_ms: (a.rtt_p95_ms + b.rtt_p95_ms) / 2.0,
            loss_rate: (a.loss_rate + b.loss_rate) / 2.0,
        }
    }
}

/// Every metric's harm, from the reference's two flows against its own
/// kind (`own`), and the reference and the candidate in the other run.
pub fn figures(
    own: [FlowFigures; 2],
    reference: FlowFigures,
    candidate: FlowFigures,
) -> Vec<HarmFigure> {
    let x = FlowFigures::mean(own[0], own[1]);
    let one = |metric, more_is_better, f: fn(&FlowFigures) -> f64| HarmFigure {
        metric,
        more_is_better,
        x: f(&x),
        y: f(&reference),
        candidate: f(&candidate),
        harm: harm(f(&x), f(&reference), more_is_better),
    };
    // A metric no run measured (the loss rate without per-packet qlog
    // events) is left out, not reported as no harm.
    [
        one("throughput_bps", true, |f| f.throughput_bps),
        one("rtt_mean_ms", false, |f| f.rtt_mean_ms),
        one("rtt_p95_ms", false, |f| f.rtt_p95_ms),
        one("loss_rate", false, |f| f.loss_rate),
    ]
    .into_iter()
    .filter(|h| h.x.is_finite() && h.y.is_finite())
    .collect()
}

/// Each flow of a harm run starts at a time drawn from [0, this) per
/// repetition, so repetitions differ on a deterministic link.
pub const START_JITTER: &str = "100ms";

/// What to compare, where.
#[derive(Clone, Debug)]
pub struct HarmPlan {
    /// The runs' shared part: link, duration, repetitions, seed, and two
    /// flows of the reference (each starting within [`START_JITTER`]).
    base: Scenario,
    /// The algorithm harmed (a spec, `newreno` or `cubic:beta=0.7`).
    pub reference: String,
    /// The algorithm judged.
    pub candidate: String,
    /// Queue limits, one point each (`1bdp`, `4bdp`, `100pkt`).
    pub queues: Vec<String>,
}
/// One point: a queue limit and every metric's harm.
#[derive(Clone, Debug, Serialize)]
pub struct HarmPoint {
    /// The queue limit as written.
    pub queue: String,
    /// The link as run.
    pub link: String,
    /// The two runs' result directories, relative to the output.
    pub runs: [String; 2],
    /// Each metric.
    pub figures: Vec<HarmFigure>,
}

/// What `harm.json` holds.
#[derive(Clone, Debug, Serialize)]
pub struct HarmReport {
    /// The algorithm harmed.
    pub reference: String,
    /// The algorithm judged.
    pub candidate: String,
    /// Each run's length.
    pub duration: String,
    /// Repetitions of each run.
    pub repetitions: u32,
    /// Every point.
    pub points: Vec<HarmPoint>,
    /// Set when a stop request ended it early (the points run are kept).
    pub interrupted: bool,
}

impl HarmPlan {
    /// The plan on `base`'s link, duration, repetitions and seed (its own
    /// flows are replaced); every scenario is checked here, before
    /// anything runs.
    pub fn new(
        base: &Scenario,
        reference: &str,
        candidate: &str,
        queues: Vec<String>,
    ) -> Result<HarmPlan, String> {
        let mut t = base.to_toml();
        let flow = |cc: &str| {
            let mut f = toml::Table::new();
            f.insert("cc".into(), cc.into());
            f.insert("start_jitter".into(), START_JITTER.into());
            toml::Value::Table(f)
        };
        t.insert(
            "flows".into(),
            toml::Value::Array(vec![flow(reference), flow(reference)]),
        );
        let text = toml::to_string(&t).map_err(|e| e.to_string())?;
        let plan = HarmPlan {
            base: Scenario::parse(&text, "harm", Path::new(".")).map_err(|e| e.to_string())?,
            reference: reference.into(),
            candidate: candidate.into(),
            queues,
        };
        for q in &plan.queues {
            plan.scenario(q, candidate)?;
        }
        Ok(plan)
    }

    /// The scenario of one run: the reference and `other`, on the link
    /// with queue `queue`.
    pub fn scenario(&self, queue: &str, other: &str) -> Result<Scenario, String> {
        // Named as the point's own field: the override would name the
        // direction it reached first.
        crate::link::units::parse_queue_field("link.queue", queue).map_err(|e| e.to_string())?;
        self.base
            .with_overrides(
                &[
                    ("link.queue".into(), queue.into()),
                    ("flows.1.cc".into(), other.into()),
                ],
                "harm",
            )
            .map_err(|e| e.to_string())
    }
}

/// Runs every point of `plan` under `cfg` (its `out` is the parent of the
/// runs) and writes `harm.json` there, atomically, after each point.
pub fn run_harm(plan: &HarmPlan, cfg: &RunConfig) -> anyhow::Result<HarmReport> {
    std::fs::create_dir_all(&cfg.out)?;
    let mut report = HarmReport {
        reference: plan.reference.clone(),
        candidate: plan.candidate.clone(),
        duration: crate::link::units::format_duration_ns(plan.base.duration_ns),
        repetitions: plan.base.repetitions,
        points: Vec::new(),
        interrupted: false,
    };
    let stopped = || cfg.stop.load(std::sync::atomic::Ordering::Relaxed);
    for q in &plan.queues {
        let mut sums = Vec::new();
        let mut runs = Vec::new();
        for (arm, other) in [
            ("own-kind", &plan.reference),
            ("candidate", &plan.candidate),
        ] {
            if stopped() {
                report.interrupted = true;
                crate::files::write_json_atomic(&cfg.out.join("harm.json"), &report)?;
                return Ok(report);
            }
            let sc = plan
                .scenario(q, other)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let dir: PathBuf = format!("queue-{q}/{arm}").into();
            let c = RunConfig {
                out: cfg.out.join(&dir),
                ..cfg.clone()
            };
            if !cfg.quiet {
                eprintln!("cclab harm: queue {q}: {} vs {other}", plan.reference);
            }
            let s = run::run(&sc, &c)?;
            runs.push(dir.display().to_string());
            sums.push((sc.link.describe(), s));
        }
        let get = |k: usize, i: usize| {
            FlowFigures::of(&sums[k].1, i)
                .ok_or_else(|| anyhow::anyhow!("queue {q}: run {} has no flow {i}", runs[k]))
        };
        let own = [get(0, 0)?, get(0, 1)?];
        report.points.push(HarmPoint {
            queue: q.clone(),
            link: sums[0].0.clone(),
            runs: [runs[0].clone(), runs[1].clone()],
            figures: figures(own, get(1, 0)?, get(1, 1)?),
        });
        crate::files::write_json_atomic(&cfg.out.join("harm.json"), &report)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harm_follows_the_definition_on_constructed_cases() {
        // Throughput: 10 against its own kind, 6 against the candidate.
        assert!((harm(10.0, 6.0, true) - 0.4).abs() < 1e-12);
        // The candidate leaves more than its own kind does: no harm.
        assert_eq!(harm(10.0, 12.0, true), 0.0);
        // Everything taken.
        assert_eq!(harm(10.0, 0.0, true), 1.0);
        // Delay: 50 ms against its own kind, 100 against the candidate:
        // half of what it now suffers is the candidate's doing.
        assert!((harm(50.0, 100.0, false) - 0.5).abs() < 1e-12);
        assert_eq!(harm(50.0, 40.0, false), 0.0);
        // Loss: none against its own kind, 1% against the candidate.
        assert_eq!(harm(0.0, 0.01, false), 1.0);
        assert_eq!(harm(0.0, 0.0, false), 0.0);
        // A figure that is missing gives no harm, never NaN.
        assert_eq!(harm(f64::NAN, 1.0, false), 0.0);
        assert_eq!(harm(0.0, 5.0, true), 0.0);
    }

    #[test]
    fn figures_compare_the_reference_with_the_mean_of_its_own_kind() {
        let f = |t: f64, r: f64, p: f64, l: f64| FlowFigures {
            throughput_bps: t,
            rtt_mean_ms: r,
            rtt_p95_ms: p,
            loss_rate: l,
        };
        // Against its own kind the two reference flows got 11 and 9
        // Mbit/s (x = 10); against the candidate 4 (harm 0.6), with
        // 60 ms mean RTT for 45 before (harm 0.25), a p95 that fell (no
        // harm) and twice the loss (harm 0.5).
        let out = figures(
            [f(11e6, 44.0, 80.0, 0.01), f(9e6, 46.0, 80.0, 0.01)],
            f(4e6, 60.0, 70.0, 0.02),
            f(16e6, 60.0, 70.0, 0.03),
        );
        let h: Vec<(&str, f64)> = out.iter().map(|x| (x.metric, x.harm)).collect();
        assert_eq!(h[0].0, "throughput_bps");
        assert!((h[0].1 - 0.6).abs() < 1e-12, "{h:?}");
        assert!((h[1].1 - 0.25).abs() < 1e-12, "{h:?}");
        assert_eq!(h[2].1, 0.0);
        assert!((h[3].1 - 0.5).abs() < 1e-12, "{h:?}");
        assert_eq!(out[0].x, 10e6);
        assert_eq!(out[0].candidate, 16e6);
    }

    #[test]
    fn a_plan_names_a_bad_algorithm_or_queue() {
        let base = Scenario::parse(
            "duration = \"5s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\n",
            "t",
            Path::new("."),
        )
        .unwrap();
        let plan = HarmPlan::new(&base, "newreno", "cubic", vec!["1bdp".into()]).unwrap();
        let sc = plan.scenario("4bdp", "cubic").unwrap();
        let ccs: Vec<&str> = sc.flows.iter().map(|f| f.cc.as_str()).collect();
        assert_eq!(ccs, ["newreno", "cubic"]);
        assert_eq!(sc.flows[1].start_jitter_ns, 100_000_000);
        assert_eq!(sc.duration_ns, 5_000_000_000);
        let e = plan.scenario("1bdp", "nosuch").unwrap_err();
        assert!(e.contains("nosuch"), "{e}");
        let e = plan.scenario("lots", "cubic").unwrap_err();
        assert!(e.contains("link.queue"), "{e}");
        // Checked when made: a bad reference, candidate or queue.
        for (r, c, q) in [
            ("nosuch", "cubic", "1bdp"),
            ("newreno", "nosuch", "1bdp"),
            ("newreno", "cubic", "lots"),
        ] {
            assert!(
                HarmPlan::new(&base, r, c, vec![q.into()]).is_err(),
                "{r} {c} {q}"
            );
        }
    }
}
