//! What the subcommands share: how bad input ends the process, where the
//! endpoint binaries are, Ctrl-C, the qlog level, the link backend, the
//! default result directory and the number of parallel jobs.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::{Backend, LinkSpec};
use harness::netns;

/// Exit status for bad input.
const BAD_INPUT: i32 = 2;

/// Prints `cclab: MSG` and exits with the bad-input status.
pub fn bad_input(msg: impl std::fmt::Display) -> ! {
    eprintln!("cclab: {msg}");
    std::process::exit(BAD_INPUT);
}

/// Prints `value` as pretty JSON on standard output (`--json`). A reader
/// that went away (`cclab run --json | head -c 100`) ends the output
/// quietly instead of a panic.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    use std::io::Write;
    let text = serde_json::to_string_pretty(value)?;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Where the endpoint binaries are: `CCLAB_BIN_DIR`, else next to `cclab`.
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CCLAB_BIN_DIR") {
        return PathBuf::from(d);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Ctrl-C sets the flag; a second one ends the process at once.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// A flag these signals set, however often they come (the process lives
/// on: what it runs stops when it sees the flag).
pub fn signal_flag(signals: &[i32]) -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for &sig in signals {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// The qlog level runs use unless told otherwise.
pub const QLOG_DEFAULT: &str = "core";

/// `--qlog-level`.
pub fn qlog_level(s: &str) -> quic_app::QlogLevel {
    quic_app::QlogLevel::parse(s).unwrap_or_else(|| {
        bad_input(format!(
            "--qlog-level: `{s}` is not one of off, metrics, core (packets), base, extra"
        ))
    })
}

/// `--qlog-level` where runs are read for cwnd and RTT (`cclab reproduce`,
/// `cclab study`): any level but off.
pub fn measured_qlog_level(s: &str) -> quic_app::QlogLevel {
    match qlog_level(s) {
        quic_app::QlogLevel::Off => bad_input(
            "--qlog-level: off would leave the cwnd and RTT metrics unmeasured; use metrics or more",
        ),
        l => l,
    }
}

/// The backend a link runs on: `auto` decided, `netem` checked (root, and
/// the kernel's netem where the link needs it).
pub fn resolve_backend(spec: &LinkSpec) -> Backend {
    match spec.backend {
        Backend::Emu => Backend::Emu,
        Backend::Sim => Backend::Sim,
        Backend::Netem => {
            if !netns::is_root() {
                bad_input("link.backend = netem needs root (network namespaces and tc); run as root, or use --link emu");
            }
            let caps = harness::netem::probe();
            let needs =
                harness::netem::needs_netem(&spec.up) || harness::netem::needs_netem(&spec.down);
            if needs && !caps.netem && !harness::guest_router::wanted() {
                bad_input(format!(
                    "{}\n  or run it on a kernel that has netem, in a throwaway guest: add --vm to this command (or: cclab vm -- cclab run ...)",
                    harness::netem::NetemError::MissingQdisc {
                        qdisc: "netem".into(),
                    }
                ));
            }
            Backend::Netem
        }
        Backend::Auto => {
            if netns::is_root()
                && harness::netem::probe().netem
                && spec.up.trace.is_none()
                && spec.down.trace.is_none()
                && harness::netem::unsupported_sched(spec).is_none()
            {
                Backend::Netem
            } else {
                Backend::Emu
            }
        }
    }
}

/// The backend a scenario runs on: as [`resolve_backend`] resolves its
/// link, except that `auto` picks the emulator when netem could not run
/// the scenario (cross traffic, or a link of several netem cannot
/// emulate); and an explicit netem is refused then, naming why.
pub fn resolve_scenario_backend(sc: &harness::scenario::Scenario) -> Backend {
    let backend = match sc.link.backend {
        Backend::Auto => {
            let kernel_can = |l: &LinkSpec| {
                l.up.trace.is_none()
                    && l.down.trace.is_none()
                    && harness::netem::unsupported_sched(l).is_none()
            };
            if resolve_backend(&sc.link) == Backend::Netem
                && sc.topology().links.iter().all(|l| kernel_can(&l.spec))
                && harness::run::check_backend(sc, Backend::Netem).is_ok()
            {
                Backend::Netem
            } else {
                Backend::Emu
            }
        }
        _ => resolve_backend(&sc.link),
    };
    if let Err(e) = harness::run::check_backend(sc, backend) {
        bad_input(e);
    }
    backend
}

/// `--emu-mode` (relay when not given), checked against the run: a mode
/// is for the emulator only, and IP mode needs root, `/dev/net/tun` and
/// no cross traffic; anything else is bad input naming what is missing.
pub fn emu_mode(
    given: Option<&str>,
    sc: &harness::scenario::Scenario,
    backend: Backend,
) -> harness::emu::EmuMode {
    use harness::emu::EmuMode;
    let Some(s) = given else {
        // Linux TCP flows cannot cross the UDP relay: IP mode, or a clear
        // error saying what it needs.
        let mode = harness::run::default_emu_mode(sc, backend);
        if mode == EmuMode::Ip {
            if let Err(e) = harness::run::check_emu_mode(sc, backend, mode) {
                bad_input(format!(
                    "this scenario has Linux TCP flows, which only the emulator's IP mode carries: {e}"
                ));
            }
        }
        return mode;
    };
    let mode = EmuMode::parse(s).unwrap_or_else(|| {
        bad_input(format!(
            "--emu-mode: `{s}` is not one of {}",
            EmuMode::NAMES
        ))
    });
    if backend != Backend::Emu {
        bad_input(format!(
            "--emu-mode {s}: the mode of the userspace emulator, but this run is on {} (add --link emu)",
            backend.as_str()
        ));
    }
    if let Err(e) = harness::run::check_emu_mode(sc, backend, mode) {
        bad_input(e);
    }
    mode
}

/// `results/NAME-TIME`.
pub fn default_out(name: &str) -> PathBuf {
    let t = harness::run::now_rfc3339().replace([':', '-'], "");
    PathBuf::from("results").join(format!("{name}-{t}"))
}

/// `--jobs`: the given number (1 to 64), else one per core on the
/// simulator (each simulation uses one core) and 1 on real links.
pub fn jobs(given: Option<usize>, backend: Backend) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = given.unwrap_or(if backend == Backend::Sim { cores } else { 1 });
    if jobs == 0 || jobs > 64 {
        bad_input(format!("--jobs: {jobs} is not from 1 to 64"));
    }
    jobs
}
