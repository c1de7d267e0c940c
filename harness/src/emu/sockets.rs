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

/// Asks the kernel to stamp each datagram's arrival (`SO_TIMESTAMPNS`).
fn enable_rx_timestamps(s: &UdpSocket) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with an int option on a valid fd.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
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

/// Receives one datagram without blocking: its length, sender, and the
/// kernel's arrival stamp (CLOCK_REALTIME ns) when there is one.
pub(super) fn recv_stamped(
    fd: libc::c_int,
    buf: &mut [u8],
) -> io::Result<(usize, Option<SocketAddr>, Option<u64>)> {
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
        let mut stamp = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        Ok((n as usize, sockaddr_to_std(&ss), stamp))
    }
}

pub(super) fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
