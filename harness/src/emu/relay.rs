//! The emulator's thread: deliver what the link has due, sample the
//! bottleneck, sleep until the next event or a datagram, and push every
//! datagram that arrived into its direction of the link.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use super::config::{EmuConfig, EmuError, EmuReport, Lateness, Snapshot};
use super::packet::Packet;
use super::pipeline::Sampler;
use super::sockets::{bind_listeners, realtime_ns, recv_stamped, upstream_socket};
use super::{monotonic_ns, thread_cpu_ns};
use crate::bottleneck::{packet_log_header, LinkLogs};
use crate::link::Dir;
use link_model::topology::{Network, Topology};

const SPIN_NS: u64 = 20_000;
const MAX_SLEEP_NS: u64 = 10_000_000;

/// One client of one route, with its own socket towards the server.
struct Flow {
    route: usize,
    client: SocketAddr,
    upstream: UdpSocket,
}

/// A histogram of hand-off lateness in 1 µs buckets up to 100 ms.
struct LateHist {
    buckets: Vec<u64>,
    max: u64,
}

impl LateHist {
    fn add(&mut self, ns: u64) {
        let i = ((ns / 1000) as usize).min(self.buckets.len() - 1);
        self.buckets[i] += 1;
        self.max = self.max.max(ns);
    }
    fn quantile(&self, q: f64) -> f64 {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let want = (q * total as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= want {
                return i as f64 + 0.5;
            }
        }
        self.buckets.len() as f64
    }
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
    let topo = match &cfg.topology {
        Some((t, _)) => t.clone(),
        None => Topology::single(cfg.link.clone()),
    };
    let logs = match &cfg.log_dir {
        Some(dir) => LinkLogs::create(dir, &topo, |i| {
            cfg.per_packet_log
                .then(|| packet_log_header("emu", start_unix, start_mono, &topo.links[i].spec))
        })?,
        None => LinkLogs::none(),
    };
    let _ = ready.send(Ok(addrs));

    let cpu0 = thread_cpu_ns();
    let mut relay = Relay::new(cfg, &topo, listeners, logs, start_mono);
    while !stop.load(Ordering::Relaxed) {
        let t = since(relay.start_mono);
        relay.deliver(t);
        relay.sample(t, &snapshot);
        if relay.wait() > 0 {
            relay.read_ready()?;
        }
    }
    relay.finish(cpu0)
}

/// Ns on `CLOCK_MONOTONIC` since `start`.
fn since(start: u64) -> u64 {
    monotonic_ns().saturating_sub(start)
}

/// The relay's state.
struct Relay {
    cfg: EmuConfig,
    listeners: Vec<UdpSocket>,
    start_mono: u64,
    logs: LinkLogs,
    /// Every link and the way each route crosses them.
    net: Network,
    flows: Vec<Flow>,
    by_client: HashMap<(usize, SocketAddr), u16>,
    pollfds: Vec<libc::pollfd>,
    rebuild: bool,
    buf: Vec<u8>,
    out: Vec<(u64, Dir, Packet)>,
    late: LateHist,
    send_errors: u64,
    samplers: Vec<Sampler>,
    sink_err: Option<EmuError>,
    last_arrival: [u64; 2],
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, to move kernel stamps onto our
    /// clock; refreshed at every sample in case the wall clock is slewed.
    real_minus_mono: u64,
}

impl Relay {
    fn new(
        cfg: EmuConfig,
        topo: &Topology,
        listeners: Vec<UdpSocket>,
        logs: LinkLogs,
        start_mono: u64,
    ) -> Relay {
        let paths = cfg.topology.as_ref().map_or(&[][..], |(_, p)| &p[..]);
        Relay {
            net: Network::new(topo, paths, cfg.mtu, &cfg.class_weights),
            samplers: topo
                .links
                .iter()
                .map(|_| Sampler::new(cfg.sample_interval.as_nanos() as u64))
                .collect(),
            cfg,
            listeners,
            start_mono,
            logs,
            flows: Vec::new(),
            by_client: HashMap::new(),
            pollfds: Vec::new(),
            rebuild: true,
            buf: vec![0u8; 65_536],
            out: Vec::new(),
            late: LateHist {
                buckets: vec![0; 100_000],
                max: 0,
            },
            send_errors: 0,
            sink_err: None,
            last_arrival: [0u64; 2],
            real_minus_mono: realtime_ns().saturating_sub(monotonic_ns()),
        }
    }

    /// Sends what the link has due at `t`: up to the servers, down to the clients.
    fn deliver(&mut self, t: u64) {
        self.net.advance(t, &mut self.logs, &mut self.out);
        for (due, d, pkt) in self.out.drain(..) {
            let f = &self.flows[pkt.flow as usize];
            let r = if d == Dir::Up {
                f.upstream.send(&pkt.data)
            } else {
                self.listeners[f.route].send_to(&pkt.data, f.client)
            };
            if r.is_err() {
                self.send_errors += 1;
            }
            self.late.add(since(self.start_mono).saturating_sub(due));
        }
    }

    /// Samples the bottleneck when a sample is due at `t`, into the samples file
    /// and the snapshot progress displays read.
    fn sample(&mut self, t: u64, snapshot: &Mutex<Snapshot>) {
        if t < self.samplers[0].next_due() {
            return;
        }
        let mut snap = Snapshot {
            t_s: t as f64 / 1e9,
            flows: self.flows.len(),
            ..Snapshot::default()
        };
        for (i, sampler) in self.samplers.iter_mut().enumerate() {
            for s in sampler.take(t, &self.net.links[i].dirs) {
                if let Err(e) = self.logs.sample(i, &s) {
                    self.sink_err.get_or_insert(EmuError::Log {
                        path: "bottleneck-samples.jsonl".into(),
                        source: e,
                    });
                }
            }
        }
        snap.up = self.net.first()[0].counters.clone();
        snap.down = self.net.first()[1].counters.clone();
        if let Ok(mut s) = snapshot.lock() {
            *s = snap;
        }
        self.real_minus_mono = realtime_ns().saturating_sub(monotonic_ns());
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
        let t = since(self.start_mono);
        let next = self
            .net
            .next_event()
            .unwrap_or(u64::MAX)
            .min(self.samplers[0].next_due())
            .min(t + MAX_SLEEP_NS);
        let wait = next.saturating_sub(t);
        let sleep = wait.saturating_sub(SPIN_NS);
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: pollfds is a valid array of initialised pollfd structs.
        unsafe {
            libc::ppoll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        }
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
                let (len, from, stamp) = match recv_stamped(self.pollfds[k].fd, &mut self.buf) {
                    Ok(x) => x,
                    // WouldBlock, or an ICMP error (no server yet) surfacing here.
                    Err(_) => break,
                };
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
                };
                let d = if dir == 0 { Dir::Up } else { Dir::Down };
                self.net.push(d, pkt, t, &mut self.logs);
            }
        }
        Ok(())
    }

    /// The kernel's arrival stamp, moved onto our clock, so the packet
    /// enters the link when it arrived, not when this thread woke up;
    /// never before an earlier arrival in the same direction.
    fn arrival_time(&mut self, stamp: Option<u64>, dir: usize) -> u64 {
        let t_now = since(self.start_mono);
        let t = stamp
            .map(|st| {
                st.saturating_sub(self.real_minus_mono)
                    .saturating_sub(self.start_mono)
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

    /// What the emulator did, its logs finished (`cpu0`: the thread's CPU
    /// time when it began relaying).
    fn finish(self, cpu0: u64) -> Result<EmuReport, EmuError> {
        let end = since(self.start_mono);
        let mut report = EmuReport {
            duration_s: end as f64 / 1e9,
            cpu_s: thread_cpu_ns().saturating_sub(cpu0) as f64 / 1e9,
            flows: self.flows.len(),
            up: self.net.first()[0].counters.clone(),
            down: self.net.first()[1].counters.clone(),
            links: self.net.counters(),
            lateness: Lateness {
                p50_us: self.late.quantile(0.5),
                p99_us: self.late.quantile(0.99),
                max_us: self.late.max as f64 / 1000.0,
            },
            send_errors: self.send_errors,
            log_records: 0,
        };
        report.log_records = self.logs.finish()?;
        if let Some(e) = self.sink_err {
            return Err(e);
        }
        Ok(report)
    }
}
