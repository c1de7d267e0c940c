//! The runs of a reproduction: one job per point of every experiment,
//! each a normal run into `runs/<experiment>/<point>/`, reused when a
//! complete run of the same scenario, made by the same build (commit and
//! binaries, `build.json` in the run), is already there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::manifest::{Experiment, Manifest, Point, Selector};
use super::{Build, Options, ReproError};
use crate::run::{RunConfig, RunError};
use crate::scenario::Scenario;

/// One point to run.
pub(super) struct Job {
    pub(super) exp: usize,
    pub(super) qlog: quic_app::QlogLevel,
    pub(super) point: Point,
    pub(super) dir: PathBuf,
    pub(super) scenario: Scenario,
}

/// The scenario of one point.
pub fn point_scenario(
    m: &Manifest,
    e: &Experiment,
    p: &Point,
    opts: &Options,
) -> Result<Scenario, ReproError> {
    let base = Scenario::load(&m.dir.join(&e.scenario))?;
    let mut ov: Vec<(String, toml::Value)> =
        e.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    ov.extend(p.overrides.iter().cloned());
    let source = format!("{}/paper.toml experiment {}", m.dir.display(), e.id);
    let mut sc = base.with_overrides(&ov, &source)?;
    sc.name = format!("{}/{}/{}", m.paper, e.id, p.dir_name());
    sc.link.backend = opts.backend;
    if opts.quick {
        if let Some(d) = &e.quick.duration {
            let ns = crate::link::units::parse_duration_ns(d).ok_or_else(|| {
                crate::scenario::ScenarioError {
                    source: source.clone(),
                    field: "quick.duration".into(),
                    problem: format!("`{d}` is not a time such as 20s"),
                }
            })?;
            sc.duration_ns = ns;
        }
        if let Some(r) = e.quick.repetitions {
            sc.repetitions = r.clamp(1, 1000);
        }
    }
    Ok(sc)
}

/// Metrics and figures that need the senders' qlog (the rest come from
/// the link and the clients' reports).
const QLOG_METRICS: &[&str] = &[
    "rtt_ms",
    "rtt_p95_ms",
    "cwnd_cv",
    "cwnd_kb",
    "lost",
    "eq7_mbps",
    "smcc_alpha",
    "smcc_alpha_min",
    "smcc_alpha_max",
];

/// The qlog level point `p` of experiment `e` needs: `opts.qlog_level`
/// when a claim or figure reads the senders' qlog there, else off (qlog
/// more than halves a simulation's speed and takes most of its disk).
fn qlog_for(m: &Manifest, e: &Experiment, p: &Point, opts: &Options) -> quic_app::QlogLevel {
    let hits = |sels: &BTreeMap<String, String>| {
        sels.values()
            .any(|s| Selector::parse(s).is_ok_and(|sel| p.matches(&sel)))
    };
    // A sensitivity run evaluates its base experiment's claims.
    let claims_of = e.sensitivity_of.as_deref().unwrap_or(e.id.as_str());
    let claims = m.claims.iter().any(|c| {
        c.experiment.as_deref() == Some(claims_of)
            && c.metric
                .as_deref()
                .is_some_and(|x| QLOG_METRICS.contains(&x))
            && hits(&c.values)
    });
    let figures = m.figures.iter().any(|f| {
        f.experiment == e.id
            && (matches!(f.kind.as_str(), "cwnd" | "rtt")
                || f.kind
                    .strip_prefix("metric:")
                    .is_some_and(|x| QLOG_METRICS.contains(&x)))
            && hits(&f.series)
    });
    // Figures quoted in explanations, measured where they point.
    let quoted = m.claims.iter().any(|c| {
        [&c.if_fail, &c.caveat, &c.note]
            .into_iter()
            .flatten()
            .filter_map(|t| super::quote::parse(t).ok())
            .flatten()
            .any(|q| {
                let exp = q.experiment.as_deref().or(c.experiment.as_deref());
                let here = exp == Some(e.id.as_str())
                    || (exp.is_some() && exp == e.sensitivity_of.as_deref());
                here && QLOG_METRICS.contains(&q.metric.as_str())
                    && Selector::parse(&q.selector).is_ok_and(|sel| p.matches(&sel))
            })
    });
    if claims || figures || quoted {
        opts.qlog_level
    } else {
        quic_app::QlogLevel::Off
    }
}

/// Every point's job, its scenario resolved first: a bad field stops the
/// paper before anything runs.
pub(super) fn plan(m: &Manifest, out: &Path, opts: &Options) -> Result<Vec<Job>, ReproError> {
    let mut jobs = Vec::new();
    for (ei, e) in m.experiments.iter().enumerate() {
        for p in e.points(opts.quick) {
            let scenario = point_scenario(m, e, &p, opts)?;
            let dir = out.join("runs").join(&e.id).join(p.dir_name());
            jobs.push(Job {
                exp: ei,
                qlog: qlog_for(m, e, &p, opts),
                point: p,
                dir,
                scenario,
            });
        }
    }
    Ok(jobs)
}

/// The file in a run directory naming the build that made it.
pub(super) const BUILD_FILE: &str = "build.json";

/// The build recorded in run directory `dir`, if any.
pub(super) fn recorded_build(dir: &Path) -> Option<Build> {
    let b = std::fs::read(dir.join(BUILD_FILE)).ok()?;
    serde_json::from_slice(&b).ok()
}

/// The jobs to run: all but complete runs of the same scenario made by
/// `build`; stale leftovers are removed. Also returns how many complete
/// runs of the same scenario are re-run because another build made them.
fn to_do(jobs: &[Job], build: &Build) -> Result<(Vec<usize>, usize), ReproError> {
    let mut todo = Vec::new();
    let mut rebuilt = 0;
    for (i, j) in jobs.iter().enumerate() {
        let want = toml::to_string(&j.scenario.to_toml()).unwrap_or_default();
        let complete = std::fs::read_to_string(j.dir.join("status.json"))
            .is_ok_and(|s| s.contains("\"complete\""));
        let same = std::fs::read_to_string(j.dir.join("scenario.toml")).is_ok_and(|s| s == want);
        let same_build = recorded_build(&j.dir).as_ref() == Some(build);
        if complete && same && same_build {
            continue;
        }
        if complete && same {
            rebuilt += 1;
        }
        if j.dir.exists() {
            std::fs::remove_dir_all(&j.dir)?;
        }
        if let Some(p) = j.dir.parent() {
            std::fs::create_dir_all(p)?;
        }
        todo.push(i);
    }
    Ok((todo, rebuilt))
}

/// Runs what is not already complete, `opts.jobs` at once; returns (runs
/// executed, failures).
pub(super) fn run_jobs(
    m: &Manifest,
    jobs: &[Job],
    build: &Build,
    opts: &Options,
) -> Result<(usize, Vec<String>), ReproError> {
    let (todo, rebuilt) = to_do(jobs, build)?;
    if !opts.quiet {
        eprintln!(
            "cclab reproduce {}: {} run(s), {} to do{}, {} reused; build {}; {} at once on {}",
            m.paper,
            jobs.len(),
            todo.len(),
            if rebuilt > 0 {
                format!(" ({rebuilt} complete but made by another build)")
            } else {
                String::new()
            },
            jobs.len() - todo.len(),
            build.git_revision,
            opts.jobs.max(1),
            opts.backend.as_str()
        );
    }
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let workers = opts.jobs.clamp(1, todo.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                if opts.stop.load(Ordering::Relaxed) {
                    return;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = todo.get(k) else {
                    return;
                };
                let t = Instant::now();
                let name = format!(
                    "{}/{}",
                    m.experiments[jobs[i].exp].id,
                    jobs[i].point.dir_name()
                );
                let (status, failure) = run_job(&jobs[i], opts, workers, &name, build);
                if let Some(f) = failure {
                    failed.lock().unwrap().push(f);
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if !opts.quiet {
                    let el = t0.elapsed().as_secs_f64();
                    let eta = el / n as f64 * (todo.len() - n) as f64;
                    eprintln!(
                        "  [{n}/{}] {}/{name}: {status} in {:.1} s (elapsed {:.0} s, ETA {:.0} s)",
                        todo.len(),
                        m.paper,
                        t.elapsed().as_secs_f64(),
                        el,
                        eta
                    );
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap_or_default();
    Ok((done.into_inner(), failed))
}

/// Runs one job (`workers` running beside it); its status for the
/// progress line, and the failure to report if it failed.
fn run_job(
    j: &Job,
    opts: &Options,
    workers: usize,
    name: &str,
    build: &Build,
) -> (String, Option<String>) {
    let cfg = RunConfig {
        out: j.dir.clone(),
        bin_dir: opts.bin_dir.clone(),
        backend: opts.backend,
        quiet: true,
        stop: opts.stop.clone(),
        per_packet_log: false,
        // Runs already go in parallel; with one worker the
        // repetitions of a run do.
        threads: if workers > 1 { 1 } else { 0 },
        qlog_level: j.qlog,
        emu_mode: crate::emu::EmuMode::Relay,
    };
    match crate::run::run(&j.scenario, &cfg) {
        Ok(s) if s.status == "complete" => {
            match crate::files::write_json_atomic(&j.dir.join(BUILD_FILE), build) {
                Ok(()) => ("done".to_string(), None),
                Err(e) => (
                    format!("failed: {e}"),
                    Some(format!("{name}: cannot record its build: {e}")),
                ),
            }
        }
        Ok(s) => (s.status.clone(), Some(format!("{name}: {}", s.status))),
        Err(RunError::Exists(_)) => ("done".to_string(), None),
        Err(e) => (format!("failed: {e}"), Some(format!("{name}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use super::*;
    use crate::link::Backend;

    #[test]
    fn qlog_only_where_a_claim_or_figure_reads_it() {
        let mut m: Manifest = toml::from_str(
            r#"paper = "p"
title = "t"
seed = "s"
[[experiment]]
id = "e"
source = "s"
scenario = "x.toml"
[[experiment.axis]]
name = "cc"
field = "flows.0.cc"
values = ["a", "b", "c", "d"]
[[claim]]
id = "rtt"
source = "s"
statement = "s"
experiment = "e"
metric = "rtt_ms"
values = { a = "cc=a" }
test = "a > 1"
[[claim]]
id = "drops"
source = "s"
statement = "s"
experiment = "e"
metric = "drops"
values = { b = "cc=b" }
test = "b > 1"
if_fail = "d declared {lost:cc=d} losses"
[[figure]]
id = "f"
source = "s"
paper_says = "s"
experiment = "e"
kind = "cwnd"
series = { c = "cc=c" }
"#,
        )
        .unwrap();
        m.dir = PathBuf::from(".");
        let opts = Options {
            out: PathBuf::from("/tmp"),
            quick: false,
            backend: Backend::Sim,
            jobs: 1,
            quiet: true,
            stop: Arc::new(AtomicBool::new(false)),
            bin_dir: PathBuf::from("."),
            qlog_level: quic_app::QlogLevel::Metrics,
        };
        let e = &m.experiments[0];
        let levels: Vec<_> = e
            .points(false)
            .iter()
            .map(|p| qlog_for(&m, e, p, &opts))
            .collect();
        assert_eq!(
            levels,
            [
                quic_app::QlogLevel::Metrics,
                quic_app::QlogLevel::Off,
                quic_app::QlogLevel::Metrics,
                quic_app::QlogLevel::Metrics
            ]
        );
    }
}
