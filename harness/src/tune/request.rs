//! From what the user typed to a [`TuneConfig`] and its base scenario:
//! every flag checked, every error naming what is allowed. A name that is
//! a tuning preset an algorithm defines ([`cc_algorithms::tuned::PRESETS`])
//! stands for its algorithm, parameters and objective.

use std::path::{Path, PathBuf};

use crate::link::LinkSpec;
use crate::scenario::{FlowSpec, Scenario};

use super::objective::Objective;
use super::optimizer::{Kind, Settings};
use super::space::{Condition, Space};
use super::TuneConfig;

/// A tune as asked for on the command line.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The algorithm (a registry name), or a tuning preset's name.
    pub algorithm: String,
    /// Fixed parameters: a spec of the algorithm (`vegas:gamma=2`).
    pub base: Option<String>,
    /// `NAME=LO..HI`.
    pub params: Vec<String>,
    /// A preset or an expression.
    pub objective: Option<String>,
    /// `rate=..,rtt=..[,loss=..,flows=..]`.
    pub conditions: Vec<String>,
    /// Rates and RTTs whose every pair is a condition too.
    pub rates: Vec<String>,
    /// RTTs, see `rates`.
    pub rtts: Vec<String>,
    /// A scenario file to start from.
    pub scenario: Option<PathBuf>,
    /// Queue limit and AQM of the default scenario.
    pub queue: String,
    /// AQM of the default scenario.
    pub aqm: String,
    /// `sim` or `emu`.
    pub link: String,
    /// Run length.
    pub duration: Option<String>,
    /// `pso` or `cmaes`.
    pub optimizer: String,
    /// Particles / population.
    pub swarm: Option<usize>,
    /// Iterations / generations.
    pub iterations: Option<usize>,
    /// Optimiser seed.
    pub seed: u64,
    /// Search seeds per point.
    pub seeds: usize,
    /// Validation seeds.
    pub validate: usize,
}

/// Checks a request and builds the tune and its base scenario.
pub fn plan(r: &Request) -> Result<(TuneConfig, Scenario), String> {
    let (base_spec, params, objective) = what_to_tune(r)?;
    let space = Space::parse(&base_spec, &params)?;
    Objective::parse(&objective)?;
    let conditions = conditions(r)?;
    let backend = match r.link.as_str() {
        "sim" | "emu" => r.link.clone(),
        other => return Err(format!("--link: `{other}` is not one of sim, emu")),
    };
    let mut scenario = base_scenario(r, &space.algorithm, &backend)?;
    let duration_ns = match &r.duration {
        Some(d) => crate::link::units::parse_duration_ns(d)
            .filter(|v| *v >= 1_000_000_000)
            .ok_or_else(|| format!("--duration: `{d}` is not a time of at least 1s"))?,
        None => scenario.duration_ns,
    };
    scenario.duration_ns = duration_ns;
    let optimizer = optimizer_settings(r, &space)?;
    // Search seeds 1.., validation seeds far from them.
    let seeds = (0..r.seeds as u64).map(|i| scenario.seed + i).collect();
    let validate_seeds = (0..r.validate as u64)
        .map(|i| scenario.seed + 1_000_000 + i)
        .collect();
    let scenario_toml = toml::to_string(&scenario.to_toml()).unwrap_or_default();
    let cfg = TuneConfig {
        space,
        objective,
        conditions,
        optimizer,
        seeds,
        validate_seeds,
        duration_ns,
        backend,
        scenario_toml,
    };
    Ok((cfg, scenario))
}

/// The base spec, the searched parameters and the objective: from a
/// preset an algorithm defines, or from the flags.
fn what_to_tune(r: &Request) -> Result<(String, Vec<String>, String), String> {
    if let Some(p) = cc_algorithms::tuned::PRESETS
        .iter()
        .find(|p| p.name == r.algorithm)
    {
        if !r.params.is_empty() || r.base.is_some() {
            return Err(format!(
                "`cclab tune {}` is a preset ({}: {} of `{}`); to choose parameters, use `cclab tune {} --param ...`",
                p.name,
                p.summary,
                p.params.join(", "),
                p.algorithm,
                p.algorithm
            ));
        }
        let obj = r.objective.clone().unwrap_or_else(|| p.objective.into());
        let params = p.params.iter().map(|s| s.to_string()).collect();
        return Ok((p.algorithm.to_string(), params, obj));
    }
    let objective = r.objective.clone().ok_or_else(|| {
        format!(
            "--objective is required: a named one ({}) or an expression over {}",
            super::objective::preset_names(),
            super::objective::METRICS
                .iter()
                .map(|m| m.0)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let base = r.base.clone().unwrap_or_else(|| r.algorithm.clone());
    if base.split(':').next() != Some(r.algorithm.as_str()) {
        return Err(format!(
            "--base `{base}` is not a spec of `{}`",
            r.algorithm
        ));
    }
    Ok((base, r.params.clone(), objective))
}

fn optimizer_settings(r: &Request, space: &Space) -> Result<Settings, String> {
    let kind = Kind::parse(&r.optimizer)?;
    let dims = space.dims();
    let population = r.swarm.unwrap_or(match kind {
        Kind::Pso => 6,
        Kind::Cmaes => 4 + (3.0 * (dims as f64).ln()).floor() as usize,
    });
    let iterations = r.iterations.unwrap_or(5);
    if population == 0 || iterations == 0 || r.seeds == 0 {
        return Err("--swarm, --iterations and --seeds must be at least 1".into());
    }
    Ok(Settings {
        kind,
        population,
        iterations,
        seed: r.seed,
        start: space.default_point(),
    })
}

fn conditions(r: &Request) -> Result<Vec<Condition>, String> {
    let mut out: Vec<Condition> = r
        .conditions
        .iter()
        .map(|c| Condition::parse(c))
        .collect::<Result<_, _>>()?;
    if !r.rates.is_empty() || !r.rtts.is_empty() {
        let rates = if r.rates.is_empty() {
            vec!["20mbit".to_string()]
        } else {
            r.rates.clone()
        };
        let rtts = if r.rtts.is_empty() {
            vec!["40ms".to_string()]
        } else {
            r.rtts.clone()
        };
        for rate in &rates {
            for rtt in &rtts {
                out.push(Condition::parse(&format!("rate={rate},rtt={rtt}"))?);
            }
        }
    }
    if out.is_empty() {
        out.push(Condition::parse("rate=20mbit,rtt=40ms")?);
    }
    Ok(out)
}

fn base_scenario(r: &Request, algorithm: &str, backend: &str) -> Result<Scenario, String> {
    let mut sc = match &r.scenario {
        Some(p) => Scenario::load(p).map_err(|e| e.to_string())?,
        None => {
            let link = LinkSpec::from_pairs(
                [
                    ("queue", r.queue.as_str()),
                    ("aqm", r.aqm.as_str()),
                    ("backend", backend),
                ],
                Path::new("."),
            )
            .map_err(|e| e.to_string())?;
            Scenario {
                name: format!("tune-{algorithm}"),
                duration_ns: 6_000_000_000,
                repetitions: 1,
                seed: 1,
                link,
                links: None,
                flows: vec![FlowSpec::download(algorithm)],
                cross: Vec::new(),
                host: Default::default(),
            }
        }
    };
    if !sc
        .flows
        .iter()
        .any(|f| super::evaluate::runs(&f.cc, algorithm))
    {
        let have: Vec<&str> = sc.flows.iter().map(|f| f.cc.as_str()).collect();
        return Err(format!(
            "the scenario has no flow running `{algorithm}` to tune (its flows: {}); add one with cc = \"{algorithm}\"",
            have.join(", ")
        ));
    }
    sc.link.backend = crate::link::Backend::parse(backend)
        .ok_or_else(|| format!("--link: `{backend}` is not one of sim, emu"))?;
    Ok(sc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(alg: &str) -> Request {
        Request {
            algorithm: alg.into(),
            queue: "1bdp".into(),
            aqm: "droptail".into(),
            link: "sim".into(),
            optimizer: "pso".into(),
            seed: 1,
            seeds: 1,
            validate: 3,
            ..Request::default()
        }
    }

    #[test]
    fn any_algorithm_with_parameters_plans() {
        let mut r = req("cubic");
        r.params = vec!["hystart=0..1".into()];
        r.objective = Some("utilization - 0.5*p95_queue_delay/base_rtt".into());
        r.conditions = vec![
            "rate=10mbit,rtt=20ms".into(),
            "rate=50mbit,rtt=100ms,loss=0.1%".into(),
        ];
        let (cfg, _) = plan(&r).unwrap();
        assert_eq!(cfg.conditions[1].loss, Some(0.001));
        assert_eq!(cfg.optimizer.start, vec![1.0]);
        for (f, v, needle) in [
            ("objective", "goodput +", "column"),
            ("link", "netem", "not one of sim, emu"),
            ("optimizer", "annealing", "not one of pso, cmaes"),
            ("base", "vegas", "not a spec of `cubic`"),
        ] {
            let mut bad = r.clone();
            match f {
                "objective" => bad.objective = Some(v.into()),
                "link" => bad.link = v.into(),
                "optimizer" => bad.optimizer = v.into(),
                _ => bad.base = Some(v.into()),
            }
            let e = plan(&bad).unwrap_err();
            assert!(e.contains(needle), "{f}: {e}");
        }
        r.objective = None;
        assert!(plan(&r).unwrap_err().contains("--objective is required"));
    }
}
