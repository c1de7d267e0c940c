//! A claim's directional test.
//!
//! ```text
//! test   := cmp | trend | within
//! cmp    := term op term                 op: < <= > >=
//! trend  := increasing(term) | decreasing(term)    (along the claim's `over` axis)
//! within := within(term, term, P%)       |a - b| <= P% of |b|
//! term   := number | number * atom | atom
//! atom   := label | max(term, ...) | min(term, ...) | mean(term, ...) | ratio(term, term)
//! ```
//!
//! Labels are the claim's `values`. A comparison holds when it holds on
//! the means over repetitions. Its outcome, held or not, is *significant*
//! when the two sides' 95% confidence intervals do not overlap: the means
//! differ by more than the sum of the half-widths (`ci_a + ci_b`, the
//! rule [`separated`] states once). A trend holds when Spearman's rank
//! correlation of the means with the axis positions is at least 0.8 (at
//! most -0.8 for decreasing); it is significant when the first and last
//! points' intervals do not overlap. `within` is significant when the
//! difference, widened (if it holds) or narrowed (if it does not) by the
//! same sum, stays on the same side of the tolerance. Nothing measured
//! with one repetition is significant.
//!
//! Every comparison of two measurements and every trend also reports its
//! *effect*: the difference relative to the larger side (for a trend, last
//! point against first); a comparison with a constant is a threshold and
//! has none.
//! The claim decides (`claims.rs`) whether that effect is large enough to
//! count: a significant 0.3% difference is still no evidence of a
//! phenomenon. The detail prints the relation observed (`a 9930 > b
//! 8872`), never the operator tested.

use std::collections::BTreeMap;
use std::fmt;

/// Measured values by label, at one place.
pub type Row = BTreeMap<String, Stat>;

/// A measured quantity: mean and 95% CI half-width over `n` repetitions.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stat {
    /// Mean (written as null when it is not a number, and read back so).
    #[serde(deserialize_with = "nan_if_null")]
    pub mean: f64,
    /// 95% confidence half-width (0 with one repetition).
    #[serde(deserialize_with = "nan_if_null")]
    pub ci95: f64,
    /// Repetitions.
    pub n: usize,
}

/// A number that JSON wrote as null (serde_json writes NaN so) read back
/// as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Stat {
    /// A constant.
    pub fn constant(v: f64) -> Stat {
        Stat {
            mean: v,
            ci95: 0.0,
            n: 0,
        }
    }

    /// Mean and Student-t 95% half-width of samples (non-finite ones
    /// skipped; [`crate::run::mean_ci`], as run summaries use); `None`
    /// when none is finite.
    pub fn of(xs: &[f64]) -> Option<Stat> {
        let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        let (mean, ci95) = crate::run::mean_ci(&v);
        Some(Stat {
            mean,
            ci95,
            n: v.len(),
        })
    }
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// <
    Lt,
    /// <=
    Le,
    /// >
    Gt,
    /// >=
    Ge,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        })
    }
}

/// A term.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// A number.
    Num(f64),
    /// A label, scaled.
    Label(f64, String),
    /// max/min/mean of terms, scaled.
    Fn(f64, String, Vec<Term>),
}

/// A parsed test.
#[derive(Clone, Debug, PartialEq)]
pub enum Test {
    /// a op b.
    Cmp(Term, Op, Term),
    /// Increasing (true) or decreasing along the axis.
    Trend(bool, Term),
    /// |a - b| <= p·|b|.
    Within(Term, Term, f64),
}

/// The outcome of a test at one place.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// Holds on the means.
    pub holds: bool,
    /// Beyond the noise (see the module doc).
    pub significant: bool,
    /// The size of the difference the test is about, as a fraction: for a
    /// comparison of two measurements `|a - b| / max(|a|, |b|)`, for a
    /// trend `|last - first| / max(|first|, |last|)`; `None` for `within`
    /// (its tolerance is the test), for a comparison with a constant (a
    /// threshold) and where both sides are 0.
    pub effect: Option<f64>,
    /// The figures compared and the relation observed between them, in
    /// words.
    pub detail: String,
}

/// `|a - b|` relative to the larger magnitude; `None` when both are 0 or
/// either is not finite.
pub fn relative_effect(a: f64, b: f64) -> Option<f64> {
    let m = a.abs().max(b.abs());
    (m > 0.0 && a.is_finite() && b.is_finite()).then(|| (a - b).abs() / m)
}

/// The relation observed between two means: `<`, `>` or `=`.
fn observed(a: f64, b: f64) -> &'static str {
    if a < b {
        "<"
    } else if a > b {
        ">"
    } else {
        "="
    }
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lexer<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "expected `{}` at position {}",
                c as char,
                self.i + 1
            ))
        }
    }
    fn ident(&mut self) -> Option<String> {
        self.ws();
        let st = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"_+-".contains(&self.s[self.i]))
        {
            // A '-' starts an identifier's continuation only after a letter.
            if self.s[self.i] == b'-' && self.i == st {
                break;
            }
            self.i += 1;
        }
        (self.i > st).then(|| String::from_utf8_lossy(&self.s[st..self.i]).into_owned())
    }
    fn number(&mut self) -> Option<f64> {
        self.ws();
        let st = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_digit() || b".eE".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        let n = std::str::from_utf8(&self.s[st..self.i]).ok()?.parse().ok();
        if n.is_none() {
            self.i = st;
        }
        n
    }
}

impl Test {
    /// Parses a test (see the module doc).
    pub fn parse(s: &str) -> Result<Test, String> {
        let mut lx = Lexer {
            s: s.as_bytes(),
            i: 0,
        };
        let save = lx.i;
        let t = if let Some(name) = lx
            .ident()
            .filter(|n| matches!(n.as_str(), "increasing" | "decreasing" | "within"))
        {
            if lx.peek() == Some(b'(') {
                lx.expect(b'(')?;
                let a = term(&mut lx)?;
                let t = if name == "within" {
                    lx.expect(b',')?;
                    let b = term(&mut lx)?;
                    lx.expect(b',')?;
                    let p = lx
                        .number()
                        .ok_or("within: expected a percentage such as 10%")?;
                    lx.expect(b'%')?;
                    Test::Within(a, b, p / 100.0)
                } else {
                    Test::Trend(name == "increasing", a)
                };
                lx.expect(b')')?;
                t
            } else {
                lx.i = save;
                cmp(&mut lx)?
            }
        } else {
            lx.i = save;
            cmp(&mut lx)?
        };
        if lx.peek().is_some() {
            return Err(format!(
                "unexpected `{}` at position {}; a test is `a < b`, `increasing(a)`, `decreasing(a)` or `within(a, b, 10%)`",
                &s[lx.i..],
                lx.i + 1
            ));
        }
        Ok(t)
    }

    /// The labels it names.
    pub fn labels(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            Test::Cmp(a, _, b) | Test::Within(a, b, _) => {
                a.labels(&mut out);
                b.labels(&mut out);
            }
            Test::Trend(_, a) => a.labels(&mut out),
        }
        out
    }

    /// Whether `other` states the opposite relation between the same two
    /// terms (`a < b` against `a > b`, `b < a`, `a >= b`, ...), or the
    /// opposite trend of the same term.
    pub fn opposes(&self, other: &Test) -> bool {
        use Op::*;
        let up = |o: Op| matches!(o, Gt | Ge);
        match (self, other) {
            (Test::Cmp(a, o1, b), Test::Cmp(c, o2, d)) => {
                (a == c && b == d && up(*o1) != up(*o2)) || (a == d && b == c && up(*o1) == up(*o2))
            }
            (Test::Trend(u1, a), Test::Trend(u2, b)) => a == b && u1 != u2,
            _ => false,
        }
    }

    /// A trend test.
    pub fn is_trend(&self) -> bool {
        matches!(self, Test::Trend(..))
    }

    /// Evaluates a comparison or `within` with the labels' values.
    pub fn eval(&self, value: &Row) -> Result<Outcome, String> {
        match self {
            Test::Cmp(a, op, b) => {
                let (x, y) = (a.eval(value)?, b.eval(value)?);
                let holds = op.holds(x.mean, y.mean);
                let significant = separated(x, y);
                // Against a constant (`smcc >= 98`) the claim is a
                // threshold, not a difference between two measurements:
                // no effect size, significance alone decides.
                let effect = if x.n == 0 || y.n == 0 {
                    None
                } else {
                    relative_effect(x.mean, y.mean)
                };
                Ok(Outcome {
                    holds,
                    significant,
                    effect,
                    detail: format!(
                        "{} {} {}{}",
                        a.show(&x, value),
                        observed(x.mean, y.mean),
                        b.show(&y, value),
                        effect
                            .map(|e| format!(" (differ by {:.1}%)", 100.0 * e))
                            .unwrap_or_default()
                    ),
                })
            }
            Test::Within(a, b, p) => {
                let (x, y) = (a.eval(value)?, b.eval(value)?);
                let tol = p * y.mean.abs();
                let d = (x.mean - y.mean).abs();
                let holds = d <= tol;
                Ok(Outcome {
                    holds,
                    effect: None,
                    significant: spread_known(&[x, y])
                        && if holds {
                            d + x.ci95 + y.ci95 <= tol
                        } else {
                            d - (x.ci95 + y.ci95) > tol
                        },
                    detail: format!(
                        "{} vs {}: differ by {:.1}% (allowed {:.0}%)",
                        a.show(&x, value),
                        b.show(&y, value),
                        if y.mean != 0.0 {
                            100.0 * d / y.mean.abs()
                        } else {
                            f64::INFINITY
                        },
                        p * 100.0
                    ),
                })
            }
            Test::Trend(..) => Err("a trend needs a series (eval_trend)".into()),
        }
    }

    /// Evaluates a trend over a series of (x, value function) points.
    pub fn eval_trend(&self, series: &[(f64, Row)]) -> Result<Outcome, String> {
        let Test::Trend(up, a) = self else {
            return Err("not a trend".into());
        };
        let mut pts = Vec::new();
        for (x, row) in series {
            pts.push((*x, a.eval(row)?));
        }
        if pts.len() < 2 {
            return Err("a trend needs at least two points".into());
        }
        let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
        let ys: Vec<f64> = pts.iter().map(|p| p.1.mean).collect();
        let rho = spearman(&xs, &ys);
        let holds = if *up { rho >= 0.8 } else { rho <= -0.8 };
        let (f, l) = (pts[0].1, pts[pts.len() - 1].1);
        let significant = separated(f, l);
        let effect = relative_effect(l.mean, f.mean);
        let shown: Vec<String> = pts
            .iter()
            .map(|(x, s)| format!("{x}: {}", fmt_stat(s)))
            .collect();
        Ok(Outcome {
            holds,
            significant,
            effect,
            detail: format!(
                "{} along the axis: {} (Spearman ρ = {rho:.2}; first to last {})",
                a.name(),
                shown.join(", "),
                match effect {
                    Some(e) => format!(
                        "{}{:.1}%",
                        if l.mean >= f.mean { "+" } else { "-" },
                        100.0 * e
                    ),
                    None => "unchanged".into(),
                }
            ),
        })
    }
}

/// Whether two measurements' 95% confidence intervals do not overlap
/// (the significance rule of every test; each side measured more than
/// once, or a constant).
pub fn separated(a: Stat, b: Stat) -> bool {
    spread_known(&[a, b]) && (a.mean - b.mean).abs() > a.ci95 + b.ci95
}

/// Whether the measured sides have a spread to compare against: one
/// repetition has none (its half-width reads 0), so nothing measured once
/// is called significant. Constants (n = 0) have no spread by nature.
fn spread_known(sides: &[Stat]) -> bool {
    sides.iter().all(|s| s.n != 1)
}

/// Spearman's rank correlation (average ranks for ties).
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            let avg = (i + j) as f64 / 2.0 + 1.0;
            for k in i..=j {
                r[idx[k]] = avg;
            }
            i = j + 1;
        }
        r
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
    if vx == 0.0 || vy == 0.0 {
        0.0
    } else {
        cov / (vx * vy).sqrt()
    }
}

/// `12.3 ± 0.4` with three significant digits.
pub fn fmt_stat(s: &Stat) -> String {
    if s.n > 1 {
        format!("{} ± {}", sig3(s.mean), sig3(s.ci95))
    } else {
        sig3(s.mean)
    }
}

/// A number with about three significant digits.
pub fn sig3(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn cmp(lx: &mut Lexer) -> Result<Test, String> {
    let a = term(lx)?;
    let op = match lx.peek() {
        Some(b'<') => {
            lx.i += 1;
            if lx.eat(b'=') {
                Op::Le
            } else {
                Op::Lt
            }
        }
        Some(b'>') => {
            lx.i += 1;
            if lx.eat(b'=') {
                Op::Ge
            } else {
                Op::Gt
            }
        }
        _ => return Err(format!("expected <, <=, > or >= at position {}", lx.i + 1)),
    };
    let b = term(lx)?;
    Ok(Test::Cmp(a, op, b))
}

fn term(lx: &mut Lexer) -> Result<Term, String> {
    if let Some(n) = lx.number() {
        if lx.eat(b'*') {
            return atom(lx, n);
        }
        return Ok(Term::Num(n));
    }
    atom(lx, 1.0)
}

fn atom(lx: &mut Lexer, k: f64) -> Result<Term, String> {
    let name = lx.ident().ok_or_else(|| {
        format!(
            "expected a label, a number or max/min/mean(...) at position {}",
            lx.i + 1
        )
    })?;
    if matches!(name.as_str(), "max" | "min" | "mean" | "ratio") && lx.peek() == Some(b'(') {
        lx.expect(b'(')?;
        let mut args = vec![term(lx)?];
        while lx.eat(b',') {
            args.push(term(lx)?);
        }
        lx.expect(b')')?;
        if name == "ratio" && args.len() != 2 {
            return Err(format!("ratio takes two terms, not {}", args.len()));
        }
        return Ok(Term::Fn(k, name, args));
    }
    Ok(Term::Label(k, name))
}

impl Term {
    fn labels(&self, out: &mut Vec<String>) {
        match self {
            Term::Num(_) => {}
            Term::Label(_, l) => out.push(l.clone()),
            Term::Fn(_, _, a) => a.iter().for_each(|t| t.labels(out)),
        }
    }

    fn name(&self) -> String {
        match self {
            Term::Num(n) => sig3(*n),
            Term::Label(k, l) if *k == 1.0 => l.clone(),
            Term::Label(k, l) => format!("{k}·{l}"),
            Term::Fn(k, f, a) => {
                let inner: Vec<String> = a.iter().map(Term::name).collect();
                let s = format!("{f}({})", inner.join(", "));
                if *k == 1.0 {
                    s
                } else {
                    format!("{k}·{s}")
                }
            }
        }
    }

    /// `name value`; for max and min also which term it was
    /// (`max(a, b) = b 12.3 ± 0.4`).
    fn show(&self, s: &Stat, value: &Row) -> String {
        match self {
            Term::Num(_) => self.name(),
            Term::Fn(_, f, args) if f == "max" || f == "min" => {
                let vals: Vec<(String, f64)> = args
                    .iter()
                    .filter_map(|a| a.eval(value).ok().map(|v| (a.name(), v.mean)))
                    .collect();
                let pick = if f == "max" {
                    vals.iter().max_by(|a, b| a.1.total_cmp(&b.1))
                } else {
                    vals.iter().min_by(|a, b| a.1.total_cmp(&b.1))
                };
                match pick {
                    Some((n, _)) => format!("{} = {n} {}", self.name(), fmt_stat(s)),
                    None => format!("{} {}", self.name(), fmt_stat(s)),
                }
            }
            _ => format!("{} {}", self.name(), fmt_stat(s)),
        }
    }

    fn eval(&self, value: &Row) -> Result<Stat, String> {
        let scale = |k: f64, s: Stat| Stat {
            mean: k * s.mean,
            ci95: k.abs() * s.ci95,
            n: s.n,
        };
        match self {
            Term::Num(n) => Ok(Stat::constant(*n)),
            Term::Label(k, l) => value
                .get(l)
                .map(|s| scale(*k, *s))
                .ok_or_else(|| format!("no measurement for `{l}`")),
            Term::Fn(k, f, args) => {
                let vs = args
                    .iter()
                    .map(|a| a.eval(value))
                    .collect::<Result<Vec<_>, _>>()?;
                let s = match f.as_str() {
                    "max" => *vs
                        .iter()
                        .max_by(|a, b| a.mean.total_cmp(&b.mean))
                        .expect("one arg"),
                    "min" => *vs
                        .iter()
                        .min_by(|a, b| a.mean.total_cmp(&b.mean))
                        .expect("one arg"),
                    "ratio" => {
                        let (a, b) = (vs[0], vs[1]);
                        let r = a.mean / b.mean;
                        let rel = |s: Stat| {
                            if s.mean != 0.0 {
                                s.ci95 / s.mean.abs()
                            } else {
                                0.0
                            }
                        };
                        Stat {
                            mean: r,
                            ci95: r.abs() * rel(a).hypot(rel(b)),
                            n: a.n.min(b.n),
                        }
                    }
                    _ => {
                        let n = vs.len() as f64;
                        Stat {
                            mean: vs.iter().map(|s| s.mean).sum::<f64>() / n,
                            ci95: vs.iter().map(|s| s.ci95 * s.ci95).sum::<f64>().sqrt() / n,
                            n: vs.iter().map(|s| s.n).min().unwrap_or(0),
                        }
                    }
                };
                Ok(scale(*k, s))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals() -> Row {
        let st = |mean: f64| Stat {
            mean,
            ci95: 1.0,
            n: 5,
        };
        [("low", 10.0), ("high", 20.0), ("mid", 10.5)]
            .into_iter()
            .map(|(l, m)| (l.to_string(), st(m)))
            .collect()
    }

    #[test]
    fn comparisons_hold_on_means_and_report_significance() {
        let o = Test::parse("low < high").unwrap().eval(&vals()).unwrap();
        assert!(o.holds && o.significant, "{o:?}");
        let o = Test::parse("low < mid").unwrap().eval(&vals()).unwrap();
        assert!(o.holds && !o.significant, "{o:?}");
        let o = Test::parse("low > high").unwrap().eval(&vals()).unwrap();
        assert!(
            !o.holds && o.significant,
            "a clear failure is significant: {o:?}"
        );
        let o = Test::parse("high > 2.5 * low")
            .unwrap()
            .eval(&vals())
            .unwrap();
        assert!(!o.holds);
        let o = Test::parse("high >= max(low, mid)")
            .unwrap()
            .eval(&vals())
            .unwrap();
        assert!(
            o.holds && o.detail.contains("max(low, mid) = mid 10.5"),
            "{o:?}"
        );
        let o = Test::parse("ratio(high, low) >= 2")
            .unwrap()
            .eval(&vals())
            .unwrap();
        assert!(o.holds && !o.significant, "{o:?}");
        // A threshold has no effect size; two measurements have one.
        let o = Test::parse("high > 19.9").unwrap().eval(&vals()).unwrap();
        assert_eq!(o.effect, None);
        let o = Test::parse("high > low").unwrap().eval(&vals()).unwrap();
        assert_eq!(o.effect, Some(0.5));
        assert!(Test::parse("ratio(high) > 1").is_err());
        let mut once = vals();
        once.values_mut().for_each(|s| s.n = 1);
        let o = Test::parse("low < high").unwrap().eval(&once).unwrap();
        assert!(
            o.holds && !o.significant,
            "one repetition has no spread: {o:?}"
        );
        let o = Test::parse("within(low, mid, 10%)")
            .unwrap()
            .eval(&vals())
            .unwrap();
        assert!(o.holds);
        let o = Test::parse("within(low, high, 10%)")
            .unwrap()
            .eval(&vals())
            .unwrap();
        assert!(!o.holds);
        assert!(Test::parse("low < nobody").unwrap().eval(&vals()).is_err());
    }

    #[test]
    fn significance_is_intervals_that_do_not_overlap() {
        let st = |mean: f64, ci95: f64| Stat { mean, ci95, n: 5 };
        // 10 ± 1 and 11.6 ± 1 overlap (11 > 10.6) although the difference
        // exceeds the half-widths' root sum of squares (1.41).
        assert!(!separated(st(10.0, 1.0), st(11.6, 1.0)));
        assert!(separated(st(10.0, 1.0), st(12.1, 1.0)));
        assert!(separated(st(12.1, 1.0), st(10.0, 1.0)));
        let row: Row = [("a", st(10.0, 1.0)), ("b", st(11.6, 1.0))]
            .into_iter()
            .map(|(l, s)| (l.to_string(), s))
            .collect();
        let o = Test::parse("a < b").unwrap().eval(&row).unwrap();
        assert!(o.holds && !o.significant, "{o:?}");
        // within: 10 vs 11.6 differ by 1.6; allowed 40% of 11.6 (4.64),
        // it holds and stays inside when widened by 2 (3.6)...
        let o = Test::parse("within(a, b, 40%)")
            .unwrap()
            .eval(&row)
            .unwrap();
        assert!(o.holds && o.significant, "{o:?}");
        // ...allowed 20% (2.32), it holds on the means but not once widened.
        let o = Test::parse("within(a, b, 20%)")
            .unwrap()
            .eval(&row)
            .unwrap();
        assert!(o.holds && !o.significant, "{o:?}");
    }

    #[test]
    fn names_with_plus_and_dash_are_labels() {
        let t = Test::parse("dcm+ < westwood-plus").unwrap();
        assert_eq!(
            t.labels(),
            vec!["dcm+".to_string(), "westwood-plus".to_string()]
        );
    }

    #[test]
    fn bad_tests_say_what_is_allowed() {
        for bad in [
            "low",
            "low << high",
            "increasing(",
            "within(a, b, 10)",
            "a < b c",
        ] {
            assert!(Test::parse(bad).is_err(), "{bad}");
        }
        assert!(Test::parse("increasing(low)").unwrap().is_trend());
    }

    #[test]
    fn trends_use_rank_correlation() {
        let t = Test::parse("decreasing(low)").unwrap();
        let row = |m: f64| -> Row {
            [(
                "low".to_string(),
                Stat {
                    mean: m,
                    ci95: 0.1,
                    n: 3,
                },
            )]
            .into_iter()
            .collect()
        };
        let s = vec![(1.0, row(3.0)), (2.0, row(2.0)), (3.0, row(1.0))];
        let o = t.eval_trend(&s).unwrap();
        assert!(o.holds && o.significant, "{o:?}");
        let s = vec![(1.0, row(1.0)), (2.0, row(3.0)), (3.0, row(2.0))];
        assert!(!t.eval_trend(&s).unwrap().holds);
    }

    #[test]
    fn stats_use_student_t() {
        let s = Stat::of(&[1.0, 2.0, 3.0, f64::NAN]).unwrap();
        assert_eq!(s.n, 3);
        assert!((s.mean - 2.0).abs() < 1e-12);
        assert!((s.ci95 - 4.303 * (1.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert!(Stat::of(&[f64::NAN]).is_none());
    }
}
