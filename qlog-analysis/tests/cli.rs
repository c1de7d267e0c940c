//! The command line: output shapes, exit statuses and messages.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qlog-analysis"))
}

fn synth(dir: &std::path::Path, name: &str, loss_every: u64) -> std::path::PathBuf {
    let p = dir.join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    qlog_analysis::synth::write_quiche_trace(&mut f, 400, loss_every).unwrap();
    p
}

#[test]
fn summary_json_fairness_and_utilization() {
    let dir = tempfile::tempdir().unwrap();
    let a = synth(dir.path(), "a.sqlog", 0);
    let b = synth(dir.path(), "b.sqlog", 20);
    let out = bin()
        .args(["summary", "--json", "--capacity", "100mbit"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    let g: Vec<f64> = files
        .iter()
        .map(|f| f["connections"][0]["goodput"]["mean_bps"].as_f64().unwrap())
        .collect();
    let jain = (g[0] + g[1]).powi(2) / (2.0 * (g[0] * g[0] + g[1] * g[1]));
    assert!((v["aggregate"]["jain_fairness"].as_f64().unwrap() - jain).abs() < 1e-12);
    assert!(
        (v["aggregate"]["utilization"].as_f64().unwrap() - (g[0] + g[1]) / 100e6).abs() < 1e-12
    );
    for f in files {
        let c = &f["connections"][0];
        for k in [
            "duration_s",
            "bytes",
            "rtt_ms",
            "rtt_inflation",
            "loss",
            "retransmitted_bytes",
            "cwnd",
            "time_in_state_s",
            "counts",
            "conditions",
            "markers",
            "markers_dropped",
        ] {
            assert!(c.get(k).is_some(), "missing {k}");
        }
    }
}

#[test]
fn series_csv_plot_and_qvis() {
    let dir = tempfile::tempdir().unwrap();
    let a = synth(dir.path(), "a.sqlog", 10);
    let out = bin()
        .args(["series", "--csv", "--bin", "0.005"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(csv.starts_with("trace,series,t_s,value,label\n"));
    let rows = |s: &str| {
        csv.lines()
            .filter(|l| l.split(',').nth(1) == Some(s))
            .count()
    };
    assert!(rows("cwnd") > 1 && rows("latest_rtt_ms") > 1 && rows("goodput_bps") > 1);
    assert_eq!(rows("loss"), 40);
    let plots = dir.path().join("plots");
    let out = bin()
        .args(["plot", "-o"])
        .arg(&plots)
        .arg(&a)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "cwnd.png",
        "cwnd.svg",
        "rtt.png",
        "rtt.svg",
        "throughput.png",
        "throughput.svg",
    ] {
        let p = plots.join(f);
        assert!(
            std::fs::metadata(&p)
                .map(|m| m.len() > 1000)
                .unwrap_or(false),
            "{f}"
        );
    }
    assert!(std::fs::read(plots.join("cwnd.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
    assert!(std::fs::read_to_string(plots.join("cwnd.svg"))
        .unwrap()
        .contains("<svg"));
    let q = dir.path().join("a.qvis.qlog");
    let out = bin()
        .args(["qvis"])
        .arg(&a)
        .arg("-o")
        .arg(&q)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&q).unwrap()).unwrap();
    assert_eq!(v["qlog_version"], "0.3");
}

#[test]
fn errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["summary", "/nonexistent/x.qlog"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.qlog"));
    let junk = dir.path().join("junk.qlog");
    std::fs::write(&junk, "not json at all").unwrap();
    let out = bin().arg("summary").arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a qlog file"));
    let a = synth(dir.path(), "a.sqlog", 0);
    for bad in [
        &["summary", "--capacity", "fast"][..],
        &["summary", "--bin", "0"][..],
    ] {
        let out = bin().args(bad).arg(&a).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

/// quic-server and quic-client write `.sqlog.zst`; `qvis` reads it and
/// writes plain JSON that qvis loads (not compressed), with the same
/// events as from the plain file.
#[test]
fn qvis_of_a_zstd_qlog_writes_plain_json() {
    let dir = tempfile::tempdir().unwrap();
    let plain = synth(dir.path(), "c.sqlog", 10);
    let zst = dir.path().join("c.sqlog.zst");
    std::fs::write(
        &zst,
        zstd::encode_all(&std::fs::read(&plain).unwrap()[..], 1).unwrap(),
    )
    .unwrap();
    let mut outs = Vec::new();
    for (input, name) in [(&plain, "plain.qlog"), (&zst, "zst.qlog")] {
        let out = dir.path().join(name);
        let o = bin()
            .args(["qvis", "--json"])
            .arg(input)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(bytes[0], b'{', "{name} is not plain JSON");
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let done: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        outs.push((v["traces"][0]["events"].clone(), done["events"].clone()));
    }
    assert!(outs[0].0.as_array().is_some_and(|e| e.len() > 100));
    assert_eq!(outs[0], outs[1]);
}
