//! Plugins inside real quiche connections: a client and a server in one
//! process over an emulated bottleneck, in virtual time (see `common`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cc_algorithms::newreno::NewRenoConfig;
use cc_algorithms::vegas::{Vegas, VegasConfig};
use common::{run, PathSpec};
use quiche::cc::*;

/// A controller with a constant window.
#[derive(Debug)]
struct Fixed(usize);

impl CongestionController for Fixed {
    fn on_packet_sent(&mut self, _: &SentPacket, _: Instant) {}
    fn on_ack(&mut self, _: &AckEvent, _: Instant) {}
    fn on_congestion_event(&mut self, _: &LossEvent, _: Instant) {}
    fn on_persistent_congestion(&mut self, _: Instant) {}
    fn on_mtu_change(&mut self, _: usize) {}
    fn congestion_window(&self) -> usize {
        self.0
    }
    fn state_name(&self) -> &'static str {
        "fixed"
    }
}

struct FixedFactory(usize);

impl CongestionControllerFactory for FixedFactory {
    fn name(&self) -> &str {
        "fixed"
    }
    fn build(&self, _: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Fixed(self.0))
    }
}

#[test]
fn sender_is_limited_by_the_plugin_window() {
    let window = 10 * 1350;
    let spec = PathSpec {
        rate_bps: 200e6,
        one_way_delay: Duration::from_millis(25),
        queue_bytes: 10_000_000,
        bytes: 600_000,
        ..Default::default()
    };
    let out = run(&spec, |c| c.set_cc_factory(Arc::new(FixedFactory(window))));
    assert!(out.complete, "transfer incomplete: {out:?}");
    assert_eq!(out.received, spec.bytes);
    // After the handshake the window is what the plugin says.
    let established: Vec<_> = out.cwnd.iter().filter(|s| s.0 > 0.2).collect();
    assert!(!established.is_empty());
    assert!(
        established.iter().all(|s| s.1 == window),
        "cwnd not the plugin's"
    );
    // One window per 50 ms RTT, far below the 200 Mbit/s link: the plugin,
    // not the link, limits the sender. Elapsed includes the handshake RTT.
    let ideal = spec.bytes as f64 / window as f64 * 0.050;
    let took = out.elapsed.as_secs_f64();
    eprintln!(
        "fixed window: {took:.3} s for {} B (cwnd/RTT would take {ideal:.3} s)",
        spec.bytes
    );
    assert!(
        took > ideal * 0.9,
        "faster than cwnd/RTT allows: {took} < {ideal}"
    );
    assert!(
        took < ideal * 1.6 + 0.2,
        "much slower than cwnd/RTT: {took} vs {ideal}"
    );
}

#[derive(Default)]
struct Counts {
    persistent: AtomicUsize,
    pto: AtomicUsize,
    loss_events: AtomicUsize,
}

/// Vegas, counting the hooks quiche calls.
#[derive(Debug)]
struct Recording {
    inner: Vegas,
    counts: Arc<CountsHandle>,
}

#[derive(Default)]
struct CountsHandle(Counts);

impl std::fmt::Debug for CountsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("counts")
    }
}

impl CongestionController for Recording {
    fn on_packet_sent(&mut self, p: &SentPacket, now: Instant) {
        self.inner.on_packet_sent(p, now)
    }
    fn on_ack(&mut self, a: &AckEvent, now: Instant) {
        self.inner.on_ack(a, now)
    }
    fn on_congestion_event(&mut self, l: &LossEvent, now: Instant) {
        self.counts.0.loss_events.fetch_add(1, Ordering::Relaxed);
        self.inner.on_congestion_event(l, now)
    }
    fn on_persistent_congestion(&mut self, now: Instant) {
        self.counts.0.persistent.fetch_add(1, Ordering::Relaxed);
        self.inner.on_persistent_congestion(now)
    }
    fn on_pto(&mut self, n: u32, now: Instant) {
        self.counts.0.pto.fetch_add(1, Ordering::Relaxed);
        self.inner.on_pto(n, now)
    }
    fn on_mtu_change(&mut self, m: usize) {
        self.inner.on_mtu_change(m)
    }
    fn congestion_window(&self) -> usize {
        self.inner.congestion_window()
    }
    fn ssthresh(&self) -> Option<usize> {
        self.inner.ssthresh()
    }
    fn state_name(&self) -> &'static str {
        self.inner.state_name()
    }
    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.inner.visit_metrics(f)
    }
}

struct RecordingFactory(Arc<CountsHandle>);

impl CongestionControllerFactory for RecordingFactory {
    fn name(&self) -> &str {
        "recording-vegas"
    }
    fn build(&self, c: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Recording {
            inner: Vegas::new(VegasConfig::default(), c),
            counts: self.0.clone(),
        })
    }
}

#[test]
fn persistent_congestion_and_pto_reach_the_plugin_and_qlog_has_losses_and_metrics() {
    let counts = Arc::new(CountsHandle::default());
    let spec = PathSpec {
        one_way_delay: Duration::from_millis(10),
        bytes: 3_000_000,
        // Everything is lost for 1.5 s, far longer than 3 PTO periods.
        blackout: Some((Duration::from_millis(500), Duration::from_millis(2000))),
        ..Default::default()
    };
    let factory = RecordingFactory(counts.clone());
    let out = run(&spec, |c| c.set_cc_factory(Arc::new(factory)));
    assert!(out.complete, "transfer incomplete: {out:?}");
    let c = &counts.0;
    let (pc, pto, losses) = (
        c.persistent.load(Ordering::Relaxed),
        c.pto.load(Ordering::Relaxed),
        c.loss_events.load(Ordering::Relaxed),
    );
    eprintln!(
        "persistent congestion {pc}, PTOs {pto}, loss events {losses}, dropped {}",
        out.dropped
    );
    assert!(pc >= 1, "persistent congestion never reached the plugin");
    assert!(pto >= 1 && losses >= 1);

    let events: Vec<serde_json::Value> = out
        .server_qlog
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| serde_json::from_str(r).expect("qlog record parses"))
        .collect();
    let named = |n: &str| events.iter().filter(|e| e["name"] == n).count();
    let lost = named("quic:packet_lost");
    eprintln!(
        "qlog: {} records, {lost} packet_lost, server lost {} packets",
        events.len(),
        out.server_lost
    );
    assert!(lost > 0);
    assert_eq!(lost, out.server_lost, "one packet_lost per lost packet");
    assert!(events
        .iter()
        .any(|e| e["name"] == "quic:recovery_metrics_updated"
            && e["data"].get("vegas_diff").is_some()));
    // The plugin's own state names, and only those, as states change.
    let states: std::collections::BTreeSet<_> = events
        .iter()
        .filter(|e| e["name"] == "quic:congestion_state_updated")
        .map(|e| e["data"]["new"].as_str().unwrap().to_string())
        .collect();
    eprintln!("states: {states:?}");
    assert!(states.len() >= 2, "{states:?}");
    assert!(states
        .iter()
        .all(|s| ["slow_start", "congestion_avoidance", "recovery"].contains(&s.as_str())));
}

fn mean_cwnd(samples: &[(f64, usize)], until: f64) -> f64 {
    let s: Vec<f64> = samples
        .iter()
        .filter(|s| s.0 <= until)
        .map(|s| s.1 as f64)
        .collect();
    s.iter().sum::<f64>() / s.len().max(1) as f64
}

/// The NewReno plugin and quiche's built-in Reno implement the same RFC
/// 9002 Appendix B, so on the same path they keep the same window.
///
/// Each run is deterministic (`common`), so one run per algorithm is the
/// comparison, with no allowance for noise: the two mean windows came out
/// the same (0.0% apart) in both timings below. 2% leaves room for harmless
/// rounding and still fails both divergences this test has met: NewReno
/// reading quiche's delivery-rate flag alone as "application-limited" was
/// 7.4% off waking every 2 ms (its growth stopped for a round trip after
/// two ACKs were read at once), and its byte counter starting at zero after
/// a reduction (before commit a62a18c) 5.0% off waking at every event.
///
/// In real time, before the runs were deterministic, this compared two
/// single runs within 10% and failed now and then: which ACKs a pass of
/// the loop read together depended on the machine's load, and a packet
/// sent just after the slow-start exit met a full queue in some runs and
/// not others, moving the mean window by 9% or more for either algorithm.
#[test]
fn newreno_plugin_matches_builtin_reno() {
    let path = PathSpec {
        rate_bps: 20e6,
        one_way_delay: Duration::from_millis(20),
        queue_bytes: 50_000,
        drop_every: 300,
        bytes: 4_000_000,
        ..Default::default()
    };
    // Waking at every arrival and timer, and on a 2 ms timer as a loop
    // under load may, reading two or three ACKs before the application
    // writes again (they come about 1 ms apart in slow start).
    for (timing, wake_every) in [
        ("every event", None),
        ("every 2 ms", Some(Duration::from_millis(2))),
    ] {
        let spec = PathSpec {
            wake_every,
            ..path.clone()
        };
        // Built-in Reno does not pace in quiche 0.30; compare the algorithms
        // with the same (no) pacing.
        let plugin = run(&spec, |c| {
            c.set_cc_factory(Arc::new(NewRenoConfig::default()));
            c.enable_pacing(false);
        });
        let builtin = run(&spec, |c| {
            c.set_cc_algorithm(quiche::CongestionControlAlgorithm::Reno);
            // RFC 9002 NewReno has no HyStart++.
            c.enable_hystart(false);
        });
        assert!(plugin.complete && builtin.complete, "{timing}");
        assert_eq!(plugin.received, builtin.received);
        let until = plugin.elapsed.min(builtin.elapsed).as_secs_f64();
        let (p, b) = (
            mean_cwnd(&plugin.cwnd, until),
            mean_cwnd(&builtin.cwnd, until),
        );
        let diff = (p - b).abs() / b;
        eprintln!(
            "parity, waking {timing}: plugin newreno mean cwnd {p:.0} B in {:.3} s ({} lost), built-in reno {b:.0} B in {:.3} s ({} lost): {:.1}% apart",
            plugin.elapsed.as_secs_f64(),
            plugin.server_lost,
            builtin.elapsed.as_secs_f64(),
            builtin.server_lost,
            diff * 100.0
        );
        assert!(
            diff < 0.02,
            "{timing}: mean cwnd differs by {:.1}%",
            diff * 100.0
        );
    }
}

/// The server's congestion windows in the order quiche logged them
/// (`recovery_metrics_updated` events that carry one).
fn qlog_cwnds(qlog: &str) -> Vec<u64> {
    qlog.split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| serde_json::from_str::<serde_json::Value>(r).expect("qlog record parses"))
        .filter(|e| e["name"] == "quic:recovery_metrics_updated")
        .filter_map(|e| e["data"]["congestion_window"].as_u64())
        .collect()
}

#[test]
fn builtin_cubic_beta_sets_the_window_reduction() {
    // Slow start (no HyStart++) overshoots the 60 kB queue; the first
    // window reduction is the loss that ends it, to beta x cwnd.
    let spec = PathSpec {
        rate_bps: 20e6,
        one_way_delay: Duration::from_millis(10),
        queue_bytes: 60_000,
        bytes: 1_500_000,
        ..Default::default()
    };
    for (cc, beta) in [
        ("cubic:hystart=0", 0.7),
        ("cubic:hystart=0,beta=0.5", 0.5),
        ("cubic:hystart=0,beta=0.9,c=1", 0.9),
    ] {
        let controller = cc_algorithms::parse(cc).unwrap();
        let out = run(&spec, |c| controller.apply(c));
        assert!(out.complete, "{cc}: transfer incomplete: {out:?}");
        let cwnds = qlog_cwnds(&out.server_qlog);
        let (before, after) = cwnds
            .windows(2)
            .map(|w| (w[0], w[1]))
            .find(|(a, b)| b < a)
            .unwrap_or_else(|| panic!("{cc}: cwnd never decreased ({} lost)", out.server_lost));
        let ratio = after as f64 / before as f64;
        eprintln!("{cc}: first reduction {before} B -> {after} B, {ratio:.3} x");
        assert!(
            (ratio - beta).abs() < 0.03,
            "{cc}: first reduction {before} -> {after} is {ratio:.3} x, not beta = {beta}"
        );
    }
}
