//! Bad input gives a clear error and exit status 2.

use quic_app::uring::IoMode;
use std::process::Command;

fn client(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quic-client"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_input_exits_2_and_names_the_problem() {
    let cases: &[(&[&str], &str)] = &[
        (&["not a url"], "invalid URL `not a url`"),
        (&["http://127.0.0.1:4433/bytes/1"], "scheme must be https"),
        (
            &["https://127.0.0.1:4433/upload", "--upload", "lots"],
            "--upload: invalid size `lots`",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--cc", "vegsa"],
            "unknown congestion-control algorithm `vegsa`",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--cc", "vegas:alpha=-1"],
            "expected a number from 0 to 1000",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--duration", "-3"],
            "--duration: `-3` is not a positive number",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--interval", "0"],
            "--interval: `0` is not a positive number",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--no-such-flag"],
            "unexpected argument",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--qlog-compress", "maybe"],
            "--qlog-compress: `maybe` is not one of true",
        ),
    ];
    for (args, expect) in cases {
        let (code, err) = client(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: stderr was {err}");
    }
}

#[test]
fn nothing_listening_is_a_failed_transfer_not_bad_input() {
    // A port nothing listens on: the transfer fails (1), quickly.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    drop(sock);
    let (code, err) = client(&[
        &format!("https://127.0.0.1:{port}/bytes/1"),
        "--connect-timeout",
        "1",
    ]);
    assert_eq!(code, 1, "{err}");
}

/// A qlog file's text; a compressed one must be a finished zstd frame.
fn qlog_text(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    if path.to_string_lossy().ends_with(".sqlog.zst") {
        assert_eq!(bytes[..4], [0x28, 0xb5, 0x2f, 0xfd], "{}", path.display());
        let plain = zstd::decode_all(&bytes[..])
            .unwrap_or_else(|e| panic!("{} is not a finished zstd frame: {e}", path.display()));
        String::from_utf8(plain).unwrap()
    } else {
        String::from_utf8(bytes).unwrap()
    }
}

fn has_connection_closed(path: &std::path::Path) -> bool {
    qlog_text(path)
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| serde_json::from_str::<serde_json::Value>(r).expect("qlog record parses"))
        .any(|r| r["name"] == "quic:connection_closed")
}

#[test]
fn ctrl_c_closes_the_connection_and_both_qlogs_are_complete() {
    signal_closes_the_connection_and_both_qlogs_are_complete("INT", IoMode::Auto);
}

/// The same on the epoll path, both ends.
#[test]
fn ctrl_c_on_the_epoll_path_closes_the_connection_and_both_qlogs_are_complete() {
    signal_closes_the_connection_and_both_qlogs_are_complete("INT", IoMode::Epoll);
}

/// SIGTERM is how cclab stops a client still running at its deadline.
#[test]
fn sigterm_closes_the_connection_and_both_qlogs_are_complete() {
    signal_closes_the_connection_and_both_qlogs_are_complete("TERM", IoMode::Auto);
}

fn signal_closes_the_connection_and_both_qlogs_are_complete(signal: &str, io: IoMode) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sig-{signal}-{io}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(quic_server::Server::bind(quic_server::ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            cc: cc_algorithms::parse("cubic").unwrap(),
            qlog_dir: Some(dir.clone()),
            qlog_level: quic_app::QlogLevel::Extra,
            qlog_events: Vec::new(),
            cert: None,
            max_connections: 10,
            idle_timeout: std::time::Duration::from_secs(5),
            verbose: false,
            mtu: None,
            transport: Default::default(),
            io,
        }))
        .unwrap();
    let addr = server.local_addr();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = rt.spawn(server.run(async {
        let _ = rx.await;
    }));

    let child = Command::new(env!("CARGO_BIN_EXE_quic-client"))
        .args([
            &format!("https://{addr}/bytes/100000000000"),
            "--qlog-dir",
            dir.to_str().unwrap(),
            "--json",
            "--io",
            &io.to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    // Interrupted is not complete: exit 1, with a report saying why.
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["error"], "interrupted");
    assert!(report["bytes"].as_u64().unwrap() > 0);

    // Give the server a moment to process the close, then stop it.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = stop.send(());
    rt.block_on(task).unwrap().unwrap();
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        // Compressed unless the environment asks for plain files.
        if std::env::var_os(quic_app::qlog_file::COMPRESS_ENV).is_none() {
            assert!(
                f.to_string_lossy().ends_with(".sqlog.zst"),
                "{}",
                f.display()
            );
        }
        assert!(has_connection_closed(f), "{} is not complete", f.display());
    }
}
