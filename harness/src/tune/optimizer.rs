//! The optimisers, driven by replay.
//!
//! Both work on the unit cube (each parameter's range mapped to 0..1) and
//! maximise. Neither is stepped in place: [`replay`] runs an optimiser from
//! its seed with a lookup of the values measured so far, and stops at the
//! first batch holding a point not measured yet, returning that batch
//! ([`Step::Need`]). The caller measures the batch (in parallel, on as many
//! machines as it likes), stores the values and replays again. Because both
//! optimisers are deterministic given their seed and the values they are
//! told, a replay walks the same path, so a tune resumes after an
//! interruption from its stored values alone, and shards of a batch can run
//! as separate processes. Replaying costs microseconds per evaluation; a
//! measurement costs a simulated run.
//!
//! - **PSO** ([`cc_algorithms::pso::SwarmN`], as the PSO-tuned Vegas paper: inertia
//!   0.9 → 0.4, c1 = c2 = 2, velocity limit 20% of the range): a batch is
//!   one iteration's particles. The first particle starts at the
//!   algorithm's defaults, the others at random.
//! - **CMA-ES** (the `cmaes` crate; Hansen's covariance matrix adaptation,
//!   mean starting at the algorithm's defaults, step size 0.3 of the
//!   ranges; the defaults are measured first): a batch is one generation.
//!   CMA-ES does not know bounds:
//!   points outside the cube are measured at the nearest point inside and
//!   told a value lowered by 10 × the squared distance outside.

use std::sync::Arc;

use cc_algorithms::pso::{PsoConfig, SwarmN};

/// Which optimiser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Particle swarm optimisation.
    Pso,
    /// CMA-ES from the `cmaes` crate.
    Cmaes,
}

impl Kind {
    /// `pso` or `cmaes`.
    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "pso" => Ok(Kind::Pso),
            "cmaes" | "cma-es" => Ok(Kind::Cmaes),
            _ => Err(format!("--optimizer: `{s}` is not one of pso, cmaes")),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pso => "pso",
            Kind::Cmaes => "cmaes",
        }
    }
}

/// How one optimisation runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    /// Which optimiser.
    pub kind: Kind,
    /// Particles (PSO) or population (CMA-ES) per batch.
    pub population: usize,
    /// Iterations (PSO) or generations (CMA-ES).
    pub iterations: usize,
    /// Seed.
    pub seed: u64,
    /// Where CMA-ES's mean starts (the defaults), in the unit cube.
    pub start: Vec<f64>,
}

/// One replay's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// These points (unit cube, clamped) have no value yet.
    Need(Vec<Vec<f64>>),
    /// Finished: every point told, in order, and the best.
    Done(Trace),
}

/// What an optimisation saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Every point told and its value, in the order told.
    pub told: Vec<(Vec<f64>, f64)>,
    /// The best point (unit cube).
    pub best: Vec<f64>,
    /// Its value.
    pub best_value: f64,
}

/// A lookup of measured values: `None` for a point not measured yet.
pub type Lookup<'a> = dyn FnMut(&[f64]) -> Option<f64> + 'a;

/// Replays the optimisation from its seed (module docs).
pub fn replay(s: &Settings, dims: usize, lookup: &mut Lookup<'_>) -> Step {
    match s.kind {
        Kind::Pso => replay_pso(s, dims, lookup),
        Kind::Cmaes => replay_cmaes(s, dims, lookup),
    }
}

fn clamp01(x: &[f64]) -> Vec<f64> {
    x.iter().map(|v| v.clamp(0.0, 1.0)).collect()
}

fn replay_pso(s: &Settings, dims: usize, lookup: &mut Lookup<'_>) -> Step {
    let mut swarm = SwarmN::new(
        PsoConfig {
            swarm: s.population.max(1),
            iterations: s.iterations.max(1),
            w_start: 0.9,
            w_end: 0.4,
            c1: 2.0,
            c2: 2.0,
            vmax_fraction: 0.2,
            lower: vec![0.0; dims],
            upper: vec![1.0; dims],
            seed: s.seed,
            remeasure_best: false,
            start: Some(s.start.clone()),
        },
        Arc::new(|_: &mut [f64]| {}),
    );
    let mut trace = Trace::default();
    while !swarm.finished() {
        let batch = swarm.pending();
        let values: Vec<Option<f64>> = batch.iter().map(|x| lookup(x)).collect();
        if values.iter().any(Option::is_none) {
            return Step::Need(missing(&batch, &values));
        }
        for (x, v) in batch.into_iter().zip(values) {
            let v = v.unwrap_or(f64::NEG_INFINITY);
            swarm.report(v);
            trace.told.push((x, v));
        }
    }
    let (best, value) = swarm.best();
    trace.best = best.to_vec();
    trace.best_value = value;
    Step::Done(trace)
}

fn missing(batch: &[Vec<f64>], values: &[Option<f64>]) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = Vec::new();
    for (x, v) in batch.iter().zip(values) {
        if v.is_none() && !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}

/// Penalty for a CMA-ES point outside the cube.
fn outside_penalty(x: &[f64]) -> f64 {
    10.0 * x
        .iter()
        .map(|v| (v - v.clamp(0.0, 1.0)).powi(2))
        .sum::<f64>()
}

fn replay_cmaes(s: &Settings, dims: usize, lookup: &mut Lookup<'_>) -> Step {
    use std::cell::RefCell;
    let mut start = s.start.clone();
    start.resize(dims, 0.5);
    // The start (the defaults) is measured first, so the best is never
    // worse than where the search began.
    let first = clamp01(&start);
    let Some(v0) = lookup(&first) else {
        return Step::Need(vec![first]);
    };
    let v0 = if v0.is_finite() { v0 } else { -1e6 };
    let need: RefCell<Vec<Vec<f64>>> = RefCell::new(Vec::new());
    let told: RefCell<Vec<(Vec<f64>, f64)>> = RefCell::new(vec![(first, v0)]);
    let objective = |x: &cmaes::DVector<f64>| -> f64 {
        let raw: Vec<f64> = x.iter().copied().collect();
        let inside = clamp01(&raw);
        match lookup(&inside) {
            Some(v) => {
                // A refused or failed point has the worst finite value, so
                // CMA-ES keeps going (it stops at a non-finite one).
                let v = if v.is_finite() { v } else { -1e6 };
                told.borrow_mut().push((inside, v));
                v - outside_penalty(&raw)
            }
            None => {
                let mut n = need.borrow_mut();
                if !n.contains(&inside) {
                    n.push(inside);
                }
                0.0
            }
        }
    };
    let built = cmaes::CMAESOptions::new(start, 0.3)
        .mode(cmaes::Mode::Maximize)
        .population_size(s.population.max(2))
        .max_generations(s.iterations.max(1))
        .seed(s.seed)
        .build(objective);
    let mut cma = match built {
        Ok(c) => c,
        Err(_) => return Step::Done(Trace::default()),
    };
    loop {
        let end = cma.next();
        if !need.borrow().is_empty() {
            return Step::Need(need.take());
        }
        if end.is_some() {
            break;
        }
    }
    drop(cma);
    let told = told.into_inner();
    let (best, best_value) = told
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(x, v)| (x.clone(), *v))
        .unwrap_or_default();
    Step::Done(Trace {
        told,
        best,
        best_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn key(x: &[f64]) -> Vec<u64> {
        x.iter().map(|v| v.to_bits()).collect()
    }

    /// Drives an optimiser by replay, measuring one batch at a time, as
    /// the tuner does; returns the trace and how many replays it took.
    fn drive(kind: Kind, f: impl Fn(&[f64]) -> f64) -> (Trace, usize) {
        let s = Settings {
            kind,
            population: 8,
            iterations: 25,
            seed: 7,
            start: vec![0.5, 0.5],
        };
        let mut store: HashMap<Vec<u64>, f64> = HashMap::new();
        for replays in 1.. {
            match replay(&s, 2, &mut |x| store.get(&key(x)).copied()) {
                Step::Need(batch) => {
                    assert!(!batch.is_empty());
                    for x in batch {
                        assert!(x.iter().all(|v| (0.0..=1.0).contains(v)), "{x:?}");
                        store.insert(key(&x), f(&x));
                    }
                }
                Step::Done(t) => return (t, replays),
            }
        }
        unreachable!()
    }

    #[test]
    fn both_optimisers_find_a_known_maximum_by_replay() {
        let f = |x: &[f64]| -(x[0] - 0.3).powi(2) - (x[1] - 0.8).powi(2);
        for kind in [Kind::Pso, Kind::Cmaes] {
            let (t, replays) = drive(kind, f);
            assert!(
                (t.best[0] - 0.3).abs() < 0.05 && (t.best[1] - 0.8).abs() < 0.05,
                "{kind:?}: {:?} {}",
                t.best,
                t.best_value
            );
            assert!(replays > 2, "{kind:?} measured in {replays} batches");
            // Replaying with everything measured walks the same path.
            let (again, _) = drive(kind, f);
            assert_eq!(again, t);
        }
    }

    #[test]
    fn failed_points_do_not_stop_the_search() {
        // The left half of the cube is refused (NaN, as a refused spec).
        let f = |x: &[f64]| {
            if x[0] < 0.5 {
                f64::NAN
            } else {
                -(x[0] - 0.7).powi(2) - (x[1] - 0.2).powi(2)
            }
        };
        for kind in [Kind::Pso, Kind::Cmaes] {
            let (t, _) = drive(kind, f);
            assert!(
                t.best_value.is_finite() && t.best[0] >= 0.5,
                "{kind:?}: {t:?}"
            );
            assert!((t.best[0] - 0.7).abs() < 0.1, "{kind:?}: {:?}", t.best);
        }
    }
}
