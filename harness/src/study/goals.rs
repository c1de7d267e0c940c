//! A study's goals: two arms that should agree within a tolerance, judged
//! at every place where both ran.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{measure, Goal, Study};
use crate::reproduce::expr::Stat;
use crate::reproduce::jobs::Job;
use crate::reproduce::manifest::{Experiment, Selector};
use crate::reproduce::metrics::RunData;

/// A goal's tolerance as written: a number in the metric's unit, `"P%"`
/// of the `b` side, or both (`[2, "20%"]`: the larger).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Tolerance {
    /// In the metric's unit.
    Abs(f64),
    /// `"P%"`, or a number as text.
    Text(String),
    /// Several: the largest applies.
    Any(Vec<toml::Value>),
}

impl Tolerance {
    /// (absolute, relative fraction); the tolerance at `b` is
    /// `max(abs, rel * |b|)`.
    pub fn parse(&self) -> Result<(f64, f64), String> {
        fn one(v: &toml::Value) -> Result<(f64, f64), String> {
            match v {
                toml::Value::Integer(i) => Ok((*i as f64, 0.0)),
                toml::Value::Float(f) => Ok((*f, 0.0)),
                toml::Value::String(s) => {
                    match s.trim().strip_suffix('%') {
                        Some(p) => p
                            .trim()
                            .parse::<f64>()
                            .map(|p| (0.0, p / 100.0))
                            .map_err(|_| format!("`{s}` is not a percentage such as 20%")),
                        None => s.trim().parse::<f64>().map(|a| (a, 0.0)).map_err(|_| {
                            format!("`{s}` is not a number or a percentage such as 20%")
                        }),
                    }
                }
                other => Err(format!("`{other}` is not a number or a percentage")),
            }
        }
        let parts: Vec<(f64, f64)> = match self {
            Tolerance::Abs(a) => vec![(*a, 0.0)],
            Tolerance::Text(s) => vec![one(&toml::Value::String(s.clone()))?],
            Tolerance::Any(v) if v.is_empty() => return Err("an empty list".into()),
            Tolerance::Any(v) => v.iter().map(one).collect::<Result<_, _>>()?,
        };
        let abs = parts.iter().map(|p| p.0).fold(0.0, f64::max);
        let rel = parts.iter().map(|p| p.1).fold(0.0, f64::max);
        if !(abs.is_finite() && rel.is_finite()) || parts.iter().any(|p| p.0 < 0.0 || p.1 < 0.0) {
            return Err("a tolerance must be finite and not negative".into());
        }
        Ok((abs, rel))
    }

    /// As written for people: `3`, `20%`, `2 or 20%`.
    pub fn text(&self) -> String {
        match self.parse() {
            Ok((a, r)) if a > 0.0 && r > 0.0 => format!("{} or {}%", plain(a), plain(r * 100.0)),
            Ok((_, r)) if r > 0.0 => format!("{}%", plain(r * 100.0)),
            Ok((a, _)) => plain(a),
            Err(e) => e,
        }
    }
}

/// A number as written: no trailing zeros (`2`, `0.2`, `20`).
fn plain(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One place a goal is judged at.
#[derive(Clone, Debug, Serialize)]
pub struct Place {
    /// The other axes' labels (`cc=newreno, aqm=droptail`).
    pub at: String,
    /// Side a.
    pub a: Option<Stat>,
    /// Side b.
    pub b: Option<Stat>,
    /// The tolerance here, in the metric's unit.
    pub tolerance: Option<f64>,
    /// Within the tolerance on the means.
    pub holds: Option<bool>,
    /// The outcome survives the repetitions' noise.
    pub significant: bool,
    /// Why a side is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// A goal's verdict.
#[derive(Clone, Debug, Serialize)]
pub struct GoalResult {
    /// Name.
    pub id: String,
    /// The goal in words.
    pub statement: String,
    /// The metric.
    pub metric: String,
    /// Side a's selector.
    pub a: String,
    /// Side b's selector.
    pub b: String,
    /// The tolerance as written.
    pub within: String,
    /// Every place.
    pub places: Vec<Place>,
    /// Places where it holds.
    pub met: usize,
    /// Places measured on both sides.
    pub measured: usize,
    /// Places where it is missed beyond the noise.
    pub missed_beyond_noise: usize,
}

impl GoalResult {
    /// `met at 4 of 5 places (1 missed beyond noise)`.
    pub fn verdict(&self) -> String {
        if self.measured == 0 {
            return "not measured".into();
        }
        let mut s = format!("met at {} of {}", self.met, self.measured);
        if self.measured < self.places.len() {
            s += &format!(" ({} not measured)", self.places.len() - self.measured);
        }
        let missed = self.measured - self.met;
        if missed > 0 {
            s += &format!(
                "; {} of the {missed} missed beyond noise",
                self.missed_beyond_noise
            );
        }
        s
    }
}

/// Judges `a` against `b` with tolerance `(abs, rel)`: whether the means
/// are within it, and whether that outcome is significant (it holds with
/// the difference widened by the sum of the 95% half-widths, or fails
/// with it narrowed by that sum: the reproduction's rule for `within`).
pub fn judge(a: Stat, b: Stat, abs: f64, rel: f64) -> (f64, bool, bool) {
    let tol = abs.max(rel * b.mean.abs());
    let d = (a.mean - b.mean).abs();
    let holds = d <= tol;
    let noise = a.ci95 + b.ci95;
    let significant = a.n > 1
        && b.n > 1
        && if holds {
            d + noise <= tol
        } else {
            d - noise > tol
        };
    (tol, holds, significant)
}

/// Evaluates goal `g` on the runs.
pub(super) fn evaluate(
    s: &Study,
    exps: &[Experiment],
    g: &Goal,
    jobs: &[Job],
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
    quick: bool,
) -> GoalResult {
    let scope = s.scope(g.experiment.as_deref());
    let (abs, rel) = g.within.parse().unwrap_or((0.0, 0.0));
    let a = Selector::parse(&g.a).ok();
    let b = Selector::parse(&g.b).ok();
    let wh = g.where_.as_deref().and_then(|w| Selector::parse(w).ok());
    let mut places = Vec::new();
    // Each experiment of the scope with the axes and labels the goal names.
    let fits =
        |e: &Experiment, sel: &str| crate::reproduce::validate::check_selector(e, sel).is_ok();
    let Some((a, b)) = a.zip(b) else {
        return result(g, places);
    };
    for &ei in &scope {
        let e = &exps[ei];
        if !fits(e, &g.a) || !fits(e, &g.b) || g.where_.as_deref().is_some_and(|w| !fits(e, w)) {
            continue;
        }
        // Every point side a selects, in the plan's order (the plan's
        // points, not the jobs, so a skipped counterpart is named).
        for p in e.points(quick) {
            if !p.matches(&a) || wh.as_ref().is_some_and(|w| !p.matches(w)) {
                continue;
            }
            let other: Vec<(String, String)> = p
                .coords
                .iter()
                .map(|(k, l)| match b.axes.iter().find(|(bk, _)| bk == k) {
                    Some((_, bl)) => (k.clone(), bl.clone()),
                    None => (k.clone(), l.clone()),
                })
                .collect();
            let planned =
                |c: &[(String, String)]| jobs.iter().any(|j| j.exp == ei && j.point.coords == c);
            if !planned(&p.coords) || !planned(&other) {
                continue;
            }
            let mut at: Vec<String> = p
                .coords
                .iter()
                .filter(|(k, _)| !a.axes.iter().any(|(ak, _)| ak == k))
                .map(|(k, l)| format!("{k}={l}"))
                .collect();
            if scope.len() > 1 {
                at.insert(0, e.id.clone());
            }
            let at = at.join(", ");
            let sa = measure(
                jobs,
                data,
                ei,
                &p.coords,
                &g.metric,
                a.flow.as_deref(),
                a.link.as_deref(),
            );
            let sb = measure(
                jobs,
                data,
                ei,
                &other,
                &g.metric,
                b.flow.as_deref(),
                b.link.as_deref(),
            );
            let place = match (&sa, &sb) {
                (Ok(x), Ok(y)) => {
                    let (tol, holds, significant) = judge(*x, *y, abs, rel);
                    Place {
                        at,
                        a: Some(*x),
                        b: Some(*y),
                        tolerance: Some(tol),
                        holds: Some(holds),
                        significant,
                        problem: None,
                    }
                }
                _ => Place {
                    at,
                    a: sa.as_ref().ok().copied(),
                    b: sb.as_ref().ok().copied(),
                    tolerance: None,
                    holds: None,
                    significant: false,
                    problem: Some(
                        [("a", &sa), ("b", &sb)]
                            .iter()
                            .filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}")))
                            .collect::<Vec<_>>()
                            .join("; "),
                    ),
                },
            };
            places.push(place);
        }
    }
    result(g, places)
}

/// The verdict's counts over `places`.
fn result(g: &Goal, places: Vec<Place>) -> GoalResult {
    let measured = places.iter().filter(|p| p.holds.is_some()).count();
    let met = places.iter().filter(|p| p.holds == Some(true)).count();
    let missed_beyond_noise = places
        .iter()
        .filter(|p| p.holds == Some(false) && p.significant)
        .count();
    GoalResult {
        id: g.id.clone(),
        statement: g.statement.clone(),
        metric: g.metric.clone(),
        a: g.a.clone(),
        b: g.b.clone(),
        within: g.within.text(),
        places,
        met,
        measured,
        missed_beyond_noise,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(mean: f64, ci95: f64) -> Stat {
        Stat { mean, ci95, n: 3 }
    }

    #[test]
    fn tolerance_forms() {
        let t: Tolerance = toml::from_str::<toml::Table>("w = 3").unwrap()["w"]
            .clone()
            .try_into()
            .unwrap();
        assert_eq!(t.parse().unwrap(), (3.0, 0.0));
        assert_eq!(Tolerance::Text("20%".into()).parse().unwrap(), (0.0, 0.2));
        let both = Tolerance::Any(vec![
            toml::Value::Integer(2),
            toml::Value::String("20%".into()),
        ]);
        assert_eq!(both.parse().unwrap(), (2.0, 0.2));
        assert_eq!(both.text(), "2 or 20%");
        assert!(Tolerance::Text("twenty".into())
            .parse()
            .unwrap_err()
            .contains("twenty"));
        assert!(Tolerance::Abs(-1.0).parse().is_err());
        assert!(Tolerance::Any(vec![]).parse().is_err());
    }

    #[test]
    fn judge_uses_the_larger_tolerance_and_the_noise_sum() {
        // 2 ms or 20% of b = 15 ms: 3 ms; |12 - 15| = 3 holds, but the
        // noise (0.5 + 0.5) could take it beyond: not significant.
        let (tol, holds, sig) = judge(st(12.0, 0.5), st(15.0, 0.5), 2.0, 0.2);
        assert!((tol - 3.0).abs() < 1e-12);
        assert!(holds && !sig);
        // Well inside.
        assert_eq!(
            judge(st(14.5, 0.1), st(15.0, 0.1), 2.0, 0.2),
            (3.0, true, true)
        );
        // Missed by more than the noise.
        let (_, holds, sig) = judge(st(10.0, 0.5), st(15.0, 0.5), 2.0, 0.2);
        assert!(!holds && sig);
        // Missed, but within the noise.
        let (_, holds, sig) = judge(st(11.5, 0.5), st(15.0, 0.5), 2.0, 0.2);
        assert!(!holds && !sig);
        // One repetition is never significant.
        let one = Stat {
            mean: 1.0,
            ci95: 0.0,
            n: 1,
        };
        assert!(!judge(one, one, 1.0, 0.0).2);
    }
}
