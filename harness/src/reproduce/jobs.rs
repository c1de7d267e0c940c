//! The runs of a reproduction: one job per point of every experiment,
//! each a normal run into `runs/<experiment>/<point>/`, reused when a
//! complete run of the same scenario, made by the same build (commit and
//! binaries, `build.json` in the run), is already there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Instant;

use super::manifest::{Experiment, Manifest, Point, Selector};
use super::{Build, Options, ReproError};
use crate::link::Backend;
use crate::run::{RunConfig, RunError};
use crate::scenario::Scenario;

/// One point to run.
pub(crate) struct Job {
    /// Index of its experiment.
    pub(crate) exp: usize,
    /// `<experiment>/<point>`, for progress lines and failures.
    pub(crate) name: String,
    pub(crate) qlog: quic_app::QlogLevel,
    /// Keep the links' per-packet logs (a metric reads them).
    pub(crate) packet_log: bool,
    pub(crate) point: Point,
    pub(crate) dir: PathBuf,
    /// Its backend is `scenario.link.backend`.
    pub(crate) scenario: Scenario,
    /// How the host runs it: a study's `host.*` fields.
    pub(crate) host: Host,
}

/// How the host runs a point (a study's `host.*` fields): not part of the
/// scenario, but of the run's reuse.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Host {
    /// Busy processes (CPU spinners) kept running beside the run
    /// (`host.busy`), a loaded host on purpose.
    pub busy: u32,
    /// Where a netem link runs (`host.netem_router`): the user-mode
    /// Linux guest as a router (`guest`), this kernel (`host`), or as
    /// the process decides (`auto`, None).
    pub netem_router: Option<bool>,
    /// How emu's packets reach it (`host.emu_mode`: `relay` or `ip`;
    /// None: the run's default).
    pub emu_mode: Option<crate::emu::EmuMode>,
    /// Count the endpoints' system calls (`host.count_syscalls`,
    /// `RunConfig::count_syscalls`).
    pub count_syscalls: bool,
}

impl Host {
    /// The run directory's record of the router and emu mode: empty for
    /// the defaults (and for runs from before it was written).
    fn setup_text(&self) -> String {
        let mut t = String::new();
        if let Some(g) = self.netem_router {
            t += if g {
                "netem_router=guest\n"
            } else {
                "netem_router=host\n"
            };
        }
        if let Some(m) = self.emu_mode {
            t += &format!("emu_mode={}\n", m.as_str());
        }
        if self.count_syscalls {
            t += "count_syscalls=true\n";
        }
        t
    }
}

/// The scenario of one point.
pub fn point_scenario(
    m: &Manifest,
    e: &Experiment,
    p: &Point,
    opts: &Options,
) -> Result<Scenario, ReproError> {
    let base = Scenario::load(&m.dir.join(&e.scenario))?;
    let mut ov: Vec<(String, toml::Value)> =
        e.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    ov.extend(p.overrides.iter().cloned());
    let source = format!("{}/paper.toml experiment {}", m.dir.display(), e.id);
    let mut sc = base.with_overrides(&ov, &source)?;
    sc.name = format!("{}/{}/{}", m.paper, e.id, p.dir_name());
    // The options' backend, unless the experiment or an axis sets one.
    if !ov.iter().any(|(k, _)| k == "link.backend") {
        sc.link.backend = opts.backend;
    }
    apply_quick(&mut sc, e, opts.quick, &source)?;
    Ok(sc)
}

/// `e.quick`'s duration and repetitions, when `quick`.
pub(crate) fn apply_quick(
    sc: &mut Scenario,
    e: &Experiment,
    quick: bool,
    source: &str,
) -> Result<(), ReproError> {
    if quick {
        if let Some(d) = &e.quick.duration {
            let ns = crate::link::units::parse_duration_ns(d).ok_or_else(|| {
                crate::scenario::ScenarioError {
                    source: source.to_string(),
                    field: "quick.duration".into(),
                    problem: format!("`{d}` is not a time such as 20s"),
                }
            })?;
            sc.duration_ns = ns;
        }
        if let Some(r) = e.quick.repetitions {
            sc.repetitions = r.clamp(1, 1000);
        }
    }
    Ok(())
}

/// Metrics and figures that need the senders' qlog (the rest come from
/// the link and the clients' reports).
pub(crate) const QLOG_METRICS: &[&str] = &[
    "rtt_ms",
    "rtt_min_ms",
    "rtt_p95_ms",
    "cwnd_cv",
    "cwnd_kb",
    "lost",
    "eq7_mbps",
    "smcc_alpha",
    "smcc_alpha_min",
    "smcc_alpha_max",
];

/// Whether metric `m` reads the senders' qlog.
pub(crate) fn needs_qlog(m: &str) -> bool {
    QLOG_METRICS.contains(&m) || m.starts_with("last:") || needs_states(m)
}

/// Whether metric `m` reads the senders' congestion states (the first
/// slow start's `ss_*`, `entered:STATE`), logged from qlog level `base`.
pub(crate) fn needs_states(m: &str) -> bool {
    m.starts_with("ss_") || m.starts_with("entered:")
}

/// Whether a claim, figure or quoted figure at point `p` of experiment
/// `e` reads a metric that `needs` says needs something a run may leave
/// out (the senders' qlog, the link's per-packet log); `series` adds the
/// figure kinds that need it whatever their metric.
fn point_reads(
    m: &Manifest,
    e: &Experiment,
    p: &Point,
    needs: fn(&str) -> bool,
    series: &[&str],
) -> bool {
    let hits = |sels: &BTreeMap<String, String>| {
        sels.values()
            .any(|s| Selector::parse(s).is_ok_and(|sel| p.matches(&sel)))
    };
    // A sensitivity run evaluates its base experiment's claims.
    let claims_of = e.sensitivity_of.as_deref().unwrap_or(e.id.as_str());
    let claims = m.claims.iter().any(|c| {
        c.experiment.as_deref() == Some(claims_of)
            && c.metric.as_deref().is_some_and(needs)
            && hits(&c.values)
    });
    let figures = m.figures.iter().any(|f| {
        f.experiment == e.id
            && (series.contains(&f.kind.as_str())
                || f.kind.strip_prefix("metric:").is_some_and(needs))
            && hits(&f.series)
    });
    // Figures quoted in explanations, measured where they point.
    let quoted = m.claims.iter().any(|c| {
        [&c.if_fail, &c.caveat, &c.note]
            .into_iter()
            .flatten()
            .filter_map(|t| super::quote::parse(t).ok())
            .flatten()
            .any(|q| {
                let exp = q.experiment.as_deref().or(c.experiment.as_deref());
                let here = exp == Some(e.id.as_str())
                    || (exp.is_some() && exp == e.sensitivity_of.as_deref());
                here && needs(&q.metric)
                    && Selector::parse(&q.selector).is_ok_and(|sel| p.matches(&sel))
            })
    });
    claims || figures || quoted
}

/// The qlog level point `p` of experiment `e` needs: `opts.qlog_level`
/// when a claim or figure reads the senders' qlog there, else off (qlog
/// more than halves a simulation's speed and takes most of its disk).
fn qlog_for(m: &Manifest, e: &Experiment, p: &Point, opts: &Options) -> quic_app::QlogLevel {
    if point_reads(m, e, p, needs_qlog, &["cwnd", "rtt"]) {
        opts.qlog_level
    } else {
        quic_app::QlogLevel::Off
    }
}

/// The metrics read from the links' per-packet logs (`bottleneck.bin`),
/// which runs keep only where one of them is read.
pub(crate) fn needs_packet_log(metric: &str) -> bool {
    matches!(metric, "delivery_first" | "queue_delay_first_ms")
}

/// Every point's job, its scenario resolved first: a bad field stops the
/// paper before anything runs.
pub(crate) fn plan(m: &Manifest, out: &Path, opts: &Options) -> Result<Vec<Job>, ReproError> {
    let mut jobs = Vec::new();
    for (ei, e) in m.experiments.iter().enumerate() {
        for p in e.points(opts.quick) {
            let scenario = point_scenario(m, e, &p, opts)?;
            let dir = out.join("runs").join(&e.id).join(p.dir_name());
            jobs.push(Job {
                exp: ei,
                name: format!("{}/{}", e.id, p.dir_name()),
                qlog: qlog_for(m, e, &p, opts),
                packet_log: point_reads(m, e, &p, needs_packet_log, &[]),
                point: p,
                dir,
                scenario,
                host: Host::default(),
            });
        }
    }
    Ok(jobs)
}

/// The file in a run directory naming the qlog level it ran at.
const QLOG_FILE: &str = "qlog-level";

/// The file in a run directory giving how many busy processes ran beside
/// it (absent: none).
const BUSY_FILE: &str = "host-busy";

/// The file in a run directory naming where its netem link ran and how
/// emu's packets reached it, when a study chose (absent: the defaults).
const SETUP_FILE: &str = "host-setup";

/// CPU spinners: `n` busy child processes, stopped (killed and waited
/// for) when dropped, so they never outlive the run they load.
struct Spinners(Vec<std::process::Child>);

impl Spinners {
    fn start(n: u32) -> std::io::Result<Spinners> {
        let mut v = Spinners(Vec::new());
        for _ in 0..n {
            v.0.push(
                std::process::Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(std::process::Stdio::null())
                    .spawn()?,
            );
        }
        Ok(v)
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// The file in a run directory naming the build that made it.
pub(super) const BUILD_FILE: &str = "build.json";

/// The build recorded in run directory `dir`, if any.
pub(crate) fn recorded_build(dir: &Path) -> Option<Build> {
    let b = std::fs::read(dir.join(BUILD_FILE)).ok()?;
    serde_json::from_slice(&b).ok()
}

/// The builds of the backends a set of runs uses: a sim run is reused
/// under the same `cclab`, a real one under the same `cclab`,
/// `quic-server` and `quic-client` ([`Build::current`]).
pub(crate) struct Builds(Vec<(Backend, Build)>);

impl Builds {
    /// The builds for every backend in `jobs`, and `default`.
    pub(crate) fn of(jobs: &[Job], default: Backend, bin_dir: &Path) -> std::io::Result<Builds> {
        let mut v: Vec<(Backend, Build)> = Vec::new();
        for b in jobs
            .iter()
            .map(|j| j.scenario.link.backend)
            .chain([default])
        {
            if !v.iter().any(|(x, _)| *x == b) {
                v.push((b, Build::current(b, bin_dir)?));
            }
        }
        Ok(Builds(v))
    }

    /// The build that makes `backend`'s runs.
    pub(crate) fn get(&self, backend: Backend) -> &Build {
        self.0
            .iter()
            .find(|(b, _)| *b == backend)
            .map(|(_, x)| x)
            .unwrap_or(&self.0[0].1)
    }
}

/// The jobs to run among `todo_of` (all when `None`): all but complete
/// runs of the same scenario made by the same build; stale leftovers are
/// removed. Also returns how many complete runs of the same scenario are
/// re-run because another build made them.
fn to_do(
    jobs: &[Job],
    builds: &Builds,
    todo_of: Option<&[usize]>,
) -> Result<(Vec<usize>, usize), ReproError> {
    let mut todo = Vec::new();
    let mut rebuilt = 0;
    for (i, j) in jobs.iter().enumerate() {
        if todo_of.is_some_and(|t| !t.contains(&i)) {
            continue;
        }
        let build = builds.get(j.scenario.link.backend);
        let want = toml::to_string(&j.scenario.to_toml()).unwrap_or_default();
        let complete = std::fs::read_to_string(j.dir.join("status.json"))
            .is_ok_and(|s| s.contains("\"complete\""));
        let same = std::fs::read_to_string(j.dir.join("scenario.toml")).is_ok_and(|s| s == want);
        let same_build = recorded_build(&j.dir).as_ref() == Some(build);
        // A run made at another qlog level lacks (or has more of) what a
        // metric reads; runs from before the level was recorded pass.
        let same_qlog = std::fs::read_to_string(j.dir.join(QLOG_FILE))
            .map_or(true, |l| l.trim() == j.qlog.as_str());
        let same_busy = std::fs::read_to_string(j.dir.join(BUSY_FILE))
            .map_or(j.host.busy == 0, |b| b.trim() == j.host.busy.to_string())
            && std::fs::read_to_string(j.dir.join(SETUP_FILE)).unwrap_or_default()
                == j.host.setup_text();
        // A run made without the per-packet log cannot give what reads it.
        let has_log = !j.packet_log || j.dir.join("rep-1").join("bottleneck.bin").exists();
        if complete && same && same_build && same_qlog && same_busy && has_log {
            continue;
        }
        if complete && same {
            rebuilt += 1;
        }
        if j.dir.exists() {
            std::fs::remove_dir_all(&j.dir)?;
        }
        if let Some(p) = j.dir.parent() {
            std::fs::create_dir_all(p)?;
        }
        todo.push(i);
    }
    Ok((todo, rebuilt))
}

/// Runs what is not already complete among `only` (all when `None`),
/// `opts.jobs` at once; returns (runs executed, failures). `what` names
/// the work in progress lines (`cclab reproduce smcc`). A run on a real
/// backend (emu, netem) runs alone: it waits for the simulations in
/// flight and none starts beside it, so its endpoints have the host's
/// CPUs to themselves.
pub(crate) fn run_jobs(
    what: &str,
    jobs: &[Job],
    builds: &Builds,
    only: Option<&[usize]>,
    opts: &Options,
) -> Result<(usize, Vec<String>), ReproError> {
    let (todo, rebuilt) = to_do(jobs, builds, only)?;
    let backends: Vec<&str> = {
        let mut v: Vec<&str> = todo
            .iter()
            .map(|&i| jobs[i].scenario.link.backend.as_str())
            .collect();
        v.sort();
        v.dedup();
        if v.is_empty() {
            v.push(opts.backend.as_str());
        }
        v
    };
    if !opts.quiet {
        eprintln!(
            "{what}: {} run(s), {} to do{}, {} reused; build {}; {} at once on {}",
            jobs.len(),
            todo.len(),
            if rebuilt > 0 {
                format!(" ({rebuilt} complete but made by another build)")
            } else {
                String::new()
            },
            jobs.len() - todo.len(),
            builds.get(opts.backend).git_revision,
            opts.jobs.max(1),
            backends.join(", ")
        );
    }
    let alone = RwLock::new(());
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let workers = opts.jobs.clamp(1, todo.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                if opts.stop.load(Ordering::Relaxed) {
                    return;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = todo.get(k) else {
                    return;
                };
                let t = Instant::now();
                let name = &jobs[i].name;
                let backend = jobs[i].scenario.link.backend;
                let (status, failure) = {
                    // Simulations share the host; a real run has it alone.
                    let (_shared, _alone) = if !backend.real_time() {
                        (Some(alone.read()), None)
                    } else {
                        (None, Some(alone.write()))
                    };
                    run_job(&jobs[i], opts, workers, name, builds.get(backend))
                };
                if let Some(f) = failure {
                    failed.lock().unwrap().push(f);
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if !opts.quiet {
                    let el = t0.elapsed().as_secs_f64();
                    let eta = el / n as f64 * (todo.len() - n) as f64;
                    eprintln!(
                        "  [{n}/{}] {what} {name}: {status} in {:.1} s (elapsed {:.0} s, ETA {:.0} s)",
                        todo.len(),
                        t.elapsed().as_secs_f64(),
                        el,
                        eta
                    );
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap_or_default();
    Ok((done.into_inner(), failed))
}

/// Runs one job (`workers` running beside it); its status for the
/// progress line, and the failure to report if it failed.
fn run_job(
    j: &Job,
    opts: &Options,
    workers: usize,
    name: &str,
    build: &Build,
) -> (String, Option<String>) {
    let backend = j.scenario.link.backend;
    let cfg = RunConfig {
        out: j.dir.clone(),
        bin_dir: opts.bin_dir.clone(),
        backend,
        quiet: true,
        stop: opts.stop.clone(),
        per_packet_log: j.packet_log,
        // Runs already go in parallel; with one worker the
        // repetitions of a run do.
        threads: if workers > 1 { 1 } else { 0 },
        qlog_level: j.qlog,
        // Linux TCP flows take the emulator's IP mode.
        emu_mode: j
            .host
            .emu_mode
            .unwrap_or_else(|| crate::backend::default_emu_mode(&j.scenario, backend)),
        netem_router: j.host.netem_router,
        // Real links only: a simulated point has no processes to count.
        count_syscalls: j.host.count_syscalls && backend.real_time(),
    };
    let spinners = match Spinners::start(j.host.busy) {
        Ok(s) => s,
        Err(e) => {
            return (
                format!("failed: {e}"),
                Some(format!(
                    "{name}: cannot start {} busy processes: {e}",
                    j.host.busy
                )),
            )
        }
    };
    let result = crate::run::run(&j.scenario, &cfg);
    drop(spinners);
    match result {
        Ok(s) if s.status == "complete" => {
            let note = |file: &str, text: String| {
                std::fs::write(j.dir.join(file), text)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{file}: {e}")))
            };
            let recorded = note(QLOG_FILE, j.qlog.as_str().to_string())
                .and_then(|()| match j.host.busy {
                    0 => Ok(()),
                    n => note(BUSY_FILE, n.to_string()),
                })
                .and_then(|()| match j.host.setup_text() {
                    t if t.is_empty() => Ok(()),
                    t => note(SETUP_FILE, t),
                })
                .and_then(|()| crate::files::write_json_atomic(&j.dir.join(BUILD_FILE), build));
            match recorded {
                Ok(()) => ("done".to_string(), None),
                Err(e) => (
                    format!("failed: {e}"),
                    Some(format!("{name}: cannot record its build: {e}")),
                ),
            }
        }
        Ok(s) => (s.status.clone(), Some(format!("{name}: {}", s.status))),
        Err(RunError::Exists(_)) => ("done".to_string(), None),
        Err(e) => (format!("failed: {e}"), Some(format!("{name}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use super::*;
    use crate::link::Backend;

    #[test]
    fn spinners_stop_when_dropped() {
        let s = Spinners::start(2).unwrap();
        let pids: Vec<u32> = s.0.iter().map(|c| c.id()).collect();
        assert_eq!(pids.len(), 2);
        // Running, and busy (state R) or about to be.
        for p in &pids {
            assert!(std::path::Path::new(&format!("/proc/{p}")).exists());
        }
        drop(s);
        // Killed and reaped: no process, not even a zombie.
        for p in &pids {
            assert!(!std::path::Path::new(&format!("/proc/{p}")).exists(), "{p}");
        }
    }

    #[test]
    fn qlog_only_where_a_claim_or_figure_reads_it() {
        let mut m: Manifest = toml::from_str(
            r#"paper = "p"
title = "t"
seed = "s"
[[experiment]]
id = "e"
source = "s"
scenario = "x.toml"
[[experiment.axis]]
name = "cc"
field = "flows.0.cc"
values = ["a", "b", "c", "d"]
[[claim]]
id = "rtt"
source = "s"
statement = "s"
experiment = "e"
metric = "rtt_ms"
values = { a = "cc=a" }
test = "a > 1"
[[claim]]
id = "drops"
source = "s"
statement = "s"
experiment = "e"
metric = "drops"
values = { b = "cc=b" }
test = "b > 1"
if_fail = "d declared {lost:cc=d} losses"
[[figure]]
id = "f"
source = "s"
paper_says = "s"
experiment = "e"
kind = "cwnd"
series = { c = "cc=c" }
"#,
        )
        .unwrap();
        m.dir = PathBuf::from(".");
        let opts = Options {
            out: PathBuf::from("/tmp"),
            quick: false,
            backend: Backend::Sim,
            jobs: 1,
            quiet: true,
            stop: Arc::new(AtomicBool::new(false)),
            bin_dir: PathBuf::from("."),
            qlog_level: quic_app::QlogLevel::Metrics,
        };
        let e = &m.experiments[0];
        let levels: Vec<_> = e
            .points(false)
            .iter()
            .map(|p| qlog_for(&m, e, p, &opts))
            .collect();
        assert_eq!(
            levels,
            [
                quic_app::QlogLevel::Metrics,
                quic_app::QlogLevel::Off,
                quic_app::QlogLevel::Metrics,
                quic_app::QlogLevel::Metrics
            ]
        );
    }
}
