//! What both ways of feeding the emulator share ([`super::relay`], UDP
//! sockets; [`super::tunnel`], TUN devices): the links and their logs on
//! the emulator's clock, the samples, the lateness of hand-offs, and the
//! sleep until the next event (`ppoll` with a 1 ns timer slack; while the
//! link is busy at most one wake-up per [`EmuConfig::wake_gap`], else one
//! per event, the last 20 µs spinning).

use std::sync::Mutex;

use super::config::{EmuConfig, EmuError, EmuReport, Lateness, Snapshot};
use super::packet::Packet;
use super::pipeline::Sampler;
use super::{monotonic_ns, thread_cpu_ns};
use crate::bottleneck::{packet_log_header, LinkLogs};
use crate::link::Dir;
use link_model::topology::{Network, Topology};

const SPIN_NS: u64 = 20_000;
const MAX_SLEEP_NS: u64 = 10_000_000;
/// How long the packet count that decides whether to batch runs.
const BUSY_WINDOW_NS: u64 = 10_000_000;

/// A histogram of hand-off lateness in 1 µs buckets up to 100 ms.
struct LateHist {
    buckets: Vec<u64>,
    max: u64,
}

impl LateHist {
    fn add(&mut self, ns: u64) {
        let i = ((ns / 1000) as usize).min(self.buckets.len() - 1);
        self.buckets[i] += 1;
        self.max = self.max.max(ns);
    }
    fn quantile(&self, q: f64) -> f64 {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let want = (q * total as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= want {
                return i as f64 + 0.5;
            }
        }
        self.buckets.len() as f64
    }
}

/// Ns on `CLOCK_MONOTONIC` since `start`.
pub(super) fn since(start: u64) -> u64 {
    monotonic_ns().saturating_sub(start)
}

/// The topology the emulator runs: the configured one, or its one link.
pub(super) fn topology(cfg: &EmuConfig) -> Topology {
    match &cfg.topology {
        Some((t, _)) => t.clone(),
        None => Topology::single(cfg.link.clone()),
    }
}

/// Every link's files under `cfg.log_dir` (none without one), their
/// headers naming the emulator's start on both clocks.
pub(super) fn create_logs(
    cfg: &EmuConfig,
    topo: &Topology,
    start_unix: u64,
    start_mono: u64,
) -> Result<LinkLogs, EmuError> {
    Ok(match &cfg.log_dir {
        Some(dir) => LinkLogs::create(dir, topo, |i| {
            cfg.per_packet_log
                .then(|| packet_log_header("emu", start_unix, start_mono, &topo.links[i].spec))
        })?,
        None => LinkLogs::none(),
    })
}

/// The links on the emulator's clock, their logs and samples.
pub(super) struct LinkCore {
    /// `CLOCK_MONOTONIC` at time 0 of the link.
    pub start_mono: u64,
    /// Every link's files.
    pub logs: LinkLogs,
    /// Every link and the way each route crosses them.
    pub net: Network,
    /// Packets that reached the end of their route, from [`LinkCore::advance`].
    pub out: Vec<(u64, Dir, Packet)>,
    samplers: Vec<Sampler>,
    late: LateHist,
    sink_err: Option<EmuError>,
    cpu0: u64,
    /// What the thread's scheduling request got ([`EmuConfig::priority`]).
    scheduling: String,
    /// [`EmuConfig::wake_gap`], ns.
    wake_gap: u64,
    /// When the last wait ended.
    last_wake: u64,
    /// Whether the link is busy enough to batch: more than one packet
    /// (arriving or handed on) per wake gap over the last window.
    batching: bool,
    /// The current window's start and its packets.
    window_start: u64,
    window_packets: u64,
}

impl LinkCore {
    /// The links of `topo` as `cfg` describes them, time 0 at `start_mono`.
    pub fn new(cfg: &EmuConfig, topo: &Topology, logs: LinkLogs, start_mono: u64) -> LinkCore {
        let paths = cfg.topology.as_ref().map_or(&[][..], |(_, p)| &p[..]);
        LinkCore {
            net: Network::new(topo, paths, cfg.mtu, &cfg.class_weights),
            samplers: topo
                .links
                .iter()
                .map(|_| Sampler::new(cfg.sample_interval.as_nanos() as u64))
                .collect(),
            start_mono,
            logs,
            out: Vec::new(),
            late: LateHist {
                buckets: vec![0; 100_000],
                max: 0,
            },
            sink_err: None,
            cpu0: thread_cpu_ns(),
            scheduling: cfg.priority.apply(),
            wake_gap: cfg.wake_gap.as_nanos() as u64,
            last_wake: 0,
            batching: false,
            window_start: 0,
            window_packets: 0,
        }
    }

    /// Ns since time 0.
    pub fn now(&self) -> u64 {
        since(self.start_mono)
    }

    /// Runs the links up to `t`; what they deliver is in [`LinkCore::out`].
    pub fn advance(&mut self, t: u64) {
        self.net.advance(t, &mut self.logs, &mut self.out);
    }

    /// A packet enters its route going `d` at `t`.
    pub fn push(&mut self, d: Dir, pkt: Packet, t: u64) {
        self.window_packets += 1;
        self.net.push(d, pkt, t, &mut self.logs);
    }

    /// One packet was handed on now; it was due at `due`.
    pub fn handed_off(&mut self, due: u64) {
        self.window_packets += 1;
        let now = self.now();
        self.late.add(now.saturating_sub(due));
    }

    /// Samples every link when a sample is due at `t`, into its samples
    /// file and the snapshot progress displays read (`flows` seen so far);
    /// true when it sampled.
    pub fn sample(&mut self, t: u64, flows: usize, snapshot: &Mutex<Snapshot>) -> bool {
        if t < self.samplers[0].next_due() {
            return false;
        }
        for (i, sampler) in self.samplers.iter_mut().enumerate() {
            for s in sampler.take(t, &self.net.links[i].dirs) {
                if let Err(e) = self.logs.sample(i, &s) {
                    self.sink_err.get_or_insert(EmuError::Log {
                        path: "bottleneck-samples.jsonl".into(),
                        source: e,
                    });
                }
            }
        }
        let snap = Snapshot {
            t_s: t as f64 / 1e9,
            flows,
            up: self.net.first()[0].counters.clone(),
            down: self.net.first()[1].counters.clone(),
        };
        if let Ok(mut s) = snapshot.lock() {
            *s = snap;
        }
        true
    }

    /// Sleeps until the links' next event, the next sample or one of
    /// `pollfds` is readable (at most 10 ms); while packets come and go
    /// faster than one per [`EmuConfig::wake_gap`] (counted over 10 ms),
    /// not before the gap has passed since the last wake-up, else waking
    /// 20 µs early and spinning the rest; `ppoll`'s result.
    pub fn wait(&mut self, pollfds: &mut [libc::pollfd]) -> libc::c_int {
        let mut t = self.now();
        // Batch only while packets come faster than one per gap (a busy
        // link); a quieter one is served event by event.
        let batching = self.batching;
        if batching && t < self.last_wake + self.wake_gap {
            // Too soon after the last wake-up: nap without watching the
            // sockets (what arrives meanwhile carries the kernel's stamp),
            // so that one wake-up serves every event of the gap.
            let until = self.start_mono + self.last_wake + self.wake_gap;
            let ts = libc::timespec {
                tv_sec: (until / 1_000_000_000) as libc::time_t,
                tv_nsec: (until % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: a valid timespec; no remainder is asked for.
            unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
            t = self.now();
        }
        let spin = if batching { 0 } else { SPIN_NS };
        let next = self
            .net
            .next_event()
            .unwrap_or(u64::MAX)
            .min(self.samplers[0].next_due())
            .min(t + MAX_SLEEP_NS);
        let sleep = next.saturating_sub(t).saturating_sub(spin);
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: pollfds is a valid array of initialised pollfd structs.
        let r = unsafe {
            libc::ppoll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        let now = self.now();
        self.last_wake = now;
        let span = now.saturating_sub(self.window_start);
        if span >= BUSY_WINDOW_NS {
            self.batching = self.wake_gap > 0 && self.window_packets * self.wake_gap > span;
            self.window_start = now;
            self.window_packets = 0;
        }
        r
    }

    /// What the emulator did (`flows` seen, datagrams it could not send),
    /// its logs finished.
    pub fn finish(self, flows: usize, send_errors: u64) -> Result<EmuReport, EmuError> {
        let end = self.now();
        let mut report = EmuReport {
            duration_s: end as f64 / 1e9,
            cpu_s: thread_cpu_ns().saturating_sub(self.cpu0) as f64 / 1e9,
            flows,
            up: self.net.first()[0].counters.clone(),
            down: self.net.first()[1].counters.clone(),
            links: self.net.counters(),
            lateness: Lateness {
                p50_us: self.late.quantile(0.5),
                p99_us: self.late.quantile(0.99),
                max_us: self.late.max as f64 / 1000.0,
            },
            send_errors,
            log_records: 0,
            ip: None,
            scheduling: self.scheduling.clone(),
        };
        report.log_records = self.logs.finish()?;
        if let Some(e) = self.sink_err {
            return Err(e);
        }
        Ok(report)
    }
}
