//! `sim`, the virtual-time link: the real quiche stack and application on
//! a discrete-event clock.
//!
//! Every flow is a [`quic_app::client::ClientApp`] and a
//! [`quic_app::server::ServerApp`] (the state machines the `quic-client`
//! and `quic-server` binaries run), with the congestion controller the
//! scenario names. The link is the emulator's own two
//! [`Pipeline`](crate::emu::Pipeline) pipelines (loss, duplication,
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

mod cross;
mod endpoints;
mod event_loop;
mod flow;
mod tls;
mod world;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use quic_app::QlogLevel;

use crate::bottleneck::{packet_log_header, LinkLogs};
use crate::emu::pipeline::Sampler;
use crate::emu::Counters;
use crate::scenario::Scenario;
use world::World;

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
    /// Every link's name and counters, up and down (the first link's
    /// first).
    #[serde(skip)]
    pub links: Vec<(String, [Counters; 2])>,
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
    /// Virtual time stopped advancing: something is due again at once
    /// every time it runs (a simulator or endpoint bug, never a result).
    #[error("virtual time stuck at {at_ms:.3} ms after {steps} steps at that instant: {what}")]
    Stuck {
        /// The instant, ms.
        at_ms: f64,
        /// Steps taken at it.
        steps: u64,
        /// What was due.
        what: String,
    },
}

/// Restores the wall clock on this thread however the run ends.
struct ClockGuard;

impl Drop for ClockGuard {
    fn drop(&mut self) {
        quiche::sim::reset();
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
    let topo = sc.topology().with_seed(cfg.seed);
    let _guard = ClockGuard;
    let base = Instant::now();
    quiche::sim::set_time(base);
    quiche::sim::seed_rng(cfg.seed);
    quiche::sim::set_null_protection(sc.host.protection == crate::scenario::Protection::Null);

    let scenario_event = sc.qlog_event("sim", cfg.seed);
    let flows = flow::flows(cfg, &scenario_event)?;
    let mut logs = LinkLogs::create(cfg.dir, &topo, |i| {
        cfg.per_packet_log
            .then(|| packet_log_header("sim", 0, 0, &topo.links[i].spec))
    })
    .map_err(|e| e.source)?;
    let mut samplers: Vec<Sampler> = topo
        .links
        .iter()
        .map(|_| Sampler::new(100_000_000))
        .collect();
    let mut w = World::new(cfg, &topo, base, flows, scenario_event);
    let end = event_loop::run(&mut w, &mut logs, &mut samplers, cfg.stop, sc.duration_ns)?;
    let mut outcome = SimOutcome {
        simulated_s: end.now as f64 / 1e9,
        events: end.events,
        datagrams: w.datagrams,
        links: w.net.counters(),
        active_s: end.active_end.unwrap_or(end.now) as f64 / 1e9,
        cross: w.cross.iter().map(|c| (c.sent, c.received)).collect(),
        flows: w.flows.iter().map(|f| (f.dir.clone(), f.killed)).collect(),
        ..SimOutcome::default()
    };
    // Closing every connection flushes its qlog.
    drop(w);
    logs.finish().map_err(|e| e.source)?;
    outcome.wall_s = wall.elapsed().as_secs_f64();
    outcome.speedup = outcome.simulated_s / outcome.wall_s.max(1e-9);
    Ok(outcome)
}

#[cfg(test)]
pub(super) mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Datagrams the endpoints built on this thread, and how many
        /// carry the response body in the clear.
        static SEEN: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }

    /// Called by `world::drain` for every datagram an endpoint builds.
    pub(in crate::sim) fn saw_datagram(d: &[u8]) {
        // The server's generated body repeats this 16-byte block; any 16
        // bytes of it in a row are the block at some rotation.
        const BLOCK: &[u8] = b"cclab-bulk-data-";
        let clear = d.windows(BLOCK.len()).any(|w| w == BLOCK);
        SEEN.with(|s| {
            let (n, c) = s.get();
            s.set((n + 1, c + clear as u64));
        });
    }

    /// Runs a 1 MB download with `protection` and returns (datagrams built,
    /// datagrams with the body in the clear).
    fn datagrams_with(protection: &str) -> (u64, u64) {
        let text = format!(
            "name = \"t\"\nduration = \"5s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"20ms\"\nqueue = \"1bdp\"\n[[flows]]\ncc = \"newreno\"\nsize = \"1000000\"\n[host]\nprotection = \"{protection}\"\n"
        );
        let sc = Scenario::parse(&text, "test", std::path::Path::new(".")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        SEEN.with(|s| s.set((0, 0)));
        run_rep(&SimConfig {
            scenario: &sc,
            seed: 1,
            dir: dir.path(),
            per_packet_log: false,
            qlog_level: QlogLevel::Off,
            stop: &stop,
        })
        .unwrap();
        SEEN.with(|s| s.get())
    }

    /// `[host] protection` reaches quiche: with the null cipher the body
    /// crosses the simulated link readable (every full data packet carries
    /// at least one whole 16-byte block of it), with the AEAD never (a
    /// 16-byte match in ciphertext has odds of 2^-128 per position).
    #[test]
    fn the_protection_setting_takes_effect() {
        let (n_null, clear_null) = datagrams_with("null");
        let (n_aead, clear_aead) = datagrams_with("aead");
        eprintln!("null: {clear_null} of {n_null} in the clear; aead: {clear_aead} of {n_aead}");
        // 1 MB in packets of at most 1350 bytes: at least 740 of them.
        assert!(clear_null >= 740, "null: {clear_null} of {n_null}");
        assert_eq!(clear_aead, 0, "aead: {clear_aead} of {n_aead}");
        assert!(n_aead >= 740, "{n_aead}");
    }
}
