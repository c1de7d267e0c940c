//! `netem`, the kernel backend: the link on veth between namespaces.
//!
//! Per direction, on one link of a [`KernelNet`] (here as its compact
//! layout of [`crate::netns::Namespaces`] has it; [`net`] has the routed
//! one):
//!
//! - the **impairments** (delay, jitter, loss, duplication, reordering) as
//!   `netem` on the sending endpoint's veth (`c0` for up, `s0` for down),
//!   with a `limit` sized to hold the whole delay line (netem's default of
//!   1000 packets caps throughput at 1000 packets per delay), under a
//!   [segmenting `tbf`](segmenter_args) at the root that splits GSO
//!   packets into their datagrams before netem sees them;
//! - the **bottleneck** (rate, queue limit, AQM) at the root of the
//!   router's egress veth towards the receiver (`rs0` for up, `rc0` for
//!   down): `tbf` for drop-tail with a byte limit, otherwise `htb` with one
//!   class at the rate and a leaf `bfifo`/`pfifo`, `red`, `codel`,
//!   `fq_codel`, `pie` or `dualpi2`;
//! - a **policer**, if the direction has one, on the router's device the
//!   direction enters by (`ingress` and a `police` action, [`policer_args`]).
//! - **aggregation**, if the direction has one, only where the endpoints'
//!   namespaces forward to a device of their own past the shaper (the
//!   guest router's layout, [`Caps::aggregate`]): netem's `slot` at that
//!   device's root ([`aggregation_args`]); refused on a host's own layout.
//!
//! The tc lines are `tc.rs`'s; the sampler ([`KernelNet::start_sampler`])
//! also makes the link's scheduled changes ([`changes`]).
//!
//! **ECN.** `ecn=true` on red, codel, fq_codel and pie becomes the
//! kernel's `ecn` option (`red ... ecn harddrop`: harddrop keeps RED's
//! forced drops drops, as ns-2 and the emulator do; without it Linux
//! marks those too), otherwise `noecn` where the qdisc has it (fq_codel
//! marks by default in Linux; here only when asked). CoDel's
//! `ce_threshold` is the kernel's. A `step` threshold in time is a
//! `codel` whose target (1000 s) it never reaches, with `ce_threshold` at
//! the step: it marks ECT packets above the step and, like the emulator's
//! step, drops nothing early; a step in packets or bytes has no kernel
//! counterpart and is refused. `dualpi2` needs `sch_dualpi2` (Linux 6.17
//! and later); the `cclab vm` guest (Debian's 6.1 user-mode Linux) lacks
//! it, and setup refuses saying so. Marks are read from the qdiscs'
//! statistics (red's `marked`, codel/fq_codel/pie's `ecn_mark`,
//! fq_codel/codel's `ce_mark`) into the samples' `marks`, without a
//! reason.
//!
//! Keeping the shaper at a root avoids nesting a classful shaper under
//! netem, and keeps the bottleneck queue separate from the delay line.
//!
//! **Packets, not GSO trains.** The endpoints send UDP with segmentation
//! offload (up to 48 datagrams per `sendmsg`), and veth passes such a
//! super-packet on whole: unsegmented, netem would lose, duplicate and
//! delay whole trains, and the bottleneck would queue, drop (one tc drop for
//! dozens of lost datagrams) and release them as units. Two things prevent
//! it: the topology's veths have `gso_max_segs 1`
//! ([`netns::GSO_MAX_SEGS`]), so the sender's kernel segments every GSO
//! packet on its own veth before the router (and TCP builds one-MSS
//! packets); and where netem is on that veth, the root `tbf` of
//! [`segmenter_args`] segments on enqueue, so netem's loss and duplication
//! draw per datagram. The application keeps its GSO system calls.
//!
//! The kernel on this project's own machines has no `sch_netem` (nor
//! `red`, `codel`, `act_police`): [`probe`] finds out, and
//! [`KernelNet::setup`] refuses naming what is missing; `cclab run --link
//! netem` builds the link in the guest router there
//! ([`crate::guest_router`]), whose agent runs this same code. Rate shaping
//! (tbf/htb) works on the host and is tested there.
//!
//! Differences from `emu` that the link description cannot hide: tc counts
//! bytes on the wire (UDP payload + 28 bytes of IP/UDP + 14 of Ethernet),
//! emu counts UDP payload; netem's jitter reorders packets, emu's does not;
//! Linux RED has no "gentle" mode and sets its averaging weight as a power
//! of two (chosen here as the nearest to `wq`); it always measures the
//! queue in bytes (thresholds `min_th`·`mean_pktsize` bytes), and has
//! neither ns-2's `wait` nor the drop probability scaled by packet size of
//! `bytes=true`, so `red:auto=true` runs there with ns-2's automatic
//! thresholds and weight but without those two; mahimahi traces need emu.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub mod changes;
pub mod net;
mod tc;
pub use net::{KernelNet, Place};
pub use tc::*;

use crate::bottleneck::{Sample, SampleWriter};
use crate::link::units::format_duration_ns;
use crate::link::{Aqm, Dir, LinkSpec, QueueLimit, Sched, StepThreshold};
use crate::netns::{self, NetnsError};
use link_model::elements::pipeline::ScheduledCapacity;

/// Why the netem backend cannot run.
#[derive(Debug, thiserror::Error)]
pub enum NetemError {
    /// The kernel lacks a qdisc the link needs.
    #[error("the kernel has no `{qdisc}` qdisc (sch_{qdisc} is not built or loadable), so the netem backend cannot emulate this link; use the userspace emulator instead: --link emu")]
    MissingQdisc {
        /// Which one.
        qdisc: String,
    },
    /// The description uses something the kernel path cannot do.
    #[error("{0}; use the userspace emulator instead: --link emu")]
    Unsupported(String),
    /// Namespace or tc failure.
    #[error(transparent)]
    Netns(#[from] NetnsError),
}

/// What the running kernel and tc support.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Caps {
    /// `sch_netem` works.
    pub netem: bool,
    /// `tc ... netem seed` is understood (iproute2 ≥ 6.3).
    pub netem_seed: bool,
    /// `sch_red` works.
    pub red: bool,
    /// `sch_codel` works.
    pub codel: bool,
    /// `sch_fq_codel` works.
    pub fq_codel: bool,
    /// `sch_pie` works.
    pub pie: bool,
    /// `sch_dualpi2` works (Linux 6.17 and later).
    pub dualpi2: bool,
    /// `sch_tbf` works.
    pub tbf: bool,
    /// `sch_htb` works.
    pub htb: bool,
    /// A policer works: the `ingress` qdisc, the `u32` classifier and the
    /// `police` action (`act_police`).
    #[serde(default)]
    pub police: bool,
    /// netem's `slot` (bursts of releases) is understood.
    #[serde(default)]
    pub netem_slot: bool,
    /// Aggregation can be built: netem has `slot`, and each endpoint's
    /// namespace forwards to a device of its own past the shaper (the
    /// guest router's layout; set by its agent, [`Caps::as_router`]).
    /// A host's own layout delivers from the router straight into the
    /// endpoint, with no egress qdisc after the shaper.
    #[serde(default)]
    pub aggregate: bool,
}

impl Caps {
    /// What the guest router can build with this kernel: these
    /// capabilities, and aggregation where netem has `slot`.
    pub fn as_router(mut self) -> Caps {
        self.aggregate = self.netem_slot;
        self
    }
}

/// Finds out which qdiscs the kernel has, by adding each to `lo` in a
/// scratch namespace (root only; without root everything is false).
pub fn probe() -> Caps {
    let mut caps = Caps::default();
    if !netns::is_root() {
        return caps;
    }
    let ns = format!("{}{}-probe", netns::PREFIX, std::process::id());
    if netns::run("ip", &["netns", "add", &ns]).is_err() {
        return caps;
    }
    let try_qdisc = |args: &[&str]| {
        let mut a = vec!["-n", &ns, "qdisc", "replace", "dev", "lo", "root"];
        a.extend_from_slice(args);
        let ok = netns::run("tc", &a).is_ok();
        let _ = netns::run("tc", &["-n", &ns, "qdisc", "del", "dev", "lo", "root"]);
        ok
    };
    caps.netem = try_qdisc(&["netem", "delay", "1ms"]);
    caps.netem_slot = try_qdisc(&["netem", "slot", "1ms", "1ms", "packets", "8"]);
    caps.tbf = try_qdisc(&["tbf", "rate", "1mbit", "burst", "10kb", "limit", "10kb"]);
    caps.htb = try_qdisc(&["htb"]);
    caps.red = try_qdisc(&[
        "red",
        "limit",
        "100000",
        "avpkt",
        "1000",
        "bandwidth",
        "1mbit",
    ]);
    caps.codel = try_qdisc(&["codel"]);
    caps.fq_codel = try_qdisc(&["fq_codel"]);
    caps.pie = try_qdisc(&["pie"]);
    caps.dualpi2 = try_qdisc(&["dualpi2"]);
    caps.police = policer_args(&ns, "lo", 1e6, 10_000).iter().all(|c| {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        netns::run("tc", &args).is_ok()
    });
    let _ = netns::delete(&ns);
    // iproute2 prints netem's usage (to stderr) for "help"; look for seed.
    if let Ok(out) = std::process::Command::new("tc")
        .args(["qdisc", "add", "dev", "lo", "root", "netem", "help"])
        .output()
    {
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        caps.netem_seed = text.contains("seed");
    }
    caps
}

/// Why the kernel path cannot serve `link`'s queues, if it cannot: only
/// `sched = "fifo"` is implemented here (the class-based `fq` and `wfq`
/// are the userspace emulator's).
pub fn unsupported_sched(link: &LinkSpec) -> Option<NetemError> {
    [Dir::Up, Dir::Down].into_iter().find_map(|dir| {
        let d = link.dir(dir);
        let fq_codel = d.sched == Sched::Fq && matches!(d.aqm, Aqm::CoDel(_));
        (d.sched != Sched::Fifo && !fq_codel).then(|| {
            NetemError::Unsupported(format!(
                "link.{dir}.sched: `{}` with aqm `{}` is not supported on --link netem (the kernel path has one FIFO queue per direction, or fq_codel for sched = \"fq\" with aqm = \"codel\")",
                d.sched.as_str(),
                d.aqm.name()
            ))
        })
    })
}

/// Whether the kernel can emulate `link` (`caps` from [`probe`]; with
/// `impairments = false` only its shapers are needed): its scheduler,
/// traces, and every qdisc it needs.
pub fn check_link(link: &LinkSpec, caps: &Caps, impairments: bool) -> Result<(), NetemError> {
    if let Some(e) = unsupported_sched(link) {
        return Err(e);
    }
    for dir in [Dir::Up, Dir::Down] {
        let d = link.dir(dir);
        if d.trace.is_some() {
            return Err(NetemError::Unsupported(format!(
                "link.{dir}.trace: mahimahi traces are emulated only by the userspace emulator"
            )));
        }
        if d.changes.iter().any(|c| c.aggregate.is_some()) {
            return Err(NetemError::Unsupported(format!(
                "link.{dir}.changes: a change's `aggregate` has no kernel counterpart here; the kernel links change rate, delay, loss and queue, pause and black-hole (outage) on schedule, and the simulator and the userspace emulator (--link sim, --link emu) do everything"
            )));
        }
        // Drop-tail is a tbf with a byte limit and an htb with a pfifo in
        // packets: a queue change from one unit to the other would need
        // another root qdisc mid-run.
        let tbf = |q: QueueLimit| d.aqm == Aqm::DropTail && !matches!(q, QueueLimit::Packets(_));
        if let Some(c) = d
            .changes
            .iter()
            .find(|c| c.queue.is_some_and(|q| tbf(q) != tbf(d.queue)))
        {
            return Err(NetemError::Unsupported(format!(
                "link.{dir}.changes: the queue change to `{}` at {} switches the kernel's drop-tail queue between bytes (a tbf) and packets (an htb with a pfifo) mid-run; give it in the unit the link starts with (`{}`)",
                c.queue.map(|q| q.to_spec()).unwrap_or_default(),
                format_duration_ns(c.at_ns),
                d.queue.to_spec()
            )));
        }
        // A delay, loss or outage change needs netem, even on a link that
        // starts without it.
        let netem_changes = d
            .changes
            .iter()
            .any(|c| c.delay_ns.is_some() || c.loss.is_some() || c.outage_ns.is_some());
        if netem_changes && !impairments {
            return Err(NetemError::Unsupported(format!(
                "link.{dir}.changes: a delay, loss or outage change needs netem, and this link is built with its shapers only"
            )));
        }
        if netem_changes && !caps.netem {
            return Err(NetemError::MissingQdisc {
                qdisc: "netem".into(),
            });
        }
        if let Some(a) = d.aggregate.filter(|a| a.phase_ns.is_some()) {
            return Err(NetemError::Unsupported(format!(
                "link.{dir}.aggregate: `{}`: netem's slots begin where the traffic does, so a phase has no kernel counterpart; leave it out (the link model then draws it from the seed)",
                a.to_spec()
            )));
        }
        if let Some(a) = d.aggregate.filter(|_| !caps.aggregate) {
            let why = if caps.netem_slot {
                "needs a device after the shaper to hold packets on, which this kernel's own layout lacks (the router delivers straight into the endpoint); the guest router has one (CCLAB_NETEM_ROUTER=guest)"
            } else {
                "needs netem's `slot` (Linux 4.19 and later), which this kernel lacks"
            };
            return Err(NetemError::Unsupported(format!(
                "link.{dir}.aggregate: `{}` {why}; the simulator and the userspace emulator aggregate too (--link sim, --link emu)",
                a.to_spec()
            )));
        }
        let missing = |q: &str| NetemError::MissingQdisc { qdisc: q.into() };
        if let Some(p) = d.policer.filter(|_| !caps.police) {
            return Err(NetemError::Unsupported(format!(
                "link.{dir}.policer: `{}` needs the kernel's `police` action and `u32` classifier on an `ingress` qdisc, which this kernel lacks (act_police); the guest router has them (CCLAB_NETEM_ROUTER=guest), and the simulator and the userspace emulator police too (--link sim, --link emu)",
                p.to_spec()
            )));
        }
        if impairments && needs_netem(d) && !caps.netem {
            return Err(missing("netem"));
        }
        // The segmenter under netem.
        if impairments && needs_netem(d) && !caps.tbf {
            return Err(missing("tbf"));
        }
        match d.aqm {
            Aqm::Red(_) if !caps.red => return Err(missing("red")),
            Aqm::CoDel(_) if d.sched == Sched::Fq && !caps.fq_codel => {
                return Err(missing("fq_codel"))
            }
            Aqm::CoDel(_) if !caps.codel => return Err(missing("codel")),
            Aqm::Pie(p) if p.max_burst_ns != crate::link::PieParams::LINUX_MAX_BURST_NS => {
                return Err(NetemError::Unsupported(format!(
                    "link.{dir}.aqm: pie max_burst={} cannot be set on the kernel's pie (fixed at {})",
                    format_duration_ns(p.max_burst_ns),
                    format_duration_ns(crate::link::PieParams::LINUX_MAX_BURST_NS)
                )))
            }
            Aqm::Pie(_) if !caps.pie => return Err(missing("pie")),
            Aqm::Step(p) => match p.threshold {
                StepThreshold::Time(_) if !caps.codel => return Err(missing("codel")),
                StepThreshold::Time(_) => {}
                StepThreshold::Packets(_) | StepThreshold::Bytes(_) => {
                    return Err(NetemError::Unsupported(format!(
                        "link.{dir}.aqm: `{}` has no counterpart in the kernel (Linux marks on a queue length only through red's moving average); give the step as a time, such as step:threshold=1ms (the kernel's ce_threshold)",
                        d.aqm.to_spec()
                    )))
                }
            },
            Aqm::DualPi2(_) if !caps.dualpi2 => {
                return Err(NetemError::Unsupported(format!(
                    "link.{dir}.aqm: dualpi2 needs the kernel's sch_dualpi2 (Linux 6.17 and later), which this kernel lacks (the cclab vm guest runs Debian's 6.1 user-mode Linux: red, codel, fq_codel and pie with ecn and ce_threshold, but no dualpi2)"
                )))
            }
            Aqm::DualPi2(p) if p.l_range_ns > 0 => {
                return Err(NetemError::Unsupported(format!(
                    "link.{dir}.aqm: dualpi2 l_range={}: the kernel's dualpi2 has a step (step_thresh) and no ramp; l_range must be 0us",
                    format_duration_ns(p.l_range_ns)
                )))
            }
            Aqm::DualPi2(p) if p.k.fract() != 0.0 || p.k > 255.0 => {
                return Err(NetemError::Unsupported(format!(
                    "link.{dir}.aqm: dualpi2 k={}: the kernel's coupling_factor is a whole number from 1 to 255",
                    p.k
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Counters of one qdisc from `tc -s -j qdisc show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Drops.
    pub drops: u64,
    /// Bytes queued.
    pub backlog: u64,
    /// Packets queued.
    pub qlen: u64,
    /// CE marks (red's `marked`, codel/fq_codel/pie's `ecn_mark`,
    /// codel/fq_codel's `ce_mark`; the largest of the qdiscs').
    pub marks: u64,
    /// Drops at the device's `ingress` qdisc: a policer's, of the
    /// direction that enters here (not in `drops`, which are the
    /// device's egress qdiscs').
    pub ingress_drops: u64,
}

/// Reads the root qdisc's counters from `tc -s -j qdisc show` output. Drops
/// are the larger of the root's and any child's: a leaf AQM (red, codel)
/// counts its own drops, and whether its parent adds them to its own
/// depends on where they happen (enqueue or dequeue).
pub fn parse_root_stats(json: &str) -> Option<QdiscStats> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let (ingress, all): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) = v
        .as_array()?
        .iter()
        .partition(|q| q.get("kind").and_then(|k| k.as_str()) == Some("ingress"));
    let root = all
        .iter()
        .find(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true))?;
    let n = |q: &serde_json::Value, k: &str| q.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    Some(QdiscStats {
        ingress_drops: ingress.iter().map(|q| n(q, "drops")).sum(),
        bytes: n(root, "bytes"),
        packets: n(root, "packets"),
        drops: all.iter().map(|q| n(q, "drops")).max().unwrap_or(0),
        backlog: n(root, "backlog"),
        qlen: n(root, "qlen"),
        marks: all
            .iter()
            .map(|q| {
                let x = q.get("xstats").unwrap_or(q);
                ["marked", "ecn_mark", "ce_mark"]
                    .iter()
                    .map(|k| n(x, k).max(n(q, k)))
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0),
    })
}

/// A long-running `tc -s -j -batch -` in one namespace: each query is one
/// line in and one JSON line out, with no process started per sample
/// (which costs milliseconds, and far more in a user-mode Linux guest).
pub struct TcBatch {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
    /// What tc says when it refuses a command (it says nothing else).
    errors: Option<std::process::ChildStderr>,
}

impl TcBatch {
    /// Starts the batch process for namespace `ns`.
    pub fn start(ns: &str) -> std::io::Result<TcBatch> {
        netns::validate_name(ns).map_err(std::io::Error::other)?;
        let mut child = std::process::Command::new("tc")
            .args(["-n", ns, "-s", "-j", "-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let input = child.stdin.take().expect("piped stdin");
        let output = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        let errors = child.stderr.take();
        Ok(TcBatch {
            child,
            input,
            output,
            errors,
        })
    }

    /// Runs one command (`qdisc replace dev ...`, the arguments after `tc
    /// -n NS`); it prints nothing, and a command tc refuses ends the batch
    /// (the next query then fails).
    pub fn run(&mut self, args: &[String]) -> std::io::Result<()> {
        use std::io::Write;
        writeln!(self.input, "{}", args.join(" "))?;
        self.input.flush()
    }

    /// The qdiscs of `dev`, as `tc -s -j qdisc show dev DEV` prints them.
    pub fn qdiscs(&mut self, dev: &str) -> std::io::Result<QdiscStats> {
        use std::io::{BufRead, Write};
        writeln!(self.input, "qdisc show dev {dev}")?;
        self.input.flush()?;
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            // tc has stopped (at a command it refused): what it said.
            let mut said = String::new();
            if let Some(mut e) = self.errors.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut said);
            }
            return Err(std::io::Error::other(format!(
                "tc -batch ended: {}",
                said.trim()
            )));
        }
        parse_root_stats(&line).ok_or_else(|| {
            std::io::Error::other(format!("tc -batch: no root qdisc on {dev}: {line}"))
        })
    }
}

impl Drop for TcBatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the sampler reads one link: per direction (up, down) the
/// shaper's namespace and device (bytes, packets, backlog, drops) and
/// netem's (its drops), the direction's rate, and the samples file.
pub(crate) struct SampledLink {
    pub shaper: [(String, String); 2],
    pub netem: [(String, String); 2],
    /// Where a direction's policer is (its `ingress` qdisc), if it has
    /// one.
    pub policer: [Option<(String, String)>; 2],
    /// Each direction's capacity, its scheduled changes included: what a
    /// sample's utilization divides by.
    pub capacity: [ScheduledCapacity; 2],
    pub path: PathBuf,
}

/// Samples both directions of every link every `interval` into its file
/// (JSON lines, the same [`Sample`] as emu) on one thread until the
/// returned sampler is stopped; one `tc -batch` per namespace read.
pub(crate) fn start_sampler(
    mut links: Vec<SampledLink>,
    interval: Duration,
    mut changes: changes::Planner,
) -> std::io::Result<Sampler> {
    let mut writers = Vec::with_capacity(links.len());
    for l in &links {
        if let Some(d) = l.path.parent() {
            std::fs::create_dir_all(d)?;
        }
        writers.push(SampleWriter::create(&l.path.with_extension("jsonl.part"))?);
    }
    let mut batches: std::collections::HashMap<String, TcBatch> = Default::default();
    for l in &links {
        for (ns, _) in l.shaper.iter().chain(&l.netem) {
            if !batches.contains_key(ns) {
                batches.insert(ns.clone(), TcBatch::start(ns)?);
            }
        }
    }
    let first = links.first().map(|l| l.path.clone()).unwrap_or_default();
    let changes_log = first.with_file_name(changes::LOG);
    let mut log = match changes.due() {
        Some(_) => Some(std::io::BufWriter::new(std::fs::File::create(
            changes_log.with_extension("jsonl.part"),
        )?)),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let handle = std::thread::spawn(move || -> std::io::Result<()> {
        let t0 = std::time::Instant::now();
        let mut prev = vec![[(0.0f64, QdiscStats::default(), 0u64); 2]; links.len()];
        let mut next = interval;
        while !stop2.load(Ordering::Relaxed) {
            let due = changes.due().map(Duration::from_nanos);
            let wake = due.map_or(next, |d| d.min(next));
            if let Some(left) = wake.checked_sub(t0.elapsed()) {
                std::thread::sleep(left);
            }
            if fire_due(&mut changes, &mut batches, t0, log.as_mut())? {
                continue;
            }
            next += interval;
            for (i, l) in links.iter_mut().enumerate() {
                for (k, dir) in [Dir::Up, Dir::Down].into_iter().enumerate() {
                    // A pass of queries takes tens of milliseconds in the
                    // guest router: a change that falls due meanwhile goes
                    // before the next query, not after the pass.
                    fire_due(&mut changes, &mut batches, t0, log.as_mut())?;
                    let ((sns, sdev), (ens, edev)) = (&l.shaper[k], &l.netem[k]);
                    // The counters are read somewhere inside the query:
                    // stamp the sample at its midpoint.
                    let before = t0.elapsed().as_secs_f64();
                    let Some(Ok(s)) = batches.get_mut(sns).map(|b| b.qdiscs(sdev)) else {
                        continue;
                    };
                    let t = (before + t0.elapsed().as_secs_f64()) / 2.0;
                    let (pt, ps, pnd) = prev[i][k];
                    // netem's drops (its loss model) and the policer's.
                    let netem_drops = batches
                        .get_mut(ens)
                        .and_then(|b| b.qdiscs(edev).ok())
                        .map(|q| q.drops);
                    let policer_drops = match &l.policer[k] {
                        Some((pns, pdev)) => batches
                            .get_mut(pns)
                            .and_then(|b| b.qdiscs(pdev).ok())
                            .map(|q| q.ingress_drops),
                        None => Some(0),
                    };
                    let nd = match (netem_drops, policer_drops) {
                        (Some(a), Some(b)) => a + b,
                        _ => pnd,
                    };
                    let ns = |s: f64| (s * 1e9) as u64;
                    let cap = l.capacity[k].bits(ns(pt), ns(t));
                    let sent = s.bytes.saturating_sub(ps.bytes);
                    let drops_total = s.drops + nd;
                    writers[i].write(&Sample {
                        t_s: t,
                        dir: dir.as_str().into(),
                        interval_s: t - pt,
                        sent_bytes: sent,
                        sent_packets: s.packets.saturating_sub(ps.packets),
                        utilization: if cap > 0.0 {
                            sent as f64 * 8.0 / cap
                        } else {
                            0.0
                        },
                        queue_bytes: s.backlog,
                        queue_packets: s.qlen,
                        drops: drops_total.saturating_sub(ps.drops + pnd),
                        drops_total,
                        marks: s.marks.saturating_sub(ps.marks),
                        marks_total: s.marks,
                        capacity_bits: l.capacity[k].varies().then_some(cap),
                    })?;
                    prev[i][k] = (t, s, nd);
                }
            }
        }
        for (w, l) in writers.into_iter().zip(&links) {
            w.finish()?;
            std::fs::rename(l.path.with_extension("jsonl.part"), &l.path)?;
        }
        if let Some(mut w) = log {
            std::io::Write::flush(&mut w)?;
            std::fs::rename(changes_log.with_extension("jsonl.part"), &changes_log)?;
        }
        Ok(())
    });
    Ok(Sampler {
        stop,
        handle: Some(handle),
        path: first,
    })
}

/// Makes every change due by now (both directions of a link-wide change
/// at once) and logs it; true if there was one.
fn fire_due(
    changes: &mut changes::Planner,
    batches: &mut std::collections::HashMap<String, TcBatch>,
    t0: std::time::Instant,
    log: Option<&mut impl std::io::Write>,
) -> std::io::Result<bool> {
    let mut now = Vec::new();
    while changes
        .due()
        .is_some_and(|d| Duration::from_nanos(d) <= t0.elapsed())
    {
        now.extend(changes.fire());
    }
    if now.is_empty() {
        return Ok(false);
    }
    if let Some(w) = log {
        apply_changes(&now, batches, t0, w)?;
    }
    Ok(true)
}

/// Runs scheduled changes' commands through the namespaces' `tc -batch`
/// processes, then queries a device each namespace changed: the answers
/// come once the kernel has taken the commands, which is when the changes
/// are logged as applied (`applied_s`, seconds from the sampler's start,
/// beside `at_s`, when each was due).
fn apply_changes(
    changes: &[changes::TcChange],
    batches: &mut std::collections::HashMap<String, TcBatch>,
    t0: std::time::Instant,
    log: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let mut touched: Vec<(String, String)> = Vec::new();
    let commands = changes.iter().flat_map(|c| &c.commands);
    for (ns, args) in commands {
        if !batches.contains_key(ns) {
            batches.insert(ns.clone(), TcBatch::start(ns)?);
        }
        let b = batches.get_mut(ns).expect("started");
        b.run(args)?;
        let dev = args.iter().skip_while(|a| *a != "dev").nth(1);
        if let Some(dev) = dev {
            touched.retain(|(n, _)| n != ns);
            touched.push((ns.clone(), dev.clone()));
        }
    }
    let line = |c: &changes::TcChange| -> Vec<String> {
        let cmds = c.commands.iter();
        cmds.map(|(n, a)| format!("tc -n {n} {}", a.join(" ")))
            .collect()
    };
    for (ns, dev) in &touched {
        let b = batches.get_mut(ns).expect("started");
        b.qdiscs(dev).map_err(|e| {
            let what: Vec<String> = changes
                .iter()
                .map(|c| {
                    let at = format_duration_ns(c.at_ns);
                    format!(
                        "at {at}, {} {}: {}",
                        c.dir.as_str(),
                        c.what,
                        line(c).join("; ")
                    )
                })
                .collect();
            std::io::Error::other(format!(
                "a scheduled link change: tc refused it or stopped ({e}); the changes: {}",
                what.join(" | ")
            ))
        })?;
    }
    let applied = t0.elapsed().as_secs_f64();
    for c in changes {
        let record = changes::Applied {
            at_s: c.at_ns as f64 / 1e9,
            applied_s: applied,
            dir: c.dir.as_str().into(),
            what: c.what.clone(),
            commands: line(c),
        };
        writeln!(log, "{}", serde_json::to_string(&record)?)?;
    }
    Ok(())
}

/// A running netem sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// The samples file.
    pub path: PathBuf,
}

impl Sampler {
    /// Stops sampling and finishes the file.
    pub fn stop(mut self) -> std::io::Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("sampler thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{CoDelParams, JitterDistribution, RedParams};
    use std::path::Path;

    fn line(v: &[String]) -> String {
        v.join(" ")
    }

    fn spec(toml_text: &str) -> LinkSpec {
        let t: toml::Table = toml::from_str(toml_text).unwrap();
        LinkSpec::from_toml(&t, Path::new("."), "link").unwrap()
    }

    #[test]
    fn netem_lines_cover_every_option() {
        let l = spec("rate = \"100mbit\"\nrtt = \"40ms\"\njitter = \"2ms\"\njitter_distribution = \"pareto\"\nloss = \"1.5%\"\nduplicate = \"0.1%\"\nreorder = \"2%\"");
        let a = netem_args("ns1", "c0", &l.up, Some(7));
        assert_eq!(
            line(&a),
            "-n ns1 qdisc replace dev c0 parent 1:1 handle 10: netem limit 5469 delay 20ms 2ms distribution pareto loss random 1.5% duplicate 0.1% reorder 2% seed 7"
        );
        // limit: 100 Mbit/s × 28 ms of line / 64 B = 5469 packets.
        let big = spec("rate = \"1gbit\"\nrtt = \"200ms\"");
        assert_eq!(netem_limit(&big.down), 195_313);
        let ge = spec("loss = \"ge:p=1%,r=30%,bad=90%,good=0.1%\"\njitter = \"1ms\"");
        assert_eq!(
            line(&netem_args("n", "s0", &ge.down, None)),
            "-n n qdisc replace dev s0 parent 1:1 handle 10: netem limit 1000 delay 20ms 1ms rate 100gbit loss gemodel 1% 30% 90% 0.1%"
        );
        let mut d = l.up.clone();
        d.jitter_distribution = JitterDistribution::Uniform;
        assert!(!line(&netem_args("n", "c0", &d, None)).contains("distribution"));
        // netem goes under a tbf that segments GSO packets and never
        // holds one back.
        assert_eq!(
            line(&segmenter_args("ns1", "c0")),
            "-n ns1 qdisc replace dev c0 root handle 1: tbf rate 10000000000000bit burst 1514 limit 1514"
        );
        let clean = spec("rtt = \"0ms\"");
        assert!(!needs_netem(&clean.up) && needs_netem(&l.up));
    }

    #[test]
    fn shaper_lines_for_each_queue_and_aqm() {
        let l = spec("rate = \"20mbit\"\nrtt = \"40ms\"");
        let c = shaper_args("r", "rc0", &l, Dir::Down, 1500);
        assert_eq!(c.len(), 1);
        assert_eq!(
            line(&c[0]),
            "-n r qdisc replace dev rc0 root handle 1: tbf rate 20000000bit burst 3000 limit 100000"
        );
        let p = spec("rate = \"1gbit\"\nqueue = \"100pkt\"");
        let c = shaper_args("r", "rs0", &p, Dir::Up, 1500);
        assert_eq!(
            line(&c[0]),
            "-n r qdisc replace dev rs0 root handle 1: htb default 1"
        );
        assert_eq!(
            line(&c[1]),
            "-n r class replace dev rs0 parent 1: classid 1:1 htb rate 1000000000bit ceil 1000000000bit burst 125000 cburst 125000"
        );
        assert_eq!(
            line(&c[2]),
            "-n r qdisc replace dev rs0 parent 1:1 handle 10: pfifo limit 100"
        );
        let r = spec("aqm = \"red\"\nqueue = \"200kb\"");
        let c = shaper_args("r", "rc0", &r, Dir::Down, 1500);
        let RedParams { wq, .. } = RedParams::default();
        let burst = red_burst(5000.0, 1000.0, wq);
        assert_eq!(
            line(&c[2]),
            format!("-n r qdisc replace dev rc0 parent 1:1 handle 10: red limit 204800 min 5000 max 15000 avpkt 1000 burst {burst} probability 0.1 bandwidth 20000000bit")
        );
        // Automatic RED at 20 Mbit/s: ptc = 5000 packets of 500 bytes a
        // second, min_th = 0.005·5000/2 = 12.5 packets (6250 bytes),
        // max_th three times that, and wq = 1 − exp(−1/(10·0.1·5000)).
        let a = spec("aqm = \"red:auto=true\"\nqueue = \"200kb\"");
        let c = shaper_args("r", "rc0", &a, Dir::Down, 1500);
        let burst = red_burst(6250.0, 500.0, 1.0 - (-1.0f64 / 5000.0).exp());
        assert_eq!(
            line(&c[2]),
            format!("-n r qdisc replace dev rc0 parent 1:1 handle 10: red limit 204800 min 6250 max 18750 avpkt 500 burst {burst} probability 0.1 bandwidth 20000000bit")
        );
        let cd = spec("aqm = \"codel:target=3ms,interval=60ms\"");
        let c = shaper_args("r", "rc0", &cd, Dir::Down, 1500);
        assert_eq!(
            line(&c[2]),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: codel limit 66 target 3ms interval 60ms noecn"
        );
        let fq = spec("aqm = \"fq_codel:target=3ms\"");
        let c = shaper_args("r", "rc0", &fq, Dir::Down, 1500);
        assert_eq!(
            line(&c[2]),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: fq_codel limit 66 target 3ms interval 100ms quantum 1500 noecn"
        );
        assert!(unsupported_sched(&fq).is_none());
        let _ = CoDelParams::default();
        let bf = spec("queue = \"1bdp\"\naqm = \"droptail\"\n[up]\nqueue = \"50kb\"");
        assert!(line(&shaper_args("r", "rs0", &bf, Dir::Up, 1500)[0]).ends_with("limit 51200"));
    }

    #[test]
    fn pie_shaper_line_maps_rfc_parameters_to_tc() {
        // Defaults: 20 Mbit/s, 1 BDP (100 kB = 66 packets of 1500 B).
        let d = spec("aqm = \"pie\"");
        let c = shaper_args("r", "rc0", &d, Dir::Down, 1500);
        assert_eq!(c.len(), 3);
        assert_eq!(
            line(&c[1]),
            "-n r class replace dev rc0 parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 3000 cburst 3000"
        );
        // RFC alpha 0.125 and beta 1.25 are tc's 2 and 20 (units of 1/16).
        assert_eq!(
            line(&c[2]),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: pie limit 66 target 15ms tupdate 15ms alpha 2 beta 20 noecn"
        );
        let p = spec("queue = \"200pkt\"\naqm = \"pie:target=5ms,tupdate=30ms,alpha=0.0625,beta=2,bytemode=true\"");
        assert_eq!(
            line(&shaper_args("r", "rs0", &p, Dir::Up, 1500)[2]),
            "-n r qdisc replace dev rs0 parent 1:1 handle 10: pie limit 200 target 5ms tupdate 30ms alpha 1 beta 32 noecn bytemode"
        );
        let u = spec("aqm = \"pie:target=2500us,alpha=0.5,beta=0.75\"");
        assert!(line(&shaper_args("r", "rc0", &u, Dir::Down, 1500)[2])
            .ends_with("pie limit 66 target 2500us tupdate 15ms alpha 8 beta 12 noecn"));
    }

    #[test]
    fn pie_needs_the_qdisc_and_linux_burst_allowance() {
        // Refused before any namespace is made.
        let caps = Caps::default();
        let e = KernelNet::one(&spec("aqm = \"pie\""), &caps, 1500, false)
            .err()
            .unwrap();
        assert!(
            matches!(&e, NetemError::MissingQdisc { qdisc } if qdisc == "pie"),
            "{e}"
        );
        let b = spec("[down]\naqm = \"pie:max_burst=100ms\"");
        let e = KernelNet::one(&b, &caps, 1500, false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("link.down.aqm: pie max_burst=100ms")
                && e.contains("150ms")
                && e.contains("--link emu"),
            "{e}"
        );
        // fq with pie is not fq_codel: the kernel path refuses it.
        let f = spec("aqm = \"pie\"\nsched = \"fq\"");
        assert!(unsupported_sched(&f).is_some());
    }

    #[test]
    fn class_schedulers_are_refused_with_the_field() {
        let mut l = LinkSpec::default();
        assert!(unsupported_sched(&l).is_none());
        l.down.sched = Sched::Wfq;
        let e = unsupported_sched(&l).unwrap().to_string();
        assert!(
            e.contains(
                "link.down.sched: `wfq` with aqm `droptail` is not supported on --link netem"
            ) && e.contains("--link emu"),
            "{e}"
        );
        // Refused before any namespace is made.
        let caps = Caps::default();
        let e = KernelNet::one(&l, &caps, 1500, false).err().unwrap();
        assert!(e.to_string().contains("sched"), "{e}");
    }

    #[test]
    fn red_burst_gives_the_nearest_power_of_two() {
        // wq = 0.002 → Wlog 9 (1/512). Check with tc's rule directly.
        let b = red_burst(5000.0, 1000.0, 0.002) as f64;
        let a = b + 1.0 - 5.0;
        let ok = |w: i32| {
            let wgt = 1.0 / (1u64 << w) as f64;
            a <= (1.0 - (1.0 - wgt).powf(b)) / wgt
        };
        assert!(ok(9) && !ok(8), "burst {b}");
    }

    #[test]
    fn root_stats_from_tc_json() {
        let j = r#"[{"kind":"tbf","handle":"1:","root":true,"bytes":90,"packets":1,"drops":2,"backlog":3000,"qlen":2},{"kind":"bfifo","handle":"10:","parent":"1:1","bytes":5}]"#;
        assert_eq!(
            parse_root_stats(j),
            Some(QdiscStats {
                bytes: 90,
                packets: 1,
                drops: 2,
                backlog: 3000,
                qlen: 2,
                marks: 0,
                ingress_drops: 0,
            })
        );
        // A policer's drops at the device's ingress qdisc are apart from
        // the egress qdiscs' (the other direction's).
        let j = r#"[{"kind":"tbf","handle":"1:","root":true,"bytes":90,"packets":1,"drops":2,"backlog":0,"qlen":0},{"kind":"ingress","handle":"ffff:","parent":"ffff:fff1","drops":40}]"#;
        let s = parse_root_stats(j).unwrap();
        assert_eq!((s.drops, s.ingress_drops), (2, 40));
        // Marks: red's `marked`, codel's `ecn_mark` + `ce_mark` (in the
        // object or under `xstats`); the largest qdisc's.
        let j = r#"[{"kind":"htb","handle":"1:","root":true,"bytes":90,"packets":1,"drops":0,"backlog":0,"qlen":0},{"kind":"codel","handle":"10:","parent":"1:1","ecn_mark":4,"ce_mark":3},{"kind":"red","handle":"20:","xstats":{"marked":5}}]"#;
        assert_eq!(parse_root_stats(j).unwrap().marks, 7);
        assert_eq!(parse_root_stats("[]"), None);
        assert_eq!(parse_root_stats("not json"), None);
    }

    #[test]
    fn ecn_options_become_the_kernels() {
        let leaf = |toml_text: &str| {
            let l = spec(&format!("rate = \"20mbit\"\nrtt = \"40ms\"\n{toml_text}"));
            line(&shaper_args("r", "rc0", &l, Dir::Down, 1500)[2])
        };
        assert!(leaf("aqm = \"red:ecn=true\"\nqueue = \"200kb\"")
            .ends_with("probability 0.1 bandwidth 20000000bit ecn harddrop"));
        assert!(!leaf("aqm = \"red\"\nqueue = \"200kb\"").contains("ecn"));
        assert_eq!(
            leaf("aqm = \"codel:ecn=true,ce_threshold=1ms\""),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: codel limit 66 target 5ms interval 100ms ecn ce_threshold 1ms"
        );
        assert_eq!(
            leaf("aqm = \"fq_codel:ecn=true,ce_threshold=500us\""),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: fq_codel limit 66 target 5ms interval 100ms quantum 1500 ecn ce_threshold 500us"
        );
        assert_eq!(
            leaf("aqm = \"fq_codel:ce_threshold=1ms\""),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: fq_codel limit 66 target 5ms interval 100ms quantum 1500 noecn ce_threshold 1ms"
        );
        assert!(leaf("aqm = \"pie:ecn=true\"")
            .ends_with("pie limit 66 target 15ms tupdate 15ms alpha 2 beta 20 ecn"));
        assert_eq!(
            leaf("aqm = \"step:threshold=2ms\""),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: codel limit 66 target 1000s interval 1000s noecn ce_threshold 2ms"
        );
        assert_eq!(
            leaf("aqm = \"dualpi2\""),
            "-n r qdisc replace dev rc0 parent 1:1 handle 10: dualpi2 limit 66 target 15ms tupdate 16ms alpha 0.16 beta 3.2 coupling_factor 2 step_thresh 1ms min_qlen_step 1 drop_dequeue l4s_ect"
        );
        // What the kernel does not have is refused, naming it.
        let all = Caps {
            netem: true,
            netem_seed: true,
            red: true,
            codel: true,
            fq_codel: true,
            pie: true,
            dualpi2: false,
            tbf: true,
            htb: true,
            police: true,
            netem_slot: true,
            aggregate: false,
        };
        let refuse = |toml_text: &str, caps: &Caps| {
            check_link(&spec(toml_text), caps, false)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let e = refuse("[down]\naqm = \"dualpi2\"", &all);
        assert!(
            e.contains("link.down.aqm: dualpi2 needs the kernel's sch_dualpi2 (Linux 6.17")
                && e.contains("--link emu"),
            "{e}"
        );
        let e = refuse("aqm = \"step:threshold=20pkt\"", &all);
        assert!(
            e.contains("link.up.aqm: `step:threshold=20pkt` has no counterpart in the kernel")
                && e.contains("step:threshold=1ms"),
            "{e}"
        );
        assert_eq!(refuse("aqm = \"step:threshold=1ms\"", &all), "");
        assert_eq!(
            refuse("aqm = \"codel:ecn=true,ce_threshold=1ms\"", &all),
            ""
        );
        let with_dualpi2 = Caps {
            dualpi2: true,
            ..all.clone()
        };
        assert_eq!(refuse("aqm = \"dualpi2\"", &with_dualpi2), "");
        let e = refuse("aqm = \"dualpi2:l_range=400us\"", &with_dualpi2);
        assert!(e.contains("l_range=400us") && e.contains("no ramp"), "{e}");
        let e = refuse("aqm = \"dualpi2:k=2.5\"", &with_dualpi2);
        assert!(e.contains("coupling_factor is a whole number"), "{e}");
        let e = refuse("aqm = \"step:threshold=1ms\"", &Caps::default());
        assert!(e.contains("`codel`"), "{e}");
        // A policer where the kernel can police; refused, naming the
        // action, where it cannot.
        let policer = "[down]\npolicer = \"rate=10mbit,burst=50kb\"";
        assert_eq!(refuse(policer, &all), "");
        let no_police = Caps {
            police: false,
            ..all.clone()
        };
        let e = refuse(policer, &no_police);
        assert!(
            e.contains("link.down.policer") && e.contains("act_police"),
            "{e}"
        );
        // A queue change that would switch drop-tail between a tbf (bytes)
        // and an htb (packets) mid-run.
        let e = refuse(
            "queue = \"1bdp\"\n[[changes]]\nat = \"1s\"\nqueue = \"50pkt\"",
            &all,
        );
        assert!(
            e.contains("link.up.changes") && e.contains("`50pkt`") && e.contains("tbf"),
            "{e}"
        );
        assert_eq!(
            refuse(
                "queue = \"1bdp\"\n[[changes]]\nat = \"1s\"\nqueue = \"2bdp\"",
                &all
            ),
            ""
        );
        // A delay change on a link built with its shapers only.
        let e = refuse("[[changes]]\nat = \"1s\"\ndelay = \"50ms\"", &all);
        assert!(e.contains("needs netem"), "{e}");
        // Aggregation: the guest router's layout builds it, a host's own
        // does not; a kernel without netem's slot cannot.
        let agg = "[down]\naggregate = \"period=4ms\"";
        let e = refuse(agg, &all);
        assert!(
            e.contains("link.down.aggregate: `period=4ms`")
                && e.contains("after the shaper")
                && e.contains("CCLAB_NETEM_ROUTER=guest"),
            "{e}"
        );
        assert_eq!(refuse(agg, &all.clone().as_router()), "");
        let e = refuse(
            "[down]\naggregate = \"period=4ms,phase=1ms\"",
            &all.clone().as_router(),
        );
        assert!(
            e.contains("phase=1ms") && e.contains("no kernel counterpart"),
            "{e}"
        );
        let no_slot = Caps {
            netem_slot: false,
            ..all.clone()
        }
        .as_router();
        let e = refuse(agg, &no_slot);
        assert!(e.contains("netem's `slot`"), "{e}");
    }

    #[test]
    fn aggregation_is_netem_slots_of_the_period() {
        let args = |toml_text: &str| {
            let l = spec(toml_text);
            line(&aggregation_args(
                "c",
                "vec0",
                &l.down.aggregate.unwrap(),
                l.down.rate_bps,
            ))
        };
        assert_eq!(
            args("rate = \"20mbit\"\n[down]\naggregate = \"period=4ms\""),
            "-n c qdisc replace dev vec0 root netem limit 1000 slot 4ms 4ms"
        );
        assert_eq!(
            args("rate = \"1gbit\"\n[down]\naggregate = \"period=10ms,burst=32pkt\""),
            "-n c qdisc replace dev vec0 root netem limit 19532 slot 10ms 10ms packets 32"
        );
        assert_eq!(
            args("rate = \"20mbit\"\n[down]\naggregate = \"period=8ms,burst=30kb\""),
            "-n c qdisc replace dev vec0 root netem limit 1000 slot 8ms 8ms bytes 30720"
        );
    }

    #[test]
    fn a_policer_polices_what_enters_the_router() {
        let l = spec("rate = \"20mbit\"\n[down]\npolicer = \"rate=10mbit,burst=50kb\"");
        let p = l.down.policer.unwrap();
        let burst = l.limit_bytes(Dir::Down, p.burst, 1500);
        let c: Vec<String> = policer_args("r", "rs0", p.rate_bps, burst)
            .iter()
            .map(|c| line(c))
            .collect();
        assert_eq!(
            c,
            [
                "-n r qdisc replace dev rs0 ingress",
                "-n r filter replace dev rs0 ingress prio 1 u32 match u32 0 0 action police rate 10000000bit burst 51200b overhead 14 conform-exceed drop/ok"
            ]
        );
    }
}
