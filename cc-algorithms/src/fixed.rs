//! `fixed`: a congestion window of `window` packets that never changes.
//!
//! The smallest complete plugin (docs/writing-a-plugin.md quotes this file
//! whole, and `scripts/check-docs.py` checks that the two agree).
//! It is also a reference flow for experiments: it keeps `window` packets
//! in flight whatever the network does, so it sends at about
//! `window x MSS / RTT` and never backs off on loss or delay.

use std::time::Instant;

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

/// The factory, built by the registry from `fixed:window=N`.
#[derive(Debug, Clone)]
pub struct FixedConfig {
    /// The window, in packets.
    pub window: usize,
}

impl CongestionControllerFactory for FixedConfig {
    fn name(&self) -> &str {
        "fixed"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Fixed::new(self.window, config))
    }
}

/// One path's controller.
#[derive(Debug)]
pub struct Fixed {
    window: usize,
    mss: usize,
    congestion_events: u64,
}

impl Fixed {
    /// A controller for a new path.
    pub fn new(window: usize, config: &ControllerConfig) -> Self {
        Fixed {
            window,
            mss: config.max_datagram_size,
            congestion_events: 0,
        }
    }
}

impl CongestionController for Fixed {
    fn on_packet_sent(&mut self, _pkt: &SentPacket, _now: Instant) {}

    fn on_ack(&mut self, _ack: &AckEvent, _now: Instant) {}

    fn on_congestion_event(&mut self, _loss: &LossEvent, _now: Instant) {
        self.congestion_events += 1;
    }

    fn on_persistent_congestion(&mut self, _now: Instant) {}

    fn on_mtu_change(&mut self, max_datagram_size: usize) {
        self.mss = max_datagram_size;
    }

    fn congestion_window(&self) -> usize {
        self.window * self.mss
    }

    fn state_name(&self) -> &'static str {
        "fixed"
    }

    // Logged to qlog (in `recovery:metrics_updated`) whenever a value changes.
    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("fixed_window_packets", self.window as f64);
        f("fixed_congestion_events", self.congestion_events as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{config, Driver, MSS};

    #[test]
    fn the_window_ignores_acks_and_losses() {
        let mut d = Driver::new(Fixed::new(20, &config()));
        assert_eq!(d.cc.congestion_window(), 20 * MSS);
        d.send_and_ack(20, false);
        d.send(20, MSS, false);
        d.lose(5, true);
        assert_eq!(d.cc.congestion_window(), 20 * MSS);
        d.cc.on_mtu_change(1400);
        assert_eq!(d.cc.congestion_window(), 20 * 1400);
    }

    #[test]
    fn the_registry_builds_it_from_a_spec() {
        match crate::parse("fixed:window=20") {
            Ok(crate::Controller::Plugin(f)) => {
                assert_eq!(f.name(), "fixed");
                assert_eq!(f.build(&config()).congestion_window(), 20 * MSS);
            }
            other => panic!("{other:?}"),
        }
    }
}
