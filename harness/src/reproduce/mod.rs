//! `cclab reproduce`: each seed paper's evaluation re-run, and its claims
//! checked against our measurements.
//!
//! A paper is a directory under `scenarios/reproduce/` holding
//! `paper.toml` (experiments, claims, figures: see [`manifest`]) and the
//! scenarios it names. Every point of every experiment runs once into
//! `OUT/<paper>/runs/<experiment>/<point>/` (a normal result directory;
//! a complete one whose scenario is unchanged is reused, so an interrupted
//! reproduction resumes). Then each claim's metric is read per repetition,
//! its directional test evaluated on the means, and the paper's directory
//! gets `claims.json`, `REPRODUCTION.md` and the redrawn figures.

pub mod expr;
pub mod manifest;
pub mod metrics;
mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::link::Backend;
use crate::run::{RunConfig, RunError};
use crate::scenario::Scenario;
use expr::{Stat, Test};
use manifest::{Claim, Experiment, Manifest, Point, Selector};
use metrics::RunData;

pub use render::{markdown, terminal};

/// How to reproduce.
#[derive(Clone, Debug)]
pub struct Options {
    /// Output root: each paper writes `OUT/<paper>/`.
    pub out: PathBuf,
    /// Fewer repetitions and shorter runs (each experiment's `quick`).
    pub quick: bool,
    /// The link backend for every run (sim by default).
    pub backend: Backend,
    /// Runs at once.
    pub jobs: usize,
    /// No progress output.
    pub quiet: bool,
    /// Set to stop between (and inside) runs.
    pub stop: Arc<AtomicBool>,
    /// Where `quic-server` and `quic-client` are (emu, netem).
    pub bin_dir: PathBuf,
    /// qlog level of the runs.
    pub qlog_level: quic_app::QlogLevel,
}

/// One measured value of a claim.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    /// The claim's label.
    pub label: String,
    /// The `over` axis label it was measured at, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Mean, 95% half-width, repetitions.
    #[serde(flatten)]
    pub stat: Stat,
}

/// A claim and its verdict.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    /// Identifier.
    pub id: String,
    /// Where in the paper.
    pub source: String,
    /// The claim in words.
    pub statement: String,
    /// Metric compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The paper's value(s), or its words.
    pub paper: serde_json::Value,
    /// Ours: mean ± 95% CI per label (and per `over` label).
    pub ours: Vec<Measured>,
    /// The directional test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The axis the test runs along.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    /// PASS, FAIL or N/A.
    pub verdict: String,
    /// Whether the outcome is beyond the repetitions' noise.
    pub significant: bool,
    /// The measured figures behind the verdict.
    pub detail: String,
    /// Why: the likely reason of a FAIL, or why it is N/A.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Other remarks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One paper's reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct PaperResult {
    /// Short name.
    pub paper: String,
    /// Title.
    pub title: String,
    /// The seed file.
    pub seed: String,
    /// Backend used.
    pub backend: String,
    /// `--quick`.
    pub quick: bool,
    /// Runs (points) and how many were run now (the rest reused).
    pub runs: usize,
    /// Runs executed now.
    pub ran: usize,
    /// Runs that failed.
    pub failed: Vec<String>,
    /// Interrupted before finishing.
    pub interrupted: bool,
    /// Wall time, s.
    pub wall_s: f64,
    /// Claims.
    pub claims: Vec<ClaimResult>,
    /// Figures written (file names in the paper's directory).
    pub figures: Vec<String>,
    /// The paper's output directory.
    pub dir: PathBuf,
}

impl PaperResult {
    /// Verdict counts: PASS, FAIL, N/A.
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |v: &str| self.claims.iter().filter(|c| c.verdict == v).count();
        (n("PASS"), n("FAIL"), n("N/A"))
    }
}

/// Why a reproduction could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// The manifest is wrong.
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    /// A scenario is wrong.
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    /// Files.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The papers under `root` (directories with a `paper.toml`), by name.
pub fn papers(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(root)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join("paper.toml").exists())
                .map(|p| {
                    (
                        p.file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .into_owned(),
                        p,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
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
const QLOG_METRICS: &[&str] = &["rtt_ms", "rtt_p95_ms", "cwnd_cv", "cwnd_kb", "lost"];

/// The qlog level point `p` of experiment `e` needs: `opts.qlog_level`
/// when a claim or figure reads the senders' qlog there, else off (qlog
/// more than halves a simulation's speed and takes most of its disk).
fn qlog_for(m: &Manifest, e: &Experiment, p: &Point, opts: &Options) -> quic_app::QlogLevel {
    let hits = |sels: &BTreeMap<String, String>| {
        sels.values()
            .any(|s| Selector::parse(s).is_ok_and(|sel| p.matches(&sel)))
    };
    let claims = m.claims.iter().any(|c| {
        c.experiment.as_deref() == Some(e.id.as_str())
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
    if claims || figures {
        opts.qlog_level
    } else {
        quic_app::QlogLevel::Off
    }
}

struct Job {
    exp: usize,
    qlog: quic_app::QlogLevel,
    point: Point,
    dir: PathBuf,
    scenario: Scenario,
}

/// Reproduces one paper.
pub fn reproduce(paper_dir: &Path, opts: &Options) -> Result<PaperResult, ReproError> {
    let t0 = Instant::now();
    let m = Manifest::load(paper_dir)?;
    let out = opts.out.join(&m.paper);
    std::fs::create_dir_all(&out)?;
    // Every point's scenario first: a bad field stops the paper before
    // anything runs.
    let mut jobs = Vec::new();
    for (ei, e) in m.experiments.iter().enumerate() {
        for p in e.points(opts.quick) {
            let scenario = point_scenario(&m, e, &p, opts)?;
            let dir = out.join("runs").join(&e.id).join(p.dir_name());
            jobs.push(Job {
                exp: ei,
                qlog: qlog_for(&m, e, &p, opts),
                point: p,
                dir,
                scenario,
            });
        }
    }
    let (ran, failed) = run_jobs(&m, &jobs, opts)?;
    let interrupted = opts.stop.load(Ordering::Relaxed);

    // Measurements.
    let mut data: BTreeMap<PathBuf, Result<RunData, String>> = BTreeMap::new();
    for j in &jobs {
        data.insert(
            j.dir.clone(),
            RunData::load(&j.dir).map_err(|e| e.to_string()),
        );
    }
    let claims: Vec<ClaimResult> = m
        .claims
        .iter()
        .map(|c| evaluate(&m, c, &jobs, &data))
        .collect();
    let figures = render::figures(&m, &jobs_view(&jobs), &data, &out);
    let r = PaperResult {
        paper: m.paper.clone(),
        title: m.title.clone(),
        seed: m.seed.clone(),
        backend: opts.backend.as_str().into(),
        quick: opts.quick,
        runs: jobs.len(),
        ran,
        failed,
        interrupted,
        wall_s: t0.elapsed().as_secs_f64(),
        claims,
        figures,
        dir: out.clone(),
    };
    crate::run::write_json_atomic(&out.join("claims.json"), &r)?;
    let md = render::markdown(&m, &r, &jobs_view(&jobs));
    let tmp = out.join(".REPRODUCTION.md.tmp");
    std::fs::write(&tmp, md)?;
    std::fs::rename(&tmp, out.join("REPRODUCTION.md"))?;
    Ok(r)
}

/// (experiment index, point, run directory) of every job.
pub(crate) type JobView<'a> = Vec<(usize, &'a Point, &'a Path)>;

fn jobs_view(jobs: &[Job]) -> JobView<'_> {
    jobs.iter()
        .map(|j| (j.exp, &j.point, j.dir.as_path()))
        .collect()
}

/// Runs what is not already complete; returns (runs executed, failures).
fn run_jobs(
    m: &Manifest,
    jobs: &[Job],
    opts: &Options,
) -> Result<(usize, Vec<String>), ReproError> {
    // Reuse complete runs of the same scenario; re-run stale ones.
    let mut todo = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let want = toml::to_string(&j.scenario.to_toml()).unwrap_or_default();
        let complete = std::fs::read_to_string(j.dir.join("status.json"))
            .is_ok_and(|s| s.contains("\"complete\""));
        let same = std::fs::read_to_string(j.dir.join("scenario.toml")).is_ok_and(|s| s == want);
        if complete && same {
            continue;
        }
        if j.dir.exists() {
            std::fs::remove_dir_all(&j.dir)?;
        }
        if let Some(p) = j.dir.parent() {
            std::fs::create_dir_all(p)?;
        }
        todo.push(i);
    }
    if !opts.quiet {
        eprintln!(
            "cclab reproduce {}: {} run(s), {} to do, {} reused; {} at once on {}",
            m.paper,
            jobs.len(),
            todo.len(),
            jobs.len() - todo.len(),
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
                let j = &jobs[i];
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
                };
                let t = Instant::now();
                let res = crate::run::run(&j.scenario, &cfg);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                let name = format!("{}/{}", m.experiments[j.exp].id, j.point.dir_name());
                let status = match &res {
                    Ok(s) if s.status == "complete" => "done".to_string(),
                    Ok(s) => {
                        failed.lock().unwrap().push(format!("{name}: {}", s.status));
                        s.status.clone()
                    }
                    Err(RunError::Exists(_)) => "done".to_string(),
                    Err(e) => {
                        failed.lock().unwrap().push(format!("{name}: {e}"));
                        format!("failed: {e}")
                    }
                };
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

/// Why a selector matched no point: validation guarantees it names real
/// labels, so the point was left out by `--quick`.
const SKIPPED: &str = "no point matches: left out by --quick";

/// The point of `e` that `sel` picks, restricted to `at` (axis, label).
fn pick<'a>(
    jobs: &'a [Job],
    exp: usize,
    sel: &Selector,
    at: Option<(&str, &str)>,
) -> Result<&'a Job, String> {
    let c: Vec<&Job> = jobs
        .iter()
        .filter(|j| j.exp == exp && j.point.matches(sel))
        .filter(|j| at.is_none_or(|(a, l)| j.point.coord(a) == Some(l)))
        .collect();
    match c.len() {
        1 => Ok(c[0]),
        0 => Err(SKIPPED.into()),
        n => Err(format!(
            "{n} points match; add axis conditions so that one does ({})",
            c.iter()
                .map(|j| j.point.dir_name())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn measure(
    jobs: &[Job],
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
    exp: usize,
    metric: &str,
    selector: &str,
    at: Option<(&str, &str)>,
) -> Result<Stat, String> {
    let sel = Selector::parse(selector)?;
    let j = pick(jobs, exp, &sel, at)?;
    let d = data
        .get(&j.dir)
        .ok_or("no run")?
        .as_ref()
        .map_err(|e| format!("run {} has no results: {e}", j.point.dir_name()))?;
    let v = d
        .values(metric, sel.flow.as_deref())
        .map_err(|e| e.to_string())?;
    Stat::of(&v).ok_or_else(|| format!("{metric} was not measured in {}", j.point.dir_name()))
}

fn evaluate(
    m: &Manifest,
    c: &Claim,
    jobs: &[Job],
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
) -> ClaimResult {
    let paper = c
        .paper
        .as_ref()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(serde_json::Value::Null);
    let mut r = ClaimResult {
        id: c.id.clone(),
        source: c.source.clone(),
        statement: c.statement.clone(),
        metric: c.metric.clone(),
        paper,
        ours: Vec::new(),
        test: c.test.clone(),
        over: c.over.clone(),
        verdict: "N/A".into(),
        significant: false,
        detail: String::new(),
        reason: c.na.clone(),
        note: c.note.clone(),
    };
    if c.na.is_some() {
        return r;
    }
    // Validated by Manifest::load.
    let exp = m
        .experiments
        .iter()
        .position(|e| Some(&e.id) == c.experiment.as_ref())
        .expect("validated experiment");
    let e = &m.experiments[exp];
    let metric = c.metric.clone().unwrap_or_default();
    let test = Test::parse(c.test.as_deref().unwrap_or("")).expect("validated test");
    let fail = |r: &mut ClaimResult, why: String| {
        r.verdict = "FAIL".into();
        r.detail = format!("no measurement: {why}");
        r.reason = Some("a run is missing or failed (see the detail); nothing was measured".into());
    };
    // The `over` axis labels present in this run (quick may keep fewer).
    let over: Vec<(String, f64)> = match &c.over {
        None => Vec::new(),
        Some(o) => {
            let a = e
                .axes
                .iter()
                .find(|a| &a.name == o)
                .expect("validated axis");
            (0..a.values.len())
                .map(|i| (Experiment::label(a, i), Experiment::x(a, i)))
                .filter(|(l, _)| {
                    jobs.iter()
                        .any(|j| j.exp == exp && j.point.coord(o) == Some(l))
                })
                .collect()
        }
    };
    // Measure every label at every place.
    let places: Vec<Option<&str>> = if over.is_empty() {
        vec![None]
    } else {
        over.iter().map(|(l, _)| Some(l.as_str())).collect()
    };
    let mut table: Vec<expr::Row> = Vec::new();
    for at in &places {
        let mut row = BTreeMap::new();
        for (label, selector) in &c.values {
            let at2 = at.map(|l| (c.over.as_deref().unwrap_or(""), l));
            match measure(jobs, data, exp, &metric, selector, at2) {
                Ok(s) => {
                    r.ours.push(Measured {
                        label: label.clone(),
                        at: at.map(str::to_string),
                        stat: s,
                    });
                    row.insert(label.clone(), s);
                }
                Err(why) if why.starts_with(SKIPPED) => {
                    r.verdict = "N/A".into();
                    r.ours.clear();
                    r.reason = Some(format!(
                        "not run in --quick: {label} ({selector}{}) is a point --quick leaves out",
                        at.map(|a| format!(" at {a}")).unwrap_or_default()
                    ));
                    return r;
                }
                Err(why) => {
                    fail(
                        &mut r,
                        format!("{label} ({selector}) {}: {why}", at.unwrap_or("")),
                    );
                    return r;
                }
            }
        }
        table.push(row);
    }
    let outcome = if test.is_trend() {
        let series: Vec<(f64, expr::Row)> = over
            .iter()
            .zip(&table)
            .map(|((_, x), row)| (*x, row.clone()))
            .collect();
        test.eval_trend(&series)
    } else {
        let mut outs = Vec::new();
        for (k, row) in table.iter().enumerate() {
            match test.eval(row) {
                Ok(mut o) => {
                    if let Some(Some(at)) = places.get(k) {
                        o.detail =
                            format!("{} {at}: {}", c.over.as_deref().unwrap_or(""), o.detail);
                    }
                    outs.push(o);
                }
                Err(e) => {
                    fail(&mut r, e);
                    return r;
                }
            }
        }
        let n = outs.len();
        let held = outs.iter().filter(|o| o.holds).count();
        let sig = outs.iter().filter(|o| o.significant).count();
        let most = c.require.as_deref() == Some("most");
        let holds = if most { 2 * held > n } else { held == n };
        let significant = if most { 2 * sig > n } else { sig == n };
        Ok(expr::Outcome {
            holds,
            significant,
            detail: if n > 1 {
                format!(
                    "holds at {held} of {n} {}: {}",
                    c.over.as_deref().unwrap_or("points"),
                    outs.iter()
                        .map(|o| o.detail.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            } else {
                outs.pop().map(|o| o.detail).unwrap_or_default()
            },
        })
    };
    match outcome {
        Ok(o) => {
            r.verdict = if o.holds { "PASS" } else { "FAIL" }.into();
            r.significant = o.significant;
            r.detail = o.detail;
            if !o.holds {
                r.reason = c.if_fail.clone().or_else(|| {
                    Some(
                        "no explanation recorded yet; the measured figures are in the detail"
                            .into(),
                    )
                });
            }
        }
        Err(e) => fail(&mut r, e),
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

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
values = ["a", "b", "c"]
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
                quic_app::QlogLevel::Metrics
            ]
        );
    }
}
