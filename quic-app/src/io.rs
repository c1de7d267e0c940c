//! The socket path of the tokio binaries: a UDP socket with segmentation
//! offload and a paced flush of a connection's packets.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::{Next, MAX_DATAGRAM_SIZE, MAX_MTU, PACING_SLACK};

/// Most UDP payload bytes one GSO send carries (below the 65 507 an IPv4
/// datagram can hold; 48 default-size packets).
pub const MAX_GSO_BYTES: usize = 48 * MAX_DATAGRAM_SIZE;

/// A UDP socket that sends with segmentation offload when the kernel has
/// it and receives every queued datagram in as few system calls as the
/// kernel allows (`recvmmsg`, [`RecvBatch`]).
pub struct Socket {
    io: AsyncFd<std::net::UdpSocket>,
    state: UdpSocketState,
    local: SocketAddr,
    /// Datagrams one GSO send may carry (1 without GSO).
    max_segments: usize,
}

/// Room for the datagrams one receive call returns: up to
/// [`quinn_udp::BATCH_SIZE`] messages (32 on Linux), each up to 64 KiB (a
/// GRO message holds several datagrams of `stride` bytes).
pub struct RecvBatch {
    buf: Vec<u8>,
    meta: Vec<RecvMeta>,
    len: usize,
}

/// Bytes of one message slot in a [`RecvBatch`].
const RECV_SLOT: usize = 65_536;

impl RecvBatch {
    /// A batch of [`quinn_udp::BATCH_SIZE`] slots.
    pub fn new() -> RecvBatch {
        let n = quinn_udp::BATCH_SIZE;
        RecvBatch {
            buf: vec![0u8; n * RECV_SLOT],
            meta: vec![RecvMeta::default(); n],
            len: 0,
        }
    }

    /// Messages the last receive returned.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the last receive returned nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots a receive may fill.
    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    /// Calls `f` with every datagram of the last receive (GRO messages
    /// split at their stride), its sender and its ECN codepoint.
    pub fn for_each(&mut self, mut f: impl FnMut(&mut [u8], SocketAddr, quiche::Ecn)) {
        for (i, m) in self.meta[..self.len].iter().enumerate() {
            let slot = &mut self.buf[i * RECV_SLOT..(i + 1) * RECV_SLOT];
            let stride = m.stride.max(1);
            let ecn = ecn_of(m);
            let mut off = 0;
            while off < m.len {
                let end = (off + stride).min(m.len);
                f(&mut slot[off..end], m.addr, ecn);
                off = end;
            }
        }
    }
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch::new()
    }
}

impl Socket {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr) -> io::Result<Socket> {
        let sock = std::net::UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        let state = UdpSocketState::new(UdpSockRef::from(&sock))?;
        // Room for bursts at high rates on a loopback.
        let _ = state.set_send_buffer_size(UdpSockRef::from(&sock), 8 << 20);
        let _ = state.set_recv_buffer_size(UdpSockRef::from(&sock), 8 << 20);
        let local = sock.local_addr()?;
        // One send carries at most a 64 KiB UDP payload.
        let max_segments = state
            .max_gso_segments()
            .clamp(1, u16::MAX as usize / MAX_DATAGRAM_SIZE);
        // Registered for reading only: with edge-triggered epoll, a socket
        // registered for writing too reports EPOLLOUT after every send, a
        // wake-up (an `epoll_wait`) per send for nothing. A send that finds
        // the buffer full waits on a registration of its own ([`Socket::send`]).
        // SAFETY: the AsyncFd owns the socket, so the descriptor stays open,
        // and the same one, for as long as it is registered.
        let io = unsafe { AsyncFd::register_with_interest(sock, Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
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

    /// One `recvmmsg` into `batch`: what is queued, up to its capacity.
    /// Nothing is left of an earlier receive whatever the outcome.
    fn read(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.len = 0;
        // The slots as slices on the stack: no allocation per receive.
        let mut slots = batch.buf.chunks_mut(RECV_SLOT);
        let mut slices: [io::IoSliceMut<'_>; quinn_udp::BATCH_SIZE] =
            std::array::from_fn(|_| io::IoSliceMut::new(slots.next().unwrap_or_default()));
        let n = self.state.recv(
            UdpSockRef::from(self.io.get_ref()),
            &mut slices,
            &mut batch.meta,
        )?;
        batch.len = n;
        Ok(n)
    }

    /// Waits until datagrams are queued and reads them, as many as `batch`
    /// holds, in one system call. A read that returns fewer than the batch
    /// holds has emptied the queue, so the socket is marked not readable
    /// without another call to find it empty (the next datagram to arrive
    /// makes it readable again).
    pub async fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        loop {
            let mut guard = self.io.readable().await?;
            match self.read(batch) {
                Ok(n) => {
                    if n < batch.capacity() {
                        guard.clear_ready();
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads what is queued without waiting (0 when nothing is).
    pub fn try_recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        match self.read(batch) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        }
    }

    /// Sends `contents` (segments of `segment` bytes, the last may be
    /// shorter) to `to` with the ECN codepoint `ecn` in each datagram's IP
    /// header, waiting while the socket buffer is full. The send is tried
    /// at once: only a full buffer costs a wait for writability.
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
        let mut result = self
            .state
            .try_send(UdpSockRef::from(self.io.get_ref()), &transmit);
        loop {
            match result {
                Ok(()) => return Ok(()),
                // The socket buffer is full (rare: it holds 8 MiB): wait
                // for room through a registration for writing made for this
                // wait alone, on a duplicate of the descriptor.
                Err(ref e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let dup = self.io.get_ref().try_clone()?;
                    // SAFETY: the AsyncFd owns the duplicate for as long as
                    // it is registered.
                    let w = unsafe { AsyncFd::register_with_interest(dup, Interest::WRITABLE) }
                        .map_err(|e| io::Error::other(e.to_string()))?;
                    loop {
                        let mut guard = w.writable().await?;
                        if let Ok(r) = guard.try_io(|s| {
                            self.state
                                .try_send(UdpSockRef::from(s.get_ref()), &transmit)
                        }) {
                            result = r;
                            break;
                        }
                    }
                }
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

/// Where and how one GSO batch [`Batcher::next`] gathered leaves.
#[derive(Clone, Copy, Debug)]
pub struct Batch {
    /// The destination of every datagram in it.
    pub to: SocketAddr,
    /// The size of every datagram but the last, which may be shorter.
    pub segment: usize,
    /// The ECN codepoint of every datagram in it (one IP header's).
    pub ecn: quiche::Ecn,
}

/// Bytes of a buffer [`Batcher::next`] builds a batch in: the most a batch
/// carries and room to build one more packet past it.
pub const BATCH_BYTES: usize = MAX_GSO_BYTES + MAX_MTU;

/// Gathers a connection's packets that pacing lets leave into GSO batches:
/// equal-size packets (the last of a batch may be shorter) to one
/// destination with one ECN codepoint, at most `max_segments` of them and
/// [`MAX_GSO_BYTES`]. Packets are built where they are sent from; only one
/// that does not fit a batch is copied, to start the next. Both socket
/// paths send what it gathers.
pub struct Batcher {
    /// A packet built that did not fit the last batch: it starts the next.
    carry: Box<[u8; MAX_MTU]>,
    carried: Option<(usize, quiche::SendInfo)>,
    max_segments: usize,
    pace_until: Option<Instant>,
}

impl Batcher {
    /// A batcher for batches of up to `max_segments` datagrams.
    pub fn new(max_segments: usize) -> Batcher {
        Batcher {
            carry: Box::new([0u8; MAX_MTU]),
            carried: None,
            max_segments: max_segments.max(1),
            pace_until: None,
        }
    }

    /// Changes the most datagrams a batch may carry.
    pub fn set_max_segments(&mut self, n: usize) {
        self.max_segments = n.max(1);
    }

    /// Builds the next batch at the start of `out` (at least
    /// [`BATCH_BYTES`] long) and says where it goes and how many bytes it
    /// has; `None` when the connection has nothing more to send now (then
    /// [`Batcher::pace_until`] says when pacing asks to come back).
    pub fn next(
        &mut self,
        conn: &mut quiche::Connection,
        out: &mut [u8],
    ) -> Option<(Batch, usize)> {
        assert!(
            out.len() >= BATCH_BYTES,
            "a batch buffer of {} bytes",
            out.len()
        );
        let mut head: Option<Batch> = None;
        let mut len = 0;
        let mut count = 0;
        loop {
            let (n, info) = match self.carried.take() {
                Some((n, info)) => {
                    out[..n].copy_from_slice(&self.carry[..n]);
                    (n, info)
                }
                None => match crate::next_packet(
                    conn,
                    &mut out[len..len + MAX_MTU],
                    Instant::now(),
                    PACING_SLACK,
                ) {
                    Next::Packet(n, info) => (n, info),
                    Next::Wait(t) => {
                        self.pace_until = Some(t);
                        return head.map(|b| (b, len));
                    }
                    Next::Idle => {
                        self.pace_until = None;
                        return head.map(|b| (b, len));
                    }
                },
            };
            let b = match head {
                None => *head.insert(Batch {
                    to: info.to,
                    segment: n,
                    ecn: info.ecn,
                }),
                Some(b) => {
                    let fits = b.to == info.to
                        && b.ecn == info.ecn
                        && n <= b.segment
                        && count < self.max_segments
                        && len + n <= MAX_GSO_BYTES;
                    if !fits {
                        self.carry[..n].copy_from_slice(&out[len..len + n]);
                        self.carried = Some((n, info));
                        return Some((b, len));
                    }
                    b
                }
            };
            len += n;
            count += 1;
            // A short packet ends a batch; so does a full one.
            if n < b.segment || count >= self.max_segments {
                return Some((b, len));
            }
        }
    }

    /// When pacing asks to come back, as the last [`Batcher::next`] that
    /// returned `None` found.
    pub fn pace_until(&self) -> Option<Instant> {
        self.pace_until
    }
}

/// Sends every packet `conn` has ready whose pacing time has come, in the
/// GSO batches a [`Batcher`] gathers (built in `batch`, grown to
/// [`BATCH_BYTES`] if shorter). Returns when the connection has nothing
/// more to send now, with the time pacing asks to come back, if any.
pub async fn flush(
    conn: &mut quiche::Connection,
    socket: &Socket,
    batch: &mut Vec<u8>,
) -> io::Result<Option<Instant>> {
    if batch.len() < BATCH_BYTES {
        batch.resize(BATCH_BYTES, 0);
    }
    let mut batcher = Batcher::new(socket.max_segments());
    while let Some((Batch { to, segment, ecn }, len)) = batcher.next(conn, batch) {
        socket.send(to, &batch[..len], segment, ecn).await?;
    }
    Ok(batcher.pace_until())
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
/// tokio's timers fire on the next millisecond tick at the earliest, and a
/// paced sender woken up to 1 ms late loses rate (or, with the pacer's
/// bounded credit, sends in bursts). A timerfd in tokio's reactor wakes
/// within the kernel's timer slack (50 µs by default) instead.
///
/// It costs as few system calls as it can: the kernel timer is re-armed
/// only when the deadline moves earlier than the armed one or the armed
/// one has passed (a deadline that moves later, as an idle timeout does
/// with every packet, is left armed: the early wake-up re-arms it once),
/// and an expiry is taken from tokio's readiness without reading the
/// descriptor (re-arming resets its count, and epoll reports each new
/// expiry as a new edge).
pub struct Timer {
    fd: AsyncFd<std::os::fd::OwnedFd>,
    /// The deadline the kernel timer is armed for, if any.
    armed: Option<Instant>,
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
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Timer { fd, armed: None })
    }

    /// Arms the kernel timer for `t` (relative to now; `now` past `t` arms
    /// it for 1 ns, so that it fires at once).
    fn arm(&mut self, t: Instant, now: Instant) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let d = t
            .saturating_duration_since(now)
            .max(std::time::Duration::from_nanos(1));
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
            return Err(io::Error::last_os_error());
        }
        self.armed = Some(t);
        Ok(())
    }

    /// Waits until `t`; forever when `None`. Cancel-safe: a new call after
    /// a cancelled one (with the same or another deadline) keeps or
    /// replaces the armed deadline as it needs.
    pub async fn sleep_until(&mut self, t: Option<Instant>) {
        let Some(t) = t else {
            return std::future::pending().await;
        };
        loop {
            let now = Instant::now();
            if t <= now {
                return;
            }
            let rearm = match self.armed {
                None => true,
                Some(a) => a <= now || t < a,
            };
            if rearm && self.arm(t, now).is_err() {
                return tokio::time::sleep_until(t.into()).await;
            }
            let Ok(mut guard) = self.fd.readable().await else {
                return tokio::time::sleep_until(t.into()).await;
            };
            // An expiry (this deadline's, an earlier armed one's, or one
            // left over from a cancelled wait): consumed without a read.
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn one_receive_reads_every_queued_datagram_and_a_later_one_still_wakes_it() {
        runtime().block_on(async {
            let s = Socket::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            for i in 0..5u8 {
                tx.send_to(&[i; 100], s.local_addr()).unwrap();
            }
            let mut rx = RecvBatch::new();
            let n = s.recv_batch(&mut rx).await.unwrap();
            assert!(n >= 1 && n < rx.capacity(), "{n}");
            let mut got = Vec::new();
            rx.for_each(|d, from, ecn| {
                assert_eq!(from, tx.local_addr().unwrap());
                assert_eq!(ecn, quiche::Ecn::NotEct);
                assert_eq!(d.len(), 100);
                got.push(d[0]);
            });
            assert_eq!(got, [0, 1, 2, 3, 4]);
            // That short read marked the socket not readable without
            // another call; a datagram that comes later still wakes it.
            let (t, to) = (tx.try_clone().unwrap(), s.local_addr());
            let sender = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                t.send_to(&[9; 10], to).unwrap();
            });
            let n = tokio::time::timeout(Duration::from_secs(10), s.recv_batch(&mut rx))
                .await
                .expect("a later datagram wakes the receive")
                .unwrap();
            assert_eq!(n, 1);
            sender.join().unwrap();
        });
    }

    #[test]
    fn the_timer_wakes_at_a_deadline_moved_earlier_and_not_before_one_moved_later() {
        runtime().block_on(async {
            let mut t = Timer::new().unwrap();
            let start = Instant::now();
            // Armed for 10 s, then the wait is dropped and the deadline
            // moves to 30 ms: the kernel timer is re-armed earlier.
            let far = start + Duration::from_secs(10);
            let _ = tokio::time::timeout(Duration::from_millis(5), t.sleep_until(Some(far))).await;
            let near = start + Duration::from_millis(30);
            t.sleep_until(Some(near)).await;
            assert!(Instant::now() >= near);
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{:?}",
                start.elapsed()
            );
            // Armed for 10 ms, then moved to 40 ms: the armed timer fires
            // first and the wait goes on to the later deadline.
            let a = Instant::now() + Duration::from_millis(10);
            let _ = tokio::time::timeout(Duration::from_millis(2), t.sleep_until(Some(a))).await;
            let b = Instant::now() + Duration::from_millis(40);
            t.sleep_until(Some(b)).await;
            assert!(Instant::now() >= b);
            // A deadline already passed returns at once.
            t.sleep_until(Some(Instant::now())).await;
        });
    }
}
