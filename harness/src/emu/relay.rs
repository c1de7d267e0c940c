//! The emulator's thread: deliver what the link has due, sample the
//! bottleneck, sleep until the next event or a datagram, and push every
//! datagram that arrived into its direction of the link.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use super::config::{EmuConfig, EmuError, EmuReport, Snapshot};
use super::engine::{create_logs, topology, LinkCore};
use super::monotonic_ns;
use super::packet::{Ecn, Packet};
use super::sockets::{
    bind_listeners, gso_supported, realtime_ns, send_batch, upstream_socket, Outgoing, RecvBatch,
    BATCH, MAX_SEGMENTS,
};
use crate::link::Dir;

/// Datagrams read from one socket per wake at most, so that a busy socket
/// cannot starve the others or the link's deliveries.
const READ_BOUND: usize = 256;

/// One message [`Relay::deliver`] sends: datagrams of `segment` bytes (the
/// last may be shorter) at `start..end` of its buffer.
struct OutMsg {
    start: usize,
    end: usize,
    segment: usize,
    datagrams: usize,
    to: Option<SocketAddr>,
    tos: u8,
    /// Whether a datagram of `segment` bytes or fewer may still join.
    open: bool,
}

/// One client of one route, with its own socket towards the server.
struct Flow {
    route: usize,
    client: SocketAddr,
    upstream: UdpSocket,
}

/// The thread's body: binds the routes (reporting their addresses, or
/// the error, on `ready`), then relays until `stop`.
pub(super) fn run(
    cfg: EmuConfig,
    stop: Arc<AtomicBool>,
    snapshot: Arc<Mutex<Snapshot>>,
    ready: mpsc::Sender<Result<Vec<SocketAddr>, EmuError>>,
) -> Result<EmuReport, EmuError> {
    let listeners = match bind_listeners(&cfg) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok(EmuReport::default());
        }
    };
    let addrs: Vec<SocketAddr> = listeners
        .iter()
        .map(|s| s.local_addr())
        .collect::<io::Result<_>>()?;
    let start_mono = monotonic_ns();
    let start_unix = realtime_ns();
    let topo = topology(&cfg);
    let logs = create_logs(&cfg, &topo, start_unix, start_mono)?;
    let _ = ready.send(Ok(addrs));

    let core = LinkCore::new(&cfg, &topo, logs, start_mono);
    let mut relay = Relay::new(cfg, listeners, core);
    while !stop.load(Ordering::Relaxed) {
        let t = relay.core.now();
        relay.deliver(t);
        if relay.core.sample(t, relay.flows.len(), &snapshot) {
            relay.real_minus_mono = realtime_ns().saturating_sub(monotonic_ns());
        }
        if relay.wait() > 0 {
            relay.read_ready()?;
        }
    }
    relay.core.finish(relay.flows.len(), relay.send_errors)
}

/// The relay's state.
struct Relay {
    cfg: EmuConfig,
    listeners: Vec<UdpSocket>,
    /// The links, their logs and samples.
    core: LinkCore,
    flows: Vec<Flow>,
    by_client: HashMap<(usize, SocketAddr), u16>,
    pollfds: Vec<libc::pollfd>,
    rebuild: bool,
    rx: RecvBatch,
    /// Whether the kernel takes segmented sends ([`gso_supported`]).
    gso: bool,
    /// The bytes of the messages [`Relay::deliver`] sends, back to back.
    out_bytes: Vec<u8>,
    /// Those messages: range in `out_bytes`, datagram size, count,
    /// destination, TOS byte.
    out_msgs: Vec<OutMsg>,
    send_errors: u64,
    last_arrival: [u64; 2],
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, to move kernel stamps onto our
    /// clock; refreshed at every sample in case the wall clock is slewed.
    real_minus_mono: u64,
}

impl Relay {
    fn new(cfg: EmuConfig, listeners: Vec<UdpSocket>, core: LinkCore) -> Relay {
        let gso = listeners.first().is_some_and(gso_supported);
        Relay {
            gso,
            out_bytes: Vec::new(),
            out_msgs: Vec::new(),
            cfg,
            listeners,
            core,
            flows: Vec::new(),
            by_client: HashMap::new(),
            pollfds: Vec::new(),
            rebuild: true,
            rx: RecvBatch::new(),
            send_errors: 0,
            last_arrival: [0u64; 2],
            real_minus_mono: realtime_ns().saturating_sub(monotonic_ns()),
        }
    }

    /// Sends what the link has due at `t`: up to the servers, down to the
    /// clients, in the order the link gives them. Consecutive packets that
    /// leave by the same socket go out together: those of one size to one
    /// destination with one TOS byte as one segmented message (up to
    /// [`MAX_SEGMENTS`] and 64 KiB; the last may be shorter), as a sender
    /// with segmentation offload sends a burst; the messages up to
    /// [`BATCH`] per `sendmmsg`. Each packet is handed off
    /// once its message is sent.
    fn deliver(&mut self, t: u64) {
        self.core.advance(t);
        let out = std::mem::take(&mut self.core.out);
        let mut rest = &out[..];
        while let Some((_, d, pkt)) = rest.first() {
            let (fd, v6) = self.socket_of(*d, pkt.flow);
            let run = rest
                .iter()
                .take_while(|(_, d, p)| self.socket_of(*d, p.flow).0 == fd)
                .count();
            let (batch, later) = rest.split_at(run);
            self.out_bytes.clear();
            self.out_msgs.clear();
            for (_, d, pkt) in batch {
                // A listener serves many clients, so it names the one; a
                // flow's own socket is connected to the server.
                let to = (*d == Dir::Down).then(|| self.flows[pkt.flow as usize].client);
                // A datagram that came (or was marked) with an ECN
                // codepoint leaves with it.
                let tos = pkt.ecn.bits();
                let len = pkt.data.len();
                let joins = self.gso
                    && self.out_msgs.last().is_some_and(|m| {
                        m.open
                            && m.to == to
                            && m.tos == tos
                            && len <= m.segment
                            && m.datagrams < MAX_SEGMENTS
                            && m.end - m.start + len <= 65_000
                    });
                if !joins {
                    let at = self.out_bytes.len();
                    self.out_msgs.push(OutMsg {
                        start: at,
                        end: at,
                        segment: len,
                        datagrams: 0,
                        to,
                        tos,
                        open: true,
                    });
                }
                self.out_bytes.extend_from_slice(&pkt.data);
                let m = self.out_msgs.last_mut().expect("a message");
                m.end += len;
                m.datagrams += 1;
                // A shorter datagram ends a segmented message.
                m.open = len == m.segment;
            }
            let bytes = &self.out_bytes;
            self.send_errors += send_batch(
                fd,
                v6,
                self.out_msgs.iter().map(|m| Outgoing {
                    data: &bytes[m.start..m.end],
                    to: m.to,
                    tos: m.tos,
                    segment: (m.datagrams > 1).then_some(m.segment as u16),
                    datagrams: m.datagrams as u64,
                }),
            );
            for &(due, _, _) in batch {
                self.core.handed_off(due);
            }
            rest = later;
        }
        let mut out = out;
        out.clear();
        self.core.out = out;
    }

    /// The socket a packet of `flow` leaves by going `d`, and whether it is
    /// IPv6: the flow's own socket up to the server, the route's listener
    /// down to the client.
    fn socket_of(&self, d: Dir, flow: u16) -> (libc::c_int, bool) {
        let f = &self.flows[flow as usize];
        match d {
            Dir::Up => (
                f.upstream.as_raw_fd(),
                self.cfg.routes[f.route].target.is_ipv6(),
            ),
            Dir::Down => (self.listeners[f.route].as_raw_fd(), f.client.is_ipv6()),
        }
    }

    /// Sleeps until the link's next event, the next sample or a datagram
    /// (at most 10 ms; the last 20 µs spinning); `ppoll`'s result.
    fn wait(&mut self) -> libc::c_int {
        if self.rebuild {
            self.pollfds.clear();
            let fds = self.listeners.iter().map(|s| s.as_raw_fd());
            let fds = fds.chain(self.flows.iter().map(|f| f.upstream.as_raw_fd()));
            for fd in fds {
                self.pollfds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            self.rebuild = false;
        }
        self.core.wait(&mut self.pollfds)
    }

    /// Reads what is waiting, oldest socket first: listeners (clients
    /// sending up), then the flows' own sockets (servers replying); up to
    /// [`BATCH`] datagrams per `recvmmsg` and [`READ_BOUND`] per socket.
    fn read_ready(&mut self) -> Result<(), EmuError> {
        for k in 0..self.pollfds.len() {
            if self.pollfds[k].revents == 0 {
                continue;
            }
            let mut left = READ_BOUND;
            while left > 0 {
                let want = left.min(BATCH);
                let n = match self.rx.recv(self.pollfds[k].fd, want) {
                    Ok(n) => n,
                    // WouldBlock, or an ICMP error (no server yet) surfacing here.
                    Err(_) => break,
                };
                for i in 0..n {
                    self.accept(k, i)?;
                }
                left -= n;
                // A short batch emptied the socket: no call to learn that.
                if n < want {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Pushes the `i`th message of the last batch, read from the socket
    /// of `pollfds[k]`, into its direction of the link: each of its
    /// datagrams (a message the kernel coalesced is several), all with
    /// the message's arrival stamp.
    fn accept(&mut self, k: usize, i: usize) -> Result<(), EmuError> {
        let nl = self.listeners.len();
        let r = self.rx.info(i);
        let from = if k < nl {
            match r.from {
                Some(f) => f,
                None => return Ok(()),
            }
        } else {
            self.flows[k - nl].client
        };
        let dir = usize::from(k >= nl);
        let t = self.arrival_time(r.stamp, dir);
        let flow = if k < nl {
            match self.flow_of(k, from)? {
                Some(id) => id,
                None => return Ok(()), // no room for another flow id
            }
        } else {
            (k - nl) as u16
        };
        let d = if dir == 0 { Dir::Up } else { Dir::Down };
        // The route: the scenario's flow or cross source.
        let class = self.flows[flow as usize].route.min(u16::MAX as usize) as u16;
        let data = self.rx.data(i);
        let stride = r.stride.unwrap_or(data.len()).max(1);
        for datagram in data.chunks(stride) {
            let pkt = Packet {
                data: datagram.to_vec(),
                flow,
                class,
                arrival_ns: t,
                hop: 0,
                ecn: Ecn::from_bits(r.tos),
            };
            self.core.push(d, pkt, t);
        }
        Ok(())
    }

    /// The kernel's arrival stamp, moved onto our clock, so the packet
    /// enters the link when it arrived, not when this thread woke up;
    /// never before an earlier arrival in the same direction.
    fn arrival_time(&mut self, stamp: Option<u64>, dir: usize) -> u64 {
        let t_now = self.core.now();
        let t = stamp
            .map(|st| {
                st.saturating_sub(self.real_minus_mono)
                    .saturating_sub(self.core.start_mono)
            })
            .filter(|&st| st <= t_now && t_now - st < 100_000_000)
            .unwrap_or(t_now)
            .max(self.last_arrival[dir]);
        self.last_arrival[dir] = t;
        t
    }

    /// The flow of a client of route `k`, made on its first datagram;
    /// `None` when no flow id is left.
    fn flow_of(&mut self, k: usize, from: SocketAddr) -> Result<Option<u16>, EmuError> {
        if let Some(&id) = self.by_client.get(&(k, from)) {
            return Ok(Some(id));
        }
        if self.flows.len() >= u16::MAX as usize {
            return Ok(None);
        }
        let upstream = upstream_socket(self.cfg.routes[k].target)?;
        let id = self.flows.len() as u16;
        self.flows.push(Flow {
            route: k,
            client: from,
            upstream,
        });
        self.by_client.insert((k, from), id);
        self.rebuild = true;
        Ok(Some(id))
    }
}
