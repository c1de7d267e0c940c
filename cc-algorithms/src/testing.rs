//! Synthetic event sequences for driving a controller without a connection:
//! hand-computed unit tests, the shared property test and the benchmarks.

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, AckedPacket, CongestionController, ControllerConfig, Ecn, EcnEvent, LossEvent,
    PacketSpace, RttEstimates, SentPacket,
};

/// Maximum datagram size used by [`Driver::config`].
pub const MSS: usize = 1200;

/// Drives one controller through sends, ACKs and losses on a fake clock,
/// keeping bytes in flight and RTT estimates consistent.
#[derive(Debug)]
pub struct Driver<C> {
    /// The controller under test.
    pub cc: C,
    /// The fake clock.
    pub now: Instant,
    /// The RTT every packet takes.
    pub rtt: Duration,
    /// Minimum RTT seen so far.
    pub min_rtt: Option<Duration>,
    /// Packets in flight: (number, size, send time).
    pub in_flight: Vec<(u64, usize, Instant)>,
    next_pkt_num: u64,
    acked_buf: Vec<AckedPacket>,
    /// Send time of the largest packet of the last ACK, and its bytes.
    last_ack: Option<(Instant, usize)>,
}

/// The configuration the unit tests use: 1200-byte datagrams, an initial
/// window of 10 packets, 100 ms initial RTT.
pub fn config() -> ControllerConfig {
    ControllerConfig {
        max_datagram_size: MSS,
        initial_congestion_window_packets: 10,
        initial_rtt: Duration::from_millis(100),
    }
}

impl<C: CongestionController> Driver<C> {
    /// A driver around `cc` with a 100 ms RTT.
    pub fn new(cc: C) -> Self {
        Driver {
            cc,
            now: Instant::now(),
            rtt: Duration::from_millis(100),
            min_rtt: None,
            in_flight: Vec::new(),
            next_pkt_num: 0,
            acked_buf: Vec::new(),
            last_ack: None,
        }
    }

    /// Bytes in flight.
    pub fn bytes_in_flight(&self) -> usize {
        self.in_flight.iter().map(|p| p.1).sum()
    }

    fn rtt_estimates(&self) -> RttEstimates {
        RttEstimates {
            latest_rtt: self.rtt,
            min_rtt: self.min_rtt,
            smoothed_rtt: self.rtt,
            rttvar: self.rtt / 4,
        }
    }

    /// Sends `n` packets of `size` bytes, a microsecond apart.
    pub fn send(&mut self, n: usize, size: usize, app_limited: bool) {
        for _ in 0..n {
            self.now += Duration::from_micros(1);
            let pkt = SentPacket {
                space: PacketSpace::Application,
                pkt_num: self.next_pkt_num,
                size,
                bytes_in_flight: self.bytes_in_flight(),
                app_limited,
            };
            self.cc.on_packet_sent(&pkt, self.now);
            self.in_flight.push((self.next_pkt_num, size, self.now));
            self.next_pkt_num += 1;
        }
    }

    /// Acknowledges the oldest `n` packets in flight in one ACK, one RTT
    /// after the newest of them was sent.
    pub fn ack(&mut self, n: usize, app_limited: bool) {
        let n = n.min(self.in_flight.len());
        if n == 0 {
            return;
        }
        let newest_sent = self.in_flight[n - 1].2;
        self.now = self.now.max(newest_sent + self.rtt);
        let sample = self.now.saturating_duration_since(newest_sent);
        self.min_rtt = Some(self.min_rtt.map_or(sample, |m| m.min(sample)));
        let before = self.bytes_in_flight();
        self.acked_buf.clear();
        self.acked_buf
            .extend(
                self.in_flight
                    .drain(..n)
                    .map(|(pkt_num, size, time_sent)| AckedPacket {
                        pkt_num,
                        size,
                        time_sent,
                    }),
            );
        let acked_bytes: usize = self.acked_buf.iter().map(|p| p.size).sum();
        self.last_ack = Some((newest_sent, acked_bytes));
        let mut rtt = self.rtt_estimates();
        rtt.latest_rtt = sample;
        let ack = AckEvent {
            space: PacketSpace::Application,
            acked: &self.acked_buf,
            acked_bytes,
            rtt_sample: Some(sample),
            rtt,
            bytes_in_flight_before: before,
            bytes_in_flight_after: before - acked_bytes,
            app_limited,
            delivery_rate: (acked_bytes as f64 / self.rtt.as_secs_f64().max(1e-9)) as u64,
            delivery_rate_app_limited: app_limited,
            recovery_start_time: None,
        };
        self.cc.on_ack(&ack, self.now);
    }

    /// Reports ECN feedback for the last ACK frame (as quiche does, after
    /// its `on_ack`): `newly_ce` marks among `newly_ect` ECN-capable
    /// packets.
    pub fn ecn(&mut self, newly_ce: u64, newly_ect: u64) {
        let (sent, acked_bytes) = self.last_ack.unwrap_or((self.now, 0));
        let ev = EcnEvent {
            space: PacketSpace::Application,
            newly_ce,
            newly_ect,
            acked_bytes,
            largest_acked_time_sent: sent,
            bytes_in_flight: self.bytes_in_flight(),
            rtt: self.rtt_estimates(),
        };
        self.cc.on_ecn(&ev, self.now);
    }

    /// Sends `n` full-size packets, acknowledges them in one ACK and
    /// reports `ce` of them marked.
    pub fn round_with_marks(&mut self, n: usize, ce: u64) {
        self.send(n, MSS, false);
        self.ack(n, false);
        self.ecn(ce, n as u64);
    }

    /// Sends `n` full-size packets and acknowledges all of them together.
    pub fn send_and_ack(&mut self, n: usize, app_limited: bool) {
        self.send(n, MSS, app_limited);
        self.ack(n, app_limited);
    }

    /// Declares the oldest `n` packets in flight lost.
    pub fn lose(&mut self, n: usize, new_recovery_period: bool) {
        let n = n.min(self.in_flight.len()).max(1);
        if self.in_flight.is_empty() {
            self.send(1, MSS, false);
        }
        let before = self.bytes_in_flight();
        let lost: Vec<_> = self.in_flight.drain(..n).collect();
        let (largest, _, largest_sent) = *lost.last().expect("at least one packet");
        let ev = LossEvent {
            space: PacketSpace::Application,
            lost_bytes: lost.iter().map(|p| p.1).sum(),
            lost_packets: lost.len(),
            largest_lost_pkt_num: largest,
            largest_lost_time_sent: largest_sent,
            new_recovery_period,
            bytes_in_flight: before,
            rtt: self.rtt_estimates(),
        };
        self.now += Duration::from_micros(1);
        self.cc.on_congestion_event(&ev, self.now);
    }
}

/// A boxed controller (from a registry factory) as a controller, for
/// [`Driver`].
#[derive(Debug)]
pub struct Boxed(pub Box<dyn CongestionController>);

impl CongestionController for Boxed {
    fn on_packet_sent(&mut self, pkt: &SentPacket, now: Instant) {
        self.0.on_packet_sent(pkt, now);
    }
    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        self.0.on_ack(ack, now);
    }
    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.0.on_congestion_event(loss, now);
    }
    fn on_persistent_congestion(&mut self, now: Instant) {
        self.0.on_persistent_congestion(now);
    }
    fn on_pto(&mut self, pto_count: u32, now: Instant) {
        self.0.on_pto(pto_count, now);
    }
    fn on_spurious_loss(&mut self, now: Instant) {
        self.0.on_spurious_loss(now);
    }
    fn on_mtu_change(&mut self, max_datagram_size: usize) {
        self.0.on_mtu_change(max_datagram_size);
    }
    fn on_restart_after_idle(&mut self, idle: Duration, now: Instant) {
        self.0.on_restart_after_idle(idle, now);
    }
    fn congestion_window(&self) -> usize {
        self.0.congestion_window()
    }
    fn pacing_rate(&self) -> Option<u64> {
        self.0.pacing_rate()
    }
    fn ssthresh(&self) -> Option<usize> {
        self.0.ssthresh()
    }
    fn state_name(&self) -> &'static str {
        self.0.state_name()
    }
    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.0.visit_metrics(f);
    }
    fn ecn_codepoint(&self) -> Ecn {
        self.0.ecn_codepoint()
    }
    fn on_ecn(&mut self, ecn: &EcnEvent, now: Instant) {
        self.0.on_ecn(ecn, now);
    }
}

/// A driver around a controller built from a registry spec.
///
/// # Panics
///
/// If the spec is refused or names a quiche built-in.
pub fn driver_for(spec: &str) -> Driver<Boxed> {
    match crate::parse(spec) {
        Ok(crate::Controller::Plugin(f)) => Driver::new(Boxed(f.build(&config()))),
        other => panic!("{spec}: {other:?}"),
    }
}
