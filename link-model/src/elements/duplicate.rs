//! Duplication: a packet enters the queue twice with probability `p`
//! (netem's `duplicate`).

use super::rng::Rng;

/// Decides which packets are duplicated.
#[derive(Clone, Debug)]
pub struct Duplicate {
    p: f64,
    rng: Rng,
    /// Copies made.
    pub duplicated: u64,
}

impl Duplicate {
    /// A duplication element with its own random stream.
    pub fn new(p: f64, rng: Rng) -> Duplicate {
        Duplicate {
            p,
            rng,
            duplicated: 0,
        }
    }

    /// How many copies of this packet go on: 1, or 2 when duplicated.
    pub fn copies(&mut self) -> usize {
        if self.rng.chance(self.p) {
            self.duplicated += 1;
            2
        } else {
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate() {
        let mut d = Duplicate::new(0.1, Rng::new(1, 9));
        let total: usize = (0..100_000).map(|_| d.copies()).sum();
        assert!((109_000..=111_000).contains(&total), "{total}");
        assert_eq!(d.duplicated as usize, total - 100_000);
        let mut never = Duplicate::new(0.0, Rng::new(1, 9));
        assert!((0..1000).all(|_| never.copies() == 1));
    }
}
