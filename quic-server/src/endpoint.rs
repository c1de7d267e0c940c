//! Endpoint plumbing shared by the server and the client: a UDP socket
//! with GSO, a paced flush of a connection's packets, per-connection qlog
//! files, connection IDs and a self-signed certificate.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::Interest;

/// Largest UDP payload we send or accept.
pub const MAX_DATAGRAM_SIZE: usize = 1350;

/// Packets whose pacing release time is closer than this are sent now:
/// timers cannot wait for less, and tiny bursts do no harm.
pub const PACING_SLACK: Duration = Duration::from_micros(500);

/// A UDP socket that sends with segmentation offload when the kernel has it.
pub struct Socket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    local: SocketAddr,
    /// Datagrams one GSO send may carry (1 without GSO).
    max_segments: usize,
}

impl Socket {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Socket> {
        let io = tokio::net::UdpSocket::bind(addr).await?;
        let state = UdpSocketState::new(UdpSockRef::from(&io))?;
        // Room for bursts at high rates on a loopback.
        let _ = state.set_send_buffer_size(UdpSockRef::from(&io), 8 << 20);
        let _ = state.set_recv_buffer_size(UdpSockRef::from(&io), 8 << 20);
        let local = io.local_addr()?;
        // One send carries at most a 64 KiB UDP payload.
        let max_segments = state
            .max_gso_segments()
            .clamp(1, u16::MAX as usize / MAX_DATAGRAM_SIZE);
        Ok(Socket {
            io,
            state,
            local,
            max_segments,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Datagrams a single send may carry.
    pub fn max_segments(&self) -> usize {
        self.max_segments
    }

    /// Waits for one receive (which may carry several GRO segments of
    /// `meta.stride` bytes each).
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        loop {
            self.io.readable().await?;
            if let Some(meta) = self.try_recv(buf)? {
                return Ok(meta);
            }
        }
    }

    /// Receives without waiting; `None` when nothing is queued.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<RecvMeta>> {
        let mut meta = [RecvMeta::default()];
        let res = self.io.try_io(Interest::READABLE, || {
            let mut bufs = [io::IoSliceMut::new(buf)];
            self.state
                .recv(UdpSockRef::from(&self.io), &mut bufs, &mut meta)
        });
        match res {
            Ok(_) => Ok(Some(meta[0])),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends `contents` (segments of `segment` bytes, the last may be
    /// shorter) to `to`, waiting while the socket buffer is full.
    pub async fn send(&self, to: SocketAddr, contents: &[u8], segment: usize) -> io::Result<()> {
        let transmit = Transmit {
            destination: to,
            ecn: None,
            contents,
            segment_size: (contents.len() > segment).then_some(segment),
            src_ip: None,
        };
        loop {
            self.io.writable().await?;
            match self.io.try_io(Interest::WRITABLE, || {
                self.state.try_send(UdpSockRef::from(&self.io), &transmit)
            }) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                // A vanished peer must not stop the endpoint.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(()),
                // The path refuses this batch size: send segment by segment.
                Err(e) if quinn_udp::is_msg_size_err(&e) && transmit.segment_size.is_some() => {
                    for chunk in contents.chunks(segment) {
                        Box::pin(self.send(to, chunk, segment)).await?;
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sends every packet `conn` has ready whose pacing time has come, batching
/// equal-size packets to one destination into GSO sends. Returns when the
/// connection has nothing more to send now, with the time pacing asks to
/// come back, if any.
pub async fn flush(
    conn: &mut quiche::Connection,
    socket: &Socket,
    batch: &mut Vec<u8>,
) -> io::Result<Option<Instant>> {
    let max = socket.max_segments();
    batch.clear();
    let mut segment = 0;
    let mut dest: Option<SocketAddr> = None;
    let mut count = 0;
    let mut pace_until = None;
    let mut buf = [0u8; MAX_DATAGRAM_SIZE];
    loop {
        // Honour pacing before building the packet, so packets are stamped
        // when they really leave.
        let now = Instant::now();
        if let Some(t) = conn.get_next_release_time().and_then(|d| d.time(now)) {
            if t > now + PACING_SLACK {
                pace_until = Some(t);
                break;
            }
        }
        let (n, info) = match conn.send(&mut buf) {
            Ok(v) => v,
            Err(quiche::Error::Done) => break,
            // Any other error closes the connection; quiche reports it.
            Err(_) => break,
        };
        let fits = dest == Some(info.to) && n <= segment && count < max;
        if !fits && !batch.is_empty() {
            socket.send(dest.unwrap(), batch, segment).await?;
            batch.clear();
            count = 0;
        }
        if batch.is_empty() {
            dest = Some(info.to);
            segment = n;
        }
        batch.extend_from_slice(&buf[..n]);
        count += 1;
        // A short packet ends a GSO batch.
        if n < segment {
            socket.send(info.to, batch, segment).await?;
            batch.clear();
            count = 0;
        }
    }
    if let (false, Some(to)) = (batch.is_empty(), dest) {
        socket.send(to, batch, segment).await?;
        batch.clear();
    }
    Ok(pace_until)
}

/// Opens `DIR/ROLE-CID.sqlog` and makes `conn` write qlog into it. The
/// buffered writer is flushed when the connection is dropped.
pub fn attach_qlog(
    conn: &mut quiche::Connection,
    dir: &Path,
    role: &str,
    cid: &[u8],
) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{role}-{}.sqlog", hex(cid)));
    let file = std::fs::File::create(&path)?;
    conn.set_qlog_with_level(
        Box::new(io::BufWriter::with_capacity(1 << 16, file)),
        format!("cclab {role}"),
        format!("cclab {role} {}", hex(cid)),
        quiche::QlogLevel::Extra,
    );
    Ok(path)
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random connection ID.
pub fn random_cid() -> [u8; quiche::MAX_CONN_ID_LEN] {
    let mut cid = [0u8; quiche::MAX_CONN_ID_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut cid)
        .expect("system randomness");
    cid
}

/// Writes a fresh self-signed certificate for `localhost` into a private
/// temporary directory; returns (certificate, key) paths. Nothing is kept.
pub fn self_signed() -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = std::env::temp_dir().join(format!(
        "cclab-cert-{}-{}",
        std::process::id(),
        hex(&random_cid()[..4])
    ));
    std::fs::create_dir_all(&dir)?;
    let cert = rcgen::generate_simple_self_signed(vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
    ])?;
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.cert.pem())?;
    std::fs::write(&k, cert.signing_key.serialize_pem())?;
    Ok((c, k))
}

/// Transport settings both ends use for bulk transfer.
pub fn base_config(protos: &[&[u8]]) -> Result<quiche::Config, quiche::Error> {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION)?;
    c.set_application_protos(protos)?;
    c.set_max_idle_timeout(10_000);
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
    Ok(c)
}
