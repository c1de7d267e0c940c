//! Compressed results: both ends' qlog as `.sqlog.zst` and the per-packet
//! bottleneck log zstd-compressed by default, plain qlog with
//! `CCLAB_QLOG_COMPRESS=0`, and every reader taking both.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

const SCENARIO: &str = r#"
name = "compressed"
duration = "2s"
seed = 11
[link]
backend = "sim"
rate = "10mbit"
rtt = "30ms"
loss = "0.5%"
[[flows]]
cc = "cubic"
"#;

/// `cclab run` of [`SCENARIO`] into `out` with `compress` as
/// CCLAB_QLOG_COMPRESS (unset when `None`); returns summary.json.
fn cclab_run(dir: &Path, out: &Path, compress: Option<&str>) -> Value {
    let sc = dir.join("scenario.toml");
    std::fs::write(&sc, SCENARIO).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cclab"));
    cmd.arg("run")
        .arg(&sc)
        .args(["--qlog-level", "packets", "--quiet", "--out"])
        .arg(out)
        .env("CCLAB_BIN_DIR", "/nonexistent")
        .env_remove("CCLAB_QLOG_COMPRESS");
    if let Some(c) = compress {
        cmd.env("CCLAB_QLOG_COMPRESS", c);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// The qlog files of flow 0, client first.
fn qlogs(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(out.join("rep-1/flow-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| quic_app::qlog_file::is_qlog_name(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    v
}

#[test]
fn qlog_is_zstd_by_default_and_reads_like_the_plain_file() {
    let dir = tempfile::tempdir().unwrap();
    let (z, p) = (dir.path().join("z"), dir.path().join("p"));
    let sz = cclab_run(dir.path(), &z, None);
    let sp = cclab_run(dir.path(), &p, Some("0"));
    let (zq, pq) = (qlogs(&z), qlogs(&p));
    assert_eq!(zq.len(), 2, "{zq:?}");
    assert_eq!(pq.len(), 2, "{pq:?}");
    for (zf, pf) in zq.iter().zip(&pq) {
        assert!(zf.to_string_lossy().ends_with(".sqlog.zst"), "{zf:?}");
        assert!(pf.to_string_lossy().ends_with(".sqlog"), "{pf:?}");
        let zb = std::fs::read(zf).unwrap();
        let pb = std::fs::read(pf).unwrap();
        assert_eq!(zb[..4], ZSTD_MAGIC, "{zf:?}");
        assert_eq!(pb[0], 0x1e, "{pf:?} is not plain JSON-SEQ");
        // The simulation is deterministic: the same qlog, compressed.
        let unpacked = zstd::decode_all(&zb[..]).expect("a finished zstd frame");
        assert!(unpacked == pb, "{zf:?} does not decode to {pf:?}");
        assert!(
            zb.len() * 5 < pb.len(),
            "{} vs {} bytes",
            zb.len(),
            pb.len()
        );
        // And the reader sees the same.
        let mut a = qlog_analysis::summary::summarize_file(zf, 0.1).unwrap();
        let b = qlog_analysis::summary::summarize_file(pf, 0.1).unwrap();
        assert!(!a.read.truncated && a.read.skipped == 0, "{:?}", a.read);
        a.file = b.file.clone();
        for c in &mut a.connections {
            c.file = b.file.clone();
        }
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::to_value(&b).unwrap()
        );
    }
    // The run's own figures from the qlogs are the same too; only the
    // names differ.
    let flow = |s: &Value| {
        let mut f = s["repetitions"][0]["flows"][0].clone();
        f.as_object_mut().unwrap().remove("qlog");
        f
    };
    assert_eq!(flow(&sz), flow(&sp));
    assert!(flow(&sz)["rtt_ms"]["mean"].as_f64().is_some());
    let sender = sz["repetitions"][0]["flows"][0]["qlog"]["sender"]
        .as_str()
        .unwrap();
    assert!(sender.ends_with(".sqlog.zst"), "{sender}");
    // The per-packet bottleneck log is compressed either way, and reads.
    for out in [&z, &p] {
        let log = out.join("rep-1/bottleneck.bin");
        assert_eq!(std::fs::read(&log).unwrap()[..4], ZSTD_MAGIC);
        let n = harness::bottleneck::Reader::open(&log).unwrap().count();
        assert!(n > 1000, "{n} records");
    }
}

#[test]
fn a_bad_compress_setting_is_refused_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .args(["run", "--link", "sim", "--cc", "reno", "--duration", "1s"])
        .arg("--out")
        .arg(dir.path().join("r"))
        .env("CCLAB_QLOG_COMPRESS", "sometimes")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("CCLAB_QLOG_COMPRESS: `sometimes` is not one of"),
        "{err}"
    );
    assert!(!dir.path().join("r").exists());
}
