//! The socket path with one system call per wake-up: io_uring.
//!
//! The epoll path ([`crate::io`]) costs three system calls every time a
//! datagram arrives alone: `epoll_wait` to learn that it came, `recvmmsg`
//! to read it, `sendmsg` for the ACK or the packet it releases. An endpoint
//! on a link of tens of Mbit/s is woken for nearly every datagram, so it
//! spent about six system calls per data packet over both ends, where Linux
//! TCP spends one (docs/endpoint-cost.md).
//!
//! Here the receives are requests kept waiting in an io_uring (one
//! `recvmsg` per slot, [`RECV_SLOTS`] of them, re-armed without a system
//! call as each completes), the sends are queued as requests too, and one
//! `io_uring_enter` both hands the kernel what was queued and waits for the
//! next datagram, the deadline, or a wake-up from another thread
//! ([`Waker`]): one system call per wake-up.
//!
//! Sends keep their data in slots until the kernel has taken it; a
//! successful UDP send completes during the call that submits it, so the
//! wait asks for that completion and one more, and a send does not end the
//! wait by itself.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};
use quinn_udp::{UdpSockRef, UdpSocketState};

use crate::io::{Batch, Batcher, BATCH_BYTES};

/// Receive requests kept waiting.
pub const RECV_SLOTS: usize = 32;
/// Sends that may be in flight at once.
const SEND_SLOTS: usize = 64;
/// Bytes of one receive slot: a GRO message of up to 64 KiB.
const RECV_BYTES: usize = 65_536;
/// Room for the control messages of one receive (packet info, TOS or
/// traffic class, GRO segment size) or one send (segment size, TOS).
const CTRL_WORDS: usize = 32;

const KIND_RECV: u64 = 1 << 32;
const KIND_SEND: u64 = 2 << 32;
const KIND_WAKE: u64 = 3 << 32;
const KIND_CANCEL: u64 = 4 << 32;
const KIND_MASK: u64 = 0xffff_ffff << 32;

/// Which socket path the endpoints use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// io_uring when the kernel offers it (Linux 5.11 or later, not
    /// disabled by `kernel.io_uring_disabled` or a seccomp filter), else
    /// epoll.
    #[default]
    Auto,
    /// io_uring, or an error naming why not.
    Uring,
    /// tokio's epoll reactor ([`crate::io::Socket`]).
    Epoll,
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<IoMode, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "uring" | "io_uring" => Ok(IoMode::Uring),
            "epoll" => Ok(IoMode::Epoll),
            _ => Err(format!(
                "unknown I/O path `{s}`: expected auto, uring or epoll"
            )),
        }
    }
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoMode::Auto => "auto",
            IoMode::Uring => "uring",
            IoMode::Epoll => "epoll",
        })
    }
}

/// Wakes a thread waiting in [`Ring::wait`] from anywhere (another
/// thread, a signal handler): [`Event::Wake`] is reported once for any
/// number of wakes since the last one.
#[derive(Clone)]
pub struct Waker(Arc<OwnedFd>);

impl Waker {
    /// Wakes the ring.
    pub fn wake(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// What a wait brought.
pub enum Event<'a> {
    /// A datagram (a GRO message already split at its stride), its sender
    /// and its ECN codepoint.
    Datagram(&'a mut [u8], SocketAddr, quiche::Ecn),
    /// [`Waker::wake`] was called.
    Wake,
}

struct RecvSlot {
    hdr: libc::msghdr,
    iov: libc::iovec,
    name: libc::sockaddr_storage,
    ctrl: [u64; CTRL_WORDS],
    buf: Box<[u8]>,
}

struct SendSlot {
    hdr: libc::msghdr,
    iov: libc::iovec,
    name: libc::sockaddr_storage,
    ctrl: [u64; CTRL_WORDS],
    /// [`BATCH_BYTES`] long; the send's bytes are its first `len`.
    buf: Box<[u8]>,
    len: usize,
    segment: usize,
}

/// A UDP socket read and written through an io_uring.
pub struct Ring {
    ring: IoUring,
    /// Owns the descriptor the requests use (`fd`); closed after the ring.
    _socket: std::net::UdpSocket,
    fd: RawFd,
    local: SocketAddr,
    v6: bool,
    max_segments: usize,
    recv: Box<[RecvSlot]>,
    send: Box<[SendSlot]>,
    free_send: Vec<usize>,
    /// Requests submitted or queued whose completion has not been seen.
    recv_pending: usize,
    send_pending: usize,
    wake_pending: bool,
    /// Receives reaped and not yet handed over: slot and result.
    ready: std::collections::VecDeque<(usize, i32)>,
    /// Bytes of the front of `ready` already handed over.
    ready_off: usize,
    /// Most datagrams one wait hands over ([`Ring::set_datagrams_per_wait`]).
    per_wait: usize,
    /// A wake-up reaped and not yet handed over.
    woken: bool,
    wake_fd: Arc<OwnedFd>,
    wake_buf: Box<u64>,
    /// The first send error other than a refused destination since the
    /// last [`Ring::take_send_error`].
    send_error: Option<io::Error>,
    batcher: Batcher,
}

// SAFETY: the raw pointers in the slots point into memory the Ring owns
// (boxed, so it does not move with the Ring); the kernel uses them only
// for requests the Ring submitted and reaps before it is dropped.
unsafe impl Send for Ring {}

fn storage_of(addr: SocketAddr, v6: bool) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let addr = match (addr, v6) {
        (SocketAddr::V4(a), true) => {
            SocketAddr::V6(SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0))
        }
        (a, _) => a,
    };
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut st as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            };
            (
                st,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut st as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            (
                st,
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}

fn addr_of(st: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match st.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let sin = unsafe { &*(st as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let sin6 = unsafe { &*(st as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The ECN bits and the GRO stride a receive's control messages carry.
///
/// # Safety
/// `hdr` is a msghdr the kernel filled, its control buffer valid for
/// `msg_controllen` bytes.
unsafe fn read_cmsgs(hdr: &libc::msghdr) -> (u8, Option<usize>) {
    let mut tos = 0u8;
    let mut stride = None;
    let mut c = libc::CMSG_FIRSTHDR(hdr);
    while !c.is_null() {
        let h = &*c;
        let data = libc::CMSG_DATA(c);
        match (h.cmsg_level, h.cmsg_type) {
            // IPv4's TOS is one byte; IPv6's traffic class an int.
            (libc::IPPROTO_IP, libc::IP_TOS) => tos = *data,
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                tos = std::ptr::read_unaligned(data as *const libc::c_int) as u8
            }
            (libc::SOL_UDP, libc::UDP_GRO) => {
                stride = Some(std::ptr::read_unaligned(data as *const libc::c_int) as usize)
            }
            _ => {}
        }
        c = libc::CMSG_NXTHDR(hdr, c);
    }
    (tos, stride)
}

impl Ring {
    /// Binds `addr` and sets up the ring, or says why io_uring cannot be
    /// used here.
    pub fn bind(addr: SocketAddr) -> io::Result<Ring> {
        let socket = std::net::UdpSocket::bind(addr)?;
        Ring::new(socket)
    }

    /// Takes over `socket` (its options are set as [`crate::io::Socket`]
    /// sets them: ECN and packet info reported, GRO on, PMTU probing).
    pub fn new(socket: std::net::UdpSocket) -> io::Result<Ring> {
        socket.set_nonblocking(true)?;
        let state = UdpSocketState::new(UdpSockRef::from(&socket))?;
        let _ = state.set_send_buffer_size(UdpSockRef::from(&socket), 8 << 20);
        let _ = state.set_recv_buffer_size(UdpSockRef::from(&socket), 8 << 20);
        let max_segments = state
            .max_gso_segments()
            .clamp(1, u16::MAX as usize / crate::MAX_DATAGRAM_SIZE);
        let local = socket.local_addr()?;
        let ring = new_ring()?;
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::other(
                "this kernel's io_uring cannot wait with a timeout (Linux 5.11 or later)",
            ));
        }
        // SAFETY: eventfd has no memory-safety preconditions; the
        // descriptor is owned by the OwnedFd from here on.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` is a fresh descriptor nothing else owns.
        let wake_fd = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let recv = (0..RECV_SLOTS)
            .map(|_| RecvSlot {
                // SAFETY: all-zero msghdr, iovec and sockaddr_storage are valid.
                hdr: unsafe { std::mem::zeroed() },
                iov: unsafe { std::mem::zeroed() },
                name: unsafe { std::mem::zeroed() },
                ctrl: [0; CTRL_WORDS],
                buf: vec![0u8; RECV_BYTES].into_boxed_slice(),
            })
            .collect();
        let send = (0..SEND_SLOTS)
            .map(|_| SendSlot {
                // SAFETY: as above.
                hdr: unsafe { std::mem::zeroed() },
                iov: unsafe { std::mem::zeroed() },
                name: unsafe { std::mem::zeroed() },
                ctrl: [0; CTRL_WORDS],
                buf: vec![0u8; BATCH_BYTES].into_boxed_slice(),
                len: 0,
                segment: 0,
            })
            .collect();
        let fd = socket.as_raw_fd();
        let mut r = Ring {
            ring,
            _socket: socket,
            fd,
            local,
            v6: local.is_ipv6(),
            max_segments,
            recv,
            send,
            free_send: (0..SEND_SLOTS).rev().collect(),
            recv_pending: 0,
            send_pending: 0,
            wake_pending: false,
            ready: std::collections::VecDeque::with_capacity(RECV_SLOTS),
            ready_off: 0,
            per_wait: usize::MAX,
            woken: false,
            wake_fd,
            wake_buf: Box::new(0),
            send_error: None,
            batcher: Batcher::new(max_segments),
        };
        for i in 0..RECV_SLOTS {
            r.arm_recv(i)?;
        }
        r.arm_wake()?;
        Ok(r)
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// A handle that wakes this ring's wait.
    pub fn waker(&self) -> Waker {
        Waker(self.wake_fd.clone())
    }

    /// Datagrams one send may carry.
    pub fn max_segments(&self) -> usize {
        self.max_segments
    }

    fn push(&mut self, e: &io_uring::squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry we push points into memory the Ring owns
            // and keeps until its completion is reaped.
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return Ok(());
            }
            // The queue is full: hand it to the kernel (no wait).
            self.ring.submit()?;
        }
    }

    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let s = &mut self.recv[i];
        s.iov = libc::iovec {
            iov_base: s.buf.as_mut_ptr().cast(),
            iov_len: s.buf.len(),
        };
        s.hdr.msg_name = (&mut s.name as *mut libc::sockaddr_storage).cast();
        s.hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        s.hdr.msg_iov = &mut s.iov;
        s.hdr.msg_iovlen = 1;
        s.hdr.msg_control = s.ctrl.as_mut_ptr().cast();
        s.hdr.msg_controllen = std::mem::size_of_val(&s.ctrl) as _;
        s.hdr.msg_flags = 0;
        let e = opcode::RecvMsg::new(types::Fd(self.fd), &mut s.hdr)
            .build()
            .user_data(KIND_RECV | i as u64);
        self.push(&e)?;
        self.recv_pending += 1;
        Ok(())
    }

    fn arm_wake(&mut self) -> io::Result<()> {
        let e = opcode::Read::new(
            types::Fd(self.wake_fd.as_raw_fd()),
            (&mut *self.wake_buf as *mut u64).cast(),
            8,
        )
        .build()
        .user_data(KIND_WAKE);
        self.push(&e)?;
        self.wake_pending = true;
        Ok(())
    }

    /// A free send slot, waiting for one when every slot is in flight.
    fn free_slot(&mut self) -> io::Result<usize> {
        if self.free_send.is_empty() {
            // Every slot is queued or in flight: hand the queue to the
            // kernel, where a UDP send completes at once.
            self.ring.submit()?;
            self.reap()?;
        }
        while self.free_send.is_empty() {
            // Still none (a full socket buffer): wait for one.
            self.ring.submit_and_wait(1)?;
            self.reap()?;
        }
        Ok(self.free_send.pop().expect("a free slot"))
    }

    /// Queues `contents` (segments of `segment` bytes, the last may be
    /// shorter; at most [`crate::io::MAX_GSO_BYTES`]) to `to` with `ecn` in
    /// each datagram's IP header. It leaves with the next [`Ring::wait`]
    /// (or sooner, when every send slot is taken and one must be freed).
    pub fn send(
        &mut self,
        to: SocketAddr,
        contents: &[u8],
        segment: usize,
        ecn: quiche::Ecn,
    ) -> io::Result<()> {
        let i = self.free_slot()?;
        let n = contents.len().min(BATCH_BYTES);
        self.send[i].buf[..n].copy_from_slice(&contents[..n]);
        self.submit_slot(i, n, to, segment, ecn)
    }

    /// Queues the send of slot `i`'s first `len` bytes.
    fn submit_slot(
        &mut self,
        i: usize,
        len: usize,
        to: SocketAddr,
        segment: usize,
        ecn: quiche::Ecn,
    ) -> io::Result<()> {
        let v6 = self.v6;
        let s = &mut self.send[i];
        s.len = len;
        s.segment = segment;
        let (name, namelen) = storage_of(to, v6);
        s.name = name;
        s.iov = libc::iovec {
            iov_base: s.buf.as_mut_ptr().cast(),
            iov_len: len,
        };
        s.hdr.msg_name = (&mut s.name as *mut libc::sockaddr_storage).cast();
        s.hdr.msg_namelen = namelen;
        s.hdr.msg_iov = &mut s.iov;
        s.hdr.msg_iovlen = 1;
        s.hdr.msg_flags = 0;
        s.ctrl = [0; CTRL_WORDS];
        s.hdr.msg_control = s.ctrl.as_mut_ptr().cast();
        s.hdr.msg_controllen = std::mem::size_of_val(&s.ctrl) as _;
        let mut used = 0usize;
        // SAFETY: the control buffer is CTRL_WORDS words, room for both
        // messages; CMSG_NXTHDR returns null past its end.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&s.hdr);
            let tos = ecn.bits() as libc::c_int;
            if tos != 0 && !c.is_null() {
                let (level, kind) = if v6 {
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
                } else {
                    (libc::IPPROTO_IP, libc::IP_TOS)
                };
                (*c).cmsg_level = level;
                (*c).cmsg_type = kind;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, tos);
                used += libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
                c = libc::CMSG_NXTHDR(&s.hdr, c);
            }
            if len > segment && !c.is_null() {
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, segment as u16);
                used += libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as usize;
            }
        }
        s.hdr.msg_controllen = used as _;
        if used == 0 {
            s.hdr.msg_control = std::ptr::null_mut();
        }
        let e = opcode::SendMsg::new(types::Fd(self.fd), &s.hdr)
            .build()
            .user_data(KIND_SEND | i as u64);
        self.push(&e)?;
        self.send_pending += 1;
        Ok(())
    }

    /// Sends every packet `conn` has ready whose pacing time has come, in
    /// GSO batches as [`crate::io::flush`] does, each built in the send
    /// slot it leaves from; returns the time pacing asks to come back, if
    /// any. The packets leave with the next wait.
    pub fn flush(&mut self, conn: &mut quiche::Connection) -> io::Result<Option<Instant>> {
        self.batcher.set_max_segments(self.max_segments);
        let mut batches = 0;
        loop {
            let i = self.free_slot()?;
            match self.batcher.next(conn, &mut self.send[i].buf) {
                Some((Batch { to, segment, ecn }, len)) => {
                    // A flush of several batches hands each to the kernel
                    // as the next is built, so that the peer can work on
                    // the first while this end builds the rest; the last
                    // (and a lone one: the usual case on a shaped link)
                    // leaves with the wait.
                    if batches > 0 {
                        self.ring.submit()?;
                    }
                    self.submit_slot(i, len, to, segment, ecn)?;
                    batches += 1;
                }
                None => {
                    self.free_send.push(i);
                    return Ok(self.batcher.pace_until());
                }
            }
        }
    }

    /// Hands the kernel whatever is queued (the last sends before an end
    /// stops), without waiting; no system call when nothing is.
    pub fn submit_queued(&mut self) -> io::Result<()> {
        if !self.ring.submission().is_empty() {
            self.ring.submit()?;
        }
        Ok(())
    }

    /// The first send error since the last call, other than a refused
    /// destination (a peer that went away: QUIC's timers handle that).
    pub fn take_send_error(&mut self) -> Option<io::Error> {
        self.send_error.take()
    }

    /// Hands over at most `n` datagrams per [`Ring::wait`] (all, unless
    /// set). The rest wait in the ring and the next wait hands them over
    /// without a system call, so an end that works between waits (sends
    /// its ACK after each datagram, say) does so as if they had come one by
    /// one, whatever the host batched.
    pub fn set_datagrams_per_wait(&mut self, n: usize) {
        self.per_wait = n.max(1);
    }

    /// Submits what was queued and waits until a datagram or a wake-up
    /// comes, or `deadline` passes (`None`: no deadline); then calls `f`
    /// for the datagrams received (at most [`Ring::set_datagrams_per_wait`])
    /// and a wake-up if one came, in the order the kernel completed them.
    /// One system call when something came or the deadline passed while
    /// waiting; none while datagrams received earlier are still to be
    /// handed over (what was queued to send then leaves with the next
    /// call).
    pub fn wait(
        &mut self,
        deadline: Option<Instant>,
        mut f: impl FnMut(Event<'_>),
    ) -> io::Result<()> {
        // Datagrams already received (a wait that handed over only some,
        // or receives reaped while a send waited for a free slot) are
        // handed over without a call.
        if !self.ready.is_empty() || self.woken {
            return self.deliver(&mut f);
        }
        self.reap()?;
        if !self.ready.is_empty() || self.woken {
            if !self.ring.submission().is_empty() {
                self.ring.submit()?;
            }
            return self.deliver(&mut f);
        }
        // The sends just queued complete as they are submitted; wait for
        // those and one more.
        let want = self.send_pending + 1;
        let r = match deadline {
            None => self.ring.submit_and_wait(want),
            Some(t) => {
                // A deadline already passed waits for nothing.
                let d = t.saturating_duration_since(Instant::now());
                let ts = types::Timespec::from(d);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
        };
        match r {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) => {}
            Err(e) => return Err(e),
        }
        self.reap()?;
        self.deliver(&mut f)
    }

    /// Takes every completion from the queue: sends free their slots,
    /// receives wait in [`Ring::ready`] for [`Ring::deliver`], a wake-up
    /// sets [`Ring::woken`] and is read again.
    fn reap(&mut self) -> io::Result<()> {
        loop {
            let Some(c) = self.ring.completion().next() else {
                return Ok(());
            };
            let data = c.user_data();
            let res = c.result();
            let i = (data & !KIND_MASK) as usize;
            match data & KIND_MASK {
                KIND_RECV => {
                    self.recv_pending -= 1;
                    self.ready.push_back((i, res));
                }
                KIND_SEND => {
                    self.send_pending -= 1;
                    self.free_send.push(i);
                    if res < 0 {
                        let e = io::Error::from_raw_os_error(-res);
                        let gso = self.send[i].len > self.send[i].segment;
                        if gso && (quinn_udp::is_msg_size_err(&e) || -res == libc::EIO) {
                            // The path refuses segmentation offload: send
                            // one datagram at a time from now on; QUIC
                            // recovers this batch as lost.
                            self.max_segments = 1;
                        } else if -res != libc::ECONNREFUSED && self.send_error.is_none() {
                            self.send_error = Some(e);
                        }
                    }
                }
                KIND_WAKE => {
                    self.wake_pending = false;
                    if res >= 0 || -res == libc::EAGAIN {
                        self.woken = true;
                    }
                    self.arm_wake()?;
                }
                _ => {}
            }
        }
    }

    /// Hands the receives reaped to `f` in the order they completed (GRO
    /// messages split at their stride), at most [`Ring::per_wait`]
    /// datagrams, and re-arms the slots it empties; then the wake-up, if
    /// one came.
    fn deliver(&mut self, f: &mut impl FnMut(Event<'_>)) -> io::Result<()> {
        let mut handed = 0;
        while let Some(&(i, res)) = self.ready.front() {
            if res > 0 {
                let s = &mut self.recv[i];
                // SAFETY: the kernel filled this msghdr.
                let (tos, stride) = unsafe { read_cmsgs(&s.hdr) };
                let len = res as usize;
                let stride = stride.unwrap_or(len).max(1);
                if let Some(from) = addr_of(&s.name) {
                    let ecn = quiche::Ecn::from_tos(tos);
                    while self.ready_off < len {
                        if handed == self.per_wait {
                            return self.deliver_wake(f);
                        }
                        let off = self.ready_off;
                        let end = (off + stride).min(len);
                        f(Event::Datagram(&mut s.buf[off..end], from, ecn));
                        self.ready_off = end;
                        handed += 1;
                    }
                }
            }
            self.ready.pop_front();
            self.ready_off = 0;
            // A receive that failed (an ICMP error queued on the socket,
            // say) ends that one request only: re-armed.
            self.arm_recv(i)?;
        }
        self.deliver_wake(f)
    }

    fn deliver_wake(&mut self, f: &mut impl FnMut(Event<'_>)) -> io::Result<()> {
        if std::mem::take(&mut self.woken) {
            f(Event::Wake);
        }
        Ok(())
    }
}

impl Drop for Ring {
    /// Cancels the waiting receives and the wake-up read and reaps every
    /// completion, so that the kernel writes into no slot after it is
    /// freed; if that does not finish within a second, the slots are
    /// leaked instead.
    fn drop(&mut self) {
        for i in 0..RECV_SLOTS {
            let e = opcode::AsyncCancel::new(KIND_RECV | i as u64)
                .build()
                .user_data(KIND_CANCEL);
            let _ = self.push(&e);
        }
        let e = opcode::AsyncCancel::new(KIND_WAKE)
            .build()
            .user_data(KIND_CANCEL);
        let _ = self.push(&e);
        let end = Instant::now() + Duration::from_secs(1);
        while self.recv_pending + self.send_pending > 0 || self.wake_pending {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            while let Some(c) = self.ring.completion().next() {
                let data = c.user_data();
                match data & KIND_MASK {
                    KIND_RECV => self.recv_pending -= 1,
                    KIND_SEND => self.send_pending -= 1,
                    KIND_WAKE => self.wake_pending = false,
                    _ => {}
                }
            }
        }
        if self.recv_pending + self.send_pending > 0 || self.wake_pending {
            std::mem::forget(std::mem::take(&mut self.recv));
            std::mem::forget(std::mem::take(&mut self.send));
            std::mem::forget(std::mem::replace(&mut self.wake_buf, Box::new(0)));
        }
    }
}

/// A ring of 256 entries whose completions run at the thread's next
/// transition to the kernel instead of interrupting it
/// (`IORING_SETUP_COOP_TASKRUN`, Linux 5.19), else a plain one.
///
/// Not `DEFER_TASKRUN` (6.1), which runs completions only when the thread
/// waits for them: measured beside this one (`make syscalls`, NewReno at
/// 20 Mbit/s), it cost 2.49 system calls per data packet where this cost
/// 2.07, since a datagram that arrived while the end worked could then be
/// seen only by another call.
fn new_ring() -> io::Result<IoUring> {
    match IoUring::builder().setup_coop_taskrun().build(256) {
        Ok(r) => Ok(r),
        Err(_) => IoUring::builder().build(256),
    }
}

/// Whether io_uring is usable here: a ring can be made and a request
/// completes. The reason when not.
pub fn available() -> Result<(), String> {
    let mut ring = IoUring::new(4).map_err(|e| format!("io_uring_setup: {e}"))?;
    if !ring.params().is_feature_ext_arg() {
        return Err(
            "this kernel's io_uring cannot wait with a timeout (Linux 5.11 or later)".into(),
        );
    }
    let e = opcode::Nop::new().build().user_data(1);
    // SAFETY: a no-op references no memory.
    unsafe { ring.submission().push(&e) }.map_err(|e| e.to_string())?;
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring_enter: {e}"))?;
    let c = ring.completion().next();
    match c {
        Some(c) if c.result() >= 0 => Ok(()),
        Some(c) => Err(format!(
            "a no-op request failed: {}",
            io::Error::from_raw_os_error(-c.result())
        )),
        None => Err("a no-op request did not complete".into()),
    }
}

/// Resolves [`IoMode::Auto`]: whether to use io_uring, and an error for
/// [`IoMode::Uring`] where it cannot be had.
pub fn choose(mode: IoMode) -> io::Result<bool> {
    match mode {
        IoMode::Epoll => Ok(false),
        IoMode::Auto => Ok(available().is_ok()),
        IoMode::Uring => available().map(|()| true).map_err(|why| {
            io::Error::other(format!("--io uring: io_uring is not usable here: {why}"))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring on the loopback, or `None` (a visible skip; a failure under
    /// CI) where io_uring is not usable.
    fn ring() -> Option<Ring> {
        if let Err(why) = available() {
            test_support::skip(&format!("io_uring: {why}"));
            return None;
        }
        Some(Ring::bind("127.0.0.1:0".parse().unwrap()).unwrap())
    }

    /// Waits (up to `limit` waits of 2 s each) until `want` datagrams came.
    fn receive(r: &mut Ring, want: usize, limit: usize) -> Vec<(Vec<u8>, SocketAddr, quiche::Ecn)> {
        let mut got = Vec::new();
        for _ in 0..limit {
            if got.len() >= want {
                break;
            }
            r.wait(Some(Instant::now() + Duration::from_secs(2)), |ev| {
                if let Event::Datagram(d, from, ecn) = ev {
                    got.push((d.to_vec(), from, ecn));
                }
            })
            .unwrap();
        }
        got
    }

    #[test]
    fn datagrams_come_in_the_order_they_were_sent_and_from_their_sender() {
        let Some(mut r) = ring() else { return };
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // More than the receive slots at once, several times over.
        let n = 10 * RECV_SLOTS;
        for i in 0..n as u32 {
            tx.send_to(&i.to_be_bytes(), r.local_addr()).unwrap();
        }
        let got = receive(&mut r, n, 1000);
        assert_eq!(got.len(), n);
        for (i, (d, from, ecn)) in got.iter().enumerate() {
            assert_eq!(d[..], (i as u32).to_be_bytes(), "datagram {i} out of order");
            assert_eq!(*from, tx.local_addr().unwrap());
            assert_eq!(*ecn, quiche::Ecn::NotEct);
        }
    }

    #[test]
    fn a_wait_hands_over_at_most_the_datagrams_asked_and_the_next_the_rest() {
        let Some(mut r) = ring() else { return };
        r.set_datagrams_per_wait(1);
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..5u8 {
            tx.send_to(&[i; 10], r.local_addr()).unwrap();
        }
        // Let all five arrive before the first wait takes them.
        std::thread::sleep(Duration::from_millis(20));
        let mut got = Vec::new();
        for _ in 0..100 {
            let mut this = 0;
            r.wait(Some(Instant::now() + Duration::from_secs(2)), |ev| {
                if let Event::Datagram(d, _, _) = ev {
                    got.push(d[0]);
                    this += 1;
                }
            })
            .unwrap();
            assert!(this <= 1, "{this} datagrams in one wait");
            if got.len() == 5 {
                break;
            }
        }
        assert_eq!(got, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_wait_ends_at_its_deadline_or_at_a_wake_from_another_thread() {
        let Some(mut r) = ring() else { return };
        let deadline = Instant::now() + Duration::from_millis(20);
        let mut events = 0;
        r.wait(Some(deadline), |_| events += 1).unwrap();
        assert_eq!(events, 0);
        assert!(Instant::now() >= deadline);

        let waker = r.waker();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            waker.wake();
            waker.wake();
        });
        let mut woken = 0;
        for _ in 0..100 {
            r.wait(Some(Instant::now() + Duration::from_secs(10)), |ev| {
                if let Event::Wake = ev {
                    woken += 1;
                }
            })
            .unwrap();
            if woken > 0 {
                break;
            }
        }
        t.join().unwrap();
        // Two wakes before the wait saw them are one event.
        assert_eq!(woken, 1);
    }

    #[test]
    fn a_segmented_send_arrives_as_its_datagrams_with_its_ecn_codepoint() {
        let Some(mut tx) = ring() else { return };
        let mut rx = Ring::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let segment = 1200;
        let mut contents = Vec::new();
        for i in 0..4u8 {
            let len = if i == 3 { 500 } else { segment };
            contents.extend(std::iter::repeat_n(i, len));
        }
        let segment = if tx.max_segments() > 1 {
            segment
        } else {
            contents.len()
        };
        tx.send(rx.local_addr(), &contents, segment, quiche::Ecn::Ect1)
            .unwrap();
        tx.wait(Some(Instant::now()), |_| {}).unwrap();
        assert!(tx.take_send_error().is_none());
        let got = receive(&mut rx, 4, 100);
        if tx.max_segments() > 1 {
            let sizes: Vec<usize> = got.iter().map(|g| g.0.len()).collect();
            assert_eq!(sizes, [1200, 1200, 1200, 500]);
            for (i, g) in got.iter().enumerate() {
                assert!(g.0.iter().all(|&b| b == i as u8));
            }
        }
        for g in &got {
            assert_eq!(g.1, tx.local_addr());
            assert_eq!(g.2, quiche::Ecn::Ect1);
        }
    }

    #[test]
    fn sends_beyond_the_slots_wait_for_room_and_all_leave() {
        let Some(mut tx) = ring() else { return };
        let mut rx = Ring::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let n = 3 * SEND_SLOTS;
        for i in 0..n as u32 {
            tx.send(rx.local_addr(), &i.to_be_bytes(), 4, quiche::Ecn::NotEct)
                .unwrap();
        }
        tx.wait(Some(Instant::now()), |_| {}).unwrap();
        let got = receive(&mut rx, n, 1000);
        assert_eq!(got.len(), n);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, g)| g.0[..] == (i as u32).to_be_bytes()));
    }

    #[test]
    fn io_modes_parse_and_name_what_is_allowed() {
        assert_eq!("uring".parse::<IoMode>().unwrap(), IoMode::Uring);
        assert_eq!("epoll".parse::<IoMode>().unwrap(), IoMode::Epoll);
        assert_eq!("auto".parse::<IoMode>().unwrap(), IoMode::Auto);
        let e = "kqueue".parse::<IoMode>().unwrap_err();
        assert!(
            e.contains("kqueue") && e.contains("auto, uring or epoll"),
            "{e}"
        );
        assert!(!choose(IoMode::Epoll).unwrap());
    }
}
