//! What the emulator is given and what it gives back: its mode,
//! configuration, errors, live snapshot and final report (shared by
//! [`super::runtime`], which starts it, and [`super::relay`] and
//! [`super::tunnel`], which run it).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::pipeline::Counters;
use super::priority::{Priority, DEFAULT_PRIORITY};
use crate::link::LinkSpec;
use link_model::topology::{Route, Topology};

/// How packets reach the emulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EmuMode {
    /// A UDP relay ([`super::relay`]): clients send to the emulator's
    /// sockets, which forward to the servers. No root; UDP only.
    #[default]
    Relay,
    /// Whole IP packets through a TUN device on each side
    /// ([`super::tunnel`], [`super::tun::TunNet`]): the endpoints run in two
    /// network namespaces, so any IPv4 traffic (TCP too) crosses the link.
    /// Needs root and `/dev/net/tun`.
    Ip,
}

impl EmuMode {
    /// Every mode, as users write it.
    pub const NAMES: &'static str = "relay, ip";

    /// From its name (`relay`, `ip`).
    pub fn parse(s: &str) -> Option<EmuMode> {
        match s.trim() {
            "relay" => Some(EmuMode::Relay),
            "ip" => Some(EmuMode::Ip),
            _ => None,
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            EmuMode::Relay => "relay",
            EmuMode::Ip => "ip",
        }
    }
}

/// Where clients send, and where their datagrams go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forward {
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
    pub routes: Vec<Forward>,
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
    pub topology: Option<(Topology, Vec<Route>)>,
    /// While more than one packet per this gap arrives at or leaves the
    /// emulator (counted over 10 ms: a busy link, about 100 Mbit/s and
    /// more), the shortest time between two of its thread's wake-ups ([`DEFAULT_WAKE_GAP`]): the
    /// events of a gap are served by one wake-up, each up to the gap late
    /// (the link's own clock is not: arrivals carry the kernel's stamps,
    /// departures their planned time). Otherwise, and always with a gap of
    /// zero, it wakes for every event and spins the last 20 µs before it:
    /// every hand-off within microseconds, at the cost of a CPU at high
    /// rates.
    pub wake_gap: Duration,
    /// How the emulator's thread is scheduled ([`super::priority`]).
    pub priority: Priority,
}

/// The emulator's wake-up gap unless `CCLAB_EMU_WAKE_GAP` sets another.
pub const DEFAULT_WAKE_GAP: Duration = Duration::from_micros(50);

/// The wake-up gap `CCLAB_EMU_WAKE_GAP` asks for (a duration: `50us`,
/// `0`), else [`DEFAULT_WAKE_GAP`]; an error naming the value otherwise.
pub fn wake_gap_from_env() -> Result<Duration, String> {
    match std::env::var("CCLAB_EMU_WAKE_GAP") {
        Err(_) => Ok(DEFAULT_WAKE_GAP),
        Ok(v) => crate::link::units::parse_duration_ns(v.trim())
            .map(Duration::from_nanos)
            .filter(|d| *d <= Duration::from_millis(10))
            .ok_or_else(|| {
                format!(
                    "CCLAB_EMU_WAKE_GAP={v}: expected a duration of at most 10ms (50us, 0 to wake for every event)"
                )
            }),
    }
}

impl EmuConfig {
    /// One route on `link`, no logs.
    pub fn new(link: LinkSpec, routes: Vec<Forward>) -> EmuConfig {
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
            wake_gap: DEFAULT_WAKE_GAP,
            priority: DEFAULT_PRIORITY,
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
    /// IP mode cannot run here (what is missing).
    #[error("{0}")]
    IpUnavailable(String),
    /// A TUN device could not be created.
    #[error("cannot create TUN device {dev} in network namespace {ns}: {source}")]
    Tun {
        /// The namespace.
        ns: String,
        /// The device.
        dev: String,
        /// The cause.
        source: io::Error,
    },
    /// Setting up IP mode's namespaces failed.
    #[error("IP mode: {0}")]
    Namespaces(#[from] crate::netns::NetnsError),
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
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// How the emulator's thread was scheduled: `fifo:10`, `normal`, or
    /// `normal (fifo:10 refused: ...)`.
    pub scheduling: String,
    /// Datagrams the kernel refused to send (full buffer, no listener).
    pub send_errors: u64,
    /// Per-packet records written.
    pub log_records: u64,
    /// IP mode's own counters (`None` for the relay).
    pub ip: Option<IpStats>,
}

/// What IP mode ([`EmuMode::Ip`]) saw besides the link's counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IpStats {
    /// IPv4 packets read from each side's TUN device (up: the client's,
    /// down: the server's) that entered the link.
    pub packets_in: [u64; 2],
    /// Packets read but not put on the link, dropped: not IPv4, shorter
    /// than the 28 bytes every charged packet has, or addressed outside
    /// the routes (no server address of this run).
    pub unclassified: [u64; 2],
    /// Packets the link delivered whose IP and transport header (kept
    /// aside while they crossed, [`super::tunnel`]) was gone, dropped; 0
    /// unless a packet stayed in the link longer than the headers are kept.
    pub headers_missing: u64,
    /// Packets each side's kernel dropped because the emulator had not
    /// read its TUN device's queue in time (the device's `tx_dropped`);
    /// they never reached the link. `None` when it could not be read.
    pub tun_dropped: Option<[u64; 2]>,
}
