//! EWPHCC: exponentially weighted probabilistic hybrid congestion control,
//! a TCP Vegas modification (`shared/seeds/001_*.txt`, a project report
//! after Jamali, Fotohi and Talebi's PHCC TCP).
//!
//! The report's formulas (its Figure 6), symbols kept:
//!
//! ```text
//! (F1) WindowSize       = f(1 - P(D), 1 - P(L))
//! (F2) P(D_est)         = phi P(D_old) + (1 - phi) rtt_prev
//! (F3) P(L_est)         = phi P(L_old) + (1 - phi) loss_count / elapse_time
//! (F4) W_est(D)         = (1 - P(D_est)) W(D_tar)
//! (F5) W_est(L)         = (1 - P(L_est)) W(L_tar)
//! (F6) W(D_tar)         = D_i alpha_i / D_queue
//! (F7) W_est(D, L)      = sqrt((W_est(D)^2 + W_est(L)^2) / 2)
//! (F8) D_min_tr         = ssthresh / bw_expect
//! (F9) BFS              = (bw_expect - bw_actual) D_min
//! (F10) D_delay_tr      = (seqno - lastack) (Delay - D_min) / BFS
//! ```
//!
//! and three phases (its Figure 7 and code): a *congestion control* phase
//! growing by `W_est(D, L)`, a *critical* phase shrinking by the report's
//! `v_alpha_`, and a *timeout or loss* phase halving; with no measured
//! queue, a *normal* phase doubles the window.
//!
//! The report's listing shows only the lines it changed in ns-2's
//! `tcp-vegas.cc`. Where the report states nothing, we follow the author's
//! complete modified file, published with the report's scripts
//! (github.com/hishamcse/EWPHCC-Congestion-Control-NS2-Project,
//! `modified files/tcp-vegas.cc`): it is the code that produced the
//! report's results. "The author's code" below means that file.
//!
//! # Where the report cannot be taken literally, and what we do
//!
//! - **F2 mixes units**: it averages a probability with an RTT in seconds.
//!   We average the *fraction of the RTT spent queueing*,
//!   `p_d = D_queue / rtt` (in [0, 1)), of the previous round ("rtt_prev").
//! - **F3 mixes units**: `loss_count / elapse_time` is a loss rate per
//!   second, not a probability. We average the *fraction of packets lost*
//!   in the previous round, `p_l = lost / sent` (in [0, 1]).
//! - **F6** gives `W(D_tar)` in 1/seconds: `D_i alpha_i` is dimensionless
//!   (the report's code uses `D_i = 2 rtt / cwnd` and `alpha_i = cwnd / rtt`,
//!   so `D_i alpha_i = 2`, which is `alpha`'s default) and is then divided
//!   by a delay. We measure `D_queue` in units of the per-packet time
//!   `D_i = rtt / W`, that is in queued packets, and floor it at one packet
//!   (the report divides by zero when there is no queue):
//!   `W(D_tar) = alpha / max(1, D_queue / D_i)` packets per RTT, at most
//!   `alpha`.
//! - **Two different alphas.** F6's `alpha_i` (the parameter `alpha`, a
//!   target growth per RTT) is not the amount the critical phase removes,
//!   the report's `cwnd_ -= v_alpha_`, which is ns-2 Vegas's `alpha`
//!   (ns-2's default 1 packet, which the author's scripts keep). They are
//!   separate parameters, `alpha` and `decrease`. `decrease=0`, the
//!   default, means "the same as `alpha`", so specs written when one
//!   `alpha` set both still mean what they meant, and the default critical
//!   decrease stays 2 packets per round.
//! - **W(L_tar) is not defined in the report's text.** Its listing
//!   declares `v_target_loss_window_` (Figure 8) and shows one assignment,
//!   commented out: `// v_target_loss_window_ = cwnd_;` in `vegas_expire`
//!   (Figure 9). The author's code sets it to `cwnd_` in `reset()` and at
//!   the first ACK, that is to the initial window (1 packet: ns-2's default
//!   `windowInit_`, kept by the author's scripts), and never changes it.
//!   We also use a constant, but `W(L_tar) = alpha`, the same target as
//!   F6, not the initial window: with QUIC's initial window of 10 the loss
//!   term would add about `10 / sqrt 2 = 7` packets per RTT whatever the
//!   queue, while the delay term adds at most `alpha`. The loss term is
//!   `(1 - P(L)) alpha`: the growth shrinks as losses rise.
//! - **The phase thresholds (F8, F10) degenerate.** With `BFS = W (rtt -
//!   D_min) / rtt` (F9 in packets), F10 works out to `D_delay_tr =
//!   (inflight / W) Delay`. So "Delay < threshold" only says whether more
//!   than a window is in flight. The loss threshold is the same expression
//!   divided by zero before the first loss. We decide the phase from the
//!   backlog `BFS` (F9) instead, as the Vegas the report modifies does:
//!   - normal: `BFS < gamma` (no measured queue): slow-start growth (the
//!     report's "cwnd *= 2"), spread over the round's ACKs;
//!   - congestion control: `gamma <= BFS <= beta`: `W += W_est(D, L)` (F7)
//!     once per round;
//!   - critical: `BFS > beta`: `W -= decrease` once per round;
//!   - loss: a congestion event multiplies the window by `loss_factor`,
//!     3/4 by default, once per recovery period (RFC 9002 7.3.2), and
//!     ssthresh follows it; persistent congestion ("timeout") sets the
//!     minimum window.
//! - **The loss response is 3/4, not the report's 1/2.** The report's
//!   "timeout or loss" phase (`cwnd_ /= 2`, Figure 11) is a branch of its
//!   once-per-RTT delay test, taken when its `delay` reaches Vegas's
//!   fine-grained timeout `v_timeout_`, not a reaction to a detected
//!   loss (we have no such branch: the phases come from `BFS`). Losses are
//!   handled by the ns-2 Vegas code the report leaves untouched, and the
//!   author's simulations ran it: on the duplicate ACKs of a loss it sets
//!   `win -= win / 4` (3/4 of the window; 1/2 if the lost packet had
//!   already been retransmitted, 2 packets for a window of 3 or less). QUIC
//!   never retransmits a packet under its old number, so the 1/2 case has
//!   no counterpart; `loss_factor=0.5` gives the halving of the report's
//!   text (and of PHCC, which it modifies). Our Vegas halves by default;
//!   the Vegas the report compares with (ns-2's) is
//!   `vegas:alpha=1,beta=3,loss_response=ns2`, which takes the same
//!   quarter off, in whole packets as ns-2 does (here the quarter is of
//!   the real-valued window: at most one packet apart).
//! - **`phi` is 0.8**, the weight of the old value in F2 and F3. The
//!   report's text gives no number (`v_impact_factor_` is declared in its
//!   Figure 8 and never assigned in its listing); the author's code
//!   assigns 0.8 in `reset()` and at the first ACK. This module used 0.875
//!   (TCP's 7/8 smoothing weight) before; 0.8 is what the report's results
//!   were simulated with.
//! - Rounds, `D_min` (baseRTT) and the round's RTT (its minimum sample)
//!   follow Linux Vegas, as in [`crate::vegas`].
//!
//! F1's `f` is F7, the root mean square.

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

use crate::estimators::{Ewma, RoundTracker};
use crate::newreno::{delegate_window_to_reno, NewReno};
use crate::slow_start::SlowStartConfig;

/// EWPHCC parameters; the config is also the factory.
#[derive(Debug, Clone)]
pub struct EwphccConfig {
    /// Weight of the old value in the exponential averages (F2, F3).
    pub phi: f64,
    /// F6's `alpha_i`: target growth per RTT, packets (also `W(L_tar)`).
    pub alpha: f64,
    /// Critical-phase decrease per RTT, packets (the report's `v_alpha_`);
    /// 0 or less means the same as `alpha`.
    pub decrease: f64,
    /// Backlog above which the critical phase begins, packets.
    pub beta: f64,
    /// Backlog below which no queue counts as measured, packets.
    pub gamma: f64,
    /// Fraction of the window kept on a loss.
    pub loss_factor: f64,
    /// The slow start (`slow_start=` and its rule's constants).
    pub slow_start: SlowStartConfig,
}

impl EwphccConfig {
    /// `phi` of the author's code.
    pub const DEFAULT_PHI: f64 = 0.8;
    /// ns-2 Vegas's reduction on a loss, which the report's simulations
    /// inherit.
    pub const DEFAULT_LOSS_FACTOR: f64 = 0.75;

    /// The critical-phase decrease in packets: `decrease`, or `alpha`
    /// when `decrease` is not positive (the spec's `decrease=0`).
    pub fn critical_decrease(&self) -> f64 {
        if self.decrease > 0.0 {
            self.decrease
        } else {
            self.alpha
        }
    }
}

impl EwphccConfig {
    /// The defaults, stated once: the registry's parameter table takes
    /// its defaults from here.
    pub const DEFAULT: EwphccConfig = EwphccConfig {
        slow_start: SlowStartConfig::STANDARD,
        phi: Self::DEFAULT_PHI,
        alpha: 2.0,
        decrease: 0.0,
        beta: 4.0,
        gamma: 1.0,
        loss_factor: Self::DEFAULT_LOSS_FACTOR,
    };
}

impl Default for EwphccConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl CongestionControllerFactory for EwphccConfig {
    fn name(&self) -> &str {
        "ewphcc"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Ewphcc::new(self.clone(), config).with_slow_start(self.slow_start))
    }
}

/// The phase chosen at the end of the last round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No measured queue: slow-start growth.
    Normal,
    /// Growth by the joint estimate `W_est(D, L)`.
    CongestionControl,
    /// Shrinking by `decrease` per round.
    Critical,
}

/// EWPHCC state.
#[derive(Debug, Clone)]
pub struct Ewphcc {
    cfg: EwphccConfig,
    reno: NewReno,
    rounds: RoundTracker,
    /// `D_min`: smallest RTT sample.
    d_min: Option<Duration>,
    /// Smallest RTT sample of the current round.
    round_rtt: Option<Duration>,
    /// Packets sent and lost in the current round.
    round_sent: u64,
    round_lost: u64,
    /// Previous round's samples, for F2 and F3 ("rtt_prev").
    prev_p_d: Option<f64>,
    prev_p_l: Option<f64>,
    /// `P(D_est)` and `P(L_est)`.
    p_d: Ewma,
    p_l: Ewma,
    phase: Phase,
    /// Last joint estimate, packets.
    w_est: f64,
    /// Last backlog estimate `BFS`, packets.
    bfs: f64,
}

impl Ewphcc {
    /// The same controller with `kind` of slow start.
    pub fn with_slow_start(mut self, cfg: impl Into<SlowStartConfig>) -> Self {
        self.reno = self.reno.with_slow_start(cfg);
        self
    }

    /// A controller for a new path.
    pub fn new(cfg: EwphccConfig, config: &ControllerConfig) -> Self {
        let w = 1.0 - cfg.phi.clamp(0.0, 1.0);
        Ewphcc {
            reno: NewReno::new(config),
            rounds: RoundTracker::default(),
            d_min: None,
            round_rtt: None,
            round_sent: 0,
            round_lost: 0,
            prev_p_d: None,
            prev_p_l: None,
            p_d: Ewma::new(w),
            p_l: Ewma::new(w),
            phase: Phase::Normal,
            w_est: 0.0,
            bfs: 0.0,
            cfg,
        }
    }

    /// F4-F7: the joint growth per RTT in packets, for probabilities
    /// `p_d`, `p_l` and `queued` packets of backlog.
    pub fn joint_estimate(&self, p_d: f64, p_l: f64, queued: f64) -> f64 {
        let alpha = self.cfg.alpha;
        let w_d_tar = alpha / queued.max(1.0); // F6, in packets
        let w_l_tar = alpha; // W(L_tar), undefined in the report
        let w_d = (1.0 - p_d.clamp(0.0, 1.0)) * w_d_tar; // F4
        let w_l = (1.0 - p_l.clamp(0.0, 1.0)) * w_l_tar; // F5
        ((w_d * w_d + w_l * w_l) / 2.0).sqrt() // F7
    }

    /// F9 in packets: `(bw_expect - bw_actual) D_min = W (rtt - D_min) / rtt`.
    pub fn backlog(w: f64, d_min: Duration, rtt: Duration) -> f64 {
        let rtt = rtt.as_secs_f64();
        if rtt <= 0.0 {
            return 0.0;
        }
        (w * (rtt - d_min.as_secs_f64()) / rtt).max(0.0)
    }

    /// The once-per-round decision.
    fn end_of_round(&mut self) {
        let mss = self.reno.mss as f64;
        let w = self.reno.cwnd as f64 / mss;
        // F2, F3 with the previous round's samples.
        if let Some(s) = self.prev_p_d {
            self.p_d.update(s);
        }
        if let Some(s) = self.prev_p_l {
            self.p_l.update(s);
        }
        if self.round_sent > 0 {
            self.prev_p_l = Some(self.round_lost as f64 / self.round_sent as f64);
        }
        if let (Some(d_min), Some(rtt)) = (self.d_min, self.round_rtt) {
            let d_queue = rtt.saturating_sub(d_min);
            self.prev_p_d = Some(d_queue.as_secs_f64() / rtt.as_secs_f64().max(1e-9));
            self.bfs = Self::backlog(w, d_min, rtt);
            // Queued packets: D_queue in units of D_i = rtt / W, i.e. BFS.
            let queued = self.bfs;
            self.phase = if self.bfs < self.cfg.gamma {
                Phase::Normal
            } else if self.bfs <= self.cfg.beta {
                Phase::CongestionControl
            } else {
                Phase::Critical
            };
            match self.phase {
                Phase::Normal => {}
                Phase::CongestionControl => {
                    self.w_est = self.joint_estimate(
                        self.p_d.get().unwrap_or(0.0),
                        self.p_l.get().unwrap_or(0.0),
                        queued,
                    );
                    self.set_packets(w + self.w_est);
                }
                Phase::Critical => self.set_packets(w - self.cfg.critical_decrease()),
            }
        }
        self.round_rtt = None;
        self.round_sent = 0;
        self.round_lost = 0;
    }

    fn set_packets(&mut self, w: f64) {
        let min = NewReno::min_window_of(self.reno.mss) as f64;
        let bytes = (w * self.reno.mss as f64).clamp(min, usize::MAX as f64 / 2.0);
        self.reno.cwnd = bytes as usize;
        // Out of slow start once a queue is measured.
        self.reno.ssthresh = self.reno.ssthresh.min(self.reno.cwnd);
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }
}

impl CongestionController for Ewphcc {
    fn on_packet_sent(&mut self, pkt: &SentPacket, _now: Instant) {
        self.rounds.on_sent(pkt.space, pkt.pkt_num);
        self.reno.note_sent(pkt);
        self.round_sent += 1;
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        if let Some(s) = ack.rtt_sample {
            self.d_min = Some(self.d_min.map_or(s, |m| m.min(s)));
            self.round_rtt = Some(self.round_rtt.map_or(s, |m| m.min(s)));
        }
        let largest = ack.acked.last().map(|p| p.pkt_num);
        if largest.is_some_and(|pn| self.rounds.on_ack(ack.space, pn)) {
            self.end_of_round();
        }
        // Normal phase: slow-start growth ("cwnd *= 2" per round), and
        // recovery bookkeeping, are NewReno's.
        if self.phase == Phase::Normal {
            self.reno.grow_up_to(ack, usize::MAX, now);
        } else if ack
            .acked
            .iter()
            .any(|p| !self.reno.in_recovery(p.time_sent))
        {
            self.reno.recovering = false;
        }
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.round_lost += loss.lost_packets as u64;
        if !loss.new_recovery_period {
            return;
        }
        // ns-2 Vegas's `win -= win / 4`, once per recovery period, which
        // NewReno starts.
        let w = self.reno.cwnd as f64;
        self.reno.on_congestion_event(loss, now);
        let kept = w * self.cfg.loss_factor.clamp(0.0, 1.0);
        let kept = if kept.is_finite() { kept as usize } else { 0 };
        self.reno.set_window(kept, kept);
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.reno.on_persistent_congestion(now);
        self.phase = Phase::Normal;
    }

    delegate_window_to_reno!(reno);

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.reno.visit_slow_start_metrics(f);
        f("ewphcc_p_d", self.p_d.get().unwrap_or(0.0));
        f("ewphcc_p_l", self.p_l.get().unwrap_or(0.0));
        f("ewphcc_w_est", self.w_est);
        f("ewphcc_bfs", self.bfs);
        f(
            "ewphcc_phase",
            match self.phase {
                Phase::Normal => 0.0,
                Phase::CongestionControl => 1.0,
                Phase::Critical => 2.0,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{config, Driver, MSS};

    fn ewphcc() -> Driver<Ewphcc> {
        Driver::new(Ewphcc::new(EwphccConfig::default(), &config()))
    }

    #[test]
    fn joint_estimate_by_hand() {
        let e = Ewphcc::new(EwphccConfig::default(), &config());
        // No delay or loss probability, 2 packets queued:
        // W_est(D) = 1 x 2/2 = 1, W_est(L) = 1 x 2 = 2, RMS = sqrt(5/2).
        assert!((e.joint_estimate(0.0, 0.0, 2.0) - (2.5f64).sqrt()).abs() < 1e-12);
        // P(D) = 0.5, P(L) = 0.25, 4 queued: W_est(D) = 0.25, W_est(L) = 1.5.
        let expect = ((0.25f64.powi(2) + 1.5f64.powi(2)) / 2.0).sqrt();
        assert!((e.joint_estimate(0.5, 0.25, 4.0) - expect).abs() < 1e-12);
        // No queue: the report divides by zero; we floor at one packet.
        assert!((e.joint_estimate(0.0, 0.0, 0.0) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn backlog_is_vegas_diff() {
        let ms = Duration::from_millis;
        // 20 packets, D_min 100 ms, rtt 125 ms: 20 x 25 / 125 = 4 queued.
        assert!((Ewphcc::backlog(20.0, ms(100), ms(125)) - 4.0).abs() < 1e-12);
        assert_eq!(Ewphcc::backlog(20.0, ms(100), ms(90)), 0.0);
        assert_eq!(Ewphcc::backlog(20.0, ms(100), Duration::ZERO), 0.0);
    }

    /// A full window at `rtt`, in 4 ACKs, then one more packet whose ACK
    /// ends the round with samples all at `rtt`.
    fn round(d: &mut Driver<Ewphcc>, rtt: Duration) -> (usize, usize) {
        d.rtt = rtt;
        let pkts = (d.cc.congestion_window() / MSS).max(1);
        d.send(pkts, MSS, false);
        while !d.in_flight.is_empty() {
            d.ack(pkts.div_ceil(4), false);
        }
        let before = d.cc.congestion_window();
        d.send_and_ack(1, false);
        (before, d.cc.congestion_window())
    }

    #[test]
    fn phases_follow_the_measured_backlog() {
        let mut d = ewphcc();
        let ms = Duration::from_millis;
        round(&mut d, ms(100));
        assert_eq!(d.cc.phase(), Phase::Normal);
        // A small queue (between gamma and beta packets): congestion
        // control phase, growth by W_est(D, L) <= alpha.
        d.cc.reno.cwnd = 20 * MSS;
        let (before, after) = round(&mut d, ms(110)); // 20 x 10/110 = 1.8
        assert_eq!(d.cc.phase(), Phase::CongestionControl);
        let grown = (after as f64 - before as f64) / MSS as f64;
        assert!(grown > 0.0 && grown <= 2.0 + 1e-9, "{grown}");
        assert!(
            (grown - d.cc.w_est).abs() < 0.01,
            "{grown} vs {}",
            d.cc.w_est
        );
        // A large queue: critical phase, minus alpha per round.
        let (before, after) = round(&mut d, ms(150));
        assert_eq!(d.cc.phase(), Phase::Critical);
        assert_eq!(before - after, 2 * MSS);
    }

    #[test]
    fn loss_keeps_three_quarters_and_timeout_goes_to_the_minimum() {
        let mut d = ewphcc();
        d.send_and_ack(10, false);
        let w = d.cc.congestion_window();
        assert_eq!(w, 20 * MSS);
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 15 * MSS);
        assert_eq!(d.cc.ssthresh(), Some(15 * MSS));
        // Once per recovery period.
        d.lose(1, false);
        assert_eq!(d.cc.congestion_window(), 15 * MSS);
        d.cc.on_persistent_congestion(d.now);
        assert_eq!(d.cc.congestion_window(), 2 * MSS);
        // `loss_factor=0.5`: the report's text's halving.
        let mut d = Driver::new(Ewphcc::new(
            EwphccConfig {
                loss_factor: 0.5,
                ..Default::default()
            },
            &config(),
        ));
        d.send_and_ack(10, false);
        d.lose(1, true);
        assert_eq!(d.cc.congestion_window(), 10 * MSS);
    }

    #[test]
    fn phi_is_the_authors_0_8() {
        assert_eq!(EwphccConfig::default().phi, 0.8);
        let info = crate::algorithms().find(|a| a.name == "ewphcc").unwrap();
        let default = |key: &str| info.params.iter().find(|p| p.name == key)?.default;
        assert_eq!(default("phi"), Some(0.8));
        assert_eq!(default("loss_factor"), Some(0.75));
        // `decrease` defaults to "the same as alpha".
        assert_eq!(default("decrease"), Some(0.0));
        // The averages give the old value weight 0.8: 0.8 x 0 + 0.2 x 1.
        let mut e = Ewphcc::new(EwphccConfig::default(), &config());
        e.p_l.update(0.0);
        assert!((e.p_l.update(1.0) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn critical_phase_removes_decrease_and_growth_targets_alpha() {
        let cfg = EwphccConfig {
            alpha: 5.0,
            decrease: 1.0,
            ..Default::default()
        };
        assert_eq!(cfg.critical_decrease(), 1.0);
        // Unset (0): the same as alpha, as one `alpha` used to set both.
        let old_spec = EwphccConfig {
            alpha: 3.0,
            ..Default::default()
        };
        assert_eq!(old_spec.critical_decrease(), 3.0);

        let mut d = Driver::new(Ewphcc::new(cfg, &config()));
        let ms = Duration::from_millis;
        round(&mut d, ms(100));
        d.cc.reno.cwnd = 20 * MSS;
        // No delay or loss probability yet, 1.8 packets queued: F6 gives
        // 5 / 1.8 = 2.75 and the loss term 5, RMS 4.0 packets: more than
        // the default alpha of 2 could add.
        let (before, after) = round(&mut d, ms(110));
        assert_eq!(d.cc.phase(), Phase::CongestionControl);
        let grown = (after as f64 - before as f64) / MSS as f64;
        assert!(grown > 2.0 && grown <= 5.0 + 1e-9, "{grown}");
        // Critical: minus `decrease` (1), not `alpha` (5).
        let (before, after) = round(&mut d, ms(150));
        assert_eq!(d.cc.phase(), Phase::Critical);
        assert_eq!(before - after, MSS);
    }
}
