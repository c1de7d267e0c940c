//! The emulator's thread: sockets, the clock, and the two pipelines.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::packet::Packet;
use super::pipeline::{Counters, Direction, Sampler};
use super::{monotonic_ns, thread_cpu_ns};
use crate::bottleneck::{NoSink, SampleWriter, Sink, Writer};
use crate::link::{Dir, LinkSpec};

/// Where clients send, and where their datagrams go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The emulator's listening address (port 0 picks one).
    pub listen: SocketAddr,
    /// The server behind it.
    pub target: SocketAddr,
}

/// How to run the emulator.
#[derive(Clone, Debug)]
pub struct EmuConfig {
    /// The link.
    pub link: LinkSpec,
    /// One or more routes; every flow of every route shares the bottleneck.
    pub routes: Vec<Route>,
    /// Packet size used to turn packet-count queue limits into bytes.
    pub mtu: u64,
    /// Where to write `bottleneck.bin` and `bottleneck-samples.jsonl`.
    pub log_dir: Option<PathBuf>,
    /// Write the per-packet log (`bottleneck.bin`) too, not only samples.
    pub per_packet_log: bool,
    /// How often to sample the bottleneck.
    pub sample_interval: Duration,
    /// Create the sockets in this network namespace (`/run/netns/NAME`).
    pub netns: Option<String>,
    /// The weight of each route's traffic class when a direction's
    /// scheduler is `wfq` (route `i` has `class_weights[i]`; a route
    /// without one gets the smallest weight). A scenario run has one route
    /// per flow and then one per cross-traffic source.
    pub class_weights: Vec<f64>,
}

impl EmuConfig {
    /// One route on `link`, no logs.
    pub fn new(link: LinkSpec, routes: Vec<Route>) -> EmuConfig {
        EmuConfig {
            link,
            routes,
            mtu: 1500,
            log_dir: None,
            per_packet_log: true,
            sample_interval: Duration::from_millis(100),
            netns: None,
            class_weights: Vec::new(),
        }
    }
}

/// Why the emulator could not start or failed.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// A socket could not be bound.
    #[error("cannot bind the emulator's socket {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: io::Error,
    },
    /// Entering the namespace failed.
    #[error("cannot enter network namespace {name}: {source}")]
    Netns {
        /// Its name.
        name: String,
        /// The cause.
        source: io::Error,
    },
    /// A log file could not be written.
    #[error("bottleneck log {path}: {source}")]
    Log {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Another I/O failure.
    #[error("emulator: {0}")]
    Io(#[from] io::Error),
    /// No routes were given.
    #[error("the emulator needs at least one route")]
    NoRoutes,
    /// The thread panicked.
    #[error("the emulator thread panicked")]
    Panicked,
}

/// How late packets left the emulator, relative to their delivery time.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Lateness {
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

/// The running state, for progress displays.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Snapshot {
    /// Seconds since start.
    pub t_s: f64,
    /// Flows seen.
    pub flows: usize,
    /// Client to server.
    pub up: Counters,
    /// Server to client.
    pub down: Counters,
}

/// What the emulator did, returned when it stops.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EmuReport {
    /// Run time, seconds.
    pub duration_s: f64,
    /// CPU time of the emulator thread, seconds.
    pub cpu_s: f64,
    /// Flows (client, route pairs) seen.
    pub flows: usize,
    /// Client to server.
    pub up: Counters,
    /// Server to client.
    pub down: Counters,
    /// Hand-off delay after each packet's due time.
    pub lateness: Lateness,
    /// Datagrams the kernel refused to send (full buffer, no listener).
    pub send_errors: u64,
    /// Per-packet records written.
    pub log_records: u64,
}

/// A running emulator. Dropping it stops it.
pub struct Emulator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<EmuReport, EmuError>>>,
    listen: Vec<SocketAddr>,
    snapshot: Arc<Mutex<Snapshot>>,
}

impl Emulator {
    /// Binds the routes' sockets and starts the emulator thread.
    pub fn start(cfg: EmuConfig) -> Result<Emulator, EmuError> {
        if cfg.routes.is_empty() {
            return Err(EmuError::NoRoutes);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let (tx, rx) = mpsc::channel();
        let (stop2, snap2) = (stop.clone(), snapshot.clone());
        let thread = std::thread::Builder::new()
            .name("cclab-emu".into())
            .spawn(move || run(cfg, stop2, snap2, tx))?;
        match rx.recv() {
            Ok(Ok(listen)) => Ok(Emulator {
                stop,
                thread: Some(thread),
                listen,
                snapshot,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(thread
                .join()
                .map_err(|_| EmuError::Panicked)
                .and_then(|r| r.map(|_| ()))
                .err()
                .unwrap_or(EmuError::Panicked)),
        }
    }

    /// The bound listening address of each route, in order.
    pub fn listen_addrs(&self) -> &[SocketAddr] {
        &self.listen
    }

    /// The counters as of the last sample.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops the thread and returns what it did.
    pub fn stop(mut self) -> Result<EmuReport, EmuError> {
        self.stop.store(true, Ordering::SeqCst);
        let t = self.thread.take().expect("stopped twice");
        t.join().map_err(|_| EmuError::Panicked)?
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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
fn recv_stamped(
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

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

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

const SPIN_NS: u64 = 20_000;
const MAX_SLEEP_NS: u64 = 10_000_000;

fn run(
    cfg: EmuConfig,
    stop: Arc<AtomicBool>,
    snapshot: Arc<Mutex<Snapshot>>,
    ready: mpsc::Sender<Result<Vec<SocketAddr>, EmuError>>,
) -> Result<EmuReport, EmuError> {
    let setup = || -> Result<Vec<UdpSocket>, EmuError> {
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
    };
    let listeners = match setup() {
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

    let log_err = |path: &PathBuf| {
        let path = path.clone();
        move |source| EmuError::Log { path, source }
    };
    let start_mono = monotonic_ns();
    let start_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut writer = None;
    let mut samples = None;
    if let Some(dir) = &cfg.log_dir {
        let s = dir.join("bottleneck-samples.jsonl.part");
        samples = Some(SampleWriter::create(&s).map_err(log_err(&s))?);
        if cfg.per_packet_log {
            let p = dir.join("bottleneck.bin.part");
            let header = serde_json::json!({
                "format": "cclab-bottleneck",
                "version": 1,
                "backend": "emu",
                "epoch_unix_ns": start_unix,
                "epoch_monotonic_ns": start_mono,
                "link": cfg.link.to_toml(),
            });
            writer = Some(Writer::create(&p, &header).map_err(log_err(&p))?);
        }
    }
    let _ = ready.send(Ok(addrs));

    let cpu0 = thread_cpu_ns();
    let now = || monotonic_ns().saturating_sub(start_mono);
    let mut dirs = [
        Direction::with_weights(&cfg.link, Dir::Up, cfg.mtu, &cfg.class_weights),
        Direction::with_weights(&cfg.link, Dir::Down, cfg.mtu, &cfg.class_weights),
    ];
    let mut flows: Vec<Flow> = Vec::new();
    let mut by_client: HashMap<(usize, SocketAddr), u16> = HashMap::new();
    let mut pollfds: Vec<libc::pollfd> = Vec::new();
    let mut rebuild = true;
    let mut buf = vec![0u8; 65_536];
    let mut out: Vec<(u64, Packet)> = Vec::new();
    let mut late = LateHist {
        buckets: vec![0; 100_000],
        max: 0,
    };
    let mut send_errors = 0u64;
    let mut sampler = Sampler::new(cfg.sample_interval.as_nanos() as u64);
    let mut no_sink = NoSink;
    let mut sink_err: Option<EmuError> = None;
    let mut last_arrival = [0u64; 2];
    // CLOCK_REALTIME − CLOCK_MONOTONIC, to move kernel stamps onto our clock;
    // refreshed at every sample in case the wall clock is slewed.
    let mut real_minus_mono = realtime_ns().saturating_sub(monotonic_ns());

    macro_rules! sink {
        () => {
            match writer.as_mut() {
                Some(w) => w as &mut dyn Sink,
                None => &mut no_sink as &mut dyn Sink,
            }
        };
    }

    while !stop.load(Ordering::Relaxed) {
        // Deliver what is due.
        let t = now();
        for (i, d) in dirs.iter_mut().enumerate() {
            d.advance(t, sink!(), &mut out);
            for (due, pkt) in out.drain(..) {
                let f = &flows[pkt.flow as usize];
                let r = if i == 0 {
                    f.upstream.send(&pkt.data)
                } else {
                    listeners[f.route].send_to(&pkt.data, f.client)
                };
                if r.is_err() {
                    send_errors += 1;
                }
                late.add(now().saturating_sub(due));
            }
        }
        // Sample.
        if t >= sampler.next_due() {
            let mut snap = Snapshot {
                t_s: t as f64 / 1e9,
                flows: flows.len(),
                ..Snapshot::default()
            };
            for s in sampler.take(t, &dirs) {
                if let Some(w) = samples.as_mut() {
                    if let Err(e) = w.write(&s) {
                        sink_err.get_or_insert(EmuError::Log {
                            path: "bottleneck-samples.jsonl".into(),
                            source: e,
                        });
                    }
                }
            }
            snap.up = dirs[0].counters.clone();
            snap.down = dirs[1].counters.clone();
            if let Ok(mut s) = snapshot.lock() {
                *s = snap;
            }
            real_minus_mono = realtime_ns().saturating_sub(monotonic_ns());
        }
        // Wait for the next event or a datagram.
        if rebuild {
            pollfds.clear();
            for s in &listeners {
                pollfds.push(libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            for f in &flows {
                pollfds.push(libc::pollfd {
                    fd: f.upstream.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            rebuild = false;
        }
        let t = now();
        let next = dirs
            .iter()
            .filter_map(|d| d.next_event())
            .min()
            .unwrap_or(u64::MAX)
            .min(sampler.next_due())
            .min(t + MAX_SLEEP_NS);
        let wait = next.saturating_sub(t);
        let sleep = wait.saturating_sub(SPIN_NS);
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: pollfds is a valid array of initialised pollfd structs.
        let n = unsafe {
            libc::ppoll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if n <= 0 {
            continue;
        }
        // Read everything that is waiting, oldest socket first.
        let nl = listeners.len();
        for k in 0..pollfds.len() {
            if pollfds[k].revents == 0 {
                continue;
            }
            for _ in 0..256 {
                let (len, from, stamp) = match recv_stamped(pollfds[k].fd, &mut buf) {
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
                    flows[k - nl].client
                };
                // The kernel's arrival stamp, moved onto our clock, so the
                // packet enters the link when it arrived, not when this
                // thread woke up; never before an earlier arrival.
                let t_now = now();
                let dir_idx = usize::from(k >= nl);
                let t = stamp
                    .map(|st| {
                        st.saturating_sub(real_minus_mono)
                            .saturating_sub(start_mono)
                    })
                    .filter(|&st| st <= t_now && t_now - st < 100_000_000)
                    .unwrap_or(t_now)
                    .max(last_arrival[dir_idx]);
                last_arrival[dir_idx] = t;
                let (dir, flow) = if k < nl {
                    let id = match by_client.get(&(k, from)) {
                        Some(&id) => id,
                        None => {
                            if flows.len() >= u16::MAX as usize {
                                continue; // no room for another flow id
                            }
                            let target = cfg.routes[k].target;
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
                            let id = flows.len() as u16;
                            flows.push(Flow {
                                route: k,
                                client: from,
                                upstream: up,
                            });
                            by_client.insert((k, from), id);
                            rebuild = true;
                            id
                        }
                    };
                    (0, id)
                } else {
                    (1, (k - nl) as u16)
                };
                let pkt = Packet {
                    data: buf[..len].to_vec(),
                    flow,
                    // The route: the scenario's flow or cross source.
                    class: flows[flow as usize].route.min(u16::MAX as usize) as u16,
                    arrival_ns: t,
                };
                dirs[dir].push(pkt, t, sink!());
            }
        }
    }

    let end = now();
    let report = EmuReport {
        duration_s: end as f64 / 1e9,
        cpu_s: thread_cpu_ns().saturating_sub(cpu0) as f64 / 1e9,
        flows: flows.len(),
        up: dirs[0].counters.clone(),
        down: dirs[1].counters.clone(),
        lateness: Lateness {
            p50_us: late.quantile(0.5),
            p99_us: late.quantile(0.99),
            max_us: late.max as f64 / 1000.0,
        },
        send_errors,
        log_records: 0,
    };
    let mut report = report;
    if let Some(dir) = &cfg.log_dir {
        if let Some(w) = writer.take() {
            let p = dir.join("bottleneck.bin");
            report.log_records = w.finish().map_err(log_err(&p))?;
            std::fs::rename(dir.join("bottleneck.bin.part"), &p).map_err(log_err(&p))?;
        }
        if let Some(s) = samples.take() {
            let p = dir.join("bottleneck-samples.jsonl");
            s.finish().map_err(log_err(&p))?;
            std::fs::rename(dir.join("bottleneck-samples.jsonl.part"), &p).map_err(log_err(&p))?;
        }
    }
    if let Some(e) = sink_err {
        return Err(e);
    }
    Ok(report)
}
