//! A Prague-style L4S sender for QUIC, after RFC 9331 Section 4.3 (the
//! "Prague L4S requirements"), draft-briscoe-iccrg-prague-congestion-control,
//! Linux `tcp_prague.c` (L4STeam/linux) and picoquic's `prague.c`.
//!
//! ```text
//! send ECT(1), paced at cwnd / sRTT (twice that while cwnd < ssthresh / 2)
//! per ACK of unmarked packets: slow start  cwnd += acked
//!                              otherwise   cwnd += s MSS acked / cwnd,
//!                                          s = (sRTT / vrtt)^2 if sRTT < vrtt, else 1
//! per observation window (an RTT, and at least vrtt):  alpha = (1 - g) alpha + g F
//! on CE, at most once per RTT and per vrtt:            cwnd = ssthresh = cwnd (1 - alpha / 2)
//! on loss, once per recovery period:                    cwnd = ssthresh = cwnd / 2
//! ```
//!
//! RFC 9331 Section 4.3's requirements, and what this sender does for each:
//!
//! - ECT(1) identifier (Section 4.1): [`ecn_codepoint`] is ECT(1).
//! - Accurate feedback, more than one mark per RTT (Section 4.2): QUIC's
//!   ACK_ECN counts are exact per packet; quiche passes their increase.
//! - Scalable response: DCTCP's alpha (Linux: g = 1/16, alpha starting at
//!   1, not updated before the first mark, `saw_ce`), the window cut by
//!   alpha/2 on a mark. As in Linux, packets acknowledged with CE add
//!   nothing to the window (`acked -= ece_delta`; here the growth one ACK
//!   frame gave is taken back in the marked fraction of its ECN feedback),
//!   and a mark does not freeze growth from the packets that were not marked
//!   (Linux grows in CWR too).
//! - Fall back to Reno-friendly on loss (MUST): a loss halves the window
//!   (Linux `prague_enter_loss`: `frac_cwnd -= frac_cwnd / 2`), once per
//!   loss recovery period (RFC 9002 Section 7.3.2), whatever marks did
//!   since; packets sent before it do not grow the window (Linux's
//!   `in_loss`).
//! - Reduce RTT dependence (the Prague draft's RTT independence; Linux's
//!   default `RTT_CONTROL_RATE` with `prague_rtt_target` = 25 ms): below the
//!   virtual RTT `vrtt` the additive increase per RTT is scaled by
//!   (sRTT / vrtt)^2, so the rate (cwnd / sRTT) grows by MSS / vrtt^2 per
//!   second, as a flow's with an RTT of vrtt would; alpha updates and CE
//!   reductions then come at most once per vrtt (Linux's
//!   `prague_target_rtt_elapsed` and `cwr_stamp`). Linux enters this after
//!   `prague_rtt_transition` = 500 rounds out of slow start; here
//!   `transition` rounds, 0 by default (at once), so a transfer of a few
//!   seconds at 10 ms is RTT-independent at all.
//! - Pacing: the pacing rate is cwnd / sRTT, doubled while cwnd is below
//!   half of ssthresh (Linux `prague_update_pacing_rate`: 100% in
//!   congestion avoidance, 200% in slow start). quiche paces other plugins
//!   at 1.25 cwnd / sRTT.
//! - Reduce on CE at most once per RTT: a mark starts a reduction only if
//!   the largest packet its ACK acknowledged was sent after the last
//!   reduction (of either kind) began (RFC 9002's rule; Linux: once per CWR
//!   episode).
//!
//! Departures:
//!
//! - Fall back to Reno-friendly on a classic ECN bottleneck (RFC 9331: a
//!   SHOULD): not done. Linux's detection (`prague_ecn_fallback`) is off by
//!   default too; over a classic single-queue AQM that marks ECT(1), this
//!   sender takes more than a fair share from Reno-like flows.
//! - Fractional windows (RFC 9331: SHOULD scale down below 2 packets):
//!   quiche never reads a window below 2 datagrams (RFC 9002's
//!   kMinimumWindow), and the window here stops there too.
//! - Windows are kept as real numbers of bytes (Linux: packets with 20
//!   fractional bits); the cut is immediate (no PRR); no undo on spurious
//!   loss; no burst-size limit (quiche's pacer decides bursts); the initial
//!   window and slow start are quiche's and NewReno's (picoquic's Prague
//!   scales slow start by 1 - alpha and alpha by its sudden-onset rule:
//!   not here).
//!
//! Without ECN feedback (validation failed, `on_ecn` never comes) this is
//! a paced Reno with the RTT-scaled increase: Linux falls back to Reno
//! (`prague_reno`) when AccECN is not negotiated.
//!
//! [`ecn_codepoint`]: CongestionController::ecn_codepoint

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, Ecn, EcnEvent,
    LossEvent, SentPacket,
};

use crate::ecn::{AlphaEstimator, CongestionPeriod, PacketNumbers};
use crate::estimators::RoundTracker;
use crate::newreno::MINIMUM_WINDOW_PACKETS;

/// Prague configuration; it is also the factory.
#[derive(Debug, Clone)]
pub struct PragueConfig {
    /// EWMA gain g.
    pub g: f64,
    /// Virtual RTT; zero turns RTT independence off.
    pub vrtt: Duration,
    /// Rounds after slow start before RTT independence applies.
    pub transition: u64,
}

impl PragueConfig {
    /// The defaults, stated once: the registry's parameter table takes
    /// its defaults from here. g = 1/16, a 25 ms virtual RTT from the first round after slow start.
    pub const DEFAULT: PragueConfig = PragueConfig {
        g: 1.0 / 16.0,
        vrtt: Duration::from_millis(25),
        transition: 0,
    };
}

impl Default for PragueConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl CongestionControllerFactory for PragueConfig {
    fn name(&self) -> &str {
        "prague"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Prague::new(self, config))
    }
}

/// Prague state.
#[derive(Debug, Clone)]
pub struct Prague {
    mss: usize,
    /// Congestion window in bytes.
    cwnd: f64,
    /// Slow start threshold in bytes (infinite until the first reduction).
    ssthresh: f64,
    /// The congestion estimate.
    pub alpha: AlphaEstimator,
    pns: PacketNumbers,
    rounds: RoundTracker,
    /// Rounds completed outside slow start.
    ca_rounds: u64,
    loss_period: CongestionPeriod,
    any_period: CongestionPeriod,
    last_cwr: Option<Instant>,
    last_alpha_update: Option<Instant>,
    saw_ce: bool,
    srtt: Option<Duration>,
    /// Growth the last ACK frame gave, to take back for its marked packets.
    last_growth: f64,
    window_full: bool,
    vrtt: Duration,
    transition: u64,
    ce_reductions: u64,
}

impl Prague {
    /// A controller for a new path.
    pub fn new(cfg: &PragueConfig, config: &ControllerConfig) -> Self {
        let mss = config.max_datagram_size.max(1);
        let iw = (config.initial_congestion_window_packets * mss) as f64;
        Prague {
            mss,
            cwnd: iw.max(Self::min_window_of(mss)),
            ssthresh: f64::INFINITY,
            alpha: AlphaEstimator::new(1.0, cfg.g),
            pns: PacketNumbers::default(),
            rounds: RoundTracker::default(),
            ca_rounds: 0,
            loss_period: CongestionPeriod::default(),
            any_period: CongestionPeriod::default(),
            last_cwr: None,
            last_alpha_update: None,
            saw_ce: false,
            srtt: None,
            last_growth: 0.0,
            window_full: false,
            vrtt: cfg.vrtt,
            transition: cfg.transition,
            ce_reductions: 0,
        }
    }

    fn min_window_of(mss: usize) -> f64 {
        (MINIMUM_WINDOW_PACKETS * mss) as f64
    }

    fn min_window(&self) -> f64 {
        Self::min_window_of(self.mss)
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Whether RTT independence applies now.
    fn rtt_independent(&self) -> bool {
        !self.vrtt.is_zero() && !self.in_slow_start() && self.ca_rounds >= self.transition
    }

    /// Whether at least `vrtt` passed since `at`, or RTT independence is off.
    fn vrtt_elapsed(&self, at: Option<Instant>, now: Instant) -> bool {
        !self.rtt_independent() || at.is_none_or(|t| now.saturating_duration_since(t) >= self.vrtt)
    }

    /// The scale of the additive increase: (sRTT / vrtt)^2 below the
    /// virtual RTT, 1 above it (and without an RTT sample).
    pub fn ai_scale(&self) -> f64 {
        match self.srtt {
            Some(r) if self.rtt_independent() && !r.is_zero() && r < self.vrtt => {
                (r.as_secs_f64() / self.vrtt.as_secs_f64()).powi(2)
            }
            _ => 1.0,
        }
    }

    fn set_cwnd(&mut self, cwnd: f64) {
        self.cwnd = if cwnd.is_finite() {
            cwnd.max(self.min_window())
        } else {
            self.min_window()
        };
    }
}

impl CongestionController for Prague {
    fn on_packet_sent(&mut self, pkt: &SentPacket, _now: Instant) {
        self.pns.on_sent(pkt);
        self.rounds.on_sent(pkt.space, pkt.pkt_num);
        self.window_full = (pkt.bytes_in_flight + pkt.size + self.mss) as f64 > self.cwnd;
    }

    fn on_ack(&mut self, ack: &AckEvent, _now: Instant) {
        self.pns.on_ack(ack);
        if let Some(largest) = ack.acked.iter().map(|p| p.pkt_num).max() {
            if self.rounds.on_ack(ack.space, largest) && !self.in_slow_start() {
                self.ca_rounds += 1;
            }
        }
        self.srtt = Some(ack.rtt.smoothed_rtt);
        self.last_growth = 0.0;
        // RFC 9002 7.8, as NewReno::window_underused.
        if ack.delivery_rate_app_limited && !self.window_full {
            return;
        }
        let fresh: usize = ack
            .acked
            .iter()
            .filter(|p| !self.loss_period.contains(p.time_sent))
            .map(|p| p.size)
            .sum();
        if fresh == 0 {
            return;
        }
        let growth = if self.in_slow_start() {
            fresh as f64
        } else {
            self.mss as f64 * self.ai_scale() * fresh as f64 / self.cwnd.max(1.0)
        };
        let before = self.cwnd;
        self.set_cwnd(self.cwnd + growth);
        self.last_growth = self.cwnd - before;
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        if !self
            .loss_period
            .begin_if_new(loss.largest_lost_time_sent, now)
        {
            return;
        }
        self.any_period.begin(now);
        self.set_cwnd(self.cwnd / 2.0);
        self.ssthresh = self.cwnd;
    }

    fn on_persistent_congestion(&mut self, _now: Instant) {
        self.loss_period.reset();
        self.any_period.reset();
        self.cwnd = self.min_window();
    }

    fn on_mtu_change(&mut self, max_datagram_size: usize) {
        self.mss = max_datagram_size.max(1);
        self.set_cwnd(self.cwnd);
    }

    fn congestion_window(&self) -> usize {
        self.cwnd.max(self.min_window()) as usize
    }

    fn pacing_rate(&self) -> Option<u64> {
        let srtt = self.srtt.filter(|r| !r.is_zero())?;
        let mut rate = self.cwnd.max(self.min_window()) / srtt.as_secs_f64();
        if self.cwnd < self.ssthresh / 2.0 {
            rate *= 2.0;
        }
        Some(rate.clamp(1.0, 1e15) as u64)
    }

    fn ssthresh(&self) -> Option<usize> {
        self.ssthresh.is_finite().then_some(self.ssthresh as usize)
    }

    fn state_name(&self) -> &'static str {
        if self.in_slow_start() {
            "slow_start"
        } else {
            "congestion_avoidance"
        }
    }

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("prague_alpha", self.alpha.alpha);
        f("prague_ai_scale", self.ai_scale());
        f("prague_ce_reductions", self.ce_reductions as f64);
    }

    fn ecn_codepoint(&self) -> Ecn {
        Ecn::Ect1
    }

    fn on_ecn(&mut self, ecn: &EcnEvent, now: Instant) {
        if ecn.newly_ce > 0 {
            self.saw_ce = true;
            // The marked packets of this frame add nothing.
            let marked = (ecn.newly_ce as f64 / ecn.newly_ect.max(1) as f64).min(1.0);
            self.set_cwnd(self.cwnd - self.last_growth * marked);
        }
        self.last_growth = 0.0;
        self.alpha.add(ecn);
        if self.alpha.window_over(&self.pns) {
            if !self.saw_ce {
                self.alpha.skip_window(&self.pns);
            } else if self.vrtt_elapsed(self.last_alpha_update, now) {
                self.alpha.end_window(&self.pns);
                self.last_alpha_update = Some(now);
            }
        }
        if ecn.newly_ce > 0
            && !self.any_period.contains(ecn.largest_acked_time_sent)
            && self.vrtt_elapsed(self.last_cwr, now)
        {
            self.any_period.begin(now);
            self.last_cwr = Some(now);
            self.ce_reductions += 1;
            self.set_cwnd(self.cwnd * (1.0 - self.alpha.alpha / 2.0));
            self.ssthresh = self.cwnd;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{config, Driver, MSS};

    fn prague(rtt_ms: u64, cfg: PragueConfig) -> Driver<Prague> {
        let mut d = Driver::new(Prague::new(&cfg, &config()));
        d.rtt = Duration::from_millis(rtt_ms);
        d
    }

    /// Leaves slow start with a loss at 40 packets (20 after), then runs
    /// `rounds` rounds of a full window without marks; returns the mean
    /// growth per round in packets.
    fn growth_per_round(rtt_ms: u64, cfg: PragueConfig, rounds: usize) -> f64 {
        let mut d = prague(rtt_ms, cfg);
        d.send_and_ack(10, false);
        d.send_and_ack(20, false);
        d.send(1, MSS, false);
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 20 * MSS);
        let start = d.cc.cwnd;
        for _ in 0..rounds {
            let n = (d.cc.cwnd / MSS as f64).floor() as usize;
            d.send(n, MSS, false);
            d.ack(n, false);
        }
        (d.cc.cwnd - start) / MSS as f64 / rounds as f64
    }

    #[test]
    fn sends_ect1_and_paces() {
        let mut d = prague(40, PragueConfig::default());
        assert_eq!(d.cc.ecn_codepoint(), Ecn::Ect1);
        assert_eq!(d.cc.pacing_rate(), None);
        d.send_and_ack(10, false); // slow start: 20 packets, 40 ms
                                   // Twice cwnd / sRTT in slow start.
        assert_eq!(d.cc.pacing_rate(), Some((2.0 * 24_000.0 / 0.040) as u64));
        d.send(1, MSS, false);
        d.lose(1, true); // 10 packets, ssthresh 10
        assert_eq!(d.cc.pacing_rate(), Some((12_000.0 / 0.040) as u64));
    }

    /// Below the 25 ms floor the window grows by (RTT / 25 ms)^2 packets
    /// per RTT: the rate grows as a 25 ms flow's would. At or above it, or
    /// with vrtt=0, by one packet per RTT.
    #[test]
    fn additive_increase_is_scaled_below_the_rtt_floor() {
        let at = |rtt, cfg| growth_per_round(rtt, cfg, 100);
        let g10 = at(10, PragueConfig::default());
        assert!((g10 - 0.16).abs() < 0.01, "10 ms: {g10}");
        let g5 = at(5, PragueConfig::default());
        assert!((g5 - 0.04).abs() < 0.005, "5 ms: {g5}");
        let g40 = at(40, PragueConfig::default());
        assert!((g40 - 1.0).abs() < 0.06, "40 ms: {g40}");
        let off = PragueConfig {
            vrtt: Duration::ZERO,
            ..PragueConfig::default()
        };
        let g10_off = at(10, off);
        assert!((g10_off - 1.0).abs() < 0.06, "10 ms, vrtt=0: {g10_off}");
        // The rate's growth per second is the same at 10 ms as at 25 ms.
        let g25 = at(25, PragueConfig::default());
        let per_s = |g: f64, rtt: f64| g / rtt / rtt;
        assert!((per_s(g10, 0.010) / per_s(g25, 0.025) - 1.0).abs() < 0.1);
        // The transition delays it by that many rounds.
        let late = PragueConfig {
            transition: 1000,
            ..PragueConfig::default()
        };
        let g10_late = at(10, late);
        assert!((g10_late - 1.0).abs() < 0.06, "{g10_late}");
    }

    /// The first mark halves (alpha starts at 1); then each cut is
    /// alpha / 2, at most once per RTT and, below the floor, once per vrtt.
    #[test]
    fn cuts_by_alpha_once_per_rtt_and_per_vrtt() {
        // 40 ms: above the floor, once per RTT.
        let mut d = prague(40, PragueConfig::default());
        d.cc.cwnd = 100.0 * MSS as f64;
        d.send(50, MSS, false);
        d.ack(10, false); // slow start: 110 packets
        d.ecn(0, 10); // the first window ends unmarked: alpha stays 1
        assert_eq!(d.cc.alpha.alpha, 1.0);
        d.ack(10, false); // 120 packets
        d.ecn(2, 10);
        // 2 of the 10 packets marked: their growth is taken back (118),
        // then the cut by alpha / 2 = 1/2.
        assert_eq!(d.cc.congestion_window(), 59 * MSS);
        assert_eq!(d.cc.ssthresh(), Some(59 * MSS));
        // The rest of the round: sent before the cut, no cut.
        d.ack(30, false);
        d.ecn(30, 30);
        let after = d.cc.congestion_window();
        // Every packet of it marked: all its growth taken back.
        assert_eq!(after, 59 * MSS);
        // Next round, marked: a cut by the new alpha (< 1).
        d.send(20, MSS, false);
        d.ack(20, false);
        // Congestion avoidance: 20 packets acked add 20 · MSS² / cwnd, of
        // which the 2 marked packets' tenth is taken back.
        let w = 59.0 * MSS as f64;
        let before = w + 20.0 * (MSS * MSS) as f64 / w * (1.0 - 2.0 / 20.0);
        d.ecn(2, 20);
        let alpha = d.cc.alpha.alpha;
        assert!(alpha < 1.0 && alpha > 0.9, "{alpha}");
        let expected = before * (1.0 - alpha / 2.0);
        assert!(
            (d.cc.cwnd - expected).abs() < 1e-6,
            "{} {expected}",
            d.cc.cwnd
        );

        // 10 ms: below the floor, at most one cut per 25 ms.
        let mut d = prague(10, PragueConfig::default());
        d.cc.cwnd = 50.0 * MSS as f64;
        d.cc.ssthresh = 50.0 * MSS as f64;
        let mut cuts = Vec::new();
        for round in 0..9 {
            d.round_with_marks(10, 1);
            let mut n = 0.0;
            d.cc.visit_metrics(&mut |k, v| {
                if k == "prague_ce_reductions" {
                    n = v
                }
            });
            cuts.push((round, n));
        }
        // Rounds 10 ms apart: cuts in rounds 0, 3, 6 (30 ms apart).
        assert_eq!(
            cuts.iter().map(|c| c.1 as u32).collect::<Vec<_>>(),
            [1, 1, 1, 2, 2, 2, 3, 3, 3]
        );
    }

    /// A loss halves, even right after a cut for marks, and even with a
    /// small alpha: the classic fallback.
    #[test]
    fn loss_halves_whatever_alpha() {
        let mut d = prague(40, PragueConfig::default());
        d.cc.cwnd = 100.0 * MSS as f64;
        d.cc.ssthresh = 100.0 * MSS as f64;
        // A first mark starts alpha's updates; unmarked rounds then decay it.
        d.round_with_marks(10, 1);
        for _ in 0..80 {
            d.round_with_marks(10, 0);
        }
        let alpha = d.cc.alpha.alpha;
        assert!(alpha < 0.3, "{alpha}");
        // A marked round cuts by the small alpha / 2, then a loss halves.
        d.round_with_marks(10, 1);
        let w = d.cc.cwnd;
        d.send(10, MSS, false);
        d.lose(1, true);
        assert!((d.cc.cwnd - w / 2.0).abs() < 1e-6, "{} {w}", d.cc.cwnd);
        d.lose(1, true); // same period
        assert!((d.cc.cwnd - w / 2.0).abs() < 1e-6);
    }

    /// Marked packets do not grow the window: in slow start a fully marked
    /// ACK of 10 packets adds nothing, then the first mark halves.
    #[test]
    fn marked_packets_add_nothing() {
        let mut d = prague(40, PragueConfig::default());
        d.round_with_marks(10, 10);
        assert_eq!(d.cc.congestion_window(), 5 * MSS);
        // DCTCP keeps their growth: 20 packets, halved to 10.
        let mut c = crate::testing::driver_for("dctcp");
        c.round_with_marks(10, 10);
        assert_eq!(c.cc.congestion_window(), 10 * MSS);
    }
}
