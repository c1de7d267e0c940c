//! A small seeded generator (xoshiro256++ seeded through SplitMix64), so a
//! link's random choices are the same on every machine and every release:
//! no dependency whose stream could change under us.

/// One independent random stream.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A stream for `seed`; `stream` separates the elements that share a
    /// seed (loss, jitter, ... in each direction).
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut x = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (exactly never for 0, always for 1).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// A standard normal variate (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A Pareto variate with shape 3, shifted and scaled to mean 0 and
    /// standard deviation 1 (a late-heavy tail with finite variance).
    pub fn pareto(&mut self) -> f64 {
        // Pareto(x_m = 1, a = 3): mean 1.5, variance 0.75.
        let x = (1.0 - self.unit()).powf(-1.0 / 3.0);
        (x - 1.5) / 0.75f64.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproducible_and_separated() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7, 1);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(7, 1);
        assert!(a.iter().all(|&v| v == r.next_u64()));
        assert_ne!(Rng::new(7, 2).next_u64(), a[0]);
    }

    #[test]
    fn moments() {
        let mut r = Rng::new(1, 0);
        let n = 200_000;
        for (name, f) in [
            ("normal", Rng::normal as fn(&mut Rng) -> f64),
            ("pareto", Rng::pareto),
        ] {
            let xs: Vec<f64> = (0..n).map(|_| f(&mut r)).collect();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
            assert!(mean.abs() < 0.02, "{name} mean {mean}");
            assert!((var.sqrt() - 1.0).abs() < 0.1, "{name} sd {}", var.sqrt());
        }
        let hits = (0..n).filter(|_| r.chance(0.25)).count() as f64 / n as f64;
        assert!((hits - 0.25).abs() < 0.005, "{hits}");
        assert!(!(0..1000).any(|_| r.chance(0.0)));
        assert!((0..1000).all(|_| r.chance(1.0)));
    }
}
