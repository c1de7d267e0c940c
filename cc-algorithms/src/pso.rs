//! Particle swarm optimisation (Kennedy and Eberhart 1995; inertia weight
//! after Shi and Eberhart 1998), maximising a fitness that is measured one
//! particle at a time. SMCC uses it online; an offline tuner can drive the
//! same optimiser with whole emulated runs.
//!
//! ```text
//! V_i(k+1) = w V_i(k) + c1 r1 (P_i,best - X_i(k)) + c2 r2 (P_g,best - X_i(k))
//! X_i(k+1) = X_i(k) + V_i(k+1)
//! ```
//!
//! SMCC's paper writes `X_i(k+1) = X_i(k) + V_i(k)`, which would ignore the
//! velocity just computed; we take it as a typo for the standard form.
//! The inertia `w` falls linearly from `w_start` to `w_end` over the
//! configured iterations; each velocity component is clamped to
//! `vmax_fraction` of its dimension's range; positions are clamped to the
//! bounds and then passed through a repair function (SMCC keeps
//! `1 <= alpha < beta`).

/// A small, seedable generator (SplitMix64): reproducible runs need no
/// external randomness.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next value, uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Settings of the swarm.
#[derive(Debug, Clone)]
pub struct PsoConfig {
    /// Number of particles.
    pub swarm: usize,
    /// Iterations (each evaluates every particle once).
    pub iterations: usize,
    /// Inertia at the first and the last iteration.
    pub w_start: f64,
    /// Inertia at the last iteration.
    pub w_end: f64,
    /// Cognitive and social acceleration constants.
    pub c1: f64,
    /// Social acceleration constant.
    pub c2: f64,
    /// Velocity limit per dimension, as a fraction of the range.
    pub vmax_fraction: f64,
    /// Lower bounds.
    pub lower: [f64; 2],
    /// Upper bounds.
    pub upper: [f64; 2],
    /// Seed of the generator.
    pub seed: u64,
}

#[derive(Debug, Clone)]
struct Particle {
    x: [f64; 2],
    v: [f64; 2],
    best_x: [f64; 2],
    best_f: f64,
}

/// A swarm maximising a fitness measured for one particle at a time.
#[derive(Debug, Clone)]
pub struct Swarm {
    cfg: PsoConfig,
    rng: SplitMix64,
    particles: Vec<Particle>,
    best_x: [f64; 2],
    best_f: f64,
    /// Particle whose fitness is measured next.
    current: usize,
    iteration: usize,
    repair: fn([f64; 2]) -> [f64; 2],
}

impl Swarm {
    /// A swarm spread uniformly at random over the bounds.
    pub fn new(cfg: PsoConfig, repair: fn([f64; 2]) -> [f64; 2]) -> Self {
        let mut rng = SplitMix64::new(cfg.seed);
        let n = cfg.swarm.max(1);
        let particles = (0..n)
            .map(|_| {
                let x: [f64; 2] = std::array::from_fn(|d| {
                    cfg.lower[d] + rng.next_f64() * (cfg.upper[d] - cfg.lower[d])
                });
                let x = repair(x);
                Particle {
                    x,
                    v: [0.0; 2],
                    best_x: x,
                    best_f: f64::NEG_INFINITY,
                }
            })
            .collect::<Vec<_>>();
        let best_x = particles[0].x;
        Swarm {
            cfg,
            rng,
            particles,
            best_x,
            best_f: f64::NEG_INFINITY,
            current: 0,
            iteration: 0,
            repair,
        }
    }

    /// Whether every iteration is done.
    pub fn finished(&self) -> bool {
        self.iteration >= self.cfg.iterations
    }

    /// The position to measure next (the global best once finished).
    pub fn candidate(&self) -> [f64; 2] {
        if self.finished() {
            self.best_x
        } else {
            self.particles[self.current].x
        }
    }

    /// Index of the particle measured next, and the iteration.
    pub fn progress(&self) -> (usize, usize) {
        (self.current, self.iteration)
    }

    /// The best position and fitness so far.
    pub fn best(&self) -> ([f64; 2], f64) {
        (self.best_x, self.best_f)
    }

    /// The inertia weight of the current iteration.
    pub fn inertia(&self) -> f64 {
        let span = self.cfg.iterations.saturating_sub(1).max(1) as f64;
        let t = (self.iteration as f64 / span).min(1.0);
        self.cfg.w_start + (self.cfg.w_end - self.cfg.w_start) * t
    }

    /// Records the fitness of [`candidate`](Self::candidate). After the
    /// last particle of an iteration, every particle moves.
    pub fn report(&mut self, fitness: f64) {
        if self.finished() {
            return;
        }
        let fitness = if fitness.is_nan() {
            f64::NEG_INFINITY
        } else {
            fitness
        };
        let p = &mut self.particles[self.current];
        if fitness > p.best_f {
            p.best_f = fitness;
            p.best_x = p.x;
        }
        if fitness > self.best_f {
            self.best_f = fitness;
            self.best_x = p.x;
        }
        self.current += 1;
        if self.current == self.particles.len() {
            self.current = 0;
            self.step();
            self.iteration += 1;
        }
    }

    /// One velocity and position update of every particle.
    fn step(&mut self) {
        let w = self.inertia();
        for i in 0..self.particles.len() {
            let (r1, r2) = (self.rng.next_f64(), self.rng.next_f64());
            let p = &mut self.particles[i];
            for d in 0..2 {
                let vmax = self.cfg.vmax_fraction * (self.cfg.upper[d] - self.cfg.lower[d]);
                let v = w * p.v[d]
                    + self.cfg.c1 * r1 * (p.best_x[d] - p.x[d])
                    + self.cfg.c2 * r2 * (self.best_x[d] - p.x[d]);
                p.v[d] = v.clamp(-vmax, vmax);
                p.x[d] = (p.x[d] + p.v[d]).clamp(self.cfg.lower[d], self.cfg.upper[d]);
            }
            p.x = (self.repair)(p.x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(seed: u64) -> PsoConfig {
        PsoConfig {
            swarm: 10,
            iterations: 30,
            w_start: 0.9,
            w_end: 0.4,
            c1: 2.0,
            c2: 2.0,
            vmax_fraction: 0.2,
            lower: [0.0, 0.0],
            upper: [10.0, 10.0],
            seed,
        }
    }

    #[test]
    fn finds_the_maximum_of_a_known_function() {
        for seed in 1..=5 {
            let mut s = Swarm::new(cfg(seed), |x| x);
            while !s.finished() {
                let [a, b] = s.candidate();
                s.report(-(a - 3.0).powi(2) - (b - 6.0).powi(2));
            }
            let ([a, b], f) = s.best();
            assert!(
                (a - 3.0).abs() < 0.2 && (b - 6.0).abs() < 0.2,
                "seed {seed}: ({a}, {b}) f={f}"
            );
        }
    }

    #[test]
    fn inertia_falls_linearly_and_repair_holds() {
        let mut s = Swarm::new(cfg(7), |[a, b]| [a.max(1.0), b.max(a.max(1.0) + 0.5)]);
        assert!((s.inertia() - 0.9).abs() < 1e-12);
        for _ in 0..(10 * 29) {
            let [a, b] = s.candidate();
            assert!(a >= 1.0 && b >= a + 0.5);
            s.report(-a - b);
        }
        assert!((s.inertia() - 0.4).abs() < 1e-12);
        assert!(!s.finished());
        for _ in 0..10 {
            s.report(0.0);
        }
        assert!(s.finished());
        assert_eq!(s.candidate(), s.best().0);
    }

    #[test]
    fn same_seed_same_swarm() {
        let a = Swarm::new(cfg(42), |x| x).candidate();
        let b = Swarm::new(cfg(42), |x| x).candidate();
        let c = Swarm::new(cfg(43), |x| x).candidate();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
