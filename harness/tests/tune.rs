//! `cclab tune` end to end on the virtual-time link: a small tune of
//! Vegas's alpha and beta writes a table SMCC and Vegas both load, a second
//! call resumes with nothing to run, and the same tune run as two shards
//! plus a merge gives the same table as in one go.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::run::RunConfig;
use harness::tune::request::{plan, Request};
use harness::tune::{tune, Exec, Outcome};

fn request(optimizer: &str) -> Request {
    Request {
        algorithm: "vegas".into(),
        params: vec!["alpha=1..4".into(), "beta=2..6".into()],
        objective: Some("smcc".into()),
        conditions: vec!["rate=5mbit,rtt=40ms".into()],
        queue: "1bdp".into(),
        aqm: "droptail".into(),
        link: "sim".into(),
        duration: Some("2s".into()),
        optimizer: optimizer.into(),
        swarm: Some(3),
        iterations: Some(2),
        seed: 1,
        seeds: 1,
        validate: 1,
        ..Request::default()
    }
}

fn run_cfg(work: &Path) -> RunConfig {
    RunConfig {
        out: work.to_path_buf(),
        bin_dir: work.to_path_buf(),
        backend: harness::link::Backend::Sim,
        quiet: true,
        stop: Arc::new(AtomicBool::new(false)),
        threads: 1,
        qlog_level: quic_app::QlogLevel::Metrics,
        per_packet_log: true,
    }
}

fn exec(work: &Path, jobs: usize, shard: Option<(usize, usize)>) -> Exec<'static> {
    Exec {
        run: run_cfg(work),
        jobs,
        shard,
        keep_runs: false,
        progress: &|_| {},
    }
}

fn done(o: Outcome) -> Box<harness::tune::TuneResult> {
    match o {
        Outcome::Done(r) => r,
        Outcome::Sharded { .. } => panic!("a tune without --shard finished a shard"),
    }
}

#[test]
fn tunes_resumes_and_shards_to_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, sc) = plan(&request("pso")).unwrap();
    let work = dir.path().join("one.runs");
    let out = dir.path().join("one.toml");
    let first = done(tune(&cfg, &sc, &exec(&work, 2, None), &work, &out).unwrap());
    let c = &first.conditions[0];
    assert!(first.evaluations_run > 3, "{}", first.evaluations_run);
    // The defaults are the first particle, so the best is never worse.
    assert!(c.search_value >= c.evaluations[0].1, "{c:?}");
    assert!(c.best_validated.0.is_finite() && c.default_validated.0.is_finite());
    assert!(work.join("convergence.svg").exists() || std::env::var_os("CI_NO_FONT").is_some());

    // The table: generic, and as SMCC's offline mode reads it.
    let table = cc_algorithms::tuned::TunedTable::load(&out).unwrap();
    assert_eq!(table.algorithm.as_deref(), Some("vegas"));
    assert_eq!(table.entry[0].params["alpha"], c.best["alpha"]);
    let smcc = cc_algorithms::smcc::SmccTable::load(&out).unwrap();
    assert_eq!(smcc.entry[0].beta, c.best["beta"]);
    assert!(cc_algorithms::parse(&format!("smcc:table={}", out.display())).is_ok());
    let spec = format!("vegas:table={}", out.display());
    let resolved = cc_algorithms::registry::resolve_spec(&spec, 40.0, 5e6, None).unwrap();
    assert_eq!(resolved, c.best_spec);
    // A scenario's flow with the table runs the entry for its link.
    let text = format!("[link]\nrate = \"5mbit\"\nrtt = \"40ms\"\n[[flows]]\ncc = \"{spec}\"\n");
    let sc = harness::scenario::Scenario::parse(&text, "test", Path::new(".")).unwrap();
    assert_eq!(sc.flows[0].cc, c.best_spec);
    let bad = text.replace("vegas:", "ewphcc:");
    let e = harness::scenario::Scenario::parse(&bad, "test", Path::new(".")).unwrap_err();
    assert!(e.to_string().contains("tuned for `vegas`"), "{e}");

    // Again: everything is stored, nothing runs, the same result.
    let again = done(tune(&cfg, &sc, &exec(&work, 2, None), &work, &out).unwrap());
    assert_eq!(again.evaluations_run, 0);
    assert_eq!(again.conditions[0].best_spec, c.best_spec);

    // Another tune in the same work directory is refused, naming the field.
    let mut other = cfg.clone();
    other.objective = "power".into();
    let e = tune(&other, &sc, &exec(&work, 2, None), &work, &out).unwrap_err();
    assert!(e.to_string().contains("objective"), "{e}");

    // Two shards per batch, then a merge, in a fresh directory.
    let work2 = dir.path().join("two.runs");
    let out2 = dir.path().join("two.toml");
    let mut waves = 0;
    loop {
        let mut ran = 0;
        for i in 0..2 {
            match tune(&cfg, &sc, &exec(&work2, 1, Some((i, 2))), &work2, &out2).unwrap() {
                Outcome::Sharded { ran: r, .. } => ran += r,
                Outcome::Done(_) => panic!("a shard wrote the table"),
            }
        }
        waves += 1;
        if ran == 0 || waves > 20 {
            break;
        }
    }
    assert!(waves > 2, "{waves} waves");
    let merged = done(tune(&cfg, &sc, &exec(&work2, 1, None), &work2, &out2).unwrap());
    assert_eq!(merged.evaluations_run, 0, "the shards left nothing to run");
    assert_eq!(merged.conditions[0].best_spec, c.best_spec);
    // (Debug text: a refused point's NaN is not equal to itself.)
    assert_eq!(
        format!("{:?}", merged.conditions[0].evaluations),
        format!("{:?}", c.evaluations)
    );
}

#[test]
fn cmaes_tunes_too() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, sc) = plan(&request("cmaes")).unwrap();
    let work = dir.path().join("w");
    let r = done(
        tune(
            &cfg,
            &sc,
            &exec(&work, 2, None),
            &work,
            &dir.path().join("t.toml"),
        )
        .unwrap(),
    );
    let c = &r.conditions[0];
    // The defaults are measured first; three per generation after.
    assert_eq!(c.evaluations[0].0, vec![2.0, 4.0]);
    assert!(c.evaluations.len() >= 4, "{}", c.evaluations.len());
    assert!(c.search_value >= c.evaluations[0].1);
}

/// `cclab tune smcc`: SMCC's offline mode as a preset the algorithm
/// defines (cc_algorithms::tuned::PRESETS), not code in the harness.
#[test]
fn the_smcc_preset_is_vegas_with_smccs_fitness() {
    let mut r = request("pso");
    r.algorithm = "smcc".into();
    r.params.clear();
    r.objective = None;
    r.conditions.clear();
    r.rates = vec!["10mbit".into(), "20mbit".into()];
    let (cfg, sc) = plan(&r).unwrap();
    assert_eq!(cfg.space.algorithm, "vegas");
    assert_eq!(cfg.space.params[1].hi, 20.0);
    assert_eq!(cfg.objective, "smcc");
    assert_eq!(cfg.conditions.len(), 2);
    assert_eq!(cfg.conditions[1].rtt_ns, 40_000_000);
    assert_eq!(sc.flows[0].cc, "vegas");
    // SMCC's fitness, as cc_algorithms::smcc::fitness computes it.
    let o = harness::tune::objective::Objective::parse("smcc").unwrap();
    let m: std::collections::BTreeMap<String, f64> = [
        ("goodput", 0.9),
        ("queue_delay", 4.0),
        ("base_rtt", 40.0),
        ("loss_rate", 0.01),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let want = cc_algorithms::smcc::fitness(0.9, 4.0 / 40.0, 0.01, 1.0, 10.0);
    assert!((o.eval(&m) - want).abs() < 1e-12);
    r.params = vec!["alpha=1..2".into()];
    assert!(plan(&r).unwrap_err().contains("cclab tune vegas"));
}
