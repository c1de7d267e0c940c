//! Repetitions on `sim`: the simulator runs the link and the endpoints in
//! virtual time ([`crate::sim`]); what it leaves is collected as any
//! backend's.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use super::collect::{rep_result, EndedFlow, RepEnd};
use super::results::RepResult;
use super::{rep_seed, Reps, RunConfig, RunError};
use crate::files::write_json_atomic;
use crate::scenario::Scenario;

/// Simulates the repetitions, `cfg.threads` at a time (one per core by
/// default); each is independent and deterministic, so the order in which
/// they finish does not matter.
pub(super) fn run_reps(sc: &Scenario, cfg: &RunConfig, work: &Path) -> Reps {
    let threads = match cfg.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(sc.repetitions.max(1) as usize);
    let next = AtomicU32::new(1);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let rep = next.fetch_add(1, Ordering::Relaxed);
                if rep > sc.repetitions {
                    break;
                }
                let r = run_rep(sc, cfg, rep, &work.join(format!("rep-{rep}")));
                if let Ok(rr) = &r {
                    if !cfg.quiet {
                        eprintln!(
                            "cclab: {} repetition {rep}/{} simulated ({})",
                            sc.name, sc.repetitions, rr.1
                        );
                    }
                }
                let failed = r.is_err();
                results.lock().unwrap().push((rep, r.map(|x| x.0)));
                if failed {
                    cfg.stop.store(true, Ordering::Relaxed);
                }
            });
        }
    });
    let mut all = results.into_inner().unwrap();
    all.sort_by_key(|(rep, _)| *rep);
    in_order(all)
}

/// The repetitions up to the first that failed, and the error that
/// stopped the run: the first real one wins over the interruptions it
/// caused in the repetitions running beside it.
fn in_order(all: Vec<(u32, Result<RepResult, RunError>)>) -> Reps {
    let mut reps = Vec::new();
    let mut failure = None;
    for (_, r) in all {
        match r {
            Ok(r) if failure.is_none() => reps.push(r),
            Ok(_) => {}
            Err(e) => {
                if failure.is_none() || matches!(failure, Some(RunError::Interrupted)) {
                    failure = Some(e);
                }
            }
        }
    }
    (reps, failure)
}

/// One simulated repetition; also returns a line on its speed.
fn run_rep(
    sc: &Scenario,
    cfg: &RunConfig,
    rep: u32,
    dir: &Path,
) -> Result<(RepResult, String), RunError> {
    let seed = rep_seed(sc, rep);
    let o = crate::sim::run_rep(&crate::sim::SimConfig {
        scenario: sc,
        seed,
        dir,
        per_packet_log: cfg.per_packet_log,
        qlog_level: cfg.qlog_level,
        stop: &cfg.stop,
    })?;
    // Wall-clock figures stay out of summary.json, which must not depend
    // on the machine.
    write_json_atomic(&dir.join("sim.json"), &o)?;
    let ended: Vec<EndedFlow> = o
        .flows
        .iter()
        .enumerate()
        .map(|(i, (d, killed))| EndedFlow {
            flow: i,
            dir: d.clone(),
            killed: *killed,
        })
        .collect();
    let line = format!(
        "{:.1} s in {:.2} s of wall time, {:.0}x",
        o.simulated_s, o.wall_s, o.speedup
    );
    let end = RepEnd {
        seed,
        ended,
        links: o.links,
        active_s: o.active_s,
        cross: o.cross,
        overhead_s: 0.0,
        emu_cpu: None,
        emu_lateness: None,
        emu_scheduling: None,
        // Virtual time: the CPU decides nothing.
        cpu_busy: None,
        guest_cpu_busy: None,
        // No processes to count.
        processes: 0,
    };
    Ok((rep_result(sc, rep, dir, end), line))
}
