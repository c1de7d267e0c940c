//! The `tc` command lines of a kernel link, built from its description:
//! the endpoints' segmenter and netem, the router's shaper (`tbf`, or
//! `htb` with its class and leaf AQM) and policer. Pure functions of the
//! link; [`super`] runs them, [`super::changes`] runs them again at a
//! scheduled change's time.

use crate::link::units::format_duration_ns;
use crate::link::{
    Aggregation, Aqm, Dir, DirectionSpec, LinkSpec, LossModel, QueueLimit, Sched, StepThreshold,
};

pub(crate) fn pct(p: f64) -> String {
    format!("{}%", (p * 100.0 * 1e6).round() / 1e6)
}

pub(crate) fn tc_rate(bps: f64) -> String {
    format!("{}bit", bps.round() as u64)
}
/// True if direction `d` needs netem at all.
pub fn needs_netem(d: &DirectionSpec) -> bool {
    d.delay_ns > 0
        || d.jitter_ns > 0
        || d.loss != LossModel::None
        || d.duplicate > 0.0
        || d.reorder > 0.0
}

/// netem's own `rate` when it is there only to keep jittered packets in
/// order.
pub const NO_REORDER_RATE: &str = "100gbit";

/// The largest packet an endpoint's qdisc sees whole: the veth's MTU
/// (veth's default, 1500) plus the 14-byte Ethernet header.
pub const SEGMENTER_MAX_PACKET: u64 = 1500 + 14;

/// The segmenting tbf's rate, 10 Tbit/s: 1.2 ns per 1514 bytes, so it
/// never holds a packet back.
pub const SEGMENTER_RATE: &str = "10000000000000bit";

/// The root qdisc under which netem goes on endpoint `dev` in `ns`: a `tbf`
/// whose only job is to segment. tbf cannot send a packet larger than its
/// bucket, so on enqueue it splits a GSO packet longer than that into its
/// segments (`tbf_segment`) and enqueues each into its child, netem (see
/// [`netem_args`]); with the bucket at [`SEGMENTER_MAX_PACKET`] every
/// packet of more than one full-size datagram is split, and any single
/// packet the device can send fits. Its rate is far above any link's. (A
/// GSO packet of small datagrams that fits in 1514 bytes passes whole; the
/// veth's `gso_max_segs` splits it after netem, before the router.)
pub fn segmenter_args(ns: &str, dev: &str) -> Vec<String> {
    let max = SEGMENTER_MAX_PACKET.to_string();
    [
        "-n",
        ns,
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "handle",
        "1:",
        "tbf",
        "rate",
        SEGMENTER_RATE,
        "burst",
        &max,
        "limit",
        &max,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// netem's `limit` in packets: room for the whole delay line at the
/// direction's rate with packets as small as 64 bytes, at least 1000.
pub fn netem_limit(d: &DirectionSpec) -> u64 {
    packets_held(d.rate_bps, d.delay_ns + 4 * d.jitter_ns)
}

/// A netem `limit` for what arrives at `rate_bps` in `ns`, counted in
/// 64-byte packets (the smallest), at least netem's default of 1000.
fn packets_held(rate_bps: f64, ns: u64) -> u64 {
    let secs = ns as f64 / 1e9;
    ((rate_bps / 8.0 * secs / 64.0).ceil() as u64).max(1000)
}

/// The `tc` arguments for direction `d`'s netem qdisc on `dev` in `ns`,
/// the child of the [`segmenter_args`] tbf (installed first).
pub fn netem_args(ns: &str, dev: &str, d: &DirectionSpec, seed: Option<u64>) -> Vec<String> {
    let mut a: Vec<String> = [
        "-n", ns, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", "netem",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(["limit".into(), netem_limit(d).to_string()]);
    a.extend(["delay".into(), format_duration_ns(d.delay_ns)]);
    if d.jitter_ns > 0 {
        a.push(format_duration_ns(d.jitter_ns));
        if d.jitter_distribution != crate::link::JitterDistribution::Uniform {
            a.extend(["distribution".into(), d.jitter_distribution.as_str().into()]);
        }
    }
    if d.jitter_ns > 0 && d.reorder == 0.0 {
        // Jitter alone makes netem reorder (each packet's delay is drawn
        // independently and its queue is sorted by release time), which
        // cuts QUIC's goodput sharply. With a `rate`, netem releases each
        // packet no earlier than the one ahead of it: the emulator's jitter
        // exactly, at a rate far above any link's (0.1 ns per 1500 bytes).
        a.extend(["rate".into(), NO_REORDER_RATE.into()]);
    }
    match d.loss {
        LossModel::None => {}
        LossModel::Random(p) => a.extend(["loss".into(), "random".into(), pct(p)]),
        LossModel::GilbertElliott { p, r, bad, good } => a.extend([
            "loss".into(),
            "gemodel".into(),
            pct(p),
            pct(r),
            pct(bad),
            pct(good),
        ]),
    }
    if d.duplicate > 0.0 {
        a.extend(["duplicate".into(), pct(d.duplicate)]);
    }
    if d.reorder > 0.0 {
        a.extend(["reorder".into(), pct(d.reorder)]);
    }
    if let Some(s) = seed {
        a.extend(["seed".into(), s.to_string()]);
    }
    a
}

/// The `tc` arguments for a direction's aggregation `a` on `dev` in `ns`,
/// the device its packets leave by once they have crossed the link (the
/// guest router's forwarder towards the host): a root netem with `slot`,
/// which holds what it gets and releases it when a slot begins, at most
/// `burst` per slot. Slots of exactly `period` (`slot P P`). The kernel
/// starts the next slot `period` after the first packet that comes once
/// a slot has begun, so after an idle gap a packet waits a whole period
/// where the link model's fixed grid holds it up to one; on a busy link
/// the two agree. A byte `burst` counts Ethernet frames here, UDP
/// payload in the link model. `limit` holds a period's worth of 64-byte
/// packets at `rate_bps` (at least 1000).
pub fn aggregation_args(ns: &str, dev: &str, a: &Aggregation, rate_bps: f64) -> Vec<String> {
    let period = format_duration_ns(a.period_ns);
    let limit = packets_held(rate_bps, a.period_ns);
    let mut v: Vec<String> = [
        "-n", ns, "qdisc", "replace", "dev", dev, "root", "netem", "limit",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(limit.to_string());
    v.extend(["slot".into(), period.clone(), period]);
    match a.burst {
        Some(QueueLimit::Packets(n)) => v.extend(["packets".into(), n.to_string()]),
        Some(QueueLimit::Bytes(n)) => v.extend(["bytes".into(), n.to_string()]),
        Some(QueueLimit::Bdp(_)) | None => {}
    }
    v
}

/// The `tc` commands for a token-bucket policer of `rate_bps` and `burst`
/// bytes on what enters `dev` in `ns` (the link's `policer`): an
/// `ingress` qdisc and a filter matching every packet (`u32 match u32 0
/// 0`) whose `police` action drops what exceeds the bucket and passes
/// the rest on to the router, and so to the bottleneck's queue. It counts
/// the Ethernet frame, as the shaper does, through `overhead 14`: at
/// ingress the kernel counts a packet from its IP header (a 10 Mbit/s
/// policer in the guest passed 10.61 Mbit/s of frames of 200-byte
/// datagrams and 10.10 of 1350-byte ones without it, 10.00 and 10.00
/// with it, `cclab link measure`).
pub fn policer_args(ns: &str, dev: &str, rate_bps: f64, burst: u64) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    vec![
        s(&["-n", ns, "qdisc", "replace", "dev", dev, "ingress"]),
        s(&[
            "-n",
            ns,
            "filter",
            "replace",
            "dev",
            dev,
            "ingress",
            "prio",
            "1",
            "u32",
            "match",
            "u32",
            "0",
            "0",
            "action",
            "police",
            "rate",
            &tc_rate(rate_bps),
            "burst",
            &format!("{burst}b"),
            "overhead",
            "14",
            "conform-exceed",
            "drop/ok",
        ]),
    ]
}

/// Linux RED's EWMA weight is 2^-Wlog, and tc derives Wlog from `burst`
/// (the smallest Wlog whose weight lets an idle queue absorb `burst`
/// packets before the average reaches `min`). Returns the smallest burst
/// for which tc picks the power of two nearest to `wq`.
pub fn red_burst(min_bytes: f64, avpkt: f64, wq: f64) -> u32 {
    let want = (1.0 / wq).log2().round().clamp(1.0, 31.0) as i32;
    let wlog_for = |burst: f64| -> Option<i32> {
        let a = burst + 1.0 - min_bytes / avpkt;
        if a < 1.0 {
            return None;
        }
        (1..32).find(|&w| {
            let wgt = 1.0 / (1u64 << w) as f64;
            a <= (1.0 - (1.0 - wgt).powf(burst)) / wgt
        })
    };
    let first = (min_bytes / avpkt).ceil().max(1.0) as u32;
    (first..first + 100_000)
        .find(|&b| wlog_for(b as f64) == Some(want))
        .unwrap_or(first)
}

/// How much of the rate, in seconds, the shaper's token bucket holds.
///
/// The shaper releases a waiting packet from a timer; if the timer fires
/// late, the tokens that came in meanwhile are kept only up to the bucket's
/// depth, and the rest of the link's capacity is lost. On a host kernel
/// timers are precise and 1 ms is plenty. In a guest they are not: in
/// user-mode Linux on a loaded 2-core host, a 20 Mbit/s tbf delivered 14.4
/// Mbit/s with 1 ms, 15.3 with 4 ms and 19.93 (-0.3%) with 10 ms. So 10 ms
/// inside `cclab vm` (`CCLAB_IN_VM`), which lets a bottleneck that was idle
/// send up to 10 ms of its rate back to back; `CCLAB_SHAPER_BURST_MS`
/// overrides both. The tc lines, with the depth, are in each run's
/// metadata.
pub fn shaper_burst_s() -> f64 {
    let ms = std::env::var("CCLAB_SHAPER_BURST_MS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(if std::env::var_os("CCLAB_IN_VM").is_some() {
            10.0
        } else {
            1.0
        });
    ms / 1e3
}

/// The `tc` commands (argument lists) for direction `dir`'s bottleneck on
/// the router's egress `dev` in `ns`.
pub fn shaper_args(ns: &str, dev: &str, link: &LinkSpec, dir: Dir, mtu: u64) -> Vec<Vec<String>> {
    shaper_args_for(ns, dev, link.dir(dir), link.queue_bytes(dir, mtu), mtu)
}

/// [`shaper_args`] for a direction `d` whose queue holds `limit` bytes:
/// `tbf` at the root, or `htb` at the root, its class and the leaf.
pub(crate) fn shaper_args_for(
    ns: &str,
    dev: &str,
    d: &DirectionSpec,
    limit: u64,
    mtu: u64,
) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let rate = tc_rate(d.rate_bps);
    // Bucket depth: 1 ms of the rate (more in a guest, see
    // `shaper_burst_s`), at least two packets.
    let burst = ((d.rate_bps / 8.0 * shaper_burst_s()) as u64)
        .max(2 * mtu)
        .to_string();
    let base = s(&[
        "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:",
    ]);
    if d.aqm == Aqm::DropTail && !matches!(d.queue, QueueLimit::Packets(_)) {
        let mut a = base;
        a.extend(s(&[
            "tbf",
            "rate",
            &rate,
            "burst",
            &burst,
            "limit",
            &limit.to_string(),
        ]));
        return vec![a];
    }
    let mut root = base;
    root.extend(s(&["htb", "default", "1"]));
    let class = s(&[
        "-n", ns, "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
        &rate, "ceil", &rate, "burst", &burst, "cburst", &burst,
    ]);
    let mut leaf = s(&[
        "-n", ns, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:",
    ]);
    leaf.extend(leaf_qdisc(d, limit, mtu, &rate));
    vec![root, class, leaf]
}

/// The bottleneck's leaf qdisc under the htb class: its kind and options
/// (`pfifo`/`bfifo`, `red`, `codel`, `fq_codel` or `pie`).
pub(crate) fn leaf_qdisc(d: &DirectionSpec, limit: u64, mtu: u64, rate: &str) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let mut out = Vec::new();
    match (d.aqm, d.queue) {
        (Aqm::DropTail, QueueLimit::Packets(p)) => {
            out.extend(s(&["pfifo", "limit", &p.to_string()]))
        }
        (Aqm::DropTail, _) => out.extend(s(&["bfifo", "limit", &limit.to_string()])),
        (Aqm::Red(p), _) => {
            // Automatic RED (`red:auto=true`) becomes the thresholds and
            // weight ns-2 would derive for this rate and delay; the
            // kernel's RED counts bytes (`avpkt` = mean_pktsize) as ns-2's
            // byte mode does, but has neither `wait` nor the per-size
            // probability of `bytes` (nor gentle): see the module docs.
            let p = p.resolved(d.rate_bps, d.delay_ns);
            let avpkt = p.mean_pktsize as f64;
            let min = p.min_th * avpkt;
            let max = p.max_th * avpkt;
            out.extend(s(&[
                "red",
                "limit",
                &limit.max(max as u64 * 2).to_string(),
                "min",
                &(min as u64).to_string(),
                "max",
                &(max as u64).to_string(),
                "avpkt",
                &(avpkt as u64).to_string(),
                "burst",
                &red_burst(min, avpkt, p.wq).to_string(),
                "probability",
                &p.max_p.to_string(),
                "bandwidth",
                rate,
            ]));
            if p.ecn {
                out.extend(s(&["ecn", "harddrop"]));
            }
        }
        (Aqm::CoDel(c), _) => {
            // With sched = "fq", the kernel's fq_codel: flows hashed by
            // 5-tuple into their own queues, served by deficit round robin
            // one MTU at a time, CoDel on each. It also serves new (sparse)
            // flows first, which the emulator's fq does not; its limit is
            // over all flows.
            let fq = d.sched == Sched::Fq;
            let pkts = (limit / mtu).max(1);
            out.extend(s(&[
                if fq { "fq_codel" } else { "codel" },
                "limit",
                &pkts.to_string(),
                "target",
                &format_duration_ns(c.target_ns),
                "interval",
                &format_duration_ns(c.interval_ns),
            ]));
            if fq {
                out.extend(s(&["quantum", &mtu.to_string()]));
            }
            out.push(if c.ecn { "ecn" } else { "noecn" }.into());
            if let Some(t) = c.ce_threshold_ns {
                out.extend(s(&["ce_threshold", &format_duration_ns(t)]));
            }
        }
        (Aqm::Pie(p), _) => {
            // Linux's pie (RFC 8033): `limit` in packets; `target` and
            // `tupdate` as times (tc sends µs; the kernel rounds tupdate up
            // to whole jiffies); `alpha` and `beta` as integers 0..32 in
            // units of 1/16 (the RFC's 0.125 and 1.25 are tc's 2 and 20);
            // `ecn` or `noecn` as asked; `bytemode` when asked.
            // The burst allowance is fixed at 150 ms in the kernel (setup
            // refuses any other `max_burst`), and the delay comes from
            // per-packet timestamps, the default since Linux 5.1 (older
            // kernels only have the dequeue-rate estimate and no
            // de-randomization).
            let pkts = (limit / mtu).max(1);
            let sixteenths = |x: f64| ((x * 16.0).round() as u32).clamp(1, 32).to_string();
            out.extend(s(&[
                "pie",
                "limit",
                &pkts.to_string(),
                "target",
                &format_duration_ns(p.target_ns),
                "tupdate",
                &format_duration_ns(p.tupdate_ns),
                "alpha",
                &sixteenths(p.alpha),
                "beta",
                &sixteenths(p.beta),
                if p.ecn { "ecn" } else { "noecn" },
            ]));
            if p.bytemode {
                out.push("bytemode".into());
            }
        }
        (Aqm::Step(p), _) => {
            // A time step is the kernel's ce_threshold on a codel that
            // never drops (its target is beyond any sojourn a link's
            // queue reaches); check_link refuses packet and byte steps.
            let pkts = (limit / mtu).max(1);
            let k = match p.threshold {
                StepThreshold::Time(k) => k,
                _ => 0,
            };
            out.extend(s(&[
                "codel",
                "limit",
                &pkts.to_string(),
                "target",
                "1000s",
                "interval",
                "1000s",
                "noecn",
                "ce_threshold",
                &format_duration_ns(k),
            ]));
        }
        (Aqm::DualPi2(p), _) => {
            // Linux's dualpi2 (6.17+): RFC 9332 with the same PI2 gains,
            // coupling and L step; `limit` in packets; drops at dequeue
            // and ECT(1)/CE to the L queue (its defaults, given
            // explicitly). Its scheduler is a weighted round robin
            // (classic_protection 10 %) where the emulator uses a
            // time-shifted FIFO; check_link refuses an L ramp, which the
            // kernel does not have.
            let pkts = (limit / mtu).max(1);
            out.extend(s(&[
                "dualpi2",
                "limit",
                &pkts.to_string(),
                "target",
                &format_duration_ns(p.target_ns),
                "tupdate",
                &format_duration_ns(p.tupdate_ns),
                "alpha",
                &p.alpha.to_string(),
                "beta",
                &p.beta.to_string(),
                "coupling_factor",
                &(p.k.round() as u64).to_string(),
                "step_thresh",
                &format_duration_ns(p.l_thresh_ns),
                "min_qlen_step",
                &p.l_min_qlen.to_string(),
                "drop_dequeue",
                "l4s_ect",
            ]));
        }
    }
    out
}
