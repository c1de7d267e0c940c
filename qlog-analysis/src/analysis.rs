//! Turns a trace's events into series and a summary.
//!
//! [`Analyzer`] is a [`Sink`]: feed it a file with [`crate::read_file`]
//! and take one [`Connection`] per trace. Summary statistics are kept
//! streaming (time-weighted sums, a log-scale RTT histogram, fixed-width
//! goodput bins), so summarising a file needs memory independent of its
//! length; the point series are kept only when asked for.
//!
//! Choices, for the record:
//! - **Loss events** come from `packet_lost` events when the trace has any;
//!   otherwise from the increments of loss counters in metrics updates
//!   (quiche's `cf_lost_packets`, `lost_packets`); otherwise they are
//!   inferred: a sent packet not acknowledged by any ACK frame the trace
//!   received, while later packets of its space were, counts as lost once
//!   the trace has seen ACKs 1 s past its send time (or at the end). The
//!   source used is in [`Connection::loss_source`].
//! - **Application bytes** ("goodput") are the bytes that reached the
//!   application on a receiver (`stream_data_moved` to the application, or
//!   else new stream-frame bytes received), and on a sender the new
//!   stream-frame bytes in packets the peer acknowledged. Whichever side
//!   the trace is, the larger of the two is its connection's goodput.
//! - **RTT statistics** use the `latest_rtt` samples when the trace logs
//!   them, else the `smoothed_rtt` updates ([`Summary::rtt_source`]).
//! - **cwnd mean and coefficient of variation** are weighted by the time
//!   each value held, up to the trace's last event.
//! - Retransmitted bytes are stream bytes sent again below the highest
//!   offset already sent on that stream.
//! - **Run conditions**: the data of a trace's first `simulation:scenario`
//!   event is kept whole in [`Connection::conditions`] (later ones are
//!   ignored), and every `simulation:marker` in [`Connection::markers`]
//!   with its time, whether or not series are kept; past [`MAX_MARKERS`]
//!   they are only counted ([`Counts::markers`]).

use std::collections::{BTreeMap, HashMap};

use crate::event::{Kind, Metrics, Packet, Space};
use crate::reader::{Event, Parsed, Sink, TraceInfo};
use crate::slow_start::SlowStartTracker;

/// Where loss events came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossSource {
    /// `packet_lost` events.
    PacketLost,
    /// Loss counters in metrics updates.
    Counters,
    /// Sent packets never acknowledged.
    Inferred,
    /// The trace gives no way to tell.
    #[default]
    None,
}

/// One loss event.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Loss {
    /// When it was declared (or, inferred, when the packet was sent), s.
    pub t: f64,
    /// Packets lost in this event.
    pub packets: u64,
    /// Bytes, when known.
    pub bytes: Option<u64>,
    /// Packet number, when known.
    pub packet_number: Option<u64>,
}

/// Markers kept per connection; further ones are only counted.
pub const MAX_MARKERS: usize = 10_000;

/// One `simulation:marker` event: a change of conditions during the run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Marker {
    /// When, s since the trace's first event.
    pub t_s: f64,
    /// The event's data as written (`{"type": "flow_start", ...}`), or
    /// null when it had none.
    pub data: serde_json::Value,
}

/// Per-bin byte counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Bin {
    /// Bytes sent on the wire.
    pub sent: u64,
    /// Bytes received on the wire.
    pub received: u64,
    /// Application bytes delivered (receiver) in the bin.
    pub app_received: u64,
    /// Application bytes the peer acknowledged (sender) in the bin.
    pub app_acked: u64,
}

/// Time series of one connection. Times in seconds from the trace start.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Series {
    /// Congestion window, bytes.
    pub cwnd: Vec<(f64, f64)>,
    /// Bytes in flight.
    pub bytes_in_flight: Vec<(f64, f64)>,
    /// Slow-start threshold, bytes (sentinels dropped).
    pub ssthresh: Vec<(f64, f64)>,
    /// Pacing rate, bit/s.
    pub pacing_rate_bps: Vec<(f64, f64)>,
    /// Latest RTT, ms.
    pub latest_rtt_ms: Vec<(f64, f64)>,
    /// Smoothed RTT, ms.
    pub smoothed_rtt_ms: Vec<(f64, f64)>,
    /// Minimum RTT, ms.
    pub min_rtt_ms: Vec<(f64, f64)>,
    /// RTT variance, ms.
    pub rtt_variance_ms: Vec<(f64, f64)>,
    /// Loss events.
    pub losses: Vec<Loss>,
    /// Congestion-state changes: (time, new state).
    pub states: Vec<(f64, String)>,
    /// Any other metric the trace logged (a plugin's own), by name.
    pub extra: BTreeMap<String, Vec<(f64, f64)>>,
}

/// Percentiles over a log-scale histogram (1% buckets from 1 µs to 1000 s).
#[derive(Clone, Debug)]
pub struct LogHistogram {
    counts: Vec<u64>,
    n: u64,
    sum: f64,
    min: f64,
    max: f64,
}

const H_LO: f64 = 1e-3; // ms
const H_RATIO: f64 = 1.01;

impl Default for LogHistogram {
    fn default() -> Self {
        let buckets = ((1e6f64 / H_LO).ln() / H_RATIO.ln()).ceil() as usize + 2;
        LogHistogram {
            counts: vec![0; buckets],
            n: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl LogHistogram {
    /// Adds a value (ms).
    pub fn add(&mut self, v: f64) {
        if !v.is_finite() || v < 0.0 {
            return;
        }
        let i = if v <= H_LO {
            0
        } else {
            (((v / H_LO).ln() / H_RATIO.ln()) as usize + 1).min(self.counts.len() - 1)
        };
        self.counts[i] += 1;
        self.n += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
    /// Values added.
    pub fn count(&self) -> u64 {
        self.n
    }
    /// Mean (exact).
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
    /// Minimum (exact).
    pub fn min(&self) -> Option<f64> {
        (self.n > 0).then_some(self.min)
    }
    /// The q-quantile, within 1% (clamped to the exact min and max).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let want = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= want {
                let v = if i == 0 {
                    H_LO
                } else {
                    H_LO * H_RATIO.powf(i as f64 - 0.5)
                };
                return Some(v.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

#[derive(Clone, Copy, Debug)]
struct SentInfo {
    t: f64,
    size: u64,
    app_new: u64,
}

/// Everything the analysis learned about one connection (one trace).
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// The trace's facts.
    pub info: TraceInfo,
    /// Point series (empty unless asked for).
    pub series: Series,
    /// Where losses came from.
    pub loss_source: LossSource,
    /// Goodput bins.
    pub bins: Vec<Bin>,
    /// Bin width, s.
    pub bin_s: f64,
    /// Last event time, s.
    pub end_s: f64,
    /// Events seen, by kind: metrics, sent, received, lost, state, moved, other.
    pub counts: Counts,
    /// First and last times application data moved, s.
    pub app_span: Option<(f64, f64)>,
    /// Wire bytes sent and received.
    pub wire: (u64, u64),
    /// Application bytes: received, sent (new), acked (new), retransmitted.
    pub app: AppBytes,
    /// Sizes of the packets this end sent carrying stream data, and counts
    /// of ACK-only packets sent and data packets received.
    pub mix: PacketMixCounts,
    /// Lost packets and bytes (bytes where known).
    pub lost: (u64, u64),
    /// RTT samples (latest, else smoothed), ms.
    pub rtt: LogHistogram,
    /// Whether `rtt` holds latest_rtt samples.
    pub rtt_from_latest: bool,
    /// The data of the trace's first `simulation:scenario` event: the
    /// conditions of the run (backend, link, flows, ...).
    pub conditions: Option<serde_json::Value>,
    /// `simulation:marker` events, in order (at most [`MAX_MARKERS`]).
    pub markers: Vec<Marker>,
    /// Smoothed RTT: sum and count, for the inflation ratio (only updates
    /// from the first latest_rtt sample on, when the trace has any: before
    /// it, implementations log their initial placeholder, quiche's 333 ms).
    pub srtt_sum: (f64, u64),
    srtt_before_latest: (f64, u64),
    /// Minimum RTT seen in any field, ms.
    pub min_rtt_ms: Option<f64>,
    /// Time-weighted cwnd: (∫cwnd dt, ∫cwnd² dt, ∫dt).
    pub cwnd_tw: (f64, f64, f64),
    /// Seconds in each congestion state.
    pub state_time: BTreeMap<String, f64>,
    /// The last value of each metric the trace logged besides the
    /// standard ones (a plugin's own, such as `smcc_alpha`), by name.
    pub extra_last: BTreeMap<String, f64>,
    cur_state: Option<(String, f64)>,
    last_cwnd: Option<(f64, f64)>,
    last_lost_counter: Option<f64>,
    sent: BTreeMap<(u8, u64), SentInfo>,
    /// The first slow start: when and why it ended, what it overshot.
    pub slow_start: SlowStartTracker,
    max_offset: HashMap<u64, u64>,
    recv_offset: HashMap<u64, u64>,
    moved_to_app: bool,
    acks_seen_until: f64,
    inferred: Vec<Loss>,
    keep_series: bool,
}

/// How many events of each kind a trace had.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Every event.
    pub events: u64,
    /// Metrics updates.
    pub metrics_updated: u64,
    /// Metrics updates that carried cwnd.
    pub cwnd_points: u64,
    /// Metrics updates that carried an RTT used for statistics.
    pub rtt_samples: u64,
    /// packet_sent.
    pub packets_sent: u64,
    /// packet_received.
    pub packets_received: u64,
    /// packet_lost events.
    pub packet_lost_events: u64,
    /// Congestion-state updates.
    pub state_updates: u64,
    /// `simulation:marker` events (all of them, kept or not).
    pub markers: u64,
}

/// What [`PacketMix`] is computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketMixCounts {
    /// Packets sent with stream data, by size in bytes.
    pub data_sizes: BTreeMap<u64, u64>,
    /// Packets sent carrying an ACK frame and nothing ack-eliciting.
    pub ack_only_sent: u64,
    /// Packets received with stream data.
    pub data_received: u64,
}

/// Which packets an end sent: how full its data packets were, and how
/// often it acknowledged the data it received.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PacketMix {
    /// Packets sent carrying stream data.
    pub data_packets: u64,
    /// Their mean size on the wire, bytes (0 without any).
    pub data_mean_bytes: f64,
    /// The largest of them, bytes: the full size this end sent.
    pub data_max_bytes: u64,
    /// Share of them smaller than [`SMALL_PACKET_FRACTION`] of the largest:
    /// sent with less than a full packet's data or room.
    pub data_small_share: f64,
    /// ACK-only packets sent (an ACK frame, nothing ack-eliciting).
    pub ack_only_packets: u64,
    /// Packets received carrying stream data.
    pub data_packets_received: u64,
    /// `ack_only_packets / data_packets_received`, when it received data.
    pub acks_per_data_packet: Option<f64>,
}

/// A data packet below this fraction of the largest one an end sent counts
/// as small in [`PacketMix::data_small_share`] (1282 of 1350 bytes).
pub const SMALL_PACKET_FRACTION: f64 = 0.95;

impl PacketMixCounts {
    /// The summary figures.
    pub fn mix(&self) -> PacketMix {
        let n: u64 = self.data_sizes.values().sum();
        let bytes: u64 = self.data_sizes.iter().map(|(s, c)| s * c).sum();
        let max = self.data_sizes.keys().next_back().copied().unwrap_or(0);
        let cut = max as f64 * SMALL_PACKET_FRACTION;
        let small: u64 = self
            .data_sizes
            .iter()
            .filter(|(&s, _)| (s as f64) < cut)
            .map(|(_, c)| c)
            .sum();
        PacketMix {
            data_packets: n,
            data_mean_bytes: if n > 0 { bytes as f64 / n as f64 } else { 0.0 },
            data_max_bytes: max,
            data_small_share: if n > 0 { small as f64 / n as f64 } else { 0.0 },
            ack_only_packets: self.ack_only_sent,
            data_packets_received: self.data_received,
            acks_per_data_packet: (self.data_received > 0)
                .then(|| self.ack_only_sent as f64 / self.data_received as f64),
        }
    }
}

/// Application byte counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AppBytes {
    /// Delivered to the application (receiver).
    pub received: u64,
    /// New stream bytes sent.
    pub sent: u64,
    /// New stream bytes the peer acknowledged.
    pub acked: u64,
    /// Stream bytes sent again.
    pub retransmitted: u64,
}

fn space_code(s: Space) -> u8 {
    match s {
        Space::Initial => 0,
        Space::Handshake => 1,
        Space::App => 2,
    }
}

impl Connection {
    fn new(info: &TraceInfo, bin_s: f64, keep_series: bool) -> Connection {
        Connection {
            info: info.clone(),
            bin_s,
            keep_series,
            ..Connection::default()
        }
    }

    fn bin(&mut self, t: f64) -> &mut Bin {
        let i = (t.max(0.0) / self.bin_s) as usize;
        // Guard against absurd times blowing up memory (a year of 1 ms bins).
        let i = i.min(50_000_000);
        if self.bins.len() <= i {
            self.bins.resize(i + 1, Bin::default());
        }
        &mut self.bins[i]
    }

    fn app_event(&mut self, t: f64) {
        self.app_span = Some(match self.app_span {
            None => (t, t),
            Some((a, _)) => (a, t),
        });
    }

    fn push(&mut self, which: fn(&mut Series) -> &mut Vec<(f64, f64)>, t: f64, v: Option<f64>) {
        if let (true, Some(v)) = (self.keep_series, v) {
            which(&mut self.series).push((t, v));
        }
    }

    fn on_metrics(&mut self, t: f64, m: &Metrics) {
        self.counts.metrics_updated += 1;
        if let Some(c) = m.cwnd {
            self.counts.cwnd_points += 1;
            self.cwnd_until(t);
            self.last_cwnd = Some((t, c));
        }
        self.push(|s| &mut s.cwnd, t, m.cwnd);
        self.push(|s| &mut s.bytes_in_flight, t, m.bytes_in_flight);
        self.push(|s| &mut s.ssthresh, t, m.ssthresh);
        self.push(|s| &mut s.pacing_rate_bps, t, m.pacing_rate_bps);
        self.push(|s| &mut s.latest_rtt_ms, t, m.latest_rtt_ms);
        self.push(|s| &mut s.smoothed_rtt_ms, t, m.smoothed_rtt_ms);
        self.push(|s| &mut s.min_rtt_ms, t, m.min_rtt_ms);
        self.push(|s| &mut s.rtt_variance_ms, t, m.rtt_variance_ms);
        self.slow_start
            .on_metrics(t, m.cwnd, m.latest_rtt_ms, m.smoothed_rtt_ms, &m.extra);
        for (k, v) in &m.extra {
            if let Some(x) = self.extra_last.get_mut(k.as_str()) {
                *x = *v;
            } else {
                self.extra_last.insert(k.clone(), *v);
            }
        }
        if self.keep_series {
            for (k, v) in &m.extra {
                self.series
                    .extra
                    .entry(k.clone())
                    .or_default()
                    .push((t, *v));
            }
        }
        // RTT statistics: latest samples win as soon as one appears.
        if let Some(l) = m.latest_rtt_ms {
            if !self.rtt_from_latest {
                self.rtt = LogHistogram::default();
                self.counts.rtt_samples = 0;
                self.rtt_from_latest = true;
            }
            self.rtt.add(l);
            self.counts.rtt_samples += 1;
        } else if let (false, Some(s)) = (self.rtt_from_latest, m.smoothed_rtt_ms) {
            self.rtt.add(s);
            self.counts.rtt_samples += 1;
        }
        if let Some(s) = m.smoothed_rtt_ms {
            let acc = if self.rtt_from_latest {
                &mut self.srtt_sum
            } else {
                &mut self.srtt_before_latest
            };
            acc.0 += s;
            acc.1 += 1;
        }
        for r in [m.min_rtt_ms, m.latest_rtt_ms].into_iter().flatten() {
            if r > 0.0 {
                self.min_rtt_ms = Some(self.min_rtt_ms.map_or(r, |x| x.min(r)));
            }
        }
        if let Some(total) = m.lost_packets_total {
            // A trace that counts its losses is the source even while the
            // count stays 0: packets still in flight at its end are not
            // inferred lost then.
            if self.last_lost_counter.is_none() && self.counts.packet_lost_events == 0 {
                self.adopt_source(LossSource::Counters);
            }
            let prev = self.last_lost_counter.unwrap_or(0.0);
            if total > prev && self.counts.packet_lost_events == 0 {
                self.slow_start.on_lost_count(t, (total - prev) as u64);
                let l = Loss {
                    t,
                    packets: (total - prev) as u64,
                    bytes: None,
                    packet_number: None,
                };
                self.record_loss(l, LossSource::Counters);
            }
            self.last_lost_counter = Some(total);
        }
    }

    /// Makes `src` the loss source if it is better than the current one
    /// (dropping what the worse one recorded); whether losses from `src`
    /// count.
    fn adopt_source(&mut self, src: LossSource) -> bool {
        let rank = |s: LossSource| match s {
            LossSource::PacketLost => 3,
            LossSource::Counters => 2,
            LossSource::Inferred => 1,
            LossSource::None => 0,
        };
        if rank(src) > rank(self.loss_source) {
            self.loss_source = src;
            self.series.losses.clear();
            self.lost = (0, 0);
        }
        rank(src) == rank(self.loss_source)
    }

    fn record_loss(&mut self, l: Loss, src: LossSource) {
        // A better source replaces a worse one.
        if !self.adopt_source(src) {
            return;
        }
        self.lost.0 += l.packets;
        self.lost.1 += l.bytes.unwrap_or(0);
        if self.keep_series {
            self.series.losses.push(l);
        }
    }

    fn cwnd_until(&mut self, t: f64) {
        if let Some((t0, c)) = self.last_cwnd {
            let dt = (t - t0).max(0.0);
            self.cwnd_tw.0 += c * dt;
            self.cwnd_tw.1 += c * c * dt;
            self.cwnd_tw.2 += dt;
        }
    }

    fn on_sent(&mut self, t: f64, p: &Packet) {
        self.counts.packets_sent += 1;
        let size = p.size.unwrap_or(0);
        self.wire.0 += size;
        self.bin(t).sent += size;
        let mut app_new = 0;
        for s in &p.streams {
            let end = s.offset + s.len;
            let max = self.max_offset.entry(s.stream).or_insert(0);
            if end > *max {
                let new = end - (*max).max(s.offset);
                app_new += new;
                self.app.retransmitted += s.len - new;
                *max = end;
            } else {
                self.app.retransmitted += s.len;
            }
        }
        self.app.sent += app_new;
        if !p.streams.is_empty() {
            *self.mix.data_sizes.entry(size).or_insert(0) += 1;
        } else if !p.ack_eliciting && !p.acked.is_empty() {
            self.mix.ack_only_sent += 1;
        }
        if let (Some(pn), true) = (p.number, p.ack_eliciting) {
            self.sent
                .insert((space_code(p.space), pn), SentInfo { t, size, app_new });
        }
    }

    fn on_received(&mut self, t: f64, p: &Packet) {
        self.counts.packets_received += 1;
        if !p.streams.is_empty() {
            self.mix.data_received += 1;
        }
        let size = p.size.unwrap_or(0);
        self.wire.1 += size;
        self.bin(t).received += size;
        // New stream bytes reach the application (when the trace does not
        // log data moves itself).
        if !self.moved_to_app {
            let mut new = 0;
            for s in &p.streams {
                let end = s.offset + s.len;
                let got = self.recv_offset.entry(s.stream).or_insert(0);
                if end > *got {
                    new += end - (*got).max(s.offset);
                    *got = end;
                }
            }
            if new > 0 {
                self.app.received += new;
                self.bin(t).app_received += new;
                self.app_event(t);
            }
        }
        // ACK frames acknowledge our packets in the same space.
        let sp = space_code(p.space);
        let mut acked_app = 0;
        for &(lo, hi) in &p.acked {
            let keys: Vec<(u8, u64)> = self
                .sent
                .range((sp, lo)..=(sp, hi))
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                if let Some(s) = self.sent.remove(&k) {
                    acked_app += s.app_new;
                }
            }
        }
        if !p.acked.is_empty() {
            self.acks_seen_until = t;
            self.infer_losses(sp, false);
        }
        if acked_app > 0 {
            self.app.acked += acked_app;
            self.bin(t).app_acked += acked_app;
            self.app_event(t);
        }
    }

    /// Packets of space `sp` sent more than 1 s before the latest ACK and
    /// still unacknowledged are lost (or all below the largest acked at the end).
    fn infer_losses(&mut self, sp: u8, at_end: bool) {
        let horizon = self.acks_seen_until - 1.0;
        let gone: Vec<(u8, u64)> = self
            .sent
            .range((sp, 0)..=(sp, u64::MAX))
            .take_while(|(_, s)| at_end || s.t < horizon)
            .filter(|(_, s)| s.t < self.acks_seen_until)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            if let Some(s) = self.sent.remove(&k) {
                self.inferred.push(Loss {
                    t: s.t,
                    packets: 1,
                    bytes: Some(s.size),
                    packet_number: Some(k.1),
                });
            }
        }
    }

    fn on_lost(&mut self, t: f64, p: &Packet) {
        self.counts.packet_lost_events += 1;
        let key = p.number.map(|n| (space_code(p.space), n));
        let known = key.and_then(|k| self.sent.remove(&k));
        self.slow_start.on_lost_packet(t, known.map(|s| s.t));
        let bytes = p.size.or(known.map(|s| s.size));
        self.record_loss(
            Loss {
                t,
                packets: 1,
                bytes,
                packet_number: p.number,
            },
            LossSource::PacketLost,
        );
    }

    fn on_state(&mut self, t: f64, s: &str) {
        self.counts.state_updates += 1;
        self.slow_start.on_state(t, s);
        if let Some((old, since)) = self.cur_state.take() {
            *self.state_time.entry(old).or_insert(0.0) += (t - since).max(0.0);
        }
        self.cur_state = Some((s.to_string(), t));
        if self.keep_series {
            self.series.states.push((t, s.to_string()));
        }
    }

    fn finish(&mut self) {
        let end = self.end_s;
        self.cwnd_until(end);
        self.last_cwnd = None;
        if let Some((old, since)) = self.cur_state.take() {
            *self.state_time.entry(old).or_insert(0.0) += (end - since).max(0.0);
        }
        for sp in 0..3 {
            self.infer_losses(sp, true);
        }
        self.sent.clear();
        if self.loss_source == LossSource::None || self.loss_source == LossSource::Inferred {
            for l in std::mem::take(&mut self.inferred) {
                self.record_loss(l, LossSource::Inferred);
            }
        }
        self.inferred.clear();
        if !self.rtt_from_latest {
            self.srtt_sum = self.srtt_before_latest;
        }
        self.max_offset.clear();
        self.recv_offset.clear();
    }
}

/// Collects one [`Connection`] per trace.
pub struct Analyzer {
    /// Finished connections, in file order.
    pub connections: Vec<Connection>,
    cur: Option<Connection>,
    bin_s: f64,
    keep_series: bool,
}

impl Analyzer {
    /// Goodput bins of `bin_s` seconds; `keep_series` keeps every point.
    pub fn new(bin_s: f64, keep_series: bool) -> Analyzer {
        Analyzer {
            connections: Vec::new(),
            cur: None,
            bin_s: if bin_s > 0.0 && bin_s.is_finite() {
                bin_s
            } else {
                0.1
            },
            keep_series,
        }
    }
}

impl Sink for Analyzer {
    fn trace_start(&mut self, info: &TraceInfo) {
        self.cur = Some(Connection::new(info, self.bin_s, self.keep_series));
    }

    fn event(&mut self, ev: &Event) {
        let c = self.cur.get_or_insert_with(|| {
            Connection::new(&TraceInfo::default(), self.bin_s, self.keep_series)
        });
        let t = ev.time_s;
        c.counts.events += 1;
        c.end_s = c.end_s.max(t);
        match (&ev.parsed, ev.kind) {
            (Parsed::Metrics(m), _) => c.on_metrics(t, m),
            (Parsed::Packet(p), Kind::PacketSent) => c.on_sent(t, p),
            (Parsed::Packet(p), Kind::PacketReceived) => c.on_received(t, p),
            (Parsed::Packet(p), Kind::PacketLost) => c.on_lost(t, p),
            (Parsed::State(s), _) => c.on_state(t, s),
            (Parsed::Generic(v), Kind::Scenario) => {
                // The first one describes the run; later ones are ignored.
                c.conditions.get_or_insert_with(|| v.clone());
            }
            (p, Kind::Marker) => {
                c.counts.markers += 1;
                if c.markers.len() < MAX_MARKERS {
                    let data = match p {
                        Parsed::Generic(v) => v.clone(),
                        _ => serde_json::Value::Null,
                    };
                    c.markers.push(Marker { t_s: t, data });
                }
            }
            (Parsed::Moved(true, bytes), _) => {
                if !c.moved_to_app {
                    // The trace logs deliveries itself: count only those.
                    c.moved_to_app = true;
                    c.app.received = 0;
                    for b in &mut c.bins {
                        b.app_received = 0;
                    }
                }
                c.app.received += bytes;
                c.bin(t).app_received += bytes;
                c.app_event(t);
            }
            _ => {}
        }
    }

    fn trace_end(&mut self, info: &TraceInfo) {
        if let Some(mut c) = self.cur.take() {
            c.info = info.clone();
            c.finish();
            self.connections.push(c);
        }
    }
}
