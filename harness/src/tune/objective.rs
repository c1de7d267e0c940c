//! Objectives: arithmetic expressions over a run's metrics, maximised.
//!
//! ```text
//! expr  := term (('+' | '-') term)*
//! term  := unary (('*' | '/') unary)*
//! unary := '-' unary | power
//! power := atom ('^' unary)?
//! atom  := number | metric | func '(' expr (',' expr)* ')' | '(' expr ')'
//! func  := min | max | abs | ln | log10 | sqrt | exp
//! ```
//!
//! Every number is a float (`1/2` is 0.5). The metrics ([`METRICS`]) are
//! those of one evaluation run; delays are in ms, so `queue_delay /
//! base_rtt` is a fraction of the base RTT. Named objectives ([`presets`])
//! stand for whole expressions; algorithms may define their own
//! ([`cc_algorithms::tuned::OBJECTIVES`]).

use std::collections::BTreeMap;

/// Every metric an objective may name, with what it means.
pub const METRICS: &[(&str, &str)] = &[
    (
        "utilization",
        "bits that crossed the bottleneck / its capacity over the whole run, 0..1",
    ),
    (
        "utilization_steady",
        "the same from 1 s after the first flow's start (runs over 5 s only), 0..1",
    ),
    (
        "goodput",
        "goodput of the tuned flows / bottleneck capacity, 0..1",
    ),
    ("goodput_mbps", "goodput of the tuned flows, Mbit/s"),
    ("queue_delay", "mean queueing delay at the bottleneck, ms"),
    (
        "p95_queue_delay",
        "95th percentile of the bottleneck's queueing delay (per packet), ms",
    ),
    (
        "base_rtt",
        "the condition's round-trip propagation delay, ms",
    ),
    ("rtt", "mean RTT of the tuned flows (their qlog), ms"),
    ("p95_rtt", "95th percentile RTT of the tuned flows, ms"),
    (
        "loss_rate",
        "packets the tuned flows lost / packets they sent (payload / 1200 + lost)",
    ),
    (
        "drop_rate",
        "bytes dropped at the bottleneck (any reason) / bytes offered, 0..1",
    ),
    (
        "jain",
        "Jain's fairness index over all flows' goodputs (1 for one flow)",
    ),
    ("flows", "number of flows"),
];

/// Generic named objectives (algorithms define their own too:
/// [`cc_algorithms::tuned::OBJECTIVES`]); see [`presets`].
const GENERIC: &[(&str, &str, &str)] = &[
    (
        "power",
        "goodput * base_rtt / rtt",
        "Kleinrock's power, normalised: goodput fraction over RTT inflation",
    ),
    (
        "utilization-delay",
        "utilization - 0.5 * p95_queue_delay / base_rtt",
        "utilisation less half the 95th-percentile queueing delay as a fraction of the base RTT",
    ),
];

/// Every named objective: the generic ones and those algorithms define
/// (name, expression, what it is).
pub fn presets() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> {
    GENERIC.iter().chain(cc_algorithms::tuned::OBJECTIVES)
}

/// The names of every named objective, for messages.
pub fn preset_names() -> String {
    presets().map(|p| p.0).collect::<Vec<_>>().join(", ")
}

/// A parsed objective.
#[derive(Clone, Debug, PartialEq)]
pub struct Objective {
    /// What the user wrote (a preset's name or an expression).
    pub source: String,
    /// The expression evaluated.
    pub expr: String,
    tree: Node,
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Num(f64),
    Metric(String),
    Neg(Box<Node>),
    Bin(char, Box<Node>, Box<Node>),
    Call(String, Vec<Node>),
}

const FUNCS: &[&str] = &["min", "max", "abs", "ln", "log10", "sqrt", "exp"];

impl Objective {
    /// A preset's name or an expression. Errors say where and what is
    /// allowed.
    pub fn parse(s: &str) -> Result<Objective, String> {
        let expr = presets()
            .find(|p| p.0 == s.trim())
            .map_or(s.trim(), |p| p.1)
            .to_string();
        let mut p = Parser { src: &expr, pos: 0 };
        let tree = p.expr()?;
        p.skip_ws();
        if p.pos < expr.len() {
            return Err(p.error("an operator or the end"));
        }
        Ok(Objective {
            source: s.trim().to_string(),
            expr,
            tree,
        })
    }

    /// The metrics it names.
    pub fn metrics(&self) -> Vec<String> {
        let mut out = Vec::new();
        fn walk(n: &Node, out: &mut Vec<String>) {
            match n {
                Node::Metric(m) if !out.contains(m) => out.push(m.clone()),
                Node::Neg(a) => walk(a, out),
                Node::Bin(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Node::Call(_, args) => args.iter().for_each(|a| walk(a, out)),
                _ => {}
            }
        }
        walk(&self.tree, &mut out);
        out
    }

    /// Why `rec`, a run that finished, cannot be scored: a metric this
    /// objective names is absent from it (nothing measured it). `None`
    /// when every metric is there, or when the run failed (its error says
    /// why).
    pub fn unmeasured(&self, rec: &super::evaluate::Record) -> Option<String> {
        if rec.error.is_some() {
            return None;
        }
        self.unmeasured_in(&rec.metrics, &rec.key.spec)
    }

    /// [`Self::unmeasured`] over a run's metrics.
    pub fn unmeasured_in(&self, metrics: &BTreeMap<String, f64>, spec: &str) -> Option<String> {
        let missing: Vec<String> = self
            .metrics()
            .into_iter()
            .filter(|m| !metrics.contains_key(m))
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "the objective names {}, which run {} did not measure (loss_rate needs the \
                 senders' qlog; utilization_steady a run over 5 s; p95_queue_delay the \
                 per-packet bottleneck log)",
                missing.join(", "),
                spec
            )
        })
    }

    /// Its value for these metrics; NaN when a metric it names is missing
    /// (e.g. an RTT with no sample) or the arithmetic is undefined.
    pub fn eval(&self, m: &BTreeMap<String, f64>) -> f64 {
        eval(&self.tree, m)
    }
}

fn eval(n: &Node, m: &BTreeMap<String, f64>) -> f64 {
    match n {
        Node::Num(v) => *v,
        Node::Metric(k) => m.get(k).copied().unwrap_or(f64::NAN),
        Node::Neg(a) => -eval(a, m),
        Node::Bin(op, a, b) => {
            let (a, b) = (eval(a, m), eval(b, m));
            match op {
                '+' => a + b,
                '-' => a - b,
                '*' => a * b,
                '/' => a / b,
                _ => a.powf(b),
            }
        }
        Node::Call(f, args) => {
            let v: Vec<f64> = args.iter().map(|a| eval(a, m)).collect();
            match f.as_str() {
                "min" => v.iter().copied().fold(f64::INFINITY, f64::min),
                "max" => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                "abs" => v[0].abs(),
                "ln" => v[0].ln(),
                "log10" => v[0].log10(),
                "sqrt" => v[0].sqrt(),
                _ => v[0].exp(),
            }
        }
    }
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, wanted: &str) -> String {
        let near: String = self.src[self.pos..].chars().take(12).collect();
        format!(
            "objective `{}`: expected {wanted} at column {} (near `{near}`); an objective is a preset ({}) or an expression of numbers, + - * / ^, ( ), {} and the metrics {}",
            self.src,
            self.pos + 1,
            preset_names(),
            FUNCS.join(", "),
            METRICS.iter().map(|m| m.0).collect::<Vec<_>>().join(", ")
        )
    }

    fn skip_ws(&mut self) {
        while self.src[self.pos..].starts_with(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.src[self.pos..].starts_with(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expr(&mut self) -> Result<Node, String> {
        let mut left = self.term()?;
        loop {
            let op = if self.eat('+') {
                '+'
            } else if self.eat('-') {
                '-'
            } else {
                return Ok(left);
            };
            left = Node::Bin(op, Box::new(left), Box::new(self.term()?));
        }
    }

    fn term(&mut self) -> Result<Node, String> {
        let mut left = self.unary()?;
        loop {
            let op = if self.eat('*') {
                '*'
            } else if self.eat('/') {
                '/'
            } else {
                return Ok(left);
            };
            left = Node::Bin(op, Box::new(left), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Node, String> {
        if self.eat('-') {
            return Ok(Node::Neg(Box::new(self.unary()?)));
        }
        let base = self.atom()?;
        if self.eat('^') {
            return Ok(Node::Bin('^', Box::new(base), Box::new(self.unary()?)));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Node, String> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        if self.eat('(') {
            let e = self.expr()?;
            if !self.eat(')') {
                return Err(self.error("`)`"));
            }
            return Ok(e);
        }
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E'))
            .unwrap_or(rest.len());
        if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            // Exponents may carry a sign: 1e-3.
            let mut len = num_len;
            if rest[..len].ends_with(['e', 'E']) && rest[len..].starts_with(['-', '+']) {
                len += 1 + rest[len + 1..]
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len() - len - 1);
            }
            let v: f64 = rest[..len].parse().map_err(|_| self.error("a number"))?;
            self.pos += len;
            return Ok(Node::Num(v));
        }
        let id_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if id_len == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(self.error("a number, a metric, a function or `(`"));
        }
        let id = rest[..id_len].to_string();
        self.pos += id_len;
        if self.eat('(') {
            if !FUNCS.contains(&id.as_str()) {
                self.pos -= id_len + 1;
                return Err(self.error(&format!("a function ({}), not `{id}`", FUNCS.join(", "))));
            }
            let mut args = vec![self.expr()?];
            while self.eat(',') {
                args.push(self.expr()?);
            }
            if !self.eat(')') {
                return Err(self.error("`,` or `)`"));
            }
            let n = args.len();
            if !matches!(id.as_str(), "min" | "max") && n != 1 {
                return Err(format!(
                    "objective `{}`: {id}() takes one argument, got {n}",
                    self.src
                ));
            }
            return Ok(Node::Call(id, args));
        }
        if !METRICS.iter().any(|m| m.0 == id) {
            self.pos -= id_len;
            return Err(self.error(&format!("a known metric, not `{id}`")));
        }
        Ok(Node::Metric(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn an_unmeasured_metric_is_named_not_scored() {
        let o = Objective::parse("goodput - loss_rate").unwrap();
        let e = o
            .unmeasured_in(&m(&[("goodput", 0.9)]), "vegas:alpha=2")
            .expect("loss_rate is missing");
        assert!(
            e.contains("loss_rate") && e.contains("vegas:alpha=2") && e.contains("qlog"),
            "{e}"
        );
        assert!(o
            .unmeasured_in(&m(&[("goodput", 0.9), ("loss_rate", 0.01)]), "x")
            .is_none());
    }

    #[test]
    fn evaluates_with_precedence_and_floats() {
        let o = Objective::parse("utilization - 0.5*p95_queue_delay/base_rtt").unwrap();
        let v = o.eval(&m(&[
            ("utilization", 0.9),
            ("p95_queue_delay", 20.0),
            ("base_rtt", 40.0),
        ]));
        assert!((v - 0.65).abs() < 1e-12, "{v}");
        assert_eq!(Objective::parse("1/2").unwrap().eval(&m(&[])), 0.5);
        assert_eq!(Objective::parse("-2^2").unwrap().eval(&m(&[])), -4.0);
        assert_eq!(Objective::parse("2^3^2").unwrap().eval(&m(&[])), 512.0);
        assert_eq!(
            Objective::parse("max(1, 3, 2) - min(4,5)")
                .unwrap()
                .eval(&m(&[])),
            -1.0
        );
        assert_eq!(
            Objective::parse("1e-3*1000 + 2.5E+1")
                .unwrap()
                .eval(&m(&[])),
            26.0
        );
        assert_eq!(
            Objective::parse("sqrt(abs(-16))").unwrap().eval(&m(&[])),
            4.0
        );
    }

    #[test]
    fn presets_expand_and_name_their_metrics() {
        let o = Objective::parse("power").unwrap();
        assert_eq!(o.metrics(), ["goodput", "base_rtt", "rtt"]);
        let v = o.eval(&m(&[("goodput", 0.9), ("base_rtt", 40.0), ("rtt", 50.0)]));
        assert!((v - 0.72).abs() < 1e-12, "{v}");
        // A missing metric gives NaN, never a silent 0.
        assert!(o.eval(&m(&[("goodput", 1.0)])).is_nan());
        // Every named objective parses, the algorithms' own too.
        for (name, expr, _) in presets() {
            assert_eq!(Objective::parse(name).unwrap().expr, *expr);
        }
    }

    #[test]
    fn errors_name_the_place_and_what_is_allowed() {
        for (bad, needle) in [
            ("utilisation", "not `utilisation`"),
            ("goodput +", "column 10"),
            ("foo(1)", "not `foo`"),
            ("(goodput", "`)`"),
            ("goodput goodput", "an operator or the end"),
            ("ln(1, 2)", "one argument"),
            ("", "expected a number"),
        ] {
            let e = Objective::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
        let e = Objective::parse("x").unwrap_err();
        assert!(
            e.contains("p95_queue_delay") && e.contains("utilization-delay"),
            "{e}"
        );
    }
}
