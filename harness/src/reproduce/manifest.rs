//! `paper.toml`: one paper's experiments, claims and figures.
//!
//! ```toml
//! paper = "ours"                       # short name: `cclab reproduce ours`
//! title = "Ours: A Congestion Control Algorithm"
//! seed = "000_6a87cc4bd762b0ce.txt"    # the paper's text in the seeds
//! notes = ["choices made where the paper is silent, one per line"]
//!
//! [[experiment]]
//! id = "t1"                            # runs go to OUT/<paper>/runs/t1/<point>
//! source = "§IV.B scenario 1"
//! scenario = "table1.toml"             # relative to this file
//! set = { "link.queue" = "100pkt" }    # fixed overrides (optional)
//! quick = { duration = "30s", repetitions = 2, keep = { buffer = ["25", "50"] } }
//! # sensitivity_of = "t0"              # re-evaluate t0's claims on these runs (same axes),
//!                                      # reported apart and never counted; `source` says what differs
//! [[experiment.axis]]                  # points: the cartesian product of the axes
//! name = "cc"
//! field = "flows.0.cc"
//! values = ["base:alpha=1,beta=3", "ours"]   # algorithm specs
//! labels = ["base", "ours"]            # default: the values as text
//! x = [1, 2]                           # numbers for plots along this axis (optional)
//!
//! [[claim]]
//! id = "T1-drops"
//! source = "Table I"
//! statement = "Ours drops far fewer packets than the base"
//! experiment = "t1"
//! metric = "drops"                     # see `metrics::METRICS`
//! values = { base = "cc=base", ours = "cc=ours" }   # label -> selector
//! paper = { base = 14329, ours = 817 }              # or the paper's words
//! test = "ours < base"                 # see `expr`
//! over = "buffer"                      # optional: test at every label of this axis
//! require = "all"                      # with `over`: all (default) or most
//! min_effect = "2%"                    # smaller differences are within noise (default 2%)
//! if_fail = "the likely reason, shown with a FAIL; {queue_pkts:cc=ours} is measured now"
//! caveat = "shown with every verdict"
//! # duplicate_of = "T0-drops"          # the same phenomenon on the same runs: counted once
//! # contradicts = "T1-queue"           # the paper claims both: the pair is counted once
//! # guaranteed = "why the outcome cannot differ here": shown, never counted
//! # reinterpretation = "what of ours it tests instead of the paper's text":
//! #   counted on its own line, apart from the paper's claims
//! # or, for a claim that cannot be run:
//! # na = "why (e.g. PIPD has no published definition)"
//!
//! [[figure]]
//! id = "fig3"
//! source = "Fig. 3"
//! paper_says = "The base's queue swings between full and empty; ours settles at 2 packets"
//! experiment = "t1"
//! kind = "queue_pkts"                  # a signal over time, or metric:<name> along `along`
//! series = { base = "cc=base", ours = "cc=ours" }
//! along = "buffer"                     # for metric figures: the axis on x
//! ```
//!
//! A selector is `key=value` conditions joined by `,`: an axis name and
//! one of its labels, or `flow=<algorithm name>` / `flow=#<index>` to pick
//! flows inside a run (by default all of its flows).
//!
//! Texts that explain a result (`if_fail`, `caveat`, `note`) quote
//! measured figures only through placeholders, measured afresh by every
//! reproduction: `{metric:selector}` in the claim's experiment, or
//! `{metric:selector@experiment}` in another one.

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
    /// Another experiment whose claims are evaluated again on these runs
    /// (the same axes, one setting changed: `source` says which), to show
    /// how much the verdicts depend on it; never counted.
    pub sensitivity_of: Option<String>,
}

/// One varied field.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// Name used in selectors.
    pub name: String,
    /// The scenario field (a dotted path, as in sweeps), or several fields
    /// set together (then each value is an array, one item per field), or
    /// `set` (then each value is a table of field overrides).
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

/// The field name of an axis whose values are tables of overrides
/// (`{}` for the base, `{ "flows.0.pacing" = "off", "flows.0.mtu" = 1472 }`).
pub const SET_AXIS: &str = "set";

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
    /// The smallest difference that counts as agreement or disagreement,
    /// as a percentage of the larger side (`"2%"`, the default).
    pub min_effect: Option<String>,
    /// The likely reason, given with a FAIL.
    pub if_fail: Option<String>,
    /// A reservation shown with every verdict, PASS included.
    pub caveat: Option<String>,
    /// Anything else worth saying next to the verdict.
    pub note: Option<String>,
    /// Another claim that measures the same phenomenon on the same runs:
    /// this one is reported but counted only through that one.
    pub duplicate_of: Option<String>,
    /// Another claim of the paper that states the opposite relation on
    /// the same measurements: one of the two must pass, so the pair is
    /// reported once, as contradictory, and neither counts.
    pub contradicts: Option<String>,
    /// Why the outcome cannot differ in our setup (a saturated link's
    /// aggregate, schedulers that are one here): reported, never counted.
    pub guaranteed: Option<String>,
    /// What the claim tests in place of the paper's text as written (an
    /// equation of ours where the paper's cannot be run as printed): its
    /// verdict is counted on a line of its own, never as the paper's.
    pub reinterpretation: Option<String>,
}

/// The minimum effect of a claim with none stated.
pub const DEFAULT_MIN_EFFECT: f64 = 0.02;

impl Claim {
    /// The minimum effect as a fraction (validated by `Manifest::load`).
    pub fn min_effect(&self) -> f64 {
        self.min_effect
            .as_deref()
            .and_then(parse_percent)
            .unwrap_or(DEFAULT_MIN_EFFECT)
    }
}

/// `"2%"` or `"0.5 %"` as a fraction in [0, 1]; `None` otherwise.
pub fn parse_percent(s: &str) -> Option<f64> {
    let v: f64 = s.trim().strip_suffix('%')?.trim().parse().ok()?;
    (v.is_finite() && (0.0..=100.0).contains(&v)).then_some(v / 100.0)
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
    /// Link filter for link metrics: one named link of a multi-link run.
    pub link: Option<String>,
}

impl Selector {
    /// Parses `cc=base,flow=ours`.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut out = Selector::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value"))?;
            let (k, v) = (k.trim(), v.trim());
            if k == "flow" {
                out.flow = Some(v.to_string());
            } else if k == "link" {
                out.link = Some(v.to_string());
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
    "utilization_steady",
    "queue_delay_ms",
    "queue_pkts",
    "loss_rate",
    "delivery_ratio",
    "delivery_first",
    "queue_delay_first_ms",
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
    "eq7_mbps",
    "smcc_alpha",
    "smcc_alpha_min",
    "smcc_alpha_max",
    "data_packet_bytes",
    "small_share",
    "acks_per_packet",
    "cpu_busy",
    "guest_cpu_busy",
    "share",
    "base_rtt_ms",
    "rtt_min_ms",
    "recovery_s",
    "unrecovered",
    "change_late_ms",
    "ss_exit_ms",
    "ss_end_ms",
    "ss_cwnd_kb",
    "ss_lost",
    "ss_peak_queue_ms",
    "ss_reason",
    "ss_fill_ms",
    "ss_late_rtts",
    "syscalls_per_packet",
];

/// Whether `m` names a metric: one of [`METRICS`], `last:NAME`, the
/// last value the senders' qlog gave their controller's metric NAME
/// (`last:bbr_max_bw_bps`), or `entered:STATE`, how many times the
/// senders entered congestion state STATE (`entered:probe_rtt`), or
/// `syscalls:NAME`, the endpoints' calls of NAME per data packet (one of
/// [`crate::syscount::NAMED`]).
pub fn is_metric(m: &str) -> bool {
    METRICS.contains(&m)
        || ["last:", "entered:"]
            .iter()
            .any(|p| m.strip_prefix(p).is_some_and(|n| !n.is_empty()))
        || m.strip_prefix("syscalls:")
            .is_some_and(|n| crate::syscount::NAMED.contains(&n))
}

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
                        // `field = "set"`: each value a table of overrides.
                        (Fields::One(f), toml::Value::Table(t)) if f == SET_AXIS => {
                            for (k, v) in t {
                                q.overrides.push((k.clone(), v.clone()));
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
values = ["base", "ours"]
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
        assert_eq!(p[1].dir_name(), "base-2");
        assert_eq!(p[2].coord("a"), Some("ours"));
        let q = e.points(true);
        assert_eq!(q.len(), 2);
        assert!(q.iter().all(|p| p.coord("b") == Some("2")));
        assert!(p[3].matches(&Selector::parse("a=ours,flow=other").unwrap()));
        assert!(!p[0].matches(&Selector::parse("a=ours").unwrap()));
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
values = ["base", "ours:reserved={reserved}mbit"]
labels = ["base", "ours"]
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
        assert_eq!(p[3].overrides[0].1.as_str(), Some("ours:reserved=40mbit"));
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
        let s = Selector::parse("cc=base, flow=#2").unwrap();
        assert_eq!(s.axes, vec![("cc".into(), "base".into())]);
        assert_eq!(s.flow.as_deref(), Some("#2"));
        assert!(Selector::parse("base").is_err());
    }
}
