//! IP mode's thread: whole IP packets from the client side's TUN device
//! go up the link and are written to the server side's, and back
//! ([`super::tun::TunNet`] makes the devices). Same loop as the relay
//! ([`super::engine::LinkCore`]): deliver what is due, sample, sleep in
//! `ppoll` until the next event or a packet, read.
//!
//! **What a packet is charged.** The relay sees UDP payloads, and the
//! link charges each datagram its payload length (serializer, queue
//! limits, AQM, counters and the per-packet log all use
//! [`Packet::len`]). To charge a QUIC datagram the same here, each IPv4
//! packet's first 28 bytes (the IPv4 header without options, 20, and the
//! UDP header, 8) are kept aside while it crosses and its remaining bytes
//! are what the link carries: an IPv4 packet of total length L is charged
//! L − 28 bytes, which for UDP is exactly its payload, so a QUIC flow is
//! charged alike in both modes. A TCP segment is charged the same way:
//! its IP length less 28 (a 1500-byte segment with the timestamp option,
//! 1448 bytes of payload, is charged 1472; a bare ACK of 52 bytes, 24).
//! On delivery the kept header is put back in front and the packet is
//! written unchanged (no address or checksum is touched), except for its
//! ECN field: the codepoint of the TOS byte rides on [`Packet::ecn`], and
//! a packet the link marked CE leaves with CE in its header and the
//! header checksum updated (RFC 1624).
//!
//! The header is found again by the packet's arrival time
//! ([`Packet::arrival_ns`], which no link element changes): arrivals in
//! one direction are made strictly increasing (1 ns apart at least), so
//! the time names the packet, and a duplicate made by the link carries the
//! same time and gets the same header. A delivered packet's header is
//! dropped at once unless its direction duplicates (then 5 s later); one
//! whose packet the link dropped is dropped 60 s after it arrived.
//!
//! **Classification.** A packet's route is its server address
//! ([`super::tun::route_of`]): the destination going up, the source coming
//! down. Its flow (what `sched = "fq"` separates) is its route, protocol
//! and the two ports, as the relay's flow is its route and client socket.
//! Packets that are not IPv4, shorter than 28 bytes or addressed outside
//! the routes are counted ([`IpStats::unclassified`]) and dropped.
//!
//! **Arrival time.** A TUN device gives no kernel timestamp, so a packet
//! enters the link when the thread reads it (the relay uses the socket's
//! arrival stamp).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use super::config::{EmuConfig, EmuError, EmuReport, IpStats, Snapshot};
use super::engine::{create_logs, topology, LinkCore};
use super::monotonic_ns;
use super::packet::{Ecn, Packet};
use super::sockets::realtime_ns;
use super::tun::{route_of, TunNet};
use crate::link::Dir;

/// The bytes of every IPv4 packet that the link does not charge: an
/// IPv4 header without options and a UDP header.
pub const UNCHARGED_BYTES: usize = 28;

/// How long the header of a packet that never came out is kept, ns.
const KEEP_UNDELIVERED_NS: u64 = 60_000_000_000;
/// How long a delivered packet's header is kept for its duplicates, ns.
const KEEP_DELIVERED_NS: u64 = 5_000_000_000;

/// What the thread is given besides the configuration.
pub(super) struct Ports {
    /// The TUN devices: client side, server side.
    pub fds: [OwnedFd; 2],
    /// Routes (server addresses).
    pub routes: usize,
    /// The namespaces, for the devices' drop counters at the end.
    pub client_ns: String,
    /// The server side's.
    pub server_ns: String,
}

/// A packet's flow: route, protocol, client port, server port.
type FlowKey = (usize, u8, u16, u16);

/// A packet's header while it crosses.
struct Kept {
    header: [u8; UNCHARGED_BYTES],
    /// When it was delivered (0: not yet).
    delivered: u64,
}

/// The thread's body: reports readiness on `ready`, then forwards until
/// `stop`.
pub(super) fn run(
    cfg: EmuConfig,
    ports: Ports,
    stop: Arc<AtomicBool>,
    snapshot: Arc<Mutex<Snapshot>>,
    ready: mpsc::Sender<Result<(), EmuError>>,
) -> Result<EmuReport, EmuError> {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let start_mono = monotonic_ns();
    let start_unix = realtime_ns();
    let topo = topology(&cfg);
    let logs = match create_logs(&cfg, &topo, start_unix, start_mono) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok(EmuReport::default());
        }
    };
    let _ = ready.send(Ok(()));
    // A direction whose links duplicate packets delivers a header twice.
    let dup = [Dir::Up, Dir::Down].map(|d| {
        topo.links.iter().any(|l| {
            let s = if d == Dir::Up {
                &l.spec.up
            } else {
                &l.spec.down
            };
            s.duplicate > 0.0
        })
    });
    let core = LinkCore::new(&cfg, &topo, logs, start_mono);
    let mut t = Tunnel::new(core, ports, dup);
    while !stop.load(Ordering::Relaxed) {
        let now = t.core.now();
        t.deliver(now);
        if t.core.sample(now, t.flows.len(), &snapshot) {
            t.forget_old(now);
        }
        if t.core.wait(&mut t.pollfds) > 0 {
            t.read_ready();
        }
    }
    let mut stats = std::mem::take(&mut t.stats);
    stats.tun_dropped = TunNet::tun_dropped(&t.ports.client_ns, &t.ports.server_ns);
    let mut report = t.core.finish(t.flows.len(), t.send_errors)?;
    report.ip = Some(stats);
    Ok(report)
}

/// IP mode's state.
struct Tunnel {
    core: LinkCore,
    ports: Ports,
    pollfds: [libc::pollfd; 2],
    flows: HashMap<FlowKey, u16>,
    /// Per direction, the headers of packets on the link, by arrival time.
    kept: [HashMap<u64, Kept>; 2],
    dup: [bool; 2],
    last_arrival: [u64; 2],
    buf: Vec<u8>,
    stats: IpStats,
    send_errors: u64,
}

impl Tunnel {
    fn new(core: LinkCore, ports: Ports, dup: [bool; 2]) -> Tunnel {
        let pollfds = [0, 1].map(|i| libc::pollfd {
            fd: ports.fds[i].as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        Tunnel {
            core,
            ports,
            pollfds,
            flows: HashMap::new(),
            kept: [HashMap::new(), HashMap::new()],
            dup,
            last_arrival: [0; 2],
            buf: vec![0u8; 65_536],
            stats: IpStats::default(),
            send_errors: 0,
        }
    }

    /// Writes what the link has due at `t` to the far side's device, its
    /// header put back.
    fn deliver(&mut self, t: u64) {
        self.core.advance(t);
        let mut out = std::mem::take(&mut self.core.out);
        for (due, d, pkt) in out.drain(..) {
            let (di, dup) = (d as usize, self.dup[d as usize]);
            let header = match self.kept[di].get_mut(&pkt.arrival_ns) {
                Some(k) => {
                    if dup {
                        k.delivered = t.max(1);
                    }
                    k.header
                }
                None => {
                    self.stats.headers_missing += 1;
                    continue;
                }
            };
            if !dup {
                self.kept[di].remove(&pkt.arrival_ns);
            }
            let mut header = header;
            set_ecn(&mut header, pkt.ecn.bits());
            // Up goes to the server side's device, down to the client's.
            let fd = self.ports.fds[1 - di].as_raw_fd();
            if write_packet(fd, &header, &pkt.data).is_err() {
                self.send_errors += 1;
            }
            self.core.handed_off(due);
        }
        self.core.out = out;
    }

    /// Forgets the headers no packet will come back for.
    fn forget_old(&mut self, now: u64) {
        for kept in &mut self.kept {
            kept.retain(|&arrival, k| {
                if k.delivered > 0 {
                    now < k.delivered + KEEP_DELIVERED_NS
                } else {
                    now < arrival + KEEP_UNDELIVERED_NS
                }
            });
        }
    }

    /// Reads every packet waiting on either device (at most 256 each per
    /// wake-up) into the link.
    fn read_ready(&mut self) {
        for k in 0..2 {
            if self.pollfds[k].revents == 0 {
                continue;
            }
            let d = if k == 0 { Dir::Up } else { Dir::Down };
            for _ in 0..256 {
                // SAFETY: reading into a buffer we own, at most its length.
                let n = unsafe {
                    libc::read(
                        self.pollfds[k].fd,
                        self.buf.as_mut_ptr() as *mut libc::c_void,
                        self.buf.len(),
                    )
                };
                if n <= 0 {
                    break; // EAGAIN: nothing more now
                }
                self.take(d, n as usize);
            }
        }
    }

    /// Puts the packet in `buf[..n]`, read going `d`, on the link (or
    /// counts it as unclassified).
    fn take(&mut self, d: Dir, n: usize) {
        let di = d as usize;
        let Some((route, key, len)) = classify(&self.buf[..n], d, self.ports.routes) else {
            self.stats.unclassified[di] += 1;
            return;
        };
        let next = self.flows.len();
        let flow = match self.flows.get(&key) {
            Some(&f) => f,
            None if next < u16::MAX as usize => {
                self.flows.insert(key, next as u16);
                next as u16
            }
            // No flow id left: the last one takes the rest.
            None => u16::MAX - 1,
        };
        let t = self.core.now().max(self.last_arrival[di] + 1);
        self.last_arrival[di] = t;
        let mut header = [0u8; UNCHARGED_BYTES];
        header.copy_from_slice(&self.buf[..UNCHARGED_BYTES]);
        self.kept[di].insert(
            t,
            Kept {
                header,
                delivered: 0,
            },
        );
        let pkt = Packet {
            data: self.buf[UNCHARGED_BYTES..len].to_vec(),
            flow,
            class: route.min(u16::MAX as usize) as u16,
            arrival_ns: t,
            hop: 0,
            ecn: Ecn::from_bits(self.buf[1]),
        };
        self.stats.packets_in[di] += 1;
        self.core.push(d, pkt, t);
    }
}

/// An IPv4 packet read going `d`: its route, its flow and its length (the
/// header's total length); `None` for anything else.
fn classify(p: &[u8], d: Dir, routes: usize) -> Option<(usize, FlowKey, usize)> {
    if p.len() < UNCHARGED_BYTES || p[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let len = usize::from(u16::from_be_bytes([p[2], p[3]]));
    if ihl < 20 || len < UNCHARGED_BYTES.max(ihl) || len > p.len() {
        return None;
    }
    let addr = |at: usize| std::net::Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]);
    let (src, dst) = (addr(12), addr(16));
    let server = if d == Dir::Up { dst } else { src };
    let route = route_of(server, routes)?;
    let proto = p[9];
    // Ports of TCP and UDP, in the first fragment; none otherwise.
    let first_fragment = u16::from_be_bytes([p[6], p[7]]) & 0x1fff == 0;
    let (sport, dport) = if matches!(proto, 6 | 17) && first_fragment && len >= ihl + 4 {
        (
            u16::from_be_bytes([p[ihl], p[ihl + 1]]),
            u16::from_be_bytes([p[ihl + 2], p[ihl + 3]]),
        )
    } else {
        (0, 0)
    };
    let key = if d == Dir::Up {
        (route, proto, sport, dport)
    } else {
        (route, proto, dport, sport)
    };
    Some((route, key, len))
}

/// Sets the ECN field (the TOS byte's two low bits) of the IPv4 header at
/// the start of `header` to `ecn`, updating the header checksum
/// incrementally (RFC 1624, eqn. 3) as a router that marks does.
fn set_ecn(header: &mut [u8], ecn: u8) {
    let old = u16::from_be_bytes([header[0], header[1]]);
    header[1] = (header[1] & !0b11) | (ecn & 0b11);
    let new = u16::from_be_bytes([header[0], header[1]]);
    if old == new {
        return;
    }
    let hc = u16::from_be_bytes([header[10], header[11]]);
    // HC' = ~(~HC + ~m + m'), in ones' complement arithmetic.
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let hc2 = !(sum as u16);
    header[10..12].copy_from_slice(&hc2.to_be_bytes());
}

/// Writes one packet, `header` then `data`, to a TUN device.
fn write_packet(fd: libc::c_int, header: &[u8], data: &[u8]) -> std::io::Result<()> {
    let iov = [
        libc::iovec {
            iov_base: header.as_ptr() as *mut libc::c_void,
            iov_len: header.len(),
        },
        libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        },
    ];
    // SAFETY: writev only reads the two buffers, which outlive the call.
    let n = unsafe { libc::writev(fd, iov.as_ptr(), 2) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::tun::{server_ip, CLIENT_IP};

    /// An IPv4 packet of `len` bytes from `src` to `dst` with protocol
    /// `proto` and ports.
    fn ipv4(len: usize, src: [u8; 4], dst: [u8; 4], proto: u8, ports: (u16, u16)) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&ports.0.to_be_bytes());
        p[22..24].copy_from_slice(&ports.1.to_be_bytes());
        p
    }

    /// The IPv4 header checksum of `h`, computed from scratch.
    fn checksum(h: &[u8]) -> u16 {
        let mut sum: u32 = h
            .chunks(2)
            .enumerate()
            .filter(|(i, _)| *i != 5)
            .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn marking_ce_keeps_the_header_checksum_right() {
        let (c, s1) = (CLIENT_IP.octets(), server_ip(1).octets());
        for (tos, ttl) in [
            (0x02u8, 64u8),
            (0x01, 63),
            (0xb9, 1),
            (0x03, 255),
            (0x00, 0),
        ] {
            let mut p = ipv4(1378, c, s1, 17, (40000, 4433));
            p[1] = tos;
            p[8] = ttl;
            let hc = checksum(&p[..20]);
            p[10..12].copy_from_slice(&hc.to_be_bytes());
            for ecn in [3u8, 0, 1, 2] {
                set_ecn(&mut p[..28], ecn);
                assert_eq!(p[1], (tos & !3) | ecn);
                assert_eq!(
                    u16::from_be_bytes([p[10], p[11]]),
                    checksum(&p[..20]),
                    "tos {tos:#x} -> ecn {ecn}"
                );
            }
        }
    }

    #[test]
    fn packets_are_classified_by_their_server_address() {
        let (c, s1) = (CLIENT_IP.octets(), server_ip(1).octets());
        let up = ipv4(1378, c, s1, 17, (40000, 4433));
        assert_eq!(
            classify(&up, Dir::Up, 2),
            Some((1, (1, 17, 40000, 4433), 1378))
        );
        let down = ipv4(52, s1, c, 6, (5001, 40001));
        assert_eq!(
            classify(&down, Dir::Down, 2),
            Some((1, (1, 6, 40001, 5001), 52))
        );
        // The same flow both ways.
        let back = ipv4(60, c, s1, 6, (40001, 5001));
        assert_eq!(classify(&back, Dir::Up, 2).unwrap().1, (1, 6, 40001, 5001));
    }

    #[test]
    fn what_cannot_be_charged_or_routed_is_refused() {
        let (c, s0) = (CLIENT_IP.octets(), server_ip(0).octets());
        // A server address beyond the routes, either way.
        let far = server_ip(5).octets();
        assert_eq!(classify(&ipv4(100, c, far, 17, (1, 2)), Dir::Up, 5), None);
        assert_eq!(classify(&ipv4(100, far, c, 17, (1, 2)), Dir::Down, 5), None);
        // Shorter than the uncharged bytes.
        assert_eq!(classify(&ipv4(27, c, s0, 1, (0, 0)), Dir::Up, 1), None);
        // IPv6 (a router solicitation's first byte).
        let mut v6 = ipv4(100, c, s0, 58, (0, 0));
        v6[0] = 0x60;
        assert_eq!(classify(&v6, Dir::Up, 1), None);
        // A total length beyond what was read.
        let mut long = ipv4(100, c, s0, 17, (1, 2));
        long[2..4].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(classify(&long, Dir::Up, 1), None);
        // ICMP has no ports.
        assert_eq!(
            classify(&ipv4(84, c, s0, 1, (0x0800, 7)), Dir::Up, 1)
                .unwrap()
                .1,
            (0, 1, 0, 0)
        );
    }
}
