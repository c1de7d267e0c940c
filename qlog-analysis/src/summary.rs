//! Per-connection summaries, and fairness and utilization across them.
//!
//! Besides the figures, a [`Summary`] carries the conditions the run was
//! made under when the trace says so: `conditions` is the data of the
//! trace's first `simulation:scenario` event as written (the harness
//! writes `{"scenario", "backend", "seed", "duration_s", "link": {...},
//! "flows": [...], "cross": [...]}`), or null; `markers` lists the
//! `simulation:marker` events (changes of conditions during the run) as
//! `{t_s, data}`, at most [`MAX_MARKERS`](crate::analysis::MAX_MARKERS) of them, with
//! `markers_dropped` counting the rest. [`describe_conditions`] and
//! [`describe_markers`] put them in one line each for people.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::analysis::{Analyzer, AppBytes, Connection, Counts, LossSource, Marker, PacketMix};
use crate::reader::{read_file, ReadError, ReadStats};
use crate::slow_start::SlowStartSummary;
use crate::units::{parse_duration_ms, parse_rate};

/// Goodput figures, bit/s.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Goodput {
    /// Application bytes over the time they took (first to last delivery).
    pub mean_bps: f64,
    /// Median of the per-bin goodput.
    pub bin_p50_bps: f64,
    /// 95th percentile of the per-bin goodput.
    pub bin_p95_bps: f64,
    /// Bin width, s.
    pub bin_s: f64,
}

/// RTT figures, ms.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Rtt {
    /// Minimum.
    pub min: f64,
    /// Mean of the samples.
    pub mean: f64,
    /// 95th percentile of the samples (±1%).
    pub p95: f64,
}

/// Loss figures.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LossSummary {
    /// Packets lost.
    pub packets: u64,
    /// Bytes lost, where the trace tells.
    pub bytes: u64,
    /// Lost packets / packets sent.
    pub rate: f64,
    /// Where the losses came from.
    pub source: LossSource,
}

/// cwnd figures (time-weighted), bytes.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Cwnd {
    /// Mean.
    pub mean: f64,
    /// Coefficient of variation (standard deviation / mean).
    pub cv: f64,
}

/// One connection's summary.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// The file.
    pub file: String,
    /// Trace index in the file.
    pub trace: usize,
    /// qlog flavour.
    pub format: String,
    /// client, server, ...
    pub vantage_point: String,
    /// Title.
    pub title: String,
    /// First to last event, s.
    pub duration_s: f64,
    /// Application bytes delivered (see `bytes_basis`).
    pub bytes: u64,
    /// `received` (this end received them), `acked` (this end sent them
    /// and the peer acknowledged them), or `none`.
    pub bytes_basis: String,
    /// Goodput, when application data moved.
    pub goodput: Option<Goodput>,
    /// RTT, when logged.
    pub rtt_ms: Option<Rtt>,
    /// `latest_rtt` or `smoothed_rtt`.
    pub rtt_source: String,
    /// Mean smoothed RTT / minimum RTT.
    pub rtt_inflation: Option<f64>,
    /// Losses.
    pub loss: LossSummary,
    /// Stream bytes sent more than once.
    pub retransmitted_bytes: u64,
    /// cwnd, when logged.
    pub cwnd: Option<Cwnd>,
    /// Seconds in each congestion state.
    pub time_in_state_s: BTreeMap<String, f64>,
    /// The last value of each of the sender's own metrics (a plugin's,
    /// such as `smcc_alpha`), by name; empty when none was logged.
    pub metrics_last: BTreeMap<String, f64>,
    /// How the first slow start ended (null when the trace logs no
    /// congestion states): [`crate::slow_start`].
    pub slow_start: Option<SlowStartSummary>,
    /// Bytes sent and received on the wire.
    pub wire_bytes: (u64, u64),
    /// Application byte counts.
    pub app_bytes: AppBytes,
    /// Event counts.
    pub counts: Counts,
    /// Data packet sizes and ACKs sent (from packet events; zeros when the
    /// trace logged none).
    pub packets: PacketMix,
    /// The run's conditions: the data of the trace's first
    /// `simulation:scenario` event as written, or null when it has none.
    pub conditions: Option<Value>,
    /// `simulation:marker` events, `{t_s, data}` (s since the trace's
    /// first event, data as written), at most [`MAX_MARKERS`](crate::analysis::MAX_MARKERS).
    pub markers: Vec<Marker>,
    /// Markers past [`MAX_MARKERS`](crate::analysis::MAX_MARKERS), counted but not listed.
    pub markers_dropped: u64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1);
    sorted[i]
}

impl Summary {
    /// Summarises an analysed connection.
    pub fn of(file: &str, c: &Connection) -> Summary {
        let (bytes, basis, pick): (u64, &str, fn(&crate::analysis::Bin) -> u64) =
            if c.app.received >= c.app.acked && c.app.received > 0 {
                (c.app.received, "received", |b| b.app_received)
            } else if c.app.acked > 0 {
                (c.app.acked, "acked", |b| b.app_acked)
            } else {
                (0, "none", |_| 0)
            };
        let goodput = c.app_span.filter(|_| bytes > 0).map(|(a, b)| {
            let first = (a / c.bin_s) as usize;
            let last = ((b / c.bin_s) as usize).min(c.bins.len().saturating_sub(1));
            // Whole bins only: drop the partial last one when there are others.
            let end = if last > first { last } else { last + 1 };
            let mut rates: Vec<f64> = c.bins[first.min(end)..end.min(c.bins.len())]
                .iter()
                .map(|x| pick(x) as f64 * 8.0 / c.bin_s)
                .collect();
            rates.sort_by(f64::total_cmp);
            let span = if b > a { b - a } else { c.bin_s };
            Goodput {
                mean_bps: bytes as f64 * 8.0 / span,
                bin_p50_bps: quantile(&rates, 0.5),
                bin_p95_bps: quantile(&rates, 0.95),
                bin_s: c.bin_s,
            }
        });
        let rtt_ms = c.rtt.mean().map(|mean| Rtt {
            min: c.min_rtt_ms.unwrap_or_else(|| c.rtt.min().unwrap_or(0.0)),
            mean,
            p95: c.rtt.quantile(0.95).unwrap_or(0.0),
        });
        let rtt_inflation = match (c.srtt_sum, c.min_rtt_ms) {
            ((sum, n), Some(min)) if n > 0 && min > 0.0 => Some(sum / n as f64 / min),
            _ => None,
        };
        let cwnd = (c.cwnd_tw.2 > 0.0).then(|| {
            let mean = c.cwnd_tw.0 / c.cwnd_tw.2;
            let var = (c.cwnd_tw.1 / c.cwnd_tw.2 - mean * mean).max(0.0);
            Cwnd {
                mean,
                cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
            }
        });
        Summary {
            file: file.to_string(),
            trace: c.info.index,
            format: c.info.format.clone(),
            vantage_point: c.info.vantage_point.clone(),
            title: c.info.title.clone(),
            duration_s: c.end_s,
            bytes,
            bytes_basis: basis.into(),
            goodput,
            rtt_ms,
            rtt_source: if c.rtt.count() == 0 {
                "none"
            } else if c.rtt_from_latest {
                "latest_rtt"
            } else {
                "smoothed_rtt"
            }
            .into(),
            rtt_inflation,
            loss: LossSummary {
                packets: c.lost.0,
                bytes: c.lost.1,
                rate: if c.counts.packets_sent > 0 {
                    c.lost.0 as f64 / c.counts.packets_sent as f64
                } else {
                    0.0
                },
                source: c.loss_source,
            },
            retransmitted_bytes: c.app.retransmitted,
            cwnd,
            time_in_state_s: c.state_time.clone(),
            metrics_last: c.extra_last.clone(),
            slow_start: c.slow_start.summary(
                c.end_s,
                c.loss_source == LossSource::PacketLost,
                c.min_rtt_ms,
            ),
            wire_bytes: c.wire,
            app_bytes: c.app,
            counts: c.counts,
            packets: c.mix.mix(),
            conditions: c.conditions.clone(),
            markers: c.markers.clone(),
            markers_dropped: c.counts.markers.saturating_sub(c.markers.len() as u64),
        }
    }
}

/// Summaries of one file, with what reading it found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FileSummary {
    /// The file.
    pub file: String,
    /// Skipped records, truncation.
    pub read: ReadStats,
    /// One per trace.
    pub connections: Vec<Summary>,
}

/// Reads and summarises one file (streaming: no series are kept).
pub fn summarize_file(path: &Path, bin_s: f64) -> Result<FileSummary, ReadError> {
    let mut a = Analyzer::new(bin_s, false);
    let read = read_file(path, &mut a)?;
    let file = path.display().to_string();
    Ok(FileSummary {
        connections: a
            .connections
            .iter()
            .map(|c| Summary::of(&file, c))
            .collect(),
        file,
        read,
    })
}

/// Fairness and utilization across connections.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Aggregate {
    /// Connections with goodput.
    pub connections: usize,
    /// Sum of their mean goodputs, bit/s.
    pub total_goodput_bps: f64,
    /// Jain's fairness index over their goodputs (1 = equal shares).
    pub jain_fairness: Option<f64>,
    /// The link capacity given, bit/s.
    pub capacity_bps: Option<f64>,
    /// total goodput / capacity.
    pub utilization: Option<f64>,
}

/// Jain's index, (Σx)² / (n·Σx²); `None` for no values or all zero.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let n = xs.len() as f64;
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    (n > 0.0 && s2 > 0.0).then(|| s * s / (n * s2))
}

/// Fairness over the connections that moved data; utilization when a
/// capacity is given.
pub fn aggregate(summaries: &[&Summary], capacity_bps: Option<f64>) -> Aggregate {
    let g: Vec<f64> = summaries
        .iter()
        .filter_map(|s| s.goodput.as_ref().map(|g| g.mean_bps))
        .collect();
    let total: f64 = g.iter().sum();
    Aggregate {
        connections: g.len(),
        total_goodput_bps: total,
        jain_fairness: jain(&g),
        capacity_bps,
        utilization: capacity_bps.filter(|c| *c > 0.0).map(|c| total / c),
    }
}

fn short_num(x: f64) -> String {
    format!("{}", (x * 1000.0).round() / 1000.0)
}

fn rate_text(bps: f64) -> String {
    for (unit, m) in [("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)] {
        if bps >= m {
            return format!("{} {unit}", short_num(bps / m));
        }
    }
    format!("{} bit/s", short_num(bps))
}

/// A rate: a number of bit/s or a tc-style string (`20mbit`).
fn rate_of(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str().and_then(parse_rate))
}

/// A time: a number of ms or a string with its unit (`20ms`).
fn ms_of(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(parse_duration_ms))
}

/// The rate of a link (or of one of its directions), bit/s.
fn link_rate(l: &Value) -> Option<f64> {
    l.get("rate_bps")
        .or_else(|| l.get("rate"))
        .and_then(rate_of)
}

/// The rate and RTT a scenario's `link` object gives: the harness's
/// `{up: {rate, delay, ...}, down: {...}}`, or flat `rate`/`rate_bps` and
/// `rtt`/`rtt_ms` (or a one-way `delay`/`delay_ms`). Returns (down rate,
/// up rate, RTT in ms, down trace).
fn link_facts(link: &Value) -> (Option<f64>, Option<f64>, Option<f64>, Option<String>) {
    let (up, down) = (link.get("up"), link.get("down"));
    let one_way = |l: &Value| l.get("delay_ms").or_else(|| l.get("delay")).and_then(ms_of);
    let flat_rtt = link
        .get("rtt_ms")
        .or_else(|| link.get("rtt"))
        .and_then(ms_of);
    if up.is_none() && down.is_none() {
        let rtt = flat_rtt.or_else(|| one_way(link).map(|d| 2.0 * d));
        return (link_rate(link), None, rtt, None);
    }
    let rtt = flat_rtt.or(match (up.and_then(one_way), down.and_then(one_way)) {
        (Some(a), Some(b)) => Some(a + b),
        (Some(a), None) | (None, Some(a)) => Some(2.0 * a),
        (None, None) => None,
    });
    let trace = down
        .and_then(|d| d.get("trace"))
        .and_then(Value::as_str)
        .map(|p| p.rsplit(['/', '\\']).next().unwrap_or(p).to_string());
    (
        down.and_then(link_rate).or_else(|| link_rate(link)),
        up.and_then(link_rate),
        rtt,
        trace,
    )
}

/// One line describing a `simulation:scenario` object: scenario, backend,
/// seed, duration, link rate and RTT (when the `link` object tells), and
/// the flows by congestion controller.
pub fn describe_conditions(c: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(name) = c.get("scenario").and_then(Value::as_str) {
        parts.push(format!("scenario {name}"));
    }
    let link = c.get("link").filter(|l| l.is_object());
    let backend = c
        .get("backend")
        .or_else(|| link.and_then(|l| l.get("backend")))
        .and_then(Value::as_str);
    if let Some(b) = backend {
        parts.push(format!("backend {b}"));
    }
    if let Some(seed) = c.get("seed").filter(|v| v.is_number()) {
        parts.push(format!("seed {seed}"));
    }
    if let Some(d) = c.get("duration_s").and_then(Value::as_f64) {
        parts.push(format!("{} s", short_num(d)));
    }
    if let Some(l) = link {
        let (down, up, rtt, trace) = link_facts(l);
        let mut lp = Vec::new();
        match (down, up, trace) {
            (_, _, Some(t)) => lp.push(format!("trace {t}")),
            (Some(d), Some(u), None) if (d - u).abs() > 1e-9 * d.abs().max(1.0) => {
                lp.push(format!("{} down, {} up", rate_text(d), rate_text(u)))
            }
            (Some(d), _, None) | (None, Some(d), None) => lp.push(rate_text(d)),
            (None, None, None) => {}
        }
        if let Some(r) = rtt {
            lp.push(format!("rtt {} ms", short_num(r)));
        }
        if !lp.is_empty() {
            parts.push(format!("link {}", lp.join(", ")));
        }
    }
    if let Some(flows) = c.get("flows").and_then(Value::as_array) {
        let mut ccs: Vec<(String, usize)> = Vec::new();
        for f in flows {
            let cc = f.get("cc").and_then(Value::as_str).unwrap_or("?");
            match ccs.iter_mut().find(|(n, _)| n == cc) {
                Some((_, k)) => *k += 1,
                None => ccs.push((cc.to_string(), 1)),
            }
        }
        let list: Vec<String> = ccs
            .iter()
            .map(|(n, k)| {
                if *k > 1 {
                    format!("{n} x{k}")
                } else {
                    n.clone()
                }
            })
            .collect();
        let n = flows.len();
        let mut f = format!("{n} flow{}", if n == 1 { "" } else { "s" });
        if !list.is_empty() {
            f += &format!(" ({})", list.join(", "));
        }
        parts.push(f);
    }
    if let Some(cross) = c.get("cross").and_then(Value::as_array) {
        if !cross.is_empty() {
            parts.push(format!("{} cross-traffic source(s)", cross.len()));
        }
    }
    if parts.is_empty() {
        "(no fields this tool knows)".into()
    } else {
        parts.join(", ")
    }
}

/// One line counting markers and naming the first few (their `type`, and
/// time): `2 markers: flow_start at 0 s, flow_start at 5 s`.
pub fn describe_markers(markers: &[Marker], dropped: u64) -> String {
    let n = markers.len() as u64 + dropped;
    let mut s = format!("{n} marker{}", if n == 1 { "" } else { "s" });
    let shown: Vec<String> = markers
        .iter()
        .take(5)
        .map(|m| {
            let ty = m
                .data
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("marker");
            format!("{ty} at {} s", short_num(m.t_s))
        })
        .collect();
    if !shown.is_empty() {
        s += &format!(": {}", shown.join(", "));
        if n > shown.len() as u64 {
            s += ", ...";
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_in_one_line() {
        let c = serde_json::json!({
            "scenario": "cli", "backend": "sim", "seed": 1, "duration_s": 10.0,
            "link": {"backend": "sim", "seed": 1,
                "up": {"rate": "20mbit", "delay": "20ms", "queue": "1bdp"},
                "down": {"rate": "20mbit", "delay": "20ms", "queue": "1bdp"}},
            "flows": [{"cc": "cubic", "direction": "download", "start_s": 0.0, "size": null},
                      {"cc": "vegas", "direction": "download", "start_s": 5.0, "size": null},
                      {"cc": "cubic", "direction": "download", "start_s": 5.0, "size": null}],
            "cross": []
        });
        assert_eq!(
            describe_conditions(&c),
            "scenario cli, backend sim, seed 1, 10 s, link 20 Mbit/s, rtt 40 ms, 3 flows (cubic x2, vegas)"
        );
        let flat = serde_json::json!({"link": {"rate_bps": 5e5, "rtt_ms": 12.5}, "flows": []});
        assert_eq!(
            describe_conditions(&flat),
            "link 500 kbit/s, rtt 12.5 ms, 0 flows"
        );
        let asym = serde_json::json!({"link": {"up": {"rate": "1mbit", "delay": "5ms"}, "down": {"rate": "1gbit", "delay": "15ms"}}});
        assert_eq!(
            describe_conditions(&asym),
            "link 1 Gbit/s down, 1 Mbit/s up, rtt 20 ms"
        );
        assert_eq!(
            describe_conditions(&serde_json::json!({})),
            "(no fields this tool knows)"
        );
    }

    #[test]
    fn markers_in_one_line() {
        let m = |t: f64| Marker {
            t_s: t,
            data: serde_json::json!({"type": "flow_start", "flow": 1}),
        };
        assert_eq!(describe_markers(&[], 0), "0 markers");
        assert_eq!(
            describe_markers(&[m(0.0), m(5.0)], 0),
            "2 markers: flow_start at 0 s, flow_start at 5 s"
        );
        assert_eq!(
            describe_markers(&[m(1.5)], 3),
            "4 markers: flow_start at 1.5 s, ..."
        );
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[5.0, 5.0, 5.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }
}
