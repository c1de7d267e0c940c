//! One link description for both backends.
//!
//! A link has two directions, `up` (client to server) and `down` (server to
//! client). Each has a rate (or a mahimahi trace), a one-way delay with
//! optional jitter, random or Gilbert-Elliott loss, duplication,
//! reordering, a queue limit, an AQM and a scheduler. Values are written
//! as tc writes them (`20mbit`, `40ms`, `1%`, `100pkt`, `64kb`, `1bdp`).
//!
//! In a scenario file the link is a TOML table. Top-level keys apply to both
//! directions; `[link.up]` and `[link.down]` override them one direction at
//! a time:
//!
//! ```toml
//! [link]
//! backend = "auto"            # auto | emu | netem
//! rate = "20mbit"             # or a trace: trace = "traces/lte.trace"
//! rtt = "40ms"                # split evenly; or delay = "20ms" one-way
//! jitter = "1ms"              # optional, with jitter_distribution
//! jitter_distribution = "normal"  # uniform | normal | pareto | paretonormal
//! loss = "0.5%"               # or "ge:p=1%,r=30%,bad=100%,good=0%"
//! duplicate = "0%"
//! reorder = "0%"
//! queue = "1bdp"              # 100pkt | 64kb | 1bdp
//! aqm = "droptail"            # droptail | red[:min_th=5,...] | codel[:target=5ms,...] | pie[:target=15ms,...] | fq_codel[:...] (= codel with sched fq)
//! sched = "fifo"              # fifo | fq | wfq (deficit round robin; see below)
//! seed = 1
//!
//! [link.up]
//! rate = "5mbit"              # an asymmetric link
//! ```
//!
//! `sched` picks how the bottleneck queue is served ([`Sched`]):
//!
//! - `fifo` (the default): one queue, first in first out.
//! - `fq`: one class per flow (each QUIC flow and each cross-traffic
//!   source), equal weights, served by deficit round robin (Shreedhar &
//!   Varghese, SIGCOMM 1995), as the FQ/SFQ/DRR schemes of the TCP/EXP
//!   comparison.
//! - `wfq`: the same with weights: a class per `[[flows]]` flow and per
//!   `[[cross]]` source, each of which must then give a `weight`; a
//!   backlogged class gets `weight / (sum of the backlogged classes'
//!   weights)` of the link, as a CBWFQ router's bandwidth reservations
//!   (BR-TCP: weight 40 for the flow and 60 for the UDP cross traffic on a
//!   100 Mbit/s link reserve 40 Mbit/s for the flow).
//!
//! Both are work-conserving: bandwidth a class leaves idle goes to the
//! others. With `fq` and `wfq` the `queue` limit is **per class** (each
//! class may hold `queue` bytes or packets, as CBQ/CBWFQ class queues do),
//! so the buffer as a whole grows with the number of classes; a full class
//! drops its own arrivals (`queue_full`) and no other class's. The `aqm`
//! runs in every class on that class's queue alone (droptail per class;
//! RED with a per-class average; CoDel per class, as fq_codel does).
//! The netem backend supports `fifo` only.
//!
//! [`LinkSpec::from_toml`] turns such a table into a [`LinkSpec`], rejecting
//! anything it does not know with the field, the value and what is allowed.
//! [`LinkSpec::to_toml`] writes the fully resolved form back.

pub mod trace;
pub mod units;

use std::fmt;
use std::path::Path;

use cc_algorithms::units::{format_rate, parse_rate};
pub use trace::Trace;
pub use units::QueueLimit;
use units::{format_duration_ns, parse_duration_ns, parse_probability, parse_queue};

/// A field of a link description that is wrong, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct LinkError {
    /// The field's path, e.g. `link.up.rate`.
    pub field: String,
    /// What is wrong, with the value and what is allowed.
    pub problem: String,
}

fn err(field: &str, problem: impl Into<String>) -> LinkError {
    LinkError {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// Which emulation backend runs the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// netem where the kernel has it and we are root, else emu.
    #[default]
    Auto,
    /// The userspace emulator.
    Emu,
    /// Kernel netem on veth between namespaces (root).
    Netem,
    /// Virtual time: the same application, quiche and link elements on a
    /// discrete-event clock, in-process (deterministic, faster than real
    /// time, endpoint CPU time counted as zero).
    Sim,
}

impl Backend {
    /// Parses `auto`, `emu`, `netem` or `sim`.
    pub fn parse(s: &str) -> Option<Backend> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Backend::Auto),
            "emu" => Some(Backend::Emu),
            "netem" => Some(Backend::Netem),
            "sim" => Some(Backend::Sim),
            _ => None,
        }
    }

    /// The name users write.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Emu => "emu",
            Backend::Netem => "netem",
            Backend::Sim => "sim",
        }
    }
}

/// How jitter is drawn (netem's distribution tables, computed directly).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JitterDistribution {
    /// Uniform in [-jitter, +jitter] (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Pareto with scale `jitter` (heavy tail, always late).
    Pareto,
    /// netem's "paretonormal": 1/4 pareto plus 3/4 normal.
    ParetoNormal,
}

impl JitterDistribution {
    const NAMES: &'static str = "uniform, normal, pareto, paretonormal";

    fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "uniform" => Some(Self::Uniform),
            "normal" => Some(Self::Normal),
            "pareto" => Some(Self::Pareto),
            "paretonormal" => Some(Self::ParetoNormal),
            _ => None,
        }
    }

    /// The name users (and tc) write.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Normal => "normal",
            Self::Pareto => "pareto",
            Self::ParetoNormal => "paretonormal",
        }
    }
}

/// Which packets the link loses before they reach the queue.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Each packet independently with this probability.
    Random(f64),
    /// The Gilbert-Elliott two-state model, as netem's `loss gemodel p r
    /// 1-h 1-k`: `p` = P(good→bad), `r` = P(bad→good), `bad` = loss
    /// probability in the bad state (1-h), `good` = in the good state (1-k).
    GilbertElliott {
        /// P(good → bad) per packet.
        p: f64,
        /// P(bad → good) per packet.
        r: f64,
        /// Loss probability in the bad state.
        bad: f64,
        /// Loss probability in the good state.
        good: f64,
    },
}

impl LossModel {
    const ALLOWED: &'static str =
        "a probability (`1%`, `0.01`) or Gilbert-Elliott `ge:p=1%,r=30%,bad=100%,good=0%`";

    /// The long-run loss rate.
    pub fn mean_rate(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Random(p) => p,
            LossModel::GilbertElliott { p, r, bad, good } => {
                if p + r == 0.0 {
                    good
                } else {
                    let pi_bad = p / (p + r);
                    pi_bad * bad + (1.0 - pi_bad) * good
                }
            }
        }
    }

    fn parse(field: &str, s: &str) -> Result<LossModel, LinkError> {
        let t = s.trim();
        let Some(rest) = t
            .strip_prefix("ge:")
            .or_else(|| t.strip_prefix("gilbert-elliott:"))
        else {
            return match parse_probability(t) {
                Some(0.0) => Ok(LossModel::None),
                Some(p) => Ok(LossModel::Random(p)),
                None => Err(err(field, format!("`{s}` is not {}", Self::ALLOWED))),
            };
        };
        let (mut p, mut r, mut bad, mut good) = (None, None, 1.0, 0.0);
        for (k, v) in key_values(field, rest, &["p", "r", "bad", "good"])? {
            let prob = parse_probability(&v).ok_or_else(|| {
                err(
                    field,
                    format!("`{k}={v}`: {k} must be a probability such as 5% or 0.05"),
                )
            })?;
            match k.as_str() {
                "p" => p = Some(prob),
                "r" => r = Some(prob),
                "bad" => bad = prob,
                _ => good = prob,
            }
        }
        let (Some(p), Some(r)) = (p, r) else {
            return Err(err(
                field,
                format!("`{s}`: Gilbert-Elliott needs both p and r"),
            ));
        };
        Ok(LossModel::GilbertElliott { p, r, bad, good })
    }

    fn to_spec(self) -> String {
        match self {
            LossModel::None => "0%".into(),
            LossModel::Random(p) => format_prob(p),
            LossModel::GilbertElliott { p, r, bad, good } => format!(
                "ge:p={},r={},bad={},good={}",
                format_prob(p),
                format_prob(r),
                format_prob(bad),
                format_prob(good)
            ),
        }
    }
}

/// RED, with ns-2's parameter names and defaults (Floyd & Jacobson 1993;
/// ns-2 `queue/red.cc`): thresholds in packets of `mean_pktsize` bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedParams {
    /// Minimum threshold on the average queue, packets (ns-2 `thresh_`).
    pub min_th: f64,
    /// Maximum threshold, packets (ns-2 `maxthresh_`).
    pub max_th: f64,
    /// Drop probability at `max_th` (ns-2 `1/linterm_`).
    pub max_p: f64,
    /// Weight of the average queue EWMA (ns-2 `q_weight_`).
    pub wq: f64,
    /// Gentle RED: probability rises from max_p to 1 between max_th and 2·max_th.
    pub gentle: bool,
    /// Packet size in bytes used for idle-time decay and thresholds (ns-2 `mean_pktsize_`).
    pub mean_pktsize: u32,
}

impl Default for RedParams {
    fn default() -> Self {
        RedParams {
            min_th: 5.0,
            max_th: 15.0,
            max_p: 0.1,
            wq: 0.002,
            gentle: true,
            mean_pktsize: 1000,
        }
    }
}

/// CoDel (RFC 8289) parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoDelParams {
    /// Acceptable standing queue delay, ns (RFC 8289: 5 ms).
    pub target_ns: u64,
    /// Sliding window for the minimum sojourn time, ns (100 ms).
    pub interval_ns: u64,
}

impl Default for CoDelParams {
    fn default() -> Self {
        CoDelParams {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
        }
    }
}

/// PIE, Proportional Integral controller Enhanced (RFC 8033), in the RFC's
/// names and units, with the defaults of Linux's `pie` qdisc (which are
/// the RFC's). How each maps to `tc qdisc ... pie`:
///
/// | here                | RFC 8033      | tc `pie`                                   |
/// |---------------------|---------------|--------------------------------------------|
/// | `target=15ms`       | `QDELAY_REF`  | `target 15ms` (kept in µs)                 |
/// | `tupdate=15ms`      | `T_UPDATE`    | `tupdate 15ms` (the kernel rounds up to whole jiffies: 16ms at HZ=250) |
/// | `alpha=0.125` (1/s) | `alpha`       | `alpha 2`: an integer 0..32 in units of 1/16 (`16·alpha`) |
/// | `beta=1.25` (1/s)   | `beta`        | `beta 20`: likewise `16·beta`              |
/// | `max_burst=150ms`   | `MAX_BURST`   | none: fixed at 150 ms in Linux             |
/// | `bytemode=false`    | — (Linux's)   | `bytemode` when true                       |
/// | `ecn=false`         | §5.1 ECN      | `noecn` (only false: the emulator forwards UDP payloads and cannot mark CE) |
/// | `dq_rate_estimator=false` | §5.2 (optional) | `dq_rate_estimator` off, the kernel's default since 5.1: queueing delay from per-packet timestamps (only false here) |
/// | (the link's `queue`)| —             | `limit` in packets (`queue` bytes / MTU)   |
///
/// alpha and beta must be multiples of 1/16 between 1/16 and 2, so the
/// same value runs on both backends (tc leaves out a 0, which then means
/// the kernel's default).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieParams {
    /// Target queueing delay, ns (`QDELAY_REF`, 15 ms).
    pub target_ns: u64,
    /// How often the drop probability is recomputed, ns (`T_UPDATE`, 15 ms).
    pub tupdate_ns: u64,
    /// Weight of the delay's distance from target, per second (0.125).
    pub alpha: f64,
    /// Weight of the delay's trend, per second (1.25).
    pub beta: f64,
    /// Burst allowance after a quiet period, ns (`MAX_BURST`, 150 ms).
    pub max_burst_ns: u64,
    /// Scale each packet's drop probability by its size over the MTU.
    pub bytemode: bool,
}

impl PieParams {
    /// Linux's fixed burst allowance (150 ms), which tc cannot change.
    pub const LINUX_MAX_BURST_NS: u64 = 150_000_000;
}

impl Default for PieParams {
    fn default() -> Self {
        PieParams {
            target_ns: 15_000_000,
            tupdate_ns: 15_000_000,
            alpha: 0.125,
            beta: 1.25,
            max_burst_ns: Self::LINUX_MAX_BURST_NS,
            bytemode: false,
        }
    }
}

/// The bottleneck queue's management.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Aqm {
    /// Drop arrivals when the queue is full.
    #[default]
    DropTail,
    /// Random Early Detection.
    Red(RedParams),
    /// Controlled Delay.
    CoDel(CoDelParams),
    /// Proportional Integral controller Enhanced.
    Pie(PieParams),
}

impl Aqm {
    const ALLOWED: &'static str = "droptail, red[:min_th=5,max_th=15,max_p=0.1,wq=0.002,gentle=true,mean_pktsize=1000], codel[:target=5ms,interval=100ms] or pie[:target=15ms,tupdate=15ms,alpha=0.125,beta=1.25,max_burst=150ms,bytemode=false,ecn=false,dq_rate_estimator=false]";

    fn parse(field: &str, s: &str) -> Result<Aqm, LinkError> {
        let t = s.trim();
        let (name, rest) = t.split_once(':').unwrap_or((t, ""));
        match name.to_ascii_lowercase().as_str() {
            "droptail" | "drop-tail" | "fifo" if rest.is_empty() => Ok(Aqm::DropTail),
            "red" => {
                let mut p = RedParams::default();
                let keys = ["min_th", "max_th", "max_p", "wq", "gentle", "mean_pktsize"];
                for (k, v) in key_values(field, rest, &keys)? {
                    let num = || -> Result<f64, LinkError> {
                        v.parse::<f64>()
                            .ok()
                            .filter(|x| x.is_finite() && *x >= 0.0)
                            .ok_or_else(|| {
                                err(
                                    field,
                                    format!("`{k}={v}`: {k} must be a non-negative number"),
                                )
                            })
                    };
                    match k.as_str() {
                        "min_th" => p.min_th = num()?,
                        "max_th" => p.max_th = num()?,
                        "max_p" => p.max_p = num()?,
                        "wq" => p.wq = num()?,
                        "mean_pktsize" => p.mean_pktsize = num()?.round() as u32,
                        _ => {
                            p.gentle = match v.as_str() {
                                "true" | "1" => true,
                                "false" | "0" => false,
                                _ => {
                                    return Err(err(
                                        field,
                                        format!("`gentle={v}`: gentle must be true or false"),
                                    ))
                                }
                            }
                        }
                    }
                }
                if p.max_th <= p.min_th || p.min_th <= 0.0 {
                    return Err(err(field, format!("`{s}`: RED needs 0 < min_th < max_th (packets), got min_th={} max_th={}", p.min_th, p.max_th)));
                }
                if !(p.max_p > 0.0 && p.max_p <= 1.0 && p.wq > 0.0 && p.wq < 1.0) {
                    return Err(err(
                        field,
                        format!("`{s}`: RED needs 0 < max_p <= 1 and 0 < wq < 1"),
                    ));
                }
                if !(64..=65535).contains(&p.mean_pktsize) {
                    return Err(err(
                        field,
                        format!("`{s}`: mean_pktsize must be 64..65535 bytes"),
                    ));
                }
                Ok(Aqm::Red(p))
            }
            "codel" => {
                let mut p = CoDelParams::default();
                for (k, v) in key_values(field, rest, &["target", "interval"])? {
                    let d = parse_duration_ns(&v).filter(|&d| d > 0).ok_or_else(|| {
                        err(
                            field,
                            format!("`{k}={v}`: {k} must be a positive time such as 5ms"),
                        )
                    })?;
                    if k == "target" {
                        p.target_ns = d
                    } else {
                        p.interval_ns = d
                    }
                }
                if p.target_ns >= p.interval_ns {
                    return Err(err(field, format!("`{s}`: CoDel needs target < interval")));
                }
                Ok(Aqm::CoDel(p))
            }
            "pie" => Ok(Aqm::Pie(PieParams::parse(field, rest)?)),
            _ => Err(err(field, format!("`{s}` is not one of {}", Self::ALLOWED))),
        }
    }

    fn to_spec(self) -> String {
        match self {
            Aqm::DropTail => "droptail".into(),
            Aqm::Red(p) => format!(
                "red:min_th={},max_th={},max_p={},wq={},gentle={},mean_pktsize={}",
                p.min_th, p.max_th, p.max_p, p.wq, p.gentle, p.mean_pktsize
            ),
            Aqm::CoDel(p) => format!(
                "codel:target={},interval={}",
                format_duration_ns(p.target_ns),
                format_duration_ns(p.interval_ns)
            ),
            Aqm::Pie(p) => format!(
                "pie:target={},tupdate={},alpha={},beta={},max_burst={},bytemode={}",
                format_duration_ns(p.target_ns),
                format_duration_ns(p.tupdate_ns),
                p.alpha,
                p.beta,
                format_duration_ns(p.max_burst_ns),
                p.bytemode
            ),
        }
    }

    /// The name alone (`droptail`, `red`, `codel`, `pie`).
    pub fn name(&self) -> &'static str {
        match self {
            Aqm::DropTail => "droptail",
            Aqm::Red(_) => "red",
            Aqm::CoDel(_) => "codel",
            Aqm::Pie(_) => "pie",
        }
    }
}

impl PieParams {
    /// Parses the `k=v,...` after `pie:` (`field` names the field in errors).
    fn parse(field: &str, rest: &str) -> Result<PieParams, LinkError> {
        let mut p = PieParams::default();
        let keys = [
            "target",
            "tupdate",
            "alpha",
            "beta",
            "max_burst",
            "bytemode",
            "ecn",
            "dq_rate_estimator",
        ];
        for (k, v) in key_values(field, rest, &keys)? {
            let flag = || -> Result<bool, LinkError> {
                match v.to_ascii_lowercase().as_str() {
                    "true" | "1" => Ok(true),
                    "false" | "0" => Ok(false),
                    _ => Err(err(field, format!("`{k}={v}`: {k} must be true or false"))),
                }
            };
            // Times go to tc in whole microseconds.
            let time = |lo: u64, lo_text: &str| -> Result<u64, LinkError> {
                parse_duration_ns(&v)
                    .filter(|&d| (lo..=10_000_000_000).contains(&d) && d % 1000 == 0)
                    .ok_or_else(|| {
                        err(
                            field,
                            format!("`{k}={v}`: {k} must be a time from {lo_text} to 10s in whole microseconds, such as 15ms"),
                        )
                    })
            };
            // tc takes alpha and beta as integers 1..32 in units of 1/16.
            let gain = || -> Result<f64, LinkError> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| {
                        let sixteenths = x * 16.0;
                        (1.0..=32.0).contains(&sixteenths)
                            && (sixteenths - sixteenths.round()).abs() < 1e-9
                    })
                    .ok_or_else(|| {
                        err(
                            field,
                            format!("`{k}={v}`: {k} must be a multiple of 1/16 (0.0625) from 0.0625 to 2, such as 0.125 or 1.25 (tc's pie takes 16·{k} as an integer 1..32)"),
                        )
                    })
            };
            match k.as_str() {
                "target" => p.target_ns = time(1000, "1us")?,
                "tupdate" => p.tupdate_ns = time(1_000_000, "1ms")?,
                "max_burst" => p.max_burst_ns = time(0, "0ms")?,
                "alpha" => p.alpha = gain()?,
                "beta" => p.beta = gain()?,
                "bytemode" => p.bytemode = flag()?,
                "ecn" => {
                    if flag()? {
                        return Err(err(field, "`ecn=true`: ECN marking is not supported (the emulator forwards UDP payloads and cannot set CE); ecn must be false"));
                    }
                }
                _ => {
                    if flag()? {
                        return Err(err(field, "`dq_rate_estimator=true`: only the timestamp (sojourn time) delay estimate is implemented, Linux's default; dq_rate_estimator must be false"));
                    }
                }
            }
        }
        Ok(p)
    }
}

/// How the bottleneck queue is served: one FIFO, or deficit round robin
/// over per-class queues (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sched {
    /// One first-in-first-out queue.
    #[default]
    Fifo,
    /// One class per flow, equal weights (fair queueing by DRR).
    Fq,
    /// One class per scenario flow and cross source, weighted by their
    /// `weight` (CBWFQ-like, by DRR).
    Wfq,
}

impl Sched {
    const ALLOWED: &'static str = "fifo (one queue), fq (a queue per flow, equal shares) or wfq (a queue per flow and cross source, shares by their `weight`)";

    fn parse(field: &str, s: &str) -> Result<Sched, LinkError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fifo" => Ok(Sched::Fifo),
            "fq" => Ok(Sched::Fq),
            "wfq" => Ok(Sched::Wfq),
            _ => Err(err(field, format!("`{s}` is not one of {}", Self::ALLOWED))),
        }
    }

    /// The name users write.
    pub fn as_str(self) -> &'static str {
        match self {
            Sched::Fifo => "fifo",
            Sched::Fq => "fq",
            Sched::Wfq => "wfq",
        }
    }
}

/// Splits `k=v,k=v`, checking each key against `allowed` and rejecting
/// duplicates.
fn key_values(field: &str, s: &str, allowed: &[&str]) -> Result<Vec<(String, String)>, LinkError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            return Err(err(field, format!("`{part}` is not key=value")));
        };
        let k = k.trim().to_ascii_lowercase();
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                field,
                format!("unknown key `{k}`; allowed: {}", allowed.join(", ")),
            ));
        }
        if out.iter().any(|(o, _)| *o == k) {
            return Err(err(field, format!("`{k}` is given twice")));
        }
        out.push((k, v.trim().to_string()));
    }
    Ok(out)
}

fn format_prob(p: f64) -> String {
    format!("{}%", (p * 100.0 * 1e9).round() / 1e9)
}

/// One direction of the link, fully resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectionSpec {
    /// Bottleneck rate in bit/s (the trace's mean rate when a trace is set).
    pub rate_bps: f64,
    /// Time-varying capacity; replaces `rate_bps` for serialization.
    pub trace: Option<Trace>,
    /// One-way propagation delay, ns.
    pub delay_ns: u64,
    /// Jitter amount, ns (0: none).
    pub jitter_ns: u64,
    /// How jitter is drawn.
    pub jitter_distribution: JitterDistribution,
    /// Random loss before the queue.
    pub loss: LossModel,
    /// Probability that a packet is duplicated.
    pub duplicate: f64,
    /// Probability that a packet skips the delay line and overtakes the
    /// ones before it (netem's `reorder`).
    pub reorder: f64,
    /// Queue limit as written.
    pub queue: QueueLimit,
    /// Queue management (per class with `fq` and `wfq`).
    pub aqm: Aqm,
    /// How the queue is served.
    pub sched: Sched,
}

/// A whole link: both directions, the backend and the seed.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// Which backend runs it.
    pub backend: Backend,
    /// Client to server.
    pub up: DirectionSpec,
    /// Server to client.
    pub down: DirectionSpec,
    /// Seeds every random choice (loss, jitter, duplication, reordering, RED).
    pub seed: u64,
}

impl Default for DirectionSpec {
    fn default() -> Self {
        DirectionSpec {
            rate_bps: 20e6,
            trace: None,
            delay_ns: 20_000_000,
            jitter_ns: 0,
            jitter_distribution: JitterDistribution::Uniform,
            loss: LossModel::None,
            duplicate: 0.0,
            reorder: 0.0,
            queue: QueueLimit::Bdp(1.0),
            aqm: Aqm::DropTail,
            sched: Sched::Fifo,
        }
    }
}

impl Default for LinkSpec {
    /// The project's default link: 20 Mbit/s, 40 ms RTT, one BDP of
    /// drop-tail buffer, both directions.
    fn default() -> Self {
        LinkSpec {
            backend: Backend::Auto,
            up: DirectionSpec::default(),
            down: DirectionSpec::default(),
            seed: 1,
        }
    }
}

/// Which way a packet travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Client to server.
    Up = 0,
    /// Server to client.
    Down = 1,
}

impl Dir {
    /// `up` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::Up => "up",
            Dir::Down => "down",
        }
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const DIRECTION_KEYS: &[&str] = &[
    "rate",
    "trace",
    "delay",
    "jitter",
    "jitter_distribution",
    "loss",
    "duplicate",
    "reorder",
    "queue",
    "aqm",
    "sched",
];
const TOP_KEYS: &[&str] = &["backend", "rtt", "seed", "up", "down"];

/// A TOML scalar as text, for the unit parsers. Tables, arrays and
/// booleans are errors.
fn scalar(field: &str, v: &toml::Value) -> Result<String, LinkError> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        other => Err(err(
            field,
            format!("expected a string or number, got {}", other.type_str()),
        )),
    }
}

impl LinkSpec {
    /// The round-trip propagation delay (up + down), ns.
    pub fn rtt_ns(&self) -> u64 {
        self.up.delay_ns + self.down.delay_ns
    }

    /// One direction.
    pub fn dir(&self, d: Dir) -> &DirectionSpec {
        match d {
            Dir::Up => &self.up,
            Dir::Down => &self.down,
        }
    }

    /// The queue limit of direction `d` in bytes, with BDP multiples
    /// resolved against that direction's rate and the path's RTT, and
    /// packet limits counted at `mtu` bytes. Never below one `mtu`.
    pub fn queue_bytes(&self, d: Dir, mtu: u64) -> u64 {
        let s = self.dir(d);
        let b = match s.queue {
            QueueLimit::Bytes(b) => b,
            QueueLimit::Packets(p) => p.saturating_mul(mtu),
            QueueLimit::Bdp(f) => {
                (f * s.rate_bps / 8.0 * self.rtt_ns() as f64 / 1e9).round() as u64
            }
        };
        b.max(mtu)
    }

    /// Whether either direction serves its queue by classes (`fq`, `wfq`).
    pub fn has_classes(&self) -> bool {
        self.up.sched != Sched::Fifo || self.down.sched != Sched::Fifo
    }

    /// Whether either direction weighs its classes (`wfq`).
    pub fn is_weighted(&self) -> bool {
        self.up.sched == Sched::Wfq || self.down.sched == Sched::Wfq
    }

    /// The packet-count limit of direction `d`, if the queue is limited in packets.
    pub fn queue_packets(&self, d: Dir) -> Option<u64> {
        match self.dir(d).queue {
            QueueLimit::Packets(p) => Some(p),
            _ => None,
        }
    }

    /// Parses the `[link]` table of a scenario. `base` resolves relative
    /// trace paths; `prefix` names the table in errors (`link`).
    pub fn from_toml(
        table: &toml::Table,
        base: &Path,
        prefix: &str,
    ) -> Result<LinkSpec, LinkError> {
        for k in table.keys() {
            if !TOP_KEYS.contains(&k.as_str()) && !DIRECTION_KEYS.contains(&k.as_str()) {
                return Err(err(
                    &format!("{prefix}.{k}"),
                    format!(
                        "unknown field; allowed: {}, {}",
                        TOP_KEYS.join(", "),
                        DIRECTION_KEYS.join(", ")
                    ),
                ));
            }
        }
        let mut spec = LinkSpec::default();
        if let Some(v) = table.get("backend") {
            let f = format!("{prefix}.backend");
            let s = scalar(&f, v)?;
            spec.backend = Backend::parse(&s)
                .ok_or_else(|| err(&f, format!("`{s}` is not one of auto, emu, netem, sim")))?;
        }
        if let Some(v) = table.get("seed") {
            let f = format!("{prefix}.seed");
            spec.seed = match v {
                toml::Value::Integer(i) if *i >= 0 => *i as u64,
                _ => return Err(err(&f, format!("`{v}` is not a non-negative integer"))),
            };
        }
        if table.contains_key("rtt") && table.contains_key("delay") {
            return Err(err(
                &format!("{prefix}.rtt"),
                "give either rtt (split evenly) or delay (one-way), not both",
            ));
        }
        if let Some(v) = table.get("rtt") {
            let f = format!("{prefix}.rtt");
            let s = scalar(&f, v)?;
            let rtt = parse_duration_ns(&s).ok_or_else(|| {
                err(
                    &f,
                    format!("`{s}` is not a time such as 40ms, 1.5s or 250us"),
                )
            })?;
            spec.up.delay_ns = rtt / 2;
            spec.down.delay_ns = rtt - rtt / 2;
        }
        // Top-level direction keys apply to both; then each override.
        let mut dirs = [spec.up.clone(), spec.down.clone()];
        for d in &mut dirs {
            apply_direction(d, table, base, prefix)?;
        }
        for (i, name) in ["up", "down"].iter().enumerate() {
            if let Some(v) = table.get(*name) {
                let f = format!("{prefix}.{name}");
                let t = v
                    .as_table()
                    .ok_or_else(|| err(&f, "expected a table such as [link.up]"))?;
                for k in t.keys() {
                    if !DIRECTION_KEYS.contains(&k.as_str()) {
                        return Err(err(
                            &format!("{f}.{k}"),
                            format!("unknown field; allowed: {}", DIRECTION_KEYS.join(", ")),
                        ));
                    }
                }
                apply_direction(&mut dirs[i], t, base, &f)?;
            }
        }
        let [up, down] = dirs;
        spec.up = up;
        spec.down = down;
        Ok(spec)
    }

    /// Builds a link from `key=value` pairs, as command-line flags give
    /// them (`rate=20mbit`, `rtt=40ms`, `up.rate=5mbit`, ...).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        base: &Path,
    ) -> Result<LinkSpec, LinkError> {
        let mut table = toml::Table::new();
        for (k, v) in pairs {
            let value = if k == "seed" {
                match v.trim().parse::<i64>() {
                    Ok(i) => toml::Value::Integer(i),
                    Err(_) => toml::Value::String(v.to_string()),
                }
            } else {
                toml::Value::String(v.to_string())
            };
            if let Some((dir, key)) = k.split_once('.') {
                let sub = table
                    .entry(dir.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let Some(t) = sub.as_table_mut() {
                    t.insert(key.to_string(), value);
                }
            } else {
                table.insert(k.to_string(), value);
            }
        }
        LinkSpec::from_toml(&table, base, "link")
    }

    /// The fully resolved description, every field explicit, as a TOML
    /// table that [`LinkSpec::from_toml`] reads back to the same spec.
    pub fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("backend".into(), self.backend.as_str().into());
        t.insert("seed".into(), toml::Value::Integer(self.seed as i64));
        for (name, d) in [("up", &self.up), ("down", &self.down)] {
            let mut dt = toml::Table::new();
            match &d.trace {
                Some(tr) => {
                    dt.insert("trace".into(), tr.path.display().to_string().into());
                }
                None => {
                    dt.insert("rate".into(), format_rate(d.rate_bps).into());
                }
            }
            dt.insert("delay".into(), format_duration_ns(d.delay_ns).into());
            dt.insert("jitter".into(), format_duration_ns(d.jitter_ns).into());
            dt.insert(
                "jitter_distribution".into(),
                d.jitter_distribution.as_str().into(),
            );
            dt.insert("loss".into(), d.loss.to_spec().into());
            dt.insert("duplicate".into(), format_prob(d.duplicate).into());
            dt.insert("reorder".into(), format_prob(d.reorder).into());
            let q = match d.queue {
                QueueLimit::Packets(p) => format!("{p}pkt"),
                QueueLimit::Bytes(b) => format!("{b}b"),
                QueueLimit::Bdp(f) => format!("{f}bdp"),
            };
            dt.insert("queue".into(), q.into());
            dt.insert("aqm".into(), d.aqm.to_spec().into());
            dt.insert("sched".into(), d.sched.as_str().into());
            t.insert(name.into(), toml::Value::Table(dt));
        }
        t
    }
}

fn apply_direction(
    d: &mut DirectionSpec,
    t: &toml::Table,
    base: &Path,
    prefix: &str,
) -> Result<(), LinkError> {
    let get = |k: &str| -> Result<Option<(String, String)>, LinkError> {
        let f = format!("{prefix}.{k}");
        match t.get(k) {
            Some(v) => Ok(Some((scalar(&f, v)?, f))),
            None => Ok(None),
        }
    };
    if t.contains_key("rate") && t.contains_key("trace") {
        return Err(err(
            &format!("{prefix}.trace"),
            "give either rate or trace, not both",
        ));
    }
    if let Some((s, f)) = get("rate")? {
        d.rate_bps = parse_rate(&s)
            .filter(|&r| (1000.0..=1e11).contains(&r))
            .ok_or_else(|| {
                err(&f, format!("`{s}` is not a rate between 1kbit and 100gbit, such as 20mbit, 500kbit or 1gbit"))
            })?;
        d.trace = None;
    }
    if let Some((s, f)) = get("trace")? {
        let p = base.join(&s);
        let tr = Trace::load(&p).map_err(|e| err(&f, e))?;
        d.rate_bps = tr.mean_rate_bps();
        d.trace = Some(tr);
    }
    if let Some((s, f)) = get("delay")? {
        d.delay_ns = parse_duration_ns(&s)
            .filter(|&v| v <= 10_000_000_000)
            .ok_or_else(|| {
                err(
                    &f,
                    format!("`{s}` is not a one-way delay up to 10s, such as 20ms or 250us"),
                )
            })?;
    }
    if let Some((s, f)) = get("jitter")? {
        d.jitter_ns = parse_duration_ns(&s)
            .filter(|&v| v <= 10_000_000_000)
            .ok_or_else(|| err(&f, format!("`{s}` is not a time up to 10s, such as 2ms")))?;
    }
    if let Some((s, f)) = get("jitter_distribution")? {
        d.jitter_distribution = JitterDistribution::parse(&s).ok_or_else(|| {
            err(
                &f,
                format!("`{s}` is not one of {}", JitterDistribution::NAMES),
            )
        })?;
    }
    if let Some((s, f)) = get("loss")? {
        d.loss = LossModel::parse(&f, &s)?;
    }
    for (key, slot) in [("duplicate", &mut d.duplicate), ("reorder", &mut d.reorder)] {
        if let Some((s, f)) = get(key)? {
            *slot = parse_probability(&s)
                .ok_or_else(|| err(&f, format!("`{s}` is not a probability such as 1% or 0.01")))?;
        }
    }
    if let Some((s, f)) = get("queue")? {
        d.queue = parse_queue(&s).ok_or_else(|| {
            err(&f, format!("`{s}` is not a queue limit: packets (100pkt), bytes (64kb, 150000b) or BDP multiples (1bdp, 0.5bdp)"))
        })?;
    }
    let mut fq_codel = false;
    if let Some((s, f)) = get("aqm")? {
        // `fq_codel[:...]` is CoDel on each flow's queue of a fair-queueing
        // scheduler: `aqm = "codel[:...]"` with `sched = "fq"`.
        let t = s.trim();
        let codel = match t.split_once(':') {
            Some((n, rest)) if n.eq_ignore_ascii_case("fq_codel") => Some(format!("codel:{rest}")),
            None if t.eq_ignore_ascii_case("fq_codel") => Some("codel".to_string()),
            _ => None,
        };
        fq_codel = codel.is_some();
        d.aqm = Aqm::parse(&f, codel.as_deref().unwrap_or(&s))?;
        if fq_codel {
            d.sched = Sched::Fq;
        }
    }
    if let Some((s, f)) = get("sched")? {
        d.sched = Sched::parse(&f, &s)?;
        if fq_codel && d.sched != Sched::Fq {
            return Err(err(
                &f,
                format!("`{s}`: aqm = \"fq_codel\" needs sched = \"fq\" (or no sched)"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<LinkSpec, LinkError> {
        let t: toml::Table = toml::from_str(s).unwrap();
        LinkSpec::from_toml(&t, Path::new("."), "link")
    }

    #[test]
    fn defaults_and_overrides() {
        let l = parse("rate = \"10mbit\"\nrtt = \"41ms\"\nqueue = \"1bdp\"\n[up]\nrate = \"1mbit\"\ndelay = \"5ms\"").unwrap();
        assert_eq!(l.down.rate_bps, 10e6);
        assert_eq!(l.up.rate_bps, 1e6);
        assert_eq!(l.down.delay_ns, 20_500_000);
        assert_eq!(l.up.delay_ns, 5_000_000);
        // BDP over the whole path's RTT at the direction's rate.
        assert_eq!(l.queue_bytes(Dir::Down, 1500), 31_875);
        assert_eq!(l.seed, 1);
        assert_eq!(l.backend, Backend::Auto);
        let d = LinkSpec::default();
        assert_eq!(d.queue_bytes(Dir::Down, 1500), 100_000);
    }

    #[test]
    fn round_trips_through_toml() {
        let l = parse(
            "rate = \"20mbit\"\nrtt = \"40ms\"\nloss = \"ge:p=1%,r=30%\"\njitter = \"1ms\"\njitter_distribution = \"normal\"\naqm = \"red:min_th=10,max_th=30\"\nseed = 7\nbackend = \"emu\"\n[down]\naqm = \"codel:target=3ms\"\nqueue = \"200pkt\"\nreorder = \"1%\"\nsched = \"wfq\"",
        )
        .unwrap();
        assert!(matches!(l.up.aqm, Aqm::Red(p) if p.min_th == 10.0 && p.max_th == 30.0));
        assert!(matches!(l.down.aqm, Aqm::CoDel(p) if p.target_ns == 3_000_000));
        assert_eq!((l.up.sched, l.down.sched), (Sched::Fifo, Sched::Wfq));
        assert!(l.has_classes() && l.is_weighted());
        let back = LinkSpec::from_toml(&l.to_toml(), Path::new("."), "link").unwrap();
        assert_eq!(back, l);
        assert!((l.up.loss.mean_rate() - 0.01 / 0.31).abs() < 1e-12);
    }

    #[test]
    fn pie_takes_linux_defaults_and_round_trips() {
        let l = parse("aqm = \"pie\"").unwrap();
        assert_eq!(l.up.aqm, Aqm::Pie(PieParams::default()));
        assert_eq!(l.down.aqm.name(), "pie");
        let PieParams {
            target_ns,
            tupdate_ns,
            alpha,
            beta,
            max_burst_ns,
            bytemode,
        } = PieParams::default();
        // RFC 8033 / Linux: 15 ms, 15 ms, alpha 0.125 (tc 2), beta 1.25 (tc 20), 150 ms.
        assert_eq!(
            (target_ns, tupdate_ns, max_burst_ns),
            (15_000_000, 15_000_000, 150_000_000)
        );
        assert_eq!((alpha * 16.0, beta * 16.0, bytemode), (2.0, 20.0, false));
        let l = parse(
            "[up]\naqm = \"PIE:target=20ms,tupdate=30ms,alpha=0.25,beta=2,max_burst=100ms,bytemode=true,ecn=false,dq_rate_estimator=0\"",
        )
        .unwrap();
        let want = PieParams {
            target_ns: 20_000_000,
            tupdate_ns: 30_000_000,
            alpha: 0.25,
            beta: 2.0,
            max_burst_ns: 100_000_000,
            bytemode: true,
        };
        assert_eq!(l.up.aqm, Aqm::Pie(want));
        assert_eq!(l.down.aqm, Aqm::DropTail);
        let back = LinkSpec::from_toml(&l.to_toml(), Path::new("."), "link").unwrap();
        assert_eq!(back, l);
        assert_eq!(
            l.up.aqm.to_spec(),
            "pie:target=20ms,tupdate=30ms,alpha=0.25,beta=2,max_burst=100ms,bytemode=true"
        );
        // Every multiple of 1/16 from 1/16 to 2 is accepted, exactly.
        for i in 1..=32 {
            let a = i as f64 / 16.0;
            let l = parse(&format!("aqm = \"pie:alpha={a},beta={a}\"")).unwrap();
            assert!(matches!(l.up.aqm, Aqm::Pie(p) if p.alpha == a && p.beta == a));
        }
    }

    #[test]
    fn from_pairs_builds_the_same() {
        let a = LinkSpec::from_pairs(
            [
                ("rate", "5mbit"),
                ("rtt", "10ms"),
                ("up.rate", "1mbit"),
                ("seed", "3"),
            ],
            Path::new("."),
        )
        .unwrap();
        assert_eq!((a.up.rate_bps, a.down.rate_bps, a.seed), (1e6, 5e6, 3));
    }

    #[test]
    fn errors_name_field_value_and_allowed() {
        let cases = [
            ("rate = \"fast\"", "link.rate", "fast"),
            ("rat = \"1mbit\"", "link.rat", "allowed: backend"),
            ("rtt = \"40\"", "link.rtt", "`40`"),
            ("rtt = \"4ms\"\ndelay = \"2ms\"", "link.rtt", "not both"),
            ("queue = \"100\"", "link.queue", "100pkt"),
            ("loss = \"150%\"", "link.loss", "Gilbert-Elliott"),
            ("loss = \"ge:p=1%\"", "link.loss", "needs both p and r"),
            (
                "loss = \"ge:p=1%,r=2%,q=3\"",
                "link.loss",
                "unknown key `q`",
            ),
            ("aqm = \"blue\"", "link.aqm", "droptail, red"),
            ("aqm = \"blue\"", "link.aqm", "pie[:target=15ms"),
            (
                "aqm = \"pie:alpha=0.1\"",
                "link.aqm",
                "alpha must be a multiple of 1/16",
            ),
            ("aqm = \"pie:beta=3\"", "link.aqm", "from 0.0625 to 2"),
            ("aqm = \"pie:alpha=0\"", "link.aqm", "`alpha=0`"),
            (
                "aqm = \"pie:target=0ms\"",
                "link.aqm",
                "target must be a time from 1us",
            ),
            (
                "aqm = \"pie:target=1500ns\"",
                "link.aqm",
                "whole microseconds",
            ),
            (
                "aqm = \"pie:tupdate=100us\"",
                "link.aqm",
                "tupdate must be a time from 1ms",
            ),
            ("aqm = \"pie:ecn=true\"", "link.aqm", "ecn must be false"),
            (
                "aqm = \"pie:ecn=maybe\"",
                "link.aqm",
                "ecn must be true or false",
            ),
            (
                "aqm = \"pie:dq_rate_estimator=true\"",
                "link.aqm",
                "dq_rate_estimator must be false",
            ),
            ("aqm = \"pie:limit=100\"", "link.aqm", "unknown key `limit`"),
            (
                "[down]\naqm = \"pie:bytemode=yes\"",
                "link.down.aqm",
                "bytemode must be true or false",
            ),
            ("sched = \"cbq\"", "link.sched", "fifo (one queue), fq"),
            ("[down]\nsched = \"sfq\"", "link.down.sched", "wfq"),
            (
                "aqm = \"red:min_th=20,max_th=10\"",
                "link.aqm",
                "min_th < max_th",
            ),
            (
                "aqm = \"codel:target=200ms\"",
                "link.aqm",
                "target < interval",
            ),
            ("[up]\nspeed = \"1mbit\"", "link.up.speed", "allowed: rate"),
            ("up = 3", "link.up", "table"),
            ("backend = \"docker\"", "link.backend", "auto, emu, netem"),
            ("seed = -1", "link.seed", "non-negative"),
            ("rate = true", "link.rate", "boolean"),
            (
                "jitter_distribution = \"cauchy\"",
                "link.jitter_distribution",
                "paretonormal",
            ),
            (
                "trace = \"/nonexistent.trace\"",
                "link.trace",
                "cannot read",
            ),
            ("rate = \"1mbit\"\ntrace = \"x\"", "link.trace", "not both"),
        ];
        for (toml_text, field, needle) in cases {
            let e = parse(toml_text).unwrap_err();
            assert_eq!(e.field, field, "{toml_text}: {e}");
            assert!(e.to_string().contains(needle), "{toml_text}: {e}");
        }
    }
}
