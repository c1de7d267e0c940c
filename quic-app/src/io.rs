//! The socket path of the tokio binaries: a UDP socket with segmentation
//! offload and a paced flush of a connection's packets.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::Interest;

use crate::{Next, MAX_DATAGRAM_SIZE, MAX_MTU, PACING_SLACK};

/// Most UDP payload bytes one GSO send carries (below the 65 507 an IPv4
/// datagram can hold; 48 default-size packets).
const MAX_GSO_BYTES: usize = 48 * MAX_DATAGRAM_SIZE;

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
    /// shorter) to `to` with the ECN codepoint `ecn` in each datagram's IP
    /// header, waiting while the socket buffer is full.
    pub async fn send(
        &self,
        to: SocketAddr,
        contents: &[u8],
        segment: usize,
        ecn: quiche::Ecn,
    ) -> io::Result<()> {
        let transmit = Transmit {
            destination: to,
            ecn: quinn_udp::EcnCodepoint::from_bits(ecn.bits()),
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
                        Box::pin(self.send(to, chunk, segment, ecn)).await?;
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sends every packet `conn` has ready whose pacing time has come, batching
/// equal-size packets to one destination with one ECN codepoint into GSO
/// sends (a batch carries one IP header's codepoint). Returns when the
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
    let mut ecn = quiche::Ecn::NotEct;
    let mut count = 0;
    let mut pace_until = None;
    // Room for the largest payload `set_mtu` allows.
    let mut buf = [0u8; MAX_MTU];
    loop {
        let (n, info) = match crate::next_packet(conn, &mut buf, Instant::now(), PACING_SLACK) {
            Next::Packet(n, info) => (n, info),
            Next::Wait(t) => {
                pace_until = Some(t);
                break;
            }
            Next::Idle => break,
        };
        let fits = dest == Some(info.to)
            && ecn == info.ecn
            && n <= segment
            && count < max
            && batch.len() + n <= MAX_GSO_BYTES;
        if !fits && !batch.is_empty() {
            socket.send(dest.unwrap(), batch, segment, ecn).await?;
            batch.clear();
            count = 0;
        }
        if batch.is_empty() {
            dest = Some(info.to);
            ecn = info.ecn;
            segment = n;
        }
        batch.extend_from_slice(&buf[..n]);
        count += 1;
        // A short packet ends a GSO batch.
        if n < segment {
            socket.send(info.to, batch, segment, ecn).await?;
            batch.clear();
            count = 0;
        }
    }
    if let (false, Some(to)) = (batch.is_empty(), dest) {
        socket.send(to, batch, segment, ecn).await?;
        batch.clear();
    }
    Ok(pace_until)
}

/// The ECN codepoint of the datagrams a receive returned (quinn-udp reads
/// it with `IP_RECVTOS` / `IPV6_RECVTCLASS`; GRO coalesces only datagrams
/// with the same one).
pub fn ecn_of(meta: &RecvMeta) -> quiche::Ecn {
    meta.ecn
        .map_or(quiche::Ecn::NotEct, |e| quiche::Ecn::from_tos(e as u8))
}

/// A timer with microsecond precision for the socket loops.
///
/// tokio's timers fire on the next millisecond tick at the earliest, and
/// quiche's pacers restart their schedule from the time a packet really
/// leaves (they do not catch up), so a paced sender woken up to 1 ms late
/// loses rate: BBR2 used 92% of a 20 Mbit/s link this way where virtual
/// time, which is never late, used 98.5%. A timerfd in tokio's reactor
/// wakes within the kernel's timer slack (50 µs by default) instead.
pub struct Timer {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl Timer {
    /// A disarmed timer.
    pub fn new() -> io::Result<Timer> {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create has no memory-safety preconditions; the
        // descriptor it returns is owned by the OwnedFd from here on.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        // SAFETY: the OwnedFd keeps the descriptor open, and the same one,
        // for as long as the AsyncFd that owns it lives.
        let fd =
            unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, Interest::READABLE) }
                .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Timer { fd })
    }

    /// Waits until `t`; forever when `None`. Re-arming (a new call after a
    /// cancelled one) replaces the previous deadline.
    pub async fn sleep_until(&self, t: Option<Instant>) {
        use std::os::fd::AsRawFd;
        let Some(t) = t else {
            return std::future::pending().await;
        };
        let d = t.saturating_duration_since(Instant::now());
        if d.is_zero() {
            return;
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        let fd = self.fd.get_ref().as_raw_fd();
        // SAFETY: `fd` is our timerfd and `spec` a valid itimerspec.
        if unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) } < 0 {
            return tokio::time::sleep_until(t.into()).await;
        }
        loop {
            let Ok(mut guard) = self.fd.readable().await else {
                return tokio::time::sleep_until(t.into()).await;
            };
            let mut ticks = [0u8; 8];
            // SAFETY: reads at most 8 bytes into `ticks`.
            let r = guard.try_io(|inner| {
                let n = unsafe { libc::read(inner.as_raw_fd(), ticks.as_mut_ptr().cast(), 8) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            match r {
                Ok(_) => return,
                // Readiness left over from a cancelled wait: wait again.
                Err(_would_block) => continue,
            }
        }
    }
}
