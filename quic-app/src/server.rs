//! The server side: accepts connections and answers `GET /bytes/<N>` with
//! N bytes of generated data (no file system access) and `POST /upload`
//! with the body's byte count; everything else is 404.
//!
//! `GET /bytes/<N>?rate=<BPS>` writes the body no faster than BPS bit/s
//! ([`crate::rate`]): the connection is then application-limited below
//! that rate. A malformed rate is answered with 400.
//!
//! A client that starts with a QUIC version quiche does not speak gets a
//! Version Negotiation packet (RFC 9000 §6) listing the versions it does,
//! and no connection state: see [`ServerApp::pop_stateless`].
//!
//! With [`ServerApp::set_retry`], the server validates client addresses
//! with Retry (RFC 9000 §8.1.2, §17.2.5) before it keeps any state: an
//! Initial without a token gets a Retry packet carrying a token that binds
//! the client's address, its original destination connection ID and the
//! Retry's source connection ID, authenticated and valid for
//! [`RETRY_TOKEN_LIFETIME`]; only an Initial that echoes a valid token
//! makes a connection. Off by default.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use quiche::h3::NameValue;

use crate::rate::{rate_from_path, RateLimit};
use crate::QlogLevel;

/// Counters, for tests and logs.
#[derive(Debug, Default, Clone, Copy)]
pub struct ServerStats {
    /// Connections accepted.
    pub accepted: u64,
    /// New connections refused at the connection limit.
    pub refused: u64,
    /// Datagrams that were not QUIC packets for a known or new connection.
    pub ignored_datagrams: u64,
    /// Requests answered.
    pub requests: u64,
    /// Version Negotiation packets queued for clients that offered a
    /// version we do not support.
    pub version_negotiations: u64,
    /// Retry packets queued for Initials without a token (with Retry on).
    pub retries: u64,
    /// Initials dropped for a token that is forged, altered, expired or
    /// from another address (with Retry on).
    pub invalid_tokens: u64,
}

/// How long a Retry token stays valid.
pub const RETRY_TOKEN_LIFETIME: Duration = Duration::from_secs(10);

/// Bytes of the HMAC-SHA256 tag that ends a Retry token.
const TOKEN_TAG_LEN: usize = 32;

/// The smallest UDP payload that may carry a client's first packet: RFC
/// 9000 §14.1 has servers discard Initial packets in smaller datagrams,
/// and §5.2.2 has them drop smaller packets of unsupported versions. A
/// Version Negotiation packet is never larger than this, so answering one
/// never amplifies what a spoofed source sent.
pub const MIN_INITIAL_DATAGRAM: usize = quiche::MIN_CLIENT_INITIAL_LEN;

/// Most stateless packets waiting to be sent; datagrams that would need
/// more are dropped (RFC 9000 §5.2.2 lets a server limit its Version
/// Negotiation packets). Also bounds the queue of a driver that never
/// takes them.
const MAX_STATELESS: usize = 64;

/// A packet sent outside any connection: a Version Negotiation or Retry
/// packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stateless {
    /// The packet.
    pub data: Vec<u8>,
    /// Its destination: the source of the datagram it answers.
    pub to: SocketAddr,
    /// Our address that datagram arrived at.
    pub from: SocketAddr,
}

/// The version-independent fields of a long-header packet (RFC 8999
/// §5.1): version, destination and source connection ID. `None` for a
/// short header or a datagram too short to hold them. Connection IDs may
/// be up to 255 bytes here: the 20-byte limit is QUIC v1's, not every
/// version's.
pub fn long_header(datagram: &[u8]) -> Option<(u32, &[u8], &[u8])> {
    let (&first, rest) = datagram.split_first()?;
    if first & 0x80 == 0 {
        return None;
    }
    let version = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    let (&dcid_len, rest) = rest[4..].split_first()?;
    let dcid = rest.get(..dcid_len as usize)?;
    let (&scid_len, rest) = rest[dcid_len as usize..].split_first()?;
    let scid = rest.get(..scid_len as usize)?;
    Some((version, dcid, scid))
}

/// The Version Negotiation packet (RFC 9000 §17.2.1) that answers a client
/// packet of `version` with connection IDs `dcid` and `scid`: version 0,
/// the client's IDs swapped, then every version quiche supports and one
/// reserved version of the form 0x?a?a?a?a (§15, greasing the client's
/// handling of unknown versions) taken from `grease` but never equal to
/// `version`. `unused` fills the seven unused bits of the first byte,
/// with 0x40 always set, as §17.2.1 asks where QUIC shares a port.
pub fn version_negotiation(
    version: u32,
    dcid: &[u8],
    scid: &[u8],
    unused: u8,
    grease: u32,
) -> Vec<u8> {
    let mut grease = (grease & 0xf0f0_f0f0) | 0x0a0a_0a0a;
    if grease == version {
        grease ^= 0x1000_0000;
    }
    let mut p = Vec::with_capacity(7 + dcid.len() + scid.len() + 8);
    p.push(0x80 | 0x40 | (unused & 0x3f));
    p.extend_from_slice(&0u32.to_be_bytes());
    p.push(scid.len() as u8);
    p.extend_from_slice(scid);
    p.push(dcid.len() as u8);
    p.extend_from_slice(dcid);
    for v in SUPPORTED_VERSIONS.iter().chain([&grease]) {
        p.extend_from_slice(&v.to_be_bytes());
    }
    p
}

/// The versions we list: quiche 0.30 speaks QUIC v1 only.
const SUPPORTED_VERSIONS: [u32; 1] = [quiche::PROTOCOL_VERSION];

/// How the server side behaves.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Most connections served at once.
    pub max_connections: usize,
    /// Write one qlog file per connection here (`server-<cid>.sqlog`).
    pub qlog_dir: Option<PathBuf>,
    /// How much qlog.
    pub qlog_level: QlogLevel,
    /// Generic events (name, data) written at the start of every qlog,
    /// such as a simulator's `simulation:scenario`.
    pub qlog_events: Vec<(String, serde_json::Value)>,
    /// Log each connection's end and refusals to stderr.
    pub verbose: bool,
}

/// Body of a response still being written.
enum Body {
    /// Generated bytes still to send.
    Generated(u64),
    /// Fixed bytes and how far they were sent.
    Fixed(Vec<u8>, usize),
}

struct Response {
    headers: Option<Vec<quiche::h3::Header>>,
    body: Body,
    /// The body's rate limit, if the request asked for one.
    limit: Option<RateLimit>,
    /// When the rate limit lets the body go on (`None`: not held by it).
    wake: Option<Instant>,
}

impl Response {
    fn fixed(status: &str, body: Vec<u8>) -> Response {
        Response {
            headers: Some(vec![
                header(":status", status),
                header("content-length", &body.len().to_string()),
            ]),
            body: Body::Fixed(body, 0),
            limit: None,
            wake: None,
        }
    }
}

/// One accepted connection.
pub struct Peer {
    /// The connection.
    pub conn: quiche::Connection,
    /// When pacing lets this connection send next (set by the sender).
    pub pace_until: Option<Instant>,
    h3: Option<quiche::h3::Connection>,
    responses: BTreeMap<u64, Response>,
    /// Body bytes received per upload stream.
    uploads: BTreeMap<u64, u64>,
}

/// Generated response data: one block, sent over and over.
static BODY: [u8; 64 * 1024] = {
    let mut b = [0u8; 64 * 1024];
    let mut i = 0;
    while i < b.len() {
        b[i] = b"cclab-bulk-data-"[i % 16];
        i += 1;
    }
    b
};

/// The server's state machine: every connection, keyed by our connection
/// id. Connections are kept in id order, so a simulation visits them in
/// the same order every run.
pub struct ServerApp {
    config: quiche::Config,
    h3_config: quiche::h3::Config,
    settings: ServerSettings,
    peers: BTreeMap<Vec<u8>, Peer>,
    cid_key: ring::hmac::Key,
    stats: ServerStats,
    last_refusal_log: Option<Instant>,
    closing: bool,
    /// Packets that belong to no connection, oldest first.
    stateless: VecDeque<Stateless>,
    /// Validate addresses with Retry before making connections.
    retry: bool,
    /// Authenticates Retry tokens.
    token_key: ring::hmac::Key,
    /// Where Retry token expiry times count from (the first Retry).
    token_epoch: Option<Instant>,
}

impl ServerApp {
    /// A server with TLS and transport settings in `config`; connection
    /// ids are derived from the client's with an HMAC keyed by `cid_key`,
    /// and Retry tokens are authenticated with a key derived from it (so a
    /// random `cid_key` per process makes tokens valid in that process
    /// only).
    pub fn new(
        config: quiche::Config,
        settings: ServerSettings,
        cid_key: &[u8; 32],
    ) -> Result<ServerApp, quiche::h3::Error> {
        let cid_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, cid_key);
        let token_key = ring::hmac::sign(&cid_key, b"cclab retry token key");
        Ok(ServerApp {
            config,
            h3_config: quiche::h3::Config::new()?,
            settings,
            peers: BTreeMap::new(),
            cid_key,
            stats: ServerStats::default(),
            last_refusal_log: None,
            closing: false,
            stateless: VecDeque::new(),
            retry: false,
            token_key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token_key.as_ref()),
            token_epoch: None,
        })
    }

    /// Turns address validation with Retry on or off (off by default):
    /// when on, only Initials that echo a valid Retry token make
    /// connections. See the module documentation.
    pub fn set_retry(&mut self, on: bool) {
        self.retry = on;
    }

    /// Whether addresses are validated with Retry.
    pub fn retry(&self) -> bool {
        self.retry
    }

    /// The counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// No open connection.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Every connection, in id order, to send their packets.
    pub fn peers_mut(&mut self) -> impl Iterator<Item = &mut Peer> {
        self.peers.values_mut()
    }

    /// Refuses new connections and closes every open one.
    pub fn shut_down(&mut self) {
        self.closing = true;
        for p in self.peers.values_mut() {
            let _ = p.conn.close(true, 0x100, b"server shutdown");
        }
    }

    /// When [`process`](Self::process) or sending must run next: a
    /// connection's timer or pacing, or a rate-limited body's next write.
    pub fn timeout(&self) -> Option<Instant> {
        self.peers
            .values()
            .flat_map(|p| {
                [p.conn.timeout_instant(), p.pace_until]
                    .into_iter()
                    .chain(p.responses.values().map(|r| r.wake))
            })
            .flatten()
            .min()
    }

    fn derived_cid(&self, dcid: &[u8]) -> Vec<u8> {
        let tag = ring::hmac::sign(&self.cid_key, dcid);
        tag.as_ref()[..quiche::MAX_CONN_ID_LEN].to_vec()
    }

    /// The next packet to send that belongs to no connection (a Version
    /// Negotiation or Retry packet), oldest first. Drivers send these after
    /// receiving, as they send the connections' packets.
    pub fn pop_stateless(&mut self) -> Option<Stateless> {
        self.stateless.pop_front()
    }

    /// A datagram arrived from `from` at our address `to`, with the ECN
    /// codepoint `ecn` in its IP header (`quiche::Ecn::NotEct` where the
    /// driver cannot read it).
    pub fn recv(
        &mut self,
        pkt: &mut [u8],
        from: SocketAddr,
        to: SocketAddr,
        ecn: quiche::Ecn,
        now: Instant,
    ) {
        // The common case first, without allocating: a short-header packet
        // whose destination connection ID (our IDs are all
        // `MAX_CONN_ID_LEN` bytes) names a connection we have. Anything
        // else takes the full path below, which also handles this case.
        if pkt.len() > quiche::MAX_CONN_ID_LEN && pkt[0] & 0x80 == 0 {
            if let Some(peer) = self.peers.get_mut(&pkt[1..=quiche::MAX_CONN_ID_LEN]) {
                if peer
                    .conn
                    .recv_with_ecn(pkt, quiche::RecvInfo { from, to }, ecn)
                    .is_err()
                {
                    self.stats.ignored_datagrams += 1;
                }
                return;
            }
        }
        // Read by the version-independent rules first: what follows the
        // connection IDs means nothing in a version we do not know.
        // Version 0 is a Version Negotiation packet, which is never
        // answered with another (RFC 9000 §6.1).
        if let Some((version, dcid, scid)) = long_header(pkt) {
            if version != 0 && !quiche::version_is_supported(version) {
                self.negotiate_version(pkt.len(), version, dcid, scid, from, to);
                return;
            }
        }
        let hdr = match quiche::Header::from_slice(pkt, quiche::MAX_CONN_ID_LEN) {
            Ok(h) => h,
            Err(_) => {
                self.stats.ignored_datagrams += 1;
                return;
            }
        };
        let key = if self.peers.contains_key(hdr.dcid.as_ref()) {
            hdr.dcid.to_vec()
        } else if self.retry && hdr.ty == quiche::Type::Initial {
            let token = hdr.token.as_deref().unwrap_or_default();
            if token.is_empty() {
                self.send_retry(&hdr, pkt.len(), from, to, now);
                return;
            }
            let Some(odcid) = self.validate_token(token, &hdr.dcid, from, now) else {
                self.stats.invalid_tokens += 1;
                return;
            };
            // The client's DCID is the Retry's SCID, which the token
            // vouches we chose: it stays our connection ID, as quiche
            // sends it as retry_source_connection_id.
            let scid = hdr.dcid.to_vec();
            let odcid = quiche::ConnectionId::from_vec(odcid);
            if !self.accept(&hdr, pkt.len(), &scid, Some(&odcid), from, to, now) {
                return;
            }
            scid
        } else {
            let derived = self.derived_cid(&hdr.dcid);
            if !self.peers.contains_key(&derived)
                && !self.accept(&hdr, pkt.len(), &derived, None, from, to, now)
            {
                return;
            }
            derived
        };
        let peer = self.peers.get_mut(&key).expect("present or just accepted");
        if peer
            .conn
            .recv_with_ecn(pkt, quiche::RecvInfo { from, to }, ecn)
            .is_err()
        {
            self.stats.ignored_datagrams += 1;
        }
    }

    /// Queues a Version Negotiation packet for a client that offered
    /// `version` in a datagram of `len` bytes, without connection state.
    fn negotiate_version(
        &mut self,
        len: usize,
        version: u32,
        dcid: &[u8],
        scid: &[u8],
        from: SocketAddr,
        to: SocketAddr,
    ) {
        if self.closing || len < MIN_INITIAL_DATAGRAM || self.stateless.len() >= MAX_STATELESS {
            self.stats.ignored_datagrams += 1;
            return;
        }
        // The arbitrary bits come from the keyed hash, not a random
        // source: a simulation stays deterministic.
        let tag = ring::hmac::sign(&self.cid_key, &[b"version negotiation", dcid].concat());
        let t = tag.as_ref();
        let data = version_negotiation(
            version,
            dcid,
            scid,
            t[0],
            u32::from_be_bytes([t[1], t[2], t[3], t[4]]),
        );
        if data.len() > len {
            // Never more than arrived (RFC 9000 §8); cannot happen at
            // 1200 bytes and more, with IDs of at most 255 bytes.
            self.stats.ignored_datagrams += 1;
            return;
        }
        self.stats.version_negotiations += 1;
        self.stateless.push_back(Stateless {
            data,
            to: from,
            from: to,
        });
    }

    /// What the tag of a Retry token authenticates: the expiry and
    /// original destination CID the token carries (`body`), the Retry's
    /// source CID and the client's address.
    fn token_signed(body: &[u8], retry_scid: &[u8], client: SocketAddr) -> Vec<u8> {
        let mut m = b"cclab retry token v1".to_vec();
        m.extend_from_slice(body);
        m.push(retry_scid.len() as u8);
        m.extend_from_slice(retry_scid);
        match client.ip() {
            std::net::IpAddr::V4(ip) => {
                m.push(4);
                m.extend_from_slice(&ip.octets());
            }
            std::net::IpAddr::V6(ip) => {
                m.push(6);
                m.extend_from_slice(&ip.octets());
            }
        }
        m.extend_from_slice(&client.port().to_be_bytes());
        m
    }

    /// Queues a Retry packet (RFC 9000 §17.2.5) for a client Initial
    /// without a token that came in a datagram of `len` bytes, without
    /// connection state. The token: expiry (milliseconds after
    /// `token_epoch`, 8 bytes), the original DCID (length, bytes), and an
    /// HMAC-SHA256 tag over those, the Retry's source CID and the
    /// client's address ([`token_signed`](Self::token_signed)).
    fn send_retry(
        &mut self,
        hdr: &quiche::Header,
        len: usize,
        from: SocketAddr,
        to: SocketAddr,
        now: Instant,
    ) {
        if self.closing
            || len < MIN_INITIAL_DATAGRAM
            || hdr.dcid.len() > quiche::MAX_CONN_ID_LEN
            || self.stateless.len() >= MAX_STATELESS
        {
            self.stats.ignored_datagrams += 1;
            return;
        }
        let epoch = *self.token_epoch.get_or_insert(now);
        let expiry =
            (now.saturating_duration_since(epoch) + RETRY_TOKEN_LIFETIME).as_millis() as u64;
        let mut token = expiry.to_be_bytes().to_vec();
        token.push(hdr.dcid.len() as u8);
        token.extend_from_slice(&hdr.dcid);
        // A new connection ID for every Retry, unpredictable to the
        // client; from the keyed hash, so a simulation stays
        // deterministic.
        let new_scid = ring::hmac::sign(&self.cid_key, &[b"retry scid", &token[..]].concat());
        let new_scid = &new_scid.as_ref()[..quiche::MAX_CONN_ID_LEN];
        let tag = ring::hmac::sign(&self.token_key, &Self::token_signed(&token, new_scid, from));
        token.extend_from_slice(tag.as_ref());
        let mut out = [0u8; 256];
        let n = match quiche::retry(
            &hdr.scid,
            &hdr.dcid,
            &quiche::ConnectionId::from_ref(new_scid),
            &token,
            hdr.version,
            &mut out,
        ) {
            Ok(n) => n,
            Err(_) => {
                self.stats.ignored_datagrams += 1;
                return;
            }
        };
        self.stats.retries += 1;
        self.stateless.push_back(Stateless {
            data: out[..n].to_vec(),
            to: from,
            from: to,
        });
    }

    /// The original destination CID in `token`, if the token is one we
    /// made for a Retry with source CID `dcid` (the DCID the client now
    /// uses), sent to `from`, and has not expired at `now`.
    fn validate_token(
        &self,
        token: &[u8],
        dcid: &[u8],
        from: SocketAddr,
        now: Instant,
    ) -> Option<Vec<u8>> {
        let epoch = self.token_epoch?;
        let body_len = token.len().checked_sub(TOKEN_TAG_LEN)?;
        let (body, tag) = token.split_at(body_len);
        let (expiry, rest) = body.split_first_chunk::<8>()?;
        let (&odcid_len, odcid) = rest.split_first()?;
        if odcid.len() != odcid_len as usize {
            return None;
        }
        // Constant-time comparison of the tag.
        ring::hmac::verify(&self.token_key, &Self::token_signed(body, dcid, from), tag).ok()?;
        let now_ms = now.saturating_duration_since(epoch).as_millis() as u64;
        if now_ms > u64::from_be_bytes(*expiry) {
            return None;
        }
        Some(odcid.to_vec())
    }

    /// Makes a connection for a client Initial that came in a datagram of
    /// `pkt_len` bytes; false if the datagram is not one we accept.
    /// `odcid` is the client's original destination CID when it came
    /// through a Retry.
    #[allow(clippy::too_many_arguments)]
    fn accept(
        &mut self,
        hdr: &quiche::Header,
        pkt_len: usize,
        scid: &[u8],
        odcid: Option<&quiche::ConnectionId>,
        from: SocketAddr,
        to: SocketAddr,
        now: Instant,
    ) -> bool {
        if self.closing
            || hdr.ty != quiche::Type::Initial
            || !quiche::version_is_supported(hdr.version)
            || pkt_len < MIN_INITIAL_DATAGRAM
        {
            self.stats.ignored_datagrams += 1;
            return false;
        }
        if self.peers.len() >= self.settings.max_connections {
            self.stats.refused += 1;
            if self.settings.verbose
                && self
                    .last_refusal_log
                    .is_none_or(|t| now.duration_since(t) > Duration::from_secs(1))
            {
                eprintln!(
                    "connection limit reached ({} connections): refusing new connection from {from}",
                    self.settings.max_connections
                );
                self.last_refusal_log = Some(now);
            }
            return false;
        }
        let scid_ref = quiche::ConnectionId::from_ref(scid);
        let mut conn = match quiche::accept(&scid_ref, odcid, to, from, &mut self.config) {
            Ok(c) => c,
            Err(_) => {
                self.stats.ignored_datagrams += 1;
                return false;
            }
        };
        if let Some(dir) = &self.settings.qlog_dir {
            let (level, events) = (self.settings.qlog_level, &self.settings.qlog_events);
            if let Err(e) = crate::qlog_to_file(&mut conn, dir, "server", scid, level, events, now)
            {
                eprintln!("cannot write qlog in {}: {e}", dir.display());
            }
        }
        self.stats.accepted += 1;
        self.peers.insert(
            scid.to_vec(),
            Peer {
                conn,
                pace_until: None,
                h3: None,
                responses: BTreeMap::new(),
                uploads: BTreeMap::new(),
            },
        );
        true
    }

    /// Runs due timers, answers requests and writes responses at `now`,
    /// and forgets closed connections. Call after receiving and whenever
    /// [`timeout`](Self::timeout) passes; then send.
    pub fn process(&mut self, now: Instant) {
        for p in self.peers.values_mut() {
            if p.conn.timeout_instant().is_some_and(|t| t <= now) {
                p.conn.on_timeout();
            }
            if p.h3.is_none() && (p.conn.is_established() || p.conn.is_in_early_data()) {
                match quiche::h3::Connection::with_transport(&mut p.conn, &self.h3_config) {
                    Ok(h3) => p.h3 = Some(h3),
                    Err(_) => {
                        let _ = p.conn.close(false, 0x101, b"h3 setup failed");
                        continue;
                    }
                }
            }
            self.stats.requests += serve(p, now);
        }
        self.reap();
    }

    fn reap(&mut self) {
        let verbose = self.settings.verbose;
        self.peers.retain(|cid, p| {
            if !p.conn.is_closed() {
                return true;
            }
            if verbose {
                let s = p.conn.stats();
                eprintln!(
                    "connection {} closed: sent {} B, received {} B, lost {} packets",
                    crate::hex(cid),
                    s.sent_bytes,
                    s.recv_bytes,
                    s.lost
                );
            }
            false
        });
    }
}

fn header(name: &str, value: &str) -> quiche::h3::Header {
    quiche::h3::Header::new(name.as_bytes(), value.as_bytes())
}

/// Handles a peer's HTTP/3 events and writes pending responses at `now`;
/// returns the number of requests answered.
fn serve(peer: &mut Peer, now: Instant) -> u64 {
    let Some(h3) = peer.h3.as_mut() else {
        return 0;
    };
    let conn = &mut peer.conn;
    let mut answered = 0;
    let mut scratch = [0u8; 16 * 1024];
    loop {
        match h3.poll(conn) {
            Ok((id, quiche::h3::Event::Headers { list, .. })) => {
                let get = |n: &str| {
                    list.iter()
                        .find(|h| h.name() == n.as_bytes())
                        .map(|h| String::from_utf8_lossy(h.value()).into_owned())
                };
                let (method, path) = (
                    get(":method").unwrap_or_default(),
                    get(":path").unwrap_or_default(),
                );
                // The query matters to downloads only (`rate`); an upload's
                // rate is the client's to apply.
                let route = path.split_once('?').map_or(path.as_str(), |(p, _)| p);
                let size = route
                    .strip_prefix("/bytes/")
                    .and_then(|n| n.parse::<u64>().ok());
                let response = match (method.as_str(), size, route) {
                    ("GET", Some(n), _) => Some(match rate_from_path(&path) {
                        Ok(rate) => Response {
                            headers: Some(vec![
                                header(":status", "200"),
                                header("content-length", &n.to_string()),
                            ]),
                            body: Body::Generated(n),
                            limit: rate.map(RateLimit::new),
                            wake: None,
                        },
                        Err(e) => Response::fixed("400", format!("{e}\n").into_bytes()),
                    }),
                    ("POST", _, "/upload") => {
                        peer.uploads.insert(id, 0);
                        None
                    }
                    _ => Some(Response::fixed("404", b"not found\n".to_vec())),
                };
                if let Some(r) = response {
                    peer.responses.insert(id, r);
                    answered += 1;
                }
            }
            Ok((id, quiche::h3::Event::Data)) => {
                while let Ok(n) = h3.recv_body(conn, id, &mut scratch) {
                    if let Some(count) = peer.uploads.get_mut(&id) {
                        *count += n as u64;
                    }
                }
            }
            Ok((id, quiche::h3::Event::Finished)) => {
                if let Some(count) = peer.uploads.remove(&id) {
                    let body = format!("{count}\n").into_bytes();
                    peer.responses.insert(id, Response::fixed("200", body));
                    answered += 1;
                }
            }
            Ok((id, quiche::h3::Event::Reset(_))) => {
                peer.responses.remove(&id);
                peer.uploads.remove(&id);
            }
            Ok(_) => {}
            Err(quiche::h3::Error::Done) => break,
            Err(_) => {
                let _ = conn.close(true, 0x101, b"h3 error");
                return answered;
            }
        }
    }
    if conn.is_draining() || conn.is_closed() {
        // Nothing more goes out: no more waking up for rate-limited bodies.
        for r in peer.responses.values_mut() {
            r.wake = None;
        }
        return answered;
    }
    peer.responses
        .retain(|&id, r| write_response(h3, conn, id, r, now));
    answered
}

/// Writes as much of a response as flow and congestion control (and its
/// rate limit) allow at `now`; false once it is complete or failed.
fn write_response(
    h3: &mut quiche::h3::Connection,
    conn: &mut quiche::Connection,
    id: u64,
    r: &mut Response,
    now: Instant,
) -> bool {
    r.wake = None;
    if let Some(headers) = &r.headers {
        let empty = matches!(r.body, Body::Generated(0))
            || matches!(&r.body, Body::Fixed(b, _) if b.is_empty());
        match h3.send_response(conn, id, headers, empty) {
            Ok(()) => r.headers = None,
            Err(quiche::h3::Error::StreamBlocked) => return true,
            Err(_) => return false,
        }
        if empty {
            return false;
        }
    }
    loop {
        let (chunk, last): (&[u8], bool) = match &r.body {
            Body::Generated(left) => {
                let mut n = (*left).min(BODY.len() as u64);
                if let Some(limit) = r.limit.as_mut() {
                    n = limit.allowed(now, n);
                    if n == 0 {
                        // Held by the rate limit: come back when it allows.
                        r.wake = Some(limit.next_write(now, *left));
                        return true;
                    }
                }
                let n = n as usize;
                (&BODY[..n], *left == n as u64)
            }
            Body::Fixed(b, off) => (&b[*off..], true),
        };
        let len = chunk.len();
        match h3.send_body(conn, id, chunk, last) {
            Ok(written) => {
                if let Some(limit) = r.limit.as_mut() {
                    limit.consume(written as u64);
                }
                match &mut r.body {
                    Body::Generated(left) => *left -= written as u64,
                    Body::Fixed(_, off) => *off += written,
                }
                if written == len && last {
                    return false;
                }
                if written < len {
                    return true;
                }
            }
            Err(quiche::h3::Error::Done) | Err(quiche::h3::Error::StreamBlocked) => return true,
            Err(_) => return false,
        }
    }
}
