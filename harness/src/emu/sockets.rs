//! The emulator's sockets: buffers, kernel arrival stamps, and datagrams
//! in batches: received with their senders, stamps and TOS bytes
//! (`recvmmsg`), sent with their destinations and TOS bytes (`sendmmsg`).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use super::config::{EmuConfig, EmuError};

/// Enters the configured namespace and binds every route's listening
/// socket (non-blocking, large buffers, arrival stamps).
pub(super) fn bind_listeners(cfg: &EmuConfig) -> Result<Vec<UdpSocket>, EmuError> {
    if let Some(ns) = &cfg.netns {
        crate::netns::enter(ns).map_err(|source| EmuError::Netns {
            name: ns.clone(),
            source,
        })?;
    }
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    cfg.routes
        .iter()
        .map(|r| {
            let s = UdpSocket::bind(r.listen).map_err(|source| EmuError::Bind {
                addr: r.listen,
                source,
            })?;
            s.set_nonblocking(true)?;
            set_buffers(&s);
            enable_rx_timestamps(&s);
            enable_gro(&s);
            Ok(s)
        })
        .collect()
}

/// A new flow's own socket towards the route's `target`.
pub(super) fn upstream_socket(target: SocketAddr) -> io::Result<UdpSocket> {
    let bind: SocketAddr = if target.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let up = UdpSocket::bind(bind)?;
    up.connect(target)?;
    up.set_nonblocking(true)?;
    set_buffers(&up);
    enable_rx_timestamps(&up);
    enable_gro(&up);
    Ok(up)
}

/// Sets an int socket option; whether the kernel took it.
fn set_int(s: &UdpSocket, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: setsockopt with a c_int option on a valid fd.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &value as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

fn set_buffers(s: &UdpSocket) {
    let size: libc::c_int = 8 << 20;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        // The forcing option needs CAP_NET_ADMIN; the plain one is capped.
        let _ =
            set_int(s, libc::SOL_SOCKET, force, size) || set_int(s, libc::SOL_SOCKET, plain, size);
    }
}

/// Asks the kernel to stamp each datagram's arrival (`SO_TIMESTAMPNS`)
/// and to pass its TOS or Traffic Class byte, whose two low bits are the
/// ECN codepoint (`IP_RECVTOS`, and `IPV6_RECVTCLASS` on an IPv6 socket).
fn enable_rx_timestamps(s: &UdpSocket) {
    let v6 = s.local_addr().is_ok_and(|a| a.is_ipv6());
    let mut opts = vec![
        (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS),
        (libc::IPPROTO_IP, libc::IP_RECVTOS),
    ];
    if v6 {
        opts.push((libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS));
    }
    for (level, opt) in opts {
        set_int(s, level, opt, 1);
    }
}

/// Asks the kernel to hand over a sender's segmentation-offload batch, and
/// a burst of equal-size datagrams from one sender, as one message
/// (`UDP_GRO`; its control message says the size of each datagram), so that
/// a burst costs one receive and not one per datagram. A kernel without it
/// (before Linux 5.0) delivers them one by one, as before.
fn enable_gro(s: &UdpSocket) {
    set_int(s, libc::SOL_UDP, libc::UDP_GRO, 1);
}

/// Whether sends on `s` may carry several datagrams of one size in one
/// message (`UDP_SEGMENT`, Linux 4.18): the kernel accepts the option (0,
/// its default: no segmentation unless a send asks for it).
pub(super) fn gso_supported(s: &UdpSocket) -> bool {
    set_int(s, libc::SOL_UDP, libc::UDP_SEGMENT, 0)
}

/// Most datagrams one segmented send may carry (the kernel's
/// `UDP_MAX_SEGMENTS`).
pub(super) const MAX_SEGMENTS: usize = 64;

/// Datagrams one `recvmmsg` or `sendmmsg` moves at most: more than a wake
/// of the relay usually finds at 1 Gbit/s (some 16 per read on loopback),
/// while the receive slots (64 KiB each, room for the largest datagram)
/// stay at 2 MiB.
pub(super) const BATCH: usize = 32;

/// One datagram for [`send_batch`].
pub(super) struct Outgoing<'a> {
    /// Its bytes.
    pub data: &'a [u8],
    /// Its destination; `None` on a connected socket, for its peer.
    pub to: Option<SocketAddr>,
    /// The TOS or Traffic Class byte to send it with, whose two low bits
    /// are the ECN codepoint; 0 sends it plainly, as `send` would.
    pub tos: u8,
    /// `Some(size)`: `data` is several datagrams of `size` bytes (the last
    /// may be shorter), sent as one message the kernel splits
    /// (`UDP_SEGMENT`); see [`gso_supported`].
    pub segment: Option<u16>,
    /// How many datagrams `data` is (1 without `segment`): what a refusal
    /// counts.
    pub datagrams: u64,
}

/// Sends `msgs` on `fd` in their order, up to [`BATCH`] per `sendmmsg`,
/// and returns how many the kernel refused. A datagram with a non-zero
/// `tos` carries it as ancillary data for that datagram alone (`IP_TOS`,
/// or `IPV6_TCLASS` when `v6`: the caller knows the socket's family, so no
/// system call asks): how the relay passes an ECN codepoint on.
///
/// `sendmmsg` stops at the first datagram it cannot send and, when it sent
/// some before it, reports only their number, not that datagram's error.
/// So the call is made again from that datagram, which then either leaves
/// or fails first, alone, with its error; a failed datagram is counted and
/// skipped. Every datagram thus gets the verdict a `send` of its own would
/// have given it, and the others still leave.
pub(super) fn send_batch<'a>(
    fd: libc::c_int,
    v6: bool,
    msgs: impl IntoIterator<Item = Outgoing<'a>>,
) -> u64 {
    let (level, kind) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    let int = std::mem::size_of::<libc::c_int>() as u32;
    let mut msgs = msgs.into_iter();
    let mut refused = 0;
    loop {
        // SAFETY: all-zero sockaddr_storage, iovec and mmsghdr values are
        // valid (null pointers, zero lengths).
        let (mut names, mut iov, mut hdrs): (
            [libc::sockaddr_storage; BATCH],
            [libc::iovec; BATCH],
            [libc::mmsghdr; BATCH],
        ) = unsafe { std::mem::zeroed() };
        let mut name_lens = [0 as libc::socklen_t; BATCH];
        let mut tos = [0u8; BATCH];
        let mut segment = [None; BATCH];
        let mut datagrams = [1u64; BATCH];
        // Aligned (u64) room for two cmsgs of an int per message.
        let mut control = [[0u64; 8]; BATCH];
        let mut n = 0;
        for m in msgs.by_ref().take(BATCH) {
            iov[n] = libc::iovec {
                iov_base: m.data.as_ptr() as *mut libc::c_void,
                iov_len: m.data.len(),
            };
            if let Some(a) = m.to {
                (names[n], name_lens[n]) = std_to_sockaddr(a);
            }
            tos[n] = m.tos;
            segment[n] = m.segment;
            datagrams[n] = m.datagrams;
            n += 1;
        }
        if n == 0 {
            return refused;
        }
        let (names_p, iov_p, control_p) =
            (names.as_mut_ptr(), iov.as_mut_ptr(), control.as_mut_ptr());
        for (i, h) in hdrs[..n].iter_mut().enumerate() {
            let msg = &mut h.msg_hdr;
            // SAFETY: i < n <= BATCH, so every pointer stays inside its
            // array; a slot of `control` (32 bytes, aligned) holds the
            // CMSG_SPACE(4) = 24 bytes of one cmsg of an int; the arrays
            // outlive the sendmmsg calls below.
            unsafe {
                if name_lens[i] > 0 {
                    msg.msg_name = names_p.add(i) as *mut libc::c_void;
                    msg.msg_namelen = name_lens[i];
                }
                msg.msg_iov = iov_p.add(i);
                msg.msg_iovlen = 1;
                if tos[i] != 0 || segment[i].is_some() {
                    msg.msg_control = control_p.add(i) as *mut libc::c_void;
                    msg.msg_controllen = std::mem::size_of::<[u64; 8]>();
                    let mut c = libc::CMSG_FIRSTHDR(msg);
                    let mut used = 0;
                    if tos[i] != 0 {
                        (*c).cmsg_level = level;
                        (*c).cmsg_type = kind;
                        (*c).cmsg_len = libc::CMSG_LEN(int) as usize;
                        let value = libc::c_int::from(tos[i]);
                        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, value);
                        used += libc::CMSG_SPACE(int) as usize;
                        c = libc::CMSG_NXTHDR(msg, c);
                    }
                    if let Some(size) = segment[i] {
                        let two = std::mem::size_of::<u16>() as u32;
                        (*c).cmsg_level = libc::SOL_UDP;
                        (*c).cmsg_type = libc::UDP_SEGMENT;
                        (*c).cmsg_len = libc::CMSG_LEN(two) as usize;
                        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, size);
                        used += libc::CMSG_SPACE(two) as usize;
                    }
                    msg.msg_controllen = used;
                }
            }
        }
        // The first datagram not yet sent or refused.
        let mut k = 0;
        while k < n {
            // SAFETY: hdrs[k..n] are initialised headers whose names,
            // buffers and control data are live (the arrays above, and the
            // caller's datagrams, borrowed for 'a).
            let sent = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr().add(k), (n - k) as _, 0) };
            if sent > 0 {
                k += sent as usize;
            } else {
                refused += datagrams[k];
                k += 1;
            }
        }
        if n < BATCH {
            return refused;
        }
    }
}

fn std_to_sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value, and it is large
    // and aligned enough for either address family written into it.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            // SAFETY: see above.
            let s = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v4.port().to_be();
            s.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: see above.
            let s = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_addr.s6_addr = v6.ip().octets();
            s.sin6_flowinfo = v6.flowinfo();
            s.sin6_scope_id = v6.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in.
            let a = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::new(ip.into(), u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let a = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip.into(), u16::from_be(a.sin6_port)))
        }
        _ => None,
    }
}

/// One datagram as [`RecvBatch::recv`] read it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Received {
    /// Its length.
    pub len: usize,
    /// Its sender.
    pub from: Option<SocketAddr>,
    /// The kernel's arrival stamp (CLOCK_REALTIME ns), when there is one.
    pub stamp: Option<u64>,
    /// Its TOS or Traffic Class byte (0 when the kernel gave none).
    pub tos: u8,
    /// `Some(size)`: the message is several datagrams of `size` bytes
    /// coalesced by the kernel (`UDP_GRO`; the last may be shorter).
    pub stride: Option<usize>,
}

/// Bytes of one receive slot: the largest UDP datagram fits.
const SLOT: usize = 65_536;

/// Receive buffers for [`BATCH`] datagrams, and what the last
/// [`RecvBatch::recv`] read into them.
pub(super) struct RecvBatch {
    /// [`BATCH`] slots of [`SLOT`] bytes, back to back.
    bufs: Vec<u8>,
    /// The datagrams of the last call, in their order.
    got: Vec<Received>,
}

impl RecvBatch {
    /// Empty buffers.
    pub fn new() -> RecvBatch {
        RecvBatch {
            bufs: vec![0u8; BATCH * SLOT],
            got: Vec::with_capacity(BATCH),
        }
    }

    /// Receives up to `max` (at most [`BATCH`]) of the datagrams waiting on
    /// `fd`, in their order, with one `recvmmsg` that does not block; how
    /// many. Fewer than `max` means the socket had no more (or has an error
    /// it reports at the next call), so no call is needed to find that out.
    /// An error: nothing was waiting (`WouldBlock`), or the socket's pending
    /// error, such as an ICMP error for an earlier send.
    pub fn recv(&mut self, fd: libc::c_int, max: usize) -> io::Result<usize> {
        let max = max.min(BATCH);
        self.got.clear();
        // SAFETY: all-zero sockaddr_storage, iovec and mmsghdr values are
        // valid (null pointers, zero lengths).
        let (mut names, mut iov, mut hdrs): (
            [libc::sockaddr_storage; BATCH],
            [libc::iovec; BATCH],
            [libc::mmsghdr; BATCH],
        ) = unsafe { std::mem::zeroed() };
        // Aligned (u64) room for a timestamp and both a TOS and a Traffic
        // Class cmsg (an IPv6 socket can pass both for IPv4 senders).
        let mut control = [[0u64; 16]; BATCH];
        let bufs = self.bufs.as_mut_ptr();
        let (names_p, iov_p, control_p) =
            (names.as_mut_ptr(), iov.as_mut_ptr(), control.as_mut_ptr());
        // SAFETY: i < max <= BATCH, so every pointer stays inside its array
        // or its slot of `bufs`; the kernel writes at most msg_namelen bytes
        // of address, msg_controllen of control data and iov_len of data.
        let n = unsafe {
            for (i, h) in hdrs[..max].iter_mut().enumerate() {
                *iov_p.add(i) = libc::iovec {
                    iov_base: bufs.add(i * SLOT) as *mut libc::c_void,
                    iov_len: SLOT,
                };
                let msg = &mut h.msg_hdr;
                msg.msg_name = names_p.add(i) as *mut libc::c_void;
                msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                msg.msg_iov = iov_p.add(i);
                msg.msg_iovlen = 1;
                msg.msg_control = control_p.add(i) as *mut libc::c_void;
                msg.msg_controllen = std::mem::size_of::<[u64; 16]>();
            }
            let n = libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                max as _,
                libc::MSG_DONTWAIT as _,
                std::ptr::null_mut(),
            );
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            n as usize
        };
        for (h, name) in hdrs[..n].iter().zip(&names) {
            // SAFETY: the kernel filled this header's control data and set
            // msg_controllen to its length.
            let (stamp, tos, stride) = unsafe { stamp_and_tos(&h.msg_hdr) };
            self.got.push(Received {
                len: h.msg_len as usize,
                from: sockaddr_to_std(name),
                stamp,
                tos,
                stride,
            });
        }
        Ok(n)
    }

    /// The `i`th datagram of the last [`RecvBatch::recv`].
    pub fn info(&self, i: usize) -> Received {
        self.got[i]
    }

    /// The bytes of the `i`th datagram of the last [`RecvBatch::recv`].
    pub fn data(&self, i: usize) -> &[u8] {
        &self.bufs[i * SLOT..][..self.got[i].len]
    }
}

/// The arrival stamp (`SO_TIMESTAMPNS`), TOS or Traffic Class byte and
/// coalesced datagrams' size (`UDP_GRO`) among the control messages of a
/// received `msg`.
///
/// # Safety
///
/// `msg` must hold control data the kernel wrote, `msg_controllen` bytes long.
unsafe fn stamp_and_tos(msg: &libc::msghdr) -> (Option<u64>, u8, Option<usize>) {
    let (mut stamp, mut tos, mut stride) = (None, 0u8, None);
    // SAFETY: the caller vouches for the control data; CMSG_NXTHDR stops
    // at its end, and each cmsg's data is read at the type its kind has.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                // IPv4 passes the TOS byte as one byte.
                (libc::IPPROTO_IP, libc::IP_TOS) => tos = *libc::CMSG_DATA(c),
                // IPv6 passes the Traffic Class as an int.
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    tos = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int) as u8
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    let size = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                    stride = usize::try_from(size).ok().filter(|&s| s > 0);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    (stamp, tos, stride)
}

pub(super) fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    /// A socket on `addr` that receives as the relay's do: non-blocking,
    /// with arrival stamps and TOS bytes.
    fn receiver(addr: &str) -> UdpSocket {
        let s = UdpSocket::bind(addr).unwrap();
        s.set_nonblocking(true).unwrap();
        enable_rx_timestamps(&s);
        s
    }

    /// Waits until `rx` gets datagrams stamped on arrival. The kernel turns
    /// software receive stamps on for the whole machine lazily (a deferred
    /// work item, when the first socket asks for them), so a datagram sent
    /// right after may be stamped only when it is read.
    fn wait_for_stamps(rx: &UdpSocket, batch: &mut RecvBatch) {
        let to = rx.local_addr().unwrap();
        let probe = UdpSocket::bind(SocketAddr::new(to.ip(), 0)).unwrap();
        for _ in 0..500 {
            probe.send_to(b"probe", to).unwrap();
            let sent = realtime_ns();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let n = batch.recv(rx.as_raw_fd(), BATCH).unwrap();
            if (0..n).all(|i| batch.info(i).stamp.is_some_and(|s| s <= sent)) {
                return;
            }
        }
        panic!("no arrival stamps after a second");
    }

    /// Sets the TOS (IPv4) or Traffic Class (IPv6) byte `s` sends with.
    fn set_tos(s: &UdpSocket, tos: u8) {
        let (level, opt) = if s.local_addr().unwrap().is_ipv6() {
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
        } else {
            (libc::IPPROTO_IP, libc::IP_TOS)
        };
        let v = libc::c_int::from(tos);
        // SAFETY: setsockopt with an int option on a valid fd.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                level,
                opt,
                &v as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
    }

    /// Datagram `i` of a test: its length tells it apart too.
    fn payload(i: usize) -> Vec<u8> {
        let mut d = vec![i as u8; 20 + i * 37];
        d[..8].copy_from_slice(&(i as u64).to_be_bytes());
        d
    }

    /// TOS bytes the tests cycle through: every ECN codepoint, alone and
    /// under a DSCP (EF), so the whole byte must come through.
    const TOS: [u8; 6] = [0x00, 0x01, 0x02, 0x03, 0xb8, 0xba];

    /// Everything waiting on `s`, batch after batch, until it is empty.
    fn drain(batch: &mut RecvBatch, s: &UdpSocket) -> Vec<(Received, Vec<u8>)> {
        let mut all = Vec::new();
        loop {
            match batch.recv(s.as_raw_fd(), BATCH) {
                Ok(n) => all.extend((0..n).map(|i| (batch.info(i), batch.data(i).to_vec()))),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return all,
                Err(e) => panic!("recvmmsg: {e}"),
            }
        }
    }

    /// Some loopback address of the family, or `None` when the machine has
    /// no IPv6 loopback.
    fn lo(v6: bool) -> Option<&'static str> {
        let a = if v6 { "[::1]:0" } else { "127.0.0.1:0" };
        UdpSocket::bind(a).is_ok().then_some(a)
    }

    /// 40 datagrams from two senders with changing TOS bytes come back from
    /// batches of 5, 32 and the rest in their order, each with its length,
    /// sender, TOS byte and an arrival stamp taken while they were sent;
    /// the short batch needs no further call, and the next finds none.
    fn receive_in_order(addr: &str) {
        let rx = receiver(addr);
        let to = rx.local_addr().unwrap();
        let senders = [
            UdpSocket::bind(addr).unwrap(),
            UdpSocket::bind(addr).unwrap(),
        ];
        let from = |i: usize| &senders[usize::from(i.is_multiple_of(3))];
        let mut batch = RecvBatch::new();
        wait_for_stamps(&rx, &mut batch);
        let t0 = realtime_ns();
        for i in 0..40 {
            set_tos(from(i), TOS[i % TOS.len()]);
            from(i).send_to(&payload(i), to).unwrap();
        }
        let t1 = realtime_ns();
        // Loopback queues a datagram before send returns; leave a margin.
        std::thread::sleep(std::time::Duration::from_millis(20));

        let fd = rx.as_raw_fd();
        let mut got = Vec::new();
        for (want, expect) in [(5, 5), (BATCH, BATCH), (BATCH, 40 - 5 - BATCH)] {
            let n = batch.recv(fd, want).unwrap();
            assert_eq!(n, expect);
            got.extend((0..n).map(|i| (batch.info(i), batch.data(i).to_vec())));
        }
        let e = batch.recv(fd, BATCH).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock);

        let mut last = 0;
        for (i, (r, data)) in got.iter().enumerate() {
            assert_eq!(data, &payload(i), "datagram {i}");
            assert_eq!(r.len, payload(i).len());
            assert_eq!(r.from, Some(from(i).local_addr().unwrap()), "datagram {i}");
            assert_eq!(r.tos, TOS[i % TOS.len()], "datagram {i}");
            let stamp = r.stamp.expect("an arrival stamp");
            assert!(
                (t0..=t1).contains(&stamp),
                "datagram {i}: {t0} {stamp} {t1}"
            );
            assert!(
                stamp >= last,
                "datagram {i} stamped before the one before it"
            );
            last = stamp;
        }
    }

    #[test]
    fn a_batch_receives_ipv4_datagrams_in_order_with_sender_tos_and_stamp() {
        receive_in_order(lo(false).unwrap());
    }

    #[test]
    fn a_batch_receives_ipv6_datagrams_in_order_with_sender_tclass_and_stamp() {
        match lo(true) {
            Some(a) => receive_in_order(a),
            None => eprintln!("skipped: no IPv6 loopback"),
        }
    }

    /// 40 datagrams (more than a batch) from one unconnected socket to two
    /// destinations, then 5 from a connected one, each with its TOS byte:
    /// every one arrives intact, in order, from the socket that sent it.
    fn send_to_two_destinations(addr: &str, v6: bool) {
        let rx = [receiver(addr), receiver(addr)];
        let dest = |i: usize| usize::from(i.is_multiple_of(3));
        let tx = UdpSocket::bind(addr).unwrap();
        tx.set_nonblocking(true).unwrap();
        let to: Vec<SocketAddr> = rx.iter().map(|s| s.local_addr().unwrap()).collect();
        let data: Vec<Vec<u8>> = (0..45).map(payload).collect();
        let refused = send_batch(
            tx.as_raw_fd(),
            v6,
            (0..40).map(|i| Outgoing {
                data: &data[i],
                to: Some(to[dest(i)]),
                tos: TOS[i % TOS.len()],
                segment: None,
                datagrams: 1,
            }),
        );
        assert_eq!(refused, 0);
        let up = upstream_socket(to[0]).unwrap();
        let refused = send_batch(
            up.as_raw_fd(),
            v6,
            (40..45).map(|i| Outgoing {
                data: &data[i],
                to: None,
                tos: TOS[i % TOS.len()],
                segment: None,
                datagrams: 1,
            }),
        );
        assert_eq!(refused, 0);
        std::thread::sleep(std::time::Duration::from_millis(20));

        let mut batch = RecvBatch::new();
        for (k, s) in rx.iter().enumerate() {
            // The connected socket's five go to the first destination.
            let want: Vec<usize> = (0..45)
                .filter(|&i| if i < 40 { dest(i) == k } else { k == 0 })
                .collect();
            let got = drain(&mut batch, s);
            assert_eq!(got.len(), want.len(), "destination {k}");
            for ((r, bytes), &i) in got.iter().zip(&want) {
                assert_eq!(bytes, &data[i], "datagram {i}");
                assert_eq!(r.len, data[i].len());
                assert_eq!(r.tos, TOS[i % TOS.len()], "datagram {i}");
                let sender = if i < 40 { &tx } else { &up };
                assert_eq!(r.from, Some(sender.local_addr().unwrap()), "datagram {i}");
            }
        }
    }

    #[test]
    fn a_batch_sends_ipv4_datagrams_to_each_destination_with_its_tos() {
        send_to_two_destinations(lo(false).unwrap(), false);
    }

    #[test]
    fn a_batch_sends_ipv6_datagrams_to_each_destination_with_its_tclass() {
        match lo(true) {
            Some(a) => send_to_two_destinations(a, true),
            None => eprintln!("skipped: no IPv6 loopback"),
        }
    }

    /// Datagrams the kernel refuses (too large for UDP), first in the batch
    /// and in its middle, are counted once each; the others still leave,
    /// in order.
    /// A segmented send leaves as its datagrams: a receiver with GRO gets
    /// them as one message whose stride and length give them back, with the
    /// TOS byte; one without gets each datagram alone.
    #[test]
    fn a_segmented_send_arrives_whole_with_gro_and_datagram_by_datagram_without() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        if !gso_supported(&tx) {
            test_support::skip("UDP_SEGMENT (Linux 4.18)");
            return;
        }
        let mut data = Vec::new();
        for i in 0..4u8 {
            data.extend(std::iter::repeat_n(i, if i == 3 { 500 } else { 1200 }));
        }
        for gro in [true, false] {
            let rx = receiver("127.0.0.1:0");
            if gro {
                enable_gro(&rx);
            }
            let refused = send_batch(
                tx.as_raw_fd(),
                false,
                [Outgoing {
                    data: &data,
                    to: Some(rx.local_addr().unwrap()),
                    tos: 2,
                    segment: Some(1200),
                    datagrams: 4,
                }],
            );
            assert_eq!(refused, 0);
            let mut batch = RecvBatch::new();
            let mut got = Vec::new();
            for _ in 0..1000 {
                got.extend(drain(&mut batch, &rx));
                if got.iter().map(|g| g.1.len()).sum::<usize>() >= data.len() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // Split as the relay splits: at the stride, else whole.
            let mut datagrams = Vec::new();
            for (r, bytes) in &got {
                assert_eq!(r.tos, 2);
                assert_eq!(r.from, Some(tx.local_addr().unwrap()));
                let stride = r.stride.unwrap_or(bytes.len());
                datagrams.extend(bytes.chunks(stride).map(<[u8]>::to_vec));
            }
            let sizes: Vec<usize> = datagrams.iter().map(Vec::len).collect();
            assert_eq!(sizes, [1200, 1200, 1200, 500], "gro {gro}");
            for (i, d) in datagrams.iter().enumerate() {
                assert!(d.iter().all(|&b| b == i as u8), "gro {gro}: datagram {i}");
            }
            if !gro {
                assert_eq!(got.len(), 4);
                assert!(got.iter().all(|g| g.0.stride.is_none()));
            }
        }
    }

    #[test]
    fn refused_datagrams_are_counted_and_the_rest_still_leave() {
        let rx = receiver("127.0.0.1:0");
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.set_nonblocking(true).unwrap();
        let to = rx.local_addr().unwrap();
        let too_big = vec![0u8; 70_000];
        let data: Vec<Vec<u8>> = (0..8).map(payload).collect();
        let bad = [0, 3, 4];
        let refused = send_batch(
            tx.as_raw_fd(),
            false,
            (0..8).map(|i| Outgoing {
                data: if bad.contains(&i) { &too_big } else { &data[i] },
                to: Some(to),
                tos: TOS[i % TOS.len()],
                segment: None,
                datagrams: 1,
            }),
        );
        assert_eq!(refused, bad.len() as u64);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let got = drain(&mut RecvBatch::new(), &rx);
        let want: Vec<usize> = (0..8).filter(|i| !bad.contains(i)).collect();
        assert_eq!(got.len(), want.len());
        for ((r, bytes), &i) in got.iter().zip(&want) {
            assert_eq!(bytes, &data[i], "datagram {i}");
            assert_eq!(r.tos, TOS[i % TOS.len()], "datagram {i}");
        }
    }
}
