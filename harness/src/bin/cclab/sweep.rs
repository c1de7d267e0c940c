//! `cclab sweep`: the sweep file's grid, this shard of it, goes to
//! [`harness::sweep::run_sweep`]; then what was run, skipped or failed.

use std::path::PathBuf;

use harness::link::Backend;
use harness::run::RunConfig;
use harness::sweep::Sweep;

use crate::common::{
    bad_input, bin_dir, jobs, qlog_level, resolve_scenario_backend, stop_flag, QLOG_DEFAULT,
};

#[derive(clap::Args)]
pub struct SweepArgs {
    /// The sweep file (TOML: scenario, grid, repetitions, randomize, seed).
    file: PathBuf,
    /// Output directory (re-running with it finishes what is missing).
    #[arg(long)]
    out: PathBuf,
    /// Backend for every point, overriding the scenario's `link.backend`:
    /// auto, emu, netem or sim.
    #[arg(long)]
    link: Option<String>,
    /// Points run in parallel (each its own link and processes; on a
    /// small machine they compete for CPU). Default: one per core with
    /// `backend = "sim"` (each simulation uses one core), else 1.
    #[arg(long)]
    jobs: Option<usize>,
    /// Take only this shard of the grid: I/N takes points with index % N == I.
    #[arg(long, default_value = "0/1")]
    shard: String,
    /// Skip emu's per-packet logs.
    #[arg(long)]
    no_packet_log: bool,
    /// How much qlog both ends write: off, metrics (no per-packet
    /// events), packets (= core: per-packet events), base, extra.
    /// zstd-compressed unless CCLAB_QLOG_COMPRESS=0.
    #[arg(long, default_value = QLOG_DEFAULT)]
    qlog_level: String,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// `cclab sweep`.
pub fn sweep(a: &SweepArgs) -> anyhow::Result<i32> {
    let mut sw = Sweep::load(&a.file).unwrap_or_else(|e| bad_input(e));
    let shard = harness::sweep::parse_shard(&a.shard).unwrap_or_else(|| {
        bad_input(format!(
            "--shard: `{}` is not I/N with 0 <= I < N, e.g. 0/4",
            a.shard
        ))
    });
    if let Some(b) = &a.link {
        sw.base.link.backend = Backend::parse(b).unwrap_or_else(|| {
            bad_input(format!("--link: `{b}` is not one of auto, emu, netem, sim"))
        });
    }
    let backend = resolve_scenario_backend(&sw.base);
    let jobs = jobs(a.jobs, backend);
    let cfg = RunConfig {
        out: a.out.clone(),
        bin_dir: bin_dir(),
        backend,
        quiet: a.quiet,
        stop: stop_flag()?,
        // Points already run in parallel: one simulation per job.
        threads: if jobs > 1 { 1 } else { 0 },
        qlog_level: qlog_level(&a.qlog_level),
        per_packet_log: !a.no_packet_log,
        emu_mode: harness::emu::EmuMode::Relay,
        netem_router: None,
        count_syscalls: false,
    };
    if !a.quiet {
        eprintln!(
            "cclab sweep: {} point(s) in the grid; shard {}/{}; {} job(s)",
            sw.len(),
            shard.0,
            shard.1,
            jobs
        );
    }
    let r = harness::sweep::run_sweep(&sw, &a.out, shard, jobs, &cfg)?;
    if a.json {
        crate::common::print_json(&r)?;
    } else {
        println!(
            "{}: {} point(s): {} already complete, {} completed now, {} failed{}",
            a.out.display(),
            r.points,
            r.skipped,
            r.completed,
            r.failed,
            if r.interrupted {
                "; interrupted (run again to finish)"
            } else {
                ""
            }
        );
    }
    Ok(if r.interrupted {
        130
    } else if r.failed > 0 {
        1
    } else {
        0
    })
}
