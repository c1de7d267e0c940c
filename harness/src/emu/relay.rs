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
use super::sockets::{bind_listeners, realtime_ns, recv_stamped, send_with_tos, upstream_socket};
use crate::link::Dir;

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
    buf: Vec<u8>,
    send_errors: u64,
    last_arrival: [u64; 2],
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, to move kernel stamps onto our
    /// clock; refreshed at every sample in case the wall clock is slewed.
    real_minus_mono: u64,
}

impl Relay {
    fn new(cfg: EmuConfig, listeners: Vec<UdpSocket>, core: LinkCore) -> Relay {
        Relay {
            cfg,
            listeners,
            core,
            flows: Vec::new(),
            by_client: HashMap::new(),
            pollfds: Vec::new(),
            rebuild: true,
            buf: vec![0u8; 65_536],
            send_errors: 0,
            last_arrival: [0u64; 2],
            real_minus_mono: realtime_ns().saturating_sub(monotonic_ns()),
        }
    }

    /// Sends what the link has due at `t`: up to the servers, down to the clients.
    fn deliver(&mut self, t: u64) {
        self.core.advance(t);
        let mut out = std::mem::take(&mut self.core.out);
        for (due, d, pkt) in out.drain(..) {
            let f = &self.flows[pkt.flow as usize];
            let tos = pkt.ecn.bits();
            // A datagram that came (or was marked) with an ECN codepoint
            // leaves with it; the others take the plain path.
            let r = match (d, tos) {
                (Dir::Up, 0) => f.upstream.send(&pkt.data).map(drop),
                (Dir::Up, _) => send_with_tos(
                    f.upstream.as_raw_fd(),
                    &pkt.data,
                    None,
                    self.cfg.routes[f.route].target.is_ipv6(),
                    tos,
                ),
                (_, 0) => self.listeners[f.route]
                    .send_to(&pkt.data, f.client)
                    .map(drop),
                (_, _) => send_with_tos(
                    self.listeners[f.route].as_raw_fd(),
                    &pkt.data,
                    Some(f.client),
                    f.client.is_ipv6(),
                    tos,
                ),
            };
            if r.is_err() {
                self.send_errors += 1;
            }
            self.core.handed_off(due);
        }
        self.core.out = out;
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

    /// Reads everything that is waiting, oldest socket first: listeners
    /// (clients sending up), then the flows' own sockets (servers replying).
    fn read_ready(&mut self) -> Result<(), EmuError> {
        let nl = self.listeners.len();
        for k in 0..self.pollfds.len() {
            if self.pollfds[k].revents == 0 {
                continue;
            }
            for _ in 0..256 {
                let r = match recv_stamped(self.pollfds[k].fd, &mut self.buf) {
                    Ok(x) => x,
                    // WouldBlock, or an ICMP error (no server yet) surfacing here.
                    Err(_) => break,
                };
                let (len, from, stamp) = (r.len, r.from, r.stamp);
                let from = if k < nl {
                    match from {
                        Some(f) => f,
                        None => continue,
                    }
                } else {
                    self.flows[k - nl].client
                };
                let dir = usize::from(k >= nl);
                let t = self.arrival_time(stamp, dir);
                let flow = if k < nl {
                    match self.flow_of(k, from)? {
                        Some(id) => id,
                        None => continue, // no room for another flow id
                    }
                } else {
                    (k - nl) as u16
                };
                let pkt = Packet {
                    data: self.buf[..len].to_vec(),
                    flow,
                    // The route: the scenario's flow or cross source.
                    class: self.flows[flow as usize].route.min(u16::MAX as usize) as u16,
                    arrival_ns: t,
                    hop: 0,
                    ecn: Ecn::from_bits(r.tos),
                };
                let d = if dir == 0 { Dir::Up } else { Dir::Down };
                self.core.push(d, pkt, t);
            }
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
