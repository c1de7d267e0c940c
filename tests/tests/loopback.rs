//! quic-server and quic-client together on loopback.

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_megabytes_with_report_and_qlog_on_both_ends() {
    let qlog = scratch_dir("loopback-qlog");
    let server = start_server("cubic", Some(&qlog)).await;
    let n = 50_000_000u64;
    let report = download(&format!("https://{}/bytes/{n}", server.addr), Some(&qlog)).await;
    server.stop().await;

    assert!(report.complete, "{report:?}");
    assert_eq!(report.bytes, n);
    assert_eq!(report.status, Some(200));
    // The JSON report carries the fields scripts read.
    let json = serde_json::to_value(&report).unwrap();
    for key in ["bytes", "duration_s", "goodput_bps", "intervals"] {
        assert!(json.get(key).is_some(), "{key} missing");
    }
    assert_eq!(json["bytes"], n);
    let interval_bytes: u64 = report.intervals.iter().map(|i| i.bytes).sum();
    assert!(interval_bytes <= n);
    eprintln!(
        "50 MB in {:.3} s = {:.1} Mbit/s (debug build), {} intervals",
        report.duration_s,
        report.goodput_bps / 1e6,
        report.intervals.len()
    );

    // One complete qlog per role, every record parses.
    let mut roles = Vec::new();
    for entry in std::fs::read_dir(&qlog).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if std::env::var_os(quic_app::qlog_file::COMPRESS_ENV).is_none() {
            assert!(name.ends_with(".sqlog.zst"), "{name}: not compressed");
        }
        let records = read_qlog(&path);
        assert!(
            records.len() > 100,
            "{name}: only {} records",
            records.len()
        );
        assert_eq!(
            records[0]["file_schema"], "urn:ietf:params:qlog:file:sequential",
            "{name}: no qlog header"
        );
        let closed = records
            .iter()
            .any(|r| r["name"] == "quic:connection_closed");
        assert!(closed, "{name}: no connection_closed: not complete");
        roles.push(name.split('-').next().unwrap().to_string());
    }
    roles.sort();
    assert_eq!(roles, ["client", "server"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_is_counted_by_the_server_and_unknown_paths_are_404() {
    let server = start_server("newreno", None).await;
    let mut cfg = client_config(&format!("https://{}/upload", server.addr));
    cfg.upload = Some(3_000_000);
    cfg.cc = cc_algorithms::parse("vegas").unwrap();
    let up = quic_client::run(cfg).await.unwrap();
    assert!(up.complete, "{up:?}");
    assert_eq!(up.bytes, 3_000_000);

    let missing = download(&format!("https://{}/nothing-here", server.addr), None).await;
    assert_eq!(missing.status, Some(404));
    assert!(!missing.complete);
    let bad_size = download(&format!("https://{}/bytes/ten", server.addr), None).await;
    assert_eq!(bad_size.status, Some(404));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_survives_a_thousand_garbage_datagrams() {
    let server = start_server("cubic", None).await;
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let rng = ring::rand::SystemRandom::new();
    let mut buf = [0u8; 1500];
    for i in 0..1000usize {
        let len = 1 + (i * 7919) % 1400;
        ring::rand::SecureRandom::fill(&rng, &mut buf[..len]).unwrap();
        // Some look like long-header Initials, to get past the first check.
        if i % 3 == 0 {
            buf[0] = 0xc0 | (buf[0] & 0x0f);
            buf[1..5].copy_from_slice(&1u32.to_be_bytes());
        }
        sock.send_to(&buf[..len], server.addr).await.unwrap();
    }
    let report = download(&format!("https://{}/bytes/1000000", server.addr), None).await;
    assert!(report.complete, "{report:?}");
    assert_eq!(report.bytes, 1_000_000);
    let stats = server.stop().await;
    eprintln!("server stats after garbage: {stats:?}");
    assert!(stats.ignored_datagrams > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_stops_a_long_download_and_counts_as_complete() {
    let server = start_server("cubic", None).await;
    let mut cfg = client_config(&format!("https://{}/bytes/100000000000", server.addr));
    cfg.duration = Some(std::time::Duration::from_millis(700));
    let r = quic_client::run(cfg).await.unwrap();
    assert!(r.complete, "{r:?}");
    assert!(r.bytes > 0 && r.bytes < 100_000_000_000);
    assert!((0.6..3.0).contains(&r.duration_s), "{}", r.duration_s);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_many_concurrent_connections() {
    let server = start_server("cubic", None).await;
    let url = format!("https://{}/bytes/2000000", server.addr);
    let clients: Vec<_> = (0..20)
        .map(|_| tokio::spawn(download_owned(url.clone())))
        .collect();
    for c in clients {
        let r = c.await.unwrap();
        assert!(r.complete, "{r:?}");
        assert_eq!(r.bytes, 2_000_000);
    }
    let stats = server.stop().await;
    assert_eq!(stats.accepted, 20);
}

async fn download_owned(url: String) -> quic_client::Report {
    download(&url, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limit_refuses_extra_clients() {
    let server = start_server_with_limit("cubic", None, 1).await;
    // The first connection holds the only slot with a long download.
    let mut first = client_config(&format!("https://{}/bytes/100000000000", server.addr));
    first.duration = Some(std::time::Duration::from_secs(2));
    let first = tokio::spawn(quic_client::run(first));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut second = client_config(&format!("https://{}/bytes/1000", server.addr));
    second.timeout = std::time::Duration::from_millis(800);
    let refused = quic_client::run(second).await.unwrap();
    assert!(!refused.complete);
    assert!(
        refused
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("no connection"),
        "{refused:?}"
    );
    assert!(first.await.unwrap().unwrap().complete);
    let stats = server.stop().await;
    assert!(stats.refused > 0, "{stats:?}");
}

/// Each socket path, io_uring and epoll, serves and downloads, with the
/// other at the far end (so neither only talks to itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_socket_path_transfers_with_the_other_at_the_far_end() {
    use quic_app::uring::IoMode;
    if let Err(why) = quic_app::uring::available() {
        test_support::skip(&format!("io_uring: {why}"));
        return;
    }
    for (server_io, client_io) in [
        (IoMode::Uring, IoMode::Epoll),
        (IoMode::Epoll, IoMode::Uring),
    ] {
        let server = start_server_with("newreno", None, 10, server_io).await;
        let n = 5_000_000u64;
        let mut cfg = client_config(&format!("https://{}/bytes/{n}", server.addr));
        cfg.io = client_io;
        let r = quic_client::run(cfg).await.unwrap();
        let stats = server.stop().await;
        assert!(r.complete, "server {server_io}, client {client_io}: {r:?}");
        assert_eq!(r.bytes, n, "server {server_io}, client {client_io}");
        let path = if client_io == IoMode::Uring {
            "io_uring"
        } else {
            "epoll"
        };
        assert_eq!(
            r.io,
            Some(path),
            "the report names the client's socket path"
        );
        assert_eq!(stats.accepted, 1);
    }
}
