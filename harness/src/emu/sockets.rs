//! The emulator's sockets: buffers, kernel arrival stamps, and receiving
//! a datagram with its sender and stamp.

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
    Ok(up)
}

fn set_buffers(s: &UdpSocket) {
    let size: libc::c_int = 8 << 20;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        for opt in [force, plain] {
            // SAFETY: setsockopt with a c_int option on a valid fd.
            let rc = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    &size as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc == 0 {
                break;
            }
        }
    }
}

/// Asks the kernel to stamp each datagram's arrival (`SO_TIMESTAMPNS`)
/// and to pass its TOS or Traffic Class byte, whose two low bits are the
/// ECN codepoint (`IP_RECVTOS`, and `IPV6_RECVTCLASS` on an IPv6 socket).
fn enable_rx_timestamps(s: &UdpSocket) {
    let on: libc::c_int = 1;
    let v6 = s.local_addr().is_ok_and(|a| a.is_ipv6());
    let mut opts = vec![
        (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS),
        (libc::IPPROTO_IP, libc::IP_RECVTOS),
    ];
    if v6 {
        opts.push((libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS));
    }
    for (level, opt) in opts {
        // SAFETY: setsockopt with an int option on a valid fd.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                level,
                opt,
                &on as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// Sends `data` on `fd` (to `to`, or to the connected peer) with `tos`
/// in the IP header's TOS or Traffic Class byte, for one datagram
/// (`IP_TOS` / `IPV6_TCLASS` ancillary data): how the relay passes an
/// ECN codepoint on. `v6`: the socket is IPv6 (the caller knows its
/// address family; no system call per datagram to ask).
pub(super) fn send_with_tos(
    fd: libc::c_int,
    data: &[u8],
    to: Option<SocketAddr>,
    v6: bool,
    tos: u8,
) -> io::Result<()> {
    let (mut name, name_len) = match to {
        Some(a) => std_to_sockaddr(a),
        // SAFETY: an all-zero sockaddr_storage is a valid value.
        None => (unsafe { std::mem::zeroed() }, 0),
    };
    let value: libc::c_int = tos.into();
    // SAFETY: every pointer handed to sendmsg refers to a live local of
    // the right size; the control buffer is aligned (u64) and holds one
    // cmsg of an int, which CMSG_SPACE(4) bytes fit.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        let mut control = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        if name_len > 0 {
            msg.msg_name = &mut name as *mut _ as *mut libc::c_void;
            msg.msg_namelen = name_len;
        }
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = if v6 {
            libc::IPPROTO_IPV6
        } else {
            libc::IPPROTO_IP
        };
        (*c).cmsg_type = if v6 { libc::IPV6_TCLASS } else { libc::IP_TOS };
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, value);
        if libc::sendmsg(fd, &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
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

/// One datagram as [`recv_stamped`] read it.
pub(super) struct Received {
    /// Its length.
    pub len: usize,
    /// Its sender.
    pub from: Option<SocketAddr>,
    /// The kernel's arrival stamp (CLOCK_REALTIME ns), when there is one.
    pub stamp: Option<u64>,
    /// Its TOS or Traffic Class byte (0 when the kernel gave none).
    pub tos: u8,
}

/// Receives one datagram without blocking.
pub(super) fn recv_stamped(fd: libc::c_int, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: every pointer handed to recvmsg refers to a live local of the
    // right size; the kernel writes at most msg_controllen bytes of control
    // data and msg_namelen bytes of address.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut control = [0u64; 16];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = &mut ss as *mut _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let (mut stamp, mut tos) = (None, 0u8);
        let mut c = libc::CMSG_FIRSTHDR(&msg);
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
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        Ok(Received {
            len: n as usize,
            from: sockaddr_to_std(&ss),
            stamp,
            tos,
        })
    }
}

pub(super) fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
