//! `summary.json` and docs/metrics.md cannot drift apart: every field a run
//! writes (a simulated run with sized flows beside a timed one, two links,
//! a scheduled change and the qlog's congestion states, so that the
//! optional fields appear) is named in the metrics page (or, for a slow
//! start's fields, in docs/slow-start.md), and the file reads back into
//! the types it was written from.

mod common;
use std::collections::BTreeSet;
use std::path::Path;

use harness::run::{run, RunSummary, SUMMARY_SCHEMA};
use harness::scenario::Scenario;
use serde_json::Value;

const SCENARIO: &str = r#"
name = "every-field"
duration = "4s"
repetitions = 2
[link]
backend = "sim"
rate = "20mbit"
rtt = "40ms"
queue = "1bdp"
[[link.changes]]
at = "2s"
rate = "10mbit"
[[links]]
name = "a"
[[links]]
name = "b"
rate = "30mbit"
[[flows]]
cc = "newreno"
path = ["a", "b"]
[[flows]]
cc = "cubic"
size = "200kb"
path = ["a"]
"#;

/// Keys whose children are names, not fields (algorithms' metrics,
/// links, drop reasons, ...).
const MAPS: &[&str] = &[
    "ci95",
    "drops_by_reason",
    "marks_by_reason",
    "metrics_last",
    "qlog",
    "tcp_records",
    "links",
    "exit_reasons",
];

fn keys(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                out.insert(k.clone());
                if MAPS.contains(&k.as_str()) {
                    // The names are not fields, but their values may
                    // hold fields (a link's figures).
                    if let Value::Object(m) = x {
                        m.values().for_each(|y| keys(y, out));
                    }
                } else {
                    keys(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

#[test]
fn every_summary_field_is_documented_and_reads_back_typed() {
    let sc = Scenario::parse(SCENARIO, "test", Path::new(".")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let cfg = common::sim_config(&out, quic_app::QlogLevel::Base);
    run(&sc, &cfg).unwrap();
    let text = std::fs::read(out.join("summary.json")).unwrap();
    let v: Value = serde_json::from_slice(&text).unwrap();
    let typed = RunSummary::load(&out).unwrap();
    assert_eq!(typed.schema, SUMMARY_SCHEMA);
    // Typed and back gives the same JSON: no field is lost on reading.
    assert_eq!(serde_json::to_value(&typed).unwrap(), v);

    let mut all = BTreeSet::new();
    keys(&v, &mut all);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs = std::fs::read_to_string(root.join("docs/metrics.md")).unwrap()
        + &std::fs::read_to_string(root.join("docs/slow-start.md")).unwrap();
    let named = |k: &str| {
        ["`", "."].iter().any(|a| {
            ["`", ".", ",", ")", "["]
                .iter()
                .any(|b| docs.contains(&format!("{a}{k}{b}")))
        })
    };
    let missing: Vec<&String> = all.iter().filter(|k| !named(k)).collect();
    assert!(
        missing.is_empty(),
        "summary.json fields docs/metrics.md does not name: {missing:?}"
    );
    // The optional parts this scenario is for did appear.
    for k in [
        "fct",
        "links",
        "recoveries",
        "slow_start",
        "jain_fairness",
        "flows",
    ] {
        assert!(all.contains(k), "{k} missing from the run's summary");
    }
}
