//! One evaluation: a run of the scenario under one condition with one
//! candidate spec and one link seed, reduced to the metrics objectives
//! read ([`super::objective::METRICS`]), and stored in the work directory
//! under a hash of everything that decides it, so a resumed or sharded
//! tune never runs it twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::link::LossModel;
use crate::run::{RunConfig, RunError, RunSummary};
use crate::scenario::Scenario;

use super::space::Condition;

/// Everything that decides an evaluation's outcome.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EvalKey {
    /// The candidate's spec.
    pub spec: String,
    /// The condition.
    pub condition: Condition,
    /// Link seed.
    pub seed: u64,
    /// Run length, ns.
    pub duration_ns: u64,
    /// Backend (`sim`, `emu`).
    pub backend: String,
    /// Hash of the base scenario's TOML.
    pub scenario: String,
}

impl EvalKey {
    /// A stable file name: FNV-1a of the key's JSON.
    pub fn hash(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        format!("{:016x}", fnv1a(text.as_bytes()))
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms (std's hasher is
/// not).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A stored evaluation.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// What was run.
    pub key: EvalKey,
    /// Its metrics (empty when it failed).
    pub metrics: BTreeMap<String, f64>,
    /// Why it could not run (a refused spec), if so.
    pub error: Option<String>,
    /// Wall seconds it took.
    pub wall_s: f64,
}

/// Where evaluations are stored.
pub fn record_path(work: &Path, key: &EvalKey) -> PathBuf {
    work.join("evals").join(format!("{}.json", key.hash()))
}

/// The stored evaluation of `key`, if any (one whose key differs, a hash
/// collision, is ignored).
pub fn load(work: &Path, key: &EvalKey) -> Option<Record> {
    let text = std::fs::read(record_path(work, key)).ok()?;
    serde_json::from_slice::<Record>(&text)
        .ok()
        .filter(|r| &r.key == key)
}

/// The scenario of one evaluation: `base` with the condition's rate, RTT,
/// loss and flow count, the candidate spec on every flow group running the
/// tuned algorithm, one repetition with `seed`.
pub fn scenario(base: &Scenario, algorithm: &str, key: &EvalKey) -> Scenario {
    let mut sc = base.clone();
    sc.name = format!("tune-{}", key.hash());
    sc.duration_ns = key.duration_ns;
    sc.repetitions = 1;
    sc.seed = key.seed;
    let c = &key.condition;
    for d in [&mut sc.link.up, &mut sc.link.down] {
        d.rate_bps = c.rate_bps;
        d.trace = None;
        if let Some(l) = c.loss {
            d.loss = if l > 0.0 {
                LossModel::Random(l)
            } else {
                LossModel::None
            };
        }
    }
    sc.link.up.delay_ns = c.rtt_ns / 2;
    sc.link.down.delay_ns = c.rtt_ns - c.rtt_ns / 2;
    sc.link.seed = key.seed;
    for f in sc.flows.iter_mut().filter(|f| runs(&f.cc, algorithm)) {
        f.cc = key.spec.clone();
        if let Some(n) = c.flows {
            f.count = n;
        }
    }
    sc
}

/// Whether a flow's spec runs `algorithm`.
pub fn runs(spec: &str, algorithm: &str) -> bool {
    spec.split(':').next().map(str::trim) == Some(algorithm)
}

/// Runs one evaluation and stores it. A spec the registry refuses is
/// stored as failed without a run.
pub fn evaluate(
    base: &Scenario,
    algorithm: &str,
    key: &EvalKey,
    run_cfg: &RunConfig,
    work: &Path,
    keep_run: bool,
) -> Result<Record, RunError> {
    let started = std::time::Instant::now();
    let hash = key.hash();
    let mut rec = Record {
        key: key.clone(),
        metrics: BTreeMap::new(),
        error: None,
        wall_s: 0.0,
    };
    if let Err(e) = cc_algorithms::parse(&key.spec) {
        rec.error = Some(e.to_string());
    } else {
        let sc = scenario(base, algorithm, key);
        let mut rc = run_cfg.clone();
        rc.out = work.join("runs").join(&hash);
        rc.quiet = true;
        let _ = std::fs::remove_dir_all(&rc.out);
        let s = crate::run::run(&sc, &rc)?;
        if s.status != "complete" {
            rec.error = Some(format!("run {}: {}", rc.out.display(), s.status));
        } else {
            rec.metrics = metrics(&s, algorithm, key, &rc.out);
        }
        if !keep_run && rec.error.is_none() {
            let _ = std::fs::remove_dir_all(&rc.out);
        }
    }
    rec.wall_s = started.elapsed().as_secs_f64();
    let path = record_path(work, key);
    std::fs::create_dir_all(path.parent().unwrap_or(work))?;
    crate::files::write_json_atomic(&path, &rec)?;
    Ok(rec)
}

/// The objective metrics of a finished run (module docs of
/// [`super::objective`]).
pub fn metrics(
    s: &RunSummary,
    algorithm: &str,
    key: &EvalKey,
    dir: &Path,
) -> BTreeMap<String, f64> {
    let capacity = key.condition.rate_bps;
    let tuned: Vec<_> = s.flows.iter().filter(|f| runs(&f.cc, algorithm)).collect();
    let goodput: f64 = tuned.iter().map(|f| f.goodput_bps).sum();
    // Losses come from the senders' qlog: absent (not 0) without it.
    let lost: Option<f64> = tuned.iter().map(|f| f.lost_packets).sum();
    let rtts: Vec<_> = tuned.iter().filter_map(|f| f.rtt_ms.as_ref()).collect();
    let mean_of = |v: Vec<f64>| {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: f64| {
        m.insert(k.to_string(), v);
    };
    put("utilization", s.bottleneck.utilization);
    put(
        "utilization_steady",
        s.bottleneck.utilization_steady.unwrap_or(f64::NAN),
    );
    put("goodput", goodput / capacity);
    put("goodput_mbps", goodput / 1e6);
    put("queue_delay", s.bottleneck.queue_delay_ms_mean);
    put(
        "p95_queue_delay",
        p95_sojourn_ms(dir, &s.bottleneck.direction).unwrap_or(f64::NAN),
    );
    put("base_rtt", key.condition.rtt_ns as f64 / 1e6);
    put("rtt", mean_of(rtts.iter().map(|r| r.mean).collect()));
    put("p95_rtt", mean_of(rtts.iter().map(|r| r.p95).collect()));
    put(
        "loss_rate",
        lost.map_or(f64::NAN, |lost| {
            let sent = tuned.iter().map(|f| f.bytes).sum::<f64>() / 1200.0 + lost;
            if sent > 0.0 {
                lost / sent
            } else {
                0.0
            }
        }),
    );
    put("drop_rate", s.bottleneck.loss_rate.unwrap_or(f64::NAN));
    put("jain", s.jain_fairness.unwrap_or(1.0));
    put("flows", s.flows.len() as f64);
    m.retain(|_, v| !v.is_nan());
    m
}

/// The 95th percentile of the queueing delay of packets leaving the
/// bottleneck in the data direction, from the per-packet log.
fn p95_sojourn_ms(dir: &Path, direction: &str) -> Option<f64> {
    let want = u8::from(direction != "up");
    let reader = crate::bottleneck::Reader::open(&dir.join("rep-1").join("bottleneck.bin")).ok()?;
    let mut v: Vec<u32> = reader
        .filter(|r| r.dir == want && r.kind == crate::bottleneck::Kind::Depart as u8)
        .map(|r| r.sojourn_ns)
        .collect();
    if v.is_empty() {
        return None;
    }
    let i = ((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len()) - 1;
    let (_, p, _) = v.select_nth_unstable(i);
    Some(*p as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hash_stably_and_differ() {
        let k = EvalKey {
            spec: "vegas:alpha=2,beta=4".into(),
            condition: Condition {
                rate_bps: 20e6,
                rtt_ns: 40_000_000,
                loss: None,
                flows: None,
            },
            seed: 1,
            duration_ns: 6_000_000_000,
            backend: "sim".into(),
            scenario: "x".into(),
        };
        assert_eq!(k.hash(), k.clone().hash());
        assert_eq!(k.hash().len(), 16);
        let mut k2 = k.clone();
        k2.seed = 2;
        assert_ne!(k.hash(), k2.hash());
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert!(runs("vegas:alpha=1", "vegas") && runs("vegas", "vegas"));
        assert!(!runs("vegas2", "vegas") && !runs("cubic", "vegas"));
    }
}
