//! The results of one repetition from the files every backend writes
//! alike: per flow `client.json` and both ends' qlog, and the bottleneck's
//! counters and `bottleneck-samples.jsonl`.

use std::path::{Path, PathBuf};

use super::results::{
    BottleneckResult, FlowResult, LinkResult, Recovery, RepResult, RttMs, SyscallResult,
};
use crate::bottleneck;
use crate::emu::Counters;
use crate::link::Dir;
use crate::scenario::{tcp, Direction, FlowSpec, Scenario};

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

/// What a backend hands over of one ended repetition, besides its files.
pub(super) struct RepEnd {
    /// The link's seed.
    pub seed: u64,
    /// Every flow, ended.
    pub ended: Vec<EndedFlow>,
    /// Every link's name and counters, up and down, in the topology's
    /// order (emu and sim; none for netem, whose figures come from its
    /// samples).
    pub links: Vec<(String, [Counters; 2])>,
    /// When the last flow ended, s since the start.
    pub active_s: f64,
    /// Cross traffic: bytes sent and received per source.
    pub cross: Vec<(u64, u64)>,
    /// Seconds spent setting up and tearing down.
    pub overhead_s: f64,
    /// The emulator thread's CPU seconds and the seconds it ran.
    pub emu_cpu: Option<(f64, f64)>,
    /// How late the emulator handed packets on.
    pub emu_lateness: Option<crate::emu::Lateness>,
    /// How the emulator's thread was scheduled.
    pub emu_scheduling: Option<String>,
    /// The share of the machine's CPU time that was busy while the flows
    /// ran (`/proc/stat`).
    pub cpu_busy: Option<f64>,
    /// The guest router's CPU share (netem in the guest).
    pub guest_cpu_busy: Option<f64>,
    /// Endpoint processes started through the system call counter (0
    /// when the run does not count).
    pub processes: u32,
}

/// [`collect_rep`] with what the backend measured itself.
pub(super) fn rep_result(sc: &Scenario, rep: u32, dir: &Path, end: RepEnd) -> RepResult {
    let mut r = collect_rep(
        sc,
        rep,
        end.seed,
        dir,
        &end.ended,
        end.links.first().map(|(_, c)| c),
        end.active_s,
    );
    if sc.has_paths() {
        add_paths(sc, &mut r, dir, &end.links, end.active_s);
    }
    r.cross = end.cross;
    r.overhead_s = end.overhead_s;
    r.emu_cpu = end.emu_cpu;
    r.emu_lateness = end.emu_lateness;
    r.emu_scheduling = end.emu_scheduling;
    r.cpu_busy = end.cpu_busy;
    r.guest_cpu_busy = end.guest_cpu_busy;
    r.syscalls = syscall_result(
        &r.flows,
        &dir.join(super::endpoints::SYSCALLS_DIR),
        end.processes,
    );
    r
}

/// The repetition's system call counts (`syscalls/`, where the run
/// counted them) against its senders' data packets; `started` endpoint
/// processes were started through the counter.
fn syscall_result(flows: &[FlowResult], dir: &Path, started: u32) -> Option<SyscallResult> {
    if !dir.is_dir() {
        return None;
    }
    let counts = match crate::syscount::read_dir(dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cclab: warning: {e}");
            Vec::new()
        }
    };
    let mut r = SyscallResult {
        processes: counts.len() as u32,
        missing: started.saturating_sub(counts.len() as u32),
        ..SyscallResult::default()
    };
    for (_, c) in &counts {
        r.calls += c.calls;
        for (n, k) in &c.by_name {
            *r.by_name.entry(n.clone()).or_default() += k;
        }
    }
    let packets: Option<u64> = flows.iter().map(|f| f.data_packets_sent).sum();
    r.data_packets = packets.unwrap_or(0);
    r.per_data_packet =
        (r.missing == 0 && r.data_packets > 0).then(|| r.calls as f64 / r.data_packets as f64);
    Some(r)
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
    counters: Option<&[Counters; 2]>,
    active_s: f64,
) -> RepResult {
    // Each flow as it ran in this repetition: its jittered start.
    let flows = sc.rep_flows(seed);
    let mut results: Vec<FlowResult> = ended
        .iter()
        .map(|c| {
            let (g, f) = &flows[c.flow];
            flow_result(c, *g, f, dir)
        })
        .collect();
    results.sort_by_key(|r| r.index);
    let samples = dir.join("bottleneck-samples.jsonl");
    let rate = sc.link.down.rate_bps;
    let b = bottleneck_result(&flows, &samples, counters, active_s, &sc.link, rate);
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

/// What only scenarios with paths have: each flow's base RTT, and each
/// link's figures (from its counters and samples, [`crate::bottleneck::link_dir`])
/// with Jain's index over the flows that cross it.
fn add_paths(
    sc: &Scenario,
    r: &mut RepResult,
    dir: &Path,
    links: &[(String, [Counters; 2])],
    active_s: f64,
) {
    let topo = sc.topology();
    let routes = sc.routes();
    for f in &mut r.flows {
        if let Some(route) = routes.get(f.index) {
            f.base_rtt_ms = Some(topo.base_rtt_ns(route) as f64 / 1e6);
        }
    }
    if sc.links.is_none() {
        return;
    }
    let flows = sc.rep_flows(r.seed);
    for (i, link) in topo.links.iter().enumerate() {
        let counters = links.get(i).map(|(_, c)| c);
        let samples = bottleneck::link_dir(dir, &topo, i).join("bottleneck-samples.jsonl");
        let rate = link.spec.down.rate_bps;
        let b = bottleneck_result(&flows, &samples, counters, active_s, &link.spec, rate);
        let crossing: Vec<usize> = (0..flows.len())
            .filter(|&k| routes[k].links.contains(&i))
            .collect();
        let g: Vec<f64> = r
            .flows
            .iter()
            .filter(|f| crossing.contains(&f.index))
            .map(|f| f.goodput_bps)
            .collect();
        r.links.insert(
            link.name.clone(),
            LinkResult {
                link: b,
                jain_fairness: qlog_analysis::summary::jain(&g),
                flows: crossing,
            },
        );
    }
}

/// One flow's results: the client's report, then both ends' qlog.
fn flow_result(c: &EndedFlow, group: usize, f: &FlowSpec, dir: &Path) -> FlowResult {
    let report: serde_json::Value = std::fs::read(c.dir.join("client.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    let mut r = FlowResult {
        index: c.flow,
        group,
        cc: f.cc.clone(),
        direction: f.direction.as_str().into(),
        start_s: f.start_ns as f64 / 1e9,
        complete: report["complete"].as_bool().unwrap_or(false),
        bytes: report["bytes"].as_u64().unwrap_or(0),
        goodput_bps: report["goodput_bps"].as_f64().unwrap_or(0.0),
        error: client_error(&report, &c.dir),
        ..FlowResult::default()
    };
    if r.complete && f.has_completion_time() {
        r.fct_s = match (
            report["handshake_ms"].as_f64(),
            report["duration_s"].as_f64(),
        ) {
            (Some(h), Some(d)) => Some(h / 1e3 + d),
            _ => None,
        };
    }
    r.completion_s = report["request_ends_s"]
        .as_array()
        .filter(|e| r.complete && e.len() as u32 == f.requests)
        .and_then(|e| e.last()?.as_f64());
    // A client stopped at the deadline closes its connection and
    // reports "interrupted" (as on Ctrl-C); say why it was stopped.
    if c.killed && r.error.as_deref().is_none_or(|e| e == "interrupted") {
        r.error = Some("still running at the deadline; stopped".into());
    }
    if f.tcp_cc().is_some() {
        add_tcp_figures(&mut r, f.direction, &c.dir, dir);
    } else {
        add_qlog_figures(&mut r, f.direction, &c.dir, dir);
    }
    r
}

/// The records of a Linux TCP flow's sender and receiver in its
/// directory (`tcp-bulk`'s files: the server's and the client's).
fn tcp_sender_and_receiver(flow_dir: &Path, direction: Direction) -> (PathBuf, PathBuf) {
    let server = flow_dir.join(super::endpoints::TCP_SERVER_FILE);
    let client = flow_dir.join(super::endpoints::TCP_CLIENT_FILE);
    match direction {
        Direction::Download => (server, client),
        Direction::Upload => (client, server),
    }
}

/// The final `TCP_INFO` of an end: its `end` record's, else its last
/// sample's.
fn tcp_final_info(records: &[serde_json::Value]) -> Option<&serde_json::Value> {
    records.iter().rev().find_map(|r| match r["type"].as_str() {
        Some("end") if r["info"].is_object() => Some(&r["info"]),
        Some("sample") => Some(r),
        _ => None,
    })
}

/// A Linux TCP flow's figures, from the records `tcp-bulk` wrote: from
/// the sender's samples, RTT (smoothed RTT sampled every 10 ms; minimum
/// from `tcpi_min_rtt`), cwnd (segments × MSS, time-weighted), the
/// retransmitted segments and the mean payload per data segment; from the
/// receiver's final `TCP_INFO`, the bytes that reached it as IP packets
/// (payload + IP and TCP headers of each data segment) and its ACKs per
/// data segment. Both files' paths relative to the run.
fn add_tcp_figures(r: &mut FlowResult, direction: Direction, flow_dir: &Path, rep_dir: &Path) {
    let (sender, receiver) = tcp_sender_and_receiver(flow_dir, direction);
    let rel = |p: &Path| {
        p.strip_prefix(rep_dir.parent().unwrap_or(rep_dir))
            .unwrap_or(p)
            .display()
            .to_string()
    };
    let tx = tcp::read_records(&sender);
    if !tx.is_empty() {
        r.tcp_records.insert("sender".into(), rel(&sender));
    }
    let samples = tcp::sender_samples(&tx);
    let rtts: Vec<f64> = samples
        .iter()
        .map(|s| s.srtt_ms)
        .filter(|&x| x > 0.0)
        .collect();
    if !rtts.is_empty() {
        let mut sorted = rtts.clone();
        sorted.sort_by(f64::total_cmp);
        let p95 =
            sorted[((0.95 * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)];
        let min = samples
            .iter()
            .filter_map(|s| s.min_rtt_ms)
            .fold(f64::INFINITY, f64::min);
        r.rtt_ms = Some(RttMs {
            min: if min.is_finite() { min } else { sorted[0] },
            mean: rtts.iter().sum::<f64>() / rtts.len() as f64,
            p95,
        });
    }
    if let Some((mean, cv)) = time_weighted(&samples) {
        r.cwnd_mean = Some(mean);
        r.cwnd_cv = Some(cv);
    }
    if let Some(info) = tcp_final_info(&tx) {
        r.retransmitted_packets = info["total_retrans"].as_u64();
        r.data_packets_sent = info["data_segs_out"].as_u64();
        if let (Some(b), Some(n)) = (info["bytes_sent"].as_f64(), info["data_segs_out"].as_f64()) {
            if n > 0.0 {
                r.data_packet_bytes_mean = Some(b / n);
            }
        }
    }
    let rx = tcp::read_records(&receiver);
    if !rx.is_empty() {
        r.tcp_records.insert("receiver".into(), rel(&receiver));
    }
    if let Some(info) = tcp_final_info(&rx) {
        let segs = info["data_segs_in"].as_u64().unwrap_or(0);
        let hdr = info["header_bytes"].as_u64().unwrap_or(40);
        r.wire_bytes_received = info["bytes_received"].as_u64().unwrap_or(0) + segs * hdr;
        let acks = info["segs_out"]
            .as_u64()
            .zip(info["data_segs_out"].as_u64())
            .map(|(o, d)| o.saturating_sub(d));
        if let (Some(a), true) = (acks, segs > 0) {
            r.acks_per_data_packet = Some(a as f64 / segs as f64);
        }
    }
}

/// The time-weighted mean of the samples' cwnd (each holds until the
/// next) and its coefficient of variation.
fn time_weighted(samples: &[tcp::Sample]) -> Option<(f64, f64)> {
    let (mut w, mut sum, mut sq) = (0.0, 0.0, 0.0);
    for p in samples.windows(2) {
        let dt = p[1].t_s - p[0].t_s;
        if dt > 0.0 {
            w += dt;
            sum += p[0].cwnd_bytes * dt;
            sq += p[0].cwnd_bytes * p[0].cwnd_bytes * dt;
        }
    }
    if w <= 0.0 {
        return samples.first().map(|s| (s.cwnd_bytes, 0.0));
    }
    let mean = sum / w;
    let var = (sq / w - mean * mean).max(0.0);
    Some((mean, if mean > 0.0 { var.sqrt() / mean } else { 0.0 }))
}

/// The client's error: its report's, or without a report its stderr.
fn client_error(report: &serde_json::Value, flow_dir: &Path) -> Option<String> {
    report["error"].as_str().map(str::to_string).or_else(|| {
        if report.is_null() {
            Some(
                std::fs::read_to_string(flow_dir.join("client.stderr"))
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            )
        } else {
            None
        }
    })
}

/// The first file in `listing` whose name starts with `prefix`.
fn first_named(listing: &[PathBuf], prefix: &str) -> Option<PathBuf> {
    listing
        .iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .cloned()
}

/// The sender's and the receiver's qlog in a flow's directory.
fn sender_and_receiver_qlog(
    flow_dir: &Path,
    direction: Direction,
) -> (Option<PathBuf>, Option<PathBuf>) {
    let mut listing: Vec<PathBuf> = std::fs::read_dir(flow_dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    listing.sort();
    let client_qlog = first_named(&listing, "client-");
    let server_qlog = first_named(&listing, "server-");
    match direction {
        Direction::Download => (server_qlog, client_qlog),
        Direction::Upload => (client_qlog, server_qlog),
    }
}

/// RTT, losses and cwnd from the sender's qlog, goodput and wire bytes
/// from the receiver's; both files' paths relative to the run.
fn add_qlog_figures(r: &mut FlowResult, direction: Direction, flow_dir: &Path, rep_dir: &Path) {
    let (sender, receiver) = sender_and_receiver_qlog(flow_dir, direction);
    let rel = |p: &Path| {
        p.strip_prefix(rep_dir.parent().unwrap_or(rep_dir))
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
        r.lost_packets = Some(s.loss.packets);
        // The rate needs the packets sent, which only a qlog with
        // per-packet events counts.
        r.loss_rate = (s.packets.data_packets > 0).then_some(s.loss.rate);
        r.data_packets_sent = (s.packets.data_packets > 0).then_some(s.packets.data_packets);
        r.cwnd_mean = s.cwnd.as_ref().map(|c| c.mean);
        r.cwnd_cv = s.cwnd.as_ref().map(|c| c.cv);
        r.slow_start = s.slow_start.clone();
        r.metrics_last = s.metrics_last.clone();
        if s.packets.data_packets > 0 {
            r.data_packet_bytes_mean = Some(s.packets.data_mean_bytes);
            r.data_packet_small_share = Some(s.packets.data_small_share);
        }
    }
    if let Some(p) = &receiver {
        r.qlog.insert("receiver".into(), rel(p));
    }
    if let Some(s) = fs_receiver.as_ref().and_then(|fs| fs.connections.first()) {
        r.qlog_goodput_bps = s.goodput.as_ref().map(|g| g.mean_bps);
        r.wire_bytes_received = s.wire_bytes.1;
        r.acks_per_data_packet = s.packets.acks_per_data_packet;
    }
}

/// The direction that carried the data: down unless most flows upload.
fn data_direction(flows: &[(usize, FlowSpec)]) -> Dir {
    let downs = flows
        .iter()
        .filter(|(_, f)| f.direction == Direction::Download)
        .count();
    if downs * 2 >= flows.len() {
        Dir::Down
    } else {
        Dir::Up
    }
}

/// A link, in the direction that carried the data, from its counters (emu,
/// sim) and its samples file; `rate_bps` (its down rate) turns netem's
/// sampled backlog into a delay.
fn bottleneck_result(
    flows: &[(usize, FlowSpec)],
    samples_file: &Path,
    counters: Option<&[Counters; 2]>,
    active_s: f64,
    link: &crate::link::LinkSpec,
    rate_bps: f64,
) -> BottleneckResult {
    let d = data_direction(flows);
    let mut b = BottleneckResult {
        direction: d.as_str().into(),
        ..BottleneckResult::default()
    };
    if let Some(cs) = counters {
        from_counters(&mut b, if d == Dir::Down { &cs[1] } else { &cs[0] });
    }
    let first_start = flows.iter().map(|(_, f)| f.start_ns).min().unwrap_or(0) as f64 / 1e9;
    if let Ok(samples) = bottleneck::read_samples(samples_file) {
        if let Some(u) = utilization(&samples, d, first_start, active_s) {
            b.utilization = u;
        }
        if active_s - first_start > STEADY_MIN_S {
            b.utilization_steady = utilization(&samples, d, first_start + STEADY_SKIP_S, active_s);
        }
        if counters.is_none() {
            from_samples(&mut b, &samples, d, rate_bps);
        }
        b.recoveries = recoveries(&samples, d, &link.dir(d).changes, active_s);
        let applied = samples_file.with_file_name(crate::netem::changes::LOG);
        if let Ok(text) = std::fs::read_to_string(applied) {
            lateness(&mut b.recoveries, &text, d);
        }
    }
    b
}

/// Each change's `late_ms` from netem's log of when its changes took
/// effect ([`crate::netem::changes::Applied`]), matched by time and
/// direction.
fn lateness(recoveries: &mut [Recovery], log: &str, d: Dir) {
    for a in crate::netem::changes::Applied::read(log) {
        if a.dir != d.as_str() {
            continue;
        }
        if let Some(r) = recoveries
            .iter_mut()
            .find(|r| (r.at_s - a.at_s).abs() < 1e-6)
        {
            r.late_ms = Some(((a.applied_s - a.at_s) * 1e3).max(0.0));
        }
    }
}

/// A change counts as recovered from once the link has carried at least
/// this share of the capacity in force ...
pub const RECOVERED_UTILIZATION: f64 = 0.9;
/// ... in every sample of this long a stretch, s.
pub const RECOVERED_FOR_S: f64 = 0.5;

/// Each scheduled change of direction `d` (every repetition of one with
/// `every`) up to 0.5 s before `active_s`, and how long after it the link was back to
/// carrying at least 90% of the capacity then in force, for at least
/// 0.5 s: the start of the first sample of that stretch, less the
/// change's time (to the samples' interval, 100 ms by default). None when
/// that never happened before the next change or the run's end.
fn recoveries(
    samples: &[bottleneck::Sample],
    d: Dir,
    changes: &[crate::link::changes::Change],
    active_s: f64,
) -> Vec<Recovery> {
    let mine: Vec<&bottleneck::Sample> = samples.iter().filter(|s| s.dir == d.as_str()).collect();
    let end_ns = (active_s * 1e9) as u64;
    let mut times: Vec<(u64, String)> = changes
        .iter()
        .flat_map(|c| {
            let what = describe_change(c);
            // A time less than RECOVERED_FOR_S before the run's end leaves
            // no room to see a recovery: it is left out, not "never".
            let last = end_ns.saturating_sub((RECOVERED_FOR_S * 1e9) as u64);
            c.times_until(last).map(move |t| (t, what.clone()))
        })
        .collect();
    times.sort_by_key(|t| t.0);
    let mut out = Vec::new();
    for (k, (t_ns, what)) in times.iter().enumerate() {
        let at = *t_ns as f64 / 1e9;
        let until = times.get(k + 1).map_or(active_s, |n| n.0 as f64 / 1e9);
        let window: Vec<&&bottleneck::Sample> = mine
            .iter()
            .filter(|s| s.t_s - s.interval_s >= at - 1e-6 && s.t_s <= until + 1e-6)
            .collect();
        let mut recovery_s = None;
        for (i, s) in window.iter().enumerate() {
            let start = s.t_s - s.interval_s;
            let mut held = 0.0;
            for x in &window[i..] {
                if x.utilization < RECOVERED_UTILIZATION {
                    break;
                }
                held += x.interval_s;
            }
            if held >= RECOVERED_FOR_S - 1e-6 {
                // To the microsecond: the samples' times are sums of floats.
                recovery_s = Some(((start - at).max(0.0) * 1e6).round() / 1e6);
                break;
            }
        }
        out.push(Recovery {
            at_s: at,
            change: what.clone(),
            recovery_s,
            late_ms: None,
        });
    }
    out
}

/// A change in a few words: `rate 5mbit`, `outage 1s`, ...
fn describe_change(c: &crate::link::changes::Change) -> String {
    let t = c.to_toml();
    t.iter()
        .filter(|(k, _)| *k != "at" && *k != "every")
        .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The bottleneck's figures from the link's own counters (emu and sim).
fn from_counters(b: &mut BottleneckResult, c: &Counters) {
    b.drops = c.drops();
    b.bytes = c.sent_bytes;
    b.queue_delay_ms_mean = if c.sent_packets > 0 {
        c.sojourn_ns_total as f64 / c.sent_packets as f64 / 1e6
    } else {
        0.0
    };
    // The first reasons are always listed; the newer ones (DualPI2's)
    // when they happened, so results without them are unchanged.
    for (i, r) in crate::emu::DropReason::ALL.into_iter().enumerate() {
        let n = c.dropped_by(r);
        if i < crate::emu::DropReason::ALWAYS_LISTED || n > 0 {
            b.drops_by_reason.insert(r.as_str().into(), n);
        }
    }
    b.marks = c.marks();
    for r in link_model::elements::MarkReason::ALL {
        let n = c.marked_by(r);
        if n > 0 {
            b.marks_by_reason.insert(r.as_str().into(), n);
        }
    }
    b.loss_rate = (c.arrived_bytes > 0).then(|| c.dropped_bytes as f64 / c.arrived_bytes as f64);
}

/// `utilization_steady` leaves out this much after the first flow's start
/// (the handshake and the first slow start: part of the flows, not of the
/// link's steady use), s.
pub const STEADY_SKIP_S: f64 = 1.0;
/// ... and exists only for runs longer than this, s.
pub const STEADY_MIN_S: f64 = 5.0;

/// Utilization from `from` (s) to `active_s`, from the samples that lie
/// wholly inside: the capacity-weighted mean (bits sent over bits the link
/// could carry) where the samples carry their capacity (a trace, rate
/// changes or pauses), else the time-weighted mean (the same on a link of
/// one rate). A sample that closes just after a pause has almost no
/// capacity and may read far above 1; weighted by its capacity it counts
/// for the few bits it is.
fn utilization(samples: &[bottleneck::Sample], d: Dir, from: f64, active_s: f64) -> Option<f64> {
    // Sample boundaries are not aligned with `from`: allow a sample that
    // starts within a microsecond of it.
    let inside: Vec<&bottleneck::Sample> = samples
        .iter()
        .filter(|s| s.dir == d.as_str())
        .filter(|s| s.t_s - s.interval_s >= from - 1e-6 && s.t_s <= active_s + 1e-6)
        .collect();
    let by_capacity = !inside.is_empty() && inside.iter().all(|s| s.capacity_bits.is_some());
    let (mut num, mut den) = (0.0, 0.0);
    for s in inside {
        let w = match s.capacity_bits {
            Some(c) if by_capacity => c,
            _ => s.interval_s,
        };
        num += s.utilization * w;
        den += w;
    }
    (den > 0.0).then(|| num / den)
}

/// The bottleneck's figures from its samples alone (netem, whose qdiscs
/// give counters, not per-packet times): bytes sent, drops, loss rate in
/// packets (drops / (sent + drops): tc counts dropped packets, not bytes),
/// and mean queueing delay as the backlog each sample saw, drained at the
/// link's rate, weighted by the packets sent in its interval (the delay
/// those packets met, as emu's per-packet sojourn mean).
/// The rate a sample's backlog drains at is the rate in force over its
/// interval: its capacity over its length where the capacity moves
/// ([`bottleneck::Sample::capacity_bits`]), else `rate_bps`.
fn from_samples(b: &mut BottleneckResult, samples: &[bottleneck::Sample], d: Dir, rate_bps: f64) {
    let mine = || samples.iter().filter(|s| s.dir == d.as_str());
    b.drops = mine().map(|s| s.drops_total).max().unwrap_or(0);
    b.marks = mine().map(|s| s.marks_total).max().unwrap_or(0);
    b.bytes = mine().map(|s| s.sent_bytes).sum();
    let packets: u64 = mine().map(|s| s.sent_packets).sum();
    b.loss_rate = (packets + b.drops > 0).then(|| b.drops as f64 / (packets + b.drops) as f64);
    if packets > 0 && rate_bps > 0.0 {
        let weighted: f64 = mine()
            .map(|s| {
                let rate = match s.capacity_bits {
                    Some(c) if s.interval_s > 0.0 => c / s.interval_s,
                    _ => rate_bps,
                };
                s.queue_bytes as f64 * 8.0 / rate.max(1.0) * s.sent_packets as f64
            })
            .sum();
        b.queue_delay_ms_mean = weighted / packets as f64 * 1e3;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of 100 ms in the down direction with these utilizations.
    fn samples(u: &[f64]) -> Vec<bottleneck::Sample> {
        u.iter()
            .enumerate()
            .map(|(i, &u)| bottleneck::Sample {
                t_s: (i + 1) as f64 * 0.1,
                dir: "down".into(),
                interval_s: 0.1,
                utilization: u,
                ..Default::default()
            })
            .collect()
    }

    fn change(toml_text: &str) -> Vec<crate::link::changes::Change> {
        let t: toml::Table = toml_text.parse().unwrap();
        crate::link::LinkSpec::from_toml(&t, Path::new("."), "link")
            .unwrap()
            .down
            .changes
    }

    #[test]
    fn a_backlog_drains_at_the_rate_its_sample_carries() {
        // 62,500 queued bytes: 100 ms at the 5 Mbit/s a sample's capacity
        // says (500,000 bits in 100 ms), 25 ms at the link's 20 Mbit/s.
        let mut s = samples(&[1.0]);
        s[0].queue_bytes = 62_500;
        s[0].sent_packets = 10;
        let mut b = BottleneckResult::default();
        from_samples(&mut b, &s, Dir::Down, 20e6);
        assert!(
            (b.queue_delay_ms_mean - 25.0).abs() < 1e-9,
            "{}",
            b.queue_delay_ms_mean
        );
        s[0].capacity_bits = Some(5e5);
        from_samples(&mut b, &s, Dir::Down, 20e6);
        assert!(
            (b.queue_delay_ms_mean - 100.0).abs() < 1e-9,
            "{}",
            b.queue_delay_ms_mean
        );
    }

    #[test]
    fn utilization_weighs_samples_by_their_capacity_where_they_carry_it() {
        // 100 ms samples: two at 90% of 2 Mbit, one wholly paused, one that
        // closed 1 µs after the pause's end (2 bits of capacity, one
        // 1,200-byte packet: 4,800 "percent").
        let mut s = samples(&[0.9, 0.0, 4800.0, 0.9]);
        for (x, cap) in s.iter_mut().zip([2e5, 0.0, 2.0, 2e5]) {
            x.capacity_bits = Some(cap);
        }
        let u = utilization(&s, Dir::Down, 0.0, 1.0).unwrap();
        let want = (0.9 * 2e5 * 2.0 + 4800.0 * 2.0) / (4e5 + 2.0);
        assert!((u - want).abs() < 1e-12, "{u} vs {want}");
        assert!(u < 1.0, "{u}");
        // Without capacities: the time-weighted mean, as before.
        for x in &mut s {
            x.capacity_bits = None;
        }
        let u = utilization(&s, Dir::Down, 0.0, 1.0).unwrap();
        assert!((u - (0.9 + 0.0 + 4800.0 + 0.9) / 4.0).abs() < 1e-9, "{u}");
        // A window with no capacity at all has no utilization.
        let mut p = samples(&[0.0, 0.0]);
        for x in &mut p {
            x.capacity_bits = Some(0.0);
        }
        assert_eq!(utilization(&p, Dir::Down, 0.0, 1.0), None);
    }

    #[test]
    fn recovery_is_the_start_of_the_first_half_second_at_ninety_percent() {
        // A change at 0.3 s; the link carries 95% up to it, then little,
        // a single good sample at 0.6-0.7 s (too short), and from 0.9 s
        // on 90% or more: recovered 0.6 s after the change.
        let u = [
            0.95, 0.95, 0.95, 0.1, 0.2, 0.5, 0.95, 0.3, 0.6, 0.9, 0.92, 0.99, 0.95, 0.91, 0.97,
        ];
        let c = change("[[changes]]\nat = \"300ms\"\nrate = \"5mbit\"\n");
        let r = recoveries(&samples(&u), Dir::Down, &c, 1.5);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].change, "rate 5mbit");
        assert_eq!(r[0].recovery_s, Some(0.6));
        // The same link that never holds 90% for 0.5 s: no recovery.
        let u = [0.95, 0.95, 0.95, 0.1, 0.95, 0.95, 0.95, 0.95, 0.5, 0.95];
        let r = recoveries(&samples(&u), Dir::Down, &c, 1.0);
        assert_eq!(r[0].recovery_s, None);
        // A repeating outage: each occurrence is judged until the next.
        let c = change("[[changes]]\nat = \"200ms\"\nevery = \"1s\"\noutage = \"100ms\"\n");
        let mut u = vec![1.0; 20];
        u[2] = 0.0;
        u[12] = 0.0;
        u[13] = 0.5;
        let r = recoveries(&samples(&u), Dir::Down, &c, 2.0);
        let got: Vec<(f64, Option<f64>)> = r.iter().map(|x| (x.at_s, x.recovery_s)).collect();
        assert_eq!(got, vec![(0.2, Some(0.1)), (1.2, Some(0.2))]);
        // The other direction's changes are not this one's.
        assert!(recoveries(&samples(&u), Dir::Up, &c, 2.0)
            .iter()
            .all(|x| x.recovery_s.is_none()));
    }

    #[test]
    fn netems_log_says_how_late_each_change_took_effect() {
        let c = change("[[changes]]\nat = \"200ms\"\nevery = \"1s\"\noutage = \"100ms\"\n");
        let mut r = recoveries(&samples(&[1.0; 20]), Dir::Down, &c, 2.0);
        let log = concat!(
            "{\"at_s\":0.2,\"applied_s\":0.2034,\"dir\":\"down\",\"what\":\"outage\",\"commands\":[]}\n",
            "{\"at_s\":1.2,\"applied_s\":1.2091,\"dir\":\"up\",\"what\":\"outage\",\"commands\":[]}\n",
            "not json\n",
        );
        lateness(&mut r, log, Dir::Down);
        let late: Vec<Option<f64>> = r
            .iter()
            .map(|x| x.late_ms.map(|l| (l * 10.0).round() / 10.0))
            .collect();
        // The up line is the other direction's; the second time has none.
        assert_eq!(late, vec![Some(3.4), None]);
    }
}
