//! A real quiche client and server in one process, joined by an emulated
//! bottleneck (rate, one-way delay, drop-tail queue, periodic loss, an
//! optional blackout), in virtual time: the loop sets quiche's clock
//! (`quiche::sim`) to each event in turn and seeds quiche's randomness, so
//! a run repeats exactly and waits for nothing.
//!
//! It used to run in real time, sleeping between events. Which datagrams a
//! pass of the loop read together then depended on when the thread got the
//! CPU, and so did the outcome: quiche's built-in Reno alone ended 7 of 42
//! runs of `newreno_plugin_matches_builtin_reno` with a mean window 9-21%
//! above the other 35 (in those examined, a packet sent just after the
//! slow-start exit had not met a full queue). A comparison of two single
//! runs measured the machine as much as the algorithms. Reading several
//! datagrams per pass is still worth testing, deterministically:
//! [`PathSpec::wake_every`].
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bottleneck and the transfer.
#[derive(Clone, Debug)]
pub struct PathSpec {
    /// Bottleneck rate, bits per second (both directions).
    pub rate_bps: f64,
    /// One-way propagation delay.
    pub one_way_delay: Duration,
    /// Drop-tail queue limit in bytes.
    pub queue_bytes: usize,
    /// Drop every n-th server-to-client packet (0: never).
    pub drop_every: u64,
    /// Drop every server-to-client packet, queued or on the wire, in this
    /// window after start. Client ACKs still flow, so no late cumulative
    /// ACK inflates the RTT after the outage.
    pub blackout: Option<(Duration, Duration)>,
    /// Bytes the server sends.
    pub bytes: usize,
    /// Give up after this long (virtual time).
    pub deadline: Duration,
    /// Wake only every this long, as an event loop on a periodic timer:
    /// each pass reads everything that arrived since the last one, then the
    /// application writes and both ends send. `None`: wake at every arrival
    /// and timer, so an ACK is answered before the next one is read.
    pub wake_every: Option<Duration>,
}

impl Default for PathSpec {
    fn default() -> Self {
        PathSpec {
            rate_bps: 20e6,
            one_way_delay: Duration::from_millis(20),
            queue_bytes: 100_000,
            drop_every: 0,
            blackout: None,
            bytes: 2_000_000,
            deadline: Duration::from_secs(30),
            wake_every: None,
        }
    }
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Bytes the client received.
    pub received: usize,
    /// Whether the client saw the stream's end.
    pub complete: bool,
    /// Time from start to the last byte (virtual time).
    pub elapsed: Duration,
    /// (seconds since start, server cwnd in bytes), every 5 ms.
    pub cwnd: Vec<(f64, usize)>,
    /// Packets the bottleneck dropped (queue or loss pattern).
    pub dropped: u64,
    /// The server's qlog, as written.
    pub server_qlog: String,
    /// Server path statistics at the end.
    pub server_lost: usize,
    /// Mean time server-to-client packets waited in the bottleneck queue.
    pub mean_queue_delay: Duration,
    /// Longest time the client went without receiving stream data, after
    /// the first byte.
    pub longest_stall: Duration,
}

struct Link {
    rate_bps: f64,
    delay: Duration,
    queue_limit: usize,
    /// (arrival time at the far end, datagram).
    in_transit: VecDeque<(Instant, Vec<u8>)>,
    /// When the last queued packet finishes serialization.
    busy_until: Option<Instant>,
    drop_every: u64,
    count: u64,
    dropped: u64,
    /// Sum and count of queueing delays of accepted packets.
    queue_delay_sum: Duration,
    queued: u64,
}

impl Link {
    fn new(spec: &PathSpec, drop_every: u64) -> Self {
        Link {
            rate_bps: spec.rate_bps,
            delay: spec.one_way_delay,
            queue_limit: spec.queue_bytes,
            in_transit: VecDeque::new(),
            busy_until: None,
            drop_every,
            count: 0,
            dropped: 0,
            queue_delay_sum: Duration::ZERO,
            queued: 0,
        }
    }

    /// Queue occupancy in bytes at `at`, estimated from the backlog.
    fn backlog_bytes(&self, at: Instant) -> usize {
        self.busy_until
            .map(|b| (b.saturating_duration_since(at).as_secs_f64() * self.rate_bps / 8.0) as usize)
            .unwrap_or(0)
    }

    fn send(&mut self, at: Instant, pkt: &[u8], blackout: bool) {
        self.count += 1;
        if blackout
            || (self.drop_every > 0 && self.count.is_multiple_of(self.drop_every))
            || self.backlog_bytes(at) + pkt.len() > self.queue_limit
        {
            self.dropped += 1;
            return;
        }
        let start = self.busy_until.map_or(at, |b| b.max(at));
        self.queue_delay_sum += start - at;
        self.queued += 1;
        let done = start + Duration::from_secs_f64(pkt.len() as f64 * 8.0 / self.rate_bps);
        self.busy_until = Some(done);
        let arrival = done + self.delay;
        // Keep arrival order (FIFO link).
        self.in_transit.push_back((arrival, pkt.to_vec()));
    }

    fn next_arrival(&self) -> Option<Instant> {
        self.in_transit.front().map(|p| p.0)
    }
}

#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn config(server: bool) -> quiche::Config {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
    if server {
        c.load_cert_chain_from_pem_file(&cert_file("cert.crt"))
            .unwrap();
        c.load_priv_key_from_pem_file(&cert_file("cert.key"))
            .unwrap();
    }
    c.verify_peer(false);
    c.set_application_protos(&[b"cclab-test"]).unwrap();
    c.set_max_idle_timeout(30_000);
    c.set_initial_max_data(1 << 30);
    c.set_initial_max_stream_data_bidi_local(1 << 30);
    c.set_initial_max_stream_data_bidi_remote(1 << 30);
    c.set_initial_max_streams_bidi(10);
    c.set_max_recv_udp_payload_size(1350);
    c.set_max_send_udp_payload_size(1350);
    c
}

/// The server's certificate and key: quiche's example pair (RSA, valid
/// until 2047) in the quiche source the workspace builds against. Its
/// RSA-PSS signatures always have the same length, so every handshake
/// sends the same bytes and a run repeats exactly; ECDSA's vary by a byte
/// or two, which moved the rest of a run by a microsecond or so.
fn cert_file(name: &str) -> String {
    format!(
        "{}/../.patched/quiche/examples/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Returns the thread to quiche's wall clock however a run ends.
struct VirtualClock;

impl VirtualClock {
    fn start(at: Instant) -> Self {
        quiche::sim::set_time(at);
        quiche::sim::seed_rng(1);
        VirtualClock
    }
}

impl Drop for VirtualClock {
    fn drop(&mut self) {
        quiche::sim::reset();
    }
}

/// Runs one download: the server (the sender) uses whatever `setup` puts on
/// its config.
pub fn run(spec: &PathSpec, setup: impl FnOnce(&mut quiche::Config)) -> Outcome {
    let start = Instant::now();
    let _clock = VirtualClock::start(start);
    let mut scfg = config(true);
    setup(&mut scfg);
    let mut ccfg = config(false);

    let caddr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let saddr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let scid = quiche::ConnectionId::from_ref(&[0xc1; 16]);
    let mut client = quiche::connect(Some("localhost"), &scid, caddr, saddr, &mut ccfg).unwrap();
    let sscid = quiche::ConnectionId::from_ref(&[0x5e; 16]);
    let mut server = quiche::accept(&sscid, None, saddr, caddr, &mut scfg).unwrap();
    let qlog = SharedBuf::default();
    server.set_qlog_with_level(
        Box::new(qlog.clone()),
        "pair".into(),
        "server".into(),
        quiche::QlogLevel::Extra,
    );

    let mut up = Link::new(spec, 0);
    let mut down = Link::new(spec, spec.drop_every);
    let mut out = Outcome::default();
    let mut buf = vec![0u8; 65535];
    let payload = vec![0xabu8; 64 * 1024];
    let mut requested = false;
    let mut sent = 0usize;
    let mut next_sample = start;
    let mut last_data: Option<Instant> = None;
    let mut now = start;

    while now - start < spec.deadline {
        quiche::sim::set_time(now);
        let since = now - start;
        let blackout = spec.blackout.is_some_and(|(a, b)| since >= a && since < b);

        // Deliveries.
        for (conn, link, from, to, outage) in [
            (&mut server, &mut up, caddr, saddr, false),
            (&mut client, &mut down, saddr, caddr, true),
        ] {
            while link.next_arrival().is_some_and(|t| t <= now) {
                let (at, mut pkt) = link.in_transit.pop_front().unwrap();
                // A blackout also loses what was on the wire.
                let since = at.saturating_duration_since(start);
                if outage && spec.blackout.is_some_and(|(a, b)| since >= a && since < b) {
                    link.dropped += 1;
                    continue;
                }
                let _ = conn.recv(&mut pkt, quiche::RecvInfo { from, to });
            }
        }
        for id in client.readable() {
            while let Ok((n, fin)) = client.stream_recv(id, &mut buf) {
                out.received += n;
                if let Some(prev) = last_data {
                    out.longest_stall = out.longest_stall.max(now - prev);
                }
                last_data = Some(now);
                if fin {
                    out.complete = true;
                    out.elapsed = now - start;
                }
            }
        }
        if out.complete {
            break;
        }

        // Timers.
        for conn in [&mut client, &mut server] {
            if conn.timeout().is_some_and(|t| t.is_zero()) {
                conn.on_timeout();
            }
        }

        // Client requests once established; server streams the response.
        if client.is_established() && !requested {
            client.stream_send(0, b"GET", true).unwrap();
            requested = true;
        }
        if server.is_established() {
            for id in server.readable() {
                while server.stream_recv(id, &mut buf).is_ok() {}
            }
            while sent < spec.bytes {
                let n = (spec.bytes - sent).min(payload.len());
                match server.stream_send(0, &payload[..n], sent + n == spec.bytes) {
                    Ok(w) if w > 0 => sent += w,
                    _ => break,
                }
            }
        }

        // Egress of both ends into the links, at the time quiche asks.
        for (conn, link, outage) in [
            (&mut client, &mut up, false),
            (&mut server, &mut down, blackout),
        ] {
            loop {
                match conn.send(&mut buf) {
                    Ok((n, info)) => link.send(info.at.max(now), &buf[..n], outage),
                    Err(quiche::Error::Done) => break,
                    Err(e) => panic!("send failed: {e:?}"),
                }
            }
        }

        while now >= next_sample {
            if let Some(p) = server.path_stats().next() {
                out.cwnd.push(((now - start).as_secs_f64(), p.cwnd));
            }
            next_sample += Duration::from_millis(5);
        }

        // The next event: an arrival, a timer or a sample.
        let mut wake = next_sample;
        for t in [up.next_arrival(), down.next_arrival()]
            .into_iter()
            .flatten()
        {
            wake = wake.min(t);
        }
        for conn in [&client, &server] {
            if let Some(t) = conn.timeout() {
                wake = wake.min(now + t);
            }
        }
        if let Some(every) = spec.wake_every {
            // The first tick after `now`.
            let ticks = (now - start).as_nanos() / every.as_nanos() + 1;
            wake = start + every * ticks as u32;
        }
        now = wake.max(now + Duration::from_nanos(1));
    }
    if !out.complete {
        out.elapsed = now - start;
    }
    out.dropped = up.dropped + down.dropped;
    out.mean_queue_delay = down.queue_delay_sum / down.queued.max(1) as u32;
    out.server_lost = server.path_stats().next().map_or(0, |p| p.lost);
    server.close(false, 0, b"").ok();
    drop(server);
    out.server_qlog = String::from_utf8_lossy(&qlog.0.lock().unwrap()).into_owned();
    out
}
