//! Metrics of a finished run, per repetition, read from its result
//! directory (`summary.json`, `rep-N/bottleneck-samples.jsonl`).
//!
//! Link metrics are the bottleneck's in the direction that carried the
//! data. With several links they cover every link, or with a flow
//! selector the links only the selected flows cross (`link_value`); flow
//! metrics aggregate the selected flows of the run:
//!
//! | metric | unit | over the selected flows |
//! |---|---|---|
//! | `drops` | packets dropped at the bottleneck | – |
//! | `utilization` | % of capacity used over the whole run | – |
//! | `utilization_steady` | the same from 1 s after the first start (runs over 5 s) | – |
//! | `queue_delay_ms` | mean sojourn of departed packets | – |
//! | `queue_pkts` | time-mean queue length (100 ms samples) | – |
//! | `loss_rate` | % of offered bytes dropped | – |
//! | `delivery_ratio` | % of offered bytes delivered (100 − loss_rate) | – |
//! | `delivery_first`, `queue_delay_first_ms` | `delivery_ratio` and `queue_delay_ms` of each link's first flow only (its lowest-numbered), from the links' per-packet logs, as the EWPHCC author's script counts the first flow of each source node: packets that left the queue over those that left or were dropped; their mean time queued | – |
//! | `jain` | Jain's index of the flows' goodputs | – |
//! | `goodput_mbps` | payload goodput | sum |
//! | `data_mb` | payload delivered, MB | sum |
//! | `rtt_ms`, `rtt_p95_ms` | sender's RTT samples | mean |
//! | `cwnd_cv` | time-weighted cwnd std. dev. / mean | mean |
//! | `cwnd_kb` | time-weighted mean cwnd, KB | mean |
//! | `lost` | packets the senders declared lost | sum |
//! | `completion_s` | transfer time of sized flows (NaN if unfinished) | max |
//! | `goodput_cv` | std. dev. / mean of the client's 0.5 s goodput reports, after the first 5 s | mean |
//! | `smcc_alpha`, `smcc_alpha_min`, `smcc_alpha_max` | SMCC's alpha at the run's end (the sender qlog's last `smcc_alpha`) | mean, min, max |
//! | `data_packet_bytes` | mean size of the sender's data packets | mean |
//! | `small_share` | % of data packets under 95% of the largest | mean |
//! | `acks_per_packet` | ACKs the receiver sent per data packet | mean |
//! | `cpu_busy`, `guest_cpu_busy` | % of the host's (the guest's) CPU time busy over the repetition (real backends) | – |
//! | `eq7_mbps` | the square-root throughput `c s / (R sqrt(p))` from the flow's own loss rate and RTT (see [`eq7_mbps`]) | sum |

use std::path::Path;

use serde_json::Value;

use crate::run::{BottleneckResult, FlowResult, LinkResult, RepResult, RunSummary};

/// A run's result directory, read once.
pub struct RunData {
    /// `summary.json`, typed.
    pub summary: RunSummary,
    /// Per repetition: time-mean queue length in packets.
    queue_pkts: Vec<f64>,
    /// The run directory.
    dir: std::path::PathBuf,
    /// Each flow's sender qlog (by its path in the run), parsed once:
    /// several metrics and figures read the same trace.
    senders: std::sync::Mutex<
        std::collections::BTreeMap<String, Option<std::sync::Arc<qlog_analysis::analysis::Series>>>,
    >,
}

/// Why a run's results cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MetricError(pub String);

impl RunData {
    /// Reads a run directory.
    pub fn load(dir: &Path) -> Result<RunData, MetricError> {
        let summary = RunSummary::load(dir).map_err(|e| MetricError(e.to_string()))?;
        let dir_name = if summary.bottleneck.direction.is_empty() {
            "down".to_string()
        } else {
            summary.bottleneck.direction.clone()
        };
        let mut queue_pkts = Vec::new();
        for r in &summary.repetitions {
            let f = dir
                .join(format!("rep-{}", r.rep.max(1)))
                .join("bottleneck-samples.jsonl");
            queue_pkts.push(mean_queue(&f, &dir_name).unwrap_or(f64::NAN));
        }
        Ok(RunData {
            summary,
            queue_pkts,
            dir: dir.to_path_buf(),
            senders: Default::default(),
        })
    }

    /// Repetitions.
    pub fn reps(&self) -> usize {
        self.summary.repetitions.len()
    }

    /// The value of `metric` for each repetition, over the flows that
    /// `flow` selects (all when `None`).
    pub fn values(&self, metric: &str, flow: Option<&str>) -> Result<Vec<f64>, MetricError> {
        self.values_on(metric, flow, None)
    }

    /// As [`values`](Self::values), a link metric read on one named link
    /// (`link`, of a multi-link run) when given.
    pub fn values_on(
        &self,
        metric: &str,
        flow: Option<&str>,
        link: Option<&str>,
    ) -> Result<Vec<f64>, MetricError> {
        if link.is_some() && is_flow_metric(metric) {
            return Err(MetricError(format!(
                "link=: `{metric}` is a flow metric; a link is chosen for the link metrics ({})",
                LINK_METRICS.join(", ")
            )));
        }
        self.summary
            .repetitions
            .iter()
            .enumerate()
            .map(|(i, r)| self.value(i, r, metric, flow, link))
            .collect()
    }

    /// `metric` in repetition `r` (the `i`-th).
    fn value(
        &self,
        i: usize,
        r: &RepResult,
        metric: &str,
        flow: Option<&str>,
        link: Option<&str>,
    ) -> Result<f64, MetricError> {
        let flows: Vec<&FlowResult> = r.flows.iter().filter(|f| selects(flow, f)).collect();
        if flows.is_empty() && is_flow_metric(metric) {
            return Err(MetricError(format!(
                "no flow matches `flow={}`; flows: {}",
                flow.unwrap_or(""),
                r.flows
                    .iter()
                    .map(|f| f.cc.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let selected: Option<Vec<usize>> = flow.map(|_| flows.iter().map(|f| f.index).collect());
        if super::jobs::needs_packet_log(metric) {
            let rep_dir = self.dir.join(format!("rep-{}", r.rep.max(1)));
            return first_flows_value(metric, r, &rep_dir, selected.as_deref(), link);
        }
        let v = match link_value(metric, r, selected.as_deref(), link)? {
            Some(v) => v,
            None if metric == "queue_pkts" && r.links.len() > 1 => {
                return Err(MetricError(
                    "queue_pkts samples one link; this run has several: use queue_delay_ms, which covers every link".into(),
                ))
            }
            None if metric == "queue_pkts" => self.queue_pkts.get(i).copied().unwrap_or(f64::NAN),
            None => self.flow_value(metric, r, &flows).ok_or_else(|| {
                MetricError(format!(
                    "unknown metric `{metric}`; known: {}",
                    super::manifest::METRICS.join(", ")
                ))
            })?,
        };
        Ok(v)
    }

    /// When flow `f`'s window first reached the link's BDP plus its buffer
    /// in the data direction (s from the sender trace's start, from its
    /// qlog), and the round trip then (the base RTT plus the full
    /// buffer's delay, s). None without the sender's qlog or the run's
    /// scenario, or if the window never got there.
    fn fill(&self, f: &FlowResult) -> Option<(f64, f64)> {
        use crate::link::{Dir, QueueLimit};
        let sc = crate::scenario::Scenario::load(&self.dir.join("scenario.toml")).ok()?;
        let bdp = sc.link.limit_bytes(Dir::Down, QueueLimit::Bdp(1.0), 1500) as f64;
        let buffer = sc.link.queue_bytes(Dir::Down, 1500) as f64;
        let rate = sc.link.dir(Dir::Down).rate_bps;
        let t = self
            .sender(f)?
            .cwnd
            .iter()
            .find(|(_, w)| *w >= bdp + buffer)?
            .0;
        (rate > 0.0).then(|| (t, sc.link.rtt_ns() as f64 / 1e9 + buffer * 8.0 / rate))
    }

    /// How many times flow `f`'s sender entered congestion state `state`
    /// (its qlog's state changes); None without the sender's qlog.
    fn entered(&self, f: &FlowResult, state: &str) -> Option<f64> {
        Some(
            self.sender(f)?
                .states
                .iter()
                .filter(|(_, s)| s == state)
                .count() as f64,
        )
    }

    /// Flow `f`'s sender qlog as time series (times from its trace's
    /// start), read once per run; None without one, or unreadable.
    pub fn sender(
        &self,
        f: &FlowResult,
    ) -> Option<std::sync::Arc<qlog_analysis::analysis::Series>> {
        let rel = f.qlog.get("sender")?;
        let mut cache = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(rel.clone())
            .or_insert_with(|| {
                let mut an = qlog_analysis::analysis::Analyzer::new(0.1, true);
                qlog_analysis::reader::read_file(&self.dir.join(rel), &mut an).ok()?;
                let c = an.connections.into_iter().next()?;
                Some(std::sync::Arc::new(c.series))
            })
            .clone()
    }

    /// A flow metric over `flows` of repetition `r`; `None` for a metric
    /// that is not one.
    fn flow_value(&self, metric: &str, r: &RepResult, flows: &[&FlowResult]) -> Option<f64> {
        let sum = |g: &dyn Fn(&FlowResult) -> f64| flows.iter().map(|f| g(f)).sum::<f64>();
        let mean = |g: &dyn Fn(&FlowResult) -> f64| {
            let v: Vec<f64> = flows
                .iter()
                .map(|f| g(f))
                .filter(|x| x.is_finite())
                .collect();
            if v.is_empty() {
                f64::NAN
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let opt = |x: Option<f64>| x.unwrap_or(f64::NAN);
        Some(match metric {
            "goodput_mbps" => sum(&|f| f.goodput_bps) / 1e6,
            "data_mb" => sum(&|f| f.bytes as f64) / 1e6,
            "rtt_ms" => mean(&|f| opt(f.rtt_ms.as_ref().map(|r| r.mean))),
            "rtt_p95_ms" => mean(&|f| opt(f.rtt_ms.as_ref().map(|r| r.p95))),
            "rtt_min_ms" => mean(&|f| opt(f.rtt_ms.as_ref().map(|r| r.min))),
            "cwnd_cv" => mean(&|f| opt(f.cwnd_cv)),
            "cwnd_kb" => mean(&|f| opt(f.cwnd_mean) / 1e3),
            "lost" => sum(&|f| opt(f.lost_packets.map(|l| l as f64))),
            "goodput_cv" => mean(&|f| {
                goodput_cv(
                    &self
                        .dir
                        .join(format!("rep-{}", r.rep.max(1)))
                        .join(format!("flow-{}", f.index))
                        .join("client.json"),
                )
            }),
            "completion_s" => completion_s(flows),
            "eq7_mbps" => flows.iter().map(|f| eq7_mbps(f)).sum(),
            "smcc_alpha" => mean(&|f| opt(f.metrics_last.get("smcc_alpha").copied())),
            "data_packet_bytes" => mean(&|f| opt(f.data_packet_bytes_mean)),
            "small_share" => mean(&|f| 100.0 * opt(f.data_packet_small_share)),
            "acks_per_packet" => mean(&|f| opt(f.acks_per_data_packet)),
            "smcc_alpha_min" => alphas(flows).fold(f64::NAN, f64::min),
            "smcc_alpha_max" => alphas(flows).fold(f64::NAN, f64::max),
            // The selected flows' part of every flow's goodput.
            "share" => {
                let all: f64 = r.flows.iter().map(|f| f.goodput_bps).sum();
                if all > 0.0 {
                    100.0 * sum(&|f| f.goodput_bps) / all
                } else {
                    f64::NAN
                }
            }
            "base_rtt_ms" => mean(&|f| opt(f.base_rtt_ms)),
            // The first slow start (`slow_start` in the flow's record).
            "ss_exit_ms" => mean(&|f| opt(ss(f).and_then(|s| s.exit_s)) * 1e3),
            "ss_end_ms" => mean(&|f| opt(ss(f).and_then(|s| s.end_s)) * 1e3),
            "ss_cwnd_kb" => mean(&|f| opt(ss(f).and_then(|s| s.exit_cwnd_bytes)) / 1e3),
            "ss_lost" => mean(&|f| opt(ss(f).map(|s| s.lost_packets as f64))),
            "ss_peak_queue_ms" => mean(&|f| opt(ss(f).and_then(|s| s.peak_queue_ms))),
            "ss_reason" => mean(&|f| opt(ss(f).and_then(|s| reason_code(&s.exit_reason)))),
            "ss_fill_ms" => mean(&|f| opt(self.fill(f).map(|(t, _)| t * 1e3))),
            "ss_late_rtts" => mean(&|f| {
                let end = ss(f).and_then(|s| s.end_s);
                opt(end
                    .zip(self.fill(f))
                    .map(|(end, (fill, rtt))| (end - fill) / rtt))
            }),
            m => {
                if let Some(state) = m.strip_prefix("entered:") {
                    return Some(mean(&|f| opt(self.entered(f, state))));
                }
                let name = m.strip_prefix("last:")?;
                mean(&|f| opt(f.metrics_last.get(name).copied()))
            }
        })
    }
}

/// A flow's first slow start, as its record gives it.
fn ss(f: &FlowResult) -> Option<&qlog_analysis::slow_start::SlowStartSummary> {
    f.slow_start.as_ref()
}

/// The exit reasons of [`qlog_analysis::slow_start`] as numbers, so that
/// a table can carry them (and [`reason_label`] name them again): the
/// codes the controllers log as `ss_exit_reason` (1 loss, 2 delay
/// increase, 3 bandwidth plateau), then 4 threshold, 5 other, 0 none.
pub const SS_REASONS: &[(&str, f64)] = &[
    ("none", 0.0),
    ("loss", 1.0),
    ("delay_increase", 2.0),
    ("bandwidth_plateau", 3.0),
    ("threshold", 4.0),
    ("other", 5.0),
];

fn reason_code(r: &str) -> Option<f64> {
    SS_REASONS.iter().find(|(n, _)| *n == r).map(|x| x.1)
}

/// The name of an `ss_reason` value: a code, or `mixed` for a mean of
/// several (repetitions that ended for different reasons).
pub fn reason_label(v: f64) -> &'static str {
    SS_REASONS
        .iter()
        .find(|(_, c)| *c == v)
        .map_or("mixed", |x| x.0)
}

/// The selected SMCC flows' alpha at the end of the run (their qlog's
/// last `smcc_alpha`), those that logged one.
fn alphas<'a>(flows: &'a [&'a FlowResult]) -> impl Iterator<Item = f64> + 'a {
    flows
        .iter()
        .filter_map(|f| f.metrics_last.get("smcc_alpha").copied())
        .filter(|x| x.is_finite())
}

/// Link `name` of repetition `r`, or what is wrong with the name.
fn named_link<'a>(
    r: &'a RepResult,
    name: &str,
) -> Result<(&'a String, &'a LinkResult), MetricError> {
    r.links.get_key_value(name).ok_or_else(|| {
        MetricError(if r.links.is_empty() {
            format!("link={name}: this run has one link, not named")
        } else {
            format!(
                "link={name}: no such link; links: {}",
                r.links.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
    })
}

/// The named links of repetition `r` that a link metric covers: the one
/// `link` names, else every link, or with a flow selector (`selected`:
/// the chosen flows' indices) the links that only those flows cross. None
/// for a run of one unnamed link; an error when the selector leaves none.
fn chosen_links<'a>(
    metric: &str,
    r: &'a RepResult,
    selected: Option<&[usize]>,
    link: Option<&str>,
) -> Result<Vec<(&'a String, &'a LinkResult)>, MetricError> {
    if let Some(name) = link {
        return Ok(vec![named_link(r, name)?]);
    }
    let mine =
        |fl: &[usize]| selected.is_none_or(|s| !fl.is_empty() && fl.iter().all(|i| s.contains(i)));
    let v: Vec<_> = r.links.iter().filter(|(_, l)| mine(&l.flows)).collect();
    if v.is_empty() && !r.links.is_empty() {
        return Err(MetricError(format!(
            "{metric}: no link is crossed only by the selected flows ({}); links: {}",
            selected
                .unwrap_or_default()
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(", "),
            r.links
                .iter()
                .map(|(n, l)| format!("{n} (flows {:?})", l.flows))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(v)
}

/// A link metric of repetition `r` (but `queue_pkts`, from the samples);
/// `None` for a metric that is not one. With several links (`links` in
/// the repetition) the link metrics cover all of them, or with a flow
/// selector (`selected`: the chosen flows' indices) the links that only
/// those flows cross: drops summed, loss and delivery over the bytes
/// offered to those links, queueing delay weighted by the bytes that
/// crossed each, utilization averaged.
fn link_value(
    metric: &str,
    r: &RepResult,
    selected: Option<&[usize]>,
    link: Option<&str>,
) -> Result<Option<f64>, MetricError> {
    let opt = |x: Option<f64>| x.unwrap_or(f64::NAN);
    // One named link: its own figures.
    let named = match link {
        None => None,
        Some(name) => Some(named_link(r, name)?.1),
    };
    match (metric, named) {
        ("queue_pkts", Some(_)) => {
            return Err(MetricError(
                "queue_pkts samples the first link only; use queue_delay_ms with link=".into(),
            ))
        }
        ("jain", Some(l)) => return Ok(Some(opt(l.jain_fairness))),
        _ => {}
    }
    match metric {
        "queue_pkts" => return Ok(None),
        // A repetition's own figure: no link to choose.
        "jain" => return Ok(Some(opt(r.jain_fairness))),
        "cpu_busy" => return Ok(Some(100.0 * opt(r.cpu_busy))),
        "guest_cpu_busy" => return Ok(Some(100.0 * opt(r.guest_cpu_busy))),
        "syscalls_per_packet" => {
            return Ok(Some(opt(r
                .syscalls
                .as_ref()
                .and_then(|s| s.per_data_packet))))
        }
        m if m.starts_with("syscalls:") => {
            let name = &m["syscalls:".len()..];
            return Ok(Some(opt(r.syscalls.as_ref().and_then(|s| {
                let calls = *s.by_name.get(name)?;
                (s.per_data_packet.is_some()).then(|| calls as f64 / s.data_packets as f64)
            }))));
        }
        m if is_flow_metric(m) => return Ok(None),
        _ => {}
    }
    // Each link with the flows that cross it (none known for a single
    // bottleneck: then every flow).
    let links: Vec<(&BottleneckResult, &[usize])> = if r.links.is_empty() && link.is_none() {
        vec![(&r.bottleneck, &[][..])]
    } else {
        chosen_links(metric, r, selected, link)?
            .into_iter()
            .map(|(_, l)| (&l.link, l.flows.as_slice()))
            .collect()
    };
    let loss_of = |b: &BottleneckResult| opt(b.loss_rate);
    // Offered bytes of a link: what crossed plus what was dropped.
    let offered = |(b, _): &(&BottleneckResult, &[usize])| b.bytes as f64 / (1.0 - loss_of(b));
    let loss = || {
        if links.len() == 1 {
            return loss_of(links[0].0);
        }
        let off: f64 = links.iter().map(offered).sum();
        let lost: f64 = links.iter().map(|l| offered(l) * loss_of(l.0)).sum();
        if off > 0.0 {
            lost / off
        } else {
            f64::NAN
        }
    };
    // The mean of a figure of the links' changes, over those that have it.
    let over_changes = |g: &dyn Fn(&crate::run::Recovery) -> Option<f64>| {
        let t: Vec<f64> = links
            .iter()
            .flat_map(|(b, _)| b.recoveries.iter().filter_map(g))
            .collect();
        if t.is_empty() {
            f64::NAN
        } else {
            t.iter().sum::<f64>() / t.len() as f64
        }
    };
    let mean = |g: &dyn Fn(&BottleneckResult) -> f64| {
        links.iter().map(|(b, _)| g(b)).sum::<f64>() / links.len() as f64
    };
    Ok(Some(match metric {
        "drops" => links.iter().map(|(b, _)| b.drops as f64).sum(),
        "utilization" => 100.0 * mean(&|b| b.utilization),
        "utilization_steady" => 100.0 * mean(&|b| opt(b.utilization_steady)),
        "queue_delay_ms" => {
            let weight = |(b, _): &(&BottleneckResult, &[usize])| b.bytes as f64;
            let w: f64 = links.iter().map(weight).sum();
            if links.len() == 1 || w <= 0.0 {
                links[0].0.queue_delay_ms_mean
            } else {
                links
                    .iter()
                    .map(|l| l.0.queue_delay_ms_mean * weight(l))
                    .sum::<f64>()
                    / w
            }
        }
        "loss_rate" => 100.0 * loss(),
        // Recovery from the link's scheduled changes: the mean time of
        // those recovered, and how many were not.
        "recovery_s" => over_changes(&|r| r.recovery_s),
        // How late the changes took effect (netem; NaN where the link
        // model makes them at their time).
        "change_late_ms" => over_changes(&|r| r.late_ms),
        "unrecovered" => links
            .iter()
            .map(|(b, _)| {
                b.recoveries
                    .iter()
                    .filter(|r| r.recovery_s.is_none())
                    .count()
            })
            .sum::<usize>() as f64,
        // delivery_ratio, the link metric left.
        _ => 100.0 * (1.0 - loss()),
    }))
}

/// `delivery_first` or `queue_delay_first_ms` of one repetition: the EWPHCC
/// author's definition (`1805004_parse.awk` counts only the first flow of
/// each source node, one link per source here), measured on those flows'
/// own packets in each link's per-packet log (`bottleneck.bin`, the data
/// direction): delivery is the packets that left the queue over those
/// that left or were dropped, in %; delay the mean time they spent
/// queued, ms. The links are those [`link_value`] takes (every link, the
/// links only the selected flows cross, or the one named), each link's
/// first flow its lowest-numbered.
fn first_flows_value(
    metric: &str,
    r: &RepResult,
    rep_dir: &Path,
    selected: Option<&[usize]>,
    link: Option<&str>,
) -> Result<f64, MetricError> {
    let links = chosen_links(metric, r, selected, link)?;
    if links.is_empty() {
        return Err(MetricError(format!(
            "{metric}: needs a run with named links (`[[links]]`), each link's first flow counted; this run has one link"
        )));
    }
    // Each link's log is where the run wrote it (`bottleneck::link_dir`).
    let topo =
        crate::scenario::Scenario::load(&rep_dir.parent().unwrap_or(rep_dir).join("scenario.toml"))
            .map_err(|e| MetricError(format!("{metric}: the run's scenario: {e}")))?
            .topology();
    let (mut departed, mut dropped, mut sojourn_ns) = (0u64, 0u64, 0u128);
    for (name, l) in links {
        let Some(&first) = l.flows.iter().min() else {
            continue;
        };
        let dir_code = if l.link.direction == "up" { 0 } else { 1 };
        let i = topo
            .links
            .iter()
            .position(|t| &t.name == name)
            .ok_or_else(|| {
                MetricError(format!(
                    "{metric}: link {name} is not in the run's scenario"
                ))
            })?;
        let path = crate::bottleneck::link_dir(rep_dir, &topo, i).join("bottleneck.bin");
        let log = crate::bottleneck::Reader::open(&path).map_err(|e| {
            MetricError(format!(
                "{metric} reads each link's per-packet log (the run must keep it): {e}"
            ))
        })?;
        for rec in log {
            if usize::from(rec.flow) != first || rec.dir != dir_code {
                continue;
            }
            match rec.kind {
                k if k == crate::bottleneck::Kind::Depart as u8 => {
                    departed += 1;
                    sojourn_ns += u128::from(rec.sojourn_ns);
                }
                k if k == crate::bottleneck::Kind::Drop as u8 => dropped += 1,
                _ => {}
            }
        }
    }
    Ok(match metric {
        "delivery_first" if departed + dropped > 0 => {
            100.0 * departed as f64 / (departed + dropped) as f64
        }
        "queue_delay_first_ms" if departed > 0 => sojourn_ns as f64 / departed as f64 / 1e6,
        _ => f64::NAN,
    })
}

/// Equation 7 of the TCP/EXP paper (seeds/002; the square-root law of
/// Mathis et al.), the "throughput" of its Figs. 4, 6, 8, 10 and 13:
/// `lambda = c s / (R sqrt(p))` with `c = 1.5 sqrt(2/3)`, in Mbit/s, from
/// one flow's own measurements: `s` the datagram size
/// ([`quic_app::MAX_DATAGRAM_SIZE`], the "packet" of the TCP mapping), `R`
/// the mean of the sender's RTT samples, and `p` the share of the
/// sender's packets it declared lost, `lost / (lost + bytes / s)` (the
/// delivered payload counted in full datagrams). NaN without the sender's
/// qlog (no RTT or loss count) and when the flow lost nothing (the
/// formula has no value at `p = 0`).
fn eq7_mbps(f: &FlowResult) -> f64 {
    let c = 1.5 * (2.0f64 / 3.0).sqrt();
    let s = quic_app::MAX_DATAGRAM_SIZE as f64;
    let r = f.rtt_ms.as_ref().map_or(f64::NAN, |r| r.mean) / 1e3;
    let lost = f.lost_packets.map_or(f64::NAN, |l| l as f64);
    let sent = lost + f.bytes as f64 / s;
    let p = lost / sent;
    if !(p > 0.0 && r > 0.0) {
        return f64::NAN;
    }
    c * s / (r * p.sqrt()) * 8.0 / 1e6
}

/// The longest transfer time of sized flows; NaN if one did not finish.
fn completion_s(flows: &[&FlowResult]) -> f64 {
    flows
        .iter()
        .map(|f| {
            if f.complete && f.goodput_bps > 0.0 {
                f.bytes as f64 * 8.0 / f.goodput_bps
            } else {
                f64::NAN
            }
        })
        .fold(f64::NEG_INFINITY, |a, b| {
            if b.is_nan() || a.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        })
}

/// The metrics of the link (or links) rather than of the flows; all but
/// `queue_pkts` (from the samples) are read by [`link_value`].
const LINK_METRICS: &[&str] = &[
    "drops",
    "utilization",
    "utilization_steady",
    "queue_delay_ms",
    "queue_pkts",
    "loss_rate",
    "delivery_ratio",
    "delivery_first",
    "queue_delay_first_ms",
    "jain",
    "cpu_busy",
    "guest_cpu_busy",
    "syscalls_per_packet",
    "recovery_s",
    "unrecovered",
    "change_late_ms",
];

fn is_flow_metric(m: &str) -> bool {
    !LINK_METRICS.contains(&m) && !m.starts_with("syscalls:")
}

/// Whether flow `f` (a repetition's flow record) is selected by `sel`:
/// `#i` its index, else its algorithm's name (the spec before `:`).
pub fn selects(sel: Option<&str>, f: &FlowResult) -> bool {
    match sel {
        None => true,
        Some(s) => match s.strip_prefix('#') {
            Some(i) => f.index.to_string() == i,
            None => f.cc.split(':').next() == Some(s),
        },
    }
}

/// Coefficient of variation of a client's interval goodputs, skipping
/// the first 5 s (slow start).
fn goodput_cv(path: &Path) -> f64 {
    let v: Value = match std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
    {
        Some(v) => v,
        None => return f64::NAN,
    };
    let xs: Vec<f64> = v["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|x| x["start_s"].as_f64().unwrap_or(0.0) >= 5.0)
                .filter_map(|x| x["goodput_bps"].as_f64())
                .collect()
        })
        .unwrap_or_default();
    if xs.len() < 2 {
        return f64::NAN;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
    if m > 0.0 {
        var.sqrt() / m
    } else {
        f64::NAN
    }
}

/// Time-mean of `queue_packets` in direction `dir` from a samples file.
fn mean_queue(path: &Path, dir: &str) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let (mut sum, mut n) = (0.0, 0usize);
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).ok()?;
        if v["dir"].as_str() == Some(dir) {
            sum += v["queue_packets"].as_f64()?;
            n += 1;
        }
    }
    (n > 0).then(|| sum / n as f64)
}

/// Bottleneck samples of repetition 1 in the data direction: (t, value)
/// for `queue_pkts`, `utilization` (%), `delivered_bps` (bit/s) or
/// `drops` (cumulative).
pub fn bottleneck_signal(dir: &Path, data: &RunData, signal: &str) -> Vec<(f64, f64)> {
    let d = match data.summary.bottleneck.direction.as_str() {
        "" => "down",
        d => d,
    };
    let Ok(text) = std::fs::read_to_string(dir.join("rep-1").join("bottleneck-samples.jsonl"))
    else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["dir"].as_str() == Some(d))
        .filter_map(|v| {
            let t = v["t_s"].as_f64()?;
            let y = match signal {
                "queue_pkts" => v["queue_packets"].as_f64()?,
                "utilization" => 100.0 * v["utilization"].as_f64()?,
                // What left the queue in the interval, bit/s (the rate
                // in force, whatever changes the link had).
                "delivered_bps" => {
                    let dt = v["interval_s"].as_f64().filter(|d| *d > 0.0)?;
                    v["sent_bytes"].as_f64()? * 8.0 / dt
                }
                _ => v["drops_total"].as_f64()?,
            };
            Some((t, y))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_metrics_cover_every_link_of_a_topology() {
        let dir = tempfile::tempdir().unwrap();
        let link = |drops: u64, bytes: u64, loss: f64, q: f64, u: f64, flow: u64| {
            serde_json::json!({"drops": drops, "bytes": bytes, "loss_rate": loss,
                "queue_delay_ms_mean": q, "utilization": u, "utilization_steady": u, "flows": [flow]})
        };
        let summary = serde_json::json!({
            "bottleneck": {"direction": "down"},
            "repetitions": [{
                "rep": 1,
                "bottleneck": link(1, 900, 0.1, 2.0, 0.5, 0),
                "links": {"p1": link(1, 900, 0.1, 2.0, 0.5, 0), "p2": link(0, 3000, 0.0, 4.0, 0.7, 1)},
                "flows": [{"index": 0, "cc": "vegas"}, {"index": 1, "cc": "ewphcc"}]
            }]
        });
        std::fs::write(dir.path().join("summary.json"), summary.to_string()).unwrap();
        let d = RunData::load(dir.path()).unwrap();
        assert_eq!(d.values("drops", None).unwrap(), vec![1.0]);
        // 100 of 1000 + 3000 offered bytes were lost.
        let l = d.values("loss_rate", None).unwrap()[0];
        assert!((l - 2.5).abs() < 1e-9, "{l}");
        let q = d.values("queue_delay_ms", None).unwrap()[0];
        assert!(
            (q - (2.0 * 900.0 + 4.0 * 3000.0) / 3900.0).abs() < 1e-9,
            "{q}"
        );
        assert!((d.values("utilization", None).unwrap()[0] - 60.0).abs() < 1e-9);
        assert!(d.values("queue_pkts", None).is_err());
        // A flow selector keeps the links only its flows cross.
        assert!((d.values("loss_rate", Some("vegas")).unwrap()[0] - 10.0).abs() < 1e-9);
        assert_eq!(
            d.values("delivery_ratio", Some("ewphcc")).unwrap(),
            vec![100.0]
        );
        assert_eq!(d.values("drops", Some("#1")).unwrap(), vec![0.0]);
        // One named link: its own figures; a flow metric or an unknown
        // link is refused, naming what is allowed.
        let on = |m: &str, l: &str| d.values_on(m, None, Some(l));
        assert!((on("utilization", "p2").unwrap()[0] - 70.0).abs() < 1e-9);
        assert_eq!(on("queue_delay_ms", "p2").unwrap(), vec![4.0]);
        assert_eq!(on("drops", "p1").unwrap(), vec![1.0]);
        let e = on("utilization", "p9").unwrap_err().to_string();
        assert!(e.contains("p1, p2"), "{e}");
        let e = on("goodput_mbps", "p1").unwrap_err().to_string();
        assert!(e.contains("flow metric"), "{e}");
    }

    /// `summary` as a run directory's summary.json, read (the directory
    /// lives as long as the first half).
    fn loaded(summary: &serde_json::Value) -> (tempfile::TempDir, RunData) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("summary.json"), summary.to_string()).unwrap();
        let d = RunData::load(dir.path()).unwrap();
        (dir, d)
    }

    #[test]
    fn share_is_the_selected_flows_part_of_all_goodput() {
        let summary = serde_json::json!({
            "bottleneck": {"direction": "down"},
            "repetitions": [{
                "rep": 1,
                "bottleneck": {"utilization": 0.9},
                "flows": [{"index": 0, "cc": "vegas", "goodput_bps": 3e6, "base_rtt_ms": 20.0},
                          {"index": 1, "cc": "tcp:cubic", "goodput_bps": 9e6, "base_rtt_ms": 80.0}]
            }]
        });
        let (_dir, d) = loaded(&summary);
        assert_eq!(d.values("share", Some("#0")).unwrap(), vec![25.0]);
        assert_eq!(d.values("share", Some("tcp")).unwrap(), vec![75.0]);
        assert_eq!(d.values("share", None).unwrap(), vec![100.0]);
        assert_eq!(d.values("base_rtt_ms", Some("#1")).unwrap(), vec![80.0]);
    }

    #[test]
    fn recoveries_rtt_minimum_and_a_controllers_last_metric() {
        let summary = serde_json::json!({
            "bottleneck": {"direction": "down"},
            "repetitions": [{
                "rep": 1,
                "bottleneck": {"utilization": 0.9, "recoveries": [
                    {"at_s": 10.0, "change": "rate 5mbit", "recovery_s": 0.5},
                    {"at_s": 20.0, "change": "rate 20mbit", "recovery_s": 1.5},
                    {"at_s": 25.0, "change": "delay 100ms", "recovery_s": null}]},
                "flows": [{"index": 0, "cc": "bbr3", "rtt_ms": {"min": 40.5, "mean": 50.0, "p95": 70.0},
                           "metrics_last": {"bbr_max_bw_bps": 2e7}}]
            }]
        });
        let (_dir, d) = loaded(&summary);
        assert_eq!(d.values("recovery_s", None).unwrap(), vec![1.0]);
        assert_eq!(d.values("unrecovered", None).unwrap(), vec![1.0]);
        assert_eq!(d.values("rtt_min_ms", None).unwrap(), vec![40.5]);
        assert_eq!(d.values("last:bbr_max_bw_bps", None).unwrap(), vec![2e7]);
        // A metric the controller never logged reads NaN, not an error.
        assert!(d.values("last:nothing", None).unwrap()[0].is_nan());
        assert!(d.values("speed", None).is_err());
        assert!(crate::reproduce::manifest::is_metric("last:x"));
        assert!(!crate::reproduce::manifest::is_metric("last:"));
    }

    #[test]
    fn first_flow_metrics_count_each_links_first_flow_from_its_packet_log() {
        use crate::bottleneck::{Kind, Record, Sink, Writer};
        let dir = tempfile::tempdir().unwrap();
        let link = |bytes: u64, loss: f64, q: f64, flows: &[u64]| {
            serde_json::json!({"drops": 0, "bytes": bytes, "loss_rate": loss,
                "queue_delay_ms_mean": q, "utilization": 0.5, "utilization_steady": 0.5, "flows": flows})
        };
        let flows: Vec<serde_json::Value> = (0..5)
            .map(|i| serde_json::json!({"index": i, "cc": "vegas"}))
            .collect();
        let summary = serde_json::json!({
            "bottleneck": {"direction": "down"},
            "repetitions": [{
                "rep": 1,
                "bottleneck": link(900, 0.1, 2.0, &[0]),
                "links": {"p1": link(900, 0.1, 2.0, &[0]), "p2": link(3000, 0.5, 10.0, &[1, 2, 3, 4])},
                "flows": flows
            }]
        });
        std::fs::write(dir.path().join("summary.json"), summary.to_string()).unwrap();
        // The run's scenario: where each link's log is.
        std::fs::write(
            dir.path().join("scenario.toml"),
            "name = \"t\"\n[link]\nrate = \"1mbit\"\n[[links]]\nname = \"p1\"\n[[links]]\nname = \"p2\"\n[[flows]]\ncc = \"vegas\"\ncount = 5\n",
        )
        .unwrap();
        let d = RunData::load(dir.path()).unwrap();
        // Without the logs the metric says what it needs.
        let e = d.values("delivery_first", None).unwrap_err().to_string();
        assert!(e.contains("per-packet log"), "{e}");
        // p1 (the first link, in the repetition's directory): flow 0, 9
        // packets through after 2 ms queued, 1 dropped. p2 (links/p2/):
        // its first flow 1, 3 through after 10 ms and 3 dropped; flow 2's
        // packets, and flow 1's in the other direction, do not count.
        let rec = |flow: u16, dir: u8, kind: Kind, sojourn_ms: u32| Record {
            flow,
            dir,
            kind: kind as u8,
            sojourn_ns: sojourn_ms * 1_000_000,
            size: 1000,
            ..Record::default()
        };
        let write = |path: std::path::PathBuf, recs: Vec<Record>| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let mut w = Writer::create(&path, &serde_json::json!({})).unwrap();
            for r in &recs {
                w.record(r);
            }
            w.finish().unwrap();
        };
        let rep = dir.path().join("rep-1");
        let mut p1 = vec![rec(0, 1, Kind::Depart, 2); 9];
        p1.push(rec(0, 1, Kind::Drop, 0));
        write(rep.join("bottleneck.bin"), p1);
        let mut p2 = vec![rec(1, 1, Kind::Depart, 10); 3];
        p2.extend(vec![rec(1, 1, Kind::Drop, 0); 3]);
        p2.extend(vec![rec(2, 1, Kind::Depart, 50); 10]);
        p2.extend(vec![rec(1, 0, Kind::Drop, 0); 5]);
        write(rep.join("links/p2/bottleneck.bin"), p2);
        let first = d.values("delivery_first", None).unwrap()[0];
        assert!((first - 100.0 * 12.0 / 16.0).abs() < 1e-9, "{first}");
        let q = d.values("queue_delay_first_ms", None).unwrap()[0];
        assert!((q - (9.0 * 2.0 + 3.0 * 10.0) / 12.0).abs() < 1e-9, "{q}");
        // One link, or the links only some flows cross.
        let one = d.values_on("delivery_first", None, Some("p2")).unwrap()[0];
        assert!((one - 50.0).abs() < 1e-9, "{one}");
        let sel = d.values("delivery_first", Some("#0")).unwrap()[0];
        assert!((sel - 90.0).abs() < 1e-9, "{sel}");
        // Every flow's delivery is still the links' own.
        let all = d.values("delivery_ratio", None).unwrap()[0];
        assert!((all - 100.0 * 3900.0 / 7000.0).abs() < 1e-9, "{all}");
    }

    #[test]
    fn flow_metrics_aggregate_the_selected_flows() {
        let dir = tempfile::tempdir().unwrap();
        let summary = serde_json::json!({
            "bottleneck": {"direction": "down"},
            "repetitions": [{
                "rep": 1,
                "bottleneck": {"drops": 7, "utilization": 0.5, "queue_delay_ms_mean": 2.0, "loss_rate": 0.01},
                "jain_fairness": 0.9,
                "flows": [
                    {"index": 0, "cc": "exp:k=1", "bytes": 1000000, "goodput_bps": 4e6, "complete": true,
                     "rtt_ms": {"mean": 50.0, "p95": 60.0}, "cwnd_cv": 0.2, "cwnd_mean": 30000.0, "lost_packets": 3},
                    {"index": 1, "cc": "tahoe", "bytes": 3000000, "goodput_bps": 2e6, "complete": false,
                     "rtt_ms": {"mean": 70.0, "p95": 90.0}, "cwnd_cv": 0.4, "cwnd_mean": 10000.0, "lost_packets": 5}
                ]
            }]
        });
        std::fs::write(dir.path().join("summary.json"), summary.to_string()).unwrap();
        std::fs::create_dir(dir.path().join("rep-1")).unwrap();
        std::fs::write(
            dir.path().join("rep-1/bottleneck-samples.jsonl"),
            "{\"t_s\":0.1,\"dir\":\"down\",\"queue_packets\":2}\n{\"t_s\":0.1,\"dir\":\"up\",\"queue_packets\":9}\n{\"t_s\":0.2,\"dir\":\"down\",\"queue_packets\":4}\n",
        )
        .unwrap();
        let d = RunData::load(dir.path()).unwrap();
        assert_eq!(d.values("drops", None).unwrap(), vec![7.0]);
        assert_eq!(d.values("utilization", None).unwrap(), vec![50.0]);
        assert_eq!(d.values("queue_pkts", None).unwrap(), vec![3.0]);
        assert_eq!(d.values("delivery_ratio", None).unwrap(), vec![99.0]);
        assert_eq!(d.values("goodput_mbps", None).unwrap(), vec![6.0]);
        assert_eq!(d.values("goodput_mbps", Some("exp")).unwrap(), vec![4.0]);
        assert_eq!(d.values("rtt_ms", None).unwrap(), vec![60.0]);
        assert_eq!(d.values("completion_s", Some("#0")).unwrap(), vec![2.0]);
        assert!(d.values("completion_s", None).unwrap()[0].is_nan());
        assert!(d.values("data_mb", Some("absent")).is_err());
        assert!(d.values("nonsense", None).is_err());
    }

    #[test]
    fn eq7_is_the_square_root_law_of_the_flows_own_loss_and_rtt() {
        let dir = tempfile::tempdir().unwrap();
        let s = quic_app::MAX_DATAGRAM_SIZE as f64;
        // 9900 datagrams delivered and 100 lost: p = 1%, R = 100 ms.
        let flow = |i: u64, cc: &str, lost: Value, rtt: Value| {
            serde_json::json!({"index": i, "cc": cc, "bytes": 9900 * s as u64, "goodput_bps": 1e6,
                "rtt_ms": rtt, "lost_packets": lost})
        };
        let summary = serde_json::json!({"repetitions": [{"rep": 1, "flows": [
            flow(0, "exp", 100.into(), serde_json::json!({"mean": 100.0})),
            flow(1, "reno", 100.into(), serde_json::json!({"mean": 400.0})),
            flow(2, "tahoe", 0.into(), serde_json::json!({"mean": 100.0})),
            flow(3, "mimd", Value::Null, Value::Null),
        ]}]});
        std::fs::write(dir.path().join("summary.json"), summary.to_string()).unwrap();
        let d = RunData::load(dir.path()).unwrap();
        // c s / (R sqrt(p)) = 1.2247 x 1350 B / (0.1 s x 0.1) = 165.3 kB/s.
        let exp = d.values("eq7_mbps", Some("exp")).unwrap()[0];
        let want = 1.5 * (2.0f64 / 3.0).sqrt() * s / (0.1 * 0.1) * 8.0 / 1e6;
        assert!((exp - want).abs() < 1e-9, "{exp} vs {want}");
        assert!((exp - 1.3227).abs() < 1e-4, "{exp}");
        // Four times the RTT, a quarter of the throughput.
        let reno = d.values("eq7_mbps", Some("reno")).unwrap()[0];
        assert!((reno - want / 4.0).abs() < 1e-9, "{reno}");
        // Nothing lost, or no sender qlog: no value.
        assert!(d.values("eq7_mbps", Some("tahoe")).unwrap()[0].is_nan());
        assert!(d.values("eq7_mbps", Some("mimd")).unwrap()[0].is_nan());
    }
}
