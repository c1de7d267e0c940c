//! Constant-bit-rate UDP cross traffic, optionally on/off, through the
//! emulator's bottleneck.
//!
//! Upload cross traffic is a paced sender on the client side and a
//! counting sink behind the emulator. Download cross traffic needs the
//! server side to send towards the client, and the emulator only forwards
//! to clients it has heard from, so the client-side sink first sends a
//! small hello (repeated every 200 ms) and the generator behind the
//! emulator answers it with the paced stream.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::scenario::{CrossSpec, Direction};

/// Counters of one cross-traffic source.
#[derive(Default, Debug)]
pub struct CrossCounters {
    /// Bytes sent.
    pub sent: AtomicU64,
    /// Bytes received at the far end.
    pub received: AtomicU64,
}

/// A running cross-traffic source.
pub struct Cross {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Its counters.
    pub counters: Arc<CrossCounters>,
}

/// The far-end socket of a cross source: the emulator route's target.
pub fn target_socket() -> std::io::Result<UdpSocket> {
    UdpSocket::bind("127.0.0.1:0")
}

fn paced(
    spec: &CrossSpec,
    t0: Instant,
    stop: &AtomicBool,
    sock: &UdpSocket,
    to: Option<SocketAddr>,
    counters: &CrossCounters,
) {
    let size = spec.packet_size as usize;
    let buf = vec![0u8; size];
    let gap = Duration::from_secs_f64(size as f64 * 8.0 / spec.rate_bps);
    let start = t0 + Duration::from_nanos(spec.start_ns);
    let end = spec.duration_ns.map(|d| start + Duration::from_nanos(d));
    let mut next = start;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        if next > now {
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        let since = next.saturating_duration_since(start);
        if spec.is_on(since.as_nanos() as u64) {
            let r = match to {
                Some(a) => sock.send_to(&buf, a),
                None => sock.send(&buf),
            };
            if r.is_ok() {
                counters.sent.fetch_add(size as u64, Ordering::Relaxed);
            }
        }
        next += gap;
        // Fell far behind (a stall): do not burst to catch up.
        if Instant::now() > next + Duration::from_millis(100) {
            next = Instant::now();
        }
    }
}

impl Cross {
    /// Starts `spec` against `emu_addr` (the route's listening address);
    /// `target` is the socket the route forwards to. `t0` is the run's start.
    pub fn start(
        spec: &CrossSpec,
        emu_addr: SocketAddr,
        target: UdpSocket,
        t0: Instant,
    ) -> std::io::Result<Cross> {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(CrossCounters::default());
        let client = UdpSocket::bind("127.0.0.1:0")?;
        client.connect(emu_addr)?;
        client.set_read_timeout(Some(Duration::from_millis(200)))?;
        target.set_read_timeout(Some(Duration::from_millis(200)))?;
        let mut threads = Vec::new();
        match spec.direction {
            Direction::Upload => {
                let (s, c, sp) = (stop.clone(), counters.clone(), spec.clone());
                threads.push(std::thread::spawn(move || {
                    paced(&sp, t0, &s, &client, None, &c)
                }));
                let (s, c) = (stop.clone(), counters.clone());
                threads.push(std::thread::spawn(move || {
                    let mut buf = [0u8; 2048];
                    while !s.load(Ordering::Relaxed) {
                        if let Ok(n) = target.recv(&mut buf) {
                            c.received.fetch_add(n as u64, Ordering::Relaxed);
                        }
                    }
                }));
            }
            Direction::Download => {
                // Client side: hellos, and count what arrives.
                let (s, c) = (stop.clone(), counters.clone());
                threads.push(std::thread::spawn(move || {
                    let mut buf = [0u8; 2048];
                    let mut last_hello = Instant::now() - Duration::from_secs(1);
                    while !s.load(Ordering::Relaxed) {
                        if last_hello.elapsed() >= Duration::from_millis(200) {
                            let _ = client.send(b"hello");
                            last_hello = Instant::now();
                        }
                        if let Ok(n) = client.recv(&mut buf) {
                            c.received.fetch_add(n as u64, Ordering::Relaxed);
                        }
                    }
                }));
                // Server side: learn where to send, then send.
                let (s, c, sp) = (stop.clone(), counters.clone(), spec.clone());
                threads.push(std::thread::spawn(move || {
                    let mut buf = [0u8; 64];
                    let peer = loop {
                        if s.load(Ordering::Relaxed) {
                            return;
                        }
                        if let Ok((_, from)) = target.recv_from(&mut buf) {
                            break from;
                        }
                    };
                    paced(&sp, t0, &s, &target, Some(peer), &c);
                }));
            }
        }
        Ok(Cross {
            stop,
            threads,
            counters,
        })
    }

    /// Stops the source.
    pub fn stop(self) -> Arc<CrossCounters> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
        self.counters
    }
}
