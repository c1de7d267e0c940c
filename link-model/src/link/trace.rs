//! Time-varying capacity from a mahimahi trace file.
//!
//! The format (mahimahi's `mm-link`): one non-negative integer per line, a
//! time in milliseconds, non-decreasing. Each line is one delivery
//! opportunity for up to [`OPPORTUNITY_BYTES`]; a time repeated n times is n
//! opportunities in that millisecond. When the trace ends it starts again,
//! shifted by its last timestamp, so the last timestamp is the period and
//! must be positive.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes one delivery opportunity carries (mahimahi's MTU-sized slot).
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// A parsed trace: opportunity times in nanoseconds within one period.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Where it was read from (for messages and the resolved scenario).
    pub path: PathBuf,
    /// Opportunity times in ns from the start of a period, non-decreasing.
    pub opportunities_ns: Arc<[u64]>,
    /// The period in ns (the last timestamp).
    pub period_ns: u64,
}

impl Trace {
    /// Reads and validates a trace file. Errors name the line.
    pub fn load(path: &Path) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trace file {}: {e}", path.display()))?;
        Trace::parse(&text, path)
    }

    /// Parses trace text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Trace, String> {
        let mut ops = Vec::new();
        let mut last = 0u64;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let ms: u64 = line.parse().map_err(|_| {
                format!(
                    "trace {} line {}: `{line}` is not a whole number of milliseconds",
                    path.display(),
                    i + 1
                )
            })?;
            if ms < last {
                return Err(format!(
                    "trace {} line {}: {ms} ms comes before the previous {last} ms; times must not decrease",
                    path.display(),
                    i + 1
                ));
            }
            if ms > 86_400_000 {
                return Err(format!(
                    "trace {} line {}: {ms} ms is more than a day",
                    path.display(),
                    i + 1
                ));
            }
            last = ms;
            ops.push(ms * 1_000_000);
        }
        if ops.is_empty() || last == 0 {
            return Err(format!(
                "trace {} has no opportunities after 0 ms; it needs at least one line and a last time above 0",
                path.display()
            ));
        }
        Ok(Trace {
            path: path.to_path_buf(),
            opportunities_ns: ops.into(),
            period_ns: last * 1_000_000,
        })
    }

    /// The mean capacity over one period, in bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        self.opportunities_ns.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0
            / (self.period_ns as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rates() {
        let t = Trace::parse("# comment\n1\n1\n2\n4\n", Path::new("x")).unwrap();
        assert_eq!(
            &*t.opportunities_ns,
            &[1_000_000, 1_000_000, 2_000_000, 4_000_000]
        );
        assert_eq!(t.period_ns, 4_000_000);
        // 4 × 1500 B in 4 ms = 12 Mbit/s.
        assert!((t.mean_rate_bps() - 12e6).abs() < 1e-6);
    }

    #[test]
    fn rejects_bad_lines() {
        let e = Trace::parse("1\nfoo\n", Path::new("t.trace")).unwrap_err();
        assert!(e.contains("t.trace line 2") && e.contains("foo"), "{e}");
        let e = Trace::parse("5\n3\n", Path::new("t")).unwrap_err();
        assert!(e.contains("must not decrease"), "{e}");
        assert!(Trace::parse("", Path::new("t")).is_err());
        assert!(Trace::parse("0\n0\n", Path::new("t")).is_err());
        assert!(Trace::parse("-1\n", Path::new("t")).is_err());
    }
}
