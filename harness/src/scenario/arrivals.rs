//! Short flows that come and go: `[[arrivals]]`, flows arriving as a
//! Poisson process with sizes from a named distribution or an empirical
//! CDF, beside a scenario's long flows.
//!
//! ```toml
//! [[arrivals]]
//! cc = "cubic"
//! rate = 2.0                              # arrivals per second (Poisson)
//! size = "lognormal:median=50kb,sigma=1"  # or fixed:100kb, exp:mean=100kb,
//!                                         # pareto:min=10kb,shape=1.2[,max=10mb],
//!                                         # cdf:FILE (lines "BYTES PROBABILITY")
//! from = "1s"                             # default 0
//! until = "25s"                           # default: the scenario's end
//! direction = "download"                  # or upload
//! ```
//!
//! The arrivals are drawn once, when the scenario is read, from its `seed`
//! (each `[[arrivals]]` entry its own stream): inter-arrival times are
//! exponential with mean 1/rate, sizes independent draws. Every repetition
//! replays the same arrivals, so each short flow keeps its index (and its
//! line in `summary.json`) across repetitions; another seed draws others.
//! Each becomes a flow of one request of its size (a new QUIC connection),
//! and its completion time is in the results (`fct_s`).

use std::path::Path;

use link_model::elements::rng::Rng;

use crate::link::units::parse_size_bytes;

/// How big each arriving flow is.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    /// Always this many bytes.
    Fixed(u64),
    /// Exponential with this mean, bytes.
    Exp { mean: f64 },
    /// Log-normal: exp(ln(median) + sigma·N(0,1)), bytes.
    LogNormal { median: f64, sigma: f64 },
    /// Pareto with scale `min` and `shape`, at most `max` bytes.
    Pareto { min: f64, shape: f64, max: f64 },
    /// An empirical CDF: (bytes, P(size ≤ bytes)), increasing in both,
    /// the last probability 1; sizes between points are interpolated.
    Cdf(Vec<(f64, f64)>),
}

/// The sizes allowed, for errors.
pub const SIZE_FORMS: &str = "fixed:100kb, exp:mean=100kb, lognormal:median=50kb,sigma=1, pareto:min=10kb,shape=1.2[,max=10mb] or cdf:FILE";

/// The largest flow an arrival may be, bytes (a short flow is short).
pub const MAX_SIZE: u64 = 1 << 30;

fn kv(s: &str) -> Result<Vec<(String, String)>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .ok_or_else(|| format!("`{p}` is not key=value"))
        })
        .collect()
}

fn bytes(k: &str, v: &str) -> Result<f64, String> {
    match parse_size_bytes(v) {
        Some(b) if b > 0 && b <= MAX_SIZE => Ok(b as f64),
        _ => Err(format!(
            "`{k}={v}` is not a size from 1 byte to 1gb, such as 50kb"
        )),
    }
}

fn number(k: &str, v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| format!("`{k}={v}` is not a positive number"))
}

impl SizeDist {
    /// Parses a size spec; `base` resolves a CDF file's path. The error
    /// says what is wrong and what is allowed.
    pub fn parse(s: &str, base: &Path) -> Result<SizeDist, String> {
        let (name, rest) = s.trim().split_once(':').unwrap_or((s.trim(), ""));
        let name = name.to_ascii_lowercase();
        let keys = |allowed: &[&str]| -> Result<Vec<(String, String)>, String> {
            let pairs = kv(rest)?;
            for (k, _) in &pairs {
                if !allowed.contains(&k.as_str()) {
                    return Err(format!("`{name}` takes {}, not `{k}`", allowed.join(", ")));
                }
            }
            Ok(pairs)
        };
        let need = |pairs: &[(String, String)], k: &str| -> Result<String, String> {
            pairs
                .iter()
                .find(|p| p.0 == k)
                .map(|p| p.1.clone())
                .ok_or_else(|| format!("`{s}` needs {k}"))
        };
        match name.as_str() {
            "fixed" => Ok(SizeDist::Fixed(bytes("fixed", rest)? as u64)),
            "exp" => {
                let p = keys(&["mean"])?;
                Ok(SizeDist::Exp {
                    mean: bytes("mean", &need(&p, "mean")?)?,
                })
            }
            "lognormal" => {
                let p = keys(&["median", "sigma"])?;
                Ok(SizeDist::LogNormal {
                    median: bytes("median", &need(&p, "median")?)?,
                    sigma: number("sigma", &need(&p, "sigma")?)?,
                })
            }
            "pareto" => {
                let p = keys(&["min", "shape", "max"])?;
                let min = bytes("min", &need(&p, "min")?)?;
                let max = match p.iter().find(|x| x.0 == "max") {
                    Some((_, v)) => bytes("max", v)?,
                    None => MAX_SIZE as f64,
                };
                if max < min {
                    return Err(format!("`{s}`: max is below min"));
                }
                Ok(SizeDist::Pareto {
                    min,
                    shape: number("shape", &need(&p, "shape")?)?,
                    max,
                })
            }
            "cdf" => {
                let path = base.join(rest.trim());
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cdf:{}: {e}", path.display()))?;
                Self::parse_cdf(&text).map_err(|e| format!("cdf:{}: {e}", path.display()))
            }
            _ => Err(format!("`{s}` is not one of {SIZE_FORMS}")),
        }
    }

    /// An empirical CDF: lines of `BYTES PROBABILITY` (`#` comments),
    /// both increasing, the last probability 1.
    pub fn parse_cdf(text: &str) -> Result<SizeDist, String> {
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            let (Some(b), Some(p), None) = (it.next(), it.next(), it.next()) else {
                return Err(format!("line {}: expected `BYTES PROBABILITY`", i + 1));
            };
            let b = bytes("bytes", b).map_err(|e| format!("line {}: {e}", i + 1))?;
            let p: f64 = p
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..=1.0).contains(p))
                .ok_or_else(|| format!("line {}: `{p}` is not a probability from 0 to 1", i + 1))?;
            if let Some(&(lb, lp)) = pts.last() {
                if b <= lb || p < lp {
                    return Err(format!(
                        "line {}: sizes must increase and probabilities not decrease",
                        i + 1
                    ));
                }
            }
            pts.push((b, p));
        }
        match pts.last() {
            Some(&(_, p)) if (p - 1.0).abs() < 1e-9 => Ok(SizeDist::Cdf(pts)),
            Some(_) => Err("the last probability must be 1".into()),
            None => Err("no points".into()),
        }
    }

    /// One size, bytes (at least 1, at most [`MAX_SIZE`]).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let x = match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Exp { mean } => -mean * (1.0 - rng.unit()).ln(),
            SizeDist::LogNormal { median, sigma } => (median.ln() + sigma * rng.normal()).exp(),
            SizeDist::Pareto { min, shape, max } => {
                (min * (1.0 - rng.unit()).powf(-1.0 / shape)).min(*max)
            }
            SizeDist::Cdf(pts) => {
                let u = rng.unit();
                let i = pts.partition_point(|p| p.1 < u);
                match i {
                    0 => pts[0].0,
                    i if i >= pts.len() => pts[pts.len() - 1].0,
                    i => {
                        let ((b0, p0), (b1, p1)) = (pts[i - 1], pts[i]);
                        if p1 > p0 {
                            b0 + (b1 - b0) * (u - p0) / (p1 - p0)
                        } else {
                            b1
                        }
                    }
                }
            }
        };
        (x.round() as u64).clamp(1, MAX_SIZE)
    }
}

/// One `[[arrivals]]` entry, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrivalSpec {
    /// Mean arrivals per second.
    pub rate_per_s: f64,
    /// Each flow's size.
    pub size: SizeDist,
    /// The window in which flows arrive, ns from the run's start.
    pub from_ns: u64,
    /// Its end.
    pub until_ns: u64,
}

impl ArrivalSpec {
    /// The arrivals: (start ns, bytes) in time order, from `seed` and the
    /// entry's `stream`, at most `limit` of them (the caller refuses a
    /// scenario that would have more).
    pub fn draw(&self, seed: u64, stream: u64, limit: usize) -> Vec<(u64, u64)> {
        let mut times = Rng::new(seed, 0xA77 << 16 | stream << 1);
        let mut sizes = Rng::new(seed, 0xA77 << 16 | stream << 1 | 1);
        let mut out = Vec::new();
        let mut t = self.from_ns as f64;
        loop {
            t += -(1.0 - times.unit()).ln() / self.rate_per_s * 1e9;
            if t >= self.until_ns as f64 || out.len() > limit {
                break;
            }
            out.push((t as u64, self.size.sample(&mut sizes)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-sided interval holding a Binomial(n, p) count with
    /// probability about 99.9% (normal approximation, z = 3.29).
    fn binomial_interval(n: usize, p: f64) -> std::ops::RangeInclusive<f64> {
        let (m, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        (m - 3.29 * sd)..=(m + 3.29 * sd)
    }

    #[test]
    fn arrivals_are_poisson_and_sizes_follow_the_distribution() {
        // 50 per second over 200 s: 10,000 arrivals expected.
        let spec = ArrivalSpec {
            rate_per_s: 50.0,
            size: SizeDist::parse("lognormal:median=50kb,sigma=1", Path::new(".")).unwrap(),
            from_ns: 0,
            until_ns: 200_000_000_000,
        };
        let got = spec.draw(7, 0, usize::MAX - 1);
        let n = got.len();
        // Poisson(10,000): sd 100.
        assert!((9_671..=10_329).contains(&n), "{n} arrivals");
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
        // Given n, each arrival falls in a 1 s bin with probability 1/200:
        // every bin's count within its binomial interval (200 bins at
        // 99.9%: a miss is rare; allow one).
        let mut bins = [0usize; 200];
        for (t, _) in &got {
            bins[(*t / 1_000_000_000) as usize] += 1;
        }
        let iv = binomial_interval(n, 1.0 / 200.0);
        let out = bins.iter().filter(|&&c| !iv.contains(&(c as f64))).count();
        assert!(out <= 1, "{out} bins outside {iv:?}");
        // Inter-arrival times: the share above the mean is e^-1.
        let above = got
            .windows(2)
            .filter(|w| (w[1].0 - w[0].0) as f64 > 1e9 / 50.0)
            .count();
        assert!(
            binomial_interval(n - 1, (-1.0f64).exp()).contains(&(above as f64)),
            "{above}"
        );
        // Sizes: half below the median; 15.9% below median·e^-sigma.
        let median = 50.0 * 1024.0;
        let below = got.iter().filter(|g| (g.1 as f64) < median).count();
        assert!(
            binomial_interval(n, 0.5).contains(&(below as f64)),
            "{below}"
        );
        let low = got
            .iter()
            .filter(|g| (g.1 as f64) < median * (-1.0f64).exp())
            .count();
        assert!(
            binomial_interval(n, 0.158_655).contains(&(low as f64)),
            "{low}"
        );
        // The same seed draws the same; another seed others.
        assert_eq!(spec.draw(7, 0, usize::MAX - 1), got);
        assert_ne!(spec.draw(8, 0, usize::MAX - 1), got);
    }

    #[test]
    fn every_distribution_samples_within_its_bounds() {
        let mut rng = Rng::new(1, 2);
        let base = Path::new(".");
        let n = 20_000;
        let draw = |d: &SizeDist, rng: &mut Rng| (0..n).map(|_| d.sample(rng)).collect::<Vec<_>>();
        let fixed = SizeDist::parse("fixed:100kb", base).unwrap();
        assert!(draw(&fixed, &mut rng).iter().all(|&b| b == 102_400));
        // Exponential: P(X > mean) = e^-1.
        let exp = SizeDist::parse("exp:mean=10000", base).unwrap();
        let above = draw(&exp, &mut rng).iter().filter(|&&b| b > 10_000).count();
        assert!(binomial_interval(n, (-1.0f64).exp()).contains(&(above as f64)));
        // Pareto: P(X > 2 min) = 2^-shape, capped at max.
        let par = SizeDist::parse("pareto:min=1000,shape=1.5,max=1mb", base).unwrap();
        let xs = draw(&par, &mut rng);
        assert!(xs.iter().all(|&b| (1000..=1 << 20).contains(&b)));
        let above = xs.iter().filter(|&&b| b > 2000).count();
        assert!(binomial_interval(n, 2f64.powf(-1.5)).contains(&(above as f64)));
        // An empirical CDF: 30% at most 1 kB, all at most 100 kB.
        let cdf = SizeDist::parse_cdf("# web\n1000 0.3\n10000 0.8\n100000 1\n").unwrap();
        let xs = draw(&cdf, &mut rng);
        let small = xs.iter().filter(|&&b| b <= 1000).count();
        assert!(
            binomial_interval(n, 0.3).contains(&(small as f64)),
            "{small}"
        );
        assert!(xs.iter().all(|&b| b <= 100_000));
    }

    #[test]
    fn bad_sizes_name_what_is_wrong() {
        let base = Path::new(".");
        for (s, want) in [
            ("uniform:min=1", "is not one of"),
            ("exp:median=1kb", "takes mean, not `median`"),
            ("lognormal:median=1kb", "needs sigma"),
            ("pareto:min=10kb,shape=1,max=1kb", "max is below min"),
            ("fixed:2gb", "from 1 byte to 1gb"),
            ("lognormal:median=1kb,sigma=-1", "positive number"),
            ("cdf:/nonexistent/cdf.txt", "cdf:/nonexistent/cdf.txt"),
        ] {
            let e = SizeDist::parse(s, base).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
        for (text, want) in [
            ("1000 0.5\n500 1\n", "must increase"),
            ("1000 0.5\n", "last probability must be 1"),
            ("1000\n", "expected `BYTES PROBABILITY`"),
            ("1000 1.5\n", "not a probability"),
        ] {
            let e = SizeDist::parse_cdf(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
