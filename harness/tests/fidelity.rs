//! `cclab run` end to end on the userspace emulator with the real
//! quic-server and quic-client: the fidelity checks of the harness, the
//! report, bad input and Ctrl-C.

mod common;

use serde_json::Value;

use common::{cclab, cclab_run as run};

#[test]
fn one_cubic_flow_fills_the_default_link_and_the_logs_agree() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cubic");
    let s = run(&["--cc", "cubic", "--duration", "15s"], &out);
    assert_eq!(s["status"], "complete");
    assert_eq!(s["link"]["backend"], "emu");
    let util = s["bottleneck"]["utilization"].as_f64().unwrap();
    eprintln!("CUBIC utilization {:.1}%", util * 100.0);
    assert!(util >= 0.90, "utilization {util}");
    // What crossed the bottleneck (UDP payload) against what the client's
    // qlog says it received on the wire: the same bytes, seen twice.
    let rep = &s["repetitions"][0];
    let link_bytes = rep["bottleneck"]["bytes"].as_f64().unwrap();
    let qlog_bytes: f64 = rep["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["wire_bytes_received"].as_f64().unwrap())
        .sum();
    let diff = (link_bytes - qlog_bytes).abs() / link_bytes;
    eprintln!(
        "bottleneck {link_bytes} B, client qlog {qlog_bytes} B: {:.3}% apart",
        diff * 100.0
    );
    assert!(diff < 0.02, "bottleneck {link_bytes} vs qlog {qlog_bytes}");
    // And the application goodput: receiver's qlog against the client's report.
    let f = &rep["flows"][0];
    let (g, q) = (
        f["goodput_bps"].as_f64().unwrap(),
        f["qlog_goodput_bps"].as_f64().unwrap(),
    );
    assert!((g - q).abs() / g < 0.05, "client {g} vs qlog {q}");
    // The result directory is complete.
    for p in [
        "scenario.toml",
        "metadata.json",
        "status.json",
        "summary.json",
        "rep-1/bottleneck.bin",
        "rep-1/bottleneck-samples.jsonl",
        "rep-1/flow-0/client.json",
    ] {
        assert!(out.join(p).exists(), "{p}");
    }
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("metadata.json")).unwrap()).unwrap();
    for k in [
        "cclab_version",
        "git_revision",
        "kernel",
        "backend",
        "started_at",
        "quiche",
    ] {
        assert!(meta.get(k).is_some(), "metadata lacks {k}");
    }
    // A self-contained report.
    let html = dir.path().join("r.html");
    let o = cclab()
        .args(["report"])
        .arg(&out)
        .arg("--out")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.matches("<svg").count() >= 5);
    assert!(!text.contains("<script src") && !text.contains("<link rel=\"stylesheet\" href"));
    assert!(text.contains("cubic"));
}

/// Reno, quiche's built-in: two flows on the default link for 30 s. (Two
/// quiche CUBIC flows do not share this link fairly within 30 s: one holds
/// a 150-200 kB window while the other's drifts down; see the README.)
#[test]
fn two_flows_of_one_algorithm_share_fairly() {
    let dir = tempfile::tempdir().unwrap();
    let s = run(
        &["--cc", "reno", "--flows", "2", "--duration", "30s"],
        &dir.path().join("two"),
    );
    let j = s["jain_fairness"].as_f64().unwrap();
    let g: Vec<f64> = s["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["goodput_bps"].as_f64().unwrap())
        .collect();
    eprintln!("two Reno flows: {g:?} bit/s, Jain {j:.4}");
    assert!(j > 0.9, "Jain's index {j}");
}

#[test]
fn bad_scenarios_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.toml");
    std::fs::write(
        &f,
        "duration = \"5s\"\n[[flows]]\ncc = \"cubic\"\ndirection = \"sideways\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = cclab()
        .arg("run")
        .arg(&f)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.toml")
            && err.contains("flows[0].direction")
            && err.contains("download or upload"),
        "{err}"
    );
    assert!(!out.exists() && !out.with_extension("partial").exists());
    let o = cclab()
        .args(["run", "--cc", "nosuchcc", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuchcc"));
}

#[test]
fn ctrl_c_marks_the_run_interrupted_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("int");
    let child = cclab()
        .args([
            "run",
            "--cc",
            "cubic",
            "--duration",
            "60s",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .spawn()
        .unwrap();
    let o = common::interrupt_once_running(child, &out, |_| {});
    assert_eq!(o.status.code(), Some(130));
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "interrupted");
    // No quic-server or quic-client of this run is left.
    let ps = std::process::Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    let ours = out.with_extension("partial").display().to_string();
    assert!(
        !ps.lines()
            .any(|l| l.contains(&ours) || l.contains(&out.display().to_string())),
        "processes left:\n{ps}"
    );
}

#[test]
fn a_sweep_shards_resumes_merges_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.toml");
    std::fs::write(
        &base,
        "name = \"s\"\nduration = \"2s\"\n[[flows]]\ncc = \"reno\"\n",
    )
    .unwrap();
    let sweep = dir.path().join("sweep.toml");
    std::fs::write(&sweep, "scenario = \"base.toml\"\nrandomize = true\n[grid]\n\"flows.0.cc\" = [\"reno\", \"newreno\"]\n").unwrap();
    for k in 0..2 {
        let o = cclab()
            .arg("sweep")
            .arg(&sweep)
            .args([
                "--shard",
                &format!("{k}/2"),
                "--quiet",
                "--no-packet-log",
                "--json",
                "--out",
            ])
            .arg(dir.path().join(format!("shard-{k}")))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            (r["points"].as_u64(), r["completed"].as_u64()),
            (Some(1), Some(1))
        );
    }
    // Running a shard again skips what is complete.
    let o = cclab()
        .arg("sweep")
        .arg(&sweep)
        .args(["--shard", "0/2", "--quiet", "--json", "--out"])
        .arg(dir.path().join("shard-0"))
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (r["skipped"].as_u64(), r["completed"].as_u64()),
        (Some(1), Some(0))
    );
    let all = dir.path().join("all");
    let o = cclab()
        .arg("merge")
        .arg(dir.path().join("shard-0"))
        .arg(dir.path().join("shard-1"))
        .arg("--out")
        .arg(&all)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let idx: Value =
        serde_json::from_str(&std::fs::read_to_string(all.join("sweep.json")).unwrap()).unwrap();
    let pts = idx["points"].as_array().unwrap();
    assert_eq!(pts.len(), 2);
    assert!(pts.iter().all(|p| p["status"] == "complete"), "{idx}");
    let md = dir.path().join("r.md");
    let o = cclab()
        .arg("report")
        .arg(&all)
        .arg("--out")
        .arg(&md)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.contains("| reno |") && text.contains("| newreno |"),
        "{text}"
    );
}

#[test]
fn smcc_offline_tuning_writes_a_table_the_controller_uses() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("smcc.toml");
    let o = cclab()
        .args([
            "tune",
            "smcc",
            "--rate",
            "20mbit",
            "--rtt",
            "40ms",
            "--swarm",
            "2",
            "--iterations",
            "1",
            "--duration",
            "2s",
            "--quiet",
            "--out",
        ])
        .arg(&table)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = cc_algorithms::smcc::SmccTable::load(&table).unwrap();
    assert_eq!(t.entry.len(), 1);
    let e = &t.entry[0];
    assert_eq!((e.rtt_ms, e.rate_bps), (40.0, 20e6));
    assert!(e.alpha >= 1.0 && e.beta > e.alpha && e.fitness.is_finite());
    // Every evaluation (two particles, then the best and the defaults on
    // three validation seeds) is stored, with the result and its plot.
    let evals = std::fs::read_dir(dir.path().join("smcc.runs/evals"))
        .unwrap()
        .count();
    assert!((2..=8).contains(&evals), "{evals} evaluations stored");
    assert!(dir.path().join("smcc.runs/result.json").exists());
    // A flow with the table picks its only entry and runs with its values.
    let out = dir.path().join("run");
    let spec = format!("smcc:table={}", table.display());
    let s = run(&["--cc", &spec, "--duration", "4s"], &out);
    let rel = s["repetitions"][0]["flows"][0]["qlog"]["sender"]
        .as_str()
        .unwrap()
        .to_string();
    let mut a = qlog_analysis::analysis::Analyzer::new(0.1, true);
    qlog_analysis::read_file(&out.join(rel), &mut a).unwrap();
    let extra = &a.connections[0].series.extra;
    let last = |k: &str| extra.get(k).and_then(|v| v.last()).map(|p| p.1);
    assert_eq!(
        last("smcc_table_entry"),
        Some(0.0),
        "{:?}",
        extra.keys().collect::<Vec<_>>()
    );
    assert!((last("smcc_alpha").unwrap() - e.alpha).abs() < 1e-9);
    assert!((last("smcc_beta").unwrap() - e.beta).abs() < 1e-9);
    // A tune without parameters to search is refused as bad input.
    let o = cclab()
        .args(["tune", "vegas", "--out"])
        .arg(dir.path().join("x.toml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
