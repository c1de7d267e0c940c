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
//!
//! A run reads as its data flow, each step in a module of its own:
//!
//! 1. `result_dir`: the work directory, its scenario, metadata and status;
//! 2. per repetition, on `emu` and `netem` (`processes`): prepare the
//!    link (`rep_link`), start the endpoints (`endpoints`), wait for
//!    the flows, stop everything; on `sim` (`simulated`) the simulator
//!    does all of that in virtual time;
//! 3. `collect`: the repetition's results from the files every backend
//!    writes alike;
//! 4. `summary`: the averages over repetitions, `summary.json`.

mod collect;
mod cpu;
mod endpoints;
mod processes;
mod rep_link;
mod result_dir;
mod results;
mod simulated;
mod summary;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::link::Backend;
use crate::scenario::Scenario;

pub use collect::{collect_rep, EndedFlow};
pub use result_dir::{metadata, now_rfc3339, partial_dir};
pub use results::{
    BottleneckResult, FctClass, FlowResult, FlowSummary, LinkResult, LinkSummary, Recovery,
    RepResult, RttMs, RunSummary, SummaryError, SyscallResult, SUMMARY_SCHEMA,
};
pub use summary::{mean_ci, summarize};

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
    /// On emu, how packets reach the emulator: the UDP relay, or whole IP
    /// packets through TUN devices between two namespaces (root; any
    /// IPv4 traffic). Ignored by netem and sim.
    pub emu_mode: crate::emu::EmuMode,
    /// On netem, whether the link runs in the user-mode Linux guest as a
    /// router (`Some(true)`), in this host's kernel (`Some(false)`), or
    /// as [`crate::guest_router::wanted`] decides (`None`: the guest
    /// where this kernel has no netem, or `CCLAB_NETEM_ROUTER`).
    pub netem_router: Option<bool>,
    /// Start every endpoint through `cclab-syscount`, which counts its
    /// system calls (every thread, exec to exit; `rep-N/syscalls/`), and
    /// report them per data packet (`RepResult::syscalls`). Real links
    /// only: the simulator has no processes and ignores it.
    pub count_syscalls: bool,
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
    /// The guest router (netem on a host without it).
    #[error(transparent)]
    Guest(#[from] crate::guest_router::GuestError),
    /// The simulator failed.
    #[error(transparent)]
    Sim(crate::sim::SimError),
    /// Stopped by the user.
    #[error("interrupted")]
    Interrupted,
    /// The backend cannot run what the scenario asks for.
    #[error("{0}")]
    Unsupported(String),
}

impl From<crate::backend::BackendError> for RunError {
    fn from(e: crate::backend::BackendError) -> RunError {
        use crate::backend::BackendError as B;
        match e {
            B::Unsupported(m) => RunError::Unsupported(m),
            B::Netem(e) => RunError::Netem(e),
            B::Emu(e) => RunError::Emu(e),
        }
    }
}

impl From<crate::sim::SimError> for RunError {
    fn from(e: crate::sim::SimError) -> RunError {
        match e {
            crate::sim::SimError::Interrupted => RunError::Interrupted,
            e => RunError::Sim(e),
        }
    }
}

/// The repetitions a run got through, and why it stopped early, if it did.
type Reps = (Vec<RepResult>, Option<RunError>);

/// Runs a scenario; returns its summary (also written to `OUT/summary.json`).
pub fn run(sc: &Scenario, cfg: &RunConfig) -> Result<RunSummary, RunError> {
    crate::backend::check(sc, cfg.backend)?;
    crate::backend::check_emu_mode(sc, cfg.backend, cfg.emu_mode)?;
    let bins = endpoints::Binaries::find(cfg)?;
    let work = result_dir::WorkDir::start(sc, cfg)?;
    let (reps, failure) = match cfg.backend {
        Backend::Sim => simulated::run_reps(sc, cfg, work.path()),
        _ => processes::run_reps(sc, cfg, work.path(), &bins),
    };
    let status = match &failure {
        None => "complete",
        Some(RunError::Interrupted) => "interrupted",
        Some(_) => "failed",
    };
    let summary = summarize(sc, cfg.backend, status, reps);
    work.finish(&cfg.out, status, &summary, failure.as_ref())?;
    match failure {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// Repetition `rep`'s seed: the link's, and every random choice of the
/// repetition's (start jitter, the simulator's quiche).
fn rep_seed(sc: &Scenario, rep: u32) -> u64 {
    sc.seed + rep as u64 - 1
}
