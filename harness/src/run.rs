//! Running a scenario: the link, the servers and clients as processes, the
//! cross traffic, and the result directory.
//!
//! ```text
//! OUT/
//!   scenario.toml      the resolved scenario
//!   metadata.json      versions, git revision, kernel, backend, start time
//!   status.json        complete | interrupted | failed
//!   summary.json       flows, link, bottleneck, fairness (means and 95% CIs)
//!   rep-N/
//!     bottleneck.bin, bottleneck-samples.jsonl
//!     flow-K/ client.json, client-<cid>.sqlog.zst, server-<cid>.sqlog.zst, *.stderr
//!             (`.sqlog`, plain, with CCLAB_QLOG_COMPRESS=0)
//! ```
//!
//! Work happens in `OUT.partial`, renamed to `OUT` when the run completes;
//! an interrupted or failed run is renamed too, with its status saying so.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bottleneck;
use crate::cross::{self, Cross};
use crate::emu::{EmuConfig, EmuReport, Emulator, Route};
use crate::link::{Backend, Dir};
use crate::scenario::{Direction, Scenario};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The result directory (must not exist yet, or hold an incomplete run).
    pub out: PathBuf,
    /// Where `quic-server` and `quic-client` are.
    pub bin_dir: PathBuf,
    /// The backend to use (resolved: emu or netem).
    pub backend: Backend,
    /// No progress output.
    pub quiet: bool,
    /// Set to stop the run early (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Write the per-packet bottleneck log (emu and sim).
    pub per_packet_log: bool,
    /// sim: repetitions simulated at once (0: one per core).
    pub threads: usize,
    /// How much qlog both ends write.
    pub qlog_level: quic_app::QlogLevel,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The output directory is taken.
    #[error("{0} already holds a complete run; choose another --out or remove it")]
    Exists(PathBuf),
    /// A program is missing.
    #[error("{0} not found; build it with `cargo build --release -p quic-server -p quic-client` (or set CCLAB_BIN_DIR)")]
    MissingBinary(PathBuf),
    /// The netem backend cannot run here.
    #[error(transparent)]
    Netem(#[from] crate::netem::NetemError),
    /// The emulator failed.
    #[error(transparent)]
    Emu(#[from] crate::emu::EmuError),
    /// A server did not start.
    #[error("quic-server did not start: {0}")]
    Server(String),
    /// I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The simulator failed.
    #[error(transparent)]
    Sim(crate::sim::SimError),
    /// Stopped by the user.
    #[error("interrupted")]
    Interrupted,
}

impl From<crate::sim::SimError> for RunError {
    fn from(e: crate::sim::SimError) -> RunError {
        match e {
            crate::sim::SimError::Interrupted => RunError::Interrupted,
            e => RunError::Sim(e),
        }
    }
}

/// RTT figures from the sender's qlog, ms.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RttMs {
    /// Minimum.
    pub min: f64,
    /// Mean of the samples.
    pub mean: f64,
    /// 95th percentile.
    pub p95: f64,
}

/// One flow of one repetition.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowResult {
    /// Flow index (after expanding counts).
    pub index: usize,
    /// Group in the scenario's `[[flows]]`.
    pub group: usize,
    /// Algorithm spec.
    pub cc: String,
    /// download or upload.
    pub direction: String,
    /// Start offset, s.
    pub start_s: f64,
    /// Transfer completed as asked.
    pub complete: bool,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Payload goodput, bit/s (client's measurement).
    pub goodput_bps: f64,
    /// Goodput from the receiver's qlog, bit/s.
    pub qlog_goodput_bps: Option<f64>,
    /// RTT from the sender's qlog.
    pub rtt_ms: Option<RttMs>,
    /// Packets the sender declared lost.
    pub lost_packets: u64,
    /// Mean cwnd of the sender, bytes.
    pub cwnd_mean: Option<f64>,
    /// The sender's cwnd coefficient of variation (time-weighted standard
    /// deviation / mean), from its qlog: the window's stability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwnd_cv: Option<f64>,
    /// Bytes received on the wire by the data receiver (from its qlog).
    pub wire_bytes_received: u64,
    /// Why it did not complete.
    pub error: Option<String>,
    /// The sender's and receiver's qlog files (relative to the run).
    pub qlog: BTreeMap<String, String>,
}

/// The bottleneck during one repetition, in the direction carrying data.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BottleneckResult {
    /// `up` or `down`.
    pub direction: String,
    /// Sent bits / capacity while flows were active.
    pub utilization: f64,
    /// Packets dropped (all reasons).
    pub drops: u64,
    /// Mean queueing delay of the packets that crossed, ms.
    pub queue_delay_ms_mean: f64,
    /// Bytes that crossed the link.
    pub bytes: u64,
    /// Drops by reason.
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Bytes dropped over bytes offered to the bottleneck (every reason;
    /// emu and sim only). Unlike a per-packet rate it does not depend on
    /// how the sender cut its data into packets.
    pub loss_rate: Option<f64>,
}

/// One repetition.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepResult {
    /// 1-based.
    pub rep: u32,
    /// The link seed used.
    pub seed: u64,
    /// Flows.
    pub flows: Vec<FlowResult>,
    /// The bottleneck.
    pub bottleneck: BottleneckResult,
    /// Jain's index over the flows' goodputs.
    pub jain_fairness: Option<f64>,
    /// Cross traffic: bytes sent and received per source.
    pub cross: Vec<(u64, u64)>,
    /// Seconds spent setting up and tearing down (not moving data).
    pub overhead_s: f64,
    /// CPU seconds the emulator's thread used, and the seconds it ran.
    pub emu_cpu: Option<(f64, f64)>,
}

/// A flow averaged over repetitions, with 95% confidence half-widths.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowSummary {
    /// Flow index.
    pub index: usize,
    /// Algorithm.
    pub cc: String,
    /// download or upload.
    pub direction: String,
    /// Mean bytes.
    pub bytes: f64,
    /// Mean goodput, bit/s.
    pub goodput_bps: f64,
    /// Mean RTT figures, ms.
    pub rtt_ms: Option<RttMs>,
    /// Mean lost packets.
    pub lost_packets: f64,
    /// Repetitions in which it completed.
    pub completed: u32,
    /// 95% confidence half-widths (Student t) of goodput_bps, rtt mean, lost.
    pub ci95: BTreeMap<String, f64>,
}

/// What `summary.json` holds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunSummary {
    /// Scenario name.
    pub scenario: String,
    /// complete, interrupted or failed.
    pub status: String,
    /// The link.
    pub link: LinkSummary,
    /// Flows, averaged over repetitions.
    pub flows: Vec<FlowSummary>,
    /// The bottleneck, averaged.
    pub bottleneck: BottleneckResult,
    /// Jain's index, averaged.
    pub jain_fairness: Option<f64>,
    /// 95% half-widths of utilization, queue delay, fairness.
    pub ci95: BTreeMap<String, f64>,
    /// Repetitions.
    pub repetitions: Vec<RepResult>,
}

/// The link in a summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LinkSummary {
    /// emu or netem.
    pub backend: String,
    /// Down-direction rate, bit/s.
    pub rate_bps: f64,
    /// Round-trip propagation delay, ms.
    pub rtt_ms: f64,
    /// Queue management.
    pub aqm: String,
}

/// Student-t 97.5% quantiles for 1..30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Mean and 95% confidence half-width (Student t) of `xs`.
pub fn mean_ci(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = if n - 1 <= 30 { T975[n - 2] } else { 1.96 };
    (mean, t * (var / n as f64).sqrt())
}

/// Writes `v` as pretty JSON to `path` through a `.part` file.
pub(crate) fn write_json_atomic(path: &Path, v: &impl Serialize) -> std::io::Result<()> {
    let tmp = path.with_extension("json.part");
    std::fs::write(&tmp, serde_json::to_vec_pretty(v)?)?;
    std::fs::rename(tmp, path)
}

/// The run's metadata.
pub fn metadata(backend: Backend, started: &str) -> serde_json::Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let patch = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../.patched/quiche/.cclab-patch-sha256"
    ))
    .unwrap_or_default();
    serde_json::json!({
        "cclab_version": env!("CARGO_PKG_VERSION"),
        "git_revision": env!("CCLAB_GIT_REV"),
        "rustc": env!("CCLAB_RUSTC"),
        "quiche": "0.30.0 + patches/quiche-0.30.0-cc-plugin.patch",
        "quiche_patch_sha256": patch.trim(),
        "kernel": kernel,
        "backend": backend.as_str(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "started_at": started,
        "command": std::env::args().collect::<Vec<_>>(),
    })
}

/// RFC 3339 UTC time of now.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

struct Server {
    child: Child,
    addr: SocketAddr,
    qlog_dir: PathBuf,
}

#[allow(clippy::too_many_arguments)]
fn spawn_server(
    bin: &Path,
    cc: &str,
    mtu: Option<u16>,
    qlog_dir: &Path,
    netns: Option<&str>,
    listen: &str,
    qlog_level: quic_app::QlogLevel,
    qlog_scenario: &Path,
) -> Result<Server, RunError> {
    std::fs::create_dir_all(qlog_dir)?;
    let mut cmd = match netns {
        Some(ns) => crate::netns::Topology::command(ns, bin),
        None => Command::new(bin),
    };
    cmd.args([
        "--listen",
        listen,
        "--cc",
        cc,
        "--quiet",
        "--idle-timeout",
        "5",
        "--qlog-level",
        qlog_level.as_str(),
        "--qlog-scenario",
    ])
    .arg(qlog_scenario)
    .arg("--qlog-dir")
    .arg(qlog_dir)
    .args(mtu.map(|m| format!("--mtu={m}")))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(qlog_dir.join("server.stderr"))?);
    let mut child = cmd
        .spawn()
        .map_err(|e| RunError::Server(format!("{}: {e}", bin.display())))?;
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    let mut r = BufReader::new(stdout);
    let got = r.read_line(&mut line);
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse::<SocketAddr>().ok());
    match (got, addr) {
        (Ok(_), Some(addr)) => {
            // Keep draining stdout so the server never blocks on it.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while r.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                    sink.clear();
                }
            });
            Ok(Server {
                child,
                addr,
                qlog_dir: qlog_dir.to_path_buf(),
            })
        }
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            let err = std::fs::read_to_string(qlog_dir.join("server.stderr")).unwrap_or_default();
            Err(RunError::Server(format!(
                "printed `{}`; stderr: {}",
                line.trim(),
                err.trim()
            )))
        }
    }
}

fn terminate(child: &mut Child, grace: Duration) {
    // SAFETY: signalling a child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

struct Client {
    child: Child,
    flow: usize,
    dir: PathBuf,
}

/// Where a run is written before it is moved to `out`: `out.partial`.
pub fn partial_dir(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    out.with_file_name(name)
}

/// Runs a scenario; returns its summary (also written to `OUT/summary.json`).
pub fn run(sc: &Scenario, cfg: &RunConfig) -> Result<RunSummary, RunError> {
    let server_bin = cfg.bin_dir.join("quic-server");
    let client_bin = cfg.bin_dir.join("quic-client");
    for b in [&server_bin, &client_bin] {
        if cfg.backend != Backend::Sim && !b.exists() {
            return Err(RunError::MissingBinary(b.clone()));
        }
    }
    if let Ok(s) = std::fs::read_to_string(cfg.out.join("status.json")) {
        if s.contains("\"complete\"") {
            return Err(RunError::Exists(cfg.out.clone()));
        }
    }
    // Not `with_extension`, which replaces a dotted name's last part:
    // `loss-0.01` and `loss-0.05` would share `loss-0.partial`.
    let work = partial_dir(&cfg.out);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot create {}: {e}", work.display()))
    })?;
    let started = now_rfc3339();
    std::fs::write(
        work.join("scenario.toml"),
        toml::to_string(&sc.to_toml()).unwrap_or_default(),
    )?;
    write_json_atomic(
        &work.join("metadata.json"),
        &metadata(cfg.backend, &started),
    )?;
    write_json_atomic(
        &work.join("status.json"),
        &serde_json::json!({"state": "running", "started_at": started}),
    )?;

    let (reps, failure) = if cfg.backend == Backend::Sim {
        run_reps_sim(sc, cfg, &work)
    } else {
        let mut reps = Vec::new();
        let mut failure: Option<RunError> = None;
        for rep in 1..=sc.repetitions {
            if cfg.stop.load(Ordering::Relaxed) {
                failure = Some(RunError::Interrupted);
                break;
            }
            if !cfg.quiet {
                eprintln!("cclab: {} repetition {rep}/{}", sc.name, sc.repetitions);
            }
            match run_rep(
                sc,
                cfg,
                rep,
                &work.join(format!("rep-{rep}")),
                &server_bin,
                &client_bin,
            ) {
                Ok(r) => reps.push(r),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        (reps, failure)
    };
    let status = match &failure {
        None => "complete",
        Some(RunError::Interrupted) => "interrupted",
        Some(_) => "failed",
    };
    let summary = summarize(sc, cfg.backend, status, reps);
    write_json_atomic(&work.join("summary.json"), &summary)?;
    write_json_atomic(
        &work.join("status.json"),
        &serde_json::json!({"state": status, "started_at": started, "ended_at": now_rfc3339(),
            "error": failure.as_ref().map(|e| e.to_string())}),
    )?;
    let _ = std::fs::remove_dir_all(&cfg.out);
    std::fs::rename(&work, &cfg.out)?;
    match failure {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// Simulates the repetitions, `cfg.threads` at a time (one per core by
/// default); each is independent and deterministic, so the order in which
/// they finish does not matter.
fn run_reps_sim(sc: &Scenario, cfg: &RunConfig, work: &Path) -> (Vec<RepResult>, Option<RunError>) {
    let threads = match cfg.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(sc.repetitions.max(1) as usize);
    let next = std::sync::atomic::AtomicU32::new(1);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let rep = next.fetch_add(1, Ordering::Relaxed);
                if rep > sc.repetitions {
                    break;
                }
                let r = run_rep_sim(sc, cfg, rep, &work.join(format!("rep-{rep}")));
                if let Ok(rr) = &r {
                    if !cfg.quiet {
                        eprintln!(
                            "cclab: {} repetition {rep}/{} simulated ({})",
                            sc.name, sc.repetitions, rr.1
                        );
                    }
                }
                let failed = r.is_err();
                results.lock().unwrap().push((rep, r.map(|x| x.0)));
                if failed {
                    cfg.stop.store(true, Ordering::Relaxed);
                }
            });
        }
    });
    let mut all = results.into_inner().unwrap();
    all.sort_by_key(|(rep, _)| *rep);
    let mut reps = Vec::new();
    let mut failure = None;
    for (_, r) in all {
        match r {
            Ok(r) if failure.is_none() => reps.push(r),
            Ok(_) => {}
            Err(e) => {
                // The first real error wins over the interruptions it caused.
                if failure.is_none() || matches!(failure, Some(RunError::Interrupted)) {
                    failure = Some(e);
                }
            }
        }
    }
    (reps, failure)
}

/// One simulated repetition; also returns a line on its speed.
fn run_rep_sim(
    sc: &Scenario,
    cfg: &RunConfig,
    rep: u32,
    dir: &Path,
) -> Result<(RepResult, String), RunError> {
    let seed = sc.seed + rep as u64 - 1;
    let o = crate::sim::run_rep(&crate::sim::SimConfig {
        scenario: sc,
        seed,
        dir,
        per_packet_log: cfg.per_packet_log,
        qlog_level: cfg.qlog_level,
        stop: &cfg.stop,
    })?;
    // Wall-clock figures stay out of summary.json, which must not depend
    // on the machine.
    write_json_atomic(&dir.join("sim.json"), &o)?;
    let ended: Vec<EndedFlow> = o
        .flows
        .iter()
        .enumerate()
        .map(|(i, (d, killed))| EndedFlow {
            flow: i,
            dir: d.clone(),
            killed: *killed,
        })
        .collect();
    let mut r = collect_rep(sc, rep, seed, dir, &ended, Some(&o.counters), o.active_s);
    r.cross = o.cross.clone();
    let line = format!(
        "{:.1} s in {:.2} s of wall time, {:.0}x",
        o.simulated_s, o.wall_s, o.speedup
    );
    Ok((r, line))
}

fn run_rep(
    sc: &Scenario,
    cfg: &RunConfig,
    rep: u32,
    dir: &Path,
    server_bin: &Path,
    client_bin: &Path,
) -> Result<RepResult, RunError> {
    let setup_t = Instant::now();
    std::fs::create_dir_all(dir)?;
    let seed = sc.seed + rep as u64 - 1;
    let mut link = sc.link.clone();
    link.seed = seed;
    // Each flow with its start in this repetition (`start_jitter`).
    let flows = sc.rep_flows(seed);

    // Servers: one per flow, as separate hosts would be. Sharing one server
    // process between flows couples their sending (one event loop, one
    // socket) and, on a deterministic link, locks flows into drop-tail
    // phase effects that real hosts do not have. Uploads use the server's
    // default algorithm for its (tiny) sending.
    let server_ccs: Vec<&str> = flows.iter().map(|(_, f)| f.server_cc()).collect();
    let netem_link = match cfg.backend {
        Backend::Netem => Some(Arc::new(crate::netem::NetemLink::setup(
            &link,
            &crate::netem::probe(),
            1500,
            true,
        )?)),
        _ => None,
    };
    if let Some(n) = &netem_link {
        // The link as the kernel was told it: one `tc` line per command.
        let lines: Vec<String> = n
            .commands
            .iter()
            .map(|c| format!("tc {}\n", c.join(" ")))
            .collect();
        std::fs::write(dir.join("tc-commands.txt"), lines.concat())?;
    }
    let (server_ns, client_ns) = match &netem_link {
        Some(n) => (
            Some(n.topology.server.clone()),
            Some(n.topology.client.clone()),
        ),
        None => (None, None),
    };
    let listen = if netem_link.is_some() {
        format!("{}:0", crate::netns::SERVER_IP)
    } else {
        "127.0.0.1:0".to_string()
    };
    // What both ends' qlogs say the run was taken under.
    let event_file = dir.join("qlog-scenario.json");
    std::fs::write(
        &event_file,
        serde_json::to_vec(&sc.qlog_event(cfg.backend.as_str(), seed))
            .map_err(std::io::Error::from)?,
    )?;
    let mut servers = Vec::new();
    for (i, cc) in server_ccs.iter().enumerate() {
        servers.push(spawn_server(
            server_bin,
            cc,
            flows[i].1.mtu,
            &dir.join(format!("servers/{i}")),
            server_ns.as_deref(),
            &listen,
            cfg.qlog_level,
            &event_file,
        )?);
    }
    let mut cross_targets = Vec::new();
    let mut routes: Vec<Route> = servers
        .iter()
        .map(|s| Route {
            listen: "127.0.0.1:0".parse().unwrap(),
            target: s.addr,
        })
        .collect();
    if netem_link.is_none() {
        for _ in &sc.cross {
            let t = cross::target_socket()?;
            routes.push(Route {
                listen: "127.0.0.1:0".parse().unwrap(),
                target: t.local_addr()?,
            });
            cross_targets.push(t);
        }
    }
    let emu = match &netem_link {
        None => {
            let mut ec = EmuConfig::new(link.clone(), routes);
            ec.log_dir = Some(dir.to_path_buf());
            ec.per_packet_log = cfg.per_packet_log;
            // Route i is flow i, then one route per cross source.
            ec.class_weights = sc.class_weights();
            Some(Emulator::start(ec)?)
        }
        Some(_) => None,
    };
    let sampler = match &netem_link {
        Some(n) => Some(n.start_sampler(
            Duration::from_millis(20),
            &dir.join("bottleneck-samples.jsonl"),
        )?),
        None => None,
    };
    let addr_of = |server: usize| -> SocketAddr {
        match &emu {
            Some(e) => e.listen_addrs()[server],
            None => servers[server].addr,
        }
    };
    let t0 = Instant::now();
    let overhead_setup = setup_t.elapsed();
    let mut crosses = Vec::new();
    if let Some(e) = &emu {
        let rep_cross = sc.rep_cross(seed);
        for (i, (c, t)) in rep_cross.iter().zip(cross_targets).enumerate() {
            crosses.push(Cross::start(c, e.listen_addrs()[servers.len() + i], t, t0)?);
        }
    }

    // Start each client at its offset.
    let mut pending: Vec<(usize, usize)> = flows
        .iter()
        .enumerate()
        .map(|(i, (g, _))| (i, *g))
        .collect();
    pending.sort_by_key(|(i, _)| flows[*i].1.start_ns);
    let mut clients: Vec<Client> = Vec::new();
    let end = t0 + Duration::from_nanos(sc.duration_ns);
    let deadline = end + Duration::from_secs(20);
    let mut next = 0;
    let mut interrupted = false;
    loop {
        if cfg.stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let now = Instant::now();
        while next < pending.len()
            && now >= t0 + Duration::from_nanos(flows[pending[next].0].1.start_ns)
        {
            let (i, _) = pending[next];
            let f = &flows[i].1;
            let fdir = dir.join(format!("flow-{i}"));
            std::fs::create_dir_all(&fdir)?;
            let server = i;
            let addr = addr_of(server);
            let run_ns = f.run_ns(sc.duration_ns);
            let mut cmd = match &client_ns {
                Some(ns) => crate::netns::Topology::command(ns, client_bin),
                None => Command::new(client_bin),
            };
            cmd.arg(format!("https://{addr}{}", f.request_path()));
            if f.direction == Direction::Upload {
                cmd.args(["--upload", &f.bytes().to_string(), "--cc", &f.cc]);
            }
            if f.size.is_none() {
                cmd.args(["--duration", &format!("{:.3}", run_ns as f64 / 1e9)]);
            }
            if let Some(m) = f.mtu {
                cmd.arg(format!("--mtu={m}"));
            }
            cmd.args(["--json", "--interval", "0.5", "--qlog-level"])
                .arg(cfg.qlog_level.as_str())
                .arg("--qlog-scenario")
                .arg(&event_file)
                .arg("--qlog-dir")
                .arg(&fdir)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(fdir.join("client.json.part"))?)
                .stderr(std::fs::File::create(fdir.join("client.stderr"))?);
            let child = cmd.spawn()?;
            clients.push(Client {
                child,
                flow: i,
                dir: fdir,
            });
            next += 1;
        }
        let all_started = next == pending.len();
        let all_done = clients
            .iter_mut()
            .all(|c| matches!(c.child.try_wait(), Ok(Some(_))));
        if all_started && all_done && now >= t0 + Duration::from_millis(200) {
            // Cross traffic keeps going until the scenario's end.
            if sc.cross.is_empty() || now >= end {
                break;
            }
        }
        if now >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let active_end = Instant::now();
    let teardown_t = Instant::now();
    let mut killed = Vec::new();
    for c in &mut clients {
        if !matches!(c.child.try_wait(), Ok(Some(_))) {
            terminate(&mut c.child, Duration::from_secs(3));
            killed.push(c.flow);
        }
    }
    let cross_counts: Vec<(u64, u64)> = crosses
        .into_iter()
        .map(|c| {
            let k = c.stop();
            (
                k.sent.load(Ordering::Relaxed),
                k.received.load(Ordering::Relaxed),
            )
        })
        .collect();
    for s in &mut servers {
        terminate(&mut s.child, Duration::from_secs(5));
    }
    let emu_report: Option<EmuReport> = match emu {
        Some(e) => Some(e.stop()?),
        None => None,
    };
    if let Some(s) = sampler {
        s.stop()?;
    }
    drop(netem_link);
    let overhead = overhead_setup + teardown_t.elapsed();
    if interrupted {
        return Err(RunError::Interrupted);
    }

    // The server's qlog of each connection, moved next to the client's.
    for c in &clients {
        let part = c.dir.join("client.json.part");
        let peer = std::fs::read(&part)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|r| r["peer_cid"].as_str().map(str::to_string))
            .unwrap_or_default();
        let server_qlog = servers
            .iter()
            .filter(|_| !peer.is_empty())
            .find_map(|s| quic_app::qlog_file::find(&s.qlog_dir, "server", &peer));
        if let Some(p) = server_qlog {
            let to = c.dir.join(p.file_name().unwrap());
            std::fs::rename(&p, &to)?;
        }
        let _ = std::fs::rename(&part, c.dir.join("client.json"));
    }
    let ended: Vec<EndedFlow> = clients
        .iter()
        .map(|c| EndedFlow {
            flow: c.flow,
            dir: c.dir.clone(),
            killed: killed.contains(&c.flow),
        })
        .collect();
    let counters = emu_report.as_ref().map(|e| [e.up.clone(), e.down.clone()]);
    let mut r = collect_rep(
        sc,
        rep,
        seed,
        dir,
        &ended,
        counters.as_ref(),
        active_end.duration_since(t0).as_secs_f64(),
    );
    r.cross = cross_counts;
    r.overhead_s = overhead.as_secs_f64();
    r.emu_cpu = emu_report.as_ref().map(|e| (e.cpu_s, e.duration_s));
    Ok(r)
}

/// The bottleneck's figures from its samples alone (netem, whose qdiscs
/// give counters, not per-packet times): bytes sent, drops, loss rate in
/// packets (drops / (sent + drops): tc counts dropped packets, not bytes),
/// and mean queueing delay as the backlog each sample saw, drained at the
/// link's rate, weighted by the packets sent in its interval (the delay
/// those packets met, as emu's per-packet sojourn mean).
fn from_samples(b: &mut BottleneckResult, samples: &[bottleneck::Sample], d: Dir, rate_bps: f64) {
    let mine = || samples.iter().filter(|s| s.dir == d.as_str());
    b.drops = mine().map(|s| s.drops_total).max().unwrap_or(0);
    b.bytes = mine().map(|s| s.sent_bytes).sum();
    let packets: u64 = mine().map(|s| s.sent_packets).sum();
    b.loss_rate = (packets + b.drops > 0).then(|| b.drops as f64 / (packets + b.drops) as f64);
    if packets > 0 && rate_bps > 0.0 {
        let weighted: f64 = mine()
            .map(|s| s.queue_bytes as f64 * 8.0 / rate_bps * s.sent_packets as f64)
            .sum();
        b.queue_delay_ms_mean = weighted / packets as f64 * 1e3;
    }
}

/// A flow whose client has ended; its directory holds `client.json` and
/// both ends' qlog.
pub struct EndedFlow {
    /// Flow index.
    pub flow: usize,
    /// `rep-N/flow-K`.
    pub dir: PathBuf,
    /// Still running at the deadline, and stopped.
    pub killed: bool,
}

/// The results of one repetition from its files: per flow from
/// `client.json` and the qlogs, the bottleneck from the link's counters
/// (up, down; none for netem) and `bottleneck-samples.jsonl`. Shared by
/// every backend. `active_s` is when the last flow ended.
pub fn collect_rep(
    sc: &Scenario,
    rep: u32,
    seed: u64,
    dir: &Path,
    ended: &[EndedFlow],
    counters: Option<&[crate::emu::Counters; 2]>,
    active_s: f64,
) -> RepResult {
    // Each flow as it ran in this repetition: its jittered start.
    let flows = sc.rep_flows(seed);
    // Results per flow.
    let mut results = Vec::new();
    for c in ended {
        let i = c.flow;
        let (g, f) = &flows[i];
        let report: serde_json::Value = std::fs::read(c.dir.join("client.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null);
        let mut r = FlowResult {
            index: i,
            group: *g,
            cc: f.cc.clone(),
            direction: f.direction.as_str().into(),
            start_s: f.start_ns as f64 / 1e9,
            complete: report["complete"].as_bool().unwrap_or(false),
            bytes: report["bytes"].as_u64().unwrap_or(0),
            goodput_bps: report["goodput_bps"].as_f64().unwrap_or(0.0),
            error: report["error"].as_str().map(str::to_string).or_else(|| {
                if report.is_null() {
                    Some(
                        std::fs::read_to_string(c.dir.join("client.stderr"))
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                    )
                } else {
                    None
                }
            }),
            ..FlowResult::default()
        };
        // A client stopped at the deadline closes its connection and
        // reports "interrupted" (as on Ctrl-C); say why it was stopped.
        if c.killed && r.error.as_deref().is_none_or(|e| e == "interrupted") {
            r.error = Some("still running at the deadline; stopped".into());
        }
        let mut listing: Vec<PathBuf> = std::fs::read_dir(&c.dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        listing.sort();
        let client_qlog = listing
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("client-"))
            })
            .cloned();
        let server_qlog = listing
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("server-"))
            })
            .cloned();
        let (sender, receiver) = match f.direction {
            Direction::Download => (server_qlog, client_qlog),
            Direction::Upload => (client_qlog, server_qlog),
        };
        let rel = |p: &Path| {
            p.strip_prefix(dir.parent().unwrap_or(dir))
                .unwrap_or(p)
                .display()
                .to_string()
        };
        // The two traces are read side by side: on a 60 s run at the
        // default level they hold about 200 MB together.
        let summarize = |p: &Option<PathBuf>| {
            p.as_ref()
                .and_then(|p| qlog_analysis::summary::summarize_file(p, 0.1).ok())
        };
        let (fs_sender, fs_receiver) = std::thread::scope(|s| {
            let h = s.spawn(|| summarize(&sender));
            let rx = summarize(&receiver);
            (h.join().ok().flatten(), rx)
        });
        if let Some(p) = &sender {
            r.qlog.insert("sender".into(), rel(p));
        }
        if let Some(s) = fs_sender.as_ref().and_then(|fs| fs.connections.first()) {
            r.rtt_ms = s.rtt_ms.as_ref().map(|x| RttMs {
                min: x.min,
                mean: x.mean,
                p95: x.p95,
            });
            r.lost_packets = s.loss.packets;
            r.cwnd_mean = s.cwnd.as_ref().map(|c| c.mean);
            r.cwnd_cv = s.cwnd.as_ref().map(|c| c.cv);
        }
        if let Some(p) = &receiver {
            r.qlog.insert("receiver".into(), rel(p));
        }
        if let Some(s) = fs_receiver.as_ref().and_then(|fs| fs.connections.first()) {
            r.qlog_goodput_bps = s.goodput.as_ref().map(|g| g.mean_bps);
            r.wire_bytes_received = s.wire_bytes.1;
        }
        results.push(r);
    }
    results.sort_by_key(|r| r.index);

    // The bottleneck, in the direction that carried the data.
    let downs = flows
        .iter()
        .filter(|(_, f)| f.direction == Direction::Download)
        .count();
    let d = if downs * 2 >= flows.len() {
        Dir::Down
    } else {
        Dir::Up
    };
    let mut b = BottleneckResult {
        direction: d.as_str().into(),
        ..BottleneckResult::default()
    };
    if let Some(cs) = counters {
        let c = if d == Dir::Down { &cs[1] } else { &cs[0] };
        b.drops = c.drops();
        b.bytes = c.sent_bytes;
        b.queue_delay_ms_mean = if c.sent_packets > 0 {
            c.sojourn_ns_total as f64 / c.sent_packets as f64 / 1e6
        } else {
            0.0
        };
        for r in crate::emu::DropReason::ALL {
            b.drops_by_reason
                .insert(r.as_str().into(), c.dropped[r as usize - 1]);
        }
        b.loss_rate =
            (c.arrived_bytes > 0).then(|| c.dropped_bytes as f64 / c.arrived_bytes as f64);
    }
    // Utilization while the flows were active, from the samples.
    let first_start = flows.iter().map(|(_, f)| f.start_ns).min().unwrap_or(0) as f64 / 1e9;
    if let Ok(samples) = bottleneck::read_samples(&dir.join("bottleneck-samples.jsonl")) {
        let mut num = 0.0;
        let mut den = 0.0;
        for s in samples.iter().filter(|s| s.dir == d.as_str()) {
            let t0s = s.t_s - s.interval_s;
            // Skip the first second after the first start (handshake and
            // slow start are part of the flows, but not of the link's
            // steady use) only when the run is long enough to afford it.
            let warm = if active_s - first_start > 5.0 {
                first_start + 1.0
            } else {
                first_start
            };
            if t0s >= warm && s.t_s <= active_s {
                num += s.utilization * s.interval_s;
                den += s.interval_s;
            }
        }
        if den > 0.0 {
            b.utilization = num / den;
        }
        if counters.is_none() {
            from_samples(&mut b, &samples, d, sc.link.dir(d).rate_bps);
        }
    }
    let g: Vec<f64> = results.iter().map(|r| r.goodput_bps).collect();
    let jain = qlog_analysis::summary::jain(&g);
    RepResult {
        rep,
        seed,
        flows: results,
        bottleneck: b,
        jain_fairness: jain,
        ..RepResult::default()
    }
}

/// Averages repetitions into the summary.
pub fn summarize(
    sc: &Scenario,
    backend: Backend,
    status: &str,
    reps: Vec<RepResult>,
) -> RunSummary {
    let nflows = reps.first().map_or(0, |r| r.flows.len());
    let mut flows = Vec::new();
    for i in 0..nflows {
        let of = |f: &dyn Fn(&FlowResult) -> f64| -> Vec<f64> {
            reps.iter().filter_map(|r| r.flows.get(i)).map(f).collect()
        };
        let (goodput, gci) = mean_ci(&of(&|f| f.goodput_bps));
        let (bytes, _) = mean_ci(&of(&|f| f.bytes as f64));
        let (lost, lci) = mean_ci(&of(&|f| f.lost_packets as f64));
        let rtts: Vec<&RttMs> = reps
            .iter()
            .filter_map(|r| r.flows.get(i)?.rtt_ms.as_ref())
            .collect();
        let rtt = (!rtts.is_empty()).then(|| RttMs {
            min: mean_ci(&rtts.iter().map(|r| r.min).collect::<Vec<_>>()).0,
            mean: mean_ci(&rtts.iter().map(|r| r.mean).collect::<Vec<_>>()).0,
            p95: mean_ci(&rtts.iter().map(|r| r.p95).collect::<Vec<_>>()).0,
        });
        let rci = mean_ci(&rtts.iter().map(|r| r.mean).collect::<Vec<_>>()).1;
        let first = &reps[0].flows[i];
        flows.push(FlowSummary {
            index: i,
            cc: first.cc.clone(),
            direction: first.direction.clone(),
            bytes,
            goodput_bps: goodput,
            rtt_ms: rtt,
            lost_packets: lost,
            completed: reps
                .iter()
                .filter(|r| r.flows.get(i).is_some_and(|f| f.complete))
                .count() as u32,
            ci95: [
                ("goodput_bps".to_string(), gci),
                ("rtt_ms_mean".to_string(), rci),
                ("lost_packets".to_string(), lci),
            ]
            .into_iter()
            .collect(),
        });
    }
    let (util, uci) = mean_ci(
        &reps
            .iter()
            .map(|r| r.bottleneck.utilization)
            .collect::<Vec<_>>(),
    );
    let (qd, qci) = mean_ci(
        &reps
            .iter()
            .map(|r| r.bottleneck.queue_delay_ms_mean)
            .collect::<Vec<_>>(),
    );
    let (drops, _) = mean_ci(
        &reps
            .iter()
            .map(|r| r.bottleneck.drops as f64)
            .collect::<Vec<_>>(),
    );
    let js: Vec<f64> = reps.iter().filter_map(|r| r.jain_fairness).collect();
    let (jain, jci) = mean_ci(&js);
    RunSummary {
        scenario: sc.name.clone(),
        status: status.into(),
        link: LinkSummary {
            backend: backend.as_str().into(),
            rate_bps: sc.link.down.rate_bps,
            rtt_ms: sc.link.rtt_ns() as f64 / 1e6,
            aqm: sc.link.down.aqm.name().into(),
        },
        flows,
        bottleneck: BottleneckResult {
            direction: reps
                .first()
                .map(|r| r.bottleneck.direction.clone())
                .unwrap_or_default(),
            utilization: util,
            drops: drops.round() as u64,
            queue_delay_ms_mean: qd,
            bytes: mean_ci(
                &reps
                    .iter()
                    .map(|r| r.bottleneck.bytes as f64)
                    .collect::<Vec<_>>(),
            )
            .0 as u64,
            drops_by_reason: reps
                .first()
                .map(|r| r.bottleneck.drops_by_reason.clone())
                .unwrap_or_default(),
            loss_rate: {
                let ls: Vec<f64> = reps.iter().filter_map(|r| r.bottleneck.loss_rate).collect();
                (!ls.is_empty()).then(|| mean_ci(&ls).0)
            },
        },
        jain_fairness: (!js.is_empty()).then_some(jain),
        ci95: [
            ("utilization".to_string(), uci),
            ("queue_delay_ms_mean".to_string(), qci),
            ("jain_fairness".to_string(), jci),
        ]
        .into_iter()
        .collect(),
        repetitions: reps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_intervals() {
        let (m, h) = mean_ci(&[10.0, 12.0, 14.0]);
        // sd 2, n 3: t(2) = 4.303, half-width 4.303·2/√3.
        assert!((m - 12.0).abs() < 1e-12 && (h - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(mean_ci(&[5.0]), (5.0, 0.0));
        assert_eq!(mean_ci(&[]), (0.0, 0.0));
    }

    #[test]
    fn dotted_run_names_get_their_own_work_directory() {
        let a = partial_dir(Path::new("/r/loss-0.01"));
        let b = partial_dir(Path::new("/r/loss-0.05"));
        assert_eq!(a, Path::new("/r/loss-0.01.partial"));
        assert_ne!(a, b);
    }

    #[test]
    fn timestamps() {
        let s = now_rfc3339();
        assert_eq!(s.len(), 20);
        assert!(s.starts_with("20") && s.ends_with('Z'));
    }
}
