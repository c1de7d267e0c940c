//! Scheduled link changes end to end: a QUIC flow on sim and on the
//! emulator meets a rate drop and recovery written in the scenario, and
//! the kernel backend refuses them by name.

mod common;

use std::path::Path;

use harness::scenario::Scenario;
use serde_json::Value;

/// The down direction's delivered rate (bit/s) and mean utilization over
/// the samples in `[a, b)` s of `rep`'s bottleneck samples.
fn phase(rep: &Path, a: f64, b: f64) -> (f64, f64) {
    let rows: Vec<Value> = std::fs::read_to_string(rep.join("bottleneck-samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["dir"] == "down")
        .filter(|r| (a..b).contains(&r["t_s"].as_f64().unwrap()))
        .collect();
    assert!(rows.len() > 5, "{} samples in [{a}, {b})", rows.len());
    let bytes: f64 = rows.iter().map(|r| r["sent_bytes"].as_f64().unwrap()).sum();
    let secs: f64 = rows.iter().map(|r| r["interval_s"].as_f64().unwrap()).sum();
    let util = rows
        .iter()
        .map(|r| r["utilization"].as_f64().unwrap())
        .sum::<f64>()
        / rows.len() as f64;
    (bytes * 8.0 / secs, util)
}

fn rate_drop(backend: &str, phase_s: u64) -> String {
    format!(
        "name = \"rate-drop\"\nduration = \"{}s\"\n[link]\nbackend = \"{backend}\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\n[[link.changes]]\nat = \"{phase_s}s\"\nrate = \"5mbit\"\n[[link.changes]]\nat = \"{}s\"\nrate = \"20mbit\"\n[[flows]]\ncc = \"cubic\"\n",
        3 * phase_s,
        2 * phase_s
    )
}

/// Each phase's delivered rate is the phase's link rate (a CUBIC flow
/// keeps a 1-BDP queue busy at either rate), measured over each phase
/// after its first second; the samples' utilization divides by the rate
/// in force, so it is near 1 in all three.
fn check_phases(rep: &Path, phase_s: f64, tolerance: f64) {
    for (k, want) in [(0.0, 20e6), (1.0, 5e6), (2.0, 20e6)] {
        let (a, b) = (k * phase_s + 1.0, (k + 1.0) * phase_s);
        let (rate, util) = phase(rep, a, b);
        eprintln!(
            "[{a}, {b}) s: {:.3} Mbit/s, utilization {util:.3}",
            rate / 1e6
        );
        assert!(
            (rate - want).abs() <= tolerance * want,
            "[{a}, {b}) s: {rate} bit/s, the link gave {want}"
        );
        // (A sample counts a packet when it starts crossing: one packet
        // over an interval's capacity at most, 0.1% of 100 ms at 5 Mbit/s.)
        assert!(
            util <= 1.001 && util >= 1.0 - tolerance,
            "[{a}, {b}) s: utilization {util}"
        );
    }
}

#[test]
fn a_rate_drop_and_recovery_on_sim() {
    let dir = tempfile::tempdir().unwrap();
    let sc = Scenario::parse(&rate_drop("sim", 8), "test", Path::new(".")).unwrap();
    let cfg = common::sim_config(dir.path(), quic_app::QlogLevel::Metrics);
    harness::run::run(&sc, &cfg).unwrap();
    // Virtual time: the link's own rate to 0.5%.
    check_phases(&dir.path().join("rep-1"), 8.0, 0.005);
    // The resolved scenario keeps the schedule.
    let resolved = std::fs::read_to_string(dir.path().join("scenario.toml")).unwrap();
    assert!(resolved.contains("rate = \"5mbit\""), "{resolved}");
}

#[test]
fn a_rate_drop_and_recovery_on_the_emulator() {
    // Real time: the emulator's link follows the same schedule; what a
    // busy host can change is whether the flow keeps it busy, so the
    // bound is wider than sim's.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, rate_drop("emu", 4)).unwrap();
    let out = dir.path().join("r");
    common::cclab_run(&[path.to_str().unwrap()], &out);
    check_phases(&out.join("rep-1"), 4.0, 0.08);
}

#[test]
fn the_kernel_backend_takes_rate_changes_and_pauses_and_refuses_aggregation_by_name() {
    let caps = harness::netem::Caps {
        netem: true,
        tbf: true,
        ..Default::default()
    };
    // Rate, delay, loss, queue, pauses and outages run on netem
    // (harness/src/netem/changes.rs; netem_kernel.rs runs them).
    let sc = Scenario::parse(&rate_drop("netem", 4), "test", Path::new(".")).unwrap();
    harness::netem::check_link(&sc.link, &caps, true).unwrap();
    let pause = rate_drop("netem", 4).replace("rate = \"5mbit\"", "pause = \"100ms\"");
    let sc = Scenario::parse(&pause, "test", Path::new(".")).unwrap();
    harness::netem::check_link(&sc.link, &caps, true).unwrap();
    let agg = rate_drop("netem", 4).replace("rate = \"5mbit\"", "aggregate = \"period=4ms\"");
    let sc = Scenario::parse(&agg, "test", Path::new(".")).unwrap();
    let e = harness::netem::check_link(&sc.link, &caps, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("link.up.changes")
            && e.contains("`aggregate`")
            && e.contains("--link sim")
            && e.contains("--link emu"),
        "{e}"
    );
}
