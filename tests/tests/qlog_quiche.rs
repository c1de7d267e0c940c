//! qlog-analysis on quiche 0.30's own output: a real download through the
//! userspace emulator (20 Mbit/s, 40 ms RTT, 1% loss), both ends logging;
//! the summary is checked against an independent reading of the same files.

mod common;

use common::{read_qlog, scratch_dir, start_server};
use qlog_analysis::analysis::{Analyzer, LossSource};
use qlog_analysis::summary::summarize_file;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_of_quiche_output_matches_the_files() {
    let qlog = scratch_dir("qlog-quiche");
    let server = start_server("newreno", Some(&qlog)).await;
    let emu = common::emulator_in_front_of(
        server.addr,
        &[
            ("rate", "20mbit"),
            ("rtt", "40ms"),
            ("down.loss", "1%"),
            ("queue", "1bdp"),
            ("seed", "5"),
        ],
    );
    let n = 3_000_000;
    let mut cfg = common::client_config(&format!("https://{}/bytes/{n}", emu.listen_addrs()[0]));
    cfg.qlog_dir = Some(qlog.clone());
    cfg.timeout = std::time::Duration::from_secs(30);
    let report = quic_client::run(cfg).await.unwrap();
    assert!(report.complete);
    server.stop().await;
    let emu_report = emu.stop().unwrap();
    assert!(emu_report.down.dropped[0] > 0, "the link lost nothing");

    for entry in std::fs::read_dir(&qlog).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let records = read_qlog(&path);
        let events = &records[1..];
        let metrics: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["name"] == "quic:recovery_metrics_updated")
            .map(|e| &e["data"])
            .collect();
        let cwnd_points = metrics
            .iter()
            .filter(|d| d.get("congestion_window").is_some())
            .count() as u64;
        let latest: Vec<f64> = metrics
            .iter()
            .filter_map(|d| d["latest_rtt"].as_f64())
            .collect();
        let lost = events
            .iter()
            .filter(|e| e["name"] == "quic:packet_lost")
            .count() as u64;
        let f = summarize_file(&path, 0.1).unwrap();
        assert_eq!(f.read.skipped, 0, "{name}: {:?}", f.read);
        let s = &f.connections[0];
        assert_eq!(s.format, "quiche-json-seq");
        assert_eq!(s.counts.events as usize, events.len(), "{name}");
        assert_eq!(s.counts.metrics_updated as usize, metrics.len(), "{name}");
        assert_eq!(s.counts.cwnd_points, cwnd_points, "{name}");
        assert_eq!(s.counts.packet_lost_events, lost, "{name}");
        assert!(!latest.is_empty(), "{name}: no latest_rtt");
        let mean = latest.iter().sum::<f64>() / latest.len() as f64;
        let r = s.rtt_ms.as_ref().unwrap();
        assert!((r.mean - mean).abs() < 1e-6, "{name}: {} vs {mean}", r.mean);
        // The emulated path: no RTT below 40 ms.
        assert!(r.min >= 40.0, "{name}: min RTT {}", r.min);
        eprintln!(
            "{name}: {} events, {} metrics ({} cwnd), {} latest_rtt (mean {:.2} ms), {} packet_lost",
            events.len(),
            metrics.len(),
            cwnd_points,
            latest.len(),
            mean,
            lost
        );
        if name.starts_with("server") {
            // The sender: losses from packet_lost events, as many as logged,
            // and the cwnd series is the file's congestion_window values.
            assert_eq!(s.loss.source, LossSource::PacketLost);
            assert!(s.loss.packets > 0);
            assert_eq!(s.bytes_basis, "acked");
            let mut a = Analyzer::new(0.1, true);
            qlog_analysis::read_file(&path, &mut a).unwrap();
            let want: Vec<f64> = metrics
                .iter()
                .filter_map(|d| d["congestion_window"].as_f64())
                .collect();
            let got: Vec<f64> = a.connections[0].series.cwnd.iter().map(|p| p.1).collect();
            assert_eq!(got, want);
        } else {
            // The receiver: goodput agrees with the client's own report.
            assert_eq!(s.bytes_basis, "received");
            assert!(s.bytes >= n as u64, "{} bytes", s.bytes);
            let g = s.goodput.as_ref().unwrap().mean_bps;
            let rel = (g - report.goodput_bps).abs() / report.goodput_bps;
            assert!(
                rel < 0.1,
                "qlog goodput {g} vs client {}",
                report.goodput_bps
            );
        }
    }
}
