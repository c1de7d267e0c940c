//! Scenarios: a link, flows, cross traffic, a duration, repetitions and a
//! seed, read from TOML (`scenarios/*.toml`; `scenarios/reference.toml`
//! documents every field) or built from command-line flags.
//!
//! Besides what it moves and when, a `[[flows]]` entry may say
//!
//! - `rate = "2mbit"`: the sending application writes the response body
//!   (download: the server; upload: the client) no faster than this, so the
//!   congestion controller is application-limited whenever the rate is
//!   below its share. It travels in the request (`/bytes/N?rate=BPS`,
//!   `/upload?rate=BPS`), so the processes of `emu` and `netem` and the
//!   simulator's endpoints apply the same token bucket (quic-app's
//!   `rate` module). For a packet rate: below 8 Mbit/s the body goes out
//!   in 1000-byte writes, one packet each, so `pps = rate / 8000`.
//! - `mtu = 1300`: the largest UDP payload, bytes, either end of this flow
//!   sends (both ends' `max_udp_payload_size` transport parameter and
//!   their own send limit), 1200 to 1500: QUIC (RFC 9000 §14) does not
//!   allow UDP payloads below 1200 bytes. Without it, 1350.
//! - `weight = 40`: the flow's weight when the link's `sched` is `wfq`
//!   (required there, refused otherwise); `[[cross]]` entries take one too.
//!   Each flow of a group with `count > 1` is its own class with this
//!   weight.
//! - `start_jitter = "1s"`: each flow of the group (each of `count`
//!   separately) starts at `start + U[0, start_jitter)`, the offset drawn
//!   from a generator seeded by the repetition's seed and the flow's index
//!   ([`FlowSpec::start_in_rep`]): a repetition is reproducible, and
//!   repetitions differ, which de-synchronises flows on a deterministic
//!   link (drop-tail, no loss) as ns-2 studies do, so confidence intervals
//!   over repetitions mean something. `start + start_jitter` must not pass
//!   the scenario's end; the flow's `duration` counts from its own start.
//!   Default 0: every repetition starts at `start` exactly. `[[cross]]`
//!   entries take one too. sim, emu and netem apply the same offsets
//!   ([`Scenario::rep_flows`], [`Scenario::rep_cross`]).
//!
//! A flow whose `cc` is `tcp:NAME` (`tcp:cubic`, `tcp:vegas`, ...) is a
//! Linux TCP flow instead: the kernel's TCP with congestion control NAME,
//! moved by `tcp-bulk` ([`tcp`]), sized or timed, download or upload, like
//! a QUIC flow; the simulator cannot run one, and QUIC's knobs are refused
//! on it.
//!
//! Everything is validated before a run starts; an error names the file,
//! the field and what is allowed.

pub mod arrivals;
mod parse;
mod resolved;
pub mod tcp;
#[cfg(test)]
mod tests;

use quic_app::transport::AckPolicy;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::link::LinkSpec;
use link_model::topology::{Route, Topology};
use parse::Ctx;

pub use resolved::set_path;

/// The algorithm where a scenario names none, and of a server's (tiny)
/// sending in an upload: quiche's own default, which the registry offers
/// under this name. The registry has no notion of a default algorithm;
/// this is the harness's one choice of one.
pub const DEFAULT_CC: &str = "cubic";

/// A scenario field that is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file, or `command line`.
    pub source: String,
    /// The field's path (`flows[1].cc`).
    pub field: String,
    /// What is wrong and what is allowed.
    pub problem: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.source, self.field, self.problem)
    }
}

impl std::error::Error for ScenarioError {}

/// Which way a flow's data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Server to client (the server's controller matters).
    Download,
    /// Client to server (the client's controller matters).
    Upload,
}

impl Direction {
    pub(super) fn parse(s: &str) -> Option<Direction> {
        match s {
            "download" | "down" => Some(Direction::Download),
            "upload" | "up" => Some(Direction::Upload),
            _ => None,
        }
    }
    /// `download` or `upload`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        }
    }
}

/// One group of identical QUIC flows.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// Algorithm spec (`name` or `name:key=value,...`, see `cclab list`).
    pub cc: String,
    /// Which way the data goes.
    pub direction: Direction,
    /// Start offset, ns.
    pub start_ns: u64,
    /// Spread of the start, ns: in each repetition each flow starts at
    /// `start_ns + U[0, start_jitter_ns)` (0: at `start_ns` exactly).
    pub start_jitter_ns: u64,
    /// Bytes to move; `None`: until the flow's duration ends.
    pub size: Option<u64>,
    /// How long the flow runs, ns; `None`: until the scenario ends.
    pub duration_ns: Option<u64>,
    /// How many times each flow moves `size`, one request after another
    /// on the same connection (`requests`, 1 unless sized; each starts
    /// when the previous response has finished, as in picoquic's
    /// multi-stream scenarios).
    pub requests: u32,
    /// How long the client waits after each response before the next
    /// request, ns (`think`; 0: at once). The connection is idle meanwhile,
    /// so the sender restarts after idle at each request.
    pub think_ns: u64,
    /// How many such flows.
    pub count: u32,
    /// The sending application's rate limit, bit/s (`None`: as fast as
    /// flow and congestion control allow).
    pub rate_bps: Option<f64>,
    /// The largest UDP payload both ends send, bytes (`None`: quic-app's
    /// default, 1350).
    pub mtu: Option<u16>,
    /// Weight of each flow's class under `sched = "wfq"`.
    pub weight: Option<f64>,
    /// Both ends' ACK policy and small-packet behaviour (`ack_policy`,
    /// default `immediate`; `small_packets`, default `avoid`).
    pub transport: quic_app::transport::Transport,
    /// The links each flow crosses, client to server (`path`; `None`:
    /// every link in order).
    pub path: Option<Vec<String>>,
    /// The flow's own round-trip propagation delay, ns (`rtt`): an access
    /// delay of its own, each way, makes up what its path's links lack.
    pub rtt_ns: Option<u64>,
}

impl FlowSpec {
    /// One download of `cc` from the start to the end of the scenario.
    pub fn download(cc: impl Into<String>) -> FlowSpec {
        FlowSpec {
            cc: cc.into(),
            direction: Direction::Download,
            start_ns: 0,
            start_jitter_ns: 0,
            size: None,
            duration_ns: None,
            requests: 1,
            think_ns: 0,
            count: 1,
            rate_bps: None,
            mtu: None,
            weight: None,
            transport: Default::default(),
            path: None,
            rtt_ns: None,
        }
    }

    /// The algorithm of the flow's server: the flow's own for a download;
    /// [`DEFAULT_CC`] for the server's (tiny) sending in an upload.
    pub fn server_cc(&self) -> &str {
        match self.direction {
            Direction::Download => &self.cc,
            Direction::Upload => DEFAULT_CC,
        }
    }

    /// NAME when the flow is Linux TCP (`cc = "tcp:NAME"`, [`tcp`]);
    /// `None` for a QUIC flow.
    pub fn tcp_cc(&self) -> Option<&str> {
        tcp::tcp_name(&self.cc)
    }

    /// Whether the flow has a completion time (`fct_s`): a QUIC flow of
    /// one request of a given size (every `[[arrivals]]` flow).
    pub fn has_completion_time(&self) -> bool {
        self.size.is_some() && self.requests == 1 && self.tcp_cc().is_none()
    }

    /// Bytes to move: the size, or "unbounded" (1 TB) for a flow that
    /// runs for a duration.
    pub fn bytes(&self) -> u64 {
        self.size.unwrap_or(1_000_000_000_000)
    }

    /// The HTTP path the client asks for: `/bytes/N` or `/upload`, with
    /// `?rate=BPS` when the sending application is rate-limited.
    pub fn request_path(&self) -> String {
        let path = match self.direction {
            Direction::Download => format!("/bytes/{}", self.bytes()),
            Direction::Upload => "/upload".to_string(),
        };
        match self.rate_bps {
            Some(r) => format!("{path}?rate={}", r.round() as u64),
            None => path,
        }
    }

    /// When flow `index` (its index after expanding counts) of this group
    /// starts in the repetition whose seed is `seed`, ns: `start_ns` plus
    /// an offset in `[0, start_jitter_ns)` that depends on the seed and the
    /// index only.
    pub fn start_in_rep(&self, seed: u64, index: usize) -> u64 {
        self.start_ns + jitter_offset_ns(self.start_jitter_ns, seed, FLOW_JITTER_STREAM, index)
    }

    /// How long the client runs, ns, in a scenario of `scenario_ns`: its
    /// duration, cut at the scenario's end.
    pub fn run_ns(&self, scenario_ns: u64) -> u64 {
        let left = scenario_ns.saturating_sub(self.start_ns);
        self.duration_ns.map_or(left, |d| d.min(left))
    }
}

/// Constant-bit-rate UDP cross traffic, optionally on/off.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossSpec {
    /// Rate while on, bit/s.
    pub rate_bps: f64,
    /// Which way it goes.
    pub direction: Direction,
    /// Start offset, ns.
    pub start_ns: u64,
    /// Spread of the start, ns: in each repetition the source starts at
    /// `start_ns + U[0, start_jitter_ns)` (0: at `start_ns` exactly).
    pub start_jitter_ns: u64,
    /// How long, ns; `None`: until the scenario ends.
    pub duration_ns: Option<u64>,
    /// On period, ns (with `off_ns`: alternate).
    pub on_ns: Option<u64>,
    /// Off period, ns.
    pub off_ns: Option<u64>,
    /// Datagram size, bytes.
    pub packet_size: u32,
    /// Weight of its class under `sched = "wfq"`.
    pub weight: Option<f64>,
    /// The links it crosses (`path`; `None`: every link in order).
    pub path: Option<Vec<String>>,
}

impl CrossSpec {
    /// When source `index` starts in the repetition whose seed is `seed`,
    /// ns: `start_ns` plus an offset in `[0, start_jitter_ns)`.
    pub fn start_in_rep(&self, seed: u64, index: usize) -> u64 {
        self.start_ns + jitter_offset_ns(self.start_jitter_ns, seed, CROSS_JITTER_STREAM, index)
    }

    /// Whether the source sends `since_ns` after its start (on/off periods).
    pub fn is_on(&self, since_ns: u64) -> bool {
        match (self.on_ns, self.off_ns) {
            (Some(on), Some(off)) => since_ns % (on + off) < on,
            _ => true,
        }
    }
}

/// Separates the start-jitter streams of flows and of cross sources from
/// each other and from the link's.
const FLOW_JITTER_STREAM: u64 = 0x57a7_f10e << 32;
const CROSS_JITTER_STREAM: u64 = 0x57a7_c205 << 32;

/// An offset in `[0, jitter_ns)`, ns, for entry `index` of a repetition
/// seeded `seed`: a function of those alone (0 when `jitter_ns` is 0).
pub fn jitter_offset_ns(jitter_ns: u64, seed: u64, stream: u64, index: usize) -> u64 {
    if jitter_ns == 0 {
        return 0;
    }
    let mut rng = crate::emu::rng::Rng::new(seed, stream | index as u64);
    // Multiply-shift: uniform over [0, jitter_ns) without rounding up to it.
    ((rng.next_u64() as u128 * jitter_ns as u128) >> 64) as u64
}

/// A whole scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name (for reports).
    pub name: String,
    /// How long each repetition runs, ns.
    pub duration_ns: u64,
    /// Repetitions (each with seed + i).
    pub repetitions: u32,
    /// Base seed.
    pub seed: u64,
    /// The bottleneck; with `links`, the defaults every link starts from.
    pub link: LinkSpec,
    /// Several links (`[[links]]` or a `[topology]` shorthand), each flow
    /// on its own path; `None`: the one `link`.
    pub links: Option<Topology>,
    /// QUIC flows.
    pub flows: Vec<FlowSpec>,
    /// Cross traffic.
    pub cross: Vec<CrossSpec>,
    /// How simulated endpoints behave between wake-ups (`[host]`; sim
    /// only: real processes have their own).
    pub host: HostModel,
}

/// What a simulated host does that the discrete-event loop would
/// otherwise leave out (`[host]` in a scenario). Real processes on `emu` or
/// `netem` are their own host model; these apply to `sim` only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostModel {
    /// How late an endpoint's timers (pacing releases, quiche's timeouts)
    /// wake it, ns. Default 20 us, the timerfd's slack on a quiet host.
    /// quiche's pacer (the patch's) makes up what a late sender lost,
    /// within its credit, so with the default `pacing` the slack moves
    /// paced senders little (BBR2, 20 Mbit/s, 40 ms, 1 BDP, 15 s: 97.4%
    /// utilization and 22.3 ms of queue at 0, 20, 50 and 200 us); with
    /// `pacing = "on:credit=0"` a sender woken late sends less (quiche
    /// 0.30's pacer: 95.8% and 9.9 ms at 20 us, 85.7% and 0.8 ms at 200 us).
    pub timer_slack_ns: u64,
    /// How long after a datagram arrives its host reads it, ns: a host
    /// asleep in `epoll_wait` takes a few microseconds to be scheduled,
    /// and reads every datagram that arrived meanwhile in one wake-up, so
    /// the acknowledgements a sender reads together free the window for
    /// one larger packet instead of several small ones. 0 reads each
    /// datagram at the instant it arrives.
    pub wake_latency_ns: u64,
    /// How packets are protected (`[host] protection`): the null cipher
    /// (the default: encryption costs wall time but changes no simulated
    /// figure, since the clock does not count CPU time) or the AEAD the
    /// handshake negotiated, as on a real network.
    pub protection: Protection,
}

/// Packet protection of simulated endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protection {
    /// quiche's `sim::set_null_protection`: payloads in the clear, a cheap
    /// tag of the AEAD's length, no header protection; every packet as
    /// long as under real protection.
    #[default]
    Null,
    /// The negotiated AEAD and header protection (BoringSSL).
    Aead,
}

impl Protection {
    /// The names `[host] protection` accepts.
    pub const NAMES: [&'static str; 2] = ["null", "aead"];

    /// Its name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            Protection::Null => "null",
            Protection::Aead => "aead",
        }
    }

    /// Parses `null` or `aead`.
    pub fn parse(s: &str) -> Option<Protection> {
        match s {
            "null" => Some(Protection::Null),
            "aead" => Some(Protection::Aead),
            _ => None,
        }
    }
}

/// The most `[host] wake_latency` may be, ns.
pub const MAX_WAKE_LATENCY_NS: u64 = 10_000_000;

/// The most `[host] timer_slack` may be, ns.
pub const MAX_TIMER_SLACK_NS: u64 = 10_000_000;

impl Default for HostModel {
    fn default() -> Self {
        HostModel {
            timer_slack_ns: 20_000,
            wake_latency_ns: 0,
            protection: Protection::Null,
        }
    }
}

/// The smallest `mtu` a flow may have: QUIC's minimum UDP payload.
pub const MIN_MTU: u16 = 1200;
/// The largest `mtu` a flow may have.
pub const MAX_MTU: u16 = 1500;

impl Default for Scenario {
    /// 20 s of one download with [`DEFAULT_CC`] on the default link.
    fn default() -> Self {
        Scenario {
            name: "scenario".into(),
            duration_ns: 20_000_000_000,
            repetitions: 1,
            seed: 1,
            link: LinkSpec::default(),
            links: None,
            flows: vec![FlowSpec::download(DEFAULT_CC)],
            cross: Vec::new(),
            host: HostModel::default(),
        }
    }
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            source: source.clone(),
            field: "(file)".into(),
            problem: format!("cannot read: {e}"),
        })?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Scenario::parse(&text, &source, &base)
    }

    /// Parses scenario TOML; `source` names it in errors, `base` resolves
    /// relative trace paths.
    pub fn parse(text: &str, source: &str, base: &Path) -> Result<Scenario, ScenarioError> {
        let cx = Ctx { source };
        let t: toml::Table = toml::from_str(text)
            .map_err(|e| cx.err("(file)", format!("not valid TOML: {}", e.message())))?;
        Scenario::from_table(&t, &cx, base)
    }

    /// The links: `links`, or the one `link` (named `link`).
    pub fn topology(&self) -> Topology {
        self.links
            .clone()
            .unwrap_or_else(|| Topology::single(self.link.clone()))
    }

    /// Whether the scenario needs more than one link between a client and
    /// its server: several links, or a flow with an `rtt` of its own.
    pub fn has_paths(&self) -> bool {
        self.links.is_some() || self.flows.iter().any(|f| f.rtt_ns.is_some())
    }

    /// Each traffic class's route through [`Scenario::topology`], in the
    /// order of [`Scenario::class_weights`]: every flow (expanded by
    /// `count`), then every cross source.
    pub fn routes(&self) -> Vec<Route> {
        self.try_routes("scenario")
            .expect("a scenario's routes were checked when it was read")
    }

    /// The routes of the flows alone (expanded by `count`): the first
    /// part of [`Scenario::routes`].
    pub fn flow_routes(&self) -> Vec<Route> {
        let mut r = self.routes();
        r.truncate(self.expanded_flows().len());
        r
    }

    /// [`Scenario::routes`], checked: an unknown link, a loop, an `rtt`
    /// below the path's own, a link no traffic crosses; `source` names
    /// the file in errors.
    pub(crate) fn try_routes(&self, source: &str) -> Result<Vec<Route>, ScenarioError> {
        let topo = self.topology();
        let e = |field: String, problem: String| ScenarioError {
            source: source.to_string(),
            field,
            problem,
        };
        let mut routes = Vec::new();
        for (g, f) in self.flows.iter().enumerate() {
            let field = format!("flows[{g}].path");
            let mut r = topo
                .route(f.path.as_deref(), &field)
                .map_err(|x| e(x.field, x.problem))?;
            if let Some(rtt) = f.rtt_ns {
                let base = topo.base_rtt_ns(&r);
                if rtt < base {
                    return Err(e(
                        format!("flows[{g}].rtt"),
                        format!(
                            "{} is below the round-trip delay of the links the flow crosses ({}); allowed: {} or more",
                            crate::link::units::format_duration_ns(rtt),
                            crate::link::units::format_duration_ns(base),
                            crate::link::units::format_duration_ns(base)
                        ),
                    ));
                }
                r.access_ns = (rtt - base) / 2;
            }
            routes.extend(std::iter::repeat_n(r, f.count as usize));
        }
        for (j, c) in self.cross.iter().enumerate() {
            let field = format!("cross[{j}].path");
            routes.push(
                topo.route(c.path.as_deref(), &field)
                    .map_err(|x| e(x.field, x.problem))?,
            );
        }
        if self.links.is_some() {
            if let Some(name) = topo.unused(&routes) {
                return Err(e(
                    "links".into(),
                    format!("no flow or cross source crosses link `{name}`: give one a path through it, or remove the link"),
                ));
            }
        }
        Ok(routes)
    }

    /// The weight of each traffic class, as the link's `wfq` scheduler
    /// numbers them: every flow (expanded by `count`), then every cross
    /// source. Unweighted entries count 1.
    pub fn class_weights(&self) -> Vec<f64> {
        self.expanded_flows()
            .iter()
            .map(|(_, f)| f.weight.unwrap_or(1.0))
            .chain(self.cross.iter().map(|c| c.weight.unwrap_or(1.0)))
            .collect()
    }

    /// Every flow, expanded by `count`, with its group index.
    pub fn expanded_flows(&self) -> Vec<(usize, &FlowSpec)> {
        self.flows
            .iter()
            .enumerate()
            .flat_map(|(g, f)| std::iter::repeat_n((g, f), f.count as usize))
            .collect()
    }

    /// Every flow, expanded by `count`, with its group index, as it runs in
    /// the repetition whose seed is `seed`: `start_ns` is the flow's own
    /// start ([`FlowSpec::start_in_rep`]) and `start_jitter_ns` is 0. What
    /// sim, emu and netem start, and what the results report.
    pub fn rep_flows(&self, seed: u64) -> Vec<(usize, FlowSpec)> {
        self.expanded_flows()
            .into_iter()
            .enumerate()
            .map(|(i, (g, f))| {
                let mut f = f.clone();
                f.start_ns = f.start_in_rep(seed, i);
                f.start_jitter_ns = 0;
                (g, f)
            })
            .collect()
    }

    /// The cross sources as they run in the repetition whose seed is
    /// `seed` (each started at [`CrossSpec::start_in_rep`]).
    pub fn rep_cross(&self, seed: u64) -> Vec<CrossSpec> {
        self.cross
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut c = c.clone();
                c.start_ns = c.start_in_rep(seed, i);
                c.start_jitter_ns = 0;
                c
            })
            .collect()
    }

    /// The data of the qlog `simulation:scenario` event both ends of a
    /// run write at the start of their trace: the backend, the link as
    /// resolved (with this repetition's seed) and the flows and cross
    /// sources with their starts in this repetition.
    pub fn qlog_event(&self, backend: &str, seed: u64) -> serde_json::Value {
        let mut link = self.link.clone();
        link.seed = seed;
        serde_json::json!({
            "scenario": self.name,
            "backend": backend,
            "seed": seed,
            "duration_s": self.duration_ns as f64 / 1e9,
            "link": serde_json::to_value(toml::Value::Table(link.to_toml()))
                .unwrap_or(serde_json::Value::Null),
            "flows": self.rep_flows(seed).iter().map(|(_, f)| {
                let mut j = serde_json::json!({
                    "cc": f.cc,
                    "direction": f.direction.as_str(),
                    "start_s": f.start_ns as f64 / 1e9,
                    "size": f.size,
                });
                for (k, v) in [
                    ("rate_bps", f.rate_bps.map(serde_json::Value::from)),
                    ("mtu", f.mtu.map(serde_json::Value::from)),
                    ("weight", f.weight.map(serde_json::Value::from)),
                    ("ack_policy", (f.transport.ack != AckPolicy::Immediate).then(|| f.transport.ack.to_string().into())),
                    ("small_packets", (f.transport.small_packets != quic_app::transport::Transport::default().small_packets).then(|| f.transport.small_packets.to_string().into())),
                    ("pacing", (f.transport.pacing != quic_app::transport::Transport::default().pacing).then(|| f.transport.pacing.to_string().into())),
                ] {
                    if let Some(v) = v {
                        j[k] = v;
                    }
                }
                j
            }).collect::<Vec<_>>(),
            "cross": self.rep_cross(seed).iter().map(|c| {
                let mut j = serde_json::json!({
                    "rate_bps": c.rate_bps,
                    "direction": c.direction.as_str(),
                    "start_s": c.start_ns as f64 / 1e9,
                });
                if let Some(w) = c.weight {
                    j["weight"] = w.into();
                }
                j
            }).collect::<Vec<_>>(),
        })
    }

    /// Whether `backend` can run the scenario's Linux TCP flows, as far
    /// as the scenario shows ([`crate::link::Backend::tcp_flow_problem`]): the error names
    /// the first flow it cannot run.
    pub fn check_tcp_backend(&self, backend: crate::link::Backend) -> Result<(), ScenarioError> {
        for (g, f) in self.flows.iter().enumerate() {
            if let Some(p) = f.tcp_cc().and_then(|_| backend.tcp_flow_problem(&f.cc)) {
                return Err(ScenarioError {
                    source: self.name.clone(),
                    field: format!("flows[{g}].cc"),
                    problem: p,
                });
            }
        }
        Ok(())
    }

    /// Whether any flow is Linux TCP.
    pub fn has_tcp_flows(&self) -> bool {
        self.flows.iter().any(|f| f.tcp_cc().is_some())
    }

    /// Applies `key = value` overrides (dotted paths such as `link.rate`,
    /// `flows.0.cc`, `duration`) and re-validates: the sweep's grid axes.
    pub fn with_overrides(
        &self,
        overrides: &[(String, toml::Value)],
        source: &str,
    ) -> Result<Scenario, ScenarioError> {
        let mut t = self.to_toml();
        for (path, v) in overrides {
            set_path(&mut t, path, v.clone()).map_err(|p| ScenarioError {
                source: source.to_string(),
                field: path.clone(),
                problem: p,
            })?;
        }
        // Overriding `link.rtt` must drop the resolved per-direction delays.
        let cx = Ctx { source };
        Scenario::from_table(&t, &cx, Path::new("."))
    }
}
