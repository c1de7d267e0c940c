//! Helpers shared by the simulator's integration tests.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::Backend;
use harness::run::RunConfig;

/// A simulator run into `out` with the per-packet log, repetitions on every
/// core, and qlog at `qlog_level`.
pub fn sim_config(out: &Path, qlog_level: quic_app::QlogLevel) -> RunConfig {
    RunConfig {
        out: out.to_path_buf(),
        bin_dir: PathBuf::from("/nonexistent"),
        backend: Backend::Sim,
        quiet: true,
        stop: Arc::new(AtomicBool::new(false)),
        per_packet_log: true,
        threads: 0,
        qlog_level,
    }
}

/// Every file of a run, relative path to bytes, except those that hold
/// wall-clock facts by design (metadata.json, status.json: start times;
/// sim.json: wall time of the simulation).
pub fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if ["metadata.json", "status.json", "sim.json"].contains(&name.as_str()) {
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            out.push((rel, std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}
