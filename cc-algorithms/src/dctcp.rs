//! DCTCP (Alizadeh et al., SIGCOMM 2010; RFC 8257; Linux
//! `net/ipv4/tcp_dctcp.c`) as a QUIC sender.
//!
//! ```text
//! send ECT(0)                                   (ect=ect1: ECT(1), as Linux's dctcp_ect=1)
//! per observation window (about one RTT of acknowledged packets):
//!     F     = CE marks / ECN-capable packets reported in the window
//!     alpha = (1 - g) alpha + g F               g = 1/16, alpha starts at 1
//! on a CE mark, once per RTT:
//!     cwnd = ssthresh = cwnd (1 - alpha / 2)     (at least 2 datagrams)
//! ACKs and losses: NewReno (RFC 9002 Appendix B), halving on loss
//! ```
//!
//! What each source says, and how it maps onto QUIC:
//!
//! - The estimate. RFC 8257 Section 3.3 counts bytes acknowledged and bytes
//!   acknowledged with ECE over an observation window that ends when
//!   SND.UNA passes the SND.NXT recorded at its start, and updates
//!   alpha = (1 - g) alpha + g M there; it recommends g = 1/16. Linux
//!   (`dctcp_update_alpha`) does the same with packets (`tp->delivered`,
//!   `tp->delivered_ce`), g = 1/2^`dctcp_shift_g` = 1/16 and an initial alpha
//!   of `dctcp_alpha_on_init` = 1024/1024 = 1. Here the counts are QUIC's
//!   ACK_ECN counts, exact per packet (RFC 9000 Section 13.4.1): F is the
//!   window's `newly_ce` over its `newly_ect` ([`crate::ecn::AlphaEstimator`]),
//!   and the window ends when an application packet sent after it began is
//!   acknowledged (the largest packet number sent at its start, plus one).
//!   The update runs on the ECN feedback of the ACK that ends the window,
//!   before that ACK's marks are answered, as Linux updates alpha in
//!   `in_ack_event` before the ECE of the same ACK enters CWR.
//! - The cut. RFC 8257 Section 3.3: `cwnd = cwnd * (1 - alpha / 2)` on ECE,
//!   at most once per window of data; Linux: `ssthresh = cwnd - cwnd *
//!   alpha / 2` (at least 2 packets) when TCP enters CWR, which it does once
//!   per window. Here a mark starts a new reduction only if the largest
//!   packet its ACK acknowledged was sent after the last reduction began
//!   (RFC 9002 Section 7.3.2's rule for recovery periods, which Appendix
//!   B.7 applies to CE). Packets sent before the cut do not grow the window
//!   (NewReno's recovery period; TCP's CWR likewise does not grow).
//! - Losses. RFC 8257 Section 3.5: respond to loss as conventional TCP;
//!   Linux: ssthresh = cwnd / 2. Here NewReno's halving, once per loss
//!   recovery period: a loss of a packet sent after the last *loss*
//!   reduction halves even if a mark cut the window since, as a loss
//!   during Linux's CWR moves it to Recovery and halves. A mark on a packet
//!   sent before a loss reduction is not answered again.
//! - Without ECN feedback (a path that bleaches or drops the codepoint, so
//!   quiche's validation fails and `on_ecn` never comes) this is NewReno:
//!   Linux falls back to Reno (`dctcp_reno`) when ECN is not negotiated.
//!
//! Departures: windows are in bytes, not packets; the cut is immediate
//! rather than spread over the round by PRR; no undo on a spurious loss
//! (`dctcp_cwnd_undo`); pacing is quiche's (1.25 cwnd / sRTT), Linux's
//! DCTCP does not pace unless fq is configured to.

use std::time::Instant;

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, Ecn, EcnEvent,
    LossEvent, SentPacket,
};

use crate::ecn::{AlphaEstimator, CongestionPeriod, PacketNumbers};
use crate::newreno::{delegate_window_to_reno, NewReno};
use crate::slow_start::SlowStartConfig;

/// DCTCP configuration; it is also the factory.
#[derive(Debug, Clone)]
pub struct DctcpConfig {
    /// EWMA gain g.
    pub g: f64,
    /// alpha before the first window ends.
    pub alpha_init: f64,
    /// Send ECT(1) instead of ECT(0).
    pub ect1: bool,
    /// The slow start (`slow_start=` and its rule's constants).
    pub slow_start: SlowStartConfig,
}

impl DctcpConfig {
    /// The defaults, stated once: the registry's parameter table takes
    /// its defaults from here. RFC 8257's and Linux's: g = 1/16, alpha = 1, ECT(0).
    pub const DEFAULT: DctcpConfig = DctcpConfig {
        slow_start: SlowStartConfig::STANDARD,
        g: 1.0 / 16.0,
        alpha_init: 1.0,
        ect1: false,
    };
}

impl Default for DctcpConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl CongestionControllerFactory for DctcpConfig {
    fn name(&self) -> &str {
        "dctcp"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Dctcp::new(self, config).with_slow_start(self.slow_start))
    }
}

/// DCTCP state.
#[derive(Debug, Clone)]
pub struct Dctcp {
    reno: NewReno,
    /// The congestion estimate.
    pub alpha: AlphaEstimator,
    pns: PacketNumbers,
    /// Last reduction for a loss.
    loss_period: CongestionPeriod,
    /// Last reduction of either kind.
    any_period: CongestionPeriod,
    ect1: bool,
    ce_reductions: u64,
    /// CE marks reported to this controller, all told.
    ce_marks: u64,
}

impl Dctcp {
    /// The same controller with `kind` of slow start.
    pub fn with_slow_start(mut self, cfg: impl Into<SlowStartConfig>) -> Self {
        self.reno = self.reno.with_slow_start(cfg);
        self
    }

    /// A controller for a new path.
    pub fn new(cfg: &DctcpConfig, config: &ControllerConfig) -> Self {
        Dctcp {
            reno: NewReno::new(config),
            alpha: AlphaEstimator::new(cfg.alpha_init, cfg.g),
            pns: PacketNumbers::default(),
            loss_period: CongestionPeriod::default(),
            any_period: CongestionPeriod::default(),
            ect1: cfg.ect1,
            ce_reductions: 0,
            ce_marks: 0,
        }
    }
}

impl CongestionController for Dctcp {
    fn on_packet_sent(&mut self, pkt: &SentPacket, now: Instant) {
        self.pns.on_sent(pkt);
        self.reno.on_packet_sent(pkt, now);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        self.pns.on_ack(ack);
        self.reno.on_ack(ack, now);
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        let new = self
            .loss_period
            .begin_if_new(loss.largest_lost_time_sent, now);
        if new {
            self.any_period.begin(now);
        }
        self.reno.on_congestion_event(
            &LossEvent {
                new_recovery_period: new,
                ..*loss
            },
            now,
        );
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.loss_period.reset();
        self.any_period.reset();
        self.reno.on_persistent_congestion(now);
    }

    delegate_window_to_reno!(reno);

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.reno.visit_slow_start_metrics(f);
        f("dctcp_alpha", self.alpha.alpha);
        f("dctcp_ce_reductions", self.ce_reductions as f64);
        f("dctcp_ce", self.ce_marks as f64);
    }

    fn ecn_codepoint(&self) -> Ecn {
        if self.ect1 {
            Ecn::Ect1
        } else {
            Ecn::Ect0
        }
    }

    fn on_ecn(&mut self, ecn: &EcnEvent, now: Instant) {
        self.ce_marks = self.ce_marks.saturating_add(ecn.newly_ce);
        self.alpha.add(ecn);
        if self.alpha.window_over(&self.pns) {
            self.alpha.end_window(&self.pns);
        }
        if ecn.newly_ce > 0
            && self
                .any_period
                .begin_if_new(ecn.largest_acked_time_sent, now)
        {
            self.ce_reductions += 1;
            let kept = self.reno.cwnd as f64 * (1.0 - self.alpha.alpha / 2.0);
            self.reno.reduce_to(kept as usize, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{config, Driver, MSS};

    fn dctcp() -> Driver<Dctcp> {
        Driver::new(Dctcp::new(&DctcpConfig::default(), &config()))
    }

    #[test]
    fn sends_ect0_or_ect1() {
        assert_eq!(dctcp().cc.ecn_codepoint(), Ecn::Ect0);
        let one = DctcpConfig {
            ect1: true,
            ..DctcpConfig::default()
        };
        assert_eq!(Dctcp::new(&one, &config()).ecn_codepoint(), Ecn::Ect1);
        assert_eq!(
            crate::testing::driver_for("dctcp:ect=ect1")
                .cc
                .ecn_codepoint(),
            Ecn::Ect1
        );
    }

    /// With a steady fraction F of each round marked, alpha converges to
    /// F: after n rounds it is F + (1 - F)(15/16)^n.
    #[test]
    fn alpha_converges_to_a_steady_marked_fraction() {
        for (marked, of) in [(1u64, 10usize), (3, 10), (0, 10)] {
            let mut d = dctcp();
            // Keep the window large enough: start it at 200 packets.
            d.cc.reno.cwnd = 200 * MSS;
            let f = marked as f64 / of as f64;
            for n in 1..=120 {
                d.round_with_marks(of, marked);
                let expected = f + (1.0 - f) * (15.0f64 / 16.0).powi(n);
                assert!(
                    (d.cc.alpha.alpha - expected).abs() < 1e-9,
                    "F={f} round {n}: alpha {} expected {expected}",
                    d.cc.alpha.alpha
                );
            }
            assert!((d.cc.alpha.alpha - f).abs() < 0.001 + (1.0 - f) * 0.0005);
        }
    }

    /// The cut is alpha/2 of the window, with alpha as updated by the ACK
    /// that carries the mark.
    #[test]
    fn cut_is_alpha_over_two() {
        let mut d = dctcp();
        // Round 1: no marks; alpha = 15/16.
        d.round_with_marks(10, 0); // slow start: 20 packets
        assert!((d.cc.alpha.alpha - 15.0 / 16.0).abs() < 1e-12);
        assert_eq!(d.cc.congestion_window(), 20 * MSS);
        // Round 2: half of 10 marked; alpha = (15/16)^2 + 0.5/16.
        d.send(10, MSS, false);
        d.ack(10, false); // 30 packets
        d.ecn(5, 10);
        let alpha = (15.0f64 / 16.0).powi(2) + 0.5 / 16.0;
        assert!((d.cc.alpha.alpha - alpha).abs() < 1e-12);
        let expected = (30.0 * MSS as f64 * (1.0 - alpha / 2.0)) as usize;
        assert_eq!(d.cc.congestion_window(), expected);
        assert_eq!(d.cc.ssthresh(), Some(expected));
        // Less than NewReno's halving: 19,617 bytes kept, not 18,000.
        assert_eq!(expected, 19_617);
    }

    #[test]
    fn cuts_once_per_rtt() {
        let mut d = dctcp();
        d.cc.reno.cwnd = 100 * MSS;
        d.send(40, MSS, false);
        d.ack(10, false);
        d.ecn(2, 10);
        let once = d.cc.congestion_window();
        // The first window (2 of 10 marked) takes alpha from 1 to
        // 15/16 + 0.2/16 = 0.95; 110 packets are cut by alpha / 2.
        assert_eq!(d.cc.alpha.alpha, 0.95);
        assert_eq!(once, (110.0 * MSS as f64 * (1.0 - 0.95 / 2.0)) as usize);
        // Marks on the rest of the round, sent before the cut: no cut.
        for _ in 0..3 {
            d.ack(10, false);
            d.ecn(10, 10);
            assert_eq!(d.cc.congestion_window(), once);
        }
        // The next round's marks cut again.
        d.send(10, MSS, false);
        d.ack(10, false);
        d.ecn(1, 10);
        assert!(d.cc.congestion_window() < once);
        let mut m = Vec::new();
        d.cc.visit_metrics(&mut |k, v| m.push((k, v)));
        assert!(m.contains(&("dctcp_ce_reductions", 2.0)), "{m:?}");
    }

    /// Losses halve as NewReno's, even right after a cut for marks; a mark
    /// on a packet sent before a loss reduction is not answered again.
    #[test]
    fn losses_halve_as_newreno() {
        let mut d = dctcp();
        d.send_and_ack(10, false); // 20 packets
        d.send(20, MSS, false);
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 10 * MSS);
        d.lose(1, true); // same loss period
        assert_eq!(d.cc.congestion_window(), 10 * MSS);
        d.ack(5, false);
        d.ecn(5, 5); // sent before the loss reduction
        assert_eq!(d.cc.congestion_window(), 10 * MSS);
        // A mark on a later packet cuts by alpha/2, then a loss of a
        // packet sent after the loss reduction (but before the cut)
        // halves again.
        d.ack(13, false);
        d.send(10, MSS, false);
        d.ack(2, false);
        d.ecn(1, 2);
        let cut = d.cc.congestion_window();
        assert!(cut < 10 * MSS && cut > 5 * MSS, "{cut}");
        d.lose(1, false);
        assert_eq!(d.cc.congestion_window(), cut / 2);
    }

    /// No ECN feedback at all: exactly NewReno.
    #[test]
    fn without_feedback_it_is_newreno() {
        let mut d = dctcp();
        let mut r = Driver::new(NewReno::new(&config()));
        for step in 0..50 {
            if step % 7 == 3 {
                d.send(20, MSS, false);
                r.send(20, MSS, false);
                d.lose(2, true);
                r.lose(2, true);
                d.ack(18, false);
                r.ack(18, false);
            } else {
                d.send_and_ack(8, false);
                r.send_and_ack(8, false);
            }
            assert_eq!(d.cc.congestion_window(), r.cc.congestion_window());
        }
    }
}
