//! TCP Westwood+ (Mascolo, Grieco et al.) with the semantics of Linux
//! `net/ipv4/tcp_westwood.c`.
//!
//! Bandwidth estimate (BWE): acknowledged bytes are summed over a sampling
//! window of at least `max(RTT, 50 ms)`; each window's sample passes two
//! cascaded `x <- (7 x + sample) / 8` filters ([`WestwoodBwFilter`]).
//!
//! ```text
//! on loss (3 dupacks):   ssthresh = max(BWE * RTTmin / mss, 2);  cwnd = ssthresh
//! on timeout (RTO):      ssthresh = max(BWE * RTTmin / mss, 2);  cwnd = minimum
//! otherwise:             Reno (slow start, additive increase)
//! ```
//!
//! Mapping onto QUIC:
//! - "3 dupacks" is a congestion event that starts a recovery period; Linux
//!   sets `cwnd = ssthresh` when CWR completes, here it happens at the event
//!   since QUIC has no separate CWR completion.
//! - "RTO" is persistent congestion. Like Linux (`reset_rtt_min`), RTTmin is
//!   re-learned from the next sample after it.
//! - RTTmin is Westwood's own minimum of the per-ACK RTT samples; the RTT
//!   that sizes the sampling window is the latest sample (Linux `w->rtt`).
//! - Before the first sampling window closes there is no estimate; Linux
//!   would then fall to 2 packets. Here the reduction is NewReno's halving
//!   until an estimate exists, so an early loss does not stall the flow.
//! - Growth and recovery periods are NewReno's.
//! - `filter=` picks the bandwidth filter as for DCM and DCM+: 0 (the
//!   default) is Linux's above; 1 is ns-3's original Westwood (per-ACK
//!   samples, Tustin filter) and 2 ns-3's Westwood+ (one sample per RTT),
//!   so the DCM+ paper's Westwood vs Westwood+ comparison, run in ns-3,
//!   can be run with ns-3's two filters.

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

use crate::estimators::{WestwoodEstimator, WestwoodFilterKind};
use crate::newreno::{delegate_window_to_reno, NewReno};
use crate::slow_start::SlowStartConfig;

/// Westwood+'s one tunable: its bandwidth filter.
#[derive(Debug, Clone)]
pub struct WestwoodConfig {
    /// The bandwidth filter (Linux's by default).
    pub filter: WestwoodFilterKind,
    /// The slow start (`slow_start=` and its rule's constants).
    pub slow_start: SlowStartConfig,
}

impl WestwoodConfig {
    /// The defaults, stated once: the registry's parameter table takes
    /// its defaults from here.
    pub const DEFAULT: WestwoodConfig = WestwoodConfig {
        slow_start: SlowStartConfig::STANDARD,
        filter: WestwoodFilterKind::Linux,
    };
}

impl Default for WestwoodConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl CongestionControllerFactory for WestwoodConfig {
    fn name(&self) -> &str {
        "westwood+"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Westwood::with_filter(self.filter, config).with_slow_start(self.slow_start))
    }
}

/// Westwood+ state.
#[derive(Debug, Clone)]
pub struct Westwood {
    reno: NewReno,
    /// Bandwidth estimator.
    bw: WestwoodEstimator,
    /// Latest RTT sample.
    rtt: Duration,
    /// Minimum RTT since the last reset.
    rtt_min: Option<Duration>,
}

impl Westwood {
    /// The same controller with `kind` of slow start.
    pub fn with_slow_start(mut self, cfg: impl Into<SlowStartConfig>) -> Self {
        self.reno = self.reno.with_slow_start(cfg);
        self
    }

    /// A controller for a new path (Linux's filter).
    pub fn new(config: &ControllerConfig) -> Self {
        Self::with_filter(WestwoodFilterKind::Linux, config)
    }

    /// A controller for a new path with the bandwidth filter `filter`.
    pub fn with_filter(filter: WestwoodFilterKind, config: &ControllerConfig) -> Self {
        Westwood {
            reno: NewReno::new(config),
            bw: WestwoodEstimator::new(filter),
            rtt: Duration::ZERO,
            rtt_min: None,
        }
    }

    /// `BWE * RTTmin` in bytes, at least 2 packets; `None` without an
    /// estimate.
    pub fn bw_rtt_min(&self) -> Option<usize> {
        let rtt_min = self.rtt_min?;
        let bwe = self.bw.estimate();
        if bwe <= 0.0 {
            return None;
        }
        let bytes = bwe * rtt_min.as_secs_f64();
        Some((bytes as usize).max(NewReno::min_window_of(self.reno.mss)))
    }
}

impl CongestionController for Westwood {
    fn on_packet_sent(&mut self, pkt: &SentPacket, _now: Instant) {
        self.reno.note_sent(pkt);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        if let Some(sample) = ack.rtt_sample {
            self.rtt = sample;
            self.rtt_min = Some(self.rtt_min.map_or(sample, |m| m.min(sample)));
        }
        self.bw.on_ack(now, ack.acked_bytes as u64, self.rtt);
        self.reno.grow(ack, now);
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.reno.on_congestion_event(loss, now);
        if loss.new_recovery_period {
            if let Some(target) = self.bw_rtt_min() {
                self.reno.set_window(target, target);
            }
        }
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        let target = self.bw_rtt_min();
        self.reno.on_persistent_congestion(now);
        if let Some(target) = target {
            self.reno.ssthresh = target;
        }
        self.rtt_min = None;
    }

    delegate_window_to_reno!(reno);

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.reno.visit_slow_start_metrics(f);
        f("westwood_bwe_bps", self.bw.estimate() * 8.0);
        if let Some(m) = self.rtt_min {
            f("westwood_rtt_min_ms", m.as_secs_f64() * 1e3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Driver, MSS};

    fn westwood() -> Driver<Westwood> {
        Driver::new(Westwood::new(&crate::testing::config()))
    }

    #[test]
    fn loss_sets_ssthresh_to_bandwidth_times_min_rtt() {
        let mut d = westwood();
        d.rtt = Duration::from_millis(100);
        // Windows of 10 packets per 100 ms RTT.
        for _ in 0..20 {
            d.send(10, MSS, false);
            d.ack(10, false);
        }
        let bwe = d.cc.bw.estimate();
        assert!(bwe > 0.0);
        let rtt_min = d.cc.rtt_min.unwrap();
        let expected = ((bwe * rtt_min.as_secs_f64()) as usize).max(2 * MSS);
        d.lose(1, true);
        assert_eq!(d.cc.ssthresh(), Some(expected));
        assert_eq!(d.cc.congestion_window(), expected);
        // Each ACK carried 12000 bytes one RTT after the previous one:
        // the estimate converges towards 120 kB/s.
        assert!((bwe - 120_000.0).abs() / 120_000.0 < 0.25, "{bwe}");
    }

    #[test]
    fn filter_parameter_picks_the_estimator() {
        for spec in ["westwood+", "westwood+:filter=1", "westwood+:filter=2"] {
            assert!(crate::registry::parse(spec).is_ok(), "{spec}");
        }
        assert!(crate::registry::parse("westwood+:filter=3").is_err());
        assert_eq!(
            WestwoodConfig::default().filter,
            WestwoodFilterKind::Linux,
            "Linux's filter stays the default"
        );
        // Every filter yields an estimate and a loss response.
        for kind in [
            WestwoodFilterKind::Ns3Westwood,
            WestwoodFilterKind::Ns3WestwoodPlus,
        ] {
            let mut d = Driver::new(Westwood::with_filter(kind, &crate::testing::config()));
            assert_eq!(d.cc.bw.kind(), kind);
            d.rtt = Duration::from_millis(100);
            for _ in 0..20 {
                d.send(10, MSS, false);
                d.ack(10, false);
            }
            assert!(d.cc.bw.estimate() > 0.0, "{kind:?}");
            d.lose(1, true);
            assert!(d.cc.congestion_window() >= 2 * MSS);
        }
    }

    #[test]
    fn early_loss_without_estimate_halves() {
        let mut d = westwood();
        d.send(10, MSS, false);
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 5 * MSS);
    }

    #[test]
    fn persistent_congestion_keeps_bwe_ssthresh_and_minimum_window() {
        let mut d = westwood();
        for _ in 0..20 {
            d.send(10, MSS, false);
            d.ack(10, false);
        }
        let target = d.cc.bw_rtt_min().unwrap();
        d.cc.on_persistent_congestion(d.now);
        assert_eq!(d.cc.congestion_window(), 2 * MSS);
        assert_eq!(d.cc.ssthresh(), Some(target));
        assert!(d.cc.rtt_min.is_none());
    }
}
