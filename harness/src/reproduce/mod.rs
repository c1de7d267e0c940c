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

pub mod check;
pub(crate) mod claims;
pub mod expr;
pub(crate) mod figures;
pub(crate) mod jobs;
pub mod manifest;
pub mod metrics;
pub mod publish;
pub mod quote;
pub(crate) mod validate;
mod writeup;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::link::Backend;
use expr::Stat;
use jobs::Job;
use manifest::{Manifest, Point};
use metrics::RunData;

pub use claims::{Class, Counts};
pub use jobs::point_scenario;
pub use writeup::{markdown, terminal};

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
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
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
    /// PASS, FAIL or N/A: whether the test holds on the means.
    pub verdict: String,
    /// How it counts: `pass`, `pass-within-noise`, `fail`,
    /// `fail-within-noise`, `unmeasured`, `n/a`, `duplicate`,
    /// `contradictory` or `guaranteed`.
    pub class: claims::Class,
    /// Whether the outcome is beyond the repetitions' 95% confidence
    /// intervals (ignoring the minimum effect).
    pub significant: bool,
    /// The measured difference, % of the larger side (comparisons and
    /// trends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect_pct: Option<f64>,
    /// The claim's minimum effect, %.
    pub min_effect_pct: f64,
    /// The measured figures behind the verdict and the relation observed.
    pub detail: String,
    /// Why: the likely reason of a FAIL, or why it is N/A.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A reservation that holds whatever the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
    /// Other remarks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The claim this one duplicates or contradicts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<String>,
    /// What of ours the claim tests instead of the paper's text; its
    /// verdict is counted apart (`Counts::reinterpretation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reinterpretation: Option<String>,
}

impl ClaimResult {
    /// The verdict as tables print it (`PASS (within noise)`, ...).
    pub fn label(&self) -> String {
        let l = self.class.label(&self.verdict, self.related.as_deref());
        match (&self.reinterpretation, self.class) {
            (
                Some(_),
                Class::Pass | Class::Fail | Class::PassWithinNoise | Class::FailWithinNoise,
            ) => format!("{l} (our reinterpretation, counted apart)"),
            _ => l,
        }
    }
}

/// What made a reproduction's runs: the commit and a fingerprint of the
/// binaries that ran them. Runs are reused only under the same build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Build {
    /// `git describe`-style revision the binary was built at.
    pub git_revision: String,
    /// A hash of the binaries' bytes (cclab; with emu and netem also
    /// quic-server and quic-client).
    pub fingerprint: String,
}

impl Build {
    /// This process's build, for `backend` (the cclab binary is read
    /// through /proc/self/exe where there is one, so a rebuild during a
    /// long reproduction does not lose it; computed once per process).
    pub fn current(backend: Backend, bin_dir: &Path) -> std::io::Result<Build> {
        use std::hash::Hasher;
        use std::sync::OnceLock;
        // (length, hash) of this process's own binary.
        static SELF: OnceLock<(usize, u64)> = OnceLock::new();
        let me = match SELF.get() {
            Some(v) => *v,
            None => {
                let bytes = std::fs::read("/proc/self/exe")
                    .or_else(|_| std::fs::read(std::env::current_exe()?))?;
                let mut hh = std::collections::hash_map::DefaultHasher::new();
                hh.write(&bytes);
                *SELF.get_or_init(|| (bytes.len(), hh.finish()))
            }
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        h.write_usize(me.0);
        h.write_u64(me.1);
        // A real run's results depend on the endpoints it starts too.
        if backend.real_time() {
            for f in [bin_dir.join("quic-server"), bin_dir.join("quic-client")] {
                let bytes = std::fs::read(&f)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
                h.write_usize(bytes.len());
                h.write(&bytes);
            }
        }
        Ok(Build {
            git_revision: env!("CCLAB_GIT_REV").to_string(),
            fingerprint: format!("{:016x}", h.finish()),
        })
    }
}

/// One paper's reproduction.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
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
    /// The build that made every run (older runs are re-run, not reused).
    pub build: Build,
    /// Verdicts counted (see [`Counts`]).
    pub counts: Counts,
    /// Claims.
    pub claims: Vec<ClaimResult>,
    /// The claims evaluated again on sensitivity runs (never counted).
    pub sensitivity: Vec<Sensitivity>,
    /// Figures written (file names in the paper's directory).
    pub figures: Vec<String>,
    /// The paper's output directory (none where published: a path on the
    /// machine that made it).
    #[serde(default, skip_serializing_if = "path_is_empty")]
    pub dir: PathBuf,
}

fn path_is_empty(p: &Path) -> bool {
    p.as_os_str().is_empty()
}

/// One sensitivity experiment: its base experiment's claims evaluated on
/// its runs.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Sensitivity {
    /// The sensitivity experiment.
    pub experiment: String,
    /// The experiment it varies.
    pub of: String,
    /// What differs (the experiment's `source`).
    pub varies: String,
    /// Each claim of the base experiment as measured here (ids unchanged).
    pub claims: Vec<ClaimResult>,
}

/// Every sensitivity experiment's claims.
fn sensitivity_runs(
    m: &Manifest,
    jobs: &[Job],
    data: &claims::Data,
    base: &[ClaimResult],
) -> Vec<Sensitivity> {
    m.experiments
        .iter()
        .filter_map(|e| {
            let of = e.sensitivity_of.as_ref()?;
            let claims = m
                .claims
                .iter()
                .zip(base)
                .filter(|(c, _)| c.experiment.as_deref() == Some(of.as_str()))
                .map(|(c, b)| {
                    let mut c = c.clone();
                    c.experiment = Some(e.id.clone());
                    // Quoted figures without @experiment come from these runs.
                    let mut r = claims::evaluate(m, &c, jobs, data);
                    if matches!(b.class, Class::Duplicate | Class::Contradictory) {
                        r.class = b.class;
                        r.related = b.related.clone();
                    }
                    r
                })
                .collect();
            Some(Sensitivity {
                experiment: e.id.clone(),
                of: of.clone(),
                varies: e.source.clone(),
                claims,
            })
        })
        .collect()
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

/// Reproduces one paper.
pub fn reproduce(paper_dir: &Path, opts: &Options) -> Result<PaperResult, ReproError> {
    let t0 = Instant::now();
    let m = Manifest::load(paper_dir)?;
    let out = opts.out.join(&m.paper);
    std::fs::create_dir_all(&out)?;
    let jobs = jobs::plan(&m, &out, opts)?;
    let builds = jobs::Builds::of(&jobs, opts.backend, &opts.bin_dir)?;
    let build = builds.get(opts.backend).clone();
    let (ran, failed) = jobs::run_jobs(
        &format!("cclab reproduce {}", m.paper),
        &jobs,
        &builds,
        None,
        opts,
    )?;
    let interrupted = opts.stop.load(Ordering::Relaxed);

    // Measurements.
    let data: claims::Data = jobs
        .iter()
        .map(|j| {
            (
                j.dir.clone(),
                RunData::load(&j.dir).map_err(|e| e.to_string()),
            )
        })
        .collect();
    let mut claims: Vec<ClaimResult> = m
        .claims
        .iter()
        .map(|c| claims::evaluate(&m, c, &jobs, &data))
        .collect();
    claims::relate(&m, &mut claims);
    let sensitivity = sensitivity_runs(&m, &jobs, &data, &claims);
    let figures = figures::figures(&m, &jobs_view(&jobs), &data, &out);
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
        build,
        counts: Counts::of(&claims),
        claims,
        sensitivity,
        figures,
        dir: out.clone(),
    };
    crate::files::write_json_atomic(&out.join("claims.json"), &r)?;
    let md = writeup::markdown(&m, &r, &jobs_view(&jobs));
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
