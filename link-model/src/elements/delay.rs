//! Propagation delay with jitter.
//!
//! Each packet is delivered `delay + jitter·z` after its last bit left the
//! bottleneck, `z` drawn from the configured distribution (uniform in
//! [−1, 1], or unit-variance normal, Pareto or netem's "paretonormal" mix)
//! and the total clamped at 0. Jitter here never reorders: a packet is not
//! delivered before the one ahead of it (the delivery time is at least the
//! previous one). netem does reorder on jitter; this emulator keeps
//! reordering a separate, explicit element (see `reorder`).

use super::rng::Rng;
use crate::link::JitterDistribution;

/// The delay line's timing.
#[derive(Clone, Debug)]
pub struct Delay {
    delay_ns: u64,
    jitter_ns: u64,
    dist: JitterDistribution,
    rng: Rng,
    last: u64,
}

impl Delay {
    /// A delay line of `delay_ns` ± `jitter_ns`.
    pub fn new(delay_ns: u64, jitter_ns: u64, dist: JitterDistribution, rng: Rng) -> Delay {
        Delay {
            delay_ns,
            jitter_ns,
            dist,
            rng,
            last: 0,
        }
    }

    fn jitter(&mut self) -> f64 {
        let z = match self.dist {
            JitterDistribution::Uniform => 2.0 * self.rng.unit() - 1.0,
            JitterDistribution::Normal => self.rng.normal(),
            JitterDistribution::Pareto => self.rng.pareto(),
            JitterDistribution::ParetoNormal => {
                (0.25 * self.rng.pareto() + 0.75 * self.rng.normal()) / 0.625f64.sqrt()
            }
        };
        z * self.jitter_ns as f64
    }

    /// Packets that finish crossing from now on take `delay_ns`.
    pub fn set_delay(&mut self, delay_ns: u64) {
        self.delay_ns = delay_ns;
    }

    /// When a packet that left the bottleneck at `departed` arrives.
    pub fn deliver_at(&mut self, departed: u64) -> u64 {
        let d = if self.jitter_ns == 0 {
            self.delay_ns
        } else {
            (self.delay_ns as f64 + self.jitter()).max(0.0) as u64
        };
        let t = (departed + d).max(self.last);
        self.last = t;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_delay() {
        let mut d = Delay::new(20_000_000, 0, JitterDistribution::Uniform, Rng::new(0, 0));
        assert_eq!(d.deliver_at(5), 20_000_005);
        assert_eq!(d.deliver_at(10), 20_000_010);
    }

    #[test]
    fn jitter_spread_and_order() {
        for dist in [
            JitterDistribution::Uniform,
            JitterDistribution::Normal,
            JitterDistribution::Pareto,
            JitterDistribution::ParetoNormal,
        ] {
            let mut d = Delay::new(10_000_000, 1_000_000, dist, Rng::new(4, 0));
            let mut prev = 0;
            let mut delays = Vec::new();
            for i in 0..50_000u64 {
                // Departures 20 ms apart: far wider than the jitter, so the
                // ordering rarely binds and the delays show the distribution.
                let dep = i * 20_000_000;
                let t = d.deliver_at(dep);
                assert!(t >= prev, "{dist:?} reordered");
                prev = t;
                delays.push((t - dep) as f64 / 1e6);
            }
            let mean = delays.iter().sum::<f64>() / delays.len() as f64;
            assert!((mean - 10.0).abs() < 0.15, "{dist:?} mean {mean}");
            let lo = delays.iter().cloned().fold(f64::MAX, f64::min);
            if dist == JitterDistribution::Uniform {
                assert!(lo >= 9.0 && delays.iter().all(|&x| x <= 11.0 + 1e-9));
            }
        }
    }
}
