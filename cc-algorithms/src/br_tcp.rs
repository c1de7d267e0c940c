//! BR-TCP, Bandwidth Reserved TCP (Komuro, Osaki, Shinmura, Ueda, Tsuboi,
//! ICC 2006; `shared/seeds/003_*.txt`).
//!
//! With `r` the reserved bandwidth (bit/s), `size` the packet size and `RTT`
//! the round-trip time, the paper sets after a loss:
//!
//! ```text
//! (1) after three duplicate ACKs:  ssthresh = r / (size x 8) x RTT;  cwnd = ssthresh
//! (2) after a timeout:             ssthresh = r / (size x 8) x RTT;  cwnd = 1
//! ```
//!
//! instead of Reno's `ssthresh = cwnd / 2`. Slow start and congestion
//! avoidance are Reno's (NewReno here).
//!
//! Mapping onto QUIC:
//! - Windows are in bytes, so `ssthresh = r / 8 x RTT` bytes: the packet
//!   size cancels. It is never below the minimum window (2 datagrams).
//! - "Three duplicate ACKs" is a congestion event that starts a recovery
//!   period (once per period, RFC 9002 7.3.2); "timeout" is persistent
//!   congestion, and "cwnd = 1" becomes the QUIC minimum window of 2
//!   datagrams (RFC 9002 7.2).
//! - RTT is the minimum RTT, as the paper's simulations used ("minimum RTT
//!   was adopted in Eqs. (1) and (2)"): quiche's min RTT at the time of the
//!   event.
//!
//! Where the paper is ambiguous or silent:
//! - Its text contradicts itself for duplicate ACKs: the algorithm listing
//!   says `cwnd = ssthresh`, a later sentence says the window "is set equal
//!   to 1 packet". We follow the listing (and the issue): `cwnd = ssthresh`.
//! - Before any RTT sample there is no RTT to use; a loss then halves the
//!   window as NewReno does.
//! - `ssthresh` may come out above the current window (the reservation is
//!   larger than what the flow had in flight); the paper sets
//!   `cwnd = ssthresh` regardless, and so do we.

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

use crate::newreno::{delegate_window_to_reno, NewReno};
use crate::slow_start::SlowStartConfig;

/// BR-TCP configuration; it is also the factory.
#[derive(Debug, Clone)]
pub struct BrTcpConfig {
    /// Reserved bandwidth `r`, bit/s.
    pub reserved_bps: f64,
    /// The slow start (`slow_start=` and its rule's constants).
    pub slow_start: SlowStartConfig,
}

impl CongestionControllerFactory for BrTcpConfig {
    fn name(&self) -> &str {
        "br-tcp"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(BrTcp::new(self.clone(), config).with_slow_start(self.slow_start))
    }
}

/// BR-TCP state.
#[derive(Debug, Clone)]
pub struct BrTcp {
    cfg: BrTcpConfig,
    reno: NewReno,
    /// Minimum RTT seen, for the timeout rule (its hook carries no RTT).
    min_rtt: Option<Duration>,
}

impl BrTcp {
    /// The same controller with `kind` of slow start.
    pub fn with_slow_start(mut self, cfg: impl Into<SlowStartConfig>) -> Self {
        self.reno = self.reno.with_slow_start(cfg);
        self
    }

    /// A controller for a new path.
    pub fn new(cfg: BrTcpConfig, config: &ControllerConfig) -> Self {
        BrTcp {
            cfg,
            reno: NewReno::new(config),
            min_rtt: None,
        }
    }

    /// Equations (1) and (2) in bytes: `r / 8 x RTT`, at least the minimum
    /// window; `None` without an RTT.
    pub fn reserved_ssthresh(&self, rtt: Option<Duration>) -> Option<usize> {
        let rtt = rtt?;
        let bytes = self.cfg.reserved_bps / 8.0 * rtt.as_secs_f64();
        let bytes = if bytes.is_finite() {
            bytes.min(usize::MAX as f64 / 2.0)
        } else {
            0.0
        };
        Some((bytes as usize).max(NewReno::min_window_of(self.reno.mss)))
    }
}

impl CongestionController for BrTcp {
    fn on_packet_sent(&mut self, pkt: &SentPacket, _now: Instant) {
        self.reno.note_sent(pkt);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        if let Some(m) = ack.rtt.min_rtt {
            self.min_rtt = Some(m);
        }
        self.reno.grow(ack, now);
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.reno.on_congestion_event(loss, now);
        if loss.new_recovery_period {
            // Equation (1).
            if let Some(ssthresh) = self.reserved_ssthresh(loss.rtt.min_rtt.or(self.min_rtt)) {
                self.reno.set_window(ssthresh, ssthresh);
            }
        }
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.reno.on_persistent_congestion(now);
        // Equation (2); the window stays at the minimum.
        if let Some(ssthresh) = self.reserved_ssthresh(self.min_rtt) {
            self.reno.ssthresh = ssthresh;
        }
    }

    delegate_window_to_reno!(reno);

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.reno.visit_slow_start_metrics(f);
        if let Some(s) = self.reserved_ssthresh(self.min_rtt) {
            f("br_tcp_reserved_ssthresh", s as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{config, Driver, MSS};

    fn br(reserved_bps: f64) -> Driver<BrTcp> {
        Driver::new(BrTcp::new(
            BrTcpConfig {
                reserved_bps,
                slow_start: SlowStartConfig::STANDARD,
            },
            &config(),
        ))
    }

    #[test]
    fn loss_sets_ssthresh_and_cwnd_from_the_reservation() {
        // The paper's setting: r = 40 Mbit/s; here min RTT = 100 ms.
        let mut d = br(40e6);
        d.send_and_ack(10, false);
        d.lose(1, true);
        // 40e6 / 8 x 0.1 s = 500_000 bytes (416.7 packets of 1200 B).
        assert_eq!(d.cc.ssthresh(), Some(500_000));
        assert_eq!(d.cc.congestion_window(), 500_000);
        // A second loss in the same recovery period changes nothing.
        d.lose(1, false);
        assert_eq!(d.cc.congestion_window(), 500_000);
    }

    #[test]
    fn small_reservation_is_floored_at_the_minimum_window() {
        let mut d = br(10_000.0); // 10 kbit/s x 100 ms = 125 bytes
        d.send_and_ack(10, false);
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 2 * MSS);
    }

    #[test]
    fn timeout_keeps_the_reserved_ssthresh_and_the_minimum_window() {
        let mut d = br(8e6); // 1 MB/s x 100 ms = 100_000 bytes
        d.send_and_ack(10, false);
        d.cc.on_persistent_congestion(d.now);
        assert_eq!(d.cc.congestion_window(), 2 * MSS);
        assert_eq!(d.cc.ssthresh(), Some(100_000));
        // Slow start back up towards it.
        d.send_and_ack(2, false);
        assert_eq!(d.cc.congestion_window(), 4 * MSS);
    }

    #[test]
    fn loss_before_any_rtt_sample_halves() {
        let mut d = br(40e6);
        d.send(10, MSS, false);
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 5 * MSS);
    }
}
