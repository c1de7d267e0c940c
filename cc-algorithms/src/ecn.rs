//! ECN for the plugins: the RFC 3168 response that any plugin takes with
//! `ecn=classic`, and the pieces DCTCP ([`crate::dctcp`]) and Prague
//! ([`crate::prague`]) share: one congestion period for losses and marks,
//! and the marked-fraction estimate alpha.
//!
//! # `ecn=classic`: one wrapper for every plugin
//!
//! [`ClassicEcnConfig`] wraps any plugin's factory; its controller,
//! [`ClassicEcn`], asks for ECT(0) and treats CE marks as RFC 3168 (Section
//! 6.1.2) and RFC 9002 (Section 7 and Appendix B.7, `ProcessECN`) do: as
//! a congestion event, once per recovery period, with nothing to
//! retransmit. It hands the wrapped algorithm a [`LossEvent`] built from the
//! [`EcnEvent`], so the algorithm answers a mark with its own loss response
//! (NewReno halves, Tahoe restarts slow start, Westwood+ sets the window to
//! its bandwidth estimate x min RTT, and so on): no algorithm is edited.
//!
//! That is safe because every plugin's `on_congestion_event` reads only the
//! event's fields and the clock, and the wrapper fills them with what a
//! mark means:
//!
//! - `new_recovery_period`: RFC 9002's rule, applied to losses and marks
//!   together. quiche decides it for losses alone and never hears of a
//!   reduction made for a mark, so the wrapper keeps the start of the last
//!   reduction itself ([`CongestionPeriod`]) and decides for both: a loss or
//!   mark starts a new period only if its packet (the largest lost, or the
//!   largest acknowledged) was sent after the current period began. Without
//!   marks this is exactly quiche's decision, so `ecn=classic` on a path
//!   that never marks gives the same windows as `ecn=off` (the test
//!   `classic_without_marks_is_the_plain_algorithm`).
//! - `lost_bytes`: 0, since a marked packet arrived and leaves flight as
//!   an acknowledged one; `lost_packets`: the marks, capped at the
//!   packets the same ACK frame acknowledged (at least one), so loss-rate
//!   estimators (EWPHCC's p_l, SMCC's fitness) count a mark as a loss
//!   signal without being fed impossible counts.
//! - `largest_lost_*`: the largest acknowledged packet of the frame;
//!   `bytes_in_flight` and `rtt`: the event's.
//!
//! The wrapper also passes its own period start as
//! [`AckEvent::recovery_start_time`]. `ecn=off` (the default) does not
//! wrap at all, so every result without it is unchanged. quiche's built-ins
//! (`reno`, `cubic`, `bbr2`) are not plugins and take no `ecn=`.

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, Ecn, EcnEvent,
    LossEvent, SentPacket,
};

use std::sync::Arc;

/// Names of `ecn=`, in code order.
pub const ECN_MODES: &[&str] = &["off", "classic"];

/// The start of the current congestion period, shared by losses and CE
/// marks (RFC 9002, Section 7.3.2 and Appendix B.7): an event whose packet
/// was sent at or before the start belongs to the period already answered.
#[derive(Debug, Clone, Copy, Default)]
pub struct CongestionPeriod {
    start: Option<Instant>,
}

impl CongestionPeriod {
    /// Whether an event about a packet sent at `time_sent` starts a new
    /// period; if it does, the period starts `now`.
    pub fn begin_if_new(&mut self, time_sent: Instant, now: Instant) -> bool {
        if self.contains(time_sent) {
            return false;
        }
        self.start = Some(now);
        true
    }

    /// Starts a new period `now`.
    pub fn begin(&mut self, now: Instant) {
        self.start = Some(now);
    }

    /// Whether a packet sent at `time_sent` was sent during the current
    /// period (before or when it began).
    pub fn contains(&self, time_sent: Instant) -> bool {
        self.start.is_some_and(|s| time_sent <= s)
    }

    /// The start of the current period.
    pub fn start(&self) -> Option<Instant> {
        self.start
    }

    /// Forgets the period (persistent congestion, as quiche does).
    pub fn reset(&mut self) {
        self.start = None;
    }
}

/// Packet numbers of the application space, for observation windows.
#[derive(Debug, Clone, Copy, Default)]
pub struct PacketNumbers {
    /// Largest packet number sent.
    pub largest_sent: Option<u64>,
    /// Largest packet number acknowledged.
    pub largest_acked: Option<u64>,
}

impl PacketNumbers {
    /// Records a sent packet.
    pub fn on_sent(&mut self, pkt: &SentPacket) {
        if pkt.space == quiche::cc::PacketSpace::Application {
            self.largest_sent = Some(
                self.largest_sent
                    .map_or(pkt.pkt_num, |p| p.max(pkt.pkt_num)),
            );
        }
    }

    /// Records an ACK frame.
    pub fn on_ack(&mut self, ack: &AckEvent) {
        if ack.space == quiche::cc::PacketSpace::Application {
            // `acked` is ordered by packet number.
            if let Some(p) = ack.acked.last().map(|p| p.pkt_num) {
                self.largest_acked = Some(self.largest_acked.map_or(p, |l| l.max(p)));
            }
        }
    }

    /// The first packet number not sent yet.
    pub fn next(&self) -> u64 {
        self.largest_sent.map_or(0, |p| p.saturating_add(1))
    }
}

/// DCTCP's congestion estimate (RFC 8257, Section 3.3; Linux
/// `tcp_dctcp.c`): `alpha = (1 - g) alpha + g F` once per observation
/// window, F the fraction of ECN-capable packets the window saw marked.
/// A window ends when a packet sent after it began is acknowledged (Linux:
/// `snd_una` reaches the `snd_nxt` of the window's start), about one RTT.
#[derive(Debug, Clone)]
pub struct AlphaEstimator {
    /// The estimate, in [0, 1].
    pub alpha: f64,
    /// The gain g, in (0, 1].
    pub g: f64,
    /// CE marks reported in the current window.
    pub window_ce: u64,
    /// ECN-capable packets reported in the current window.
    pub window_ect: u64,
    /// The window ends when this packet number (or a later one) is
    /// acknowledged.
    pub window_end: u64,
}

impl AlphaEstimator {
    /// An estimate starting at `alpha` with gain `g` (both clamped into
    /// range; NaN becomes 1 and 1/16).
    pub fn new(alpha: f64, g: f64) -> Self {
        let alpha = if alpha.is_nan() {
            1.0
        } else {
            alpha.clamp(0.0, 1.0)
        };
        let g = if g.is_nan() {
            1.0 / 16.0
        } else {
            g.clamp(1e-6, 1.0)
        };
        AlphaEstimator {
            alpha,
            g,
            window_ce: 0,
            window_ect: 0,
            window_end: 0,
        }
    }

    /// Adds one frame's counts to the window.
    pub fn add(&mut self, ecn: &EcnEvent) {
        self.window_ce = self.window_ce.saturating_add(ecn.newly_ce);
        self.window_ect = self.window_ect.saturating_add(ecn.newly_ect);
    }

    /// Whether the current window is over.
    pub fn window_over(&self, pns: &PacketNumbers) -> bool {
        pns.largest_acked.is_some_and(|a| a >= self.window_end)
    }

    /// Ends the window without touching alpha (Prague before its first
    /// mark): its counts are dropped and the next window starts.
    pub fn skip_window(&mut self, pns: &PacketNumbers) {
        self.window_ce = 0;
        self.window_ect = 0;
        self.window_end = pns.next();
    }

    /// Ends the window: folds its marked fraction into alpha and starts the
    /// next one, which ends with the first packet sent from now on.
    pub fn end_window(&mut self, pns: &PacketNumbers) {
        let f = if self.window_ce == 0 {
            0.0
        } else {
            // More marks than ECN-capable packets is a peer's error: the
            // whole window counts as marked.
            (self.window_ce as f64 / self.window_ect.max(1) as f64).min(1.0)
        };
        self.alpha = ((1.0 - self.g) * self.alpha + self.g * f).clamp(0.0, 1.0);
        self.window_ce = 0;
        self.window_ect = 0;
        self.window_end = pns.next();
    }
}

/// `ecn=classic` around a plugin's factory.
#[derive(Clone)]
pub struct ClassicEcnConfig {
    /// The wrapped algorithm.
    pub inner: Arc<dyn CongestionControllerFactory>,
}

impl std::fmt::Debug for ClassicEcnConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClassicEcn({})", self.inner.name())
    }
}

impl CongestionControllerFactory for ClassicEcnConfig {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(ClassicEcn::new(self.inner.build(config)))
    }
}

/// A plugin with the RFC 3168 response to CE marks (module docs).
#[derive(Debug)]
pub struct ClassicEcn {
    inner: Box<dyn CongestionController>,
    period: CongestionPeriod,
    /// Largest packet number and packet count of the last ACK frame.
    last_ack: Option<(u64, usize)>,
    /// Reductions made for marks.
    ce_reductions: u64,
}

impl ClassicEcn {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn CongestionController>) -> Self {
        ClassicEcn {
            inner,
            period: CongestionPeriod::default(),
            last_ack: None,
            ce_reductions: 0,
        }
    }
}

impl CongestionController for ClassicEcn {
    fn on_packet_sent(&mut self, pkt: &SentPacket, now: Instant) {
        self.inner.on_packet_sent(pkt, now);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        // `acked` is ordered by packet number.
        self.last_ack = ack.acked.last().map(|p| (p.pkt_num, ack.acked.len()));
        let ours = AckEvent {
            recovery_start_time: self.period.start(),
            ..*ack
        };
        self.inner.on_ack(&ours, now);
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        let new = self.period.begin_if_new(loss.largest_lost_time_sent, now);
        self.inner.on_congestion_event(
            &LossEvent {
                new_recovery_period: new,
                ..*loss
            },
            now,
        );
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.period.reset();
        self.inner.on_persistent_congestion(now);
    }

    fn on_pto(&mut self, pto_count: u32, now: Instant) {
        self.inner.on_pto(pto_count, now);
    }

    fn on_spurious_loss(&mut self, now: Instant) {
        self.inner.on_spurious_loss(now);
    }

    fn on_mtu_change(&mut self, max_datagram_size: usize) {
        self.inner.on_mtu_change(max_datagram_size);
    }

    fn on_restart_after_idle(&mut self, idle: Duration, now: Instant) {
        self.inner.on_restart_after_idle(idle, now);
    }

    fn congestion_window(&self) -> usize {
        self.inner.congestion_window()
    }

    fn pacing_rate(&self) -> Option<u64> {
        self.inner.pacing_rate()
    }

    fn ssthresh(&self) -> Option<usize> {
        self.inner.ssthresh()
    }

    fn state_name(&self) -> &'static str {
        self.inner.state_name()
    }

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.inner.visit_metrics(f);
        f("ecn_ce_reductions", self.ce_reductions as f64);
    }

    fn ecn_codepoint(&self) -> Ecn {
        Ecn::Ect0
    }

    fn on_ecn(&mut self, ecn: &EcnEvent, now: Instant) {
        if ecn.newly_ce == 0 || !self.period.begin_if_new(ecn.largest_acked_time_sent, now) {
            return;
        }
        self.ce_reductions += 1;
        let (pn, acked) = self.last_ack.unwrap_or((0, 1));
        let marks = ecn.newly_ce.min(acked.max(1) as u64) as usize;
        let loss = LossEvent {
            space: ecn.space,
            lost_bytes: 0,
            lost_packets: marks,
            largest_lost_pkt_num: pn,
            largest_lost_time_sent: ecn.largest_acked_time_sent,
            new_recovery_period: true,
            bytes_in_flight: ecn.bytes_in_flight,
            rtt: ecn.rtt,
        };
        self.inner.on_congestion_event(&loss, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{driver_for, Boxed, Driver, MSS};

    fn classic(spec: &str) -> Driver<Boxed> {
        driver_for(spec)
    }

    #[test]
    fn codepoints_follow_the_parameter() {
        assert_eq!(classic("newreno").cc.ecn_codepoint(), Ecn::NotEct);
        assert_eq!(classic("newreno:ecn=off").cc.ecn_codepoint(), Ecn::NotEct);
        assert_eq!(classic("newreno:ecn=classic").cc.ecn_codepoint(), Ecn::Ect0);
        assert_eq!(classic("vegas:ecn=1").cc.ecn_codepoint(), Ecn::Ect0);
        // Without the wrapper a mark changes nothing.
        let mut d = classic("newreno");
        d.send_and_ack(10, false);
        d.ecn(3, 10);
        assert_eq!(d.cc.congestion_window(), 20 * MSS);
    }

    #[test]
    fn a_mark_halves_newreno_once_per_rtt_like_a_loss() {
        let mut d = classic("newreno:ecn=classic");
        d.send_and_ack(10, false); // slow start: 20 packets
        assert_eq!(d.cc.congestion_window(), 20 * MSS);
        d.send(20, MSS, false);
        d.ack(5, false); // 25 packets
        d.ecn(1, 5);
        assert_eq!(d.cc.congestion_window(), 12 * MSS + MSS / 2);
        assert_eq!(d.cc.ssthresh(), Some(12 * MSS + MSS / 2));
        assert_eq!(d.cc.state_name(), "recovery");
        // More marks on packets sent before the reduction: the same period.
        d.ack(5, false);
        d.ecn(5, 5);
        assert_eq!(d.cc.congestion_window(), 12 * MSS + MSS / 2);
        // A loss of a packet sent before it: the same period too, although
        // quiche, which never heard of the mark, would call it new.
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 12 * MSS + MSS / 2);
        // Packets sent after the reduction: a mark on them halves again.
        d.ack(9, false);
        d.send(5, MSS, false);
        d.ack(5, false);
        d.ecn(1, 5);
        assert_eq!(d.cc.congestion_window(), 7500);
        let mut metrics = Vec::new();
        d.cc.visit_metrics(&mut |k, v| metrics.push((k, v)));
        assert!(metrics.contains(&("ecn_ce_reductions", 2.0)), "{metrics:?}");
    }

    #[test]
    fn a_loss_after_a_mark_period_starts_a_new_one() {
        let mut d = classic("newreno:ecn=classic");
        d.send_and_ack(10, false);
        d.send(10, MSS, false);
        d.ack(2, false);
        d.ecn(1, 2);
        let after_mark = d.cc.congestion_window();
        // A packet sent after the reduction is lost: a new period, even
        // though quiche (deciding from losses alone) says it is not.
        d.ack(8, false);
        d.send(4, MSS, false);
        d.lose(1, false);
        assert_eq!(d.cc.congestion_window(), after_mark / 2);
    }

    #[test]
    fn zero_marks_and_persistent_congestion() {
        let mut d = classic("newreno:ecn=classic");
        d.send_and_ack(10, false);
        d.ecn(0, 10);
        assert_eq!(d.cc.congestion_window(), 20 * MSS);
        d.send(4, MSS, false);
        d.ack(2, false);
        d.ecn(1, 2);
        d.cc.on_persistent_congestion(d.now);
        assert_eq!(d.cc.congestion_window(), 2 * MSS);
        // The period is forgotten: a mark on an old packet reduces (to the
        // minimum here).
        d.ack(2, false);
        d.ecn(1, 2);
        assert_eq!(d.cc.congestion_window(), 2 * MSS);
    }

    /// Every plugin with `ecn=classic` and no marks makes the decisions of
    /// the plain algorithm, losses included.
    #[test]
    fn classic_without_marks_is_the_plain_algorithm() {
        for info in crate::algorithms().filter(|a| a.params.iter().any(|p| p.name == "ecn")) {
            let base = info.example_spec();
            let sep = if base.contains(':') { ',' } else { ':' };
            let mut plain = classic(&base);
            let mut wrapped = classic(&format!("{base}{sep}ecn=classic"));
            for d in [&mut plain, &mut wrapped] {
                d.send_and_ack(10, false);
                d.send(30, MSS, false);
                d.ack(10, false);
                d.lose(2, true);
                d.lose(1, false);
                d.ack(10, false);
                d.ecn(0, 10);
                d.send_and_ack(20, false);
                d.lose(1, true);
                d.send_and_ack(20, false);
            }
            assert_eq!(
                plain.cc.congestion_window(),
                wrapped.cc.congestion_window(),
                "{base}"
            );
            assert_eq!(plain.cc.ssthresh(), wrapped.cc.ssthresh(), "{base}");
        }
    }

    #[test]
    fn alpha_is_an_ewma_of_the_marked_fraction() {
        let mut a = AlphaEstimator::new(1.0, 1.0 / 16.0);
        let pns = PacketNumbers {
            largest_sent: Some(9),
            largest_acked: Some(9),
        };
        assert!(a.window_over(&pns));
        a.window_ce = 5;
        a.window_ect = 10;
        a.end_window(&pns);
        assert!((a.alpha - (15.0 / 16.0 + 0.5 / 16.0)).abs() < 1e-12);
        assert_eq!(a.window_end, 10);
        assert!(!a.window_over(&pns));
        // Marks without ECN-capable packets count as a fully marked window.
        let before = a.alpha;
        a.window_ce = u64::MAX;
        a.window_ect = 0;
        a.end_window(&pns);
        assert!((a.alpha - (before * 15.0 / 16.0 + 1.0 / 16.0)).abs() < 1e-12);
        // NaN parameters take the defaults.
        let n = AlphaEstimator::new(f64::NAN, f64::NAN);
        assert_eq!((n.alpha, n.g), (1.0, 1.0 / 16.0));
    }
}
