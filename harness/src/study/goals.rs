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

/// A one-sided goal's bound as written: `"P%"` (of b) or a number (b
/// plus it; without b, the number itself).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Bound {
    /// A number in the metric's unit.
    Num(f64),
    /// `"P%"`, or a number as text.
    Text(String),
}

/// How a goal compares its sides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// `|a - b| <= max(abs, rel * |b|)`.
    Within {
        /// In the metric's unit.
        abs: f64,
        /// A fraction of `|b|`.
        rel: f64,
    },
    /// `a <= bound` (`at_most`) or `a >= bound` (`at_least`), the bound
    /// being `rel * b` (`"P%"`), `b + abs` (a number, with b), or `abs`
    /// (without b).
    OneSided {
        /// `at_most` (true) or `at_least`.
        most: bool,
        /// The bound is a fraction of b.
        rel: Option<f64>,
        /// Added to b, or the bound itself without b.
        abs: f64,
    },
}

impl Rule {
    /// Of a goal's fields: exactly one of `within`, `at_most` and
    /// `at_least`; `within` and a percentage need `b`.
    pub fn of(
        within: Option<&Tolerance>,
        at_most: Option<&Bound>,
        at_least: Option<&Bound>,
        has_b: bool,
    ) -> Result<Rule, String> {
        match (within, at_most, at_least) {
            (Some(t), None, None) => {
                if !has_b {
                    return Err("`within` compares a with b: b is missing".into());
                }
                let (abs, rel) = t.parse().map_err(|e| format!("within: {e}"))?;
                Ok(Rule::Within { abs, rel })
            }
            (None, Some(x), None) | (None, None, Some(x)) => {
                let most = at_most.is_some();
                let field = if most { "at_most" } else { "at_least" };
                let (rel, abs) = match x {
                    Bound::Num(n) => (None, *n),
                    Bound::Text(t) => match t.trim().strip_suffix('%') {
                        Some(p) => (
                            Some(
                                p.trim().parse::<f64>().map_err(|_| {
                                    format!("{field}: `{t}` is not a percentage such as 20%")
                                })? / 100.0,
                            ),
                            0.0,
                        ),
                        None => (
                            None,
                            t.trim().parse::<f64>().map_err(|_| {
                                format!(
                                    "{field}: `{t}` is not a number or a percentage such as 20%"
                                )
                            })?,
                        ),
                    },
                };
                if !abs.is_finite() || rel.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
                    return Err(format!(
                        "{field}: the bound must be finite (and a percentage not negative)"
                    ));
                }
                if rel.is_some() && !has_b {
                    return Err(format!(
                        "{field}: a percentage is of b, and b is missing (without b the bound is a number in the metric's unit)"
                    ));
                }
                Ok(Rule::OneSided { most, rel, abs })
            }
            (None, None, None) => Err("one of `within`, `at_most` or `at_least` is needed".into()),
            _ => Err("only one of `within`, `at_most` and `at_least` may be given".into()),
        }
    }

    /// As written for people: `within 3`, `at most 20% of b`, `at most
    /// b + 2`, `at least 1`.
    pub fn text(&self, has_b: bool) -> String {
        match *self {
            Rule::Within { abs, rel } if abs > 0.0 && rel > 0.0 => {
                format!("within {} or {}%", plain(abs), plain(rel * 100.0))
            }
            Rule::Within { rel, .. } if rel > 0.0 => format!("within {}%", plain(rel * 100.0)),
            Rule::Within { abs, .. } => format!("within {}", plain(abs)),
            Rule::OneSided { most, rel, abs } => {
                let w = if most { "at most" } else { "at least" };
                match rel {
                    Some(r) => format!("{w} {}% of b", plain(r * 100.0)),
                    None if has_b && abs == 0.0 => format!("{w} b"),
                    None if has_b => format!(
                        "{w} b {} {}",
                        if abs < 0.0 { "-" } else { "+" },
                        plain(abs.abs())
                    ),
                    None => format!("{w} {}", plain(abs)),
                }
            }
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
    /// The tolerance here, in the metric's unit (`within`).
    pub tolerance: Option<f64>,
    /// The bound here, in the metric's unit (`at_most`, `at_least`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<f64>,
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
    /// Side b's selector (none: a one-sided goal's fixed bound).
    pub b: Option<String>,
    /// The rule as written (`within 3`, `at most 20% of b`).
    pub rule: String,
    /// A two-sided goal (a difference and a tolerance per place).
    pub two_sided: bool,
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
        // Places of one run a side (deterministic simulations) have no
        // noise to speak of.
        let one_run = self.places.iter().all(|p| {
            p.holds.is_none() || (p.a.is_some_and(|a| a.n == 1) && p.b.is_none_or(|b| b.n == 1))
        });
        if one_run {
            s += ", one run each";
        } else if missed > 0 {
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

/// Judges a one-sided rule: `a` against the bound made of `b` (`rel *
/// b`, or `b + abs`) or, without `b`, `abs`. The outcome is significant
/// when it survives moving a by its 95% half-width and the bound by b's
/// (scaled as the bound scales b); one repetition is never significant.
pub fn judge_one(
    a: Stat,
    b: Option<Stat>,
    most: bool,
    rel: Option<f64>,
    abs: f64,
) -> (f64, bool, bool) {
    let bound = match (b, rel) {
        (Some(b), Some(r)) => r * b.mean,
        (Some(b), None) => b.mean + abs,
        (None, _) => abs,
    };
    let slack = if most { bound - a.mean } else { a.mean - bound };
    let holds = slack >= 0.0;
    let noise = a.ci95 + b.map_or(0.0, |b| rel.unwrap_or(1.0) * b.ci95);
    let significant = a.n > 1 && b.is_none_or(|b| b.n > 1) && slack.abs() > noise;
    (bound, holds, significant)
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
    let rule = g.rule().unwrap_or(Rule::Within { abs: 0.0, rel: 0.0 });
    let a = Selector::parse(&g.a).ok();
    // Without b (a one-sided goal's fixed bound) side b is no selector.
    let b = match g.b.as_deref() {
        Some(b) => Selector::parse(b).ok().map(Some),
        None => Some(None),
    };
    let wh = g.where_.as_deref().and_then(|w| Selector::parse(w).ok());
    let mut places = Vec::new();
    // Each experiment of the scope with the axes and labels the goal names.
    let fits =
        |e: &Experiment, sel: &str| crate::reproduce::validate::check_selector(e, sel).is_ok();
    let Some((a, b)) = a.zip(b) else {
        return result(g, rule, places);
    };
    for &ei in &scope {
        let e = &exps[ei];
        if !fits(e, &g.a)
            || g.b.as_deref().is_some_and(|b| !fits(e, b))
            || g.where_.as_deref().is_some_and(|w| !fits(e, w))
        {
            continue;
        }
        // Every point side a selects, in the plan's order (the plan's
        // points, not the jobs, so a skipped counterpart is named).
        for p in e.points(quick) {
            if !p.matches(&a) || wh.as_ref().is_some_and(|w| !p.matches(w)) {
                continue;
            }
            let other: Option<Vec<(String, String)>> = b.as_ref().map(|b| {
                p.coords
                    .iter()
                    .map(|(k, l)| match b.axes.iter().find(|(bk, _)| bk == k) {
                        Some((_, bl)) => (k.clone(), bl.clone()),
                        None => (k.clone(), l.clone()),
                    })
                    .collect()
            });
            let planned =
                |c: &[(String, String)]| jobs.iter().any(|j| j.exp == ei && j.point.coords == c);
            if !planned(&p.coords) || other.as_deref().is_some_and(|o| !planned(o)) {
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
            let sb = match (&b, &other) {
                (Some(b), Some(o)) => Some(measure(
                    jobs,
                    data,
                    ei,
                    o,
                    &g.metric,
                    b.flow.as_deref(),
                    b.link.as_deref(),
                )),
                _ => None,
            };
            let mut place = Place {
                at,
                a: sa.as_ref().ok().copied(),
                b: sb.as_ref().and_then(|r| r.as_ref().ok().copied()),
                tolerance: None,
                bound: None,
                holds: None,
                significant: false,
                problem: None,
            };
            match (&sa, &sb) {
                (Ok(x), None | Some(Ok(_))) => {
                    let y = place.b;
                    match rule {
                        Rule::Within { abs, rel } => {
                            if let Some(y) = y {
                                let (tol, holds, sig) = judge(*x, y, abs, rel);
                                place.tolerance = Some(tol);
                                place.holds = Some(holds);
                                place.significant = sig;
                            }
                        }
                        Rule::OneSided { most, rel, abs } => {
                            let (bound, holds, sig) = judge_one(*x, y, most, rel, abs);
                            place.bound = Some(bound);
                            place.holds = Some(holds);
                            place.significant = sig;
                        }
                    }
                }
                _ => {
                    let mut why = Vec::new();
                    if let Err(e) = &sa {
                        why.push(format!("a: {e}"));
                    }
                    if let Some(Err(e)) = &sb {
                        why.push(format!("b: {e}"));
                    }
                    place.problem = Some(why.join("; "));
                }
            }
            places.push(place);
        }
    }
    result(g, rule, places)
}

/// The verdict's counts over `places`.
fn result(g: &Goal, rule: Rule, places: Vec<Place>) -> GoalResult {
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
        rule: rule.text(g.b.is_some()),
        two_sided: matches!(rule, Rule::Within { .. }),
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
    fn one_sided_rules_are_read_and_refused_as_written() {
        let n = |x: f64| Bound::Num(x);
        let t = |x: &str| Bound::Text(x.into());
        let r = Rule::of(None, Some(&t("20%")), None, true).unwrap();
        assert_eq!(
            r,
            Rule::OneSided {
                most: true,
                rel: Some(0.2),
                abs: 0.0
            }
        );
        assert_eq!(r.text(true), "at most 20% of b");
        let r = Rule::of(None, None, Some(&n(2.0)), true).unwrap();
        assert_eq!(r.text(true), "at least b + 2");
        assert_eq!(
            Rule::of(None, Some(&n(1.0)), None, false)
                .unwrap()
                .text(false),
            "at most 1"
        );
        // A percentage needs b; within needs b; exactly one rule.
        assert!(Rule::of(None, Some(&t("20%")), None, false)
            .unwrap_err()
            .contains("b is missing"));
        let w = Tolerance::Abs(3.0);
        assert!(Rule::of(Some(&w), None, None, false)
            .unwrap_err()
            .contains("b is missing"));
        assert!(Rule::of(Some(&w), Some(&n(1.0)), None, true)
            .unwrap_err()
            .contains("only one"));
        assert!(Rule::of(None, None, None, true)
            .unwrap_err()
            .contains("one of"));
        assert!(Rule::of(None, Some(&t("lots")), None, true)
            .unwrap_err()
            .contains("lots"));
    }

    #[test]
    fn one_sided_judgement_and_its_noise() {
        // 20% of 100 = 20: 15 holds, by 5 > 1 + 0.2 * 5 of noise.
        assert_eq!(
            judge_one(st(15.0, 1.0), Some(st(100.0, 5.0)), true, Some(0.2), 0.0),
            (20.0, true, true)
        );
        // 19.5 holds by less than the noise.
        let (_, holds, sig) = judge_one(st(19.5, 1.0), Some(st(100.0, 5.0)), true, Some(0.2), 0.0);
        assert!(holds && !sig);
        // b + 2, at least: 13 >= 12 holds; 10 does not, beyond noise.
        assert!(judge_one(st(13.0, 0.1), Some(st(10.0, 0.1)), false, None, 2.0).1);
        assert_eq!(
            judge_one(st(10.0, 0.1), Some(st(10.0, 0.1)), false, None, 2.0),
            (12.0, false, true)
        );
        // A fixed bound; one run is never significant.
        let one = Stat {
            mean: 1.05,
            ci95: 0.0,
            n: 1,
        };
        assert_eq!(judge_one(one, None, true, None, 1.0), (1.0, false, false));
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
