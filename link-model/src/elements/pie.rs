//! PIE, Proportional Integral controller Enhanced (RFC 8033), deciding at
//! enqueue, written from the RFC and made to behave as Linux's `pie` qdisc
//! does by default (kernel 5.1 and later), so that a scenario compares
//! across `emu` and `netem`.
//!
//! **Queueing delay.** Every dequeue records the packet's sojourn time as
//! the current delay `qdelay`, or 0 when the dequeue left the queue empty
//! (Linux's timestamp mode, its default; RFC 8033 §5.2's dequeue-rate
//! estimate through Little's law is not implemented).
//!
//! **Drop probability** (RFC 8033 §4.2), every `tupdate`:
//!
//! ```text
//! p += s(p) · (alpha · (qdelay − target) + beta · (qdelay − qdelay_old))     (delays in s)
//! ```
//!
//! where `s(p)` tunes the gains to the level of congestion (§4.2): 1 from
//! p = 10 % up, 1/2 below 10 %, 1/8 below 1 %, 1/32 below 0.1 %, then
//! 1/128, 1/512 and 1/2048 below 0.01 %, 0.001 % and 0.0001 %. A step is
//! at most +2 % once p ≥ 10 % (§5.5); as in Linux, a delay above 250 ms adds
//! another 2 %. p stays in [0, 1]. When the delay was 0 at this update and
//! the last one with nothing queued, p decays by 1/64 (§4.2 says ×0.98;
//! Linux's 1 − 1/64 is the "sufficient" variant the RFC mentions).
//!
//! **Burst allowance** (§4.4): none of the first `max_burst` of a busy
//! period is dropped early. The allowance shrinks by the time between
//! consecutive dequeues (Linux's timestamp mode; the RFC takes `tupdate`
//! off per update) and is given back whole when, at an update, the delay
//! has been below `target/2` twice running and p is 0.
//!
//! **Early drop** (§4.1, §5.4), for each arrival that fits the queue: never
//! while burst allowance is left; never while `qdelay < target/2` and
//! p < 20 % (the RFC reads the delay of the last update, Linux the latest
//! one, as here); never while fewer than two MTUs of bytes are queued
//! (the RFC: two mean packet sizes; Linux: two device MTUs; here the
//! largest packet seen, at least 1500 bytes). Otherwise
//! the packet's probability (p, or p · size/MTU with `bytemode`) is added
//! to an accumulator: below 0.85 nothing is dropped, from 8.5 on the packet
//! is dropped, and in between it is dropped with its probability. Every
//! drop, early or for lack of room, empties the accumulator. This is RFC
//! 8033 §5.4's de-randomization, which Linux implements too: drops come
//! roughly every 1/p packets, never closer than 0.85/p.
//!
//! Updates run lazily, on the next enqueue or dequeue, for every `tupdate`
//! boundary passed since the last one; between two events nothing they read
//! changes, so this gives the same result as a timer. The first update is
//! due one `tupdate` after the first packet (Linux's first timer fires
//! half a second after the qdisc is made).

use super::rng::Rng;
use crate::link::PieParams;

/// Steps of the gain tuning (RFC 8033 §4.2): below each probability the
/// gains are scaled by the factor; the first match wins.
const GAIN_SCALE: [(f64, f64); 6] = [
    (0.000_001, 1.0 / 2048.0),
    (0.000_01, 1.0 / 512.0),
    (0.000_1, 1.0 / 128.0),
    (0.001, 1.0 / 32.0),
    (0.01, 1.0 / 8.0),
    (0.1, 1.0 / 2.0),
];
/// From this probability on, a step up is capped at [`MAX_STEP`] (§5.5).
const CAP_FROM: f64 = 0.1;
/// The largest step up at high probability, and the extra step at very
/// high delay.
const MAX_STEP: f64 = 0.02;
/// Above this delay every update adds [`MAX_STEP`] (Linux).
const HIGH_DELAY_NS: u64 = 250_000_000;
/// With the delay under half the target, no early drop below this
/// probability (§4.1).
const LOW_DELAY_PROB: f64 = 0.2;
/// De-randomization (§5.4): no drop while the accumulated probability is
/// below the first, always a drop from the second on.
const ACCU_MIN: f64 = 0.85;
const ACCU_MAX: f64 = 8.5;
/// Decay per update of an idle queue: p ← p − p/64.
const IDLE_DECAY: f64 = 1.0 / 64.0;

/// PIE's control state.
#[derive(Clone, Debug)]
pub struct Pie {
    p: PieParams,
    /// Drop probability, in [0, 1].
    prob: f64,
    /// Latest queueing delay: the sojourn time of the last dequeued
    /// packet, or 0 if that dequeue emptied the queue, ns.
    qdelay_ns: u64,
    /// `qdelay_ns` at the previous update.
    qdelay_old_ns: u64,
    /// Burst allowance left, ns.
    burst_left_ns: u64,
    /// When the last dequeue was (None at the start of a cycle).
    last_dequeue: Option<u64>,
    /// Probability accumulated since the last drop (de-randomization).
    accu_prob: f64,
    /// When the next update is due (None before the first packet).
    next_update: Option<u64>,
    rng: Rng,
}

impl Pie {
    /// PIE with these parameters, drawing from `rng`.
    pub fn new(p: PieParams, rng: Rng) -> Pie {
        Pie {
            p,
            prob: 0.0,
            qdelay_ns: 0,
            qdelay_old_ns: 0,
            burst_left_ns: p.max_burst_ns,
            last_dequeue: None,
            accu_prob: 0.0,
            next_update: None,
            rng,
        }
    }

    /// The drop probability.
    pub fn prob(&self) -> f64 {
        self.prob
    }

    /// The current queueing delay estimate, ns.
    pub fn qdelay_ns(&self) -> u64 {
        self.qdelay_ns
    }

    /// Burst allowance left, ns.
    pub fn burst_left_ns(&self) -> u64 {
        self.burst_left_ns
    }

    /// The gain factor for drop probability `p` (RFC 8033 §4.2).
    fn gain_scale(p: f64) -> f64 {
        GAIN_SCALE
            .iter()
            .find(|(below, _)| p < *below)
            .map_or(1.0, |(_, s)| *s)
    }

    /// Starts a new measurement cycle: full burst allowance, nothing
    /// accumulated.
    fn restart_cycle(&mut self) {
        self.burst_left_ns = self.p.max_burst_ns;
        self.last_dequeue = None;
        self.accu_prob = 0.0;
    }

    /// What an update reads and writes, to see when it has stopped
    /// changing anything.
    fn update_state(&self) -> (f64, u64, u64, Option<u64>, f64) {
        (
            self.prob,
            self.qdelay_old_ns,
            self.burst_left_ns,
            self.last_dequeue,
            self.accu_prob,
        )
    }

    /// Runs the updates due up to `now`; `backlog` bytes have been queued
    /// since the previous event. Call before acting on each event.
    pub fn advance(&mut self, now: u64, backlog: u64) {
        let tupdate = self.p.tupdate_ns.max(1);
        let mut next = *self.next_update.get_or_insert(now.saturating_add(tupdate));
        while next <= now {
            let before = self.update_state();
            self.update(backlog);
            next = next.saturating_add(tupdate);
            if self.update_state() == before && next <= now {
                // A fixed point (an idle queue at rest, or p pinned at 0
                // or 1): the updates left before `now` change nothing.
                next += (now - next) / tupdate * tupdate;
            }
        }
        self.next_update = Some(next);
    }

    /// One probability update (RFC 8033 §4.2, §4.4, §5.5) with `backlog`
    /// bytes queued.
    fn update(&mut self, backlog: u64) {
        let (qdelay, qdelay_old, target) = (self.qdelay_ns, self.qdelay_old_ns, self.p.target_ns);
        let s = |ns: u64| ns as f64 / 1e9;
        let mut delta = Self::gain_scale(self.prob)
            * (self.p.alpha * (s(qdelay) - s(target)) + self.p.beta * (s(qdelay) - s(qdelay_old)));
        if delta > MAX_STEP && self.prob >= CAP_FROM {
            delta = MAX_STEP;
        }
        if qdelay > HIGH_DELAY_NS {
            delta += MAX_STEP;
        }
        let p = self.prob + delta;
        if !p.is_nan() {
            self.prob = p.clamp(0.0, 1.0);
        }
        if qdelay == 0 && qdelay_old == 0 && backlog == 0 {
            self.prob -= self.prob * IDLE_DECAY;
        }
        if qdelay < target / 2 && qdelay_old < target / 2 && self.prob == 0.0 {
            self.restart_cycle();
        }
        self.qdelay_old_ns = qdelay;
    }

    /// A packet left the queue at `now` after `sojourn` ns in it, leaving
    /// `backlog` bytes behind.
    pub fn on_dequeue(&mut self, sojourn: u64, backlog: u64, now: u64) {
        self.qdelay_ns = if backlog == 0 { 0 } else { sojourn };
        let gap = self.last_dequeue.map_or(0, |t| now.saturating_sub(t));
        self.last_dequeue = Some(now);
        self.burst_left_ns = self.burst_left_ns.saturating_sub(gap);
    }

    /// An arrival of `size` bytes that fits in the queue finds `backlog`
    /// bytes queued, on a link whose largest packet is `mtu` bytes: true to
    /// drop it early.
    pub fn on_arrival(&mut self, backlog: u64, size: u64, mtu: u64) -> bool {
        if self.burst_left_ns > 0
            || (self.qdelay_ns < self.p.target_ns / 2 && self.prob < LOW_DELAY_PROB)
            || backlog < 2 * mtu
        {
            return false;
        }
        let local = if self.p.bytemode && size <= mtu && mtu > 0 {
            self.prob * size as f64 / mtu as f64
        } else {
            self.prob
        };
        if local == 0.0 {
            self.accu_prob = 0.0;
        } else {
            self.accu_prob += local;
        }
        if self.accu_prob < ACCU_MIN {
            return false;
        }
        if self.accu_prob >= ACCU_MAX || self.rng.chance(local) {
            self.accu_prob = 0.0;
            return true;
        }
        false
    }

    /// An arrival was dropped for lack of room: the accumulated probability
    /// starts again, as after an early drop.
    pub fn on_overflow(&mut self) {
        self.accu_prob = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::packet::{DropReason, Packet};
    use crate::elements::queue::Queue;
    use crate::link::Aqm;

    const MS: u64 = 1_000_000;

    fn pie() -> Pie {
        Pie::new(PieParams::default(), Rng::new(1, 5))
    }

    /// What [`run`] saw.
    struct Run {
        /// (departure time, sojourn), ns.
        departures: Vec<(u64, u64)>,
        /// When PIE dropped.
        pie_drops: Vec<u64>,
        full_drops: u64,
        arrivals: u64,
        /// The queue as the run left it.
        q: Queue,
    }

    /// A 10 Mbit/s link (1250-byte packets, one per ms) behind a PIE queue
    /// of 2000 packets, fed by a Poisson source at `load` times its rate
    /// until `until`.
    fn run(load: f64, until: u64, seed: u64) -> Run {
        let service = MS;
        let mean_gap = service as f64 / load;
        let mut q = Queue::new(
            2_000 * 1250,
            None,
            &Aqm::Pie(PieParams::default()),
            10e6,
            Rng::new(seed, 1),
        );
        let mut src = Rng::new(seed, 2);
        let mut next_arr = 0u64;
        let mut link_free = 0u64;
        let (mut departures, mut pie_drops, mut full_drops, mut arrivals) =
            (Vec::new(), Vec::new(), 0, 0);
        loop {
            let next_dep = q.head().map_or(u64::MAX, |(_, t)| link_free.max(t));
            let t = next_arr.min(next_dep);
            if t >= until {
                break;
            }
            if next_arr <= next_dep {
                arrivals += 1;
                match q.enqueue(Packet::sized(1250, 0, t), t) {
                    Ok(_) => {}
                    Err((_, DropReason::Pie)) => pie_drops.push(t),
                    Err((_, why)) => {
                        assert_eq!(why, DropReason::QueueFull);
                        full_drops += 1;
                    }
                }
                let u = 1.0 - src.unit(); // (0, 1]
                next_arr = t + (-u.ln() * mean_gap) as u64 + 1;
            } else {
                let (_, sojourn, _) = q
                    .dequeue(t, |_, _, _| panic!("PIE drops at enqueue"))
                    .unwrap();
                departures.push((t, sojourn));
                link_free = t + service;
            }
        }
        Run {
            departures,
            pie_drops,
            full_drops,
            arrivals,
            q,
        }
    }

    #[test]
    fn overload_settles_near_the_target_delay() {
        for seed in [1, 2, 3] {
            let r = run(1.1, 40_000 * MS, seed);
            let late: Vec<u64> = r
                .departures
                .iter()
                .filter(|(t, _)| *t >= 20_000 * MS)
                .map(|(_, s)| *s)
                .collect();
            let mean_ms = late.iter().sum::<u64>() as f64 / late.len() as f64 / MS as f64;
            // The controller holds the delay at its 15 ms target on average…
            assert!((12.0..18.0).contains(&mean_ms), "seed {seed}: {mean_ms} ms");
            // …by dropping the excess, 1 − 1/1.1 of the arrivals (a little
            // more: Poisson arrivals leave the link idle now and then), early…
            let rate = r.pie_drops.len() as f64 / r.arrivals as f64;
            assert!(
                (0.085..0.12).contains(&rate),
                "seed {seed}: drop rate {rate}"
            );
            assert_eq!(r.full_drops, 0);
            // …while keeping the link busy (one departure per ms).
            assert!(late.len() as f64 >= 0.97 * 20_000.0, "{}", late.len());
            let p = r.q.pie().unwrap().prob();
            assert!((0.02..0.3).contains(&p), "seed {seed}: p {p}");
        }
    }

    #[test]
    fn an_underloaded_link_sees_no_early_drops() {
        let r = run(0.8, 20_000 * MS, 4);
        assert!(r.pie_drops.is_empty(), "{}", r.pie_drops.len());
        assert_eq!(r.q.pie().unwrap().prob(), 0.0);
    }

    #[test]
    fn idle_decays_and_restores_the_burst_allowance() {
        let mut q = run(1.5, 5_000 * MS, 7).q;
        let busy = q.pie().unwrap().clone();
        assert!(busy.prob() > 0.1 && busy.burst_left_ns() == 0, "{busy:?}");
        // Drain the queue at the link's pace, then stay idle.
        let mut t = 5_000 * MS;
        while q.dequeue(t, |_, _, _| ()).is_some() {
            t += MS;
        }
        let mut last = q.pie().unwrap().prob();
        let mut steps = 0;
        // Each update now lowers p (below target; decays once qdelay is 0).
        while q.pie().unwrap().prob() > 0.0 {
            t += 15 * MS;
            q.dequeue(t, |_, _, _| ());
            let p = q.pie().unwrap().prob();
            assert!(p < last, "{p} after {last}");
            last = p;
            steps += 1;
            assert!(steps < 10_000, "p stuck at {p}");
        }
        t += 30 * MS;
        q.dequeue(t, |_, _, _| ());
        let pie = q.pie().unwrap();
        assert_eq!(pie.burst_left_ns(), PieParams::default().max_burst_ns);
        // A new burst, well within 150 ms, gets through whole.
        for i in 0..120 {
            assert!(q
                .enqueue(Packet::sized(1250, 0, t), t + i * 100_000)
                .is_ok());
        }
    }

    #[test]
    fn one_update_follows_the_rfc_formula() {
        let mut p = pie();
        // p = 0: gains scaled by 1/2048.
        p.qdelay_ns = 30 * MS;
        p.update(100_000);
        let want = (0.125 * (0.030 - 0.015) + 1.25 * 0.030) / 2048.0;
        assert!((p.prob - want).abs() < 1e-15, "{}", p.prob);
        assert_eq!(p.qdelay_old_ns, 30 * MS);
        // p = 0.05: gains halved; the delay fell by 10 ms.
        p.prob = 0.05;
        p.qdelay_ns = 20 * MS;
        p.update(100_000);
        let want = 0.05 + (0.125 * 0.005 + 1.25 * -0.010) / 2.0;
        assert!((p.prob - want).abs() < 1e-12, "{}", p.prob);
        // p ≥ 0.1: a step up is at most 2 %, plus 2 % above 250 ms.
        p.prob = 0.5;
        p.qdelay_old_ns = 0;
        p.qdelay_ns = 200 * MS;
        p.update(100_000);
        assert!((p.prob - 0.52).abs() < 1e-12, "{}", p.prob);
        p.qdelay_old_ns = 0;
        p.qdelay_ns = 300 * MS;
        p.update(100_000);
        assert!((p.prob - 0.56).abs() < 1e-12, "{}", p.prob);
        // Idle for two updates: the step down, then the 1/64 decay.
        p.qdelay_ns = 0;
        p.qdelay_old_ns = 0;
        p.update(0);
        let want = (0.56 - 0.125 * 0.015) * (63.0 / 64.0);
        assert!((p.prob - want).abs() < 1e-12, "{}", p.prob);
        // No decay while packets wait (qdelay 0 means the last dequeue emptied it).
        let before = p.prob;
        p.update(3000);
        assert!((p.prob - (before - 0.125 * 0.015)).abs() < 1e-12);
    }

    #[test]
    fn gains_scale_with_the_probability() {
        let cases = [
            (0.5, 1.0),
            (0.1, 1.0),
            (0.05, 0.5),
            (0.005, 1.0 / 8.0),
            (0.0005, 1.0 / 32.0),
            (0.00005, 1.0 / 128.0),
            (0.000005, 1.0 / 512.0),
            (0.0000005, 1.0 / 2048.0),
            (0.0, 1.0 / 2048.0),
        ];
        for (p, s) in cases {
            assert_eq!(Pie::gain_scale(p), s, "p = {p}");
        }
    }

    #[test]
    fn early_drop_guards_and_derandomization() {
        let mut p = pie();
        p.prob = 0.1;
        p.qdelay_ns = 20 * MS;
        // Burst allowance left: never.
        assert!(!(0..1000).any(|_| p.on_arrival(100_000, 1500, 1500)));
        p.burst_left_ns = 0;
        // Fewer than two MTUs queued: never.
        assert!(!(0..1000).any(|_| p.on_arrival(2999, 1500, 1500)));
        // Low delay and p < 20 %: never; at 20 % it may.
        p.qdelay_ns = 7 * MS;
        assert!(!(0..1000).any(|_| p.on_arrival(100_000, 1500, 1500)));
        p.prob = 0.2;
        assert!((0..1000).any(|_| p.on_arrival(100_000, 1500, 1500)));
        // At p = 0.1 the gaps between drops are 9 (0.85/p) to 85 packets
        // (8.5/p, one more for rounding): 8 safe arrivals, then a drop with
        // probability p each, so the mean gap is 8 + 1/p = 18.
        p.prob = 0.1;
        p.qdelay_ns = 20 * MS;
        p.accu_prob = 0.0;
        let (mut gap, mut gaps) = (0u32, Vec::new());
        for _ in 0..100_000 {
            gap += 1;
            if p.on_arrival(100_000, 1500, 1500) {
                gaps.push(gap);
                gap = 0;
            }
        }
        assert!(gaps.iter().all(|g| (9..=86).contains(g)), "{gaps:?}");
        let rate = gaps.len() as f64 / 100_000.0;
        assert!((0.052..0.059).contains(&rate), "{rate}");
        // bytemode: a 150-byte packet counts a tenth.
        let mut b = Pie::new(
            PieParams {
                bytemode: true,
                ..PieParams::default()
            },
            Rng::new(2, 2),
        );
        b.burst_left_ns = 0;
        b.prob = 0.5;
        b.qdelay_ns = 20 * MS;
        assert!(!b.on_arrival(100_000, 150, 1500));
        assert!((b.accu_prob - 0.05).abs() < 1e-12);
        // A tail drop starts the accumulation again.
        b.on_overflow();
        assert_eq!(b.accu_prob, 0.0);
    }

    #[test]
    fn probability_stays_finite_and_in_range() {
        let extremes = [
            PieParams::default(),
            PieParams {
                target_ns: 1000,
                tupdate_ns: MS,
                alpha: 2.0,
                beta: 2.0,
                max_burst_ns: 0,
                bytemode: true,
                ecn: true,
            },
            PieParams {
                target_ns: 10_000 * MS,
                tupdate_ns: 10_000 * MS,
                alpha: 0.0625,
                beta: 0.0625,
                max_burst_ns: 10_000 * MS,
                bytemode: false,
                ecn: false,
            },
        ];
        for (i, params) in extremes.into_iter().enumerate() {
            let mut p = Pie::new(params, Rng::new(i as u64, 3));
            let mut r = Rng::new(i as u64, 4);
            let mut now = 0u64;
            let mut backlog = 0u64;
            for _ in 0..200_000 {
                now += match r.next_u64() % 100 {
                    0 => r.next_u64() % (3_600_000 * MS), // up to an hour idle
                    1..=10 => r.next_u64() % (1000 * MS),
                    _ => r.next_u64() % (2 * MS),
                };
                p.advance(now, backlog);
                if r.chance(0.5) {
                    let size = 1 + r.next_u64() % 65_535;
                    if !p.on_arrival(backlog, size, 1500) {
                        backlog += size;
                    }
                } else {
                    let sojourn = match r.next_u64() % 4 {
                        0 => r.next_u64() % (20_000 * MS),
                        1 => u64::MAX / 2,
                        _ => r.next_u64() % (100 * MS),
                    };
                    backlog = backlog.saturating_sub(r.next_u64() % 70_000);
                    p.on_dequeue(sojourn, backlog, now);
                }
                assert!(
                    p.prob.is_finite() && (0.0..=1.0).contains(&p.prob),
                    "{params:?}: p = {}",
                    p.prob
                );
                assert!(p.accu_prob.is_finite() && p.accu_prob < ACCU_MAX + 1.0);
            }
        }
        // Even an hour-long idle gap costs no more than a few updates.
        let mut p = pie();
        p.advance(0, 0);
        p.advance(3_600_000 * MS, 0);
        assert_eq!(p.next_update, Some(3_600_000 * MS + 15 * MS));
    }
}
