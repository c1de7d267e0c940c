//! TCP Vegas (Brakmo and Peterson, 1995) with the semantics of Linux
//! `net/ipv4/tcp_vegas.c`.
//!
//! Once per round trip, with `baseRTT` the smallest RTT ever seen and `RTT`
//! the smallest RTT of the round just ended:
//!
//! ```text
//! target = cwnd * baseRTT / RTT
//! diff   = cwnd * (RTT - baseRTT) / baseRTT        (packets, truncated)
//! slow start:  if diff > gamma: cwnd = min(cwnd, target + 1); ssthresh = min(ssthresh, cwnd - 1)
//! avoidance:   diff > beta: cwnd -= 1;  diff < alpha: cwnd += 1;  else hold
//! ```
//!
//! Mapping onto QUIC, and where it follows Linux rather than the paper:
//! - Windows are in bytes; one "packet" is one maximum datagram. `diff` is
//!   computed on `cwnd / mss` and truncated as Linux's integer division does.
//! - A round ends when a packet sent after the round began is acknowledged
//!   ([`RoundTracker`], Linux's `beg_snd_nxt`). RTT samples are the per-ACK
//!   samples quiche takes (one per ACK frame, like Linux's per-ACK sample).
//! - With fewer than three RTT samples in a round, the round behaves like
//!   Reno (Linux `cntRTT <= 2`). Slow start between rounds grows by acked
//!   bytes, as Linux does (not the paper's every-other-RTT doubling).
//! - After each adjustment `ssthresh = max(ssthresh, 3/4 cwnd)` (Linux
//!   `tcp_current_ssthresh`); the window never goes below 2 packets.
//! - Loss, persistent congestion and recovery are NewReno's (Linux disables
//!   Vegas outside the Open state and uses Reno's halving).
//! - Restart after idle resets `baseRTT`, like Linux's `CA_EVENT_CWND_RESTART`.

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

use crate::estimators::RoundTracker;
use crate::newreno::NewReno;

/// Vegas parameters, in packets; the config is also the factory.
#[derive(Debug, Clone)]
pub struct VegasConfig {
    /// Grow the window when fewer than `alpha` packets are queued.
    pub alpha: f64,
    /// Shrink the window when more than `beta` packets are queued.
    pub beta: f64,
    /// Leave slow start when more than `gamma` packets are queued.
    pub gamma: f64,
}

impl Default for VegasConfig {
    fn default() -> Self {
        // Linux defaults.
        VegasConfig {
            alpha: 2.0,
            beta: 4.0,
            gamma: 1.0,
        }
    }
}

impl CongestionControllerFactory for VegasConfig {
    fn name(&self) -> &str {
        "vegas"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Vegas::new(self.clone(), config))
    }
}

/// Vegas state.
#[derive(Debug, Clone)]
pub struct Vegas {
    cfg: VegasConfig,
    /// Window, ssthresh and recovery handling.
    reno: NewReno,
    /// Round trips, by packet number.
    rounds: RoundTracker,
    /// Smallest RTT ever seen (`baseRTT`).
    base_rtt: Option<Duration>,
    /// Smallest RTT of the current round (`minRTT`).
    round_min_rtt: Option<Duration>,
    /// RTT samples in the current round (`cntRTT`).
    round_samples: u32,
    /// `diff` of the last adjustment, in packets.
    last_diff: f64,
}

impl Vegas {
    /// A controller for a new path.
    pub fn new(cfg: VegasConfig, config: &ControllerConfig) -> Self {
        Vegas {
            cfg,
            reno: NewReno::new(config),
            rounds: RoundTracker::default(),
            base_rtt: None,
            round_min_rtt: None,
            round_samples: 0,
            last_diff: 0.0,
        }
    }

    /// `diff` (truncated) and `target` in packets for a window of `cwnd`
    /// bytes, as Linux computes them; exact integer arithmetic on
    /// nanoseconds so that e.g. 20 packets at 120/100 ms give exactly 4.
    pub fn diff_and_target(cwnd: usize, mss: usize, base: Duration, rtt: Duration) -> (f64, f64) {
        let base_ns = base.as_nanos().max(1);
        let rtt_ns = rtt.as_nanos().max(base_ns);
        let cwnd = cwnd as u128;
        let mss = mss.max(1) as u128;
        let diff = cwnd.saturating_mul(rtt_ns - base_ns) / (base_ns.saturating_mul(mss));
        let target = cwnd as f64 / mss as f64 * base_ns as f64 / rtt_ns as f64;
        (diff.min(u32::MAX as u128) as f64, target)
    }

    /// The once-per-RTT adjustment (Linux `tcp_vegas_cong_avoid`, the
    /// `after(ack, beg_snd_nxt)` block).
    fn end_of_round(&mut self, ack: &AckEvent) {
        let mss = self.reno.mss as f64;
        match (self.base_rtt, self.round_min_rtt) {
            (Some(base), Some(rtt)) if self.round_samples > 2 => {
                let cwnd_pkts = self.reno.cwnd as f64 / mss;
                let (diff, target) =
                    Self::diff_and_target(self.reno.cwnd, self.reno.mss, base, rtt);
                self.last_diff = diff;
                let slow_start = self.reno.cwnd < self.reno.ssthresh;
                let mut cwnd = cwnd_pkts;
                if diff > self.cfg.gamma && slow_start {
                    cwnd = cwnd.min(target.floor() + 1.0);
                    self.set_ssthresh_pkts((self.reno.ssthresh as f64 / mss).min(cwnd - 1.0));
                } else if slow_start {
                    self.reno.grow(ack);
                    cwnd = self.reno.cwnd as f64 / mss;
                } else if diff > self.cfg.beta {
                    cwnd -= 1.0;
                    self.set_ssthresh_pkts((self.reno.ssthresh as f64 / mss).min(cwnd - 1.0));
                } else if diff < self.cfg.alpha {
                    cwnd += 1.0;
                }
                let cwnd = cwnd.max(2.0);
                self.reno.cwnd = (cwnd * mss) as usize;
                // Linux tcp_current_ssthresh in the Open state.
                self.reno.ssthresh = self.reno.ssthresh.max(self.reno.cwnd / 4 * 3);
            }
            _ => self.reno.grow(ack),
        }
        self.round_samples = 0;
        self.round_min_rtt = None;
    }

    /// Changes alpha and beta (SMCC tunes them while running).
    pub fn set_thresholds(&mut self, alpha: f64, beta: f64) {
        self.cfg.alpha = alpha;
        self.cfg.beta = beta;
    }

    /// Completed round trips.
    pub fn rounds(&self) -> u64 {
        self.rounds.rounds()
    }

    /// The smallest RTT seen (`baseRTT`).
    pub fn base_rtt(&self) -> Option<Duration> {
        self.base_rtt
    }

    /// Whether the window is below ssthresh.
    pub fn in_slow_start(&self) -> bool {
        self.reno.cwnd < self.reno.ssthresh
    }

    fn set_ssthresh_pkts(&mut self, pkts: f64) {
        self.reno.ssthresh = (pkts.max(2.0) * self.reno.mss as f64) as usize;
    }
}

impl CongestionController for Vegas {
    fn on_packet_sent(&mut self, pkt: &SentPacket, _now: Instant) {
        self.rounds.on_sent(pkt.space, pkt.pkt_num);
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        if let Some(sample) = ack.rtt_sample {
            // Linux adds 1 us so a sample is never zero.
            let sample = sample + Duration::from_micros(1);
            self.base_rtt = Some(self.base_rtt.map_or(sample, |b| b.min(sample)));
            self.round_min_rtt = Some(self.round_min_rtt.map_or(sample, |m| m.min(sample)));
            self.round_samples += 1;
        }
        let largest = ack.acked.last().map(|p| p.pkt_num);
        let round_ended = largest.is_some_and(|pn| self.rounds.on_ack(ack.space, pn));

        // Outside the Open state, Vegas is off and Reno governs.
        if self.reno.recovering || ack.acked.iter().all(|p| self.reno.in_recovery(p.time_sent)) {
            self.reno.on_ack(ack, now);
            return;
        }
        if round_ended {
            self.end_of_round(ack);
        } else if self.reno.cwnd < self.reno.ssthresh {
            self.reno.grow(ack);
        }
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.reno.on_congestion_event(loss, now);
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.reno.on_persistent_congestion(now);
    }

    fn on_mtu_change(&mut self, max_datagram_size: usize) {
        self.reno.on_mtu_change(max_datagram_size);
    }

    fn on_restart_after_idle(&mut self, _idle: Duration, _now: Instant) {
        self.base_rtt = None;
        self.round_min_rtt = None;
        self.round_samples = 0;
    }

    fn congestion_window(&self) -> usize {
        self.reno.congestion_window()
    }

    fn ssthresh(&self) -> Option<usize> {
        self.reno.ssthresh()
    }

    fn state_name(&self) -> &'static str {
        self.reno.state_name()
    }

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        if let Some(base) = self.base_rtt {
            f("vegas_base_rtt_ms", base.as_secs_f64() * 1e3);
        }
        f("vegas_diff", self.last_diff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Driver, MSS};

    fn vegas() -> Driver<Vegas> {
        Driver::new(Vegas::new(
            VegasConfig::default(),
            &crate::testing::config(),
        ))
    }

    #[test]
    fn diff_and_target_by_hand() {
        let ms = Duration::from_millis;
        // 20 packets, base 100 ms, round min 120 ms:
        // target = 20 * 100 / 120 = 16.67, diff = 20 * 20 / 100 = 4.
        let (diff, target) = Vegas::diff_and_target(20 * MSS, MSS, ms(100), ms(120));
        assert_eq!(diff, 4.0);
        assert!((target - 16.666_666).abs() < 1e-3);
        // Truncated like Linux: 10 * 15 / 100 = 1.5 -> 1.
        assert_eq!(
            Vegas::diff_and_target(10 * MSS, MSS, ms(100), ms(115)).0,
            1.0
        );
        // Queueing can only be positive.
        assert_eq!(
            Vegas::diff_and_target(10 * MSS, MSS, ms(100), ms(90)).0,
            0.0
        );
    }

    /// Sends and acknowledges a full window at `rtt`, in 4 ACKs so the
    /// round has more than 2 RTT samples.
    fn run_round(d: &mut Driver<Vegas>, rtt: Duration) {
        d.rtt = rtt;
        let pkts = d.cc.congestion_window() / MSS;
        d.send(pkts, MSS, false);
        let per_ack = pkts.div_ceil(4);
        while !d.in_flight.is_empty() {
            d.ack(per_ack, false);
        }
    }

    /// One more packet at the same RTT: its ACK ends the round, so the
    /// once-per-RTT adjustment runs on samples all taken at `d.rtt`.
    fn probe(d: &mut Driver<Vegas>) -> (usize, usize) {
        let before = d.cc.congestion_window();
        d.send_and_ack(1, false);
        (before, d.cc.congestion_window())
    }

    #[test]
    fn leaves_slow_start_when_diff_exceeds_gamma() {
        let mut d = vegas();
        let ms = Duration::from_millis;
        run_round(&mut d, ms(100));
        run_round(&mut d, ms(100));
        assert!(d.cc.reno.cwnd < d.cc.reno.ssthresh, "still slow start");
        // Queueing: RTT 150 ms on a 100 ms base.
        run_round(&mut d, ms(150));
        let (before, after) = probe(&mut d);
        let pkts = before as f64 / MSS as f64;
        // diff = floor(pkts * 50/100) > gamma: cwnd = target + 1.
        let target = pkts * 100.0 / 150.001;
        assert_eq!(after, ((target.floor() + 1.0) * MSS as f64) as usize);
        assert!(d.cc.reno.cwnd >= d.cc.reno.ssthresh, "now in avoidance");
        assert_eq!(d.cc.state_name(), "congestion_avoidance");
    }

    #[test]
    fn avoidance_moves_one_packet_per_round() {
        let mut d = vegas();
        let ms = Duration::from_millis;
        // Put it in avoidance at 20 packets.
        d.cc.reno.cwnd = 20 * MSS;
        d.cc.reno.ssthresh = 10 * MSS;
        run_round(&mut d, ms(100));
        // No queueing: diff = 0 < alpha, one packet more.
        let (before, after) = probe(&mut d);
        assert_eq!(d.cc.last_diff, 0.0);
        assert_eq!(after, before + MSS);
        // 30% queueing: diff = floor(21 * 0.3) = 6 > beta, one packet less.
        run_round(&mut d, ms(130));
        let (before, after) = probe(&mut d);
        assert_eq!(d.cc.last_diff, ((before / MSS) * 30_000 / 100_001) as f64);
        assert_eq!(after, before - MSS);
        // 16%: diff = floor(20 * 16000 / 100001) = 3 (the 1 us Linux adds
        // to samples makes exactly 15% truncate to 2), between alpha and
        // beta: hold.
        run_round(&mut d, ms(116));
        let (before, after) = probe(&mut d);
        assert_eq!(d.cc.last_diff, 3.0);
        assert_eq!(after, before);
    }

    #[test]
    fn loss_is_newreno() {
        let mut d = vegas();
        d.send_and_ack(10, false);
        let before = d.cc.congestion_window();
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), before / 2);
    }
}
