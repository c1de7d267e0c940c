//! A receiver's advertised window as a bound on any plugin's window.
//!
//! ns-2's TCP agents send at most `min(cwnd_, window_)` (`TcpAgent::window`
//! in tcp.cc), where `window_`, the receiver's advertised window, is 20
//! packets unless a script sets it. Many papers simulated with ns-2 never
//! mention it, and on a path whose bandwidth-delay product exceeds 20
//! packets per flow it, not the algorithm, decides the throughput. QUIC's
//! flow control is credit, not an in-flight bound, so it cannot stand in
//! for it; [`RwndConfig`] wraps any plugin's factory and reports the
//! smaller of the algorithm's window and the bound, as ns-2 does. The
//! algorithm itself hears every event unchanged and keeps its own window
//! (ns-2's `cwnd_` also keeps its own value under `window_`).
//!
//! Spec: `ALG:...,rwnd=BYTES` on any plugin (`vegas:alpha=1,beta=3,rwnd=20000`
//! is ns-2's default 20 packets of 1,000 bytes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, Ecn, EcnEvent,
    LossEvent, SentPacket,
};

/// The smallest bound accepted, in bytes: two full-size datagrams.
pub const MIN_RWND: usize = 2 * 1500;

/// Any plugin, its window bounded by `bytes`.
pub struct RwndConfig {
    /// The wrapped algorithm.
    pub inner: Arc<dyn CongestionControllerFactory>,
    /// The bound in bytes (at least [`MIN_RWND`]).
    pub bytes: usize,
}

impl std::fmt::Debug for RwndConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rwnd({}, {} bytes)", self.inner.name(), self.bytes)
    }
}

impl CongestionControllerFactory for RwndConfig {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Rwnd {
            inner: self.inner.build(config),
            bytes: self.bytes.max(MIN_RWND),
        })
    }
}

/// A plugin whose window is at most `bytes` (module docs).
#[derive(Debug)]
pub struct Rwnd {
    inner: Box<dyn CongestionController>,
    bytes: usize,
}

impl CongestionController for Rwnd {
    fn on_packet_sent(&mut self, pkt: &SentPacket, now: Instant) {
        self.inner.on_packet_sent(pkt, now);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        self.inner.on_ack(ack, now);
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.inner.on_congestion_event(loss, now);
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
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
        self.inner.congestion_window().min(self.bytes)
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
        // The algorithm's own window, which the bound may hide.
        f("cwnd_unbounded", self.inner.congestion_window() as f64);
    }

    fn ecn_codepoint(&self) -> Ecn {
        self.inner.ecn_codepoint()
    }

    fn on_ecn(&mut self, ecn: &EcnEvent, now: Instant) {
        self.inner.on_ecn(ecn, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn window(spec: &str) -> usize {
        let registry::Controller::Plugin(f) = registry::parse(spec).unwrap() else {
            panic!("{spec} is a plugin");
        };
        let c = f.build(&ControllerConfig {
            max_datagram_size: 1350,
            initial_congestion_window_packets: 10,
            initial_rtt: Duration::from_millis(333),
        });
        c.congestion_window()
    }

    #[test]
    fn the_window_is_the_smaller_of_the_algorithms_and_the_bound() {
        assert_eq!(window("newreno"), 13_500);
        assert_eq!(window("newreno:rwnd=5000"), 5_000);
        assert_eq!(window("newreno:rwnd=20000"), 13_500);
        assert_eq!(window("vegas:alpha=1,beta=3,rwnd=4000"), 4_000);
    }

    #[test]
    fn bad_bounds_and_builtins_are_refused_by_name() {
        for bad in ["newreno:rwnd=100", "newreno:rwnd=abc", "newreno:rwnd=-1"] {
            let e = registry::parse(bad).unwrap_err().to_string();
            assert!(e.contains("rwnd"), "{bad}: {e}");
        }
        let e = registry::parse("newreno:rwnd=5000,rwnd=6000")
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
        let e = registry::parse("cubic:rwnd=20000").unwrap_err().to_string();
        assert!(e.contains("rwnd") && e.contains("plugin"), "{e}");
    }
}
