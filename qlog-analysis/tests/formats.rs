//! Every flavour and container, bad input, the qvis export, and a fuzz run
//! over the readers.

use std::io::Write;
use std::path::Path;

use proptest::prelude::*;
use qlog_analysis::analysis::{Analyzer, LossSource};
use qlog_analysis::summary::summarize_file;
use qlog_analysis::synth::{write_quiche_trace, Truth};
use qlog_analysis::{read, read_file, ReadError};
use serde_json::Value;

fn synth(dir: &Path, name: &str, packets: u64, loss_every: u64) -> (std::path::PathBuf, Truth) {
    let p = dir.join(name);
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    let t = write_quiche_trace(&mut f, packets, loss_every).unwrap();
    f.flush().unwrap();
    (p, t)
}

#[test]
fn quiche_json_seq_matches_its_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let (p, truth) = synth(dir.path(), "s.sqlog", 3000, 50);
    let f = summarize_file(&p, 0.1).unwrap();
    assert_eq!(f.read.skipped, 0);
    let s = &f.connections[0];
    assert_eq!(s.format, "quiche-json-seq");
    assert_eq!(s.counts.packets_sent, truth.sent);
    assert_eq!(s.counts.packets_received, truth.received);
    assert_eq!(s.counts.packet_lost_events, truth.lost);
    assert_eq!(s.counts.metrics_updated, truth.metrics);
    assert_eq!(s.counts.cwnd_points, truth.cwnd_points);
    assert_eq!(s.counts.rtt_samples as usize, truth.rtt_samples.len());
    assert_eq!(s.loss.packets, truth.lost);
    assert_eq!(s.loss.source, LossSource::PacketLost);
    assert_eq!(s.app_bytes.acked, truth.app_acked);
    assert_eq!(s.bytes, truth.app_acked);
    assert_eq!(s.bytes_basis, "acked");
    assert_eq!(s.retransmitted_bytes, truth.retransmitted);
    assert!((s.duration_s - truth.end_ms / 1000.0).abs() < 1e-9);
    let mean = truth.rtt_samples.iter().sum::<f64>() / truth.rtt_samples.len() as f64;
    assert!((s.rtt_ms.as_ref().unwrap().mean - mean).abs() < 1e-9);
    // The ssthresh sentinel and the 333 ms placeholder never reach the figures.
    let mut a = Analyzer::new(0.1, true);
    read_file(&p, &mut a).unwrap();
    assert!(a.connections[0].series.ssthresh.is_empty());
    assert!(s.rtt_inflation.unwrap() < 1.5, "{:?}", s.rtt_inflation);
}

#[test]
fn gzip_and_zstd_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = synth(dir.path(), "s.sqlog", 500, 0);
    let raw = std::fs::read(&p).unwrap();
    let gz = dir.path().join("s.sqlog.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(&raw).unwrap();
    e.finish().unwrap();
    let zst = dir.path().join("s.sqlog.zst");
    std::fs::write(&zst, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
    let a = summarize_file(&p, 0.1).unwrap().connections;
    for q in [&gz, &zst] {
        let mut b = summarize_file(q, 0.1).unwrap().connections;
        for s in &mut b {
            s.file = a[0].file.clone();
        }
        assert_eq!(a, b, "{}", q.display());
    }
}

/// A compressed file whose writer was killed (the stream has no end) reads
/// as far as its complete blocks go, marked truncated; a plain file cut at
/// the same point of the content says the same.
#[test]
fn a_compressed_file_cut_short_reads_as_far_as_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (p, truth) = synth(dir.path(), "s.sqlog", 40_000, 0);
    let raw = std::fs::read(&p).unwrap();
    let full = summarize_file(&p, 0.1).unwrap();
    assert!(!full.read.truncated);
    // zstd as qlog files are written: a stream of blocks, cut partway.
    let zst = zstd::encode_all(&raw[..], 1).unwrap();
    assert!(zst.len() > 4 << 10, "{} bytes: too few blocks", zst.len());
    let cut = dir.path().join("cut.sqlog.zst");
    std::fs::write(&cut, &zst[..zst.len() / 2]).unwrap();
    let f = summarize_file(&cut, 0.1).unwrap();
    assert!(f.read.truncated, "{:?}", f.read);
    let why = f.read.first_problem.as_deref().unwrap_or_default();
    assert!(why.contains("cut.sqlog.zst"), "{why}");
    let s = &f.connections[0];
    assert!(s.counts.packets_sent > truth.sent / 4, "{:?}", s.counts);
    assert!(s.counts.packets_sent < truth.sent, "{:?}", s.counts);
    assert!(s.duration_s < full.connections[0].duration_s);
    // The same for gzip.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&raw).unwrap();
    let gz = e.finish().unwrap();
    let cut_gz = dir.path().join("cut.sqlog.gz");
    std::fs::write(&cut_gz, &gz[..gz.len() / 2]).unwrap();
    let g = summarize_file(&cut_gz, 0.1).unwrap();
    assert!(g.read.truncated, "{:?}", g.read);
    assert!(g.connections[0].counts.packets_sent > truth.sent / 4);
    // Damage that is not a missing end is still an error.
    let mut bad = zst.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 64] {
        *b ^= 0x5a;
    }
    let broken = dir.path().join("broken.sqlog.zst");
    std::fs::write(&broken, &bad).unwrap();
    assert!(summarize_file(&broken, 0.1).is_err());
}

/// The same events as qlog 0.3 in three containers.
fn qlog03(container: &str) -> String {
    let events = [
        r#"{"time":1000.0,"name":"recovery:metrics_updated","data":{"congestion_window":12000,"latest_rtt":30,"smoothed_rtt":30,"min_rtt":30}}"#,
        r#"{"time":1010.5,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":1},"raw":{"length":1200},"frames":[{"frame_type":"stream","stream_id":0,"offset":0,"length":1000}]}}"#,
        r#"{"time":1040.5,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","packet_number":1},"raw":{"length":50},"frames":[{"frame_type":"ack","acked_ranges":[[1,1]]}]}}"#,
        r#"{"time":1041.0,"name":"recovery:metrics_updated","data":{"congestion_window":13200,"latest_rtt":30.0}}"#,
        r#"{"time":1042.0,"name":"recovery:congestion_state_updated","data":{"new":"congestion_avoidance"}}"#,
    ];
    let header = r#""qlog_version":"0.3","title":"t""#;
    match container {
        "json" => format!(
            "{{{header},\"qlog_format\":\"JSON\",\"traces\":[{{\"vantage_point\":{{\"type\":\"client\"}},\"common_fields\":{{\"time_format\":\"absolute\"}},\"events\":[{}]}}]}}",
            events.join(",")
        ),
        "seq" => {
            let mut s = format!("\u{1e}{{{header},\"qlog_format\":\"JSON-SEQ\",\"trace\":{{\"vantage_point\":{{\"type\":\"client\"}},\"common_fields\":{{\"time_format\":\"absolute\"}}}}}}\n");
            for e in events {
                s += &format!("\u{1e}{e}\n");
            }
            s
        }
        _ => {
            let mut s = format!("{{{header},\"qlog_format\":\"NDJSON\",\"trace\":{{\"vantage_point\":{{\"type\":\"client\"}},\"common_fields\":{{\"time_format\":\"absolute\"}}}}}}\n");
            for e in events {
                s += &format!("{e}\n");
            }
            s
        }
    }
}

#[test]
fn qlog_03_in_every_container() {
    for c in ["json", "seq", "ndjson"] {
        let mut a = Analyzer::new(0.1, true);
        let st = read(qlog03(c).as_bytes(), c, &mut a).unwrap();
        assert_eq!((st.events, st.skipped), (5, 0), "{c}");
        let conn = &a.connections[0];
        assert_eq!(conn.info.vantage_point, "client", "{c}");
        // Absolute epoch-free times (1000 ms...) become relative to the first.
        assert_eq!(
            conn.series.cwnd,
            vec![(0.0, 12000.0), (0.041, 13200.0)],
            "{c}"
        );
        assert_eq!(conn.app.acked, 1000, "{c}");
        assert_eq!(
            conn.series.states,
            vec![(0.042, "congestion_avoidance".to_string())]
        );
    }
}

#[test]
fn bad_input_is_skipped_counted_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Not qlog at all.
    for (name, body) in [
        ("empty", ""),
        ("text", "hello"),
        ("array", "[1,2,3]"),
        ("obj", "{\"a\":1}"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        let e = summarize_file(&p, 0.1).unwrap_err();
        assert!(matches!(e, ReadError::NotQlog { .. }), "{name}: {e}");
        assert!(e.to_string().contains(name), "{e}");
    }
    // Missing file: an error naming it.
    let e = summarize_file(&dir.path().join("nope.qlog"), 0.1).unwrap_err();
    assert!(e.to_string().contains("nope.qlog"));
    // Corrupt records in the middle and a truncated last one.
    let (p, truth) = synth(dir.path(), "s.sqlog", 200, 0);
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.insert_str(text.find("\u{1e}{\"time\":0.2").unwrap(), "\u{1e}{\"time\": garbage\n\u{1e}{\"time\":1,\"name\":\"quic:packet_sent\",\"data\":{\"header\":7}}\n");
    text.truncate(text.len() - 20);
    std::fs::write(&p, &text).unwrap();
    let f = summarize_file(&p, 0.1).unwrap();
    assert_eq!(f.read.skipped, 3, "{:?}", f.read);
    assert!(f.read.truncated);
    assert!(f.connections[0].counts.packets_sent >= truth.sent - 1);
    // A document cut in half still yields what came before the cut.
    let doc = qlog03("json");
    let mut a = Analyzer::new(0.1, false);
    let st = read(&doc.as_bytes()[..doc.len() / 2], "half", &mut a).unwrap();
    assert!(st.truncated && st.events >= 1, "{st:?}");
}

#[test]
fn qvis_export_has_the_header_and_names_qvis_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (p, truth) = synth(dir.path(), "s.sqlog", 300, 25);
    let out = dir.path().join("s.qvis.qlog");
    let done = qlog_analysis::qvis::export(&p, &out).unwrap();
    assert!(!dir.path().join("s.qvis.qlog.part").exists());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["qlog_version"], "0.3");
    assert_eq!(v["qlog_format"], "JSON");
    let t = &v["traces"][0];
    assert_eq!(t["vantage_point"]["type"], "server");
    assert_eq!(t["common_fields"]["time_format"], "relative");
    let evs = t["events"].as_array().unwrap();
    assert_eq!(evs.len() as u64, done.events);
    let count = |n: &str| evs.iter().filter(|e| e["name"] == n).count() as u64;
    assert_eq!(count("transport:packet_sent"), truth.sent);
    assert_eq!(count("transport:packet_received"), truth.received);
    assert_eq!(count("recovery:packet_lost"), truth.lost);
    assert_eq!(count("recovery:metrics_updated"), truth.metrics);
    assert!(evs
        .iter()
        .all(|e| !e["name"].as_str().unwrap().starts_with("quic:")));
    // No u64::MAX sentinel; cwnd under the name qvis draws.
    let first = evs
        .iter()
        .find(|e| e["name"] == "recovery:metrics_updated")
        .unwrap();
    assert!(first["data"].get("ssthresh").is_none());
    assert_eq!(first["data"]["congestion_window"], 13500);
    // And it reads back as qlog 0.3 with the same content.
    let back = summarize_file(&out, 0.1).unwrap();
    let orig = summarize_file(&p, 0.1).unwrap();
    assert_eq!(back.connections[0].counts, orig.connections[0].counts);
}

#[test]
fn qvis_export_of_a_microsecond_draft_converts_rtts() {
    let Some(p) = test_support::qlog_sample("picoquic-trace-ref.qlog") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.qlog");
    qlog_analysis::qvis::export(&p, &out).unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let evs = v["traces"][0]["events"].as_array().unwrap();
    let m = evs
        .iter()
        .find(|e| {
            e["name"] == "recovery:metrics_updated" && e["data"].get("smoothed_rtt").is_some()
        })
        .unwrap();
    // 21117 us in the file → 21.117 ms.
    assert!(
        (m["data"]["smoothed_rtt"].as_f64().unwrap() - 21.117).abs() < 1e-9,
        "{m}"
    );
    assert!(evs.iter().any(|e| e["name"] == "recovery:packet_lost"));
}

fn fuzz_cases() -> u32 {
    // FUZZ_CASES=1000000 for a long run (see the README).
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), ..ProptestConfig::default() })]

    /// Random bytes: an error or a result, never a panic.
    #[test]
    fn fuzz_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut a = Analyzer::new(0.1, true);
        let _ = read(&bytes[..], "fuzz", &mut a);
    }

    /// Real files cut and corrupted anywhere: never a panic, and the
    /// skipped count covers what was damaged.
    #[test]
    fn fuzz_damaged_qlog(which in 0usize..3, cut in 0.0f64..1.0, flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..8)) {
        let mut text = match which {
            0 => qlog03("json").into_bytes(),
            1 => qlog03("seq").into_bytes(),
            _ => {
                let mut v = Vec::new();
                write_quiche_trace(&mut v, 60, 7).unwrap();
                v
            }
        };
        for (pos, b) in flips {
            let i = (pos * text.len() as f64) as usize % text.len();
            text[i] = b;
        }
        let n = (cut * text.len() as f64) as usize;
        let mut a = Analyzer::new(0.1, true);
        if let Ok(st) = read(&text[..n.max(1)], "fuzz", &mut a) {
            prop_assert!(st.events <= 1000);
            for c in &a.connections {
                let s = qlog_analysis::summary::Summary::of("fuzz", c);
                prop_assert!(s.duration_s.is_finite());
            }
        }
    }
}

/// A server's trace: 20 packets sent, the first 15 acknowledged, the last
/// 5 still in flight when it ends; with `counters`, the metrics updates
/// carry quiche's loss counters (all 0).
fn trace_ending_in_flight(counters: bool) -> String {
    let rs = 0x1e as char;
    let mut s = format!("{rs}{{\"file_schema\":\"urn:ietf:params:qlog:file:sequential\",\"serialization_format\":\"JSON-SEQ\",\"title\":\"t\",\"trace\":{{\"vantage_point\":{{\"type\":\"server\"}},\"common_fields\":{{\"reference_time\":{{\"clock_type\":\"monotonic\",\"epoch\":\"unknown\"}}}}}}}}\n");
    let lost = if counters {
        ",\"cf_lost_packets\":{\"total\":0,\"delta\":0}"
    } else {
        ""
    };
    for pn in 0..20u64 {
        let t = pn as f64 * 10.0;
        s += &format!("{rs}{{\"time\":{t},\"name\":\"quic:packet_sent\",\"data\":{{\"header\":{{\"packet_type\":\"1RTT\",\"packet_number\":{pn}}},\"raw\":{{\"length\":1200}},\"frames\":[{{\"frame_type\":\"stream\",\"stream_id\":0,\"offset\":{},\"length\":1150}}]}}}}\n", pn * 1150);
        s += &format!("{rs}{{\"time\":{t},\"name\":\"quic:recovery_metrics_updated\",\"data\":{{\"congestion_window\":13500{lost}}}}}\n");
    }
    s += &format!("{rs}{{\"time\":2000.0,\"name\":\"quic:packet_received\",\"data\":{{\"header\":{{\"packet_type\":\"1RTT\",\"packet_number\":0}},\"raw\":{{\"length\":50}},\"frames\":[{{\"frame_type\":\"ack\",\"acked_ranges\":[[0,14]],\"ect0\":15,\"ect1\":0,\"ce\":3}}]}}}}\n");
    s
}

#[test]
fn a_trace_that_counts_no_loss_has_none_though_packets_end_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    for (counters, source, lost) in [
        (true, LossSource::Counters, 0),
        (false, LossSource::Inferred, 5),
    ] {
        let p = dir.path().join(format!("c{counters}.sqlog"));
        std::fs::write(&p, trace_ending_in_flight(counters)).unwrap();
        let s = &summarize_file(&p, 0.1).unwrap().connections[0];
        assert_eq!(
            (s.loss.source, s.loss.packets),
            (source, lost),
            "counters {counters}"
        );
    }
}
