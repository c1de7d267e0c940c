//! What a run measures: per flow and bottleneck for each repetition, and
//! the averages over repetitions that `summary.json` holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// RTT figures from the sender's qlog, ms.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RttMs {
    /// Minimum.
    pub min: f64,
    /// Mean of the samples.
    pub mean: f64,
    /// 95th percentile.
    pub p95: f64,
}

/// One flow of one repetition.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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
    /// Data packets its sender sent (a count of system calls per data
    /// packet needs it); not written to `summary.json`.
    #[serde(skip)]
    pub data_packets_sent: Option<u64>,
    /// Goodput from the receiver's qlog, bit/s.
    pub qlog_goodput_bps: Option<f64>,
    /// A flow of several requests (`requests`): seconds from its first
    /// request to the end of its last response, when all completed
    /// (the client's `request_ends_s`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_s: Option<f64>,
    /// RTT from the sender's qlog.
    pub rtt_ms: Option<RttMs>,
    /// Packets the sender declared lost, from its qlog; `None` (null) when
    /// that qlog was not written (`--qlog-level off`) or could not be read:
    /// nothing measured it, and it is not 0. Null for a Linux TCP flow,
    /// whose kernel does not count the segments it deemed lost: see
    /// `retransmitted_packets`.
    pub lost_packets: Option<u64>,
    /// `lost_packets` over the packets the sender sent, from its qlog
    /// (absent unless the qlog logs packets: `--qlog-level packets` or more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_rate: Option<f64>,
    /// A flow of one request of a given size (`size`, and every
    /// `[[arrivals]]` flow): its completion time, from the client's start
    /// (the handshake included) to the last byte of the response, s;
    /// absent for timed flows, several requests, Linux TCP flows, or a
    /// flow that did not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_s: Option<f64>,
    /// A Linux TCP flow's counterpart of `lost_packets`: the segments its
    /// sender retransmitted (`tcpi_total_retrans`, fast retransmits,
    /// timeouts and spurious retransmissions alike); absent for QUIC
    /// flows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmitted_packets: Option<u64>,
    /// Mean cwnd of the sender, bytes.
    pub cwnd_mean: Option<f64>,
    /// The sender's cwnd coefficient of variation (time-weighted standard
    /// deviation / mean), from its qlog: the window's stability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwnd_cv: Option<f64>,
    /// Bytes received on the wire by the data receiver (from its qlog).
    pub wire_bytes_received: u64,
    /// How the sender's first slow start ended and what it overshot, from
    /// its qlog's congestion states (`--qlog-level base` or more; absent
    /// without them, and for Linux TCP flows):
    /// [`qlog_analysis::slow_start`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_start: Option<qlog_analysis::slow_start::SlowStartSummary>,
    /// The last value of each of the sender's own metrics in its qlog (a
    /// plugin's, such as `smcc_alpha`; `--qlog-level metrics` or more);
    /// absent without them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub metrics_last: std::collections::BTreeMap<String, f64>,
    /// Mean size of the sender's data packets, bytes, and the share of them
    /// under 95% of its largest (from its qlog's packet events; null
    /// without them): which packet regime a result comes from
    /// (`small_packets`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_packet_bytes_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_packet_small_share: Option<f64>,
    /// ACK-only packets the receiver sent per data packet it received
    /// (from its qlog; null without packet events): the `ack_policy` at work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acks_per_data_packet: Option<f64>,
    /// The round-trip propagation delay of the flow's path, ms: its links'
    /// delays and its own access delay (scenarios with several links or
    /// per-flow RTTs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_rtt_ms: Option<f64>,
    /// Why it did not complete.
    pub error: Option<String>,
    /// The sender's and receiver's qlog files (relative to the run).
    pub qlog: BTreeMap<String, String>,
    /// A Linux TCP flow's records instead (relative to the run): the
    /// sender's `TCP_INFO` samples (`sender`; its cwnd series) and the
    /// receiver's counts (`receiver`), JSON lines written by `tcp-bulk`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tcp_records: BTreeMap<String, String>,
}

/// One scheduled change and the link's recovery from it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Recovery {
    /// When it happened, s from the run's start.
    pub at_s: f64,
    /// What changed (`rate 5mbit`, `outage 1s`).
    pub change: String,
    /// How long until the link carried at least 90% of the capacity in
    /// force, for at least 0.5 s (docs/metrics.md); null when it did not
    /// before the next change or the run's end. In a summary: the mean
    /// over the repetitions that recovered.
    pub recovery_s: Option<f64>,
    /// How long after its time the change took effect, ms: on netem, when
    /// the kernel had taken it (`link-changes.jsonl`); absent on sim and
    /// emu, whose link model makes it at its time on the link's own clock.
    /// In a summary: the mean over the repetitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_ms: Option<f64>,
}

/// The bottleneck during one repetition, in the direction carrying data.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BottleneckResult {
    /// `up` or `down`.
    pub direction: String,
    /// Sent bits / capacity over the whole measured interval: from the
    /// first flow's start to the end of the run (docs/metrics.md).
    pub utilization: f64,
    /// The same from one second after the first flow's start (handshake
    /// and the first slow start left out); null for runs of 5 s or less.
    pub utilization_steady: Option<f64>,
    /// Packets dropped (all reasons).
    pub drops: u64,
    /// Mean queueing delay of the packets that crossed, ms.
    pub queue_delay_ms_mean: f64,
    /// Bytes that crossed the link.
    pub bytes: u64,
    /// Drops by reason.
    pub drops_by_reason: BTreeMap<String, u64>,
    /// CE marks by the link's AQMs (every reason; emu and sim per packet,
    /// netem from the qdiscs' counters). Absent when 0, so results of
    /// links that mark nothing are what they were before ECN.
    #[serde(skip_serializing_if = "is_zero")]
    pub marks: u64,
    /// Each scheduled change of this direction and the time the link took
    /// to carry 90% of the capacity again (absent without changes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recoveries: Vec<Recovery>,
    /// CE marks by reason (`red`, `codel`, `pie`, `step`, `dualpi2_l`,
    /// `dualpi2_c`; emu and sim), only the reasons that marked.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub marks_by_reason: BTreeMap<String, u64>,
    /// Bytes dropped over bytes offered to the bottleneck (every reason;
    /// emu and sim only). Unlike a per-packet rate it does not depend on
    /// how the sender cut its data into packets.
    pub loss_rate: Option<f64>,
}

/// One link of several during one repetition (or averaged): the
/// bottleneck's figures for that link, in the direction carrying data, and
/// the flows that cross it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkResult {
    /// Its figures, as `bottleneck` has them.
    #[serde(flatten)]
    pub link: BottleneckResult,
    /// The flows (indices) whose path crosses it.
    pub flows: Vec<usize>,
    /// Jain's index over those flows' goodputs.
    pub jain_fairness: Option<f64>,
}

/// One repetition.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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
    /// Every link by name (scenarios with several links only; the first
    /// link is also `bottleneck`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, LinkResult>,
    /// Cross traffic: bytes sent and received per source.
    pub cross: Vec<(u64, u64)>,
    /// Seconds spent setting up and tearing down (not moving data).
    pub overhead_s: f64,
    /// CPU seconds the emulator's thread used, and the seconds it ran.
    pub emu_cpu: Option<(f64, f64)>,
    /// How late the emulator handed packets on, after the time the link
    /// planned for them (median, 99th percentile, maximum); absent
    /// elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emu_lateness: Option<crate::emu::Lateness>,
    /// How the emulator's thread was scheduled (`fifo:10`, `normal`, or
    /// `normal (fifo:10 refused: ...)`); absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emu_scheduling: Option<String>,
    /// The share of the machine's CPU time (all its CPUs, `/proc/stat`)
    /// that was busy while the flows ran, whoever used it (endpoints, the
    /// link, other programs); null on sim or where `/proc/stat` is
    /// missing (and then absent, so sim's files are as they were). Near 1
    /// the endpoints were short of CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_busy: Option<f64>,
    /// On netem in the guest router: the share of the guest's one CPU
    /// that was busy while the flows ran (forwarding, qdiscs, sampling);
    /// absent elsewhere. Near 1 the router, not the link, set the pace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_cpu_busy: Option<f64>,
    /// The endpoints' system calls (`--count-syscalls`); absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<SyscallResult>,
}

/// The system calls of a repetition's endpoint processes (every server
/// and client, every thread, exec to exit), against the data packets
/// their flows' senders sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyscallResult {
    /// Endpoint processes counted.
    pub processes: u32,
    /// Endpoint processes started but not counted (a counter that did
    /// not write: the wrapper was killed). `per_data_packet` is absent
    /// when any is missing.
    pub missing: u32,
    /// Every system call they made.
    pub calls: u64,
    /// Data packets the senders sent: QUIC packets with stream data (the
    /// sender's qlog), Linux TCP's `data_segs_out`.
    pub data_packets: u64,
    /// `calls / data_packets`.
    pub per_data_packet: Option<f64>,
    /// Some of the calls by name, summed over the processes
    /// ([`crate::syscount::NAMED`]).
    pub by_name: BTreeMap<String, u64>,
}

/// A flow averaged over repetitions, with 95% confidence half-widths.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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
    /// Mean lost packets; null when a repetition did not measure them.
    pub lost_packets: Option<f64>,
    /// Mean of the repetitions' `loss_rate` (absent when none measured it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_rate: Option<f64>,
    /// Mean of the repetitions' `fct_s` (those that completed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_s: Option<f64>,
    /// The flow's size, bytes, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// A flow of several requests: the mean of the repetitions'
    /// `completion_s`, when every repetition completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_s: Option<f64>,
    /// A Linux TCP flow's mean retransmitted segments (as in
    /// [`FlowResult`]); absent for QUIC flows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmitted_packets: Option<f64>,
    /// Means of the repetitions' [`FlowResult`] packet figures (absent when
    /// no repetition logged packet events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_packet_bytes_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_packet_small_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acks_per_data_packet: Option<f64>,
    /// The round-trip propagation delay of its path, ms (as in
    /// [`FlowResult`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_rtt_ms: Option<f64>,
    /// The repetitions' slow starts: mean exit time, window, overshoot
    /// losses and peak queue, and how many ended for each reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_start: Option<SlowStartMeans>,
    /// Repetitions in which it completed.
    pub completed: u32,
    /// 95% confidence half-widths (Student t) of goodput_bps, rtt mean, lost.
    pub ci95: BTreeMap<String, f64>,
}

/// [`FlowResult::slow_start`] over the repetitions that logged one.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SlowStartMeans {
    /// Mean time slow start ended (of the repetitions in which it did), s.
    pub exit_s: Option<f64>,
    /// Mean window then, bytes.
    pub exit_cwnd_bytes: Option<f64>,
    /// Mean packets lost of those sent in slow start.
    pub lost_packets: f64,
    /// Mean peak queueing delay in slow start, ms.
    pub peak_queue_ms: Option<f64>,
    /// Repetitions by exit reason.
    pub exit_reasons: BTreeMap<String, u32>,
}

/// The version of `summary.json`'s layout: raised when a field is
/// renamed, removed or changes meaning, so a reader can refuse a file it
/// would misread. Files from before it was written have none (0).
pub const SUMMARY_SCHEMA: u32 = 1;

/// What `summary.json` holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunSummary {
    /// The layout's version ([`SUMMARY_SCHEMA`]).
    pub schema: u32,
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
    /// Every link by name, averaged (scenarios with several links only).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, LinkResult>,
    /// Completion times of the sized flows by size class, over every
    /// repetition (absent when no flow has a size).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fct: Vec<FctClass>,
    /// 95% half-widths of utilization, queue delay, fairness.
    pub ci95: BTreeMap<String, f64>,
    /// Repetitions.
    pub repetitions: Vec<RepResult>,
}

/// Why a `summary.json` cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct SummaryError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

impl RunSummary {
    /// Reads `dir/summary.json` into its types: a field of the wrong type
    /// is named, and a file from a newer layout is refused.
    pub fn load(dir: &std::path::Path) -> Result<RunSummary, SummaryError> {
        let p = dir.join("summary.json");
        let err = |problem: String| SummaryError {
            path: p.display().to_string(),
            problem,
        };
        let bytes = std::fs::read(&p).map_err(|e| err(format!("cannot read: {e}")))?;
        let s: RunSummary =
            serde_json::from_slice(&bytes).map_err(|e| err(format!("not a run summary: {e}")))?;
        if s.schema > SUMMARY_SCHEMA {
            return Err(err(format!(
                "written in layout {} by a newer cclab; this one reads layouts up to {SUMMARY_SCHEMA}",
                s.schema
            )));
        }
        Ok(s)
    }
}

/// The completion times of the sized flows of one size class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FctClass {
    /// Sizes above this, bytes ...
    pub above_bytes: u64,
    /// ... and at most this.
    pub up_to_bytes: u64,
    /// Flows of the class, every repetition.
    pub flows: usize,
    /// Those that completed.
    pub completed: usize,
    /// Median, 95th and 99th percentile completion time of those, s
    /// (nearest rank).
    pub p50_s: Option<f64>,
    pub p95_s: Option<f64>,
    pub p99_s: Option<f64>,
    /// Every completion time, ascending (the CDF), s.
    pub fct_s: Vec<f64>,
}

/// The link in a summary.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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

fn is_zero(x: &u64) -> bool {
    *x == 0
}
