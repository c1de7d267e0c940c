//! One link description for both backends.
//!
//! A link has two directions, `up` (client to server) and `down` (server to
//! client). Each has a rate (or a mahimahi trace), a one-way delay with
//! optional jitter, random or Gilbert-Elliott loss, duplication,
//! reordering, a queue limit, an AQM and a scheduler. Values are written
//! as tc writes them (`20mbit`, `40ms`, `1%`, `100pkt`, `64kb`, `1bdp`).
//!
//! In a scenario file the link is a TOML table. Top-level keys apply to both
//! directions; `[link.up]` and `[link.down]` override them one direction at
//! a time:
//!
//! ```toml
//! [link]
//! backend = "auto"            # auto | emu | netem
//! rate = "20mbit"             # or a trace: trace = "traces/lte.trace"
//! rtt = "40ms"                # split evenly; or delay = "20ms" one-way
//! jitter = "1ms"              # optional, with jitter_distribution
//! jitter_distribution = "normal"  # uniform | normal | pareto | paretonormal
//! loss = "0.5%"               # or "ge:p=1%,r=30%,bad=100%,good=0%"
//! duplicate = "0%"
//! reorder = "0%"
//! queue = "1bdp"              # 100pkt | 64kb | 1bdp
//! aqm = "droptail"            # droptail | red[:min_th=5,...] | red:auto=true | codel[:target=5ms,...] | pie[:target=15ms,...] | fq_codel[:...] (= codel with sched fq)
//!                             # ecn=true on red/codel/pie/fq_codel marks ECN-capable packets instead of dropping;
//!                             # codel[:ce_threshold=1ms] | step[:threshold=1ms|20pkt|30kb] | dualpi2[:target=15ms,...] (see aqm.rs)
//! sched = "fifo"              # fifo | fq | wfq (deficit round robin; see below)
//! policer = "none"            # or "rate=10mbit,burst=30kb": a token bucket on arrivals ([`burst`])
//! aggregate = "none"          # or "period=4ms[,burst=32pkt][,phase=1ms]": delivery in bursts ([`burst`])
//! seed = 1
//!
//! [link.up]
//! rate = "5mbit"              # an asymmetric link
//!
//! [[link.changes]]            # scheduled changes ([`changes`]), both
//! at = "10s"                  # directions; [[link.down.changes]] for one
//! rate = "5mbit"
//! ```
//!
//! `sched` picks how the bottleneck queue is served ([`Sched`]):
//!
//! - `fifo` (the default): one queue, first in first out.
//! - `fq`: one class per flow (each QUIC flow and each cross-traffic
//!   source), equal weights, served by deficit round robin (Shreedhar &
//!   Varghese, SIGCOMM 1995), as the FQ/SFQ/DRR schemes of the TCP/EXP
//!   comparison.
//! - `wfq`: the same with weights: a class per `[[flows]]` flow and per
//!   `[[cross]]` source, each of which must then give a `weight`; a
//!   backlogged class gets `weight / (sum of the backlogged classes'
//!   weights)` of the link, as a CBWFQ router's bandwidth reservations
//!   (BR-TCP: weight 40 for the flow and 60 for the UDP cross traffic on a
//!   100 Mbit/s link reserve 40 Mbit/s for the flow).
//!
//! Both are work-conserving: bandwidth a class leaves idle goes to the
//! others. With `fq` and `wfq` the `queue` limit is **per class** (each
//! class may hold `queue` bytes or packets, as CBQ/CBWFQ class queues do),
//! so the buffer as a whole grows with the number of classes; a full class
//! drops its own arrivals (`queue_full`) and no other class's. The `aqm`
//! runs in every class on that class's queue alone (droptail per class;
//! RED with a per-class average; CoDel per class, as fq_codel does).
//! The netem backend supports `fifo` only.
//!
//! [`LinkSpec::from_toml`] turns such a table into a [`LinkSpec`], rejecting
//! anything it does not know with the field, the value and what is allowed.
//! [`LinkSpec::to_toml`] writes the fully resolved form back.

mod aqm;
pub mod burst;
pub mod changes;
mod impairments;
mod table;
#[cfg(test)]
mod tests;
pub mod trace;
pub mod units;

use std::fmt;

pub use aqm::{
    Aqm, CoDelParams, DualPi2Params, PieParams, RedParams, Sched, StepParams, StepThreshold,
};
pub use burst::{Aggregation, Policer};
pub use impairments::{JitterDistribution, LossModel};
pub use trace::Trace;
pub use units::QueueLimit;

/// A field of a link description that is wrong, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct LinkError {
    /// The field's path, e.g. `link.up.rate`.
    pub field: String,
    /// What is wrong, with the value and what is allowed.
    pub problem: String,
}

pub(crate) fn err(field: &str, problem: impl Into<String>) -> LinkError {
    LinkError {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// A TOML scalar as text, for the unit parsers (the `[link]` table and its
/// scheduled changes). Tables, arrays and booleans are errors.
pub(crate) fn scalar(field: &str, v: &toml::Value) -> Result<String, LinkError> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        other => Err(err(
            field,
            format!("expected a string or number, got {}", other.type_str()),
        )),
    }
}

/// Which emulation backend runs the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// netem where the kernel has it and we are root, else emu.
    #[default]
    Auto,
    /// The userspace emulator.
    Emu,
    /// Kernel netem on veth between namespaces (root).
    Netem,
    /// Virtual time: the same application, quiche and link elements on a
    /// discrete-event clock, in-process (deterministic, faster than real
    /// time, endpoint CPU time counted as zero).
    Sim,
}

impl Backend {
    /// Parses `auto`, `emu`, `netem` or `sim`.
    pub fn parse(s: &str) -> Option<Backend> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Backend::Auto),
            "emu" => Some(Backend::Emu),
            "netem" => Some(Backend::Netem),
            "sim" => Some(Backend::Sim),
            _ => None,
        }
    }

    /// The name users write.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Emu => "emu",
            Backend::Netem => "netem",
            Backend::Sim => "sim",
        }
    }

    /// Whether a run here starts real processes on the wall clock (the
    /// QUIC endpoints, the emulator, kernel qdiscs): every backend but
    /// the simulator, which runs quiche in-process in virtual time.
    pub fn real_time(self) -> bool {
        self != Backend::Sim
    }

    /// How many runs go at once when `--jobs` is not given: one per core
    /// on the simulator (a simulation is one thread and does not care what
    /// runs beside it), one on a real link (whose results would measure
    /// the neighbours' load).
    pub fn default_jobs(self, cores: usize) -> usize {
        if self.real_time() {
            1
        } else {
            cores.max(1)
        }
    }

    /// Why this backend cannot run the Linux TCP flow `spec` (`tcp:NAME`);
    /// `None` where it can, as far as the backend alone decides (the
    /// emulator's UDP relay is refused when the run starts, once it is
    /// known whether the emulator carries IP).
    pub fn tcp_flow_problem(self, spec: &str) -> Option<String> {
        (self == Backend::Sim).then(|| {
            format!(
                "`{spec}` is a Linux TCP flow, and the simulator (--link sim) runs quiche in virtual time, not the kernel's TCP: use --link emu (the emulator's IP mode, root) or --link netem (--vm runs it in a guest when this kernel has no netem)"
            )
        })
    }
}

/// Splits `k=v,k=v`, checking each key against `allowed` and rejecting
/// duplicates.
fn key_values(field: &str, s: &str, allowed: &[&str]) -> Result<Vec<(String, String)>, LinkError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            return Err(err(field, format!("`{part}` is not key=value")));
        };
        let k = k.trim().to_ascii_lowercase();
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                field,
                format!("unknown key `{k}`; allowed: {}", allowed.join(", ")),
            ));
        }
        if out.iter().any(|(o, _)| *o == k) {
            return Err(err(field, format!("`{k}` is given twice")));
        }
        out.push((k, v.trim().to_string()));
    }
    Ok(out)
}

fn format_prob(p: f64) -> String {
    format!("{}%", (p * 100.0 * 1e9).round() / 1e9)
}

/// One direction of the link, fully resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectionSpec {
    /// Bottleneck rate in bit/s (the trace's mean rate when a trace is set).
    pub rate_bps: f64,
    /// Time-varying capacity; replaces `rate_bps` for serialization.
    pub trace: Option<Trace>,
    /// One-way propagation delay, ns.
    pub delay_ns: u64,
    /// Jitter amount, ns (0: none).
    pub jitter_ns: u64,
    /// How jitter is drawn.
    pub jitter_distribution: JitterDistribution,
    /// Random loss before the queue.
    pub loss: LossModel,
    /// Probability that a packet is duplicated.
    pub duplicate: f64,
    /// Probability that a packet skips the delay line and overtakes the
    /// ones before it (netem's `reorder`).
    pub reorder: f64,
    /// Queue limit as written.
    pub queue: QueueLimit,
    /// Queue management (per class with `fq` and `wfq`).
    pub aqm: Aqm,
    /// How the queue is served.
    pub sched: Sched,
    /// Scheduled changes, in time order ([`changes`]).
    pub changes: Vec<changes::Change>,
    /// A token-bucket policer on arrivals ([`burst`]), if any.
    pub policer: Option<Policer>,
    /// Delivery in bursts ([`burst`]), if any.
    pub aggregate: Option<Aggregation>,
}

/// A whole link: both directions, the backend and the seed.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// Which backend runs it.
    pub backend: Backend,
    /// Client to server.
    pub up: DirectionSpec,
    /// Server to client.
    pub down: DirectionSpec,
    /// Seeds every random choice (loss, jitter, duplication, reordering, RED).
    pub seed: u64,
}

impl Default for DirectionSpec {
    fn default() -> Self {
        DirectionSpec {
            rate_bps: 20e6,
            trace: None,
            delay_ns: 20_000_000,
            jitter_ns: 0,
            jitter_distribution: JitterDistribution::Uniform,
            loss: LossModel::None,
            duplicate: 0.0,
            reorder: 0.0,
            queue: QueueLimit::Bdp(1.0),
            aqm: Aqm::DropTail,
            sched: Sched::Fifo,
            changes: Vec::new(),
            policer: None,
            aggregate: None,
        }
    }
}

impl Default for LinkSpec {
    /// The project's default link: 20 Mbit/s, 40 ms RTT, one BDP of
    /// drop-tail buffer, both directions.
    fn default() -> Self {
        LinkSpec {
            backend: Backend::Auto,
            up: DirectionSpec::default(),
            down: DirectionSpec::default(),
            seed: 1,
        }
    }
}

/// Which way a packet travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Client to server.
    Up = 0,
    /// Server to client.
    Down = 1,
}

impl Dir {
    /// `up` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::Up => "up",
            Dir::Down => "down",
        }
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl LinkSpec {
    /// The round-trip propagation delay (up + down), ns.
    pub fn rtt_ns(&self) -> u64 {
        self.up.delay_ns + self.down.delay_ns
    }

    /// One direction.
    pub fn dir(&self, d: Dir) -> &DirectionSpec {
        match d {
            Dir::Up => &self.up,
            Dir::Down => &self.down,
        }
    }

    /// The queue limit of direction `d` in bytes, with BDP multiples
    /// resolved against that direction's rate and the path's RTT, and
    /// packet limits counted at `mtu` bytes. Never below one `mtu`.
    pub fn queue_bytes(&self, d: Dir, mtu: u64) -> u64 {
        self.limit_bytes(d, self.dir(d).queue, mtu)
    }

    /// Direction `d`'s byte limit for `queue` (a BDP multiple of its rate
    /// as written and the link's RTT).
    pub fn limit_bytes(&self, d: Dir, queue: QueueLimit, mtu: u64) -> u64 {
        let s = self.dir(d);
        let b = match queue {
            QueueLimit::Bytes(b) => b,
            QueueLimit::Packets(p) => p.saturating_mul(mtu),
            QueueLimit::Bdp(f) => {
                (f * s.rate_bps / 8.0 * self.rtt_ns() as f64 / 1e9).round() as u64
            }
        };
        b.max(mtu)
    }

    /// Checks the scheduled changes against a run of `duration_ns`
    /// ([`changes::check_within`]); `prefix` names the link in errors
    /// (`link`, `links[1]`).
    pub fn check_schedule(&self, prefix: &str, duration_ns: u64) -> Result<(), LinkError> {
        for d in [Dir::Up, Dir::Down] {
            let field = if self.up.changes == self.down.changes {
                format!("{prefix}.changes")
            } else {
                format!("{prefix}.{d}.changes")
            };
            changes::check_within(&field, &self.dir(d).changes, duration_ns)?;
        }
        Ok(())
    }

    /// Whether either direction serves its queue by classes (`fq`, `wfq`).
    pub fn has_classes(&self) -> bool {
        self.up.sched != Sched::Fifo || self.down.sched != Sched::Fifo
    }

    /// Whether either direction weighs its classes (`wfq`).
    pub fn is_weighted(&self) -> bool {
        self.up.sched == Sched::Wfq || self.down.sched == Sched::Wfq
    }

    /// The packet-count limit of direction `d`, if the queue is limited in packets.
    pub fn queue_packets(&self, d: Dir) -> Option<u64> {
        match self.dir(d).queue {
            QueueLimit::Packets(p) => Some(p),
            _ => None,
        }
    }
}
