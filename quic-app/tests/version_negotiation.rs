//! Version Negotiation (RFC 9000 §6, §17.2.1; RFC 8999): a client packet
//! of a version quiche does not speak gets a Version Negotiation packet
//! and no connection state; a short one gets nothing; and a quiche client
//! that starts with a reserved version ends up transferring over QUIC v1.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use quic_app::client::{ClientApp, ClientSettings};
use quic_app::server::{ServerApp, ServerSettings, Stateless, MIN_INITIAL_DATAGRAM};
use quic_app::{Next, QlogLevel};

const CLIENT: &str = "10.0.0.1:5000";
const SERVER: &str = "10.0.0.2:443";

fn addrs() -> (SocketAddr, SocketAddr) {
    (CLIENT.parse().unwrap(), SERVER.parse().unwrap())
}

/// A server with a certificate (written into `dir`, which the caller
/// removes).
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
    ServerApp::new(config, settings, &[9; 32]).unwrap()
}

/// A long-header packet with the Initial type bits, `version`, the given
/// connection IDs, and filler up to `len` bytes: all RFC 8999 promises.
fn long_packet(version: u32, dcid: &[u8], scid: &[u8], len: usize) -> Vec<u8> {
    let mut p = vec![0xc0];
    p.extend_from_slice(&version.to_be_bytes());
    p.push(dcid.len() as u8);
    p.extend_from_slice(dcid);
    p.push(scid.len() as u8);
    p.extend_from_slice(scid);
    p.resize(len, 0x5c);
    p
}

/// A Version Negotiation packet taken apart by hand (RFC 9000 §17.2.1):
/// (first byte, version, DCID, SCID, supported versions).
fn parse_vn(p: &[u8]) -> (u8, u32, Vec<u8>, Vec<u8>, Vec<u32>) {
    let version = u32::from_be_bytes(p[1..5].try_into().unwrap());
    let dlen = p[5] as usize;
    let dcid = p[6..6 + dlen].to_vec();
    let slen = p[6 + dlen] as usize;
    let scid = p[7 + dlen..7 + dlen + slen].to_vec();
    let rest = &p[7 + dlen + slen..];
    assert_eq!(rest.len() % 4, 0, "version list of {} bytes", rest.len());
    let versions = rest
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
        .collect();
    (p[0], version, dcid, scid, versions)
}

#[test]
fn an_unknown_version_gets_version_negotiation_and_no_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = server(dir.path());
    let (ca, sa) = addrs();
    let now = Instant::now();
    let dcid: Vec<u8> = (1..=8).collect();
    let scid: Vec<u8> = (0xa0..0xa5).collect();
    let mut pkt = long_packet(0x1a2a_3a4a, &dcid, &scid, 1200);
    srv.recv(&mut pkt, ca, sa, quiche::Ecn::NotEct, now);

    let Stateless { data, to, from } = srv.pop_stateless().expect("a Version Negotiation packet");
    assert!(srv.pop_stateless().is_none(), "one answer per datagram");
    assert_eq!((to, from), (ca, sa));
    assert!(data.len() <= 1200, "{} bytes answer 1200", data.len());
    let (first, version, vn_dcid, vn_scid, versions) = parse_vn(&data);
    assert_ne!(first & 0x80, 0, "header form bit");
    assert_ne!(first & 0x40, 0, "RFC 9000 §17.2.1 asks for 0x40 set");
    assert_eq!(version, 0);
    assert_eq!(vn_dcid, scid, "DCID must be the client's SCID");
    assert_eq!(vn_scid, dcid, "SCID must be the client's DCID");
    assert!(versions.contains(&0x0000_0001), "{versions:x?}");
    assert!(!versions.contains(&0x1a2a_3a4a), "{versions:x?}");
    // Every listed version but v1 is a reserved (greasing) one.
    for v in versions.iter().filter(|&&v| v != 1) {
        assert_eq!(v & 0x0f0f_0f0f, 0x0a0a_0a0a, "{v:#x}");
    }
    // quiche's own parser agrees.
    let mut copy = data.clone();
    let hdr = quiche::Header::from_slice(&mut copy, quiche::MAX_CONN_ID_LEN).unwrap();
    assert_eq!(hdr.ty, quiche::Type::VersionNegotiation);
    assert_eq!(hdr.versions.as_deref().unwrap(), &versions[..]);

    // No connection state.
    assert!(srv.is_empty());
    assert_eq!(srv.timeout(), None);
    let s = srv.stats();
    assert_eq!((s.accepted, s.version_negotiations), (0, 1));

    // RFC 8999: IDs longer than QUIC v1's 20 bytes are fine in another
    // version, and come back swapped.
    let long_dcid = vec![0xdd; 40];
    let mut pkt = long_packet(0xff00_abcd, &long_dcid, &[0xee; 3], 1350);
    srv.recv(&mut pkt, ca, sa, quiche::Ecn::NotEct, now);
    let (_, _, d, s, _) = parse_vn(&srv.pop_stateless().unwrap().data);
    assert_eq!((d, s), (vec![0xee; 3], long_dcid));
    assert!(srv.is_empty());
}

#[test]
fn short_datagrams_and_version_negotiation_packets_get_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = server(dir.path());
    let (ca, sa) = addrs();
    let now = Instant::now();
    let cases = [
        // One byte short of what may start a connection: dropped, since a
        // VN would be sent for datagrams a spoofer made small.
        long_packet(0x1a2a_3a4a, &[1; 8], &[2; 8], MIN_INITIAL_DATAGRAM - 1),
        long_packet(0x1a2a_3a4a, &[1; 8], &[2; 8], 60),
        // A Version Negotiation packet is never answered with one.
        long_packet(0, &[1; 8], &[2; 8], 1200),
        // Cut inside the connection IDs.
        long_packet(0x1a2a_3a4a, &[1; 8], &[2; 8], 1200)[..10].to_vec(),
        // A v1 Initial in a datagram below 1200 bytes (RFC 9000 §14.1).
        long_packet(1, &[1; 8], &[2; 8], 1199),
    ];
    for (i, mut pkt) in cases.into_iter().enumerate() {
        srv.recv(&mut pkt, ca, sa, quiche::Ecn::NotEct, now);
        assert!(srv.pop_stateless().is_none(), "case {i} was answered");
        assert!(srv.is_empty(), "case {i} made a connection");
        assert_eq!(srv.stats().ignored_datagrams, i as u64 + 1, "case {i}");
    }
    assert_eq!(srv.stats().version_negotiations, 0);
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

#[test]
fn a_quiche_client_starting_with_a_reserved_version_negotiates_v1_and_downloads() {
    let dir = tempfile::tempdir().unwrap();
    let _clock = Virtual;
    let t0 = Instant::now();
    quiche::sim::set_time(t0);
    quiche::sim::seed_rng(3);
    let mut srv = server(dir.path());
    let (ca, sa) = addrs();
    // quiche accepts reserved versions in a client's configuration, to
    // exercise version negotiation (as quiche's own client does).
    let mut config = quiche::Config::new(0xbaba_baba).unwrap();
    quic_app::configure(&mut config, quiche::h3::APPLICATION_PROTOCOL).unwrap();
    config.verify_peer(false);
    let scid = [4u8; quiche::MAX_CONN_ID_LEN];
    let conn = quiche::connect(
        Some("localhost"),
        &quiche::ConnectionId::from_ref(&scid),
        ca,
        sa,
        &mut config,
    )
    .unwrap();
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
    let mut versions_seen = Vec::new();
    let (mut now, mut out) = (t0, Vec::new());
    while !client.is_closed() && now < t0 + Duration::from_secs(30) {
        quiche::sim::set_time(now);
        while wire.front().is_some_and(|w| w.0 <= now) {
            let (_, to_server, mut d) = wire.pop_front().unwrap();
            if to_server {
                if let Some((v, _, _)) = quic_app::server::long_header(&d) {
                    versions_seen.push(v);
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
            assert_eq!(p.to, ca);
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
    let report = client.report(now, None);
    assert!(report.complete, "{:?}", report.error);
    assert_eq!(report.bytes, n);
    assert_eq!(report.status, Some(200));
    // First the reserved version (the client's first flight: one VN per
    // datagram), then only v1, on one connection.
    let reserved = versions_seen
        .iter()
        .take_while(|&&v| v == 0xbaba_baba)
        .count();
    assert!(reserved >= 1, "{versions_seen:x?}");
    assert!(
        versions_seen[reserved..].iter().all(|&v| v == 1),
        "{versions_seen:x?}"
    );
    assert_eq!(srv.stats().version_negotiations, reserved as u64);
    assert_eq!(srv.stats().accepted, 1);
}
