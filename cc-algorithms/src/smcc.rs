//! SMCC: TCP Vegas whose `alpha` and `beta` are tuned by particle swarm
//! optimisation (`shared/seeds/000_*.txt`).
//!
//! The paper fixes the mechanism (Vegas, with `alpha` and `beta` found by
//! PSO "for any network conditions") but not the fitness, the swarm's
//! settings or when the tuning runs. This module is the **online mode**:
//! the controller runs a small swarm over `(alpha, beta)` while the
//! connection runs. Each particle's values are applied for `rounds` round
//! trips, and its fitness is measured over them:
//!
//! ```text
//! fitness = rate / best_rate  -  delta x queueing / baseRTT  -  lambda x lost / sent
//! ```
//!
//! - `rate` is acknowledged bytes over the interval's duration, normalised
//!   by the best rate any interval has measured, so it lies in (0, 1].
//! - `queueing` is the mean of `RTT sample - baseRTT` over the interval.
//! - `lost / sent` is the fraction of the interval's packets declared lost.
//!
//! High delivery rate is rewarded; queueing delay (relative to the base
//! RTT) and loss are penalised. With `delta = 1`, a standing queue as long
//! as the base RTT costs as much as the whole rate term.
//!
//! Swarm: PSO with inertia falling from 0.9 to 0.4, `c1 = c2 = 2`,
//! velocity clamped to 20% of the range, `swarm` particles (10) for
//! `iterations` iterations (10), seeded (`seed`) so runs repeat
//! ([`crate::pso`]).
//!
//! Bounds: `1 <= alpha <= max - 0.5`, `alpha + 0.5 <= beta <= max`. After
//! every move, positions are repaired to keep `alpha < beta`, at least half
//! a packet apart, so the hold band of Vegas never vanishes.
//!
//! Choices the paper leaves open:
//! - Tuning starts when the connection first leaves slow start: before
//!   that, alpha and beta play no part in Vegas, and the intervals would
//!   measure slow start rather than the particle.
//! - Until then, and after the last iteration, Vegas runs with the best
//!   values found (the Linux defaults 2 and 4 before any).
//! - The network may change while the swarm runs, so an old personal best
//!   can be stale; the swarm does not re-measure bests. A bounded number of
//!   iterations keeps the tuning finite, and the result is then fixed.
//! - The **offline mode** (`cclab tune smcc`, a table of best
//!   `(alpha, beta)` by base RTT and bottleneck rate, loaded with
//!   `smcc:table=FILE`) needs the `cclab` harness and is not built yet.
//!
//! In qlog: `smcc_alpha`, `smcc_beta`, `vegas_diff`, `smcc_particle`,
//! `smcc_iteration` and `smcc_fitness` (the last measured).

use std::time::{Duration, Instant};

use quiche::cc::{
    AckEvent, CongestionController, CongestionControllerFactory, ControllerConfig, LossEvent,
    SentPacket,
};

use crate::pso::{PsoConfig, Swarm};
use crate::vegas::{Vegas, VegasConfig};

/// SMCC configuration; it is also the factory.
#[derive(Debug, Clone)]
pub struct SmccConfig {
    /// Particles in the swarm.
    pub swarm: usize,
    /// Iterations of the swarm.
    pub iterations: usize,
    /// Round trips each particle is measured over.
    pub rounds: u64,
    /// Upper bound of alpha and beta, packets.
    pub max: f64,
    /// Weight of the queueing-delay penalty.
    pub delta: f64,
    /// Weight of the loss penalty.
    pub lambda: f64,
    /// Seed of the swarm.
    pub seed: u64,
}

impl Default for SmccConfig {
    fn default() -> Self {
        SmccConfig {
            swarm: 10,
            iterations: 10,
            rounds: 4,
            max: 20.0,
            delta: 1.0,
            lambda: 10.0,
            seed: 1,
        }
    }
}

impl CongestionControllerFactory for SmccConfig {
    fn name(&self) -> &str {
        "smcc"
    }

    fn build(&self, config: &ControllerConfig) -> Box<dyn CongestionController> {
        Box::new(Smcc::new(self.clone(), config))
    }
}

/// What one evaluation interval measured.
#[derive(Debug, Clone, Default)]
struct Interval {
    start: Option<Instant>,
    start_round: u64,
    acked_bytes: u64,
    queueing_sum: f64,
    samples: u64,
    sent: u64,
    lost: u64,
}

/// SMCC state.
#[derive(Debug, Clone)]
pub struct Smcc {
    cfg: SmccConfig,
    vegas: Vegas,
    swarm: Swarm,
    /// Whether tuning has started (the flow left slow start once).
    tuning: bool,
    interval: Interval,
    /// Best delivery rate measured over an interval, bytes per second.
    best_rate: f64,
    last_fitness: f64,
    alpha: f64,
    beta: f64,
}

/// Keeps `1 <= alpha < beta <= max`, at least half a packet apart.
pub fn repair(max: f64) -> impl Fn([f64; 2]) -> [f64; 2] {
    move |[a, b]| {
        let a = a.clamp(1.0, max - 0.5);
        [a, b.clamp(a + 0.5, max)]
    }
}

impl Smcc {
    /// A controller for a new path.
    pub fn new(cfg: SmccConfig, config: &ControllerConfig) -> Self {
        let max = cfg.max.max(2.0);
        let pso = PsoConfig {
            swarm: cfg.swarm.max(1),
            iterations: cfg.iterations,
            w_start: 0.9,
            w_end: 0.4,
            c1: 2.0,
            c2: 2.0,
            vmax_fraction: 0.2,
            lower: [1.0, 1.5],
            upper: [max - 0.5, max],
            seed: cfg.seed,
        };
        // Swarm::new takes a plain fn; the bound is re-applied below.
        let swarm = Swarm::new(pso, |[a, b]| [a.max(1.0), b.max(a.max(1.0) + 0.5)]);
        let defaults = VegasConfig::default();
        Smcc {
            vegas: Vegas::new(defaults.clone(), config),
            swarm,
            tuning: false,
            interval: Interval::default(),
            best_rate: 0.0,
            last_fitness: 0.0,
            alpha: defaults.alpha,
            beta: defaults.beta,
            cfg: SmccConfig { max, ..cfg },
        }
    }

    /// The fitness of an interval (see the module docs).
    pub fn fitness(
        &self,
        rate: f64,
        best_rate: f64,
        queueing: f64,
        base_rtt: f64,
        loss: f64,
    ) -> f64 {
        let r = if best_rate > 0.0 {
            rate / best_rate
        } else {
            0.0
        };
        let q = if base_rtt > 0.0 {
            queueing / base_rtt
        } else {
            0.0
        };
        r - self.cfg.delta * q - self.cfg.lambda * loss
    }

    fn apply(&mut self, [a, b]: [f64; 2]) {
        let [a, b] = repair(self.cfg.max)([a, b]);
        self.alpha = a;
        self.beta = b;
        self.vegas.set_thresholds(a, b);
    }

    fn start_interval(&mut self, now: Instant) {
        self.interval = Interval {
            start: Some(now),
            start_round: self.vegas.rounds(),
            ..Default::default()
        };
    }

    fn finish_interval(&mut self, now: Instant) {
        let iv = &self.interval;
        let Some(start) = iv.start else { return };
        let secs = now.saturating_duration_since(start).as_secs_f64();
        if secs <= 0.0 {
            return;
        }
        let rate = iv.acked_bytes as f64 / secs;
        self.best_rate = self.best_rate.max(rate);
        let queueing = if iv.samples > 0 {
            iv.queueing_sum / iv.samples as f64
        } else {
            0.0
        };
        let base = self.vegas.base_rtt().map_or(0.0, |b| b.as_secs_f64());
        let loss = if iv.sent > 0 {
            (iv.lost as f64 / iv.sent as f64).min(1.0)
        } else {
            0.0
        };
        let f = self.fitness(rate, self.best_rate, queueing, base, loss);
        self.last_fitness = f;
        self.swarm.report(f);
        let next = if self.swarm.finished() {
            self.swarm.best().0
        } else {
            self.swarm.candidate()
        };
        self.apply(next);
    }

    /// Current (alpha, beta).
    pub fn thresholds(&self) -> (f64, f64) {
        (self.alpha, self.beta)
    }

    /// The swarm.
    pub fn swarm(&self) -> &Swarm {
        &self.swarm
    }
}

impl CongestionController for Smcc {
    fn on_packet_sent(&mut self, pkt: &SentPacket, now: Instant) {
        self.vegas.on_packet_sent(pkt, now);
        self.interval.sent += 1;
    }

    fn on_ack(&mut self, ack: &AckEvent, now: Instant) {
        self.vegas.on_ack(ack, now);
        if let (Some(s), Some(base)) = (ack.rtt_sample, self.vegas.base_rtt()) {
            self.interval.queueing_sum += s.saturating_sub(base).as_secs_f64();
            self.interval.samples += 1;
        }
        self.interval.acked_bytes += ack.acked_bytes as u64;

        if !self.tuning {
            if !self.vegas.in_slow_start() && !self.swarm.finished() {
                self.tuning = true;
                let first = self.swarm.candidate();
                self.apply(first);
                self.start_interval(now);
            }
            return;
        }
        if self.swarm.finished() {
            return;
        }
        if self.vegas.rounds() >= self.interval.start_round + self.cfg.rounds.max(1) {
            self.finish_interval(now);
            self.start_interval(now);
        }
    }

    fn on_congestion_event(&mut self, loss: &LossEvent, now: Instant) {
        self.interval.lost += loss.lost_packets as u64;
        self.vegas.on_congestion_event(loss, now);
    }

    fn on_persistent_congestion(&mut self, now: Instant) {
        self.vegas.on_persistent_congestion(now);
    }

    fn on_mtu_change(&mut self, max_datagram_size: usize) {
        self.vegas.on_mtu_change(max_datagram_size);
    }

    fn on_restart_after_idle(&mut self, idle: Duration, now: Instant) {
        self.vegas.on_restart_after_idle(idle, now);
        if self.tuning {
            // The idle time is not the particle's: measure afresh.
            self.start_interval(now);
        }
    }

    fn congestion_window(&self) -> usize {
        self.vegas.congestion_window()
    }

    fn ssthresh(&self) -> Option<usize> {
        self.vegas.ssthresh()
    }

    fn state_name(&self) -> &'static str {
        self.vegas.state_name()
    }

    fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        self.vegas.visit_metrics(f);
        let (particle, iteration) = self.swarm.progress();
        f("smcc_alpha", self.alpha);
        f("smcc_beta", self.beta);
        f("smcc_particle", particle as f64);
        f("smcc_iteration", iteration as f64);
        f("smcc_fitness", self.last_fitness);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{config, Driver, MSS};

    fn smcc(cfg: SmccConfig) -> Driver<Smcc> {
        Driver::new(Smcc::new(cfg, &config()))
    }

    #[test]
    fn repair_keeps_alpha_below_beta_within_bounds() {
        let r = repair(20.0);
        assert_eq!(r([0.0, 0.0]), [1.0, 1.5]);
        assert_eq!(r([30.0, 5.0]), [19.5, 20.0]);
        assert_eq!(r([5.0, 4.0]), [5.0, 5.5]);
        assert_eq!(r([2.0, 9.0]), [2.0, 9.0]);
    }

    #[test]
    fn fitness_by_hand() {
        let s = Smcc::new(SmccConfig::default(), &config());
        // Full rate, 20 ms queueing on a 100 ms base, 1% loss:
        // 1 - 1 x 0.2 - 10 x 0.01 = 0.7
        assert!((s.fitness(1e6, 1e6, 0.02, 0.1, 0.01) - 0.7).abs() < 1e-12);
        // Half the best rate, no queue, no loss: 0.5.
        assert!((s.fitness(5e5, 1e6, 0.0, 0.1, 0.0) - 0.5).abs() < 1e-12);
        // Nothing measured yet: no division by zero.
        assert_eq!(s.fitness(0.0, 0.0, 0.0, 0.0, 0.0), 0.0);
    }

    /// A full window at `rtt`, in 4 ACKs.
    fn round(d: &mut Driver<Smcc>, rtt: Duration) {
        d.rtt = rtt;
        let pkts = (d.cc.congestion_window() / MSS).max(1);
        d.send(pkts, MSS, false);
        while !d.in_flight.is_empty() {
            d.ack(pkts.div_ceil(4), false);
        }
    }

    #[test]
    fn tunes_particle_by_particle_then_keeps_the_best() {
        let cfg = SmccConfig {
            swarm: 3,
            iterations: 2,
            rounds: 2,
            ..Default::default()
        };
        let mut d = smcc(cfg);
        // In slow start nothing is tuned.
        round(&mut d, Duration::from_millis(100));
        assert!(!d.cc.tuning);
        assert_eq!(d.cc.thresholds(), (2.0, 4.0));
        // Leave slow start: tuning begins with the first particle.
        force_avoidance(&mut d);
        round(&mut d, Duration::from_millis(100));
        assert!(d.cc.tuning);
        let first = d.cc.swarm().candidate();
        assert_eq!(d.cc.thresholds(), (first[0], first[1]));
        let mut seen = vec![d.cc.thresholds()];
        for i in 0..40 {
            round(&mut d, Duration::from_millis(100 + (i % 5) * 5));
            if *seen.last().unwrap() != d.cc.thresholds() {
                seen.push(d.cc.thresholds());
            }
            let (a, b) = d.cc.thresholds();
            assert!((1.0..=19.5).contains(&a) && a + 0.5 <= b && b <= 20.0);
        }
        // 3 particles x 2 iterations were measured, then the best is kept.
        assert!(d.cc.swarm().finished());
        let (best, _) = d.cc.swarm().best();
        assert_eq!(d.cc.thresholds(), (best[0], best[1]));
        assert!(seen.len() >= 3, "{seen:?}");
    }

    fn force_avoidance(d: &mut Driver<Smcc>) {
        // A loss puts Vegas (NewReno underneath) into avoidance.
        d.lose(1, true);
        d.in_flight.clear();
    }
}
