//! `sim`, the virtual-time link: the real quiche stack and application on
//! a discrete-event clock.
//!
//! Every flow is a [`quic_app::client::ClientApp`] and a
//! [`quic_app::server::ServerApp`] (the state machines the `quic-client`
//! and `quic-server` binaries run), with the congestion controller the
//! scenario names. The link is the emulator's own two
//! [`Direction`](crate::emu::Direction) pipelines (loss, duplication,
//! queue + AQM or per-class DRR, serialization or trace, delay + jitter,
//! reordering; flow `i` is traffic class `i` and cross source `j` class
//! `flows + j`, as the emulator's routes number them), and
//! cross traffic is the same constant-bit-rate schedule. One loop owns
//! all of it: it finds the earliest thing due (a packet entering the link
//! at its pacing time `send_info.at`, the link's next departure or
//! delivery, a quiche timer, a pacing release, a flow start, a cross
//! packet, a bottleneck sample), sets the clock there, and does it. No
//! sockets, threads or sleeping: a run is a pure function of the scenario
//! and its seed.
//!
//! quiche reads time and its own randomness through the patch's
//! `quiche::sim` hook, which this loop sets on its thread; plugins see
//! time only through quiche's hooks. Endpoint processing takes no virtual
//! time: the CPU cost of quiche, TLS and qlog is zero here, where on a
//! real host it delays packets (and, on a busy machine, by a varying
//! amount). Results land in the same directory layout as `emu` runs.

mod tls;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quic_app::client::{ClientApp, ClientSettings, Report};
use quic_app::server::{ServerApp, ServerSettings};
use quic_app::{Next, QlogLevel};

use crate::bottleneck::{NoSink, SampleWriter, Sink, Writer};
use crate::emu::pipeline::Sampler;
use crate::emu::rng::Rng;
use crate::emu::{Counters, Direction, Packet};
use crate::link::Dir;
use crate::scenario::{self, Scenario};

/// What a simulated repetition did, besides its result files.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SimOutcome {
    /// Virtual seconds simulated.
    pub simulated_s: f64,
    /// Wall-clock seconds it took.
    pub wall_s: f64,
    /// `simulated_s / wall_s`.
    pub speedup: f64,
    /// Loop iterations (times the clock moved).
    pub events: u64,
    /// Datagrams the endpoints sent.
    pub datagrams: u64,
    /// Per flow: its directory, and whether it was still running at the
    /// deadline.
    #[serde(skip)]
    pub flows: Vec<(PathBuf, bool)>,
    /// The link's counters, up and down.
    #[serde(skip)]
    pub counters: [Counters; 2],
    /// Virtual seconds until the last flow ended.
    pub active_s: f64,
    /// Cross traffic: bytes sent and received per source.
    pub cross: Vec<(u64, u64)>,
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A flow's algorithm spec is invalid.
    #[error("flows[{flow}].cc: {msg}")]
    Cc {
        /// Flow index.
        flow: usize,
        /// What is wrong.
        msg: String,
    },
    /// quiche or TLS refused to set up an endpoint.
    #[error("simulator setup: {0}")]
    Setup(String),
    /// Writing results failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Stopped by the user.
    #[error("interrupted")]
    Interrupted,
}

/// Restores the wall clock on this thread however the run ends.
struct ClockGuard;

impl Drop for ClockGuard {
    fn drop(&mut self) {
        quiche::sim::reset();
    }
}

/// A packet waiting for its pacing time to enter the link.
struct Pending {
    at: u64,
    seq: u64,
    dir: Dir,
    pkt: Packet,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// One QUIC flow: a client and its own server, as separate hosts.
struct Flow {
    spec: scenario::FlowSpec,
    dir: PathBuf,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    server: ServerApp,
    client: Option<ClientApp>,
    client_pace: Option<Instant>,
    client_qlog: Option<PathBuf>,
    /// When the client and the server next need to run, ns (u64::MAX:
    /// not before something arrives). Only calls into an endpoint change
    /// its timers, so these are recomputed after each.
    client_wake: u64,
    server_wake: u64,
    /// Something arrived for the client, the server, this instant.
    client_touched: bool,
    server_touched: bool,
    /// Virtual ns the client runs for (duration-limited flows).
    run_ns: u64,
    started: bool,
    finished: bool,
    killed: bool,
}

/// A cross-traffic source: constant bit rate, optionally on/off.
struct CrossSource {
    spec: scenario::CrossSpec,
    gap_ns: f64,
    k: u64,
    sent: u64,
    received: u64,
    /// Whether the last datagram fell in an on period (for markers).
    was_on: Option<bool>,
}

impl CrossSource {
    /// Time of the next datagram and whether it is sent (on period), or
    /// `None` once the source has ended.
    fn next(&self, end_ns: u64) -> Option<u64> {
        let t = self.spec.start_ns + (self.k as f64 * self.gap_ns) as u64;
        let stop = self
            .spec
            .duration_ns
            .map_or(end_ns, |d| (self.spec.start_ns + d).min(end_ns));
        (t < stop).then_some(t)
    }
}

/// Datagram buffers, reused so the per-packet path does not allocate.
struct Buffers {
    /// Where quiche writes each packet.
    scratch: Vec<u8>,
    /// Spent datagram buffers.
    pool: Vec<Vec<u8>>,
    /// Packets built by the last [`drain`], with their link-entry times.
    ready: Vec<(u64, Vec<u8>)>,
}

/// Builds every packet `conn` may send at `now` (pacing exactly: no
/// slack) into `bufs.ready`, each with the time quiche wants it to leave
/// (`send_info.at`, ns since `base`); returns when pacing releases the
/// next one.
fn drain(
    conn: &mut quiche::Connection,
    now: Instant,
    base: Instant,
    bufs: &mut Buffers,
) -> Option<Instant> {
    loop {
        match quic_app::next_packet(conn, &mut bufs.scratch, now, Duration::ZERO) {
            Next::Packet(n, info) => {
                let mut v = bufs.pool.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(&bufs.scratch[..n]);
                let at = info.at.saturating_duration_since(base).as_nanos() as u64;
                bufs.ready.push((at, v));
            }
            Next::Wait(t) => return Some(t),
            Next::Idle => return None,
        }
    }
}

/// The whole simulated network.
struct World {
    base: Instant,
    dirs: [Direction; 2],
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    flows: Vec<Flow>,
    cross: Vec<CrossSource>,
    qlog_level: QlogLevel,
    scenario_event: serde_json::Value,
    bufs: Buffers,
    datagrams: u64,
    cid_rng: Rng,
}

const CLIENT_NET: [u8; 3] = [10, 201, 1];
const SERVER_NET: [u8; 3] = [10, 201, 2];

fn addr(net: [u8; 3], host: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([net[0], net[1], net[2], host], port))
}

impl World {
    fn at(&self, t: u64) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    fn ns(&self, i: Instant) -> u64 {
        i.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// When an endpoint's timers or pacing next need it, ns.
    fn wake_of(&self, times: impl IntoIterator<Item = Option<Instant>>) -> u64 {
        times
            .into_iter()
            .flatten()
            .map(|t| self.ns(t))
            .min()
            .unwrap_or(u64::MAX)
    }

    fn update_wakes(&mut self, i: usize) {
        let f = &self.flows[i];
        let c = f
            .client
            .as_ref()
            .map_or(u64::MAX, |c| self.wake_of([c.timeout(), f.client_pace]));
        let s = self.wake_of([f.server.timeout()]);
        let f = &mut self.flows[i];
        f.client_wake = c;
        f.server_wake = s;
    }

    /// Puts a datagram on the link at `at` (its pacing time), or now.
    fn emit(
        &mut self,
        now: u64,
        at: u64,
        dir: Dir,
        flow: usize,
        data: Vec<u8>,
        log: &mut dyn Sink,
    ) {
        self.datagrams += 1;
        let pkt = Packet {
            data,
            flow: flow as u16,
            class: flow as u16,
            arrival_ns: at.max(now),
        };
        if at <= now {
            self.dirs[dir as usize].push(pkt, now, log);
        } else {
            self.seq += 1;
            self.pending.push(Reverse(Pending {
                at,
                seq: self.seq,
                dir,
                pkt,
            }));
        }
    }

    /// Sends what flow `i`'s client has ready.
    fn flush_client(&mut self, i: usize, now: u64, log: &mut dyn Sink) {
        let now_i = self.at(now);
        if let Some(c) = self.flows[i].client.as_mut() {
            let pace = drain(c.conn_mut(), now_i, self.base, &mut self.bufs);
            self.flows[i].client_pace = pace;
        }
        self.emit_ready(now, Dir::Up, i, log);
    }

    /// Sends what flow `i`'s server has ready.
    fn flush_server(&mut self, i: usize, now: u64, log: &mut dyn Sink) {
        let now_i = self.at(now);
        for peer in self.flows[i].server.peers_mut() {
            peer.pace_until = drain(&mut peer.conn, now_i, self.base, &mut self.bufs);
        }
        self.emit_ready(now, Dir::Down, i, log);
    }

    /// Puts the datagrams [`drain`] built onto direction `dir` of the link.
    fn emit_ready(&mut self, now: u64, dir: Dir, flow: usize, log: &mut dyn Sink) {
        let mut ready = std::mem::take(&mut self.bufs.ready);
        for (at, data) in ready.drain(..) {
            self.emit(now, at, dir, flow, data, log);
        }
        self.bufs.ready = ready;
    }

    fn start_flow(&mut self, i: usize, now: u64) -> Result<(), SimError> {
        let now_i = self.at(now);
        let f = &self.flows[i];
        let upload = f.spec.direction == scenario::Direction::Upload;
        let mut config = tls::client_config().map_err(SimError::Setup)?;
        if upload {
            let cc = cc_algorithms::parse(&f.spec.cc).map_err(|e| SimError::Cc {
                flow: i,
                msg: e.to_string(),
            })?;
            cc.apply(&mut config);
        }
        if let Some(mtu) = f.spec.mtu {
            quic_app::set_mtu(&mut config, mtu as usize)
                .map_err(|e| SimError::Setup(format!("mtu: {e}")))?;
        }
        let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
        for chunk in scid.chunks_mut(8) {
            let r = self.cid_rng.next_u64().to_be_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        let mut conn = quiche::connect(
            Some("cclab-sim"),
            &quiche::ConnectionId::from_ref(&scid),
            f.client_addr,
            f.server_addr,
            &mut config,
        )
        .map_err(|e| SimError::Setup(format!("connect: {e}")))?;
        let qlog = quic_app::qlog_to_file(
            &mut conn,
            &f.dir,
            "client",
            &scid,
            self.qlog_level,
            &[("simulation:scenario".into(), self.scenario_event.clone())],
            now_i,
        )?;
        let path = f.spec.request_path();
        let settings = ClientSettings {
            authority: "cclab-sim".into(),
            url: format!("https://{}{path}", f.server_addr),
            path,
            upload: upload.then(|| f.spec.bytes()),
            duration: f
                .spec
                .size
                .is_none()
                .then(|| Duration::from_nanos(f.run_ns)),
            interval: Some(Duration::from_millis(500)),
            print_intervals: false,
            timeout: Duration::from_secs(10),
            cc: f.spec.cc.clone(),
        };
        let app = ClientApp::new(conn, settings, now_i)
            .map_err(|e| SimError::Setup(format!("HTTP/3: {e}")))?;
        self.marker(
            serde_json::json!({"type": "flow_start", "flow": i, "cc": f.spec.cc}),
            now_i,
        );
        let f = &mut self.flows[i];
        f.client = Some(app);
        f.client_qlog = qlog;
        f.started = true;
        Ok(())
    }

    /// A `simulation:marker` in the qlog of every open connection, both
    /// ends.
    fn marker(&mut self, data: serde_json::Value, now: Instant) {
        for f in &mut self.flows {
            if let Some(c) = f.client.as_mut() {
                quic_app::qlog_event(c.conn_mut(), "simulation:marker", data.clone(), now);
            }
            for p in f.server.peers_mut() {
                quic_app::qlog_event(&mut p.conn, "simulation:marker", data.clone(), now);
            }
        }
    }

    /// Ends flow `i`'s client: its report goes to `client.json`.
    fn finish_client(&mut self, i: usize, now: u64) -> Result<(), SimError> {
        let end = self.at(now);
        let f = &mut self.flows[i];
        if let Some(app) = f.client.take() {
            // The qlog's name, not its path: the report is part of the
            // run's deterministic output wherever the run is written.
            let qlog = f
                .client_qlog
                .take()
                .and_then(|p| p.file_name().map(PathBuf::from));
            let report: Report = app.report(end, qlog);
            crate::run::write_json_atomic(&f.dir.join("client.json"), &report)?;
        }
        f.finished = true;
        f.client_pace = None;
        Ok(())
    }
}

/// How to run one simulated repetition.
pub struct SimConfig<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The link's seed for this repetition (also seeds quiche's randomness).
    pub seed: u64,
    /// The repetition's directory.
    pub dir: &'a Path,
    /// Write the per-packet bottleneck log.
    pub per_packet_log: bool,
    /// How much qlog each end writes.
    pub qlog_level: QlogLevel,
    /// Set to stop early.
    pub stop: &'a AtomicBool,
}

/// Runs one repetition of `cfg.scenario` in virtual time, writing the same
/// files an `emu` repetition writes: `bottleneck.bin` (if asked),
/// `bottleneck-samples.jsonl`, and per flow `flow-K/` with `client.json`
/// and both ends' qlog.
pub fn run_rep(cfg: &SimConfig) -> Result<SimOutcome, SimError> {
    let sc = cfg.scenario;
    let wall = Instant::now();
    std::fs::create_dir_all(cfg.dir)?;
    let mut link = sc.link.clone();
    link.seed = cfg.seed;
    let _guard = ClockGuard;
    let base = Instant::now();
    quiche::sim::set_time(base);
    quiche::sim::seed_rng(cfg.seed);

    let scenario_event = sc.qlog_event("sim", cfg.seed);

    let mut key_rng = Rng::new(cfg.seed, 0x5e_0001);
    let mut flows = Vec::new();
    // Each flow and cross source with its start in this repetition
    // (`start_jitter`), as the process runner starts them.
    for (i, (_, spec)) in sc.rep_flows(cfg.seed).into_iter().enumerate() {
        let fdir = cfg.dir.join(format!("flow-{i}"));
        std::fs::create_dir_all(&fdir)?;
        let cc = cc_algorithms::parse(spec.server_cc()).map_err(|e| SimError::Cc {
            flow: i,
            msg: e.to_string(),
        })?;
        let mut config = tls::server_config().map_err(SimError::Setup)?;
        cc.apply(&mut config);
        if let Some(mtu) = spec.mtu {
            quic_app::set_mtu(&mut config, mtu as usize)
                .map_err(|e| SimError::Setup(format!("mtu: {e}")))?;
        }
        let mut key = [0u8; 32];
        for chunk in key.chunks_mut(8) {
            chunk.copy_from_slice(&key_rng.next_u64().to_be_bytes());
        }
        let server = ServerApp::new(
            config,
            ServerSettings {
                max_connections: 16,
                qlog_dir: (cfg.qlog_level != QlogLevel::Off).then(|| fdir.clone()),
                qlog_level: cfg.qlog_level,
                qlog_events: vec![("simulation:scenario".into(), scenario_event.clone())],
                verbose: false,
            },
            &key,
        )
        .map_err(|e| SimError::Setup(format!("HTTP/3: {e}")))?;
        let host = (i % 250) as u8 + 2;
        let port = 10_000 + (i / 250) as u16;
        let run_ns = spec.run_ns(sc.duration_ns);
        flows.push(Flow {
            spec,
            dir: fdir,
            client_addr: addr(CLIENT_NET, host, port),
            server_addr: addr(SERVER_NET, host, 443),
            server,
            client: None,
            client_pace: None,
            client_qlog: None,
            client_wake: u64::MAX,
            server_wake: u64::MAX,
            client_touched: false,
            server_touched: false,
            run_ns,
            started: false,
            finished: false,
            killed: false,
        });
    }
    let nflows = flows.len();
    let cross: Vec<CrossSource> = sc
        .rep_cross(cfg.seed)
        .into_iter()
        .map(|c| CrossSource {
            gap_ns: c.packet_size as f64 * 8.0 / c.rate_bps * 1e9,
            k: 0,
            sent: 0,
            received: 0,
            was_on: None,
            spec: c,
        })
        .collect();

    let mut writer = None;
    if cfg.per_packet_log {
        let header = serde_json::json!({
            "format": "cclab-bottleneck",
            "version": 1,
            "backend": "sim",
            "epoch_unix_ns": 0,
            "epoch_monotonic_ns": 0,
            "link": link.to_toml(),
        });
        writer = Some(Writer::create(
            &cfg.dir.join("bottleneck.bin.part"),
            &header,
        )?);
    }
    let samples_part = cfg.dir.join("bottleneck-samples.jsonl.part");
    let mut samples = SampleWriter::create(&samples_part)?;
    let mut sampler = Sampler::new(100_000_000);
    let mut no_sink = NoSink;

    let mut w = World {
        base,
        dirs: [
            Direction::with_weights(&link, Dir::Up, 1500, &sc.class_weights()),
            Direction::with_weights(&link, Dir::Down, 1500, &sc.class_weights()),
        ],
        pending: BinaryHeap::new(),
        seq: 0,
        flows,
        cross,
        qlog_level: cfg.qlog_level,
        scenario_event,
        bufs: Buffers {
            scratch: vec![0u8; 65_536],
            pool: Vec::new(),
            ready: Vec::new(),
        },
        datagrams: 0,
        cid_rng: Rng::new(cfg.seed, 0x5e_0002),
    };
    let end_ns = sc.duration_ns;
    // Flows still running this long after the scenario's end are stopped,
    // as real runs stop their clients.
    let deadline = end_ns + 20_000_000_000;
    let mut out: Vec<(u64, Packet)> = Vec::new();
    let mut events = 0u64;
    let mut active_end: Option<u64> = None;
    let mut drain_until: Option<u64> = None;
    let mut now = 0u64;

    macro_rules! sink {
        () => {
            match writer.as_mut() {
                Some(w) => w as &mut dyn Sink,
                None => &mut no_sink as &mut dyn Sink,
            }
        };
    }

    loop {
        // The earliest thing due.
        let mut next = u64::MAX;
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                next = next.min(t);
            }
        };
        consider(w.pending.peek().map(|p| p.0.at));
        consider(w.dirs[0].next_event());
        consider(w.dirs[1].next_event());
        consider(Some(sampler.next_due()));
        let mut all_done = true;
        for f in &w.flows {
            if !f.started {
                consider(Some(f.spec.start_ns));
            }
            consider(Some(f.client_wake.min(f.server_wake)));
            all_done &= f.finished;
        }
        let mut cross_done = true;
        for c in &w.cross {
            let t = c.next(end_ns);
            cross_done &= t.is_none();
            consider(t);
        }
        if all_done && active_end.is_none() {
            active_end = Some(now);
        }
        if all_done && cross_done {
            // Let the servers see the clients' close and finish their qlogs.
            let until = *drain_until.get_or_insert(now + 3_000_000_000);
            if w.flows.iter().all(|f| f.server.is_empty()) || next > until {
                break;
            }
        }
        if next == u64::MAX {
            break;
        }
        if next > deadline {
            for i in 0..nflows {
                if let Some(c) = w.flows[i].client.as_mut() {
                    c.interrupt();
                    w.flows[i].killed = true;
                    w.finish_client(i, now)?;
                }
            }
            active_end.get_or_insert(now);
            break;
        }
        now = next.max(now);
        events += 1;
        if events.is_multiple_of(4096) && cfg.stop.load(Ordering::Relaxed) {
            return Err(SimError::Interrupted);
        }
        quiche::sim::set_time(w.at(now));
        let now_i = w.at(now);

        // Packets whose pacing time has come enter the link.
        while w.pending.peek().is_some_and(|p| p.0.at <= now) {
            let p = w.pending.pop().unwrap().0;
            w.dirs[p.dir as usize].push(p.pkt, now, sink!());
        }
        // The link delivers what is due.
        for d in [Dir::Up, Dir::Down] {
            w.dirs[d as usize].advance(now, sink!(), &mut out);
            for (_, mut pkt) in out.drain(..) {
                let i = pkt.flow as usize;
                if i >= nflows {
                    if let Some(c) = w.cross.get_mut(i - nflows) {
                        c.received += pkt.len() as u64;
                    }
                    w.bufs.pool.push(pkt.data);
                    continue;
                }
                let f = &mut w.flows[i];
                match d {
                    Dir::Up => {
                        f.server
                            .recv(&mut pkt.data, f.client_addr, f.server_addr, now_i);
                        f.server_touched = true;
                    }
                    Dir::Down => {
                        if let Some(c) = f.client.as_mut() {
                            c.recv(
                                &mut pkt.data,
                                quiche::RecvInfo {
                                    from: f.server_addr,
                                    to: f.client_addr,
                                },
                            );
                            f.client_touched = true;
                        }
                    }
                }
                w.bufs.pool.push(pkt.data);
            }
        }
        // Cross traffic.
        for j in 0..w.cross.len() {
            while let Some(t) = w.cross[j].next(end_ns) {
                if t > now {
                    break;
                }
                let c = &mut w.cross[j];
                c.k += 1;
                let on = c.spec.is_on(t - c.spec.start_ns);
                if c.was_on != Some(on) {
                    c.was_on = Some(on);
                    let marker = serde_json::json!({
                        "type": if on { "cross_on" } else { "cross_off" },
                        "source": j,
                        "rate_bps": c.spec.rate_bps,
                    });
                    w.marker(marker, now_i);
                }
                let c = &mut w.cross[j];
                if on {
                    let size = c.spec.packet_size as usize;
                    c.sent += size as u64;
                    let d = match c.spec.direction {
                        scenario::Direction::Upload => Dir::Up,
                        scenario::Direction::Download => Dir::Down,
                    };
                    let mut data = w.bufs.pool.pop().unwrap_or_default();
                    data.clear();
                    data.resize(size, 0);
                    let pkt = Packet {
                        data,
                        flow: (nflows + j) as u16,
                        class: (nflows + j) as u16,
                        arrival_ns: now,
                    };
                    w.dirs[d as usize].push(pkt, now, sink!());
                }
            }
        }
        // Flows starting now.
        for i in 0..nflows {
            if !w.flows[i].started && w.flows[i].spec.start_ns <= now {
                w.start_flow(i, now)?;
                w.flows[i].client_touched = true;
            }
        }
        // Endpoints: timers, application, sending.
        for i in 0..nflows {
            let f = &mut w.flows[i];
            let client_due = f.client.is_some() && (f.client_touched || f.client_wake <= now);
            let server_due = f.server_touched || f.server_wake <= now;
            if !client_due && !server_due {
                continue;
            }
            f.client_touched = false;
            f.server_touched = false;
            if client_due {
                let c = w.flows[i].client.as_mut().unwrap();
                c.process(now_i);
                if c.is_closed() {
                    w.finish_client(i, now)?;
                } else {
                    w.flush_client(i, now, sink!());
                }
            }
            if server_due {
                w.flows[i].server.process(now_i);
                w.flush_server(i, now, sink!());
            }
            w.update_wakes(i);
        }
        // Bottleneck samples.
        if now >= sampler.next_due() {
            for s in sampler.take(now, &w.dirs) {
                samples.write(&s)?;
            }
        }
    }
    let mut outcome = SimOutcome {
        simulated_s: now as f64 / 1e9,
        events,
        datagrams: w.datagrams,
        counters: [w.dirs[0].counters.clone(), w.dirs[1].counters.clone()],
        active_s: active_end.unwrap_or(now) as f64 / 1e9,
        cross: w.cross.iter().map(|c| (c.sent, c.received)).collect(),
        flows: w.flows.iter().map(|f| (f.dir.clone(), f.killed)).collect(),
        ..SimOutcome::default()
    };
    // Closing every connection flushes its qlog.
    drop(w);
    samples.finish()?;
    std::fs::rename(&samples_part, cfg.dir.join("bottleneck-samples.jsonl"))?;
    if let Some(wr) = writer {
        wr.finish()?;
        std::fs::rename(
            cfg.dir.join("bottleneck.bin.part"),
            cfg.dir.join("bottleneck.bin"),
        )?;
    }
    outcome.wall_s = wall.elapsed().as_secs_f64();
    outcome.speedup = outcome.simulated_s / outcome.wall_s.max(1e-9);
    Ok(outcome)
}
