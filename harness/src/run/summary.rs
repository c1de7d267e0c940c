//! The last step of a run: repetitions averaged into `summary.json`, with
//! 95% confidence half-widths (Student t).

use std::collections::BTreeMap;

use super::results::{
    BottleneckResult, FlowResult, FlowSummary, LinkResult, LinkSummary, RepResult, RttMs,
    RunSummary, SlowStartMeans,
};
use crate::link::Backend;
use crate::scenario::{FlowSpec, Scenario};

/// Student-t 97.5% quantiles for 1..30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Mean and 95% confidence half-width (Student t) of `xs`.
pub fn mean_ci(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = if n - 1 <= 30 { T975[n - 2] } else { 1.96 };
    (mean, t * (var / n as f64).sqrt())
}

/// [`mean_ci`] of one figure of every item.
fn mean_ci_of<T>(items: &[T], f: impl Fn(&T) -> f64) -> (f64, f64) {
    mean_ci(&items.iter().map(f).collect::<Vec<_>>())
}

/// Named 95% half-widths.
fn ci95<const N: usize>(pairs: [(&str, f64); N]) -> BTreeMap<String, f64> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Averages repetitions into the summary.
pub fn summarize(
    sc: &Scenario,
    backend: Backend,
    status: &str,
    reps: Vec<RepResult>,
) -> RunSummary {
    let nflows = reps.first().map_or(0, |r| r.flows.len());
    let mut flows: Vec<FlowSummary> = (0..nflows).map(|i| flow_summary(&reps, i)).collect();
    let specs = sc.expanded_flows();
    for f in &mut flows {
        f.size_bytes = specs.get(f.index).and_then(|(_, s)| s.size);
    }
    let (bottleneck, uci, qci) = bottleneck_mean(&reps, |r| Some(&r.bottleneck));
    let links = link_means(&reps);
    let steady: Option<Vec<f64>> = reps
        .iter()
        .map(|r| r.bottleneck.utilization_steady)
        .collect();
    let sci = steady.filter(|v| !v.is_empty()).map(|v| mean_ci(&v).1);
    let js: Vec<f64> = reps.iter().filter_map(|r| r.jain_fairness).collect();
    let (jain, jci) = mean_ci(&js);
    RunSummary {
        schema: super::results::SUMMARY_SCHEMA,
        scenario: sc.name.clone(),
        status: status.into(),
        link: LinkSummary {
            backend: backend.as_str().into(),
            rate_bps: sc.link.down.rate_bps,
            rtt_ms: sc.link.rtt_ns() as f64 / 1e6,
            aqm: sc.link.down.aqm.name().into(),
        },
        flows,
        bottleneck,
        jain_fairness: (!js.is_empty()).then_some(jain),
        links,
        fct: fct_classes(&specs, &reps),
        ci95: ci95([
            ("utilization", uci),
            ("queue_delay_ms_mean", qci),
            ("jain_fairness", jci),
        ])
        .into_iter()
        .chain(sci.map(|c| ("utilization_steady".to_string(), c)))
        .collect(),
        repetitions: reps,
    }
}

/// Flow `i` averaged over the repetitions.
fn flow_summary(reps: &[RepResult], i: usize) -> FlowSummary {
    let of = |f: &dyn Fn(&FlowResult) -> f64| -> Vec<f64> {
        reps.iter().filter_map(|r| r.flows.get(i)).map(f).collect()
    };
    let (goodput, gci) = mean_ci(&of(&|f| f.goodput_bps));
    let (bytes, _) = mean_ci(&of(&|f| f.bytes as f64));
    // Null unless every repetition measured its losses.
    let losts: Option<Vec<f64>> = reps
        .iter()
        .filter_map(|r| r.flows.get(i))
        .map(|f| f.lost_packets.map(|l| l as f64))
        .collect();
    let lost = losts.as_deref().map(mean_ci);
    // A TCP flow's retransmissions, likewise.
    let retx: Option<Vec<f64>> = reps
        .iter()
        .filter_map(|r| r.flows.get(i))
        .map(|f| f.retransmitted_packets.map(|l| l as f64))
        .collect();
    let retx = retx.filter(|v| !v.is_empty()).as_deref().map(mean_ci);
    // A multi-request flow's completion time, when every repetition has one.
    let completions: Option<Vec<f64>> = reps
        .iter()
        .filter_map(|r| r.flows.get(i))
        .map(|f| f.completion_s)
        .collect();
    let completion = completions
        .filter(|v| !v.is_empty())
        .as_deref()
        .map(mean_ci);
    let rtts: Vec<&RttMs> = reps
        .iter()
        .filter_map(|r| r.flows.get(i)?.rtt_ms.as_ref())
        .collect();
    let rtt = (!rtts.is_empty()).then(|| RttMs {
        min: mean_ci_of(&rtts, |r| r.min).0,
        mean: mean_ci_of(&rtts, |r| r.mean).0,
        p95: mean_ci_of(&rtts, |r| r.p95).0,
    });
    let rci = mean_ci_of(&rtts, |r| r.mean).1;
    // Means over the repetitions that measured them (null when none did).
    let mean_of = |f: &dyn Fn(&FlowResult) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = reps
            .iter()
            .filter_map(|r| r.flows.get(i))
            .filter_map(f)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let first = &reps[0].flows[i];
    let slow_starts: Vec<&qlog_analysis::slow_start::SlowStartSummary> = reps
        .iter()
        .filter_map(|r| r.flows.get(i)?.slow_start.as_ref())
        .collect();
    let slow_start = (!slow_starts.is_empty()).then(|| {
        let mean = |f: &dyn Fn(&qlog_analysis::slow_start::SlowStartSummary) -> Option<f64>| {
            let v: Vec<f64> = slow_starts.iter().filter_map(|s| f(s)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let mut exit_reasons = BTreeMap::new();
        for s in &slow_starts {
            *exit_reasons.entry(s.exit_reason.clone()).or_insert(0) += 1;
        }
        SlowStartMeans {
            exit_s: mean(&|s| s.exit_s),
            exit_cwnd_bytes: mean(&|s| s.exit_cwnd_bytes),
            lost_packets: mean(&|s| Some(s.lost_packets as f64)).unwrap_or(0.0),
            peak_queue_ms: mean(&|s| s.peak_queue_ms),
            exit_reasons,
        }
    });
    FlowSummary {
        index: i,
        cc: first.cc.clone(),
        direction: first.direction.clone(),
        bytes,
        goodput_bps: goodput,
        rtt_ms: rtt,
        lost_packets: lost.map(|l| l.0),
        loss_rate: mean_of(&|f| f.loss_rate),
        fct_s: mean_of(&|f| f.fct_s),
        size_bytes: None,
        completion_s: completion.map(|c| c.0),
        retransmitted_packets: retx.map(|l| l.0),
        data_packet_bytes_mean: mean_of(&|f| f.data_packet_bytes_mean),
        data_packet_small_share: mean_of(&|f| f.data_packet_small_share),
        acks_per_data_packet: mean_of(&|f| f.acks_per_data_packet),
        base_rtt_ms: first.base_rtt_ms,
        slow_start,
        completed: reps
            .iter()
            .filter(|r| r.flows.get(i).is_some_and(|f| f.complete))
            .count() as u32,
        ci95: ci95([("goodput_bps", gci), ("rtt_ms_mean", rci)])
            .into_iter()
            .chain(lost.map(|l| ("lost_packets".to_string(), l.1)))
            .chain(retx.map(|l| ("retransmitted_packets".to_string(), l.1)))
            .chain(completion.map(|c| ("completion_s".to_string(), c.1)))
            .collect(),
    }
}

/// Each link of several averaged over the repetitions that have it.
fn link_means(reps: &[RepResult]) -> BTreeMap<String, LinkResult> {
    let Some(first) = reps.first() else {
        return BTreeMap::new();
    };
    first
        .links
        .iter()
        .map(|(name, l)| {
            fn pick<'r>(r: &'r RepResult, name: &str) -> Option<&'r BottleneckResult> {
                r.links.get(name).map(|x| &x.link)
            }
            let get = |r| pick(r, name);
            let js: Vec<f64> = reps
                .iter()
                .filter_map(|r| r.links.get(name)?.jain_fairness)
                .collect();
            let out = LinkResult {
                link: bottleneck_mean(reps, get).0,
                flows: l.flows.clone(),
                jain_fairness: (!js.is_empty()).then(|| mean_ci(&js).0),
            };
            (name.clone(), out)
        })
        .collect()
}

/// A bottleneck (`get` picks which of a repetition's) averaged over the
/// repetitions that have it, with the 95% half-widths of its utilization
/// and queueing delay.
fn bottleneck_mean<'a>(
    reps: &'a [RepResult],
    get: impl Fn(&'a RepResult) -> Option<&'a BottleneckResult>,
) -> (BottleneckResult, f64, f64) {
    let bs: Vec<&BottleneckResult> = reps.iter().filter_map(get).collect();
    let (util, uci) = mean_ci_of(&bs, |b| b.utilization);
    let (qd, qci) = mean_ci_of(&bs, |b| b.queue_delay_ms_mean);
    let (drops, _) = mean_ci_of(&bs, |b| b.drops as f64);
    let (marks, _) = mean_ci_of(&bs, |b| b.marks as f64);
    // Marks by reason: the mean over the repetitions of each reason any
    // of them saw (drops_by_reason keeps the first repetition's).
    let mut marks_by_reason = BTreeMap::new();
    for b in &bs {
        for k in b.marks_by_reason.keys() {
            marks_by_reason.entry(k.clone()).or_insert_with(|| {
                let per: Vec<f64> = bs
                    .iter()
                    .map(|x| x.marks_by_reason.get(k).copied().unwrap_or(0) as f64)
                    .collect();
                mean_ci(&per).0.round() as u64
            });
        }
    }
    let first = bs.first();
    let ls: Vec<f64> = bs.iter().filter_map(|b| b.loss_rate).collect();
    let b = BottleneckResult {
        direction: first.map(|b| b.direction.clone()).unwrap_or_default(),
        utilization: util,
        // Null unless every repetition has it.
        utilization_steady: bs
            .iter()
            .map(|b| b.utilization_steady)
            .collect::<Option<Vec<f64>>>()
            .filter(|v| !v.is_empty())
            .map(|v| mean_ci(&v).0),
        drops: drops.round() as u64,
        queue_delay_ms_mean: qd,
        bytes: mean_ci_of(&bs, |b| b.bytes as f64).0 as u64,
        drops_by_reason: first.map(|b| b.drops_by_reason.clone()).unwrap_or_default(),
        marks: marks.round() as u64,
        marks_by_reason,
        loss_rate: (!ls.is_empty()).then(|| mean_ci(&ls).0),
        recoveries: mean_recoveries(&bs),
    };
    (b, uci, qci)
}

/// The size classes of [`super::FctClass`]: by powers of ten from 10 kB.
pub const FCT_CLASSES: [u64; 4] = [10_000, 100_000, 1_000_000, u64::MAX];

/// Completion times of the sized flows, by size class, over every
/// repetition.
fn fct_classes(flows: &[(usize, &FlowSpec)], reps: &[RepResult]) -> Vec<super::FctClass> {
    if !flows.iter().any(|(_, f)| f.has_completion_time()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut above = 0;
    for up_to in FCT_CLASSES {
        let mut c = super::FctClass {
            above_bytes: above,
            up_to_bytes: up_to,
            ..Default::default()
        };
        for r in reps {
            for f in &r.flows {
                let Some((_, spec)) = flows.get(f.index) else {
                    continue;
                };
                if !spec.has_completion_time() || spec.size.is_none_or(|b| b <= above || b > up_to)
                {
                    continue;
                }
                c.flows += 1;
                if let Some(t) = f.fct_s {
                    c.completed += 1;
                    c.fct_s.push(t);
                }
            }
        }
        c.fct_s.sort_by(f64::total_cmp);
        let rank = |q: f64| -> Option<f64> {
            let n = c.fct_s.len();
            (n > 0).then(|| c.fct_s[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
        };
        (c.p50_s, c.p95_s, c.p99_s) = (rank(0.5), rank(0.95), rank(0.99));
        if c.flows > 0 {
            out.push(c);
        }
        above = up_to;
    }
    out
}

/// Each change's recovery: the mean over the repetitions that recovered
/// (null when none did). Every repetition has the same changes.
fn mean_recoveries(bs: &[&BottleneckResult]) -> Vec<super::Recovery> {
    let Some(first) = bs.first() else {
        return Vec::new();
    };
    first
        .recoveries
        .iter()
        .enumerate()
        .map(|(i, r)| {
            // The mean over the repetitions that have the figure.
            let mean = |g: fn(&super::Recovery) -> Option<f64>| {
                let got: Vec<f64> = bs.iter().filter_map(|b| g(b.recoveries.get(i)?)).collect();
                (!got.is_empty()).then(|| mean_ci(&got).0)
            };
            super::Recovery {
                recovery_s: mean(|r| r.recovery_s),
                late_ms: mean(|r| r.late_ms),
                ..r.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_intervals() {
        let (m, h) = mean_ci(&[10.0, 12.0, 14.0]);
        // sd 2, n 3: t(2) = 4.303, half-width 4.303·2/√3.
        assert!((m - 12.0).abs() < 1e-12 && (h - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(mean_ci(&[5.0]), (5.0, 0.0));
        assert_eq!(mean_ci(&[]), (0.0, 0.0));
    }
}
