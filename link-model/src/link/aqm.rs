//! How a direction's bottleneck queue is managed (drop-tail, RED, CoDel,
//! PIE, a step marking threshold, DualPI2) and served (one FIFO, or fair
//! or weighted queueing by classes).
//!
//! **ECN.** RED, CoDel and PIE take `ecn=true` (default false): where the
//! AQM would drop an ECN-capable packet (ECT(0), ECT(1) or CE) it sets CE
//! and keeps it instead, as RFC 3168 §7 and Linux's `ecn` option do;
//! Not-ECT packets are dropped as before, and a full queue drops
//! whatever arrives. `step` marks only (DCTCP's K), and DualPI2 (RFC
//! 9332) classifies and marks by codepoint of its own accord.

use super::units::{format_duration_ns, parse_duration_ns, parse_size_bytes};
use super::{err, key_values, LinkError};

/// RED, with ns-2's parameter names and defaults (Floyd & Jacobson 1993;
/// ns-2 `queue/red.cc`): thresholds in packets of `mean_pktsize` bytes.
///
/// Two ways to give it:
///
/// - explicit thresholds and weight (`red:min_th=5,max_th=15,...`), with
///   the defaults below, which are the fixed values ns-2 shipped before
///   2001 (`thresh_ 5`, `maxthresh_ 15`, `q_weight_ 0.002`, `linterm_ 10`)
///   and a packet-counted queue;
/// - `red:auto=true`: ns-2's automatic configuration, its default since
///   12/29/2001 (ns-2.35 `tcl/lib/ns-default.tcl`: `thresh_ 0`,
///   `maxthresh_ 0`, `q_weight_ -1`), where the thresholds and the weight
///   follow from the link's rate and delay ([`RedParams::resolved`]), with
///   the rest of ns-2.35's defaults: `mean_pktsize_ 500`, `targetdelay_
///   0.005`, `linterm_ 10`, `gentle_ true`, `wait_ true`, and the queue
///   measured in bytes (`queue_in_bytes_ true`, `bytes_ true`, defaults
///   since 10/11/2004).
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
    /// ns-2 `wait_`: wait between drops. The probability a packet is
    /// dropped after `count` undropped arrivals is 0 while `count·pb < 1`,
    /// then `pb/(2 − count·pb)`, then 1 (`REDQueue::modify_p`): gaps
    /// between drops spread over `1/pb … 2/pb` instead of `1 … 1/pb`.
    pub wait: bool,
    /// ns-2 `queue_in_bytes_` with `bytes_`: the queue (and so the
    /// average) is counted in bytes, in units of `mean_pktsize`, `count`
    /// is the bytes since the last drop over `mean_pktsize`, and a packet's
    /// drop probability is scaled by its size over `mean_pktsize`.
    pub bytes: bool,
    /// Automatic thresholds and weight from the link (ns-2 `thresh_ 0`,
    /// `maxthresh_ 0`, `q_weight_ -1`), with this target queueing delay
    /// (ns-2 `targetdelay_`), ns; `min_th`, `max_th` and `wq` are then
    /// derived by [`RedParams::resolved`] when the link is built.
    pub auto_target_ns: Option<u64>,
    /// Mark ECN-capable packets CE instead of dropping them early (ns-2
    /// `setbit_`): only the unforced, probabilistic drops become marks;
    /// a forced drop (the average above `max_th`, or `2·max_th` with
    /// gentle) stays a drop, as in ns-2 and in Linux's `red ecn harddrop`.
    pub ecn: bool,
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
            wait: false,
            bytes: false,
            auto_target_ns: None,
            ecn: false,
        }
    }
}

impl RedParams {
    /// ns-2.35's default RED (`tcl/lib/ns-default.tcl`): automatic
    /// thresholds and weight for a 5 ms target delay, `mean_pktsize_ 500`,
    /// `linterm_ 10`, gentle, `wait_`, queue in bytes.
    pub fn ns2_auto() -> RedParams {
        RedParams {
            mean_pktsize: 500,
            wait: true,
            bytes: true,
            auto_target_ns: Some(Self::NS2_TARGET_DELAY_NS),
            ..RedParams::default()
        }
    }

    /// ns-2's `targetdelay_` default (`tcl/lib/ns-default.tcl`): 5 ms.
    pub const NS2_TARGET_DELAY_NS: u64 = 5_000_000;

    /// The concrete parameters on a link of `rate_bps` whose one-way
    /// propagation delay is `delay_ns`: unchanged unless automatic, else
    /// as ns-2.35's `REDQueue::initialize_params` (`queue/red.cc`) derives
    /// them, with `ptc = rate / (8·mean_pktsize)` packets per second:
    ///
    /// - `min_th = max(5, targetdelay·ptc / 2)` (`thresh_ 0`);
    /// - `max_th = 3·min_th` (`maxthresh_ 0`);
    /// - `wq = 1 − exp(−1 / (10·rtt·ptc))` with `rtt = max(0.1 s,
    ///   3·(delay + 1/ptc))` (`q_weight_ -1`: the weight's time constant is
    ///   ten round trips, a round trip assumed to be three times the link's
    ///   delay and transmission time, and at least 100 ms).
    ///
    /// ns-2 takes `delay` from the link the queue feeds (`LinkDelay`, in
    /// `REDQueue::command("link")`); here it is the direction's one-way
    /// delay. It matters only above about 33 ms, where the round trip
    /// estimate leaves its 100 ms floor.
    pub fn resolved(&self, rate_bps: f64, delay_ns: u64) -> RedParams {
        let Some(target_ns) = self.auto_target_ns else {
            return *self;
        };
        let ptc = rate_bps / (8.0 * self.mean_pktsize as f64);
        let min_th = (target_ns as f64 / 1e9 * ptc / 2.0).max(5.0);
        let rtt = (3.0 * (delay_ns as f64 / 1e9 + 1.0 / ptc)).max(0.1);
        RedParams {
            min_th,
            max_th: 3.0 * min_th,
            wq: 1.0 - (-1.0 / (10.0 * rtt * ptc)).exp(),
            ..*self
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
    /// Mark ECN-capable packets CE instead of dropping them (RFC 8289
    /// §5.3 hands this choice to the implementation; Linux `codel ecn`,
    /// the default of `fq_codel`): the mark takes the drop's place in
    /// the control law, and the marked packet is sent.
    pub ecn: bool,
    /// Linux's `ce_threshold`: also mark every ECN-capable packet whose
    /// sojourn time exceeds this (a step threshold on delay, for DCTCP-
    /// style senders), whatever `ecn` says. None: off.
    pub ce_threshold_ns: Option<u64>,
}

impl Default for CoDelParams {
    fn default() -> Self {
        CoDelParams {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            ecn: false,
            ce_threshold_ns: None,
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
/// | `ecn=false`         | §5.1 ECN      | `ecn` when true, else `noecn`: ECN-capable packets are marked instead of dropped while p ≤ 10 % |
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
    /// Mark ECN-capable packets CE instead of dropping them early, while
    /// the drop probability is at most 10 % (RFC 8033 §5.1's
    /// `mark_ecnth`, Linux `pie ecn`); above it they are dropped too.
    pub ecn: bool,
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
            ecn: false,
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
    /// A step marking threshold (DCTCP's K): an ECN-capable arrival is
    /// marked CE when the queue waiting ahead of it (the packet on the
    /// wire not counted) exceeds it; nothing is dropped early.
    Step(StepParams),
    /// DualPI2 (RFC 9332): an L queue and a classic queue, coupled.
    DualPi2(DualPi2Params),
}

impl Aqm {
    const ALLOWED: &'static str = "droptail, red[:min_th=5,max_th=15,max_p=0.1,wq=0.002,gentle=true,mean_pktsize=1000,wait=false,bytes=false,ecn=false] or red:auto=true[,target_delay=5ms,max_p=0.1,gentle=true,mean_pktsize=500,wait=true,bytes=true,ecn=false], codel[:target=5ms,interval=100ms,ecn=false,ce_threshold=1ms], pie[:target=15ms,tupdate=15ms,alpha=0.125,beta=1.25,max_burst=150ms,bytemode=false,ecn=false,dq_rate_estimator=false], step[:threshold=1ms] (or 20pkt, 30kb) or dualpi2[:target=15ms,tupdate=16ms,alpha=0.16,beta=3.2,k=2,l_thresh=1ms,l_range=0us,l_min_qlen=1,tshift=30ms]";

    pub(super) fn parse(field: &str, s: &str) -> Result<Aqm, LinkError> {
        let t = s.trim();
        let (name, rest) = t.split_once(':').unwrap_or((t, ""));
        match name.to_ascii_lowercase().as_str() {
            "droptail" | "drop-tail" | "fifo" if rest.is_empty() => Ok(Aqm::DropTail),
            "red" => Ok(Aqm::Red(RedParams::parse(field, s, rest)?)),
            "codel" => Ok(Aqm::CoDel(CoDelParams::parse(field, s, rest)?)),
            "pie" => Ok(Aqm::Pie(PieParams::parse(field, rest)?)),
            "step" => Ok(Aqm::Step(StepParams::parse(field, rest)?)),
            "dualpi2" => Ok(Aqm::DualPi2(DualPi2Params::parse(field, s, rest)?)),
            _ => Err(err(field, format!("`{s}` is not one of {}", Self::ALLOWED))),
        }
    }

    /// The spec that parses back to this management.
    pub fn to_spec(self) -> String {
        match self {
            Aqm::DropTail => "droptail".into(),
            Aqm::Red(p) => p.to_spec(),
            Aqm::CoDel(p) => {
                let mut s = format!(
                    "codel:target={},interval={}",
                    format_duration_ns(p.target_ns),
                    format_duration_ns(p.interval_ns)
                );
                if p.ecn {
                    s.push_str(",ecn=true");
                }
                if let Some(t) = p.ce_threshold_ns {
                    s.push_str(&format!(",ce_threshold={}", format_duration_ns(t)));
                }
                s
            }
            Aqm::Pie(p) => format!(
                "pie:target={},tupdate={},alpha={},beta={},max_burst={},bytemode={}{}",
                format_duration_ns(p.target_ns),
                format_duration_ns(p.tupdate_ns),
                p.alpha,
                p.beta,
                format_duration_ns(p.max_burst_ns),
                p.bytemode,
                if p.ecn { ",ecn=true" } else { "" }
            ),
            Aqm::Step(p) => format!("step:threshold={}", p.threshold.to_spec()),
            Aqm::DualPi2(p) => p.to_spec(),
        }
    }

    /// The management a link of `rate_bps` and one-way `delay_ns` runs:
    /// automatic RED resolved to its thresholds and weight
    /// ([`RedParams::resolved`]), anything else as it is.
    pub fn resolved(&self, rate_bps: f64, delay_ns: u64) -> Aqm {
        match self {
            Aqm::Red(p) => Aqm::Red(p.resolved(rate_bps, delay_ns)),
            other => *other,
        }
    }

    /// The name alone (`droptail`, `red`, `codel`, `pie`, `step`,
    /// `dualpi2`).
    pub fn name(&self) -> &'static str {
        match self {
            Aqm::DropTail => "droptail",
            Aqm::Red(_) => "red",
            Aqm::CoDel(_) => "codel",
            Aqm::Pie(_) => "pie",
            Aqm::Step(_) => "step",
            Aqm::DualPi2(_) => "dualpi2",
        }
    }

    /// True if it may set CE on packets (`ecn=true`, CoDel's
    /// `ce_threshold`, `step`, `dualpi2`).
    pub fn marks(&self) -> bool {
        match self {
            Aqm::DropTail => false,
            Aqm::Red(p) => p.ecn,
            Aqm::CoDel(p) => p.ecn || p.ce_threshold_ns.is_some(),
            Aqm::Pie(p) => p.ecn,
            Aqm::Step(_) | Aqm::DualPi2(_) => true,
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
                "ecn" => p.ecn = flag()?,
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

impl RedParams {
    /// The spec that parses back to these parameters.
    fn to_spec(self) -> String {
        let flags = |p: &RedParams| {
            let mut f = String::new();
            if p.wait {
                f.push_str(",wait=true");
            }
            if p.bytes {
                f.push_str(",bytes=true");
            }
            f
        };
        let ecn = if self.ecn { ",ecn=true" } else { "" };
        match self.auto_target_ns {
            Some(t) => format!(
                "red:auto=true,target_delay={},max_p={},gentle={},mean_pktsize={},wait={},bytes={}{ecn}",
                format_duration_ns(t),
                self.max_p,
                self.gentle,
                self.mean_pktsize,
                self.wait,
                self.bytes
            ),
            None => format!(
                "red:min_th={},max_th={},max_p={},wq={},gentle={},mean_pktsize={}{}{ecn}",
                self.min_th,
                self.max_th,
                self.max_p,
                self.wq,
                self.gentle,
                self.mean_pktsize,
                flags(&self)
            ),
        }
    }

    /// Parses the `k=v,...` after `red:`; `s` is the whole spec, for errors.
    /// `auto=true` starts from [`RedParams::ns2_auto`] and refuses the
    /// fields it derives (`min_th`, `max_th`, `wq`); `target_delay` needs it.
    fn parse(field: &str, s: &str, rest: &str) -> Result<RedParams, LinkError> {
        let keys = [
            "min_th",
            "max_th",
            "max_p",
            "wq",
            "gentle",
            "mean_pktsize",
            "wait",
            "bytes",
            "auto",
            "target_delay",
            "ecn",
        ];
        let kv = key_values(field, rest, &keys)?;
        let flag = |k: &str, v: &str| -> Result<bool, LinkError> {
            match v.to_ascii_lowercase().as_str() {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(err(field, format!("`{k}={v}`: {k} must be true or false"))),
            }
        };
        let auto = match kv.iter().find(|(k, _)| k == "auto") {
            Some((k, v)) => flag(k, v)?,
            None => false,
        };
        let mut p = if auto {
            RedParams::ns2_auto()
        } else {
            RedParams::default()
        };
        for (k, v) in &kv {
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
                "min_th" | "max_th" | "wq" if auto => {
                    return Err(err(
                        field,
                        format!("`{s}`: {k} is derived from the link's rate and delay with auto=true (ns-2's automatic RED); give either auto=true or explicit min_th, max_th and wq, not both"),
                    ))
                }
                "min_th" => p.min_th = num()?,
                "max_th" => p.max_th = num()?,
                "max_p" => p.max_p = num()?,
                "wq" => p.wq = num()?,
                "mean_pktsize" => p.mean_pktsize = num()?.round() as u32,
                "gentle" => p.gentle = flag(k, v)?,
                "wait" => p.wait = flag(k, v)?,
                "bytes" => p.bytes = flag(k, v)?,
                "ecn" => p.ecn = flag(k, v)?,
                "auto" => {}
                _ => {
                    if !auto {
                        return Err(err(
                            field,
                            format!("`{s}`: target_delay sets the delay automatic RED aims its thresholds at and needs auto=true"),
                        ));
                    }
                    let d = parse_duration_ns(v)
                        .filter(|&d| (1000..=10_000_000_000).contains(&d))
                        .ok_or_else(|| {
                            err(
                                field,
                                format!("`target_delay={v}`: target_delay must be a time from 1us to 10s, such as 5ms"),
                            )
                        })?;
                    p.auto_target_ns = Some(d);
                }
            }
        }
        if !auto && (p.max_th <= p.min_th || p.min_th <= 0.0) {
            return Err(err(
                field,
                format!(
                    "`{s}`: RED needs 0 < min_th < max_th (packets), got min_th={} max_th={}",
                    p.min_th, p.max_th
                ),
            ));
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
        Ok(p)
    }
}

impl CoDelParams {
    /// Parses the `k=v,...` after `codel:`; `s` is the whole spec, for errors.
    fn parse(field: &str, s: &str, rest: &str) -> Result<CoDelParams, LinkError> {
        let mut p = CoDelParams::default();
        for (k, v) in key_values(field, rest, &["target", "interval", "ecn", "ce_threshold"])? {
            if k == "ecn" {
                p.ecn = parse_flag(field, &k, &v)?;
                continue;
            }
            if k == "ce_threshold" {
                // tc takes it in whole microseconds.
                let d = parse_duration_ns(&v)
                    .filter(|&d| (1000..=10_000_000_000).contains(&d) && d % 1000 == 0)
                    .ok_or_else(|| {
                        err(
                            field,
                            format!("`{k}={v}`: {k} must be a time from 1us to 10s in whole microseconds, such as 1ms"),
                        )
                    })?;
                p.ce_threshold_ns = Some(d);
                continue;
            }
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

    pub(super) fn parse(field: &str, s: &str) -> Result<Sched, LinkError> {
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

/// `true`/`1` or `false`/`0`, else an error naming the key.
fn parse_flag(field: &str, k: &str, v: &str) -> Result<bool, LinkError> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(err(field, format!("`{k}={v}`: {k} must be true or false"))),
    }
}

/// Where a step threshold lies: the queue a packet finds on arrival (in
/// packets or bytes, decided at enqueue, as DCTCP's switches mark), or
/// its sojourn time (decided at dequeue, as Linux's `ce_threshold`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepThreshold {
    /// Mark an arrival that finds more than this many packets waiting
    /// (itself and the one on the wire not counted).
    Packets(u64),
    /// Mark an arrival that finds more than this many bytes waiting.
    Bytes(u64),
    /// Mark a departure that waited more than this, ns.
    Time(u64),
}

impl StepThreshold {
    fn to_spec(self) -> String {
        match self {
            StepThreshold::Packets(n) => format!("{n}pkt"),
            StepThreshold::Bytes(b) => format!("{b}b"),
            StepThreshold::Time(t) => format_duration_ns(t),
        }
    }
}

/// A step marking threshold, DCTCP's K (Alizadeh et al., SIGCOMM 2010,
/// §3.1: "mark arriving packets if the queue occupancy is greater than
/// K"). It marks ECN-capable packets CE and never drops: Not-ECT packets
/// meet a drop-tail queue (the link's `queue` limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepParams {
    /// The threshold (default 1 ms of sojourn time, the L4S step of
    /// DualPI2's L queue).
    pub threshold: StepThreshold,
}

impl Default for StepParams {
    fn default() -> Self {
        StepParams {
            threshold: StepThreshold::Time(1_000_000),
        }
    }
}

impl StepParams {
    /// Parses the `k=v,...` after `step:`.
    fn parse(field: &str, rest: &str) -> Result<StepParams, LinkError> {
        let mut p = StepParams::default();
        for (k, v) in key_values(field, rest, &["threshold"])? {
            let bad = || {
                err(
                    field,
                    format!("`{k}={v}`: {k} must be packets from 1 to 1000000 (20pkt), bytes from 1b to 1gb (30kb) or a time from 1us to 10s in whole microseconds (1ms)"),
                )
            };
            let t = v.trim().to_ascii_lowercase();
            let num_end = t
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(t.len());
            let unit = &t[num_end..];
            p.threshold = if ["pkt", "pkts", "p", "packet", "packets"].contains(&unit) {
                let n: f64 = t[..num_end].parse().map_err(|_| bad())?;
                if !(1.0..=1e6).contains(&n) || n.fract() != 0.0 {
                    return Err(bad());
                }
                StepThreshold::Packets(n as u64)
            } else if let Some(d) = parse_duration_ns(&t) {
                if !(1000..=10_000_000_000).contains(&d) || d % 1000 != 0 {
                    return Err(bad());
                }
                StepThreshold::Time(d)
            } else if let Some(b) = parse_size_bytes(&t).filter(|_| !unit.is_empty()) {
                if !(1..=1_000_000_000).contains(&b) {
                    return Err(bad());
                }
                StepThreshold::Bytes(b)
            } else {
                return Err(bad());
            };
        }
        Ok(p)
    }
}

/// DualPI2, the DualQ Coupled AQM of RFC 9332 with a PI2 base AQM.
///
/// - Classification (§4.1, RFC 9331 §5.1): ECT(1) and CE go to the L
///   queue, Not-ECT and ECT(0) to the classic (C) queue.
/// - The base probability `p'` comes from a PI controller on the greater
///   of the two queues' delays (their heads' sojourn times), updated every
///   `tupdate`: `p' += alpha·(qdelay − target) + beta·(qdelay −
///   qdelay_old)` (delays in seconds), kept in [0, 1].
/// - C queue: drop (Not-ECT) or mark (ECT(0)) with `p_C = p'²`; in
///   overload (below) ECT(0) is dropped too.
/// - L queue: mark with `max(p_L', p_CL)`, where `p_CL = k·p'` is the
///   coupled probability and `p_L'` the native AQM on the L packet's
///   sojourn time: a ramp from `l_thresh` to `l_thresh + l_range`, a step
///   at `l_thresh` when `l_range = 0`; no native mark while the L queue
///   holds `l_min_qlen` packets or fewer (RFC 9332 Appendix A.1's
///   `Th_len`; the packet being dequeued counts). When `p_CL` saturates
///   (≥ 1) the link is overloaded: ECN is disabled and both queues drop
///   their ECN-capable packets with `p_C` (§4.2.3); L marks the rest.
/// - Scheduler: time-shifted FIFO between the two heads: the L head goes
///   first unless the C head has waited `tshift` longer.
/// - One shared limit: the link's `queue`.
///
/// The defaults are those Linux's `dualpi2` qdisc ships: target 15 ms,
/// Tupdate 16 ms, alpha 0.16 Hz, beta 3.2 Hz, k = 2, an L step at 1 ms
/// (RFC 9332 Appendix A has 15 ms, 0.15 Hz, 3 Hz and a ramp from 800 µs
/// over 400 µs); `l_min_qlen` 1 is Appendix A's `Th_len` (Linux's is 0).
/// `tshift` is this model's choice (the RFC leaves the scheduler's
/// parameter open): 2·target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualPi2Params {
    /// The C queue's target delay, ns (15 ms).
    pub target_ns: u64,
    /// How often p' is updated, ns (16 ms).
    pub tupdate_ns: u64,
    /// Integral gain, Hz (0.16).
    pub alpha: f64,
    /// Proportional gain, Hz (3.2).
    pub beta: f64,
    /// Coupling factor k (2).
    pub k: f64,
    /// Native L AQM: its threshold on the L sojourn time, ns (1 ms).
    pub l_thresh_ns: u64,
    /// Native L AQM: the ramp's width, ns (0: a step).
    pub l_range_ns: u64,
    /// No native L marking while the L queue holds at most this many
    /// packets (1).
    pub l_min_qlen: u64,
    /// The time-shifted FIFO's shift, ns (30 ms).
    pub tshift_ns: u64,
}

impl Default for DualPi2Params {
    fn default() -> Self {
        DualPi2Params {
            target_ns: 15_000_000,
            tupdate_ns: 16_000_000,
            alpha: 0.16,
            beta: 3.2,
            k: 2.0,
            l_thresh_ns: 1_000_000,
            l_range_ns: 0,
            l_min_qlen: 1,
            tshift_ns: 30_000_000,
        }
    }
}

impl DualPi2Params {
    /// The spec that parses back to these parameters.
    fn to_spec(self) -> String {
        format!(
            "dualpi2:target={},tupdate={},alpha={},beta={},k={},l_thresh={},l_range={},l_min_qlen={},tshift={}",
            format_duration_ns(self.target_ns),
            format_duration_ns(self.tupdate_ns),
            self.alpha,
            self.beta,
            self.k,
            format_duration_ns(self.l_thresh_ns),
            format_duration_ns(self.l_range_ns),
            self.l_min_qlen,
            format_duration_ns(self.tshift_ns)
        )
    }

    /// Parses the `k=v,...` after `dualpi2:`; `s` is the whole spec.
    fn parse(field: &str, s: &str, rest: &str) -> Result<DualPi2Params, LinkError> {
        let mut p = DualPi2Params::default();
        let keys = [
            "target",
            "tupdate",
            "alpha",
            "beta",
            "k",
            "l_thresh",
            "l_range",
            "l_min_qlen",
            "tshift",
        ];
        for (k, v) in key_values(field, rest, &keys)? {
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
            let num = |lo: f64, hi: f64| -> Result<f64, LinkError> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && (lo..=hi).contains(x) && *x > 0.0)
                    .ok_or_else(|| {
                        err(
                            field,
                            format!("`{k}={v}`: {k} must be a number above {lo} and at most {hi}"),
                        )
                    })
            };
            match k.as_str() {
                "target" => p.target_ns = time(1000, "1us")?,
                "tupdate" => p.tupdate_ns = time(1_000_000, "1ms")?,
                "alpha" => p.alpha = num(0.0, 100.0)?,
                "beta" => p.beta = num(0.0, 100.0)?,
                "k" => p.k = num(0.0, 100.0)?,
                "l_thresh" => p.l_thresh_ns = time(1000, "1us")?,
                "l_range" => p.l_range_ns = time(0, "0us")?,
                "tshift" => p.tshift_ns = time(0, "0us")?,
                _ => {
                    p.l_min_qlen = v
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n <= 1_000_000)
                        .ok_or_else(|| {
                            err(
                                field,
                                format!("`{k}={v}`: {k} must be a whole number of packets from 0 to 1000000"),
                            )
                        })?
                }
            }
        }
        if p.k < 1.0 {
            return Err(err(
                field,
                format!(
                    "`{s}`: the coupling factor k must be at least 1 (RFC 9332 §2.1 recommends 2)"
                ),
            ));
        }
        Ok(p)
    }
}
