//! `cclab tune ALG`: searches any registered algorithm's numeric parameters
//! for the values that maximise an objective, separately for each network
//! condition, and writes a table of the best values per condition.
//!
//! The harness knows the algorithm only through the registry: the
//! parameters and their allowed ranges come from its declarations
//! ([`space`]), the objective is an expression over a run's metrics
//! ([`objective`]), and every evaluation is an ordinary run of a scenario
//! (by default one download over the condition's link, on the virtual-time
//! link `sim`) with the candidate spec ([`evaluate`]).
//!
//! **Noise.** A sim run is deterministic for a given link seed, so an
//! objective is noisy only through the seed (random loss, jitter, start
//! times). Each point is measured on every search seed (`--seeds`, one by
//! default) and told the mean. At the end, the best point and the algorithm's
//! defaults are both measured again on `--validate` fresh seeds the search
//! never saw, and the table and the printout give those means with 95%
//! confidence half-widths: a best that only won on the search seeds shows
//! it there.
//!
//! **Parallel and resumable.** The optimisers are replayed from their seed
//! ([`optimizer`]); each batch's missing evaluations run one per core, and
//! every evaluation is stored in the work directory as it finishes. A tune
//! started again with the same settings resumes where it stopped; with
//! `shard = (i, n)` it runs only its share of the pending batch (the
//! evaluations whose key hashes to `i` modulo `n`) and returns, so job-array tasks on several machines can
//! share a batch and a later call (the merge) advances the optimisers.

pub mod evaluate;
pub mod objective;
pub mod optimizer;
pub mod output;
pub mod request;
pub mod space;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::run::{mean_ci, RunConfig, RunError};
use crate::scenario::Scenario;

use evaluate::{EvalKey, Record};
use objective::Objective;
use optimizer::{Settings, Step, Trace};
use space::{Condition, Space};

/// How to tune: everything that decides the result (stored as
/// `tune.json` in the work directory; a resume must match it).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TuneConfig {
    /// What is searched.
    pub space: Space,
    /// The objective as given (a preset or an expression).
    pub objective: String,
    /// The conditions, each tuned on its own.
    pub conditions: Vec<Condition>,
    /// The optimiser (its seed is offset by the condition's index).
    pub optimizer: Settings,
    /// Link seeds every point is measured on.
    pub seeds: Vec<u64>,
    /// Fresh link seeds the best and the defaults are compared on.
    pub validate_seeds: Vec<u64>,
    /// Length of each run, ns.
    pub duration_ns: u64,
    /// `sim` or `emu`.
    pub backend: String,
    /// The base scenario, as TOML.
    pub scenario_toml: String,
}

/// Why a tune failed.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Bad settings or a work directory of another tune.
    #[error("{0}")]
    Input(String),
    /// A run failed or was interrupted.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Writing results.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Progress after each evaluation.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Evaluations stored (including ones from before a resume).
    pub done: usize,
    /// Evaluations the tune needs at most.
    pub total: usize,
    /// The evaluation just finished.
    pub last: Record,
    /// Seconds left, estimated from this process's evaluations.
    pub eta_s: f64,
    /// The best value so far per condition (of fully measured points).
    pub best: Vec<f64>,
}

/// What a tune found for one condition.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ConditionResult {
    /// The condition.
    pub condition: Condition,
    /// The best spec.
    pub best_spec: String,
    /// The best values, by parameter.
    pub best: BTreeMap<String, f64>,
    /// Its objective on the search seeds.
    pub search_value: f64,
    /// The best's objective on the validation seeds: mean and 95% half-width.
    pub best_validated: (f64, f64),
    /// The defaults' spec.
    pub default_spec: String,
    /// The defaults' objective on the validation seeds.
    pub default_validated: (f64, f64),
    /// Mean metrics of the best on the validation seeds.
    pub best_metrics: BTreeMap<String, f64>,
    /// Mean metrics of the defaults on the validation seeds.
    pub default_metrics: BTreeMap<String, f64>,
    /// Best value so far after each evaluation told (convergence).
    pub convergence: Vec<f64>,
    /// Every point told: values and objective.
    pub evaluations: Vec<(Vec<f64>, f64)>,
}

/// A whole tune's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TuneResult {
    /// The algorithm.
    pub algorithm: String,
    /// The objective as given, and as evaluated.
    pub objective: (String, String),
    /// The optimiser.
    pub optimizer: String,
    /// Per condition.
    pub conditions: Vec<ConditionResult>,
    /// Evaluations run by this call (the rest came from the work
    /// directory).
    pub evaluations_run: usize,
    /// Evaluations stored in all.
    pub evaluations_stored: usize,
}

/// What one call did.
#[derive(Debug)]
pub enum Outcome {
    /// Finished: the table is written.
    Done(Box<TuneResult>),
    /// A shard ran its part of the pending batch; run again to advance.
    Sharded {
        /// Evaluations this shard ran.
        ran: usize,
        /// Evaluations in the pending batch (all shards).
        pending: usize,
    },
}

/// The tune's state: its settings and the evaluations stored so far.
struct Tune<'a> {
    cfg: &'a TuneConfig,
    objective: Objective,
    base: Scenario,
    work: &'a Path,
    records: HashMap<String, Record>,
}

impl Tune<'_> {
    fn key(&self, spec: String, condition: &Condition, seed: u64) -> EvalKey {
        EvalKey {
            spec,
            condition: condition.clone(),
            seed,
            duration_ns: self.cfg.duration_ns,
            backend: self.cfg.backend.clone(),
            scenario: format!(
                "{:016x}",
                evaluate::fnv1a(self.cfg.scenario_toml.as_bytes())
            ),
        }
    }

    /// The objective of `spec` averaged over `seeds`; `None` while any is
    /// unmeasured, NaN when a run failed or the spec was refused.
    fn value(&self, spec: &str, c: &Condition, seeds: &[u64]) -> Option<f64> {
        let mut sum = 0.0;
        for &s in seeds {
            let r = self.records.get(&self.key(spec.into(), c, s).hash())?;
            sum += match r.error {
                Some(_) => f64::NAN,
                None => self.objective.eval(&r.metrics),
            };
        }
        Some(sum / seeds.len().max(1) as f64)
    }

    fn settings(&self, c: usize) -> Settings {
        let mut s = self.cfg.optimizer.clone();
        s.seed = s.seed.wrapping_add(c as u64);
        s
    }

    /// Replays every condition's optimiser: the traces of the finished
    /// ones and the evaluations the others need next.
    fn replay(&self) -> (Vec<Option<Trace>>, Vec<EvalKey>) {
        let mut need = Vec::new();
        let mut traces = Vec::new();
        for (i, c) in self.cfg.conditions.iter().enumerate() {
            let space = &self.cfg.space;
            let step = optimizer::replay(&self.settings(i), space.dims(), &mut |x| {
                self.value(&space.spec(&space.values(x)), c, &self.cfg.seeds)
            });
            match step {
                Step::Done(t) => traces.push(Some(t)),
                Step::Need(points) => {
                    traces.push(None);
                    for p in points {
                        let spec = space.spec(&space.values(&p));
                        need.extend(self.missing(&spec, c, &self.cfg.seeds));
                    }
                }
            }
        }
        dedup(&mut need);
        (traces, need)
    }

    fn missing(&self, spec: &str, c: &Condition, seeds: &[u64]) -> Vec<EvalKey> {
        seeds
            .iter()
            .map(|&s| self.key(spec.into(), c, s))
            .filter(|k| !self.records.contains_key(&k.hash()))
            .collect()
    }

    /// The evaluations the final comparison needs.
    fn validation_needs(&self, traces: &[Option<Trace>]) -> Vec<EvalKey> {
        let mut need = Vec::new();
        for (c, t) in self.cfg.conditions.iter().zip(traces) {
            let space = &self.cfg.space;
            let best = t.as_ref().map(|t| space.spec(&space.values(&t.best)));
            for spec in best.into_iter().chain([space.base_spec()]) {
                need.extend(self.missing(&spec, c, &self.cfg.validate_seeds));
            }
        }
        dedup(&mut need);
        need
    }

    /// The best value so far of each condition, from the stored values.
    fn best_so_far(&self) -> Vec<f64> {
        let space = &self.cfg.space;
        self.cfg
            .conditions
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut best = f64::NEG_INFINITY;
                optimizer::replay(&self.settings(i), space.dims(), &mut |x| {
                    let v = self.value(&space.spec(&space.values(x)), c, &self.cfg.seeds);
                    if let Some(v) = v.filter(|v| v.is_finite()) {
                        best = best.max(v);
                    }
                    v
                });
                best
            })
            .collect()
    }
}

fn dedup(keys: &mut Vec<EvalKey>) {
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.hash()));
}

/// Loads every stored evaluation of the work directory.
fn load_records(work: &Path) -> HashMap<String, Record> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir(work.join("evals")) else {
        return out;
    };
    for e in dir.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            if let Some(r) = std::fs::read(&p)
                .ok()
                .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
            {
                out.insert(r.key.hash(), r);
            }
        }
    }
    out
}

/// Writes `tune.json`, or checks that the one there is the same tune.
fn claim_work(cfg: &TuneConfig, work: &Path) -> Result<(), TuneError> {
    std::fs::create_dir_all(work.join("evals"))?;
    let path = work.join("tune.json");
    let mine = serde_json::to_value(cfg).map_err(std::io::Error::other)?;
    if let Ok(text) = std::fs::read(&path) {
        let theirs: serde_json::Value = serde_json::from_slice(&text).unwrap_or_default();
        if theirs != mine {
            let differ: Vec<String> = mine
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| theirs.get(k.as_str()) != Some(v))
                .map(|(k, _)| k.clone())
                .collect();
            return Err(TuneError::Input(format!(
                "{} holds a different tune (differs in: {}); use another --work directory, or remove it to start over",
                work.display(),
                differ.join(", ")
            )));
        }
        return Ok(());
    }
    crate::files::write_json_atomic(&path, &mine)?;
    Ok(())
}

/// How a tune is carried out (none of it changes the result).
pub struct Exec<'a> {
    /// Run settings of every evaluation (its `out` is replaced).
    pub run: RunConfig,
    /// Evaluations at once.
    pub jobs: usize,
    /// Run only shard `i` of `n` of the pending batch, and return.
    pub shard: Option<(usize, usize)>,
    /// Keep every evaluation's run directory (`runs/<hash>/`); by default
    /// only its metrics are kept (`evals/<hash>.json`, which names the spec,
    /// condition and seed, so `cclab run` can repeat any evaluation).
    pub keep_runs: bool,
    /// Called after each evaluation.
    pub progress: &'a (dyn Fn(&Progress) + Sync),
}

/// Runs (or resumes) a tune: see the module docs.
pub fn tune(
    cfg: &TuneConfig,
    base: &Scenario,
    exec: &Exec<'_>,
    work: &Path,
    out: &Path,
) -> Result<Outcome, TuneError> {
    let objective = Objective::parse(&cfg.objective).map_err(TuneError::Input)?;
    claim_work(cfg, work)?;
    let mut t = Tune {
        cfg,
        objective,
        base: base.clone(),
        work,
        records: load_records(work),
    };
    let total = total_evaluations(cfg);
    let mut ran = 0;
    let mut wall = (0.0, 0usize);
    loop {
        let (traces, mut need) = t.replay();
        let validating = need.is_empty();
        if validating {
            need = t.validation_needs(&traces);
        }
        if need.is_empty() && exec.shard.is_some() {
            return Ok(Outcome::Sharded { ran, pending: 0 });
        }
        if need.is_empty() {
            let result = output::finish(&t_view(&t), &traces, ran)?;
            output::write(&result, cfg, work, out)?;
            return Ok(Outcome::Done(Box::new(result)));
        }
        if let Some((i, n)) = exec.shard {
            let pending = need.len();
            // By hash, so every shard picks the same share whatever the
            // others have finished.
            let mine: Vec<EvalKey> = need
                .into_iter()
                .filter(|k| evaluate::fnv1a(k.hash().as_bytes()) % n as u64 == i as u64)
                .collect();
            ran += run_batch(&mut t, &mine, exec, total, &mut wall)?;
            return Ok(Outcome::Sharded { ran, pending });
        }
        ran += run_batch(&mut t, &need, exec, total, &mut wall)?;
    }
}

/// The most evaluations a tune can need.
pub fn total_evaluations(cfg: &TuneConfig) -> usize {
    let per = cfg.optimizer.population.max(1) * cfg.optimizer.iterations.max(1) * cfg.seeds.len()
        + 2 * cfg.validate_seeds.len();
    per * cfg.conditions.len()
}

/// Runs `keys`, `jobs` at a time, storing each as it finishes.
fn run_batch(
    t: &mut Tune<'_>,
    keys: &[EvalKey],
    exec: &Exec<'_>,
    total: usize,
    wall: &mut (f64, usize),
) -> Result<usize, TuneError> {
    let progress = exec.progress;
    let next = AtomicUsize::new(0);
    let done: Mutex<(Vec<Record>, Option<RunError>, f64, usize)> =
        Mutex::new((Vec::new(), None, wall.0, wall.1));
    let jobs = exec.jobs.max(1).min(keys.len().max(1));
    let mut rc = exec.run.clone();
    if jobs > 1 {
        rc.threads = 1;
    }
    let stored = t.records.len();
    let algorithm = t.cfg.space.algorithm.clone();
    let best = t.best_so_far();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(key) = keys.get(i) else { break };
                if done.lock().map(|d| d.1.is_some()).unwrap_or(true) {
                    break;
                }
                let r = evaluate::evaluate(&t.base, &algorithm, key, &rc, t.work, exec.keep_runs);
                let Ok(mut d) = done.lock() else { break };
                // A metric the objective names that a finished run did not
                // measure stops the tune: every run would lack it, and a
                // NaN would pass for a bad value.
                let r = r.and_then(|rec| match t.objective.unmeasured(&rec) {
                    Some(e) => Err(RunError::Io(std::io::Error::other(e))),
                    None => Ok(rec),
                });
                match r {
                    Ok(rec) => {
                        d.2 += rec.wall_s;
                        d.3 += 1;
                        let left = total.saturating_sub(stored + d.0.len() + 1);
                        let eta_s = d.2 / d.3 as f64 * left as f64 / jobs as f64;
                        d.0.push(rec.clone());
                        progress(&Progress {
                            done: (stored + d.0.len()).min(total),
                            total,
                            last: rec,
                            eta_s,
                            best: best.clone(),
                        });
                    }
                    Err(e) => {
                        d.1.get_or_insert(e);
                    }
                }
            });
        }
    });
    let (records, err, w, n) = done.into_inner().unwrap_or_default();
    *wall = (w, n);
    let ran = records.len();
    for r in records {
        t.records.insert(r.key.hash(), r);
    }
    match err {
        Some(e) => Err(e.into()),
        None => Ok(ran),
    }
}

/// What [`output`] reads of a tune.
pub struct View<'a> {
    /// Settings.
    pub cfg: &'a TuneConfig,
    /// The objective.
    pub objective: &'a Objective,
    /// Mean objective and metrics of a spec over seeds.
    pub measure: MeasureFn<'a>,
    /// Evaluations stored.
    pub stored: usize,
}

/// Measures a spec under a condition over seeds (from stored evaluations).
pub type MeasureFn<'a> = Box<dyn Fn(&str, &Condition, &[u64]) -> Measured + 'a>;

/// A spec's objective and metrics over seeds.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Mean and 95% half-width of the objective.
    pub value: (f64, f64),
    /// Mean of each metric.
    pub metrics: BTreeMap<String, f64>,
}

fn t_view<'a>(t: &'a Tune<'a>) -> View<'a> {
    View {
        cfg: t.cfg,
        objective: &t.objective,
        stored: t.records.len(),
        measure: Box::new(move |spec, c, seeds| {
            let recs: Vec<&Record> = seeds
                .iter()
                .filter_map(|&s| t.records.get(&t.key(spec.into(), c, s).hash()))
                .collect();
            let values: Vec<f64> = recs
                .iter()
                .map(|r| match r.error {
                    Some(_) => f64::NAN,
                    None => t.objective.eval(&r.metrics),
                })
                .collect();
            let mut metrics: BTreeMap<String, f64> = BTreeMap::new();
            for r in &recs {
                for (k, v) in &r.metrics {
                    *metrics.entry(k.clone()).or_default() += v / recs.len() as f64;
                }
            }
            Measured {
                value: if values.iter().all(|v| v.is_finite()) {
                    mean_ci(&values)
                } else {
                    (f64::NAN, f64::NAN)
                },
                metrics,
            }
        }),
    }
}

/// The default work directory for a table: `TABLE.runs` beside it.
pub fn default_work(out: &Path) -> PathBuf {
    out.with_extension("runs")
}
