//! NewReno as RFC 9002 specifies it for QUIC (Section 7.3 and Appendix B):
//! the reference plugin.
//!
//! - Slow start: `cwnd += acked bytes` while `cwnd < ssthresh` (B.5).
//! - Congestion avoidance: one maximum datagram per window of acknowledged
//!   bytes, counted as in Appropriate Byte Counting (RFC 3465), an integer
//!   form of B.5's `cwnd += mss * acked / cwnd`.
//! - Congestion event (B.6), once per recovery period (7.3.2):
//!   `ssthresh = cwnd * kLossReductionFactor`, `cwnd = max(ssthresh, kMinimumWindow)`.
//!   The byte counter then starts at half the new window, so the first
//!   increase comes after half a window of ACKs and the next ones a window
//!   apart. That keeps the window within about half a datagram of B.5's
//!   continuous increase (the steps round it to the nearest datagram); a
//!   counter starting at zero rounds down, lagging B.5 by half a datagram
//!   on average and by up to 0.87 datagrams (the test
//!   `congestion_avoidance_stays_within_half_a_datagram_of_b5`). quiche's
//!   built-in Reno (`reno`) counts the same way.
//! - Persistent congestion (B.8, 7.6.2): `cwnd = kMinimumWindow`.
//! - Packets sent before the recovery period started, or acknowledged while
//!   the sender is application-limited (7.8), do not grow the window.
//!
//! Choices where RFC 9002 leaves room: no HyStart; no undo of a reduction
//! when the loss turns out spurious (Appendix B has none); PTO expiry
//! changes nothing.
//!
//! Against quiche's built-in Reno (`reno`, `quiche/src/recovery/congestion/reno.rs`),
//! which implements the same Appendix B, three things differ, none in
//! loss detection or recovery periods (quiche's own code for both):
//!
//! - Pacing. quiche paces every plugin (RFC 9002 7.7: a sender SHOULD
//!   pace, at 1.25 cwnd / smoothed RTT here); quiche 0.30's legacy recovery,
//!   which runs `reno`, never paces (every packet is released at once).
//!   This is most of the gap in the TCP/EXP dumbbell
//!   (`scenarios/reproduce/tcp-exp/`), where `newreno` moved 16% more
//!   than `reno` under drop-tail (15.9 against 13.7 MB, 50 packets,
//!   100 s, 20 repetitions): the paced sender met fewer congestion events
//!   (38 against 45) and so kept a larger window (21.9 against 18.3
//!   packets). With every flow unpaced they met as many (42 and 43) and
//!   moved 15.5 and 14.8 MB; see that paper's `paper.toml`.
//! - HyStart++ in `reno`'s slow start (`reno:hystart=0` turns it off):
//!   in that dumbbell, every flow unpaced, its conservative slow start
//!   made `reno`'s first reduction come at 53 packets (68 without it)
//!   against NewReno's 69; with it off as well, the two moved 15.4 and
//!   15.1 MB.
//! - ACK handling while application-limited: `reno` ignores ACKs that
//!   arrive while quiche's `app_limited` flag is set (the last packet sent
//!   left room in the window; quiche clears it again whenever `send` stops,
//!   for a full window or for want of data); a paced sender leaves room
//!   after nearly every packet, so NewReno reads the delivery-rate
//!   sample's flag instead, except when its own last packet filled the
//!   window (see `NewReno::window_underused`). Unpaced, NewReno with
//!   `reno`'s rule moved exactly the same bytes as without it in that
//!   dumbbell (its five-flow form, with `mimd`): the rule never fired.
//!   Without the exception, an event loop that read two ACKs before the
//!   application wrote again stopped NewReno's growth for a round trip:
//!   in `tests/quiche_pair.rs`, waking every 2 ms, its mean window was
//!   7.4% off `reno`'s (now 0.0%), and when that test ran in real time,
//!   3 of 27 runs took a slow start a round trip longer and lost about
//!   145 packets against 54.
//!
//! This module also holds [`Tahoe`], NewReno without fast recovery.

use std::time::Instant;

use crate::slow_start::{ExitReason, ExitRule, SlowStartConfig, Verdict};
use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

/// kLossReductionFactor (RFC 9002 B.2).
pub const LOSS_REDUCTION_FACTOR: f64 = 0.5;

/// kMinimumWindow in datagrams (RFC 9002 B.2).
pub const MINIMUM_WINDOW_PACKETS: usize = 2;

/// Implements the MTU hook and the window outputs of a controller whose
/// window lives in a [`NewReno`] field, for algorithms that change only
/// NewReno's reactions.
macro_rules! delegate_window_to_reno {
    ($field:ident) => {
        fn on_mtu_change(&mut self, max_datagram_size: usize) {
            self.$field.on_mtu_change(max_datagram_size);
        }

        fn congestion_window(&self) -> usize {
            self.$field.congestion_window()
        }

        fn ssthresh(&self) -> Option<usize> {
            self.$field.ssthresh()
        }

        fn state_name(&self) -> &'static str {
            self.$field.state_name()
        }
    };
}
pub(crate) use delegate_window_to_reno;

/// NewReno configuration; it is also the factory.
#[derive(Debug, Clone, Default)]
pub struct NewRenoConfig {
    /// Slow start: standard (the default), HyStart++ or SEARCH, with the
    /// rule's constants.
    pub slow_start: SlowStartConfig,
}

impl CongestionControllerFactory for NewRenoConfig {
    fn name(&self) -> &str {
        "newreno"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(NewReno::new(config).with_slow_start(self.slow_start))
    }
}

/// NewReno state.
#[derive(Debug, Clone)]
pub struct NewReno {
    /// Maximum datagram size in bytes.
    pub(crate) mss: usize,
    /// Congestion window in bytes.
    pub(crate) cwnd: usize,
    /// Slow start threshold in bytes (`usize::MAX` until the first loss).
    pub(crate) ssthresh: usize,
    /// Bytes acknowledged in congestion avoidance since the last increase.
    bytes_acked_ca: usize,
    /// Start of the last recovery period.
    recovery_start: Option<Instant>,
    /// Whether no packet sent after `recovery_start` was acknowledged yet.
    pub(crate) recovering: bool,
    /// Whether the last packet sent left no room in the window for another
    /// full-size datagram: the sender was limited by the window, not by the
    /// application ([`note_sent`](Self::note_sent)).
    window_full: bool,
    /// The slow-start exit rule (HyStart++ or SEARCH); `None`: standard.
    rule: Option<ExitRule>,
    /// How the first slow start ended, and the window then.
    ss_exit: Option<(ExitReason, usize)>,
    /// Whether `ss_exit` is a CSS entry that a spurious rise may undo.
    exit_in_css: bool,
}

impl NewReno {
    /// A controller for a new path.
    pub fn new(config: &ControllerConfig) -> Self {
        let mss = config.max_datagram_size.max(1);
        NewReno {
            mss,
            cwnd: (config.initial_congestion_window_packets * mss).max(Self::min_window_of(mss)),
            ssthresh: usize::MAX,
            bytes_acked_ca: 0,
            recovery_start: None,
            recovering: false,
            window_full: false,
            rule: None,
            ss_exit: None,
            exit_in_css: false,
        }
    }

    /// The same controller with `kind` of slow start.
    pub fn with_slow_start(mut self, cfg: impl Into<SlowStartConfig>) -> Self {
        self.rule = ExitRule::new(cfg.into());
        self
    }

    /// How the first slow start ended, and the window then, once it has.
    pub fn slow_start_exit(&self) -> Option<(ExitReason, usize)> {
        self.ss_exit
    }

    /// Records how the first slow start ended (the first call wins).
    pub(crate) fn note_slow_start_exit(&mut self, reason: ExitReason) {
        self.ss_exit.get_or_insert((reason, self.cwnd));
    }

    /// The slow-start metrics (`ss_exit_reason`: 1 loss, 2 delay increase;
    /// `ss_exit_cwnd` in bytes; HyStart++'s CSS entries and spurious ones).
    pub(crate) fn visit_slow_start_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        if let Some((reason, cwnd)) = self.ss_exit {
            f("ss_exit_reason", reason as u8 as f64);
            f("ss_exit_cwnd", cwnd as f64);
        }
        if let Some(r) = &self.rule {
            r.visit_metrics(f);
        }
    }

    pub(crate) fn min_window_of(mss: usize) -> usize {
        MINIMUM_WINDOW_PACKETS * mss
    }

    pub(crate) fn in_recovery(&self, time_sent: Instant) -> bool {
        self.recovery_start.is_some_and(|start| time_sent <= start)
    }

    /// Whether this ACK's delivery-rate sample was taken while the
    /// application had nothing to send. Not `ack.app_limited`, which quiche
    /// sets whenever a packet leaves below the window: every packet of a
    /// paced sender, and plugins are paced. [`window_underused`](Self::window_underused),
    /// which the growth functions below ask, is RFC 9002 7.8's rule built
    /// on it.
    pub(crate) fn app_limited(ack: &AckEvent) -> bool {
        ack.delivery_rate_app_limited
    }

    /// RFC 9002 7.8: whether the window was underused when this ACK came,
    /// so the ACK must not grow it: the delivery-rate sample is
    /// application-limited ([`app_limited`](Self::app_limited)) and the
    /// last packet sent left room for another datagram. A sender whose
    /// last packet filled the window was limited by the window, whatever
    /// the sample says.
    ///
    /// The sample alone is wrong whenever an event loop reads two ACKs
    /// before the application writes again (a loop that drains its socket
    /// before writing, or one that got the CPU late): quiche lets the
    /// application queue no more than the room left in the window, so the
    /// first ACK opens room the queue cannot fill yet, and quiche marks the
    /// second one application-limited. The mark then stays on every packet
    /// sent in the next round trip, window-limited or not, and the sample
    /// alone would stop the window's growth for that round trip, in slow
    /// start too, where quiche's built-in Reno grows on.
    pub(crate) fn window_underused(&self, ack: &AckEvent) -> bool {
        Self::app_limited(ack) && !self.window_full
    }

    /// Records whether `pkt` left the window without room for another
    /// full-size datagram; for [`window_underused`](Self::window_underused).
    /// Controllers that keep a [`NewReno`] pass their `on_packet_sent` on
    /// to it; without it, the sample alone decides.
    pub(crate) fn note_sent(&mut self, pkt: &SentPacket) {
        let cwnd = self.cwnd.max(Self::min_window_of(self.mss));
        self.window_full = pkt.bytes_in_flight + pkt.size + self.mss > cwnd;
        if let Some(r) = &mut self.rule {
            r.on_sent(pkt);
        }
    }

    /// Runs the exit rule on an ACK in slow start (below ssthresh, out of
    /// recovery); true when it ended slow start on this ACK (the window is
    /// then set, nothing grows). Controllers with a growth of their own
    /// (DCM) call it before growing, and scale their slow-start growth by
    /// [`slow_start_scale`](Self::slow_start_scale).
    pub(crate) fn slow_start_rule(&mut self, ack: &AckEvent, now: Instant) -> bool {
        if self.cwnd >= self.ssthresh || self.recovering {
            return false;
        }
        let underused = self.rule.is_some() && self.window_underused(ack);
        let Some(rule) = &mut self.rule else {
            return false;
        };
        match rule.on_ack(ack, now, self.cwnd, underused) {
            Verdict::Continue => false,
            Verdict::EnterCss => {
                if self.ss_exit.is_none() {
                    self.note_slow_start_exit(ExitReason::DelayIncrease);
                    self.exit_in_css = true;
                }
                false
            }
            Verdict::ResumeSlowStart => {
                if self.exit_in_css {
                    self.ss_exit = None;
                    self.exit_in_css = false;
                }
                false
            }
            Verdict::EndSlowStart => {
                self.ssthresh = self.cwnd;
                self.exit_in_css = false;
                true
            }
            Verdict::ExitWith(cwnd) => {
                self.note_slow_start_exit(ExitReason::BandwidthPlateau);
                self.cwnd = cwnd.clamp(Self::min_window_of(self.mss), self.cwnd);
                self.ssthresh = self.cwnd;
                self.bytes_acked_ca = 0;
                true
            }
        }
    }

    /// The share of slow start's growth the exit rule allows now: a
    /// quarter in HyStart++'s CSS, else all.
    pub(crate) fn slow_start_scale(&self) -> f64 {
        self.rule.as_ref().map_or(1.0, ExitRule::growth_share)
    }

    /// Slow start and congestion avoidance for one ACK (RFC 9002 B.5).
    pub(crate) fn grow(&mut self, ack: &AckEvent, now: Instant) {
        self.grow_up_to(ack, self.ssthresh, now);
    }

    /// [`grow`](Self::grow) with slow start up to `slow_start_limit`
    /// instead of ssthresh (EWPHCC's normal phase slow-starts whatever
    /// ssthresh is).
    pub(crate) fn grow_up_to(&mut self, ack: &AckEvent, slow_start_limit: usize, now: Instant) {
        // The exit rule takes every ACK in slow start (below ssthresh,
        // whatever the caller's limit), whether or not the window grows on
        // it: HyStart++ its RTT sample, SEARCH its delivered bytes.
        if self.slow_start_rule(ack, now) {
            return;
        }
        if self.window_underused(ack) {
            if ack.acked.iter().any(|p| !self.in_recovery(p.time_sent)) {
                self.recovering = false;
            }
            return;
        }
        for pkt in ack.acked {
            if self.in_recovery(pkt.time_sent) {
                continue;
            }
            self.recovering = false;
            if self.cwnd < slow_start_limit {
                let add = self
                    .rule
                    .as_ref()
                    .map_or(pkt.size, |r| r.increase(pkt.size));
                self.cwnd = self.cwnd.saturating_add(add);
            } else {
                // Appropriate Byte Counting, RFC 3465.
                self.bytes_acked_ca += pkt.size;
                if self.bytes_acked_ca >= self.cwnd {
                    self.bytes_acked_ca -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(self.mss);
                }
            }
        }
    }

    /// Grows the window by `per_rtt` bytes per round trip, spread over a
    /// window of ACKs by bytes: this ACK adds `per_rtt x fresh / cwnd`,
    /// where `fresh` counts packets sent after the recovery period began
    /// (nothing while app-limited). The fraction of a byte not yet added is
    /// carried in `pending`.
    pub(crate) fn grow_per_rtt(&mut self, ack: &AckEvent, per_rtt: f64, pending: &mut f64) {
        if self.window_underused(ack) {
            return;
        }
        let fresh: usize = ack
            .acked
            .iter()
            .filter(|p| !self.in_recovery(p.time_sent))
            .map(|p| p.size)
            .sum();
        if fresh == 0 {
            return;
        }
        self.recovering = false;
        *pending += per_rtt * fresh as f64 / self.cwnd.max(1) as f64;
        if *pending >= 1.0 {
            let add = pending.floor();
            *pending -= add;
            self.cwnd = self.cwnd.saturating_add(add as usize);
        }
    }

    /// A reduction decided elsewhere that starts a recovery period at
    /// `now` as a congestion event does: window and ssthresh to `cwnd` (at
    /// least the minimum window), no growth from packets sent before `now`
    /// (DCTCP's cut on CE marks).
    pub(crate) fn reduce_to(&mut self, cwnd: usize, now: Instant) {
        self.recovery_start = Some(now);
        self.recovering = true;
        self.ssthresh = cwnd.max(Self::min_window_of(self.mss));
        self.cwnd = self.ssthresh;
        self.bytes_acked_ca = self.cwnd / 2;
    }

    /// Sets the window after a reduction decided elsewhere (Westwood+).
    pub(crate) fn set_window(&mut self, cwnd: usize, ssthresh: usize) {
        let min = Self::min_window_of(self.mss);
        self.ssthresh = ssthresh.max(min);
        self.cwnd = cwnd.max(min);
        self.bytes_acked_ca = 0;
    }
}

impl CongestionController for NewReno {
    fn on_packet_sent(&mut self, pkt: &SentPacket, _now: Instant) {
        self.note_sent(pkt);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        self.grow(ack, now);
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        if !loss.new_recovery_period {
            return;
        }
        if self.cwnd < self.ssthresh {
            self.note_slow_start_exit(ExitReason::Loss);
        }
        if let Some(r) = &mut self.rule {
            r.reset();
        }
        self.exit_in_css = false;
        self.recovery_start = Some(now);
        self.recovering = true;
        self.ssthresh = ((self.cwnd as f64 * LOSS_REDUCTION_FACTOR) as usize)
            .max(Self::min_window_of(self.mss));
        self.cwnd = self.ssthresh;
        // Half a window of credit: the steps of byte counting then round
        // B.5's continuous increase instead of truncating it (module docs).
        self.bytes_acked_ca = self.cwnd / 2;
    }

    fn on_persistent_congestion(&mut self, _now: Instant) {
        self.cwnd = Self::min_window_of(self.mss);
        self.recovery_start = None;
        self.recovering = false;
    }

    fn on_mtu_change(&mut self, max_datagram_size: usize) {
        self.mss = max_datagram_size.max(1);
        self.cwnd = self.cwnd.max(Self::min_window_of(self.mss));
    }

    fn congestion_window(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> Option<usize> {
        (self.ssthresh != usize::MAX).then_some(self.ssthresh)
    }

    fn state_name(&self) -> &'static str {
        if self.recovering {
            "recovery"
        } else if self.cwnd < self.ssthresh {
            if self.rule.as_ref().is_some_and(ExitRule::in_css) {
                "conservative_slow_start"
            } else {
                "slow_start"
            }
        } else {
            "congestion_avoidance"
        }
    }

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.visit_slow_start_metrics(f);
    }
}

/// TCP Tahoe configuration; it is also the factory.
#[derive(Debug, Clone, Default)]
pub struct TahoeConfig {}

impl CongestionControllerFactory for TahoeConfig {
    fn name(&self) -> &str {
        "tahoe"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Tahoe::new(config))
    }
}

/// TCP Tahoe (Jacobson 1988, as in 4.3BSD-Tahoe and ns-2's `Agent/TCP`),
/// the baseline the TCP/EXP paper (`shared/seeds/002_*.txt`) calls "TCP":
/// on any loss it restarts slow start from one segment.
///
/// ```text
/// loss (3 dupacks or timeout): ssthresh = max(FlightSize / 2, 2 MSS)
///                              cwnd     = 1 MSS, slow start again
/// ACK: slow start below ssthresh, then +1 MSS per window (as NewReno)
/// ```
///
/// Mapping onto QUIC:
/// - "loss" is a congestion event that starts a recovery period (one
///   reaction per period, RFC 9002 7.3.2); FlightSize is the event's bytes
///   in flight before the lost packets were removed (RFC 5681's FlightSize
///   when the loss is detected).
/// - "cwnd = 1 MSS" is 2 datagrams, the least a plugin can ask for: quiche
///   never reads a plugin's window below `MINIMUM_WINDOW_PACKETS` (2)
///   maximum datagrams (RFC 9002 7.2's kMinimumWindow).
/// - No fast recovery: there is no window inflation or deflation, and
///   acknowledgements of packets sent before the loss (TCP's duplicate
///   ACKs) do not grow the window, as NewReno's recovery period already
///   ensures; packets sent after it slow-start from the minimum.
/// - Persistent congestion ("timeout") comes after the congestion event of
///   the same losses, so the window is already at the minimum; it keeps
///   that event's ssthresh.
#[derive(Debug, Clone)]
pub struct Tahoe {
    reno: NewReno,
}

impl Tahoe {
    /// A controller for a new path.
    pub fn new(config: &ControllerConfig) -> Self {
        Tahoe {
            reno: NewReno::new(config),
        }
    }
}

impl CongestionController for Tahoe {
    fn on_packet_sent(&mut self, pkt: &SentPacket, now: Instant) {
        self.reno.on_packet_sent(pkt, now);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        self.reno.on_ack(ack, now);
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        if !loss.new_recovery_period {
            return;
        }
        // Starts the recovery period; its halving is replaced below.
        self.reno.on_congestion_event(loss, now);
        let min = NewReno::min_window_of(self.reno.mss);
        self.reno.set_window(min, loss.bytes_in_flight / 2);
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.reno.on_persistent_congestion(now);
    }

    delegate_window_to_reno!(reno);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Driver;

    #[test]
    fn slow_start_adds_acked_bytes() {
        let mut d = Driver::new(NewReno::new(&crate::testing::config()));
        assert_eq!(d.cc.congestion_window(), 10 * 1200);
        // Not app-limited: the whole window is in flight.
        d.send_and_ack(10, false);
        assert_eq!(d.cc.congestion_window(), 20 * 1200);
    }

    #[test]
    fn app_limited_acks_do_not_grow_the_window() {
        let mut d = Driver::new(NewReno::new(&crate::testing::config()));
        d.send_and_ack(5, true);
        assert_eq!(d.cc.congestion_window(), 10 * 1200);
    }

    /// quiche marks the delivery-rate sample application-limited when an
    /// event loop reads a second ACK before the application could fill
    /// the room the first one opened. A sender whose last packet filled the
    /// window grows on such ACKs; one that left room does not.
    #[test]
    fn app_limited_samples_grow_a_window_the_last_packet_filled() {
        fn check<C: CongestionController>(cc: C) {
            let mss = crate::testing::MSS;
            let mut d = Driver::new(cc);
            // The 10th packet fills the 10-packet window.
            d.send(10, mss, false);
            d.ack(5, true);
            assert_eq!(d.cc.congestion_window(), 15 * mss);
            // Read before anything more was sent.
            d.ack(5, true);
            assert_eq!(d.cc.congestion_window(), 20 * mss);
            // 5 packets leave room for 15 more: the window is underused.
            d.send(5, mss, false);
            d.ack(5, true);
            assert_eq!(d.cc.congestion_window(), 20 * mss);
        }
        check(NewReno::new(&crate::testing::config()));
        check(Tahoe::new(&crate::testing::config()));
    }

    #[test]
    fn loss_halves_once_per_recovery_period() {
        let mut d = Driver::new(NewReno::new(&crate::testing::config()));
        d.send_and_ack(10, false); // cwnd 24000
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 12_000);
        assert_eq!(d.cc.ssthresh(), Some(12_000));
        // A second loss in the same period changes nothing.
        d.lose(1, false);
        assert_eq!(d.cc.congestion_window(), 12_000);
        assert_eq!(d.cc.state_name(), "recovery");
    }

    #[test]
    fn congestion_avoidance_adds_one_mss_per_window() {
        let mut d = Driver::new(NewReno::new(&crate::testing::config()));
        d.send_and_ack(10, false);
        // cwnd = ssthresh = 12000, the byte counter at 6000.
        d.lose(1, true);
        // Half a window (6000 bytes) of ACKs: the first MSS more.
        d.send_and_ack(4, false);
        assert_eq!(d.cc.congestion_window(), 12_000);
        d.send_and_ack(1, false);
        assert_eq!(d.cc.congestion_window(), 13_200);
        assert_eq!(d.cc.state_name(), "congestion_avoidance");
        // Then one MSS per window: 13200 bytes = 11 packets.
        d.send_and_ack(10, false);
        assert_eq!(d.cc.congestion_window(), 13_200);
        d.send_and_ack(1, false);
        assert_eq!(d.cc.congestion_window(), 14_400);
    }

    /// RFC 9002 B.5's increase, `cwnd += mss * acked / cwnd` per packet,
    /// in real numbers, against ours after a congestion event: never more
    /// than about half a datagram apart (0.51 here). A counter starting at
    /// zero after the reduction lags by up to 0.87 datagrams and fails.
    #[test]
    fn congestion_avoidance_stays_within_half_a_datagram_of_b5() {
        let mss = crate::testing::MSS as f64;
        let mut d = Driver::new(NewReno::new(&crate::testing::config()));
        d.send_and_ack(10, false);
        d.lose(1, true);
        let mut b5 = d.cc.congestion_window() as f64;
        let mut worst: f64 = 0.0;
        for _ in 0..400 {
            d.send_and_ack(1, false);
            b5 += mss * mss / b5;
            worst = worst.max((d.cc.congestion_window() as f64 - b5).abs() / mss);
        }
        assert!(worst <= 0.52, "{worst}");
        // Both reach the same window: 30 packets after 400 ACKs.
        assert_eq!(d.cc.congestion_window(), 30 * crate::testing::MSS);
        assert!((b5 / mss - 30.0).abs() < 0.1, "{}", b5 / mss);
    }

    #[test]
    fn persistent_congestion_collapses_to_minimum_window() {
        let mut d = Driver::new(NewReno::new(&crate::testing::config()));
        d.send_and_ack(10, false);
        d.lose(3, true);
        d.cc.on_persistent_congestion(d.now);
        assert_eq!(d.cc.congestion_window(), 2 * 1200);
        // Slow start again, up to ssthresh.
        d.send_and_ack(2, false);
        assert_eq!(d.cc.congestion_window(), 4 * 1200);
    }

    #[test]
    fn spurious_loss_is_not_undone() {
        let mut d = Driver::new(NewReno::new(&crate::testing::config()));
        d.send_and_ack(10, false);
        d.lose(1, true);
        d.cc.on_spurious_loss(d.now);
        assert_eq!(d.cc.congestion_window(), 12_000);
    }

    fn tahoe() -> Driver<Tahoe> {
        Driver::new(Tahoe::new(&crate::testing::config()))
    }

    #[test]
    fn tahoe_loss_restarts_slow_start_from_the_minimum() {
        let mut d = tahoe();
        d.send_and_ack(10, false); // slow start: 20 packets
        assert_eq!(d.cc.congestion_window(), 24_000);
        // 20 packets in flight when one is found lost.
        d.send(20, 1200, false);
        d.lose(1, true);
        assert_eq!(d.cc.ssthresh(), Some(12_000));
        assert_eq!(d.cc.congestion_window(), 2 * 1200);
        // A second loss of the same period changes nothing.
        d.lose(1, false);
        assert_eq!(d.cc.congestion_window(), 2 * 1200);
        // ACKs of packets sent before the loss (TCP's duplicate ACKs) do
        // not grow the window: no fast recovery, no inflation.
        d.ack(18, false);
        assert_eq!(d.cc.congestion_window(), 2 * 1200);
        // Slow start from the minimum: 2, 4, 8 packets, then stop at
        // ssthresh (10 packets) and grow one packet per window.
        d.send_and_ack(2, false);
        assert_eq!(d.cc.congestion_window(), 4 * 1200);
        assert_eq!(d.cc.state_name(), "slow_start");
        d.send_and_ack(4, false);
        assert_eq!(d.cc.congestion_window(), 8 * 1200);
        d.send_and_ack(8, false);
        assert_eq!(d.cc.congestion_window(), 10 * 1200);
        assert_eq!(d.cc.state_name(), "congestion_avoidance");
    }

    #[test]
    fn tahoe_ssthresh_is_at_least_two_packets() {
        let mut d = tahoe();
        d.send(1, 1200, false);
        d.lose(1, true); // 1 packet in flight: max(600, 2400)
        assert_eq!(d.cc.ssthresh(), Some(2 * 1200));
        assert_eq!(d.cc.congestion_window(), 2 * 1200);
        d.cc.on_persistent_congestion(d.now);
        assert_eq!(d.cc.congestion_window(), 2 * 1200);
        assert_eq!(d.cc.ssthresh(), Some(2 * 1200));
    }

    #[test]
    fn tahoe_is_registered_as_a_plugin() {
        let info = crate::algorithms().find(|a| a.name == "tahoe").unwrap();
        assert_eq!(info.origin, crate::Origin::Plugin);
        assert_eq!(
            info.params.iter().map(|p| p.name).collect::<Vec<_>>(),
            ["ecn"]
        );
        match crate::parse("tahoe").unwrap() {
            crate::Controller::Plugin(f) => {
                assert_eq!(f.name(), "tahoe");
                let cc = f.build(&crate::testing::config());
                assert_eq!(cc.congestion_window(), 10 * 1200);
            }
            other => panic!("{other:?}"),
        }
    }
}
