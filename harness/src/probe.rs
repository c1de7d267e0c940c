//! A UDP probe of the link's own: a paced sender and a timestamping
//! receiver, for measuring what a link really does (delivered rate,
//! one-way delay, loss) without any transport's congestion control in the
//! way.
//!
//! Each datagram carries its sequence number and its send time on
//! `CLOCK_MONOTONIC` (which every process and namespace on the machine
//! share), so the receiver computes one-way delays directly. Either end can
//! run inside a network namespace.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::emu::monotonic_ns;

const HEADER: usize = 16;

fn enter(ns: Option<&str>) -> io::Result<()> {
    if let Some(ns) = ns {
        crate::netns::enter(ns)?;
    }
    // SAFETY: only this thread's timer slack changes.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    Ok(())
}

/// One received datagram.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    /// Sequence number.
    pub seq: u64,
    /// Sent at (monotonic ns).
    pub sent_ns: u64,
    /// Received at (monotonic ns).
    pub recv_ns: u64,
    /// Size in bytes.
    pub len: u32,
}

/// A receiver collecting arrivals on its own thread.
pub struct Receiver {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<io::Result<Vec<Arrival>>>,
}

impl Receiver {
    /// Binds `addr` (inside `ns`, if given) and starts receiving.
    pub fn bind(ns: Option<&str>, addr: SocketAddr) -> io::Result<Receiver> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let (stop2, ns) = (stop.clone(), ns.map(str::to_string));
        let handle = std::thread::spawn(move || -> io::Result<Vec<Arrival>> {
            let sock = match enter(ns.as_deref()).and_then(|_| UdpSocket::bind(addr)) {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            let size: libc::c_int = 16 << 20;
            // SAFETY: setsockopt with an int option on a valid fd.
            unsafe {
                use std::os::fd::AsRawFd;
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUFFORCE,
                    &size as *const _ as *const libc::c_void,
                    4,
                );
            }
            sock.set_read_timeout(Some(Duration::from_millis(20)))?;
            let _ = tx.send(sock.local_addr());
            let mut out = Vec::with_capacity(1 << 20);
            let mut buf = [0u8; 65_536];
            while !stop2.load(Ordering::Relaxed) {
                match sock.recv(&mut buf) {
                    Ok(n) if n >= HEADER => {
                        let recv_ns = monotonic_ns();
                        out.push(Arrival {
                            seq: u64::from_le_bytes(buf[0..8].try_into().unwrap()),
                            sent_ns: u64::from_le_bytes(buf[8..16].try_into().unwrap()),
                            recv_ns,
                            len: n as u32,
                        });
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        });
        let addr = rx
            .recv()
            .map_err(|_| io::Error::other("probe receiver thread ended"))??;
        Ok(Receiver { addr, stop, handle })
    }

    /// Where to send.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits `drain` for stragglers, stops, and returns every arrival.
    pub fn finish(self, drain: Duration) -> io::Result<Vec<Arrival>> {
        std::thread::sleep(drain);
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .join()
            .map_err(|_| io::Error::other("probe receiver panicked"))?
    }
}

/// What the sender did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sent {
    /// Datagrams sent.
    pub packets: u64,
    /// Datagrams the kernel refused (full buffer).
    pub errors: u64,
    /// First and last send times (monotonic ns).
    pub first_ns: u64,
    /// Last send time.
    pub last_ns: u64,
    /// CPU time the sender used, seconds.
    pub cpu_s: f64,
}

/// Sends `size`-byte datagrams to `to` at `rate_bps` for `duration`, in
/// groups of `burst` (1 = every datagram on its own schedule), from a new
/// thread inside `ns` if given. Blocks until done.
pub fn send(
    ns: Option<&str>,
    to: SocketAddr,
    rate_bps: f64,
    size: usize,
    burst: usize,
    duration: Duration,
) -> io::Result<Sent> {
    let ns = ns.map(str::to_string);
    let size = size.max(HEADER);
    let burst = burst.max(1);
    std::thread::spawn(move || -> io::Result<Sent> {
        enter(ns.as_deref())?;
        let bind: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
            .parse()
            .unwrap();
        let sock = UdpSocket::bind(bind)?;
        sock.connect(to)?;
        let gap = size as f64 * 8.0 * 1e9 / rate_bps;
        let total = (duration.as_secs_f64() * 1e9 / gap).ceil() as u64;
        let mut buf = vec![0u8; size];
        // Sleep until 150 µs before each send, then spin. In a guest with
        // one virtual CPU (user-mode Linux) spinning starves the receiver
        // and the kernel's own work, so there the sender only sleeps.
        let spin_ns = if std::env::var_os("CCLAB_IN_VM").is_some() {
            0
        } else {
            150_000
        };
        let cpu0 = crate::emu::thread_cpu_ns();
        let start = monotonic_ns();
        let mut sent = Sent {
            first_ns: start,
            ..Sent::default()
        };
        let mut seq = 0u64;
        while seq < total {
            let due = start + (seq as f64 * gap) as u64;
            loop {
                let now = monotonic_ns();
                if now >= due {
                    break;
                }
                let left = due - now;
                if left > spin_ns {
                    std::thread::sleep(Duration::from_nanos(left.saturating_sub(spin_ns * 2 / 3)));
                } else {
                    std::hint::spin_loop();
                }
            }
            for _ in 0..burst.min((total - seq) as usize) {
                buf[0..8].copy_from_slice(&seq.to_le_bytes());
                let now = monotonic_ns();
                buf[8..16].copy_from_slice(&now.to_le_bytes());
                match sock.send(&buf) {
                    Ok(_) => sent.packets += 1,
                    Err(_) => sent.errors += 1,
                }
                sent.last_ns = now;
                seq += 1;
            }
        }
        sent.cpu_s = (crate::emu::thread_cpu_ns() - cpu0) as f64 / 1e9;
        Ok(sent)
    })
    .join()
    .map_err(|_| io::Error::other("probe sender panicked"))?
}

/// What a probe measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Measured {
    /// Datagrams sent.
    pub sent: u64,
    /// Distinct datagrams received.
    pub received: u64,
    /// Extra copies received.
    pub duplicates: u64,
    /// Arrivals with a lower sequence number than one before them.
    pub reordered: u64,
    /// Fraction of sent datagrams never received.
    pub loss_rate: f64,
    /// Receive rate over the middle of the run (first 10% and last 5% of
    /// arrivals skipped), bit/s of UDP payload.
    pub delivered_bps: f64,
    /// One-way delay quantiles, ms: p50, p99, max.
    pub owd_ms: [f64; 3],
    /// Median one-way delay, ms, of the datagrams sent in the second half
    /// of the run: the settled queue of a link whose AQM takes a while to
    /// respond, without the transient of the first half.
    pub owd_ms_late_p50: f64,
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)]
}

/// Summarises arrivals. `expected_owd_ns(len)` is the delay the link
/// should give a datagram of that size with an empty queue; the returned
/// error quantiles (`owd - expected`, ms) are then p50, p99, max.
pub fn measure(
    sent: &Sent,
    arrivals: &[Arrival],
    expected_owd_ns: impl Fn(u32) -> u64,
) -> (Measured, [f64; 3]) {
    let mut seen = std::collections::HashSet::with_capacity(arrivals.len());
    let mut m = Measured {
        sent: sent.packets,
        ..Measured::default()
    };
    let mut max_seq = None;
    let mut owd = Vec::with_capacity(arrivals.len());
    let mut late = Vec::new();
    let half = sent.first_ns + (sent.last_ns.saturating_sub(sent.first_ns)) / 2;
    let mut errs = Vec::with_capacity(arrivals.len());
    for a in arrivals {
        if !seen.insert(a.seq) {
            m.duplicates += 1;
            continue;
        }
        if max_seq.is_some_and(|s| a.seq < s) {
            m.reordered += 1;
        }
        max_seq = max_seq.max(Some(a.seq));
        let d = a.recv_ns.saturating_sub(a.sent_ns);
        owd.push(d);
        if a.sent_ns >= half {
            late.push(d);
        }
        errs.push(d as i64 - expected_owd_ns(a.len) as i64);
    }
    m.received = seen.len() as u64;
    m.loss_rate = if m.sent > 0 {
        1.0 - m.received as f64 / m.sent as f64
    } else {
        0.0
    };
    let n = arrivals.len();
    let (lo, hi) = (n / 10, n - n / 20);
    if hi > lo + 1 {
        let bytes: u64 = arrivals[lo + 1..hi].iter().map(|a| a.len as u64).sum();
        let span = arrivals[hi - 1]
            .recv_ns
            .saturating_sub(arrivals[lo].recv_ns);
        if span > 0 {
            m.delivered_bps = bytes as f64 * 8.0 * 1e9 / span as f64;
        }
    }
    owd.sort_unstable();
    late.sort_unstable();
    errs.sort_unstable();
    let ms = |v: u64| v as f64 / 1e6;
    m.owd_ms_late_p50 = ms(quantile(&late, 0.5));
    m.owd_ms = [
        ms(quantile(&owd, 0.5)),
        ms(quantile(&owd, 0.99)),
        ms(*owd.last().unwrap_or(&0)),
    ];
    let q = |p: f64| {
        if errs.is_empty() {
            0.0
        } else {
            errs[((p * (errs.len() - 1) as f64).round() as usize).min(errs.len() - 1)] as f64 / 1e6
        }
    };
    (
        m,
        [
            q(0.5),
            q(0.99),
            errs.last().map_or(0.0, |&e| e as f64 / 1e6),
        ],
    )
}

/// The two-sided 99% interval for the number of successes of `n` trials
/// at probability `p` (normal approximation with continuity correction).
pub fn binomial_99(n: u64, p: f64) -> (f64, f64) {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    (mean - 2.576 * sd - 0.5, mean + 2.576 * sd + 0.5)
}

/// Which link a [`measure_link`] probe crosses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeLink {
    /// The userspace emulator on loopback.
    Emu,
    /// Kernel netem/tbf on veth between namespaces on this host (root, a
    /// kernel with netem, or tbf/htb alone for a link without
    /// impairments).
    Netem,
    /// Kernel netem in the guest router, the probe's ends in host
    /// namespaces (what `cclab run --link netem` uses on a host without
    /// netem, [`crate::guest_router::wanted`]).
    GuestRouter,
}

/// Bytes a datagram of `payload` bytes occupies where a link counts it:
/// the UDP payload for emu; + 8 (UDP) + 20 (IPv4) + 14 (Ethernet) for tc
/// on veth.
pub fn wire_bytes(link: ProbeLink, payload: u64) -> u64 {
    match link {
        ProbeLink::Emu => payload,
        ProbeLink::Netem | ProbeLink::GuestRouter => payload + 42,
    }
}

/// One probe phase over a link, in the download direction.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LinkProbe {
    /// Offered load, bit/s of UDP payload.
    pub offered_bps: f64,
    /// What arrived, as [`measure`] reports it.
    pub measured: Measured,
    /// Delivered rate counted as the link counts bytes ([`wire_bytes`]).
    pub delivered_wire_bps: f64,
    /// One-way delay minus (propagation delay + serialization at the
    /// link's rate), ms: p50, p99, max.
    pub owd_error_ms: [f64; 3],
    /// CPU seconds the sender used.
    pub sender_cpu_s: f64,
    /// netem only: the bottleneck's qdiscs as the kernel reports them at
    /// the end (`tc -s -j qdisc show` on the router's egress veth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_qdiscs: Option<serde_json::Value>,
    /// netem only: the qdiscs on the sender's veth (the segmenting tbf
    /// and netem, whose `drops` are its loss model's losses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impairment_qdiscs: Option<serde_json::Value>,
    /// netem only: the router's links with their counters (`ip -s -j link`),
    /// where a veth that could not take a packet counts a drop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub veth_stats: Option<serde_json::Value>,
}

/// Sends a paced UDP probe through `link`'s down direction (server side to
/// client side) at `offered_bps` for `duration` and measures it.
pub fn measure_link(
    kind: ProbeLink,
    link: &crate::link::LinkSpec,
    offered_bps: f64,
    size: usize,
    duration: Duration,
) -> Result<LinkProbe, Box<dyn std::error::Error + Send + Sync>> {
    let d = link.dir(crate::link::Dir::Down);
    let (delay_ns, rate) = (d.delay_ns, d.rate_bps);
    let expected =
        move |len: u32| delay_ns + (wire_bytes(kind, len as u64) as f64 * 8.0 * 1e9 / rate) as u64;
    let mut kernel_qdiscs = None;
    let mut impairment_qdiscs = None;
    let mut veth_stats = None;
    // The probe from the server's namespace to a receiver at `client_ip`
    // in the client's.
    let across = |client_ns: &str, client_ip: std::net::Ipv4Addr, server_ns: &str| {
        let rx = Receiver::bind(Some(client_ns), SocketAddr::from((client_ip, 0)))?;
        let sent = send(
            Some(server_ns),
            rx.local_addr(),
            offered_bps,
            size,
            1,
            duration,
        )?;
        let arrivals = rx.finish(Duration::from_millis(300) + Duration::from_nanos(delay_ns))?;
        Ok::<_, io::Error>((sent, arrivals))
    };
    let (sent, arrivals) = match kind {
        ProbeLink::Emu => {
            use crate::emu::{EmuConfig, Emulator, Forward};
            let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
            let rx = Receiver::bind(None, lo)?;
            // The emulator's up direction carries what its clients send:
            // give it the down direction's description.
            let mut l = link.clone();
            l.up = l.down.clone();
            let mut cfg = EmuConfig::new(
                l,
                vec![Forward {
                    listen: lo,
                    target: rx.local_addr(),
                }],
            );
            cfg.per_packet_log = false;
            let emu = Emulator::start(cfg)?;
            let sent = send(None, emu.listen_addrs()[0], offered_bps, size, 1, duration)?;
            let arrivals =
                rx.finish(Duration::from_millis(300) + Duration::from_nanos(delay_ns))?;
            emu.stop()?;
            (sent, arrivals)
        }
        ProbeLink::GuestRouter => {
            // The link in the guest router, the probe's ends in host
            // namespaces, as `cclab run` has it.
            let sc = crate::scenario::Scenario {
                link: link.clone(),
                ..Default::default()
            };
            // The directory is for Linux TCP endpoints in the guest; the
            // probe has none.
            let g = crate::guest_router::setup(&sc, 1, &std::env::temp_dir(), false)?;
            let place = &g.places[0];
            across(&place.client_ns, g.client_ip, &place.server_ns)?
        }
        ProbeLink::Netem => {
            let caps = crate::netem::probe();
            let n = crate::netem::KernelNet::one(link, &caps, 1500, true)?;
            let t = n.namespaces().expect("one link is built compact");
            let (sent, arrivals) = across(&t.client, crate::netns::CLIENT_IP, &t.server)?;
            let dev = crate::netns::ROUTER_CLIENT_DEV;
            kernel_qdiscs = crate::netns::run(
                "tc",
                &["-n", &t.router, "-s", "-j", "qdisc", "show", "dev", dev],
            )
            .ok()
            .and_then(|o| serde_json::from_str(&o).ok());
            let dev = crate::netns::SERVER_DEV;
            impairment_qdiscs = crate::netns::run(
                "tc",
                &["-n", &t.server, "-s", "-j", "qdisc", "show", "dev", dev],
            )
            .ok()
            .and_then(|o| serde_json::from_str(&o).ok());
            veth_stats = crate::netns::run("ip", &["-n", &t.router, "-s", "-j", "link", "show"])
                .ok()
                .and_then(|o| serde_json::from_str(&o).ok());
            drop(n);
            (sent, arrivals)
        }
    };
    let (measured, owd_error_ms) = measure(&sent, &arrivals, expected);
    let payload = size.max(HEADER) as f64;
    Ok(LinkProbe {
        offered_bps,
        delivered_wire_bps: measured.delivered_bps * wire_bytes(kind, payload as u64) as f64
            / payload,
        measured,
        owd_error_ms,
        sender_cpu_s: sent.cpu_s,
        kernel_qdiscs,
        impairment_qdiscs,
        veth_stats,
    })
}
