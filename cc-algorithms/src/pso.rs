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
//! `alpha_min <= alpha < beta`).
//!
//! **Re-measuring the best** ([`PsoConfig::remeasure_best`]). Textbook PSO
//! assumes a fixed fitness function: a position's fitness is measured once
//! and a personal or global best, once recorded, stands for good. SMCC's
//! online fitness is a noisy measurement of a network that changes, so one
//! lucky interval would stay the global best for the rest of the run and
//! decide the values kept at the end. With `remeasure_best`, after every
//! pass over the particles the global best position is measured once more
//! (one extra evaluation per iteration, before the particles move); the new
//! value *replaces* the stored fitness of that best and of its owner's
//! personal best, and the global best is then chosen again among all
//! personal bests. A stale or lucky best therefore has to hold up when it
//! is measured again; a personal best that is not the global one is not
//! re-measured (it only steers its own particle), but it is as soon as it
//! becomes the global best. This is the re-evaluation remedy for dynamic
//! and noisy PSO (Carlisle and Dozier 2000, Hu and Eberhart 2002 re-evaluate
//! bests so that outdated memories are forgotten).

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

/// Settings of the swarm, in any number of dimensions ([`SwarmN`]).
#[derive(Debug, Clone)]
pub struct PsoConfig {
    /// Number of particles.
    pub swarm: usize,
    /// Iterations (each evaluates every particle once).
    pub iterations: usize,
    /// Inertia at the first iteration.
    pub w_start: f64,
    /// Inertia at the last iteration.
    pub w_end: f64,
    /// Cognitive acceleration constant.
    pub c1: f64,
    /// Social acceleration constant.
    pub c2: f64,
    /// Velocity limit per dimension, as a fraction of the range.
    pub vmax_fraction: f64,
    /// Lower bounds, one per dimension.
    pub lower: Vec<f64>,
    /// Upper bounds, one per dimension (as many as `lower`).
    pub upper: Vec<f64>,
    /// Seed of the generator.
    pub seed: u64,
    /// Measure the global best once more after every pass, replacing its
    /// stored fitness (module docs). For noisy, changing fitness.
    pub remeasure_best: bool,
    /// Where the first particle starts (e.g. the defaults being improved
    /// on), instead of at random; the others are random as always.
    pub start: Option<Vec<f64>>,
}

/// A repair applied to every position after it moves (in place).
pub type Repair = std::sync::Arc<dyn Fn(&mut [f64]) + Send + Sync>;

#[derive(Debug, Clone)]
struct Particle {
    x: Vec<f64>,
    v: Vec<f64>,
    best_x: Vec<f64>,
    best_f: f64,
}

/// A swarm in any number of dimensions maximising a fitness measured for
/// one particle at a time. The particles of one iteration do not move
/// until all of them are measured, so a caller may also measure them
/// together ([`pending`](Self::pending)) and report in order.
#[derive(Clone)]
pub struct SwarmN {
    cfg: PsoConfig,
    rng: SplitMix64,
    particles: Vec<Particle>,
    best_x: Vec<f64>,
    best_f: f64,
    /// The particle whose personal best is the global best.
    best_owner: usize,
    /// Whether the next report is a re-measurement of the global best.
    remeasuring: bool,
    /// Particle whose fitness is measured next.
    current: usize,
    iteration: usize,
    repair: Repair,
}

impl std::fmt::Debug for SwarmN {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwarmN")
            .field("cfg", &self.cfg)
            .field("particles", &self.particles)
            .field("best_x", &self.best_x)
            .field("best_f", &self.best_f)
            .field("iteration", &self.iteration)
            .field("current", &self.current)
            .field("remeasuring", &self.remeasuring)
            .finish()
    }
}

impl SwarmN {
    /// A swarm spread uniformly at random over the bounds. Bounds of
    /// different lengths are cut to the shorter; a swarm has at least one
    /// particle.
    pub fn new(mut cfg: PsoConfig, repair: Repair) -> Self {
        let dims = cfg.lower.len().min(cfg.upper.len());
        cfg.lower.truncate(dims);
        cfg.upper.truncate(dims);
        let mut rng = SplitMix64::new(cfg.seed);
        let n = cfg.swarm.max(1);
        let particles = (0..n)
            .map(|i| {
                let mut x: Vec<f64> = (0..dims)
                    .map(|d| cfg.lower[d] + rng.next_f64() * (cfg.upper[d] - cfg.lower[d]))
                    .collect();
                if let Some(start) = cfg.start.as_ref().filter(|s| i == 0 && s.len() == dims) {
                    for d in 0..dims {
                        x[d] = start[d].clamp(cfg.lower[d], cfg.upper[d]);
                    }
                }
                repair(&mut x);
                Particle {
                    v: vec![0.0; dims],
                    best_x: x.clone(),
                    x,
                    best_f: f64::NEG_INFINITY,
                }
            })
            .collect::<Vec<_>>();
        let best_x = particles[0].x.clone();
        SwarmN {
            cfg,
            rng,
            particles,
            best_x,
            best_f: f64::NEG_INFINITY,
            best_owner: 0,
            remeasuring: false,
            current: 0,
            iteration: 0,
            repair,
        }
    }

    /// Whether every iteration is done.
    pub fn finished(&self) -> bool {
        self.iteration >= self.cfg.iterations
    }

    /// The position to measure next (the global best while it is being
    /// re-measured, and once finished).
    pub fn candidate(&self) -> &[f64] {
        if self.finished() || self.remeasuring {
            &self.best_x
        } else {
            &self.particles[self.current].x
        }
    }

    /// Every position to measure before the swarm moves, in the order to
    /// report them: the rest of this iteration's particles, or the global
    /// best while it is re-measured. Empty once finished.
    pub fn pending(&self) -> Vec<Vec<f64>> {
        if self.finished() {
            Vec::new()
        } else if self.remeasuring {
            vec![self.best_x.clone()]
        } else {
            self.particles[self.current..]
                .iter()
                .map(|p| p.x.clone())
                .collect()
        }
    }

    /// Whether the next report re-measures the global best.
    pub fn remeasuring(&self) -> bool {
        self.remeasuring
    }

    /// Index of the particle measured next, and the iteration.
    pub fn progress(&self) -> (usize, usize) {
        (self.current, self.iteration)
    }

    /// The best position and fitness so far.
    pub fn best(&self) -> (&[f64], f64) {
        (&self.best_x, self.best_f)
    }

    /// The inertia weight of the current iteration.
    pub fn inertia(&self) -> f64 {
        let span = self.cfg.iterations.saturating_sub(1).max(1) as f64;
        let t = (self.iteration as f64 / span).min(1.0);
        self.cfg.w_start + (self.cfg.w_end - self.cfg.w_start) * t
    }

    /// Records the fitness of [`candidate`](Self::candidate). After the
    /// last particle of an iteration (and, with `remeasure_best`, the
    /// re-measurement of the global best), every particle moves.
    pub fn report(&mut self, fitness: f64) {
        if self.finished() {
            return;
        }
        let fitness = if fitness.is_nan() {
            f64::NEG_INFINITY
        } else {
            fitness
        };
        if self.remeasuring {
            // The new measurement replaces the old, lucky or stale, one.
            self.particles[self.best_owner].best_f = fitness;
            let (owner, p) = self
                .particles
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.best_f.total_cmp(&b.1.best_f))
                .expect("a swarm has particles");
            self.best_owner = owner;
            self.best_x.clone_from(&p.best_x);
            self.best_f = p.best_f;
            self.remeasuring = false;
            self.step();
            self.iteration += 1;
            return;
        }
        let i = self.current;
        let p = &mut self.particles[i];
        if fitness > p.best_f {
            p.best_f = fitness;
            p.best_x.clone_from(&p.x);
        }
        if fitness > self.best_f {
            self.best_f = fitness;
            self.best_x.clone_from(&p.x);
            self.best_owner = i;
        }
        self.current += 1;
        if self.current == self.particles.len() {
            self.current = 0;
            if self.cfg.remeasure_best && self.best_f > f64::NEG_INFINITY {
                self.remeasuring = true;
            } else {
                self.step();
                self.iteration += 1;
            }
        }
    }

    /// One velocity and position update of every particle.
    fn step(&mut self) {
        let w = self.inertia();
        for i in 0..self.particles.len() {
            let (r1, r2) = (self.rng.next_f64(), self.rng.next_f64());
            let p = &mut self.particles[i];
            for d in 0..p.x.len() {
                let vmax = self.cfg.vmax_fraction * (self.cfg.upper[d] - self.cfg.lower[d]);
                let v = w * p.v[d]
                    + self.cfg.c1 * r1 * (p.best_x[d] - p.x[d])
                    + self.cfg.c2 * r2 * (self.best_x[d] - p.x[d]);
                p.v[d] = v.clamp(-vmax, vmax);
                p.x[d] = (p.x[d] + p.v[d]).clamp(self.cfg.lower[d], self.cfg.upper[d]);
            }
            (self.repair)(&mut p.x);
        }
    }
}

/// The two-dimensional swarm SMCC runs online: [`SwarmN`] over `[f64; 2]`.
#[derive(Debug, Clone)]
pub struct Swarm(SwarmN);

fn pair(x: &[f64]) -> [f64; 2] {
    [x[0], x[1]]
}

impl Swarm {
    /// A swarm spread uniformly at random over the bounds.
    pub fn new(
        cfg: PsoConfig,
        repair: impl Fn([f64; 2]) -> [f64; 2] + Send + Sync + 'static,
    ) -> Self {
        let repair: Repair = std::sync::Arc::new(move |x: &mut [f64]| {
            let r = repair(pair(x));
            x.copy_from_slice(&r);
        });
        Swarm(SwarmN::new(cfg, repair))
    }

    /// Whether every iteration is done.
    pub fn finished(&self) -> bool {
        self.0.finished()
    }

    /// The position to measure next (the global best while it is being
    /// re-measured, and once finished).
    pub fn candidate(&self) -> [f64; 2] {
        pair(self.0.candidate())
    }

    /// Whether the next report re-measures the global best.
    pub fn remeasuring(&self) -> bool {
        self.0.remeasuring()
    }

    /// Index of the particle measured next, and the iteration.
    pub fn progress(&self) -> (usize, usize) {
        self.0.progress()
    }

    /// The best position and fitness so far.
    pub fn best(&self) -> ([f64; 2], f64) {
        let (x, f) = self.0.best();
        (pair(x), f)
    }

    /// The inertia weight of the current iteration.
    pub fn inertia(&self) -> f64 {
        self.0.inertia()
    }

    /// Records the fitness of [`candidate`](Self::candidate).
    pub fn report(&mut self, fitness: f64) {
        self.0.report(fitness)
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
            lower: vec![0.0, 0.0],
            upper: vec![10.0, 10.0],
            seed,
            remeasure_best: false,
            start: None,
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

    /// A first measurement that was pure luck (+1000) stays the global best
    /// for good without re-measurement; with it, the lucky best is measured
    /// again, loses, and the swarm still finds the maximum.
    #[test]
    fn remeasuring_forgets_a_lucky_best() {
        let f = |[a, b]: [f64; 2]| -(a - 3.0).powi(2) - (b - 6.0).powi(2);
        for remeasure_best in [false, true] {
            let mut s = Swarm::new(
                PsoConfig {
                    remeasure_best,
                    ..cfg(3)
                },
                |x| x,
            );
            let lucky = s.candidate();
            s.report(f(lucky) + 1000.0);
            let mut evaluations = 1;
            while !s.finished() {
                let x = s.candidate();
                s.report(f(x));
                evaluations += 1;
            }
            let (best, fit) = s.best();
            if remeasure_best {
                // One extra evaluation per iteration.
                assert_eq!(evaluations, 10 * 30 + 30);
                assert!(fit <= 0.0, "{fit}");
                assert!(
                    (best[0] - 3.0).abs() < 0.2 && (best[1] - 6.0).abs() < 0.2,
                    "{best:?}"
                );
            } else {
                assert_eq!(evaluations, 10 * 30);
                assert_eq!(best, lucky, "the old behaviour keeps the lucky best");
                assert!(fit > 900.0);
            }
        }
    }

    #[test]
    fn remeasuring_a_best_that_holds_keeps_it() {
        let mut s = Swarm::new(
            PsoConfig {
                remeasure_best: true,
                iterations: 1,
                swarm: 3,
                ..cfg(5)
            },
            |x| x,
        );
        let xs: Vec<_> = (0..3)
            .map(|i| {
                let x = s.candidate();
                s.report([0.5, 0.9, 0.1][i]);
                x
            })
            .collect();
        assert!(s.remeasuring() && !s.finished());
        assert_eq!(s.candidate(), xs[1]);
        // Measured again a little lower: still the best of all.
        s.report(0.8);
        assert!(s.finished());
        assert_eq!(s.best(), (xs[1], 0.8));
        // A NaN re-measurement counts as the worst, never as a best.
        let mut t = Swarm::new(
            PsoConfig {
                remeasure_best: true,
                iterations: 1,
                swarm: 2,
                ..cfg(5)
            },
            |x| x,
        );
        let a = t.candidate();
        t.report(1.0);
        t.report(0.5);
        t.report(f64::NAN);
        assert!(t.finished());
        assert_ne!(t.best().0, a);
        assert_eq!(t.best().1, 0.5);
    }
}
