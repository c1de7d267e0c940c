//! Reordering, as netem's `reorder p`: a chosen packet skips the delay line
//! and is delivered as soon as it is off the bottleneck, overtaking the
//! packets still in flight ahead of it. With no delay there is nothing to
//! overtake, as in netem.

use super::rng::Rng;

/// Picks the packets that jump the delay line.
#[derive(Clone, Debug)]
pub struct Reorder {
    p: f64,
    rng: Rng,
    /// Packets sent early.
    pub reordered: u64,
}

impl Reorder {
    /// Reorders each packet with probability `p`.
    pub fn new(p: f64, rng: Rng) -> Reorder {
        Reorder {
            p,
            rng,
            reordered: 0,
        }
    }

    /// True if this packet skips the delay.
    pub fn jump(&mut self) -> bool {
        let j = self.rng.chance(self.p);
        self.reordered += j as u64;
        j
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate() {
        let mut r = Reorder::new(0.05, Rng::new(2, 2));
        let n = (0..100_000).filter(|_| r.jump()).count();
        assert!((4_500..=5_500).contains(&n), "{n}");
        assert_eq!(r.reordered as usize, n);
    }
}
