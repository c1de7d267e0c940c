//! What the subcommands share: how bad input ends the process, where the
//! endpoint binaries are, Ctrl-C, the qlog level, the link backend, the
//! default result directory and the number of parallel jobs.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::{Backend, LinkSpec};

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

/// The backend a link runs on ([`harness::backend::resolve`]); bad input
/// naming what is missing where it cannot run here.
pub fn resolve_backend(spec: &LinkSpec) -> Backend {
    harness::backend::resolve(spec).unwrap_or_else(|e| bad_input(e))
}

/// The backend a scenario runs on ([`harness::backend::resolve_scenario`]);
/// bad input naming why where it cannot run the scenario.
pub fn resolve_scenario_backend(sc: &harness::scenario::Scenario) -> Backend {
    harness::backend::resolve_scenario(sc).unwrap_or_else(|e| bad_input(e))
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
        let mode = harness::backend::default_emu_mode(sc, backend);
        if mode == EmuMode::Ip {
            if let Err(e) = harness::backend::check_emu_mode(sc, backend, mode) {
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
    if let Err(e) = harness::backend::check_emu_mode(sc, backend, mode) {
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
    let jobs = given.unwrap_or(backend.default_jobs(cores));
    if jobs == 0 || jobs > 64 {
        bad_input(format!("--jobs: {jobs} is not from 1 to 64"));
    }
    jobs
}
