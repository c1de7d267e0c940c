//! The readers against files no one on this project wrote
//! (`shared/qlog-samples`), checked against an independent reading of the
//! same files with serde_json, and the expected figures stated.
//! `CCLAB_QLOG_SAMPLES` points elsewhere; without the samples these tests
//! skip, or fail under CI (test_support).

use std::path::{Path, PathBuf};

use qlog_analysis::analysis::Analyzer;
use qlog_analysis::summary::summarize_file;
use serde_json::Value;

/// A shared sample; `None` (after a skip, or a failure under CI) when the
/// samples are not there (test_support::qlog_sample).
fn sample(name: &str) -> Option<PathBuf> {
    test_support::qlog_sample(name)
}

/// An independent reading: (metrics events, cwnd points, latest_rtt
/// samples in ms, duration s, sent, received, lost).
fn independent(path: &Path) -> (usize, usize, Vec<f64>, f64, usize, usize, usize) {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let t = &v["traces"][0];
    let fields: Vec<String> = t["event_fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let idx = |n: &str| fields.iter().position(|f| f == n);
    let ti = idx("relative_time").or(idx("time")).unwrap();
    let ei = idx("event").or(idx("event_type")).unwrap();
    let di = idx("data").unwrap();
    let us = t["configuration"]["time_units"] == "us";
    let scale = if us { 0.001 } else { 1.0 };
    let num = |x: &Value| {
        x.as_f64()
            .or_else(|| x.as_str().and_then(|s| s.parse().ok()))
            .unwrap()
    };
    let evs = t["events"].as_array().unwrap();
    let of = |n: &str| evs.iter().filter(|e| e[ei] == n).count();
    let metrics: Vec<&Value> = evs.iter().filter(|e| e[ei] == "metrics_updated").collect();
    let cwnd = metrics
        .iter()
        .filter(|e| e[di].get("cwnd").is_some() || e[di].get("congestion_window").is_some())
        .count();
    let rtts = metrics
        .iter()
        .filter_map(|e| e[di].get("latest_rtt"))
        .map(|x| num(x) * scale)
        .collect();
    let dur = (num(&evs[evs.len() - 1][ti]) - num(&evs[0][ti])) * scale / 1000.0;
    (
        metrics.len(),
        cwnd,
        rtts,
        dur,
        of("packet_sent"),
        of("packet_received"),
        of("packet_lost"),
    )
}

fn check(path: &Path) -> qlog_analysis::summary::Summary {
    let f = summarize_file(path, 0.1).unwrap();
    assert_eq!(f.read.skipped, 0, "{:?}", f.read);
    assert_eq!(f.connections.len(), 1);
    let s = f.connections[0].clone();
    let (metrics, cwnd, rtts, dur, sent, recv, lost) = independent(path);
    assert_eq!(s.counts.metrics_updated as usize, metrics);
    assert_eq!(s.counts.cwnd_points as usize, cwnd);
    assert_eq!(s.counts.rtt_samples as usize, rtts.len());
    assert_eq!(s.counts.packets_sent as usize, sent);
    assert_eq!(s.counts.packets_received as usize, recv);
    assert_eq!(s.counts.packet_lost_events as usize, lost);
    assert!(
        (s.duration_s - dur).abs() < 1e-9,
        "{} vs {dur}",
        s.duration_s
    );
    let r = s.rtt_ms.as_ref().unwrap();
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let min = rtts.iter().cloned().fold(f64::MAX, f64::min);
    assert!((r.mean - mean).abs() < 1e-9, "{} vs {mean}", r.mean);
    assert!(r.min <= min + 1e-9);
    // p95 by nearest rank, within the histogram's 1%.
    let mut sorted = rtts.clone();
    sorted.sort_by(f64::total_cmp);
    let rank = ((0.95 * sorted.len() as f64).ceil() as usize).max(1) - 1;
    assert!(
        (r.p95 - sorted[rank]).abs() <= sorted[rank] * 0.01 + 1e-9,
        "{} vs {}",
        r.p95,
        sorted[rank]
    );
    s
}

#[test]
fn picoquic_draft00_microseconds() {
    let Some(p) = sample("picoquic-trace-ref.qlog") else {
        return;
    };
    let s = check(&p);
    // Stated figures: 24 metrics updates, 2 with cwnd, 8 latest_rtt samples
    // (20.930..23.046 ms, mean 21.7106 ms), 20 sent, 15 received, 2 lost.
    assert_eq!(s.format, "draft-00-json");
    assert_eq!(s.vantage_point, "server");
    assert_eq!(
        (
            s.counts.metrics_updated,
            s.counts.cwnd_points,
            s.counts.rtt_samples
        ),
        (24, 2, 8)
    );
    assert!((s.rtt_ms.as_ref().unwrap().mean - 21.710625).abs() < 1e-9);
    assert_eq!(s.loss.packets, 2);
    assert_eq!(
        s.loss.source,
        qlog_analysis::analysis::LossSource::PacketLost
    );
    // The cwnd series holds exactly the file's values.
    let mut a = Analyzer::new(0.1, true);
    qlog_analysis::read_file(&p, &mut a).unwrap();
    let cw: Vec<f64> = a.connections[0].series.cwnd.iter().map(|p| p.1).collect();
    assert_eq!(cw, vec![15360.0, 7680.0]);
    // Pacing stays in bit/s (the draft's unit): 7268505 in the file.
    assert_eq!(a.connections[0].series.pacing_rate_bps[0].1, 7268505.0);
}

#[test]
fn qvis_draft01_strings_and_milliseconds() {
    let Some(p) = sample("qvis-draft01-parallel.qlog") else {
        return;
    };
    let s = check(&p);
    // Stated figures: 45 metrics updates, all with cwnd; 19 latest_rtt
    // samples, 169..189 ms, mean 171.05 ms; 110 sent, 403 received.
    assert_eq!(s.format, "draft-01-json");
    assert_eq!(s.vantage_point, "client");
    assert_eq!(
        (
            s.counts.metrics_updated,
            s.counts.cwnd_points,
            s.counts.rtt_samples
        ),
        (45, 45, 19)
    );
    assert!((s.duration_s - 2.085).abs() < 1e-9);
    // Time-weighted mean cwnd, computed independently: 14698.78 bytes.
    assert!(
        (s.cwnd.as_ref().unwrap().mean - 14698.779).abs() < 0.01,
        "{:?}",
        s.cwnd
    );
    assert_eq!(s.bytes_basis, "received");
}
