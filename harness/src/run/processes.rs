//! Repetitions on `emu` and `netem`, with the endpoints as real processes:
//! prepare the link, start the servers and the link in front of them,
//! start each client at its offset and wait for the flows, stop
//! everything, and collect what the files say.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::collect::{rep_result, EndedFlow, RepEnd};
use super::cpu::{CpuTimes, BUSY_WARN};
use super::endpoints::{gather_qlogs, terminate, Binaries, Client, Endpoints};
use super::rep_link::{stop_cross, PreparedLink};
use super::results::RepResult;
use super::{rep_seed, Reps, RunConfig, RunError};
use crate::scenario::{FlowSpec, Scenario};

/// Runs the repetitions one after the other, until one fails or the user
/// stops the run.
pub(super) fn run_reps(sc: &Scenario, cfg: &RunConfig, work: &Path, bins: &Binaries) -> Reps {
    let mut reps = Vec::new();
    for rep in 1..=sc.repetitions {
        if cfg.stop.load(Ordering::Relaxed) {
            return (reps, Some(RunError::Interrupted));
        }
        if !cfg.quiet {
            eprintln!("cclab: {} repetition {rep}/{}", sc.name, sc.repetitions);
        }
        match run_rep(sc, cfg, rep, &work.join(format!("rep-{rep}")), bins) {
            Ok(r) => reps.push(r),
            Err(e) => return (reps, Some(e)),
        }
    }
    (reps, None)
}

/// How the clients' phase ended.
struct Flows {
    clients: Vec<Client>,
    /// The user stopped the run.
    interrupted: bool,
    /// When the wait ended.
    active_end: Instant,
}

fn run_rep(
    sc: &Scenario,
    cfg: &RunConfig,
    rep: u32,
    dir: &Path,
    bins: &Binaries,
) -> Result<RepResult, RunError> {
    let setup_t = Instant::now();
    std::fs::create_dir_all(dir)?;
    let seed = rep_seed(sc, rep);
    // Each flow with its start in this repetition (`start_jitter`).
    let flows = sc.rep_flows(seed);
    let link = PreparedLink::prepare(sc, cfg, seed, dir)?;
    let event = sc.qlog_event(cfg.backend.as_str(), seed);
    let ends = Endpoints::prepare(bins, link.places(flows.len()), cfg.qlog_level, &event, dir)?;
    let mut servers = ends.start_servers(&flows, dir)?;
    let mut link = link.start(sc, cfg, &servers, dir)?;
    let t0 = Instant::now();
    let cpu0 = CpuTimes::now();
    let overhead_setup = setup_t.elapsed();
    let crosses = link.start_cross(sc, seed, servers.len(), t0)?;
    let mut run = wait_for_flows(sc, cfg, &ends, &flows, dir, t0, |i| {
        link.addr_of(&servers, i)
    })?;
    let cpu_busy = cpu0
        .zip(CpuTimes::now())
        .and_then(|(a, b)| a.busy_share(&b));
    let guest_cpu_busy = link.guest_busy();
    if let Some(busy) = guest_cpu_busy.filter(|&b| b >= BUSY_WARN && !cfg.quiet) {
        eprintln!(
            "cclab: warning: the guest router's CPU was {:.0}% busy during repetition {rep}: it may have forwarded late, so the link was slower or later than described; a lower rate avoids it (docs/links.md)",
            busy * 100.0
        );
    }
    if let Some(busy) = cpu_busy.filter(|&b| b >= BUSY_WARN && !cfg.quiet) {
        eprintln!(
            "cclab: warning: this machine's CPUs were {:.0}% busy during repetition {rep}: its endpoints may have been short of CPU, which slows QUIC flows (user space) more than Linux TCP (kernel); fewer flows, a lower rate or a less loaded machine avoid it (docs/coexistence.md)",
            busy * 100.0
        );
    }

    let teardown_t = Instant::now();
    let killed = stop_clients(&mut run.clients);
    let cross = stop_cross(crosses);
    for s in &mut servers {
        terminate(&mut s.child, Duration::from_secs(5));
    }
    let emu_report = link.stop()?;
    let overhead = overhead_setup + teardown_t.elapsed();
    if run.interrupted {
        return Err(RunError::Interrupted);
    }

    gather_qlogs(&run.clients, &servers)?;
    let end = RepEnd {
        seed,
        ended: run
            .clients
            .iter()
            .map(|c| EndedFlow {
                flow: c.flow,
                dir: c.dir.clone(),
                killed: killed.contains(&c.flow),
            })
            .collect(),
        links: emu_report
            .as_ref()
            .map(|e| e.links.clone())
            .unwrap_or_default(),
        active_s: run.active_end.duration_since(t0).as_secs_f64(),
        cross,
        overhead_s: overhead.as_secs_f64(),
        emu_cpu: emu_report.as_ref().map(|e| (e.cpu_s, e.duration_s)),
        emu_lateness: emu_report.as_ref().map(|e| e.lateness.clone()),
        emu_scheduling: emu_report.as_ref().map(|e| e.scheduling.clone()),
        cpu_busy,
        guest_cpu_busy,
        processes: if cfg.count_syscalls {
            (servers.len() + run.clients.len()) as u32
        } else {
            0
        },
    };
    Ok(rep_result(sc, rep, dir, end))
}

/// Starts each client at its offset (from `t0`), and waits until every
/// flow has ended (and cross traffic with the scenario), the deadline
/// (20 s after the scenario's end) passes, or the user stops the run.
/// `addr_of(i)` is where flow `i`'s client sends.
fn wait_for_flows(
    sc: &Scenario,
    cfg: &RunConfig,
    ends: &Endpoints,
    flows: &[(usize, FlowSpec)],
    dir: &Path,
    t0: Instant,
    addr_of: impl Fn(usize) -> std::net::SocketAddr,
) -> Result<Flows, RunError> {
    let start_of = |i: usize| t0 + Duration::from_nanos(flows[i].1.start_ns);
    let mut pending: Vec<usize> = (0..flows.len()).collect();
    pending.sort_by_key(|i| flows[*i].1.start_ns);
    let mut clients: Vec<Client> = Vec::new();
    let end = t0 + Duration::from_nanos(sc.duration_ns);
    let deadline = end + Duration::from_secs(20);
    let mut interrupted = false;
    loop {
        if cfg.stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let now = Instant::now();
        while let Some(&i) = pending.get(clients.len()).filter(|&&i| now >= start_of(i)) {
            clients.push(ends.spawn_client(sc, i, &flows[i].1, addr_of(i), dir)?);
        }
        let all_started = clients.len() == pending.len();
        let all_done = clients
            .iter_mut()
            .all(|c| matches!(c.child.try_wait(), Ok(Some(_))));
        if all_started && all_done && now >= t0 + Duration::from_millis(200) {
            // Cross traffic keeps going until the scenario's end.
            if sc.cross.is_empty() || now >= end {
                break;
            }
        }
        if now >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(Flows {
        clients,
        interrupted,
        active_end: Instant::now(),
    })
}

/// Stops the clients still running; the flows they carried.
fn stop_clients(clients: &mut [Client]) -> Vec<usize> {
    let mut killed = Vec::new();
    for c in clients {
        if !matches!(c.child.try_wait(), Ok(Some(_))) {
            terminate(&mut c.child, Duration::from_secs(3));
            killed.push(c.flow);
        }
    }
    killed
}
