//! Per-connection summaries, and fairness and utilization across them.

use std::collections::BTreeMap;
use std::path::Path;

use crate::analysis::{Analyzer, AppBytes, Connection, Counts, LossSource};
use crate::reader::{read_file, ReadError, ReadStats};

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
    /// Bytes sent and received on the wire.
    pub wire_bytes: (u64, u64),
    /// Application byte counts.
    pub app_bytes: AppBytes,
    /// Event counts.
    pub counts: Counts,
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
            wire_bytes: c.wire,
            app_bytes: c.app,
            counts: c.counts,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[5.0, 5.0, 5.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }
}
