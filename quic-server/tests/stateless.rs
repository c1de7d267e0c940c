//! The server over real sockets: Version Negotiation and (with Retry on)
//! Retry go out on the wire, and no run, however it ends, leaves files in
//! the temporary directory.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use quic_server::{Server, ServerConfig};

fn config() -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        cc: cc_algorithms::parse("cubic").unwrap(),
        qlog_dir: None,
        qlog_level: quic_app::QlogLevel::Off,
        qlog_events: Vec::new(),
        cert: None,
        max_connections: 8,
        idle_timeout: Duration::from_secs(5),
        verbose: false,
        mtu: None,
        transport: Default::default(),
        io: Default::default(),
    }
}

fn unknown_version_packet(len: usize) -> Vec<u8> {
    let mut p = vec![0xc3, 0x1a, 0x2a, 0x3a, 0x4a, 8];
    p.extend_from_slice(&[0x11; 8]);
    p.push(4);
    p.extend_from_slice(&[0x22; 4]);
    p.resize(len, 0);
    p
}

#[test]
fn version_negotiation_goes_out_on_the_wire() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::bind(config())).unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let probe = std::thread::spawn(move || {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 2048];
        // Too short to start a connection: no answer.
        sock.send_to(&unknown_version_packet(1199), addr).unwrap();
        let short = sock.recv_from(&mut buf).ok().map(|(n, _)| n);
        sock.send_to(&unknown_version_packet(1200), addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (n, from) = sock
            .recv_from(&mut buf)
            .expect("a Version Negotiation packet");
        let _ = stop.send(());
        (short, buf[..n].to_vec(), from)
    });
    let stats = rt
        .block_on(server.run(async {
            let _ = stopped.await;
        }))
        .unwrap();
    let (short, vn, from) = probe.join().unwrap();
    assert_eq!(short, None, "a 1199-byte datagram was answered");
    assert_eq!(from, addr);
    assert_eq!(vn[0] & 0x80, 0x80);
    assert_eq!(&vn[1..5], &[0, 0, 0, 0]);
    // DCID = our SCID, SCID = our DCID, then v1 among the versions.
    assert_eq!(&vn[5..10], &[4, 0x22, 0x22, 0x22, 0x22]);
    assert_eq!(vn[10], 8);
    assert_eq!(&vn[11..19], &[0x11; 8]);
    assert!(vn[19..].chunks(4).any(|v| v == [0, 0, 0, 1]), "{vn:x?}");
    assert_eq!(stats.version_negotiations, 1);
    assert_eq!(stats.accepted, 0);
}

#[test]
fn retry_goes_out_on_the_wire_and_makes_no_connection() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut server = rt.block_on(Server::bind(config())).unwrap();
    server.set_retry(true);
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let probe = std::thread::spawn(move || {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // A quiche client's first Initial: no token.
        let mut config = quic_app::base_config(quiche::h3::APPLICATION_PROTOCOL).unwrap();
        config.verify_peer(false);
        let scid = [0x33; quiche::MAX_CONN_ID_LEN];
        let mut conn = quiche::connect(
            Some("localhost"),
            &quiche::ConnectionId::from_ref(&scid),
            sock.local_addr().unwrap(),
            addr,
            &mut config,
        )
        .unwrap();
        let mut out = [0u8; 1500];
        let (n, _) = conn.send(&mut out).unwrap();
        let mut initial = out[..n].to_vec();
        let odcid = quiche::Header::from_slice(&mut initial, quiche::MAX_CONN_ID_LEN)
            .unwrap()
            .dcid
            .to_vec();
        sock.send_to(&out[..n], addr).unwrap();
        let mut buf = [0u8; 2048];
        let (n, from) = sock.recv_from(&mut buf).expect("a Retry packet");
        let _ = stop.send(());
        (n, buf[..n].to_vec(), from, scid, odcid)
    });
    let stats = rt
        .block_on(server.run(async {
            let _ = stopped.await;
        }))
        .unwrap();
    let (n, mut retry, from, scid, odcid) = probe.join().unwrap();
    assert_eq!(from, addr);
    assert!(n < 1200, "a {n}-byte Retry amplifies");
    let hdr = quiche::Header::from_slice(&mut retry, quiche::MAX_CONN_ID_LEN).unwrap();
    assert_eq!(hdr.ty, quiche::Type::Retry);
    assert_eq!(hdr.version, 1);
    assert!(!hdr.token.as_deref().unwrap_or_default().is_empty());
    assert_eq!(
        hdr.dcid.as_ref(),
        &scid[..],
        "DCID must be the client's SCID"
    );
    assert_ne!(hdr.scid.as_ref(), &odcid[..], "a new SCID");
    assert_eq!((stats.retries, stats.accepted), (1, 0));
}

/// Starts the binary with `tmp` as its temporary directory; returns once
/// it listens (it has its certificate by then).
fn start(tmp: &Path) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quic-server"))
        .args(["--listen", "127.0.0.1:0", "--quiet"])
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on"), "{line:?}");
    child
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn no_run_leaves_files_behind_however_it_ends() {
    let tmp = tempfile::tempdir().unwrap();
    // What an earlier version left when it was killed: removed at start.
    let stale = tmp.path().join("cclab-cert-99999999-0a1b2c3d");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("cert.pem"), "old").unwrap();
    std::fs::write(stale.join("key.pem"), "old").unwrap();
    for signal in ["TERM", "INT", "KILL"] {
        let mut child = start(tmp.path());
        assert_eq!(entries(tmp.path()), Vec::<String>::new(), "while running");
        let status = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = child.wait().unwrap();
        if signal != "KILL" {
            assert!(exit.success(), "SIG{signal}: {exit:?}");
        }
        assert_eq!(
            entries(tmp.path()),
            Vec::<String>::new(),
            "after SIG{signal}"
        );
    }
}
