//! The emulator's interface: its configuration, errors and report, and
//! [`Emulator`], which runs the relay ([`super::relay`]) on a thread of its
//! own.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::pipeline::Counters;
use crate::link::LinkSpec;
use link_model::topology::{Route as Path, Topology};

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
    /// Several links, with `paths[i]` the way route `i`'s traffic crosses
    /// them (every link in order for a route without one); `None`: the one
    /// `link`. Link 0 writes its files in `log_dir`, the others in
    /// `log_dir/links/NAME/`.
    pub topology: Option<(Topology, Vec<Path>)>,
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
            topology: None,
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

impl From<crate::bottleneck::LogError> for EmuError {
    fn from(e: crate::bottleneck::LogError) -> EmuError {
        EmuError::Log {
            path: e.path,
            source: e.source,
        }
    }
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
    /// Every link's name and counters (up, down); `up` and `down` above
    /// are the first link's.
    pub links: Vec<(String, [Counters; 2])>,
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
            .spawn(move || super::relay::run(cfg, stop2, snap2, tx))?;
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
