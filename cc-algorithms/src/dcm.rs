//! DCM+ and DCM (`shared/seeds/004_*.txt`, the DCM+ paper, which also
//! restates DCM by Hamamreh and Bawatna).
//!
//! Both estimate the bandwidth (BWE) as Westwood does and set, on a
//! congestion event (equation 4, the Westwood+ listing):
//!
//! ```text
//! ssthresh = max(2, BWE x RTTmin / SegmentSize)        (packets)
//! 3 dupacks: cwnd = ssthresh          coarse timeout: cwnd = 1
//! ```
//!
//! **DCM+** uses the Westwood+ estimator ("the same algorithm explained in
//! TCP Westwood+"), and grows with
//!
//! ```text
//! rate_CA = RTT_old / RTT_new                                        (5)
//! cwnd < ssthresh:  CWND_new = CWND_old + 2 x rate_CA                 (7)
//! cwnd >= ssthresh: CWND_new = CWND_old + 2 / (rate_CA x CWND_old)
//! ```
//!
//! and in slow start "linearly tracks the current state of ssthresh": cwnd
//! never exceeds the measured ssthresh, and when ssthresh changes, cwnd
//! moves to it and stays there.
//!
//! **DCM** uses the original Westwood estimator ("the algorithm of TCP
//! Westwood \[3\]") and, when no new path is found (case 2, equation 2):
//!
//! ```text
//! cwnd < ssth:  CWND_new = CWND_old + (RTT_old / RTT_new) x 0.9
//! cwnd >= ssth: CWND_new = CWND_old + RTT_new / (CWND_old x RTT_old)
//! ```
//!
//! Mapping onto QUIC, and choices where the paper is open:
//! - Windows are in bytes; "packet" is one maximum datagram. Equations 2
//!   and 7 are applied per acknowledged packet, as NewReno's rules they
//!   replace are (so in avoidance DCM+ adds about `2 / rate_CA` packets per
//!   RTT, DCM about `RTT_new / RTT_old`).
//! - `RTT_old` and `RTT_new` are quiche's smoothed RTT (Jacobson's
//!   estimator, as the paper says) at the ends of the previous and the
//!   current round trip ([`RoundTracker`]); per ACK the ratio would be
//!   almost always 1. `rate_CA` is kept within `[1/8, 8]` so one odd sample
//!   cannot stall or explode the window.
//! - DCM+'s tracking: ssthresh is set from BWE x RTTmin at each congestion
//!   event (equation 4), and slow start climbs to it and stops there, never
//!   past it, instead of overshooting into avoidance. We first re-measured
//!   ssthresh continuously from BWE, which the paper's wording also allows.
//!   But a BWE measured while the sender's own window limits it gives
//!   BWE x RTTmin <= cwnd, so ssthresh sank to the window: after a timeout
//!   the flow crawled in avoidance from 2 packets. Before the first
//!   congestion event, ssthresh is unset and slow start is unbounded, as in
//!   NewReno.
//! - Without a bandwidth estimate yet, a loss halves the window (NewReno).
//! - "Coarse timeout" is persistent congestion; "cwnd = 1" is the QUIC
//!   minimum window of 2 datagrams.
//! - The bandwidth filter is the `filter=` parameter of both, so the two
//!   can be compared with the same filter, and each defaults to what its
//!   paper used. The paper ran every protocol in ns-3.29, whose
//!   `TcpWestwood` offers both: `filter=1`, ns-3 Westwood, per-ACK samples
//!   `acked bytes / RTT` through a Tustin filter
//!   ([`WestwoodTustinFilter`]), DCM's default; `filter=2`, ns-3
//!   Westwood+, one sample per RTT through the same Tustin filter
//!   ([`Ns3WestwoodPlusFilter`]), DCM+'s default. `filter=0` is Linux
//!   `tcp_westwood.c`'s Westwood+ ([`WestwoodBwFilter`], the estimator of
//!   our `westwood+`), which DCM+ used here before. The paper names no
//!   filter beyond "a low-pass filter \[6,7\]"; ns-3.29's is the one its
//!   results came from, hence the defaults.
//! - RTTmin (equation 4) is the minimum RTT sample since the last
//!   persistent congestion: it is re-learned from the next sample after
//!   one, as Linux Westwood+ does after a timeout (and as our `westwood+`
//!   does), so a path whose delay rose is not sized by a stale minimum.
//!   ns-3's `TcpSocketState::m_minRtt` is never reset; this departs from
//!   the paper's simulator on purpose, for both variants.
//!
//! Not carried over, and why:
//! - Equation 6, `RTO_new = RTO_old x RTT_new / RTT_old`: QUIC has no RTO.
//!   Its probe timeout is `srtt + max(4 rttvar, 1 ms) + max_ack_delay`,
//!   recomputed from the same smoothed RTT on every sample, so it already
//!   scales with `RTT_new`. Overriding it would need a loss-detection hook
//!   in quiche, outside the window and pacing that controllers own.
//!   `rate_CA` is reported as a metric instead.
//! - DCM's path switch (case 1, `CWND_new = RTT_old / RTT_new x
//!   ssthresh_new x beta` on a new route found by the DYMO routing
//!   protocol): it needs an L3 routing protocol to find paths. QUIC's
//!   connection migration gives each new path its own fresh controller, and
//!   carrying state from the old path's controller would need a hook quiche
//!   does not have. Only case 2 (no new path) is implemented.
//!
//! [`RoundTracker`]: crate::estimators::RoundTracker
//! [`WestwoodTustinFilter`]: crate::estimators::WestwoodTustinFilter
//! [`Ns3WestwoodPlusFilter`]: crate::estimators::Ns3WestwoodPlusFilter
//! [`WestwoodBwFilter`]: crate::estimators::WestwoodBwFilter

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

use crate::estimators::{RoundTracker, WestwoodEstimator, WestwoodFilterKind};
use crate::newreno::{delegate_window_to_reno, NewReno};
use crate::slow_start::SlowStartConfig;

/// Which of the two algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// DCM+: Westwood+ estimate, equation 7, slow start tracking ssthresh.
    DcmPlus,
    /// DCM: Westwood estimate, equation 2 (no path switching).
    Dcm,
}

impl Variant {
    /// The bandwidth filter the variant's paper used: ns-3 Westwood+ for
    /// DCM+, ns-3 Westwood for DCM.
    pub fn paper_filter(self) -> WestwoodFilterKind {
        match self {
            Variant::DcmPlus => WestwoodFilterKind::Ns3WestwoodPlus,
            Variant::Dcm => WestwoodFilterKind::Ns3Westwood,
        }
    }
}

/// DCM/DCM+ configuration; it is also the factory.
#[derive(Debug, Clone)]
pub struct DcmConfig {
    /// DCM+ or DCM.
    pub variant: Variant,
    /// The bandwidth filter.
    pub filter: WestwoodFilterKind,
    /// The slow start (`slow_start=` and its rule's constants).
    pub slow_start: SlowStartConfig,
}

impl DcmConfig {
    /// A variant with its paper's filter.
    pub fn new(variant: Variant) -> Self {
        DcmConfig {
            slow_start: SlowStartConfig::STANDARD,
            variant,
            filter: variant.paper_filter(),
        }
    }
}

impl CongestionControllerFactory for DcmConfig {
    fn name(&self) -> &str {
        match self.variant {
            Variant::DcmPlus => "dcm+",
            Variant::Dcm => "dcm",
        }
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(
            Dcm::with_filter(self.variant, self.filter, config).with_slow_start(self.slow_start),
        )
    }
}

/// Bounds of `rate_CA`.
const RATE_CA_BOUNDS: (f64, f64) = (1.0 / 8.0, 8.0);

/// DCM/DCM+ state.
#[derive(Debug, Clone)]
pub struct Dcm {
    variant: Variant,
    reno: NewReno,
    bw: WestwoodEstimator,
    rounds: RoundTracker,
    /// Latest RTT sample.
    rtt: Duration,
    /// Minimum RTT sample since the last persistent congestion.
    rtt_min: Option<Duration>,
    /// Smoothed RTT at the end of the previous round (`RTT_old`).
    rtt_old: Option<Duration>,
    /// `RTT_old / RTT_new` of the last completed round.
    rate_ca: f64,
    /// Window in packets, fractional.
    cwnd_pkts: f64,
}

impl Dcm {
    /// The same controller with `kind` of slow start.
    pub fn with_slow_start(mut self, cfg: impl Into<SlowStartConfig>) -> Self {
        self.reno = self.reno.with_slow_start(cfg);
        self
    }

    /// A controller for a new path, with the variant's paper filter.
    pub fn new(variant: Variant, config: &ControllerConfig) -> Self {
        Self::with_filter(variant, variant.paper_filter(), config)
    }

    /// A controller for a new path with the bandwidth filter `filter`.
    pub fn with_filter(
        variant: Variant,
        filter: WestwoodFilterKind,
        config: &ControllerConfig,
    ) -> Self {
        let reno = NewReno::new(config);
        let cwnd_pkts = reno.cwnd as f64 / reno.mss as f64;
        Dcm {
            variant,
            reno,
            bw: WestwoodEstimator::new(filter),
            rounds: RoundTracker::default(),
            rtt: Duration::ZERO,
            rtt_min: None,
            rtt_old: None,
            rate_ca: 1.0,
            cwnd_pkts,
        }
    }

    fn mss(&self) -> f64 {
        self.reno.mss as f64
    }

    /// Bandwidth estimate, bytes per second.
    pub fn bwe(&self) -> f64 {
        self.bw.estimate()
    }

    /// The bandwidth filter in use.
    pub fn filter(&self) -> WestwoodFilterKind {
        self.bw.kind()
    }

    /// Equation 4 in bytes; `None` without an estimate.
    pub fn bwe_ssthresh(&self) -> Option<usize> {
        let bwe = self.bwe();
        let rtt_min = self.rtt_min?;
        (bwe > 0.0).then(|| {
            let bytes = (bwe * rtt_min.as_secs_f64()).min(usize::MAX as f64 / 2.0);
            (bytes as usize).max(NewReno::min_window_of(self.reno.mss))
        })
    }

    /// The growth, in packets, for one acknowledged packet (equations 2
    /// and 7). Both are written with `rate_CA = RTT_old / RTT_new`: DCM's
    /// `RTT_new / (CWND_old x RTT_old)` is `1 / (rate_CA x CWND_old)`.
    pub fn growth_per_packet(&self, slow_start: bool) -> f64 {
        let w = self.cwnd_pkts.max(1.0);
        match (self.variant, slow_start) {
            (Variant::DcmPlus, true) => 2.0 * self.rate_ca,
            (Variant::DcmPlus, false) => 2.0 / (self.rate_ca * w),
            (Variant::Dcm, true) => self.rate_ca * 0.9,
            (Variant::Dcm, false) => 1.0 / (self.rate_ca * w),
        }
    }

    fn sync_window(&mut self) {
        let min = NewReno::min_window_of(self.reno.mss) as f64;
        let bytes = (self.cwnd_pkts * self.mss()).clamp(min, usize::MAX as f64 / 2.0);
        self.reno.cwnd = bytes as usize;
        self.cwnd_pkts = self.reno.cwnd as f64 / self.mss();
    }
}

impl CongestionController for Dcm {
    fn on_packet_sent(&mut self, pkt: &SentPacket, _now: Instant) {
        self.rounds.on_sent(pkt.space, pkt.pkt_num);
        self.reno.note_sent(pkt);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        if let Some(s) = ack.rtt_sample {
            self.rtt = s;
            self.rtt_min = Some(self.rtt_min.map_or(s, |m| m.min(s)));
        }
        self.bw.on_ack(now, ack.acked_bytes as u64, self.rtt);
        // rate_CA from the smoothed RTTs at the ends of consecutive rounds.
        let srtt = ack.rtt.smoothed_rtt;
        if ack
            .acked
            .last()
            .is_some_and(|p| self.rounds.on_ack(ack.space, p.pkt_num))
        {
            if let Some(old) = self.rtt_old {
                let r = old.as_secs_f64() / srtt.as_secs_f64().max(1e-9);
                if r.is_finite() {
                    self.rate_ca = r.clamp(RATE_CA_BOUNDS.0, RATE_CA_BOUNDS.1);
                }
            }
            self.rtt_old = Some(srtt);
        }
        // The slow-start exit rule (`slow_start=`) sees every ACK in slow
        // start; DCM's own growth below is scaled by it (CSS).
        if self.reno.slow_start_rule(ack, now) {
            self.cwnd_pkts = self.reno.cwnd as f64 / self.mss();
            return;
        }
        if self.reno.window_underused(ack) {
            return;
        }
        let fresh = ack
            .acked
            .iter()
            .filter(|p| !self.reno.in_recovery(p.time_sent))
            .count();
        if fresh == 0 {
            return;
        }
        self.reno.recovering = false;
        self.cwnd_pkts = self.reno.cwnd as f64 / self.mss();
        let ssthresh_pkts = self.reno.ssthresh as f64 / self.mss();
        for _ in 0..fresh {
            let slow_start = self.cwnd_pkts < ssthresh_pkts;
            let scale = if slow_start {
                self.reno.slow_start_scale()
            } else {
                1.0
            };
            self.cwnd_pkts += self.growth_per_packet(slow_start) * scale;
            if slow_start && self.variant == Variant::DcmPlus {
                // Never past the measured ssthresh.
                self.cwnd_pkts = self.cwnd_pkts.min(ssthresh_pkts);
            }
        }
        self.sync_window();
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.reno.on_congestion_event(loss, now);
        if loss.new_recovery_period {
            if let Some(s) = self.bwe_ssthresh() {
                self.reno.set_window(s, s);
            }
        }
        self.cwnd_pkts = self.reno.cwnd as f64 / self.mss();
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        let target = self.bwe_ssthresh();
        self.reno.on_persistent_congestion(now);
        if let Some(s) = target {
            self.reno.ssthresh = s;
        }
        // Re-learn RTTmin from the next sample, as Linux Westwood+ does.
        self.rtt_min = None;
        self.cwnd_pkts = self.reno.cwnd as f64 / self.mss();
    }

    delegate_window_to_reno!(reno);

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.reno.visit_slow_start_metrics(f);
        f("dcm_rate_ca", self.rate_ca);
        f("dcm_bwe_bps", self.bwe() * 8.0);
        if let Some(m) = self.rtt_min {
            f("dcm_rtt_min_ms", m.as_secs_f64() * 1e3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{config, Driver, MSS};

    fn dcm(variant: Variant) -> Driver<Dcm> {
        Driver::new(Dcm::new(variant, &config()))
    }

    #[test]
    fn equation_7_and_equation_2_by_hand() {
        let mut d = Dcm::new(Variant::DcmPlus, &config());
        d.cwnd_pkts = 20.0;
        d.rate_ca = 1.25; // RTT_old 125 ms, RTT_new 100 ms
        assert_eq!(d.growth_per_packet(true), 2.5);
        // 2 / (1.25 x 20) = 0.08
        assert!((d.growth_per_packet(false) - 0.08).abs() < 1e-12);

        let mut d = Dcm::new(Variant::Dcm, &config());
        d.cwnd_pkts = 20.0;
        d.rate_ca = 1.25; // RTT_old 125 ms, RTT_new 100 ms
                          // (RTT_old / RTT_new) x 0.9 = 1.125
        assert!((d.growth_per_packet(true) - 1.125).abs() < 1e-12);
        // RTT_new / (CWND_old x RTT_old) = 100 / (20 x 125) = 0.04
        assert!((d.growth_per_packet(false) - 0.04).abs() < 1e-12);
    }

    #[test]
    fn loss_sets_ssthresh_from_bwe_and_slow_start_tracks_it() {
        let mut d = dcm(Variant::DcmPlus);
        for _ in 0..20 {
            d.send(10, MSS, false);
            d.ack(10, false);
        }
        let target = d.cc.bwe_ssthresh().unwrap();
        d.lose(1, true);
        assert_eq!(d.cc.ssthresh(), Some(target));
        assert_eq!(d.cc.congestion_window(), target);

        // After a timeout, slow start climbs by 2 rate_CA per packet but
        // never past the measured ssthresh.
        d.cc.on_persistent_congestion(d.now);
        assert_eq!(d.cc.congestion_window(), 2 * MSS);
        let mut rounds = 0;
        while d.cc.congestion_window() < target {
            let pkts = (d.cc.congestion_window() / MSS).max(1);
            d.send(pkts, MSS, false);
            d.ack(pkts, false);
            // Slow start stops at ssthresh; the rest of that ACK grows by
            // the avoidance rule, 2 / (rate_CA x W) per packet, so at most
            // 2 packets more at rate_CA = 1, not a slow-start doubling.
            assert!(
                d.cc.congestion_window() <= target + 2 * MSS,
                "slow start overshot ssthresh: {} > {target} + 2 packets",
                d.cc.congestion_window()
            );
            rounds += 1;
            assert!(rounds < 20, "slow start did not reach ssthresh");
        }
        assert_eq!(d.cc.ssthresh(), Some(target));
    }

    #[test]
    fn dcm_uses_the_per_ack_westwood_estimate() {
        let mut d = dcm(Variant::Dcm);
        for _ in 0..50 {
            d.send(10, MSS, false);
            d.ack(10, false);
        }
        // Each ACK: 12_000 bytes per 100 ms sample = 120 kB/s; the Tustin
        // filter converges to it.
        assert!(
            (d.cc.bwe() - 120_000.0).abs() / 120_000.0 < 0.01,
            "{}",
            d.cc.bwe()
        );
        let target = d.cc.bwe_ssthresh().unwrap();
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), target);
    }

    /// Three ACKs of 10 packets, 100 ms apart (plus the 10 us of sending).
    fn three_rounds(d: &mut Driver<Dcm>) {
        for _ in 0..3 {
            d.send(10, MSS, false);
            d.ack(10, false);
        }
    }

    #[test]
    fn each_variant_defaults_to_its_papers_filter_and_both_take_any() {
        // DCM+: ns-3 Westwood+, one 120 kB/s sample per RTT through the
        // Tustin filter: the first ACK opens a period, the next two close
        // one each: 0.1 x 120k / 2 = 6000, then 0.9 x 6000 + 0.1 x 120k.
        let mut plus = dcm(Variant::DcmPlus);
        assert_eq!(plus.cc.filter(), WestwoodFilterKind::Ns3WestwoodPlus);
        three_rounds(&mut plus);
        assert!((plus.cc.bwe() - 17_400.0).abs() < 1e-6, "{}", plus.cc.bwe());
        assert_eq!(
            Dcm::new(Variant::Dcm, &config()).filter(),
            WestwoodFilterKind::Ns3Westwood
        );

        // Linux Westwood+: the first window's sample (12_000 B in
        // 100.01 ms) seeds both stages.
        let mut linux = Driver::new(Dcm::with_filter(
            Variant::DcmPlus,
            WestwoodFilterKind::Linux,
            &config(),
        ));
        three_rounds(&mut linux);
        assert!(
            (linux.cc.bwe() - 12_000.0 / 0.100_01).abs() < 1.0,
            "{}",
            linux.cc.bwe()
        );

        // DCM with DCM+'s filter estimates exactly as DCM+ does.
        let mut dcm_plus_filter = Driver::new(Dcm::with_filter(
            Variant::Dcm,
            WestwoodFilterKind::Ns3WestwoodPlus,
            &config(),
        ));
        three_rounds(&mut dcm_plus_filter);
        assert_eq!(dcm_plus_filter.cc.bwe(), plus.cc.bwe());

        // And the registry passes `filter=` through.
        for (spec, name) in [("dcm+:filter=0", "dcm+"), ("dcm:filter=2", "dcm")] {
            match crate::parse(spec).unwrap() {
                crate::Controller::Plugin(f) => assert_eq!(f.name(), name),
                other => panic!("{other:?}"),
            }
        }
        assert!(crate::parse("dcm:filter=3").is_err());
    }

    #[test]
    fn persistent_congestion_relearns_rtt_min() {
        for variant in [Variant::DcmPlus, Variant::Dcm] {
            let mut d = dcm(variant);
            three_rounds(&mut d);
            assert_eq!(d.cc.rtt_min, Some(Duration::from_millis(100)));
            d.cc.on_persistent_congestion(d.now);
            assert_eq!(d.cc.rtt_min, None);
            // The path's delay rose: RTTmin is the new minimum, not the old.
            d.rtt = Duration::from_millis(150);
            d.send_and_ack(2, false);
            assert_eq!(d.cc.rtt_min, Some(Duration::from_millis(150)));
        }
    }

    #[test]
    fn rate_ca_follows_the_smoothed_rtt_across_rounds() {
        let mut d = dcm(Variant::DcmPlus);
        d.send_and_ack(5, false);
        d.send_and_ack(5, false);
        assert_eq!(d.cc.rate_ca, 1.0);
        // The next round's smoothed RTT is 125 ms: rate_CA = 100 / 125.
        d.rtt = Duration::from_millis(125);
        d.send_and_ack(5, false);
        assert!((d.cc.rate_ca - 0.8).abs() < 1e-9, "{}", d.cc.rate_ca);
        // And back: 125 / 100.
        d.rtt = Duration::from_millis(100);
        d.send_and_ack(5, false);
        assert!((d.cc.rate_ca - 1.25).abs() < 1e-9, "{}", d.cc.rate_ca);
    }
}
