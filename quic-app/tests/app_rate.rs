//! The application rate limit end to end: a `ServerApp` and a `ClientApp`
//! over an in-memory path (10 ms each way, no bandwidth limit) in virtual
//! time, so only the application can hold the transfer back.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use quic_app::client::{ClientApp, ClientSettings, Report};
use quic_app::server::{ServerApp, ServerSettings};
use quic_app::{Next, QlogLevel};

const ONE_WAY: Duration = Duration::from_millis(10);

/// Returns the thread to the wall clock however the test ends.
struct Virtual;

impl Drop for Virtual {
    fn drop(&mut self) {
        quiche::sim::reset();
    }
}

fn server(dir: &std::path::Path) -> ServerApp {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.cert.pem()).unwrap();
    std::fs::write(&k, cert.signing_key.serialize_pem()).unwrap();
    let mut config = quic_app::base_config(quiche::h3::APPLICATION_PROTOCOL).unwrap();
    config
        .load_cert_chain_from_pem_file(c.to_str().unwrap())
        .unwrap();
    config
        .load_priv_key_from_pem_file(k.to_str().unwrap())
        .unwrap();
    let settings = ServerSettings {
        max_connections: 4,
        qlog_dir: None,
        qlog_level: QlogLevel::Off,
        qlog_events: Vec::new(),
        verbose: false,
    };
    ServerApp::new(config, settings, &[7; 32]).unwrap()
}

/// Every packet `conn` has now (pacing ignored: the path has no rate).
fn drain(conn: &mut quiche::Connection, now: Instant, out: &mut Vec<Vec<u8>>) {
    let mut buf = [0u8; quic_app::MAX_MTU];
    while let Next::Packet(n, _) =
        quic_app::next_packet(conn, &mut buf, now, Duration::from_secs(3600))
    {
        out.push(buf[..n].to_vec());
    }
}

/// Runs one request for `secs` seconds of virtual time; returns the report.
fn transfer(path: &str, upload: Option<u64>, secs: u64) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let _clock = Virtual;
    let t0 = Instant::now();
    quiche::sim::set_time(t0);
    quiche::sim::seed_rng(1);
    let mut srv = server(dir.path());
    let ca: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let sa: SocketAddr = "10.0.0.2:443".parse().unwrap();
    let mut config = quic_app::base_config(quiche::h3::APPLICATION_PROTOCOL).unwrap();
    config.verify_peer(false);
    let scid = [3u8; quiche::MAX_CONN_ID_LEN];
    let conn = quiche::connect(
        Some("localhost"),
        &quiche::ConnectionId::from_ref(&scid),
        ca,
        sa,
        &mut config,
    )
    .unwrap();
    let settings = ClientSettings {
        authority: "localhost".into(),
        path: path.into(),
        upload,
        duration: Some(Duration::from_secs(secs)),
        requests: 1,
        think: std::time::Duration::ZERO,
        interval: None,
        print_intervals: false,
        timeout: Duration::from_secs(5),
        url: format!("https://localhost{path}"),
        cc: "cubic".into(),
    };
    let mut client = ClientApp::new(conn, settings, t0).unwrap();
    // (arrival time, to the server?, datagram), in arrival order.
    let mut wire: VecDeque<(Instant, bool, Vec<u8>)> = VecDeque::new();
    let mut now = t0;
    let mut out = Vec::new();
    while !client.is_closed() && now < t0 + Duration::from_secs(secs + 10) {
        quiche::sim::set_time(now);
        while wire.front().is_some_and(|w| w.0 <= now) {
            let (_, to_server, mut d) = wire.pop_front().unwrap();
            if to_server {
                srv.recv(&mut d, ca, sa, quiche::Ecn::NotEct, now);
            } else {
                client.recv(
                    &mut d,
                    quiche::RecvInfo { from: sa, to: ca },
                    quiche::Ecn::NotEct,
                );
            }
        }
        client.process(now);
        drain(client.conn_mut(), now, &mut out);
        wire.extend(out.drain(..).map(|d| (now + ONE_WAY, true, d)));
        srv.process(now);
        for p in srv.peers_mut() {
            drain(&mut p.conn, now, &mut out);
        }
        wire.extend(out.drain(..).map(|d| (now + ONE_WAY, false, d)));
        let next = [wire.front().map(|w| w.0), client.timeout(), srv.timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(1));
        now = next.max(now + Duration::from_micros(1));
    }
    client.report(now, None)
}

#[test]
fn rate_limited_downloads_and_uploads_move_at_their_rate() {
    for (path, upload) in [
        ("/bytes/1000000000?rate=4000000", None),
        ("/upload?rate=4000000", Some(1_000_000_000)),
    ] {
        let r = transfer(path, upload, 5);
        assert!(r.complete, "{path}: {:?}", r.error);
        // 4 Mbit/s for 5 s, less the first half RTT, plus the bucket's
        // first 10 ms: within 2%.
        assert!(
            (r.goodput_bps / 4e6 - 1.0).abs() < 0.02,
            "{path}: {} bit/s",
            r.goodput_bps
        );
    }
    // Without a rate the same request is far faster.
    let r = transfer("/bytes/1000000000", None, 1);
    assert!(r.goodput_bps > 40e6, "{} bit/s", r.goodput_bps);
}

#[test]
fn a_malformed_rate_is_answered_with_400() {
    let r = transfer("/bytes/1000?rate=fast", None, 1);
    assert_eq!(r.status, Some(400));
    assert!(!r.complete);
}
