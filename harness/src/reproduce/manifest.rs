//! `paper.toml`: one paper's experiments, claims and figures.
//!
//! ```toml
//! paper = "smcc"                       # short name: `cclab reproduce smcc`
//! title = "SMCC: Self-Managing Congestion Control Algorithm"
//! seed = "000_6a87cc4bd762b0ce.txt"    # the paper's text in the seeds
//! notes = ["choices made where the paper is silent, one per line"]
//!
//! [[experiment]]
//! id = "t1"                            # runs go to OUT/<paper>/runs/t1/<point>
//! source = "§IV.B scenario 1"
//! scenario = "table1.toml"             # relative to this file
//! set = { "link.queue" = "100pkt" }    # fixed overrides (optional)
//! quick = { duration = "30s", repetitions = 2, keep = { buffer = ["25", "50"] } }
//! [[experiment.axis]]                  # points: the cartesian product of the axes
//! name = "cc"
//! field = "flows.0.cc"
//! values = ["vegas:alpha=1,beta=3", "smcc"]
//! labels = ["vegas", "smcc"]           # default: the values as text
//! x = [1, 2]                           # numbers for plots along this axis (optional)
//!
//! [[claim]]
//! id = "T1-drops"
//! source = "Table I"
//! statement = "SMCC drops far fewer packets than Vegas"
//! experiment = "t1"
//! metric = "drops"                     # see `metrics::METRICS`
//! values = { vegas = "cc=vegas", smcc = "cc=smcc" }   # label -> selector
//! paper = { vegas = 14329, smcc = 817 }               # or the paper's words
//! test = "smcc < vegas"                # see `expr`
//! over = "buffer"                      # optional: test at every label of this axis
//! require = "all"                      # with `over`: all (default) or most
//! if_fail = "the likely reason, shown with a FAIL"
//! # or, for a claim that cannot be run:
//! # na = "why (e.g. PIPD has no published definition)"
//!
//! [[figure]]
//! id = "fig3"
//! source = "Fig. 3"
//! paper_says = "Vegas's queue swings between full and empty; SMCC's settles at 2 packets"
//! experiment = "t1"
//! kind = "queue_pkts"                  # a signal over time, or metric:<name> along `along`
//! series = { vegas = "cc=vegas", smcc = "cc=smcc" }
//! along = "buffer"                     # for metric figures: the axis on x
//! ```
//!
//! A selector is `key=value` conditions joined by `,`: an axis name and
//! one of its labels, or `flow=<algorithm name>` / `flow=#<index>` to pick
//! flows inside a run (by default all of its flows).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A paper's reproduction.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Short name.
    pub paper: String,
    /// Full title.
    pub title: String,
    /// The paper's text file under the seeds.
    pub seed: String,
    /// Choices made where the paper is ambiguous or silent.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Experiments.
    #[serde(default, rename = "experiment")]
    pub experiments: Vec<Experiment>,
    /// Claims.
    #[serde(default, rename = "claim")]
    pub claims: Vec<Claim>,
    /// Figures redrawn from our runs.
    #[serde(default, rename = "figure")]
    pub figures: Vec<Figure>,
    /// The directory it was read from (scenarios are relative to it).
    #[serde(skip)]
    pub dir: PathBuf,
}

/// One experiment: a base scenario and the axes it varies.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Name, unique in the paper.
    pub id: String,
    /// Where in the paper.
    pub source: String,
    /// Base scenario file, relative to the manifest.
    pub scenario: String,
    /// Fixed overrides of scenario fields.
    #[serde(default)]
    pub set: toml::Table,
    /// Axes: every combination is one point.
    #[serde(default, rename = "axis")]
    pub axes: Vec<Axis>,
    /// What `--quick` changes.
    #[serde(default)]
    pub quick: Quick,
}

/// One varied field.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// Name used in selectors.
    pub name: String,
    /// The scenario field (a dotted path, as in sweeps), or several fields
    /// set together (then each value is an array, one item per field).
    pub field: Fields,
    /// Its values. A string value may name another axis as `{name}`:
    /// that axis's label at the same point is put in its place
    /// (`"br-tcp:reserved={reserved}mbit"`).
    pub values: Vec<toml::Value>,
    /// Labels of the values (default: the values as text).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Numeric positions for plots (default: the labels if numeric, else 1..n).
    #[serde(default)]
    pub x: Vec<f64>,
}

/// One field or several.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Fields {
    /// One field.
    One(String),
    /// Fields set together.
    Many(Vec<String>),
}

impl Fields {
    /// The field paths.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Fields::One(f) => vec![f.as_str()],
            Fields::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// `--quick` overrides.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    /// Duration of each repetition.
    pub duration: Option<String>,
    /// Repetitions.
    pub repetitions: Option<u32>,
    /// Axis labels kept (others skipped), by axis name.
    #[serde(default)]
    pub keep: BTreeMap<String, Vec<String>>,
}

/// One claim of the paper.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Identifier, unique in the paper.
    pub id: String,
    /// Where in the paper ("Table I", "Fig. 6", "§5.1").
    pub source: String,
    /// The claim in words.
    pub statement: String,
    /// The experiment measured.
    pub experiment: Option<String>,
    /// The metric compared.
    pub metric: Option<String>,
    /// Labels and their selectors.
    #[serde(default)]
    pub values: BTreeMap<String, String>,
    /// The paper's figures: a table of label = number, or its words.
    pub paper: Option<toml::Value>,
    /// The directional test.
    pub test: Option<String>,
    /// Evaluate the test at each label of this axis.
    pub over: Option<String>,
    /// With `over`: `all` (default) or `most`.
    pub require: Option<String>,
    /// Why it cannot be run (verdict N/A).
    pub na: Option<String>,
    /// The likely reason, given with a FAIL.
    pub if_fail: Option<String>,
    /// Anything else worth saying next to the verdict.
    pub note: Option<String>,
}

/// A figure redrawn from our runs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// Identifier (file name `fig-<id>.svg`).
    pub id: String,
    /// Which of the paper's figures.
    pub source: String,
    /// What the paper's figure shows, in words.
    pub paper_says: String,
    /// The experiment drawn.
    pub experiment: String,
    /// A signal over time (`queue_pkts`, `utilization`, `drops`, `cwnd`,
    /// `rtt`, `goodput`) or `metric:<name>` along an axis.
    pub kind: String,
    /// Lines: label = selector.
    pub series: BTreeMap<String, String>,
    /// For metric figures: the axis on x.
    pub along: Option<String>,
}

/// A selector: axis conditions and an optional flow filter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector {
    /// (axis, label) conditions.
    pub axes: Vec<(String, String)>,
    /// Flow filter: an algorithm name or `#index`.
    pub flow: Option<String>,
}

impl Selector {
    /// Parses `cc=vegas,flow=exp`.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut out = Selector::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value"))?;
            let (k, v) = (k.trim(), v.trim());
            if k == "flow" {
                out.flow = Some(v.to_string());
            } else {
                out.axes.push((k.to_string(), v.to_string()));
            }
        }
        Ok(out)
    }
}

/// The metrics a claim or figure may name.
pub const METRICS: &[&str] = &[
    "drops",
    "utilization",
    "queue_delay_ms",
    "queue_pkts",
    "loss_rate",
    "delivery_ratio",
    "jain",
    "goodput_mbps",
    "data_mb",
    "rtt_ms",
    "rtt_p95_ms",
    "cwnd_cv",
    "cwnd_kb",
    "lost",
    "completion_s",
    "goodput_cv",
];

/// The signals a time-series figure may draw.
pub const SIGNALS: &[&str] = &[
    "queue_pkts",
    "utilization",
    "drops",
    "cwnd",
    "rtt",
    "goodput",
];

/// Why a manifest is unusable.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ManifestError {
    /// The file.
    pub path: String,
    /// What is wrong (naming the field and what is allowed).
    pub problem: String,
}

impl Experiment {
    /// The label of value `i` on axis `a`.
    pub fn label(a: &Axis, i: usize) -> String {
        a.labels
            .get(i)
            .cloned()
            .unwrap_or_else(|| match &a.values[i] {
                toml::Value::String(s) => s.clone(),
                v => v.to_string(),
            })
    }

    /// The x position of value `i` on axis `a`.
    pub fn x(a: &Axis, i: usize) -> f64 {
        a.x.get(i)
            .copied()
            .or_else(|| Self::label(a, i).parse().ok())
            .unwrap_or((i + 1) as f64)
    }

    /// Every point: its (axis, label) coordinates and overrides, in order
    /// (the last axis varies fastest). `quick` applies `quick.keep`.
    pub fn points(&self, quick: bool) -> Vec<Point> {
        let mut pts = vec![Point::default()];
        for a in &self.axes {
            let mut next = Vec::new();
            for p in &pts {
                for i in 0..a.values.len() {
                    let label = Self::label(a, i);
                    if quick {
                        if let Some(keep) = self.quick.keep.get(&a.name) {
                            if !keep.contains(&label) {
                                continue;
                            }
                        }
                    }
                    let mut q = p.clone();
                    q.coords.push((a.name.clone(), label));
                    match (&a.field, &a.values[i]) {
                        (Fields::Many(fs), toml::Value::Array(vs)) => {
                            for (f, v) in fs.iter().zip(vs) {
                                q.overrides.push((f.clone(), v.clone()));
                            }
                        }
                        (f, v) => q.overrides.push((f.paths()[0].to_string(), v.clone())),
                    }
                    next.push(q);
                }
            }
            pts = next;
        }
        for p in &mut pts {
            let coords = p.coords.clone();
            for (_, v) in &mut p.overrides {
                if let toml::Value::String(s) = v {
                    for (name, label) in &coords {
                        *s = s.replace(&format!("{{{name}}}"), label);
                    }
                }
            }
        }
        pts
    }
}

/// One point of an experiment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Point {
    /// (axis, label) coordinates.
    pub coords: Vec<(String, String)>,
    /// Field overrides.
    pub overrides: Vec<(String, toml::Value)>,
}

impl Point {
    /// Directory name: the labels joined by `-`, or `base`.
    pub fn dir_name(&self) -> String {
        if self.coords.is_empty() {
            return "base".into();
        }
        self.coords
            .iter()
            .map(|(_, l)| {
                l.chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '.' || c == '+' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("-")
    }

    /// The label on axis `name`.
    pub fn coord(&self, name: &str) -> Option<&str> {
        self.coords
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, l)| l.as_str())
    }

    /// True when every axis condition of `sel` holds.
    pub fn matches(&self, sel: &Selector) -> bool {
        sel.axes
            .iter()
            .all(|(k, v)| self.coord(k).is_some_and(|l| l == v))
    }
}

impl Manifest {
    /// Reads and validates `dir/paper.toml`.
    pub fn load(dir: &Path) -> Result<Manifest, ManifestError> {
        let path = dir.join("paper.toml");
        let err = |problem: String| ManifestError {
            path: path.display().to_string(),
            problem,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| err(format!("cannot read: {e}")))?;
        let mut m: Manifest = toml::from_str(&text).map_err(|e| err(e.message().to_string()))?;
        m.dir = dir.to_path_buf();
        m.validate().map_err(err)?;
        Ok(m)
    }

    /// The experiment named `id`.
    pub fn experiment(&self, id: &str) -> Option<&Experiment> {
        self.experiments.iter().find(|e| e.id == id)
    }

    fn validate(&self) -> Result<(), String> {
        let mut ids = std::collections::BTreeSet::new();
        for e in &self.experiments {
            if !ids.insert(&e.id) {
                return Err(format!("experiment `{}` is defined twice", e.id));
            }
            if !self.dir.join(&e.scenario).exists() {
                return Err(format!(
                    "experiment `{}`: scenario `{}` not found next to paper.toml",
                    e.id, e.scenario
                ));
            }
            for a in &e.axes {
                if a.values.is_empty() {
                    return Err(format!(
                        "experiment `{}` axis `{}`: no values",
                        e.id, a.name
                    ));
                }
                if !a.labels.is_empty() && a.labels.len() != a.values.len() {
                    return Err(format!(
                        "experiment `{}` axis `{}`: {} labels for {} values",
                        e.id,
                        a.name,
                        a.labels.len(),
                        a.values.len()
                    ));
                }
                if !a.x.is_empty() && a.x.len() != a.values.len() {
                    return Err(format!(
                        "experiment `{}` axis `{}`: {} x positions for {} values",
                        e.id,
                        a.name,
                        a.x.len(),
                        a.values.len()
                    ));
                }
                if let Fields::Many(fs) = &a.field {
                    let ok = a
                        .values
                        .iter()
                        .all(|v| v.as_array().is_some_and(|x| x.len() == fs.len()));
                    if !ok {
                        return Err(format!(
                            "experiment `{}` axis `{}`: with {} fields each value must be an array of {} items",
                            e.id,
                            a.name,
                            fs.len(),
                            fs.len()
                        ));
                    }
                }
                if a.name == "flow" {
                    return Err(format!(
                        "experiment `{}`: `flow` is reserved for flow selectors; name the axis otherwise",
                        e.id
                    ));
                }
            }
            for k in e.quick.keep.keys() {
                if !e.axes.iter().any(|a| &a.name == k) {
                    return Err(format!(
                        "experiment `{}`: quick.keep names axis `{k}`; axes: {}",
                        e.id,
                        axis_names(e)
                    ));
                }
            }
        }
        let mut cids = std::collections::BTreeSet::new();
        for c in &self.claims {
            if !cids.insert(&c.id) {
                return Err(format!("claim `{}` is defined twice", c.id));
            }
            if c.na.is_some() {
                continue;
            }
            let where_ = |p: String| format!("claim `{}`: {p}", c.id);
            let eid = c.experiment.as_deref().ok_or_else(|| {
                where_("needs `experiment` (or `na` with the reason it cannot be run)".into())
            })?;
            let e = self.experiment(eid).ok_or_else(|| {
                where_(format!(
                    "experiment `{eid}` is not defined; defined: {}",
                    self.experiments
                        .iter()
                        .map(|e| e.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            let metric = c.metric.as_deref().unwrap_or("");
            if !METRICS.contains(&metric) {
                return Err(where_(format!(
                    "metric `{metric}` is not one of: {}",
                    METRICS.join(", ")
                )));
            }
            let test = c
                .test
                .as_deref()
                .ok_or_else(|| where_("needs a `test`".into()))?;
            let t = super::expr::Test::parse(test).map_err(|p| where_(format!("test: {p}")))?;
            for l in t.labels() {
                if !c.values.contains_key(&l) {
                    return Err(where_(format!(
                        "test names `{l}`, which `values` does not define (defined: {})",
                        c.values.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
            }
            if let Some(o) = &c.over {
                if !e.axes.iter().any(|a| &a.name == o) {
                    return Err(where_(format!(
                        "over: axis `{o}` not in experiment `{eid}`; axes: {}",
                        axis_names(e)
                    )));
                }
            } else if t.is_trend() {
                return Err(where_(
                    "increasing()/decreasing() need `over = <axis>`".into(),
                ));
            }
            if !matches!(c.require.as_deref(), None | Some("all") | Some("most")) {
                return Err(where_("require: expected `all` or `most`".into()));
            }
            for (label, s) in &c.values {
                check_selector(e, s).map_err(|p| where_(format!("values.{label}: {p}")))?;
            }
        }
        for f in &self.figures {
            let where_ = |p: String| format!("figure `{}`: {p}", f.id);
            let e = self
                .experiment(&f.experiment)
                .ok_or_else(|| where_(format!("experiment `{}` is not defined", f.experiment)))?;
            match f.kind.strip_prefix("metric:") {
                Some(m) => {
                    if !METRICS.contains(&m) {
                        return Err(where_(format!(
                            "metric `{m}` is not one of: {}",
                            METRICS.join(", ")
                        )));
                    }
                    let along = f
                        .along
                        .as_deref()
                        .ok_or_else(|| where_("metric figures need `along = <axis>`".into()))?;
                    if !e.axes.iter().any(|a| a.name == along) {
                        return Err(where_(format!(
                            "along: axis `{along}` not in experiment; axes: {}",
                            axis_names(e)
                        )));
                    }
                }
                None => {
                    if !SIGNALS.contains(&f.kind.as_str()) {
                        return Err(where_(format!(
                            "kind `{}` is not one of: {}, or metric:<name>",
                            f.kind,
                            SIGNALS.join(", ")
                        )));
                    }
                }
            }
            for (label, s) in &f.series {
                check_selector(e, s).map_err(|p| where_(format!("series.{label}: {p}")))?;
            }
        }
        Ok(())
    }
}

fn axis_names(e: &Experiment) -> String {
    if e.axes.is_empty() {
        return "(none)".into();
    }
    e.axes
        .iter()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_selector(e: &Experiment, s: &str) -> Result<(), String> {
    let sel = Selector::parse(s)?;
    for (k, v) in &sel.axes {
        let a = e.axes.iter().find(|a| &a.name == k).ok_or_else(|| {
            format!(
                "`{k}` is not an axis of `{}` (axes: {}; or flow=)",
                e.id,
                axis_names(e)
            )
        })?;
        let labels: Vec<String> = (0..a.values.len())
            .map(|i| Experiment::label(a, i))
            .collect();
        if !labels.contains(v) {
            return Err(format!(
                "`{v}` is not a label of axis `{k}`; labels: {}",
                labels.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_the_product_of_the_axes_last_fastest() {
        let e: Experiment = toml::from_str(
            r#"id = "e"
source = "s"
scenario = "x.toml"
quick = { keep = { b = ["2"] } }
[[axis]]
name = "a"
field = "flows.0.cc"
values = ["vegas", "smcc"]
[[axis]]
name = "b"
field = "link.queue"
values = ["1pkt", "2pkt"]
labels = ["1", "2"]
"#,
        )
        .unwrap();
        let p = e.points(false);
        assert_eq!(p.len(), 4);
        assert_eq!(p[1].dir_name(), "vegas-2");
        assert_eq!(p[2].coord("a"), Some("smcc"));
        let q = e.points(true);
        assert_eq!(q.len(), 2);
        assert!(q.iter().all(|p| p.coord("b") == Some("2")));
        assert!(p[3].matches(&Selector::parse("a=smcc,flow=exp").unwrap()));
        assert!(!p[0].matches(&Selector::parse("a=smcc").unwrap()));
    }

    #[test]
    fn axes_may_set_several_fields_and_name_other_axes() {
        let e: Experiment = toml::from_str(
            r#"id = "e"
source = "s"
scenario = "x.toml"
[[axis]]
name = "cc"
field = "flows.0.cc"
values = ["newreno", "br-tcp:reserved={reserved}mbit"]
labels = ["newreno", "br"]
[[axis]]
name = "reserved"
field = ["cross.0.rate", "cross.0.weight"]
values = [["90mbit", 90], ["60mbit", 60]]
labels = ["10", "40"]
"#,
        )
        .unwrap();
        let p = e.points(false);
        assert_eq!(p.len(), 4);
        assert_eq!(p[3].overrides[0].1.as_str(), Some("br-tcp:reserved=40mbit"));
        assert_eq!(
            p[3].overrides[1],
            ("cross.0.rate".to_string(), toml::Value::from("60mbit"))
        );
        assert_eq!(
            p[3].overrides[2],
            ("cross.0.weight".to_string(), toml::Value::from(60))
        );
    }

    #[test]
    fn selectors_parse_axes_and_flow() {
        let s = Selector::parse("cc=vegas, flow=#2").unwrap();
        assert_eq!(s.axes, vec![("cc".into(), "vegas".into())]);
        assert_eq!(s.flow.as_deref(), Some("#2"));
        assert!(Selector::parse("vegas").is_err());
    }
}
