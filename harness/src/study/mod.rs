//! Studies: an experiment the docs publish, as a file `cclab study` runs.
//!
//! A study is the reproduction's engine ([`crate::reproduce`]) without a
//! paper: experiments with axes over any scenario field (the backend
//! included), run once per point into `OUT/<study>/runs/<experiment>/<point>/`
//! and reused under the same build, then read per repetition; instead of a
//! paper's claims it has *goals* (two arms that should agree within a
//! tolerance) and *tables*.
//!
//! ```toml
//! study = "sim-vs-emu"                 # OUT/<study>/
//! title = "The virtual-time link against the real one"
//! about = "what it measures and why (Markdown)"
//! doc = "docs/links.md"                # the page `--publish` updates (optional)
//!
//! [scenario]                           # the base scenario, inline
//! duration = "15s"                     # (or scenario = "file.toml", relative
//! repetitions = 3                      #  to the study file)
//! [scenario.link]
//! rate = "20mbit"
//! [[scenario.flows]]
//! cc = "newreno"
//!
//! set = { "link.queue" = "1bdp" }      # fixed overrides (optional)
//! quick = { duration = "5s", repetitions = 1, keep = { cc = ["newreno"] } }
//!
//! [[axis]]                             # every experiment varies it (as a
//! name = "backend"                     # reproduction's axis: name, field,
//! field = "link.backend"               # values, labels, x)
//! values = ["sim", "emu"]
//!
//! [[experiment]]                       # optional: without one the study is
//! id = "main"                          # one experiment, `main`
//! about = "what this part adds"
//! set = { "link.aqm" = "red" }         # over the study's `set`
//! exclude = ["backend=sim,cc=newreno"] # points left out (any selector)
//! [[experiment.axis]]                  # after the study's axes
//! name = "cc"
//! field = "flows.0.cc"
//! values = ["newreno", "tcp:reno"]
//!
//! [candidates]                         # what `--cc` replaces
//! axis = "cc"
//! keep = ["tcp:reno"]                  # references kept beside the new ones
//! drop = ["vegas-mechanisms"]          # experiments --cc leaves out
//!
//! [[goal]]
//! id = "utilization"
//! statement = "sim's utilization is within 3 points of emu's"
//! metric = "utilization"               # see `reproduce::metrics`
//! a = "backend=sim"                    # one side: axis=label conditions
//! b = "backend=emu"                    # the other: the same axes
//! within = 3                           # in the metric's unit; or "20%" of b;
//!                                      # or [2, "20%"]: the larger
//! # where = "aqm=droptail"             # only at these points
//! # experiment = "main"                # default: every experiment with
//!                                      # these axes and labels
//!
//! [[table]]
//! id = "main"
//! title = "Means over the repetitions"
//! rows = ["cc"]                        # axes that make a row
//! by = "backend"                       # an axis spread over the columns
//! metrics = ["utilization", "queue_delay_ms"]
//! # flow = "#0"                        # flow metrics over these flows
//! # where = "aqm=droptail"             # only these points
//! # experiment = "main"                # default: every experiment (then
//!                                      # the experiment is a row label)
//! ```
//!
//! A goal is judged at every *place*: each planned point `a` selects (and
//! `where` allows), against the planned point that differs only in `b`'s
//! labels (a pair with a side left out of the plan is no place).
//! It holds where `|mean_a - mean_b| <= tolerance`, and that outcome is
//! *significant* when it survives moving the difference by the sum of the
//! two 95% half-widths, the reproduction's one rule
//! ([`crate::reproduce::expr::separated`]). A point a backend cannot run
//! (a Linux TCP flow on `sim`) is skipped with its reason.

mod goals;
mod page;
pub mod states;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::link::Backend;
use crate::reproduce::expr::Stat;
use crate::reproduce::jobs::{self, Builds, Job};
use crate::reproduce::manifest::{Axis, Experiment, Fields, Point, Quick, Selector};
use crate::reproduce::metrics::RunData;
use crate::reproduce::{Build, Options};
use crate::scenario::Scenario;

pub use goals::{Bound, GoalResult, Place, Rule, Tolerance};
pub use page::{markdown, publish};

/// A study file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Study {
    /// Short name: its output directory.
    pub study: String,
    /// Title.
    pub title: String,
    /// What it measures and why.
    #[serde(default)]
    pub about: String,
    /// The docs page whose block `--publish` replaces.
    pub doc: Option<String>,
    /// The base scenario: a file or inline.
    pub scenario: Option<ScenarioSource>,
    /// Fixed overrides of every experiment.
    #[serde(default)]
    pub set: toml::Table,
    /// What `--quick` changes.
    #[serde(default)]
    pub quick: Quick,
    /// Axes of every experiment.
    #[serde(default, rename = "axis")]
    pub axes: Vec<Axis>,
    /// Experiments (default: one, `main`).
    #[serde(default, rename = "experiment")]
    pub experiments: Vec<StudyExperiment>,
    /// What `--cc` replaces.
    pub candidates: Option<Candidates>,
    /// Goals.
    #[serde(default, rename = "goal")]
    pub goals: Vec<Goal>,
    /// Tables.
    #[serde(default, rename = "table")]
    pub tables: Vec<TableSpec>,
    /// Figures.
    #[serde(default, rename = "figure")]
    pub figures: Vec<StudyFigure>,
    /// Where the file was read from.
    #[serde(skip)]
    pub path: PathBuf,
    /// What the command line's changes left out (goals whose arms it
    /// took away), for the user.
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// A scenario file (relative to the study) or an inline scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum ScenarioSource {
    /// A file.
    File(String),
    /// Inline.
    Inline(toml::Table),
}

/// One experiment of a study.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyExperiment {
    /// Name, unique in the study.
    pub id: String,
    /// What it adds.
    #[serde(default)]
    pub about: String,
    /// Its base scenario (default: the study's).
    pub scenario: Option<ScenarioSource>,
    /// Overrides over the study's `set`.
    #[serde(default)]
    pub set: toml::Table,
    /// Axes after the study's.
    #[serde(default, rename = "axis")]
    pub axes: Vec<Axis>,
    /// `--quick` (default: the study's).
    pub quick: Option<Quick>,
    /// Points left out of the plan: selectors (`backend=emu,cc=tcp:vegas`),
    /// any of which leaves a point out.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// The axis `--cc` replaces and the references it keeps.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidates {
    /// The axis's name.
    pub axis: String,
    /// Its labels kept beside the new algorithms.
    #[serde(default)]
    pub keep: Vec<String>,
    /// Experiments left out when `--cc` replaces the candidates (those
    /// that study the replaced algorithms' own mechanisms).
    #[serde(default)]
    pub drop: Vec<String>,
}

/// Two arms that should agree.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    /// Name.
    pub id: String,
    /// The goal in words.
    pub statement: String,
    /// The experiment (default: the first).
    pub experiment: Option<String>,
    /// The metric compared.
    pub metric: String,
    /// One side.
    pub a: String,
    /// The other side (optional for `at_most` / `at_least`: then the
    /// bound is a number in the metric's unit).
    pub b: Option<String>,
    /// Two-sided: `|a - b|` at most this.
    pub within: Option<Tolerance>,
    /// One-sided: a at most `"P%"` of b, or b plus a number (without b:
    /// the number).
    pub at_most: Option<Bound>,
    /// One-sided: a at least `"P%"` of b, or b plus a number (without b:
    /// the number).
    pub at_least: Option<Bound>,
    /// Only these points.
    #[serde(rename = "where")]
    pub where_: Option<String>,
}

impl Goal {
    /// How the goal compares its sides, or what is wrong with its fields.
    pub fn rule(&self) -> Result<Rule, String> {
        Rule::of(
            self.within.as_ref(),
            self.at_most.as_ref(),
            self.at_least.as_ref(),
            self.b.is_some(),
        )
    }
}

/// A table of means.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// Name.
    pub id: String,
    /// Title.
    #[serde(default)]
    pub title: String,
    /// The experiment (default: the first).
    pub experiment: Option<String>,
    /// Axes whose labels make a row.
    #[serde(default)]
    pub rows: Vec<String>,
    /// An axis spread over the columns.
    pub by: Option<String>,
    /// Metrics, one column (group) each.
    pub metrics: Vec<String>,
    /// A flow selector for flow metrics (`#0`, an algorithm's name).
    pub flow: Option<String>,
    /// Only the points this selector matches.
    #[serde(rename = "where")]
    pub where_: Option<String>,
}

/// A figure: a signal over time of one run per line, or a metric along
/// an axis (the reproduction's figures).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFigure {
    /// Name (file `fig-<id>.svg`).
    pub id: String,
    /// Title.
    pub title: String,
    /// The experiment drawn.
    pub experiment: String,
    /// `queue_pkts`, `utilization`, `drops`, `cwnd`, `rtt`, `goodput` (the
    /// first repetition over time), or `metric:<name>` along `along`.
    pub kind: String,
    /// Lines: label = selector (one run each for a signal; for `states`,
    /// the run drawn, default the experiment's first point).
    #[serde(default)]
    pub series: BTreeMap<String, String>,
    /// For `metric:` figures: the axis on x.
    pub along: Option<String>,
    /// For `states` figures: the panels, each a list of the sender's
    /// metrics (see [`states`]).
    #[serde(default)]
    pub panels: Vec<Vec<String>>,
}

/// Why a study cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// The file or a field of it.
    #[error("{path}: {problem}")]
    File {
        /// The study file.
        path: String,
        /// What is wrong, naming the field.
        problem: String,
    },
    /// A scenario it builds.
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    /// Running it.
    #[error(transparent)]
    Repro(#[from] crate::reproduce::ReproError),
    /// Files.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Changes the command line makes to a study.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--cc`: the candidates' new algorithms.
    pub cc: Vec<String>,
    /// `--link`: the backends.
    pub link: Vec<String>,
    /// `--axis NAME=V1,V2`: an axis's values.
    pub axes: Vec<(String, Vec<String>)>,
    /// `--set FIELD=VALUE`: fixed overrides.
    pub set: Vec<(String, toml::Value)>,
    /// `--repetitions`.
    pub repetitions: Option<u32>,
    /// `--duration`.
    pub duration: Option<String>,
    /// `--experiment`: only these experiments (with their goals, tables
    /// and figures).
    pub experiments: Vec<String>,
}

/// A comma-separated list from the command line (`--cc`, `--axis`), read
/// so that a spec keeps its parameters: a piece with `=` before any `:`
/// (`beta=4.99`) continues the value before it, as in
/// `vegas:linux_slow_start=1,beta=4.99,newreno` (two values) or
/// `red:gentle=false,wq=0.002` (one).
pub fn split_values(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in list.split(',').map(str::trim) {
        let continues = match (piece.find('='), piece.find(':')) {
            (Some(eq), Some(colon)) => eq < colon,
            (Some(_), None) => true,
            _ => false,
        };
        match out.last_mut() {
            Some(last) if continues && last.contains(':') => {
                last.push(',');
                last.push_str(piece);
            }
            _ if piece.is_empty() => {}
            _ => out.push(piece.to_string()),
        }
    }
    out
}

/// A value given on the command line (`--set FIELD=VALUE`, an `--axis`
/// value that is not one of the axis's labels): as TOML where it reads as
/// TOML (`2`, `0.5`, `true`, `"text"`, `[1, 2]`), else the text itself
/// (`20mbit`, `tcp:cubic`).
pub fn cli_value(v: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()))
}

/// A states figure's own fields: panels, and one run at most.
fn check_states(what: &str, f: &StudyFigure) -> Result<(), String> {
    if f.panels.is_empty() || f.panels.iter().any(|p| p.is_empty()) {
        return Err(format!(
            "{what}: panels: a states figure needs panels, each a list of the sender's metrics ({} or a controller's own)",
            states::ITEMS.join(", ")
        ));
    }
    if f.series.len() > 1 {
        return Err(format!(
            "{what}: series: a states figure draws one run (one selector, or none for the experiment's first point)"
        ));
    }
    Ok(())
}

/// A table's metric column: `NAME` or `NAME[flow=SEL,link=NAME]`, the
/// metric read over some flows or on one link of the runs.
pub(crate) fn metric_column(m: &str) -> Result<(&str, Selector), String> {
    let Some((name, rest)) = m.split_once('[') else {
        return Ok((m, Selector::default()));
    };
    let inner = rest
        .strip_suffix(']')
        .ok_or_else(|| format!("metric `{m}`: `[` without a closing `]`"))?;
    let sel = Selector::parse(inner).map_err(|p| format!("metric `{m}`: {p}"))?;
    if let Some((k, _)) = sel.axes.first() {
        return Err(format!(
            "metric `{m}`: `{k}` is not flow= or link= (the only choices inside the brackets)"
        ));
    }
    Ok((name, sel))
}

impl Study {
    /// Reads and checks a study file.
    pub fn load(path: &Path) -> Result<Study, StudyError> {
        let err = |problem: String| StudyError::File {
            path: path.display().to_string(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let mut s: Study = toml::from_str(&text).map_err(|e| err(e.message().trim().into()))?;
        s.path = path.to_path_buf();
        if s.experiments.is_empty() {
            s.experiments.push(StudyExperiment {
                id: "main".into(),
                about: String::new(),
                scenario: None,
                set: toml::Table::new(),
                axes: Vec::new(),
                quick: None,
                exclude: Vec::new(),
            });
        }
        s.check().map_err(err)?;
        if let Some(c) = &s.candidates {
            if let Some(d) = c
                .drop
                .iter()
                .find(|d| !s.experiments.iter().any(|e| e.id == **d))
            {
                return Err(err(format!("candidates.drop: `{d}` is not an experiment")));
            }
        }
        Ok(s)
    }

    fn err(&self, problem: String) -> StudyError {
        StudyError::File {
            path: self.path.display().to_string(),
            problem,
        }
    }

    /// Every experiment as the reproduction's engine sees it (the study's
    /// axes first, `set` merged, its quick settings).
    pub fn experiments(&self) -> Vec<Experiment> {
        self.experiments
            .iter()
            .map(|x| {
                let mut set = self.set.clone();
                set.extend(x.set.clone());
                let mut axes = self.axes.clone();
                axes.extend(x.axes.clone());
                Experiment {
                    id: x.id.clone(),
                    source: x.about.clone(),
                    scenario: String::new(),
                    set,
                    axes,
                    quick: x.quick.clone().unwrap_or_else(|| self.quick.clone()),
                    sensitivity_of: None,
                }
            })
            .collect()
    }

    /// The experiments a goal or table covers: `id` (or several, `a,b`),
    /// or every one when `None` (empty when an id names none).
    fn scope(&self, id: Option<&str>) -> Vec<usize> {
        match id {
            None => (0..self.experiments.len()).collect(),
            Some(ids) => {
                let mut v = Vec::new();
                for id in ids.split(',').map(str::trim) {
                    match self.experiments.iter().position(|e| e.id == id) {
                        Some(i) => v.push(i),
                        None => return Vec::new(),
                    }
                }
                v
            }
        }
    }

    /// Checks names, selectors, metrics and axes: a bad field is named
    /// before anything runs.
    fn check(&self) -> Result<(), String> {
        let valid_name = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if !valid_name(&self.study) {
            return Err(format!(
                "study: `{}` must be letters, digits, `-`, `_` or `.` (it names the output directory)",
                self.study
            ));
        }
        if self.scenario.is_none() && self.experiments.iter().any(|e| e.scenario.is_none()) {
            return Err("scenario: missing (a file relative to the study, or an inline [scenario] table), and an experiment has none of its own".into());
        }
        let mut ids = std::collections::BTreeSet::new();
        for e in &self.experiments {
            if !valid_name(&e.id) || !ids.insert(e.id.as_str()) {
                return Err(format!(
                    "experiment.id: `{}` is empty, repeated or not a name",
                    e.id
                ));
            }
        }
        let exps = self.experiments();
        for e in &exps {
            let mut names = std::collections::BTreeSet::new();
            for a in &e.axes {
                if !names.insert(a.name.as_str()) {
                    return Err(format!(
                        "experiment {}: axis `{}` is given twice",
                        e.id, a.name
                    ));
                }
                crate::reproduce::validate::validate_axis(a)
                    .map_err(|p| format!("axis {}: {p}", a.name))?;
            }
        }
        let axis_of = |exp: usize, name: &str| exps[exp].axes.iter().find(|a| a.name == name);
        let exp_of = |what: &str, id: &Option<String>| {
            let v = self.scope(id.as_deref());
            if !v.is_empty() {
                return Ok(v);
            }
            Err(format!(
                "{what}: experiment `{}` is not one of {}",
                id.as_deref().unwrap_or(""),
                self.experiments
                    .iter()
                    .map(|e| e.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        };
        // The reproduction's selector check, the field named first.
        let check_sel = |what: &str, exp: usize, s: &str| -> Result<Selector, String> {
            crate::reproduce::validate::check_selector(&exps[exp], s)
                .map_err(|e| format!("{what}: {e}"))
        };
        for (i, x) in self.experiments.iter().enumerate() {
            // Only the axes are checked: --cc or --axis may take a label away.
            for e in &x.exclude {
                let what = format!("experiment {}: exclude", x.id);
                let sel = Selector::parse(e).map_err(|e| format!("{what}: {e}"))?;
                if let Some((k, _)) = sel.axes.iter().find(|(k, _)| axis_of(i, k).is_none()) {
                    return Err(format!("{what}: `{k}` is not an axis of the experiment"));
                }
            }
        }
        let mut gids = std::collections::BTreeSet::new();
        for g in &self.goals {
            let what = format!("goal {}", g.id);
            if !gids.insert(g.id.as_str()) {
                return Err(format!("{what}: the id is used twice"));
            }
            let scope = exp_of(&what, &g.experiment)?;
            if !crate::reproduce::manifest::is_metric(&g.metric) {
                return Err(format!(
                    "{what}: metric `{}` is not one of {}",
                    g.metric,
                    crate::reproduce::manifest::METRICS.join(", ")
                ));
            }
            // Judged in every experiment of its scope that has its axes
            // and labels; at least one must.
            let fits = |exp: usize| -> Result<(Selector, Option<Selector>), String> {
                let a = check_sel(&format!("{what}: a"), exp, &g.a)?;
                let b = match &g.b {
                    Some(b) => Some(check_sel(&format!("{what}: b"), exp, b)?),
                    None => None,
                };
                if let Some(w) = &g.where_ {
                    check_sel(&format!("{what}: where"), exp, w)?;
                }
                Ok((a, b))
            };
            let tried: Vec<_> = scope.iter().map(|&e| fits(e)).collect();
            let (a, b) = match tried.iter().find_map(|r| r.as_ref().ok()) {
                Some(x) => x.clone(),
                None => return Err(tried.into_iter().find_map(Result::err).unwrap_or_default()),
            };
            let keys = |s: &Selector| {
                let mut k: Vec<String> = s.axes.iter().map(|(k, _)| k.clone()).collect();
                k.sort();
                k
            };
            if let Some(b) = &b {
                if keys(&a) != keys(b) || a.axes.is_empty() {
                    return Err(format!(
                        "{what}: a (`{}`) and b (`{}`) must name the same axes, with other labels",
                        g.a,
                        g.b.as_deref().unwrap_or_default()
                    ));
                }
            }
            g.rule().map_err(|e| format!("{what}: {e}"))?;
        }
        let mut tids = std::collections::BTreeSet::new();
        for t in &self.tables {
            let what = format!("table {}", t.id);
            if !tids.insert(t.id.as_str()) {
                return Err(format!("{what}: the id is used twice"));
            }
            for exp in exp_of(&what, &t.experiment)? {
                for a in t.by.iter() {
                    if axis_of(exp, a).is_none() {
                        return Err(format!(
                            "{what}: by: `{a}` is not an axis of experiment {}",
                            exps[exp].id
                        ));
                    }
                }
                if let Some(a) = t
                    .rows
                    .iter()
                    .find(|a| !exps.iter().any(|e| e.axes.iter().any(|x| x.name == **a)))
                {
                    return Err(format!(
                        "{what}: rows: `{a}` is not an axis of any experiment"
                    ));
                }
                let fixed = match &t.where_ {
                    Some(w) => check_sel(&format!("{what}: where"), exp, w)?.axes,
                    None => Vec::new(),
                };
                for a in &exps[exp].axes {
                    let covered = t.rows.contains(&a.name)
                        || t.by.as_ref() == Some(&a.name)
                        || fixed.iter().any(|(k, _)| *k == a.name);
                    if !covered && a.values.len() > 1 {
                        return Err(format!(
                        "{what}: axis `{}` has {} values but is not in rows, by or where, so a cell would mix them",
                        a.name,
                        a.values.len()
                    ));
                    }
                }
            }
            if t.metrics.is_empty() {
                return Err(format!("{what}: metrics: none given"));
            }
            for m in &t.metrics {
                let (name, _) = metric_column(m).map_err(|p| format!("{what}: {p}"))?;
                if !crate::reproduce::manifest::is_metric(name) {
                    return Err(format!(
                        "{what}: metric `{name}` is not one of {}",
                        crate::reproduce::manifest::METRICS.join(", ")
                    ));
                }
            }
        }
        for f in &self.figures {
            let what = format!("figure {}", f.id);
            if f.experiment == "*" && f.kind == "states" {
                // One figure per experiment: each must have the run.
                check_states(&what, f)?;
                for exp in 0..self.experiments.len() {
                    for (l, sel) in &f.series {
                        check_sel(&format!("{what}: series.{l}"), exp, sel)?;
                    }
                }
                continue;
            }
            let Some(exp) = self.experiments.iter().position(|e| e.id == f.experiment) else {
                return Err(format!(
                    "{what}: experiment `{}` is not one of the study's",
                    f.experiment
                ));
            };
            match f.kind.strip_prefix("metric:") {
                Some(m) => {
                    if !crate::reproduce::manifest::is_metric(m) {
                        return Err(format!(
                            "{what}: kind: metric `{m}` is not one of {}",
                            crate::reproduce::manifest::METRICS.join(", ")
                        ));
                    }
                    match &f.along {
                        Some(a) if axis_of(exp, a).is_some() => {}
                        _ => {
                            return Err(format!(
                            "{what}: along: a metric figure needs an axis of experiment {} on x",
                            f.experiment
                        ))
                        }
                    }
                }
                None if crate::reproduce::manifest::SIGNALS.contains(&f.kind.as_str()) => {}
                None if f.kind == "states" => check_states(&what, f)?,
                None => {
                    return Err(format!(
                        "{what}: kind: `{}` is not one of {}, states or metric:<name>",
                        f.kind,
                        crate::reproduce::manifest::SIGNALS.join(", ")
                    ))
                }
            }
            for (l, sel) in &f.series {
                check_sel(&format!("{what}: series.{l}"), exp, sel)?;
            }
        }
        if let Some(c) = &self.candidates {
            let Some(a) = exps
                .iter()
                .find_map(|e| e.axes.iter().find(|a| a.name == c.axis))
            else {
                return Err(format!("candidates.axis: `{}` is not an axis", c.axis));
            };
            let labels: Vec<String> = (0..a.values.len())
                .map(|i| Experiment::label(a, i))
                .collect();
            for k in &c.keep {
                if !labels.contains(k) {
                    return Err(format!(
                        "candidates.keep: `{k}` is not a label of axis {}; labels: {}",
                        c.axis,
                        labels.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }

    /// Keeps the experiments whose id `keep` accepts, and the goals and
    /// tables that read only those (one scoped to `a,b` goes when either
    /// goes). Figures are left to [`Study::apply`]'s check of each line,
    /// which names what it leaves out.
    fn retain_experiments(&mut self, keep: impl Fn(&str) -> bool) {
        self.experiments.retain(|e| keep(&e.id));
        let ids: Vec<String> = self.experiments.iter().map(|e| e.id.clone()).collect();
        let kept = |scope: &Option<String>| {
            scope
                .as_deref()
                .is_none_or(|s| s.split(',').all(|id| ids.iter().any(|k| k == id.trim())))
        };
        self.goals.retain(|g| kept(&g.experiment));
        self.tables.retain(|t| kept(&t.experiment));
    }

    /// Applies the command line's changes; names what does not fit.
    /// The command line's fields (`--set`, `--repetitions`, `--duration`)
    /// hold for every run: an experiment's own `set` of the same field
    /// gives way to them.
    pub fn apply(&mut self, o: &Overrides) -> Result<(), StudyError> {
        if !o.experiments.is_empty() {
            let known: Vec<String> = self.experiments.iter().map(|e| e.id.clone()).collect();
            if let Some(id) = o.experiments.iter().find(|id| !known.contains(id)) {
                return Err(self.err(format!(
                    "--experiment: `{id}` is not an experiment of the study; experiments: {}",
                    known.join(", ")
                )));
            }
            self.retain_experiments(|id| o.experiments.iter().any(|k| k == id));
        }
        let mut given: Vec<String> = o.set.iter().map(|(k, _)| k.clone()).collect();
        given.extend(o.repetitions.map(|_| "repetitions".to_string()));
        given.extend(o.duration.as_ref().map(|_| "duration".to_string()));
        for e in &mut self.experiments {
            e.set.retain(|k, _| !given.iter().any(|g| g == k));
        }
        for (k, v) in &o.set {
            self.set.insert(k.clone(), v.clone());
        }
        if let Some(r) = o.repetitions {
            self.set
                .insert("repetitions".into(), toml::Value::Integer(r.into()));
            self.quick.repetitions = None;
            for e in &mut self.experiments {
                if let Some(q) = &mut e.quick {
                    q.repetitions = None;
                }
            }
        }
        if let Some(d) = &o.duration {
            if crate::link::units::parse_duration_ns(d).is_none() {
                return Err(self.err(format!("--duration: `{d}` is not a time such as 20s")));
            }
            self.set
                .insert("duration".into(), toml::Value::String(d.clone()));
            self.quick.duration = None;
            for e in &mut self.experiments {
                if let Some(q) = &mut e.quick {
                    q.duration = None;
                }
            }
        }
        for (name, values) in &o.axes {
            let n = self.replace_axis(name, |a| {
                // A value given as one of the axis's labels, or equal to
                // one of its values, is that value with its label
                // (`--axis load=quiet` and `--axis load=0` alike); any
                // other is read as `--set` reads a value.
                let given: Vec<(toml::Value, String)> = values
                    .iter()
                    .map(|v| {
                        let parsed = cli_value(v);
                        let known = a
                            .labels
                            .iter()
                            .position(|l| l == v)
                            .or_else(|| a.values.iter().position(|x| *x == parsed))
                            .filter(|&i| i < a.values.len());
                        match known {
                            Some(i) => (a.values[i].clone(), Experiment::label(a, i)),
                            None => (parsed, v.clone()),
                        }
                    })
                    .collect();
                a.values = given.iter().map(|(v, _)| v.clone()).collect();
                a.labels = given.into_iter().map(|(_, l)| l).collect();
                a.x.clear();
            });
            if n == 0 {
                return Err(self.err(format!(
                    "--axis: `{name}` is not an axis of the study; axes: {}",
                    self.axis_names().join(", ")
                )));
            }
            // The references `--cc` would keep are those the new values
            // still hold.
            if self.candidates.as_ref().is_some_and(|c| c.axis == *name) {
                let labels: Vec<String> = self
                    .experiments()
                    .iter()
                    .flat_map(|e| e.axes.iter().filter(|a| a.name == *name))
                    .flat_map(|a| (0..a.values.len()).map(|i| Experiment::label(a, i)))
                    .collect();
                if let Some(c) = &mut self.candidates {
                    c.keep.retain(|k| labels.contains(k));
                }
            }
        }
        if !o.link.is_empty() {
            for b in &o.link {
                if Backend::parse(b).is_none() {
                    return Err(self.err(format!("--link: `{b}` is not one of sim, emu, netem")));
                }
            }
            let backend_axis = self.experiments().iter().find_map(|e| {
                e.axes
                    .iter()
                    .find(|a| a.field.paths() == ["link.backend"])
                    .map(|a| a.name.clone())
            });
            match backend_axis {
                Some(name) => {
                    self.replace_axis(&name, |a| {
                        a.values = o
                            .link
                            .iter()
                            .map(|v| toml::Value::String(v.clone()))
                            .collect();
                        a.labels.clear();
                        a.x.clear();
                    });
                }
                None if o.link.len() == 1 => {
                    self.set.insert(
                        "link.backend".into(),
                        toml::Value::String(o.link[0].clone()),
                    );
                }
                None => {
                    self.axes.insert(
                        0,
                        Axis {
                            name: "backend".into(),
                            field: Fields::One("link.backend".into()),
                            values: o
                                .link
                                .iter()
                                .map(|v| toml::Value::String(v.clone()))
                                .collect(),
                            labels: Vec::new(),
                            x: Vec::new(),
                        },
                    );
                }
            }
        }
        if !o.cc.is_empty() {
            let Some(c) = self.candidates.clone() else {
                return Err(self.err(
                    "--cc: this study names no candidates ([candidates] axis and the references it keeps); use --axis NAME=ALG,... instead".into(),
                ));
            };
            self.replace_axis(&c.axis, |a| {
                let kept: Vec<(toml::Value, String)> = (0..a.values.len())
                    .filter(|&i| c.keep.contains(&Experiment::label(a, i)))
                    .map(|i| (a.values[i].clone(), Experiment::label(a, i)))
                    .collect();
                a.values =
                    o.cc.iter()
                        .map(|v| toml::Value::String(v.clone()))
                        .collect();
                a.labels = o.cc.clone();
                for (v, l) in kept {
                    a.values.push(v);
                    a.labels.push(l);
                }
                a.x.clear();
            });
            self.retain_experiments(|id| !c.drop.iter().any(|d| d == id));
            if self.experiments.is_empty() {
                return Err(self.err("--cc: candidates.drop leaves no experiment".into()));
            }
        }
        if !o.cc.is_empty() || !o.axes.is_empty() || !o.link.is_empty() || !o.experiments.is_empty()
        {
            // A goal or figure about an arm the command line took away
            // goes with it.
            let exps = self.experiments();
            let fits = |i: usize, sel: &str| {
                crate::reproduce::validate::check_selector(&exps[i], sel).is_ok()
            };
            let mut notes = Vec::new();
            let scope: Vec<Vec<usize>> = self
                .goals
                .iter()
                .map(|g| self.scope(g.experiment.as_deref()))
                .collect();
            let mut k = 0;
            self.goals.retain(|g| {
                let ok = scope[k]
                    .iter()
                    .any(|&i| fits(i, &g.a) && g.b.as_deref().is_none_or(|b| fits(i, b)));
                k += 1;
                if !ok {
                    notes.push(format!(
                        "goal {} left out: the command line took away `{}`{}",
                        g.id,
                        g.a,
                        g.b.as_deref()
                            .map_or(String::new(), |b| format!(" or `{b}`"))
                    ));
                }
                ok
            });
            // A table restricted (`where`) to an arm the command line took
            // away goes too.
            let tscope: Vec<Vec<usize>> = self
                .tables
                .iter()
                .map(|t| self.scope(t.experiment.as_deref()))
                .collect();
            let mut k = 0;
            self.tables.retain(|t| {
                let ok = t
                    .where_
                    .as_deref()
                    .is_none_or(|w| tscope[k].iter().any(|&i| fits(i, w)));
                k += 1;
                if !ok {
                    notes.push(format!(
                        "table {} left out: the command line took away `{}`",
                        t.id,
                        t.where_.as_deref().unwrap_or_default()
                    ));
                }
                ok
            });
            let ids: Vec<String> = self.experiments.iter().map(|e| e.id.clone()).collect();
            self.figures.retain(|f| {
                let ok = if f.experiment == "*" {
                    (0..ids.len()).all(|i| f.series.values().all(|sel| fits(i, sel)))
                } else {
                    ids.iter()
                        .position(|id| *id == f.experiment)
                        .is_some_and(|i| f.series.values().all(|sel| fits(i, sel)))
                };
                if !ok {
                    notes.push(format!(
                        "figure {} left out: the command line took away one of its lines",
                        f.id
                    ));
                }
                ok
            });
            self.notes.extend(notes);
        }
        self.check().map_err(|e| self.err(e))
    }

    fn axis_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .experiments()
            .iter()
            .flat_map(|e| e.axes.iter().map(|a| a.name.clone()))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Applies `f` to every axis called `name`; how many there were.
    fn replace_axis(&mut self, name: &str, f: impl Fn(&mut Axis)) -> usize {
        let mut n = 0;
        for a in self
            .axes
            .iter_mut()
            .chain(self.experiments.iter_mut().flat_map(|e| e.axes.iter_mut()))
            .filter(|a| a.name == name)
        {
            f(a);
            n += 1;
        }
        n
    }

    /// The base scenario of experiment `i`.
    fn base(&self, i: usize) -> Result<Scenario, StudyError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let src = self.experiments[i]
            .scenario
            .as_ref()
            .or(self.scenario.as_ref())
            .ok_or_else(|| self.err("scenario: missing".into()))?;
        Ok(match src {
            ScenarioSource::File(f) => Scenario::load(&dir.join(f))?,
            ScenarioSource::Inline(t) => {
                let text = toml::to_string(t).map_err(|e| self.err(format!("scenario: {e}")))?;
                Scenario::parse(&text, &format!("{} [scenario]", self.path.display()), dir)?
            }
        })
    }
}

/// A point left out, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// `<experiment>/<point>`.
    pub point: String,
    /// Why it cannot run.
    pub why: String,
}

/// A table's cells: one row per combination of the row axes.
#[derive(Clone, Debug, Serialize)]
pub struct TableResult {
    /// Name.
    pub id: String,
    /// Title.
    pub title: String,
    /// Column headers: (metric, `by` label or empty).
    pub columns: Vec<(String, String)>,
    /// Rows: labels and one cell per column (`None`: not measured).
    pub rows: Vec<(Vec<String>, Vec<Option<Stat>>)>,
    /// The row axes' names.
    pub row_axes: Vec<String>,
}

/// What a study measured.
#[derive(Clone, Debug, Serialize)]
pub struct StudyResult {
    /// Name.
    pub study: String,
    /// Title.
    pub title: String,
    /// What it measures.
    pub about: String,
    /// The builds that made the runs, per backend.
    pub builds: BTreeMap<String, Vec<Build>>,
    /// Points in the plan.
    pub runs: usize,
    /// Runs made by this invocation.
    pub ran: usize,
    /// Points left out.
    pub skipped: Vec<Skipped>,
    /// Runs that failed.
    pub failed: Vec<String>,
    /// Stopped before the end.
    pub interrupted: bool,
    /// Wall time, s.
    pub wall_s: f64,
    /// Goals.
    pub goals: Vec<GoalResult>,
    /// Tables.
    pub tables: Vec<TableResult>,
    /// Figures: (title, file name in the output directory).
    pub figures: Vec<(String, String)>,
    /// The output directory.
    pub dir: PathBuf,
    /// The study file.
    pub file: PathBuf,
    /// Only this shard ran (I, N); nothing is evaluated.
    pub shard: Option<(usize, usize)>,
    /// The command that made it.
    pub command: String,
}

impl StudyResult {
    /// An empty result holding only `skipped` (for the progress lines).
    fn skipped_only(s: &Study, skipped: &[Skipped]) -> StudyResult {
        StudyResult {
            study: s.study.clone(),
            title: String::new(),
            about: String::new(),
            builds: BTreeMap::new(),
            runs: 0,
            ran: 0,
            skipped: skipped.to_vec(),
            failed: Vec::new(),
            interrupted: false,
            wall_s: 0.0,
            goals: Vec::new(),
            tables: Vec::new(),
            figures: Vec::new(),
            dir: PathBuf::new(),
            file: PathBuf::new(),
            shard: None,
            command: String::new(),
        }
    }
}

/// How to run a study.
#[derive(Clone, Debug)]
pub struct StudyOptions {
    /// The engine's options (`out` is the root: the study writes
    /// `OUT/<study>/`; `backend` is the default backend).
    pub run: Options,
    /// Only points with index % N == I.
    pub shard: Option<(usize, usize)>,
    /// Evaluate what is there; run nothing.
    pub no_run: bool,
    /// The command line, for the pages (default `cclab study FILE`).
    pub command: Option<String>,
}

/// Every point's job; the points a backend cannot run, apart.
fn plan(s: &Study, out: &Path, opts: &Options) -> Result<(Vec<Job>, Vec<Skipped>), StudyError> {
    let mut jobs = Vec::new();
    let mut skipped = Vec::new();
    for (ei, e) in s.experiments().iter().enumerate() {
        let base = s.base(ei)?;
        let exclude: Vec<Selector> = s.experiments[ei]
            .exclude
            .iter()
            .filter_map(|x| Selector::parse(x).ok())
            .collect();
        for p in e.points(opts.quick) {
            if exclude.iter().any(|x| p.matches(x)) {
                continue;
            }
            let mut ov: Vec<(String, toml::Value)> =
                e.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            ov.extend(p.overrides.iter().cloned());
            let source = format!("{} experiment {}", s.path.display(), e.id);
            // `host.*` fields set up the host around a run, not the run.
            let (host, ov): (Vec<_>, Vec<_>) =
                ov.into_iter().partition(|(k, _)| k.starts_with("host."));
            let host = host_setup(&host, &source)?;
            let mut sc = match base.with_overrides(&ov, &source) {
                Ok(sc) => sc,
                Err(e) => {
                    // A Linux TCP flow on sim is refused as the scenario
                    // is read: the point is skipped if that is all.
                    let mut emu = ov.clone();
                    emu.push(("link.backend".into(), toml::Value::String("emu".into())));
                    let backend = ov
                        .iter()
                        .rev()
                        .find(|(k, _)| k == "link.backend")
                        .and_then(|(_, v)| v.as_str())
                        .and_then(Backend::parse)
                        .unwrap_or(opts.backend);
                    match base.with_overrides(&emu, &source) {
                        Ok(mut sc) if backend == Backend::Sim && sc.has_tcp_flows() => {
                            sc.link.backend = backend;
                            sc
                        }
                        _ => return Err(e.into()),
                    }
                }
            };
            let name = format!("{}/{}", e.id, p.dir_name());
            sc.name = format!("{}/{}", s.study, name);
            // The study's backend (sim, or --link's) where neither the
            // scenario nor an override names one: a scenario's own
            // (`backend = "emu"`) stands.
            if sc.link.backend == Backend::Auto && !ov.iter().any(|(k, _)| k == "link.backend") {
                sc.link.backend = opts.backend;
            }
            jobs::apply_quick(&mut sc, e, opts.quick, &source)?;
            if let Err(why) = sc.check_tcp_backend(sc.link.backend) {
                skipped.push(Skipped {
                    point: name,
                    why: why.problem,
                });
                continue;
            }
            let qlog = qlog_level(s, ei, opts.qlog_level);
            let packet_log = metrics_read(s, ei)
                .0
                .into_iter()
                .any(jobs::needs_packet_log);
            jobs.push(Job {
                exp: ei,
                name,
                qlog,
                packet_log,
                dir: out.join("runs").join(&e.id).join(p.dir_name()),
                point: p,
                scenario: sc,
                host,
            });
        }
    }
    Ok((jobs, skipped))
}

/// How the host runs a point: its `host.` fields (the last of each
/// given): `host.busy` (busy processes beside the run, 0 to 64),
/// `host.netem_router` (`guest`, `host` or `auto`: where a netem link
/// runs), `host.emu_mode` (`relay` or `ip`) and `host.count_syscalls`
/// (true: the endpoints' system calls counted, on real links); any other
/// is refused.
fn host_setup(host: &[(String, toml::Value)], source: &str) -> Result<jobs::Host, StudyError> {
    let mut h = jobs::Host::default();
    for (k, v) in host {
        let bad = |problem: String| crate::scenario::ScenarioError {
            source: source.to_string(),
            field: k.clone(),
            problem,
        };
        match k.as_str() {
            "host.busy" => {
                h.busy = v
                    .as_integer()
                    .filter(|n| (0..=64).contains(n))
                    .ok_or_else(|| bad(format!("`{v}` is not a number of busy processes, 0 to 64")))?
                    as u32
            }
            "host.netem_router" => {
                h.netem_router = match v.as_str() {
                    Some("guest") => Some(true),
                    Some("host") => Some(false),
                    Some("auto") => None,
                    _ => return Err(bad(format!("`{v}` is not one of guest, host, auto")).into()),
                }
            }
            "host.emu_mode" => {
                h.emu_mode = Some(v.as_str().and_then(crate::emu::EmuMode::parse).ok_or_else(
                    || bad(format!("`{v}` is not one of {}", crate::emu::EmuMode::NAMES)),
                )?)
            }
            "host.count_syscalls" => {
                h.count_syscalls = v
                    .as_bool()
                    .ok_or_else(|| bad(format!("`{v}` is not true or false")))?
            }
            _ => {
                return Err(bad(
                    "the host fields are host.busy (busy processes beside each run), host.netem_router (guest, host, auto), host.emu_mode (relay, ip) and host.count_syscalls (true, false)".into(),
                )
                .into())
            }
        }
    }
    Ok(h)
}

/// Metrics read from the senders' per-packet qlog events (the `core`
/// level).
const PACKET_METRICS: &[&str] = &["data_packet_bytes", "small_share", "acks_per_packet"];

/// The qlog level experiment `ei`'s runs need: off unless a goal, table
/// or figure there reads the senders' qlog; then `level`, at least `core`
/// for the per-packet metrics (and system calls per data packet).
fn qlog_level(s: &Study, ei: usize, level: quic_app::QlogLevel) -> quic_app::QlogLevel {
    use quic_app::QlogLevel;
    let (metrics, qlog) = metrics_read(s, ei);
    // A states figure's bands are the congestion states, logged from
    // `base` on, as the `ss_` metrics read them.
    let states = s.figures.iter().any(|f| {
        f.kind == "states"
            && (f.experiment == "*" || s.experiments.get(ei).is_some_and(|e| e.id == f.experiment))
    });
    if states || metrics.iter().any(|m| jobs::needs_states(m)) {
        return match level {
            QlogLevel::Off | QlogLevel::Metrics | QlogLevel::Core => QlogLevel::Base,
            l => l,
        };
    }
    // System calls are counted per data packet, which the sender's
    // per-packet events count.
    if metrics
        .iter()
        .any(|m| PACKET_METRICS.contains(m) || m.starts_with("syscalls"))
    {
        return match level {
            QlogLevel::Off | QlogLevel::Metrics => QlogLevel::Core,
            l => l,
        };
    }
    if qlog || metrics.iter().any(|m| jobs::needs_qlog(m)) {
        level
    } else {
        QlogLevel::Off
    }
}

/// The metrics experiment `ei`'s goals, tables and figures read, and
/// whether a figure draws the senders' cwnd or RTT.
fn metrics_read(s: &Study, ei: usize) -> (Vec<&str>, bool) {
    let here = |id: &Option<String>| s.scope(id.as_deref()).contains(&ei);
    let mut metrics: Vec<&str> = Vec::new();
    for g in s.goals.iter().filter(|g| here(&g.experiment)) {
        metrics.push(&g.metric);
    }
    for t in s.tables.iter().filter(|t| here(&t.experiment)) {
        metrics.extend(
            t.metrics
                .iter()
                .map(|m| metric_column(m).map_or(m.as_str(), |(name, _)| name)),
        );
    }
    let mut qlog = false;
    for f in s
        .figures
        .iter()
        .filter(|f| f.experiment == "*" || s.experiments[ei].id == f.experiment)
    {
        qlog |= matches!(f.kind.as_str(), "cwnd" | "rtt" | "states");
        metrics.extend(f.kind.strip_prefix("metric:"));
    }
    (metrics, qlog)
}

/// Runs a study (what is not already there) and evaluates it: writes
/// `OUT/<study>/study.json`, `STUDY.md` and `index.html`.
pub fn run(s: &Study, o: &StudyOptions) -> Result<StudyResult, StudyError> {
    let t0 = Instant::now();
    let opts = &o.run;
    let out = opts.out.join(&s.study);
    std::fs::create_dir_all(&out)?;
    let (jobs, skipped) = plan(s, &out, opts)?;
    if !opts.quiet {
        let r = StudyResult::skipped_only(s, &skipped);
        for (why, points) in page::skipped_by_reason(&r) {
            eprintln!(
                "cclab study {}: skipped {}: {why}",
                s.study,
                points.join(", ")
            );
        }
    }
    let builds = Builds::of(&jobs, opts.backend, &opts.bin_dir)?;
    let only: Option<Vec<usize>> = o
        .shard
        .map(|(i, n)| (0..jobs.len()).filter(|k| k % n == i).collect());
    let (ran, failed) = if o.no_run {
        (0, Vec::new())
    } else {
        jobs::run_jobs(
            &format!("cclab study {}", s.study),
            &jobs,
            &builds,
            only.as_deref(),
            opts,
        )?
    };
    // The builds that made the runs there (with --no-run, or after a
    // rebuild, not necessarily this process's).
    let mut by_backend: BTreeMap<String, Vec<Build>> = BTreeMap::new();
    for j in &jobs {
        let b = j.scenario.link.backend;
        let made = jobs::recorded_build(&j.dir).unwrap_or_else(|| builds.get(b).clone());
        let v = by_backend.entry(b.as_str().to_string()).or_default();
        if !v.contains(&made) {
            v.push(made);
        }
    }
    let data: BTreeMap<PathBuf, Result<RunData, String>> = if o.shard.is_some() {
        BTreeMap::new()
    } else {
        jobs.iter()
            .map(|j| {
                (
                    j.dir.clone(),
                    RunData::load(&j.dir).map_err(|e| e.to_string()),
                )
            })
            .collect()
    };
    let exps = s.experiments();
    let (goals, tables) = if o.shard.is_some() {
        (Vec::new(), Vec::new())
    } else {
        (
            s.goals
                .iter()
                .map(|g| goals::evaluate(s, &exps, g, &jobs, &data, opts.quick))
                .collect(),
            s.tables
                .iter()
                .map(|t| table(s, &exps, t, &jobs, &data))
                .collect(),
        )
    };
    let figures = if o.shard.is_some() {
        Vec::new()
    } else {
        draw(s, &exps, &jobs, &data, &out)
    };
    let r = StudyResult {
        study: s.study.clone(),
        title: s.title.clone(),
        about: s.about.clone(),
        builds: by_backend,
        runs: jobs.len(),
        ran,
        skipped,
        failed,
        interrupted: opts.stop.load(Ordering::Relaxed),
        wall_s: t0.elapsed().as_secs_f64(),
        goals,
        tables,
        figures,
        dir: out.clone(),
        file: s.path.clone(),
        shard: o.shard,
        command: o
            .command
            .clone()
            .unwrap_or_else(|| format!("cclab study {}", s.path.display())),
    };
    if o.shard.is_none() {
        crate::files::write_json_atomic(&out.join("study.json"), &r)?;
        write_atomic(&out.join("STUDY.md"), &page::markdown(&r))?;
        write_atomic(&out.join("index.html"), &page::html(&r))?;
    }
    Ok(r)
}

/// The study's figures, drawn by the reproduction's plotter.
fn draw(
    s: &Study,
    exps: &[Experiment],
    jobs: &[Job],
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
    out: &Path,
) -> Vec<(String, String)> {
    if s.figures.is_empty() {
        return Vec::new();
    }
    let mut drawn = Vec::new();
    for f in s.figures.iter().filter(|f| f.kind == "states") {
        let sel = f
            .series
            .values()
            .next()
            .and_then(|v| Selector::parse(v).ok())
            .unwrap_or_default();
        // `*`: one figure per experiment, named and titled after it.
        let every = f.experiment == "*";
        for (ei, e) in exps.iter().enumerate() {
            if !every && e.id != f.experiment {
                continue;
            }
            let Some(j) = jobs.iter().find(|j| j.exp == ei && j.point.matches(&sel)) else {
                continue;
            };
            let Some(Ok(d)) = data.get(&j.dir) else {
                continue;
            };
            let (name, title) = if every {
                (
                    format!("fig-{}-{}.svg", f.id, e.id),
                    format!("{}: {}", f.title, e.id),
                )
            } else {
                (format!("fig-{}.svg", f.id), f.title.clone())
            };
            match states::draw(&title, &j.dir, d, &f.panels) {
                Ok(svg) if write_atomic(&out.join(&name), &svg).is_ok() => {
                    drawn.push((title, name))
                }
                Ok(_) => {}
                Err(err) => eprintln!("figure {}: {}: not drawn: {err}", f.id, e.id),
            }
        }
    }
    let others: Vec<&StudyFigure> = s.figures.iter().filter(|f| f.kind != "states").collect();
    if others.is_empty() {
        return drawn;
    }
    let m = crate::reproduce::manifest::Manifest {
        paper: s.study.clone(),
        title: s.title.clone(),
        seed: String::new(),
        notes: Vec::new(),
        experiments: exps.to_vec(),
        claims: Vec::new(),
        figures: others
            .iter()
            .map(|f| crate::reproduce::manifest::Figure {
                id: f.id.clone(),
                source: f.title.clone(),
                paper_says: String::new(),
                experiment: f.experiment.clone(),
                kind: f.kind.clone(),
                series: f.series.clone(),
                along: f.along.clone(),
            })
            .collect(),
        dir: PathBuf::new(),
    };
    let view: crate::reproduce::JobView<'_> = jobs
        .iter()
        .map(|j| (j.exp, &j.point, j.dir.as_path()))
        .collect();
    let files = crate::reproduce::figures::figures(&m, &view, data, out);
    drawn.extend(others.iter().filter_map(|f| {
        let name = format!("fig-{}.svg", f.id);
        files.contains(&name).then(|| (f.title.clone(), name))
    }));
    drawn
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// A metric at the job whose coordinates are `coords`, over `flow`, on
/// `link` (a link metric on one named link).
fn measure(
    jobs: &[Job],
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
    exp: usize,
    coords: &[(String, String)],
    metric: &str,
    flow: Option<&str>,
    link: Option<&str>,
) -> Result<Stat, String> {
    let j = jobs
        .iter()
        .find(|j| j.exp == exp && j.point.coords == coords)
        .ok_or("not run")?;
    let d = data
        .get(&j.dir)
        .ok_or("not read")?
        .as_ref()
        .map_err(|e| e.clone())?;
    let v = d.values_on(metric, flow, link).map_err(|e| e.to_string())?;
    Stat::of(&v).ok_or_else(|| format!("{metric}: no finite value"))
}

fn table(
    s: &Study,
    exps: &[Experiment],
    t: &TableSpec,
    jobs: &[Job],
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
) -> TableResult {
    let scope = s.scope(t.experiment.as_deref());
    let multi = scope.len() > 1;
    let labels = |e: &Experiment, name: &str| -> Vec<String> {
        e.axes
            .iter()
            .find(|a| a.name == name)
            .map(|a| {
                (0..a.values.len())
                    .map(|i| Experiment::label(a, i))
                    .collect()
            })
            .unwrap_or_default()
    };
    // The `by` labels in the order the experiments give them.
    let mut by: Vec<String> = Vec::new();
    for &ei in &scope {
        for l in
            t.by.as_deref()
                .map(|b| labels(&exps[ei], b))
                .unwrap_or_else(|| vec![String::new()])
        {
            if !by.contains(&l) {
                by.push(l);
            }
        }
    }
    let columns: Vec<(String, String)> = t
        .metrics
        .iter()
        .flat_map(|m| by.iter().map(move |b| (m.clone(), b.clone())))
        .collect();
    let keep = t.where_.as_deref().and_then(|w| Selector::parse(w).ok());
    // Rows in the order the points run, one per combination that ran.
    let mut rows: Vec<(Vec<String>, Vec<Option<Stat>>)> = Vec::new();
    for &ei in &scope {
        let points: Vec<&Point> = jobs
            .iter()
            .filter(|j| j.exp == ei && keep.as_ref().is_none_or(|k| j.point.matches(k)))
            .map(|j| &j.point)
            .collect();
        for p in &points {
            let labels: Vec<String> = t
                .rows
                .iter()
                .map(|r| p.coord(r).unwrap_or("–").to_string())
                .collect();
            let mut key = labels.clone();
            if multi {
                key.insert(0, exps[ei].id.clone());
            }
            if rows.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let cells = columns
                .iter()
                .map(|(m, b)| {
                    // The point with the row's labels and this column's
                    // `by` label (the other axes have one value, or
                    // `where` fixes them: checked at load).
                    let target = points.iter().find(|q| {
                        t.rows
                            .iter()
                            .zip(&labels)
                            .all(|(r, l)| q.coord(r).unwrap_or("–") == l)
                            && t.by
                                .as_deref()
                                .is_none_or(|ax| q.coord(ax) == Some(b.as_str()))
                    })?;
                    let (name, sel) = metric_column(m).ok()?;
                    let flow = sel.flow.as_deref().or(t.flow.as_deref());
                    measure(
                        jobs,
                        data,
                        ei,
                        &target.coords,
                        name,
                        flow,
                        sel.link.as_deref(),
                    )
                    .ok()
                })
                .collect();
            rows.push((key, cells));
        }
    }
    let mut row_axes = t.rows.clone();
    if multi {
        row_axes.insert(0, "experiment".into());
    }
    TableResult {
        id: t.id.clone(),
        title: t.title.clone(),
        columns,
        rows,
        row_axes,
    }
}

#[cfg(test)]
mod tests;
