//! Address validation with Retry (RFC 9000 §8.1.2, §17.2.5): a quiche
//! client downloads through a Retry, and Initials whose token was altered,
//! moved to another address or expired are dropped without state.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use quic_app::client::{ClientApp, ClientSettings};
use quic_app::server::{ServerApp, ServerSettings, RETRY_TOKEN_LIFETIME};
use quic_app::{Next, QlogLevel};

const CLIENT: &str = "10.0.0.1:5000";
const SERVER: &str = "10.0.0.2:443";

fn addrs() -> (SocketAddr, SocketAddr) {
    (CLIENT.parse().unwrap(), SERVER.parse().unwrap())
}

/// A server with Retry on and a certificate (written into `dir`, which
/// the caller removes).
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
    let mut srv = ServerApp::new(config, settings, &[9; 32]).unwrap();
    assert!(!srv.retry(), "Retry is off by default");
    srv.set_retry(true);
    srv
}

fn client_conn(ca: SocketAddr, sa: SocketAddr, scid: u8) -> quiche::Connection {
    let mut config = quic_app::base_config(quiche::h3::APPLICATION_PROTOCOL).unwrap();
    config.verify_peer(false);
    quiche::connect(
        Some("localhost"),
        &quiche::ConnectionId::from_ref(&[scid; quiche::MAX_CONN_ID_LEN]),
        ca,
        sa,
        &mut config,
    )
    .unwrap()
}

/// Returns the thread to the wall clock however the test ends.
struct Virtual;

impl Drop for Virtual {
    fn drop(&mut self) {
        quiche::sim::reset();
    }
}

fn drain(conn: &mut quiche::Connection, now: Instant, out: &mut Vec<Vec<u8>>) {
    let mut buf = [0u8; quic_app::MAX_MTU];
    while let Next::Packet(n, _) =
        quic_app::next_packet(conn, &mut buf, now, Duration::from_secs(3600))
    {
        out.push(buf[..n].to_vec());
    }
}

/// What the tests look at in a long header, as quiche parses it.
struct Hdr {
    ty: quiche::Type,
    version: u32,
    scid: Vec<u8>,
    token: Option<Vec<u8>>,
}

fn header(d: &[u8]) -> Hdr {
    let mut copy = d.to_vec();
    let h = quiche::Header::from_slice(&mut copy, quiche::MAX_CONN_ID_LEN).unwrap();
    Hdr {
        ty: h.ty,
        version: h.version,
        scid: h.scid.to_vec(),
        token: h.token,
    }
}

#[test]
fn a_quiche_client_downloads_through_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let _clock = Virtual;
    let t0 = Instant::now();
    quiche::sim::set_time(t0);
    quiche::sim::seed_rng(5);
    let mut srv = server(dir.path());
    let (ca, sa) = addrs();
    let conn = client_conn(ca, sa, 4);
    let n = 2_000_000u64;
    let settings = ClientSettings {
        authority: "localhost".into(),
        path: format!("/bytes/{n}"),
        upload: None,
        duration: None,
        requests: 1,
        think: std::time::Duration::ZERO,
        interval: None,
        print_intervals: false,
        timeout: Duration::from_secs(5),
        url: format!("https://localhost/bytes/{n}"),
        cc: "cubic".into(),
    };
    let mut client = ClientApp::new(conn, settings, t0).unwrap();
    let one_way = Duration::from_millis(5);
    // (arrival, to the server?, datagram), in arrival order.
    let mut wire: VecDeque<(Instant, bool, Vec<u8>)> = VecDeque::new();
    // The tokens of the client's Initials, in order.
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    let mut retries = Vec::new();
    let (mut now, mut out) = (t0, Vec::new());
    while !client.is_closed() && now < t0 + Duration::from_secs(30) {
        quiche::sim::set_time(now);
        while wire.front().is_some_and(|w| w.0 <= now) {
            let (_, to_server, mut d) = wire.pop_front().unwrap();
            if to_server {
                if d[0] & 0xb0 == 0x80 {
                    // Long header, type Initial.
                    tokens.push(header(&d).token.unwrap_or_default());
                }
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
        wire.extend(out.drain(..).map(|d| (now + one_way, true, d)));
        srv.process(now);
        while let Some(p) = srv.pop_stateless() {
            assert_eq!((p.to, p.from), (ca, sa));
            retries.push(header(&p.data));
            wire.push_back((now + one_way, false, p.data));
        }
        for p in srv.peers_mut() {
            drain(&mut p.conn, now, &mut out);
        }
        wire.extend(out.drain(..).map(|d| (now + one_way, false, d)));
        let next = [wire.front().map(|w| w.0), client.timeout(), srv.timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(1));
        now = next.max(now + Duration::from_micros(1));
    }
    // The connection lives under the Retry's SCID.
    let server_cid = client.conn_mut().destination_id().to_vec();
    let report = client.report(now, None);
    assert!(report.complete, "{:?}", report.error);
    assert_eq!(report.bytes, n);
    assert_eq!(report.status, Some(200));
    // One Retry per datagram of the client's tokenless first flight (a
    // ClientHello may take more than one); the client takes the first and
    // ignores the rest, and every later Initial carries its token. The
    // client checked the server's original_destination_connection_id and
    // retry_source_connection_id transport parameters, or the handshake
    // would have failed.
    let first_flight = tokens.iter().take_while(|t| t.is_empty()).count();
    assert!(first_flight >= 1, "{} Initials", tokens.len());
    assert_eq!(retries.len(), first_flight);
    let retry = &retries[0];
    assert_eq!(retry.ty, quiche::Type::Retry);
    assert_eq!(retry.version, quiche::PROTOCOL_VERSION);
    let token = retry.token.clone().unwrap();
    assert!(!token.is_empty());
    assert!(tokens.len() > first_flight, "{} Initials", tokens.len());
    assert!(tokens[first_flight..].iter().all(|t| *t == token));
    let s = srv.stats();
    assert_eq!(
        (s.retries, s.accepted, s.invalid_tokens),
        (first_flight as u64, 1, 0)
    );
    assert_eq!(server_cid, retry.scid);
}

/// The client's first Initial, and its second one after the server's
/// Retry (which carries the token), in datagrams.
fn initials_through_retry(
    srv: &mut ServerApp,
    ca: SocketAddr,
    sa: SocketAddr,
    now: Instant,
) -> (Vec<u8>, Vec<u8>) {
    let mut conn = client_conn(ca, sa, 7);
    let mut out = Vec::new();
    drain(&mut conn, now, &mut out);
    let mut first = out.remove(0);
    srv.recv(&mut first, ca, sa, quiche::Ecn::NotEct, now);
    let mut retry = srv.pop_stateless().expect("a Retry").data;
    assert!(srv.is_empty() && srv.pop_stateless().is_none());
    conn.recv(&mut retry, quiche::RecvInfo { from: sa, to: ca })
        .unwrap();
    out.clear();
    drain(&mut conn, now, &mut out);
    (retry, out.remove(0))
}

#[test]
fn altered_moved_or_expired_tokens_are_dropped_without_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = server(dir.path());
    let (ca, sa) = addrs();
    let now = Instant::now();
    let (retry, second) = initials_through_retry(&mut srv, ca, sa, now);
    let token = header(&retry).token.unwrap();
    let at = second
        .windows(token.len())
        .position(|w| w == token)
        .expect("the token in the second Initial");

    // A byte of the token flipped: in the expiry, the original DCID, the
    // tag.
    for i in [3, 10, token.len() - 1] {
        let mut d = second.clone();
        d[at + i] ^= 0x01;
        srv.recv(&mut d, ca, sa, quiche::Ecn::NotEct, now);
    }
    // From another port and from another host.
    for other in ["10.0.0.1:5001", "10.0.0.3:5000", "[::1]:5000"] {
        srv.recv(
            &mut second.clone(),
            other.parse().unwrap(),
            sa,
            quiche::Ecn::NotEct,
            now,
        );
    }
    // Expired.
    let late = now + RETRY_TOKEN_LIFETIME + Duration::from_millis(1);
    srv.recv(&mut second.clone(), ca, sa, quiche::Ecn::NotEct, late);

    let s = srv.stats();
    assert_eq!((s.invalid_tokens, s.accepted, s.retries), (7, 0, 1));
    assert!(srv.is_empty());
    assert!(
        srv.pop_stateless().is_none(),
        "a dropped Initial was answered"
    );
    assert_eq!(srv.timeout(), None);

    // The genuine Initial, in time, from the right address, is accepted.
    srv.recv(
        &mut second.clone(),
        ca,
        sa,
        quiche::Ecn::NotEct,
        now + Duration::from_secs(1),
    );
    assert_eq!(srv.stats().accepted, 1);
    assert!(!srv.is_empty());
}
