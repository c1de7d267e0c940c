//! The HTTP/3 bulk-transfer application, without I/O.
//!
//! [`client::ClientApp`] and [`server::ServerApp`] are state machines over
//! quiche connections: they take datagrams and the current time, and hand
//! back datagrams with the time they may leave ([`next_packet`]) and the
//! time they next need to run. They own the request, the response body,
//! goodput and completion accounting, and qlog setup; they never read a
//! clock or touch a socket. The tokio binaries (`quic-server`,
//! `quic-client`, through [`io`] with the `tokio` feature) and the
//! harness's discrete-event simulator drive the same code, so a simulated
//! run differs from a real one only in where datagrams and time come from.
//!
//! quiche itself reads time through `quiche::sim::now()`: the wall clock,
//! unless a simulation set a virtual time on the thread.

pub mod client;
#[cfg(feature = "tokio")]
pub mod io;
pub mod qlog_file;
pub mod rate;
pub mod server;
pub mod transport;
#[cfg(feature = "tokio")]
pub mod uring;

use std::io::Write;
use std::time::{Duration, Instant};

/// Largest UDP payload we send or accept, unless [`set_mtu`] says otherwise.
pub const MAX_DATAGRAM_SIZE: usize = 1350;

/// The smallest UDP payload limit [`set_mtu`] accepts: QUIC (RFC 9000
/// §14) requires paths to carry UDP payloads of at least 1200 bytes.
pub const MIN_MTU: usize = 1200;

/// The largest UDP payload limit [`set_mtu`] accepts (and the size of the
/// buffers packets are built in).
pub const MAX_MTU: usize = 1500;

/// `mtu` if [`set_mtu`] accepts it, else why not (the value and the range).
pub fn check_mtu(mtu: usize) -> Result<usize, String> {
    if (MIN_MTU..=MAX_MTU).contains(&mtu) {
        Ok(mtu)
    } else {
        Err(format!(
            "`{mtu}` is not a UDP payload size from {MIN_MTU} to {MAX_MTU} bytes; QUIC (RFC 9000 §14) does not allow UDP payloads below 1200 bytes"
        ))
    }
}

/// Limits the UDP payloads of connections made with `c` to `mtu` bytes in
/// both directions: our own sending, and (through the
/// `max_udp_payload_size` transport parameter) the peer's. quiche sends at
/// most the smaller of its own limit and the peer's parameter, so setting
/// this on either end caps the data sender's packets at `mtu`; raising it
/// above the default 1350 takes both ends. Errors outside
/// [`MIN_MTU`]`..=`[`MAX_MTU`].
pub fn set_mtu(c: &mut quiche::Config, mtu: usize) -> Result<(), String> {
    check_mtu(mtu)?;
    c.set_max_recv_udp_payload_size(mtu);
    c.set_max_send_udp_payload_size(mtu);
    Ok(())
}

/// Packets whose pacing release time is closer than this are built now by
/// the socket path: its timer ([`io::Timer`]) wakes within the kernel's
/// timer slack (50 µs), and tiny bursts do no harm.
pub const PACING_SLACK: Duration = Duration::from_micros(100);

/// A configuration with the transport settings both ends use for bulk
/// transfer.
pub fn base_config(protos: &[&[u8]]) -> Result<quiche::Config, quiche::Error> {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION)?;
    configure(&mut c, protos)?;
    Ok(c)
}

/// How long a connection may be idle before quiche closes it (both ends).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest pause between two requests of a flow
/// ([`client::ClientSettings::think`]): a second under [`IDLE_TIMEOUT`], so
/// that the idle connection survives it.
pub const MAX_THINK: Duration = Duration::from_secs(9);

/// Applies the transport settings both ends use for bulk transfer to a
/// configuration made elsewhere (e.g. with its own TLS context).
pub fn configure(c: &mut quiche::Config, protos: &[&[u8]]) -> Result<(), quiche::Error> {
    c.set_application_protos(protos)?;
    c.set_max_idle_timeout(IDLE_TIMEOUT.as_millis() as u64);
    c.set_max_recv_udp_payload_size(MAX_DATAGRAM_SIZE);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM_SIZE);
    // Flow-control windows bound what quiche buffers (sent but unacked, or
    // received but unread), and so an endpoint's memory. 16 MB per stream
    // covers 1 Gbit/s at 128 ms RTT; windows start smaller and auto-tune.
    c.set_initial_max_data(8 << 20);
    c.set_initial_max_stream_data_bidi_local(4 << 20);
    c.set_initial_max_stream_data_bidi_remote(4 << 20);
    c.set_initial_max_stream_data_uni(1 << 20);
    c.set_initial_max_streams_bidi(128);
    c.set_initial_max_streams_uni(16);
    c.set_max_connection_window(24 << 20);
    c.set_max_stream_window(16 << 20);
    c.set_disable_active_migration(true);
    c.enable_pacing(true);
    Ok(())
}

/// What the next call to `conn.send` would do.
#[derive(Debug)]
pub enum Next {
    /// A packet of this many bytes is in the buffer, with where and when
    /// (`info.at`) it may leave.
    Packet(usize, quiche::SendInfo),
    /// Pacing holds the next packet until this time.
    Wait(Instant),
    /// Nothing to send until something is received or a timer fires.
    Idle,
}

/// Builds the next packet of `conn` unless pacing holds it beyond
/// `now + slack`. Pacing is checked before the packet is built, so packets
/// are stamped when they really leave. A connection timer that is due
/// (a delayed ACK's deadline: quiche sends that ACK from `send`, not from
/// `on_timeout`) is not held by the pacer: otherwise the timer would stay
/// due until the pacer released data, and a loop that wakes on it would
/// spin (in virtual time, forever).
pub fn next_packet(
    conn: &mut quiche::Connection,
    buf: &mut [u8],
    now: Instant,
    slack: Duration,
) -> Next {
    let held = conn
        .get_next_release_time()
        .and_then(|d| d.time(now))
        .filter(|t| *t > now + slack);
    if let Some(t) = held {
        if conn.timeout_instant().is_none_or(|d| d > now) {
            return Next::Wait(t);
        }
    }
    match conn.send(buf) {
        Ok((n, info)) => Next::Packet(n, info),
        // Done, or an error that closes the connection (quiche reports it).
        Err(_) => held.map_or(Next::Idle, Next::Wait),
    }
}

/// How much a connection writes to qlog.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QlogLevel {
    /// No qlog.
    Off,
    /// `Core` without the per-packet events (`quic:packet_sent`,
    /// `quic:packet_received`): recovery metrics (cwnd, RTT, pacing),
    /// losses, parameters and markers. Enough for cwnd, RTT and loss
    /// statistics at a fraction of the size; goodput then comes from the
    /// client's report, not the qlog.
    Metrics,
    /// quiche's `Core` importance: packets sent and received (with their
    /// frames), packets lost, recovery metrics (cwnd, RTT, pacing),
    /// transport parameters and HTTP/3 frames. Enough for `qlog-analysis`
    /// (goodput then comes from received stream frames) and qvis. Also
    /// called `packets`: the level with per-packet events.
    Core,
    /// `Core` plus stream data movement, congestion and connection state
    /// changes.
    Base,
    /// Everything quiche logs (`Extra`), including every stream data
    /// movement and HTTP/3 frame.
    #[default]
    Extra,
}

impl QlogLevel {
    /// Parses `off`, `metrics`, `core` (or its alias `packets`), `base` or
    /// `extra`.
    pub fn parse(s: &str) -> Option<QlogLevel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Some(QlogLevel::Off),
            "metrics" => Some(QlogLevel::Metrics),
            "core" | "packets" => Some(QlogLevel::Core),
            "base" => Some(QlogLevel::Base),
            "extra" => Some(QlogLevel::Extra),
            _ => None,
        }
    }

    /// The name `parse` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            QlogLevel::Off => "off",
            QlogLevel::Metrics => "metrics",
            QlogLevel::Core => "core",
            QlogLevel::Base => "base",
            QlogLevel::Extra => "extra",
        }
    }
}

/// Makes `conn` write qlog into `writer` (`role` is `client` or `server`).
/// Nothing happens at [`QlogLevel::Off`].
pub fn attach_qlog(
    conn: &mut quiche::Connection,
    writer: Box<dyn Write + Send + Sync>,
    role: &str,
    cid: &[u8],
    level: QlogLevel,
) {
    let level = match level {
        QlogLevel::Off => return,
        // quiche never builds the packet events (the patch's
        // `set_qlog_packet_events`): formatting them only to drop them
        // made this level cost most of what `core` costs.
        QlogLevel::Metrics => {
            conn.set_qlog_packet_events(false);
            quiche::QlogLevel::Core
        }
        QlogLevel::Core => quiche::QlogLevel::Core,
        QlogLevel::Base => quiche::QlogLevel::Base,
        QlogLevel::Extra => quiche::QlogLevel::Extra,
    };
    conn.set_qlog_with_level(
        writer,
        format!("cclab {role}"),
        format!("cclab {role} {}", hex(cid)),
        level,
    );
}

/// Makes `conn` write qlog to `DIR/ROLE-CID.sqlog.zst` (`role` is `client`
/// or `server`; `DIR/ROLE-CID.sqlog` when [`qlog_file::compression`] says
/// plain), starting with the generic `events` (name, data) at `now`.
/// Returns the file, or `None` at [`QlogLevel::Off`]. The file is complete
/// once the connection closes or is dropped ([`qlog_file`] says what a
/// killed process leaves).
pub fn qlog_to_file(
    conn: &mut quiche::Connection,
    dir: &std::path::Path,
    role: &str,
    cid: &[u8],
    level: QlogLevel,
    events: &[(String, serde_json::Value)],
    now: Instant,
) -> std::io::Result<Option<std::path::PathBuf>> {
    if level == QlogLevel::Off {
        return Ok(None);
    }
    std::fs::create_dir_all(dir)?;
    let compression = qlog_file::compression();
    let path = dir.join(format!("{role}-{}.{}", hex(cid), compression.extension()));
    let file = qlog_file::QlogWriter::create(&path, compression)?;
    attach_qlog(conn, Box::new(file), role, cid, level);
    for (name, data) in events {
        qlog_event(conn, name, data.clone(), now);
    }
    Ok(Some(path))
}

/// Writes a generic qlog event (`simulation:scenario`, `simulation:marker`,
/// ...) into `conn`'s qlog at `now`, if it writes one.
pub fn qlog_event(
    conn: &mut quiche::Connection,
    name: &str,
    data: serde_json::Value,
    now: Instant,
) {
    if let Some(q) = conn.qlog_streamer() {
        let ev = qlog::events::JsonEvent {
            time: 0.0,
            importance: qlog::events::EventImportance::Core,
            name: name.to_string(),
            data,
        };
        let _ = q.add_event_with_instant(ev, now);
    }
}

/// A connection ID from the system's random source.
pub fn random_cid() -> [u8; quiche::MAX_CONN_ID_LEN] {
    let mut cid = [0u8; quiche::MAX_CONN_ID_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut cid)
        .expect("system randomness");
    cid
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod qlog_filter_tests {
    use super::*;

    #[test]
    fn packets_is_the_level_with_per_packet_events() {
        assert_eq!(QlogLevel::parse("metrics"), Some(QlogLevel::Metrics));
        assert_eq!(QlogLevel::parse("packets"), Some(QlogLevel::Core));
        assert_eq!(QlogLevel::parse("PACKETS"), Some(QlogLevel::Core));
        assert_eq!(QlogLevel::parse("core"), Some(QlogLevel::Core));
        assert_eq!(QlogLevel::parse("packet"), None);
    }
}
