//! Tables of tuned parameters, one entry per network condition, as
//! `cclab tune` writes them:
//!
//! ```toml
//! algorithm = "vegas"
//! objective = "smcc"
//!
//! [[entry]]
//! rtt_ms = 40.0
//! rate_bps = 20000000.0
//! fitness = 0.93
//! alpha = 2.41
//! beta = 5.07
//! ```
//!
//! An entry holds its condition (`rtt_ms`, `rate_bps`, and `loss` and
//! `flows` when the tune varied them), the objective value reached
//! (`fitness`) and every tuned parameter under its registry name. SMCC's
//! offline tables are such tables of Vegas's `alpha` and `beta`
//! ([`crate::smcc::SmccTable`] reads them). For any algorithm,
//! [`crate::registry::resolve_spec`] turns `ALG:table=FILE` into the spec
//! of the entry nearest to a known condition.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A named tune that an algorithm defines: `cclab tune NAME` searches
/// `params` of `algorithm` for `objective`, and NAME's `table=` loads the
/// result. The harness reads these here and knows no algorithm by name.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct TunePreset {
    /// The name `cclab tune` takes.
    pub name: &'static str,
    /// The algorithm whose parameters are searched.
    pub algorithm: &'static str,
    /// The searched parameters, `NAME=LO..HI`.
    pub params: &'static [&'static str],
    /// The objective: a name from [`OBJECTIVES`].
    pub objective: &'static str,
    /// What it is.
    pub summary: &'static str,
}

/// Objectives algorithms define (their own fitness), by name, as
/// expressions over the metrics `cclab tune` measures (goodput and
/// utilisation as fractions of the capacity, delays in ms, loss as a
/// fraction): name, expression, what it is.
pub const OBJECTIVES: &[(&str, &str, &str)] = &[(
    "smcc",
    "goodput - queue_delay / base_rtt - 10 * loss_rate",
    "SMCC's fitness (crate::smcc::fitness with delta = 1, lambda = 10): rate fraction less queueing delay as a fraction of the base RTT less ten times the loss fraction",
)];

/// The named tunes.
pub const PRESETS: &[TunePreset] = &[TunePreset {
    name: "smcc",
    algorithm: "vegas",
    // SMCC's swarm bounds (crate::smcc::pso_config with max = 20 and the
    // default alpha_min = 0.01): alpha in [0.01, max - 0.5], beta in
    // [0.51, max].
    params: &["alpha=0.01..19.5", "beta=0.51..20"],
    objective: "smcc",
    summary: "SMCC's offline mode: Vegas's alpha and beta for SMCC's fitness; `smcc:table=FILE` loads the table",
}];

/// One condition's tuned parameters.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TunedEntry {
    /// Base RTT of the condition, ms.
    pub rtt_ms: f64,
    /// Bottleneck rate of the condition, bit/s.
    pub rate_bps: f64,
    /// Random loss of the condition, fraction (when the tune set one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// Competing flows of the condition (when the tune set them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// The objective value the parameters reached.
    #[serde(default)]
    pub fitness: f64,
    /// The parameters, by registry name.
    #[serde(flatten)]
    pub params: BTreeMap<String, f64>,
}

/// A table of tuned parameters.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct TunedTable {
    /// The algorithm tuned (absent in tables written before generic
    /// tuning: SMCC's, of Vegas's alpha and beta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// The objective maximised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// The rows.
    #[serde(default)]
    pub entry: Vec<TunedEntry>,
    /// Where it was read from.
    #[serde(skip)]
    pub path: PathBuf,
}

impl TunedTable {
    /// Reads a table and checks every entry's condition and values.
    pub fn load(path: &Path) -> Result<TunedTable, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text, path)
    }

    /// Parses a table's text (`path` for messages).
    pub fn parse(text: &str, path: &Path) -> Result<TunedTable, String> {
        let mut t: TunedTable = toml::from_str(text).map_err(|e| {
            format!(
                "{} is not a table of tuned parameters (top: algorithm, objective; [[entry]]: rtt_ms, rate_bps, fitness and one number per parameter): {}",
                path.display(),
                e.message()
            )
        })?;
        if t.entry.is_empty() {
            return Err(format!("{} has no [[entry]] rows", path.display()));
        }
        for (i, e) in t.entry.iter().enumerate() {
            let ok = e.rtt_ms.is_finite()
                && e.rtt_ms > 0.0
                && e.rate_bps.is_finite()
                && e.rate_bps > 0.0
                && e.loss.is_none_or(|l| (0.0..1.0).contains(&l))
                && e.params.values().all(|v| v.is_finite());
            if !ok {
                return Err(format!(
                    "{} entry {i}: needs rtt_ms > 0, rate_bps > 0, 0 <= loss < 1 and finite parameters (got {e:?})",
                    path.display()
                ));
            }
        }
        t.path = path.to_path_buf();
        Ok(t)
    }

    /// The entry nearest to a condition: log distance in RTT and rate,
    /// plus the difference in loss (percentage points) and in flows (log)
    /// where both sides have them.
    pub fn nearest(&self, rtt_ms: f64, rate_bps: f64, loss: Option<f64>) -> (usize, &TunedEntry) {
        let log_d = |a: f64, b: f64| if a > 0.0 { (a / b).ln().abs() } else { 0.0 };
        let d = |e: &TunedEntry| {
            let l = match (loss, e.loss) {
                (Some(a), Some(b)) => (a - b).abs() * 100.0,
                _ => 0.0,
            };
            log_d(rtt_ms, e.rtt_ms) + log_d(rate_bps, e.rate_bps) + l
        };
        self.entry
            .iter()
            .enumerate()
            .min_by(|a, b| d(a.1).total_cmp(&d(b.1)))
            .expect("a loaded table has entries")
    }

    /// The table as TOML, with a comment header.
    pub fn to_toml(&self, header: &str) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        let mut out = String::new();
        for line in header.lines() {
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&body);
        out
    }
}

/// A two-entry table of Vegas parameters, for tests.
#[cfg(test)]
pub(crate) const EXAMPLE: &str = "algorithm = \"vegas\"\nobjective = \"smcc\"\n\n[[entry]]\nrtt_ms = 40.0\nrate_bps = 20e6\nfitness = 0.9\nalpha = 2.5\nbeta = 5.0\n\n[[entry]]\nrtt_ms = 200.0\nrate_bps = 5e6\nalpha = 1.5\nbeta = 3\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_picks_the_nearest() {
        let t = TunedTable::parse(EXAMPLE, Path::new("t.toml")).unwrap();
        assert_eq!(t.algorithm.as_deref(), Some("vegas"));
        assert_eq!(t.entry[1].params["beta"], 3.0);
        assert_eq!(t.nearest(50.0, 15e6, None).0, 0);
        assert_eq!(t.nearest(150.0, 4e6, None).0, 1);
        let again = TunedTable::parse(&t.to_toml("a header"), Path::new("u.toml")).unwrap();
        assert_eq!(again.entry, t.entry);
    }

    #[test]
    fn bad_tables_say_what_is_wrong() {
        for (bad, needle) in [
            ("", "no [[entry]]"),
            ("[[entry]]\nrtt_ms = -1.0\nrate_bps = 1e6\n", "entry 0"),
            (
                "[[entry]]\nrtt_ms = 40.0\nrate_bps = 1e6\nalpha = \"x\"\n",
                "not a table",
            ),
            ("[[entry]]\nrate_bps = 1e6\n", "not a table"),
        ] {
            let e = TunedTable::parse(bad, Path::new("b.toml")).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }
}
