//! What is searched and where: the parameters (`--param NAME=LO..HI`),
//! checked against the registry's declarations, and the network conditions
//! (`--conditions rate=..,rtt=..[,loss=..,flows=..]`).

use cc_algorithms::registry::{self, AlgorithmInfo, ParamKind};

/// One searched parameter (a number, or a rate in bit/s).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Param {
    /// Registry name.
    pub name: String,
    /// Lowest value searched.
    pub lo: f64,
    /// Highest value searched.
    pub hi: f64,
    /// Its unit (from the registry).
    pub unit: String,
}

/// The searched parameters of one algorithm, and the spec the rest come
/// from.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Space {
    /// Registry name.
    pub algorithm: String,
    /// Parameters fixed for the whole tune (`key=value`, from `--base`).
    pub fixed: Vec<String>,
    /// The searched ones.
    pub params: Vec<Param>,
}

fn tunables(a: &AlgorithmInfo) -> String {
    let v: Vec<String> = a
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Number | ParamKind::Rate))
        .map(|p| format!("{} ({}..{} {})", p.name, p.min, p.max, p.unit))
        .collect();
    if v.is_empty() {
        "it has no numeric parameters".into()
    } else {
        format!("its numeric parameters: {}", v.join(", "))
    }
}

impl Space {
    /// `base` is the algorithm's spec (`vegas` or `vegas:gamma=2`); each of
    /// `params` is `NAME=LO..HI`. Every error names what is allowed.
    pub fn parse(base: &str, params: &[String]) -> Result<Space, String> {
        let (name, rest) = base.split_once(':').unwrap_or((base, ""));
        let info = registry::algorithms()
            .find(|a| a.name == name.trim())
            .ok_or_else(|| {
                format!(
                    "unknown algorithm `{}`; valid: {}",
                    name.trim(),
                    registry::names().join(", ")
                )
            })?;
        let fixed: Vec<String> = rest
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if params.is_empty() {
            return Err(format!(
                "give at least one --param NAME=LO..HI for `{}`; {}",
                info.name,
                tunables(info)
            ));
        }
        let mut out: Vec<Param> = Vec::new();
        for p in params {
            let param = parse_param(info, p)?;
            if out.iter().any(|q| q.name == param.name)
                || fixed
                    .iter()
                    .any(|f| f.split('=').next() == Some(&param.name))
            {
                return Err(format!("--param {p}: `{}` is given twice", param.name));
            }
            out.push(param);
        }
        let space = Space {
            algorithm: info.name.to_string(),
            fixed,
            params: out,
        };
        // The fixed parameters must parse with the searched ones (a
        // required parameter may be among either).
        let mid = space.values(&vec![0.5; space.dims()]);
        cc_algorithms::parse(&space.spec(&mid)).map_err(|e| e.to_string())?;
        Ok(space)
    }

    /// Dimensions.
    pub fn dims(&self) -> usize {
        self.params.len()
    }

    /// The values at a point of the unit cube (clamped into it).
    pub fn values(&self, unit: &[f64]) -> Vec<f64> {
        self.params
            .iter()
            .zip(unit)
            .map(|(p, u)| {
                let v = p.lo + u.clamp(0.0, 1.0) * (p.hi - p.lo);
                // Four significant decimals: the spec (and the cache key)
                // of nearby points may coincide, which is what we want.
                (v * 1e4).round() / 1e4
            })
            .collect()
    }

    /// The algorithm's own value of each searched parameter, in the unit
    /// cube (the default's place; 0.5 where it lies outside the range).
    pub fn default_point(&self) -> Vec<f64> {
        let info = registry::algorithms().find(|a| a.name == self.algorithm);
        self.params
            .iter()
            .map(|p| {
                let d = info
                    .and_then(|a| a.params.iter().find(|q| q.name == p.name))
                    .and_then(|q| q.default);
                match d {
                    Some(d) if (p.lo..=p.hi).contains(&d) => (d - p.lo) / (p.hi - p.lo),
                    _ => 0.5,
                }
            })
            .collect()
    }

    /// The spec for these parameter values.
    pub fn spec(&self, values: &[f64]) -> String {
        let mut items = self.fixed.clone();
        items.extend(
            self.params
                .iter()
                .zip(values)
                .map(|(p, v)| format!("{}={v}", p.name)),
        );
        format!("{}:{}", self.algorithm, items.join(","))
    }

    /// The spec with nothing searched (the defaults, with `fixed`).
    pub fn base_spec(&self) -> String {
        if self.fixed.is_empty() {
            self.algorithm.clone()
        } else {
            format!("{}:{}", self.algorithm, self.fixed.join(","))
        }
    }
}

fn parse_param(info: &AlgorithmInfo, p: &str) -> Result<Param, String> {
    let bad = |why: String| {
        format!(
            "--param {p}: {why}; expected NAME=LO..HI, {}",
            tunables(info)
        )
    };
    let (name, range) = p.split_once('=').ok_or_else(|| bad("no `=`".into()))?;
    let decl = info
        .params
        .iter()
        .find(|q| q.name == name.trim())
        .ok_or_else(|| {
            bad(format!(
                "`{}` has no parameter `{}`",
                info.name,
                name.trim()
            ))
        })?;
    if decl.kind == ParamKind::File {
        return Err(bad(format!("`{}` is a file, not a number", decl.name)));
    }
    if let ParamKind::Choice(names) = decl.kind {
        return Err(bad(format!(
            "`{}` is a choice ({}), not a number to search; fix it with --base {}:{}=NAME and tune each choice apart",
            decl.name,
            names.join(", "),
            info.name,
            decl.name
        )));
    }
    let (lo, hi) = range
        .split_once("..")
        .ok_or_else(|| bad("no `..` in the range".into()))?;
    let num = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(format!("`{}` is not a number", s.trim())))
    };
    let (lo, hi) = (num(lo)?, num(hi)?);
    if lo >= hi {
        return Err(bad(format!("the range {lo}..{hi} is empty")));
    }
    if lo < decl.min || hi > decl.max {
        return Err(bad(format!(
            "{lo}..{hi} leaves {}'s allowed {}..{} ({})",
            decl.name, decl.min, decl.max, decl.unit
        )));
    }
    Ok(Param {
        name: decl.name.to_string(),
        lo,
        hi,
        unit: decl.unit.to_string(),
    })
}

/// One network condition a tune optimises for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Condition {
    /// Bottleneck rate, bit/s (both directions).
    pub rate_bps: f64,
    /// Round-trip propagation delay, ns.
    pub rtt_ns: u64,
    /// Random loss, fraction (`None`: the scenario's).
    pub loss: Option<f64>,
    /// Flows of the tuned algorithm (`None`: the scenario's).
    pub flows: Option<u32>,
}

impl Condition {
    /// `rate=20mbit,rtt=40ms[,loss=1%,flows=2]`.
    pub fn parse(s: &str) -> Result<Condition, String> {
        let bad = |why: String| {
            format!("--conditions {s}: {why}; expected rate=RATE,rtt=TIME[,loss=P,flows=N], e.g. rate=20mbit,rtt=40ms,loss=0.5%,flows=2")
        };
        let (mut rate, mut rtt, mut loss, mut flows) = (None, None, None, None);
        for kv in s.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("`{kv}` has no `=`")))?;
            match k.trim() {
                "rate" => {
                    rate = Some(
                        cc_algorithms::units::parse_rate(v)
                            .filter(|r| *r >= 1000.0)
                            .ok_or_else(|| bad(format!("`{v}` is not a rate such as 20mbit")))?,
                    )
                }
                "rtt" => {
                    rtt = Some(
                        crate::link::units::parse_duration_ns(v)
                            .filter(|t| *t > 0)
                            .ok_or_else(|| bad(format!("`{v}` is not a time such as 40ms")))?,
                    )
                }
                "loss" => {
                    let p = match v.trim().strip_suffix('%') {
                        Some(pc) => pc.trim().parse::<f64>().map(|x| x / 100.0),
                        None => v.trim().parse::<f64>(),
                    };
                    loss =
                        Some(p.ok().filter(|p| (0.0..1.0).contains(p)).ok_or_else(|| {
                            bad(format!("`{v}` is not a loss such as 1% or 0.01"))
                        })?)
                }
                "flows" => {
                    flows = Some(
                        v.trim()
                            .parse::<u32>()
                            .ok()
                            .filter(|n| (1..=1000).contains(n))
                            .ok_or_else(|| bad(format!("`{v}` is not a flow count 1..1000")))?,
                    )
                }
                other => return Err(bad(format!("unknown key `{other}`"))),
            }
        }
        Ok(Condition {
            rate_bps: rate.ok_or_else(|| bad("no rate".into()))?,
            rtt_ns: rtt.ok_or_else(|| bad("no rtt".into()))?,
            loss,
            flows,
        })
    }

    /// `20 Mbit/s, 40 ms[, 1% loss][, 2 flows]`.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} Mbit/s, {} ms",
            self.rate_bps / 1e6,
            self.rtt_ns as f64 / 1e6
        );
        if let Some(l) = self.loss {
            s += &format!(", {}% loss", l * 100.0);
        }
        if let Some(f) = self.flows {
            s += &format!(", {f} flows");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_checked_against_the_registry() {
        let s = Space::parse("vegas", &["alpha=1..6".into(), "beta=2..8".into()]).unwrap();
        assert_eq!(s.dims(), 2);
        assert_eq!(s.spec(&s.values(&[0.0, 1.0])), "vegas:alpha=1,beta=8");
        assert_eq!(s.default_point(), vec![0.2, 2.0 / 6.0]);
        // A slow-start rule's constant, with the rule in the base spec.
        let s = Space::parse(
            "newreno:slow_start=hystart++",
            &["hs_css_rounds=0..10".into()],
        )
        .unwrap();
        assert_eq!(
            s.spec(&s.values(&[0.5])),
            "newreno:slow_start=hystart++,hs_css_rounds=5"
        );
        let s = Space::parse("cubic", &["hystart=0..1".into()]).unwrap();
        assert_eq!(s.base_spec(), "cubic");
        // A rate in bit/s, and a parameter the algorithm requires.
        let s = Space::parse("br-tcp", &["reserved=1e6..2e7".into()]).unwrap();
        assert_eq!(s.spec(&s.values(&[0.5])), "br-tcp:reserved=10500000");
        for (base, p, needle) in [
            ("vegs", "alpha=1..2", "unknown algorithm `vegs`"),
            ("vegas", "delta=1..2", "has no parameter `delta`"),
            ("vegas", "alpha=3..2", "is empty"),
            ("vegas", "alpha=1", "no `..`"),
            ("vegas", "alpha=-1..2", "leaves alpha's allowed"),
            ("vegas:alpha=2", "alpha=1..3", "given twice"),
            ("vegas:gamma=x", "alpha=1..2", "gamma"),
            ("tahoe", "x=1..2", "no numeric parameters"),
            ("vegas", "loss_response=0..1", "is a choice (half, ns2)"),
        ] {
            let e = Space::parse(base, &[p.into()]).unwrap_err();
            assert!(e.contains(needle), "{base} {p}: {e}");
        }
        assert!(Space::parse("vegas", &[])
            .unwrap_err()
            .contains("alpha (0..1000 packets)"));
    }

    #[test]
    fn conditions_parse_with_units() {
        let c = Condition::parse("rate=20mbit,rtt=40ms,loss=1%,flows=2").unwrap();
        assert_eq!(
            (c.rate_bps, c.rtt_ns, c.loss, c.flows),
            (20e6, 40_000_000, Some(0.01), Some(2))
        );
        assert_eq!(c.label(), "20 Mbit/s, 40 ms, 1% loss, 2 flows");
        for (bad, needle) in [
            ("rate=20mbit", "no rtt"),
            ("rtt=40ms", "no rate"),
            ("rate=fast,rtt=40ms", "`fast` is not a rate"),
            ("rate=20mbit,rtt=40ms,loss=150%", "not a loss"),
            ("rate=20mbit,rtt=40ms,jitter=1ms", "unknown key `jitter`"),
        ] {
            let e = Condition::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }
}
