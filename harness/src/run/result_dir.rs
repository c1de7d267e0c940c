//! The result directory: where a run writes (`OUT.partial`, renamed to
//! `OUT` at the end), its metadata and status.

use std::path::{Path, PathBuf};

use super::{RunConfig, RunError, RunSummary};
use crate::files::write_json_atomic;
use crate::link::Backend;
use crate::scenario::Scenario;

/// The run's metadata; `emu_mode` (relay or ip) is written for emu runs only.
pub fn metadata(
    backend: Backend,
    emu_mode: crate::emu::EmuMode,
    started: &str,
) -> serde_json::Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let patch = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../.patched/quiche/.cclab-patch-sha256"
    ))
    .unwrap_or_default();
    let mut m = serde_json::json!({
        "cclab_version": env!("CARGO_PKG_VERSION"),
        "git_revision": env!("CCLAB_GIT_REV"),
        "rustc": env!("CCLAB_RUSTC"),
        "quiche": "0.30.0 + patches/quiche/series",
        "quiche_patch_sha256": patch.trim(),
        "kernel": kernel,
        "backend": backend.as_str(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "started_at": started,
        "command": std::env::args().collect::<Vec<_>>(),
    });
    if backend == Backend::Emu {
        m["emu_mode"] = emu_mode.as_str().into();
    }
    m
}

/// RFC 3339 UTC time of now.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Where a run is written before it is moved to `out`: `out.partial`.
pub fn partial_dir(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    out.with_file_name(name)
}

/// The work directory of a run in progress, `OUT.partial`.
pub(super) struct WorkDir {
    path: PathBuf,
    started: String,
}

impl WorkDir {
    /// Makes a fresh work directory for `cfg.out` (refusing an `out` that
    /// holds a complete run) with the resolved scenario, the metadata and
    /// a `running` status.
    pub(super) fn start(sc: &Scenario, cfg: &RunConfig) -> Result<WorkDir, RunError> {
        if let Ok(s) = std::fs::read_to_string(cfg.out.join("status.json")) {
            if s.contains("\"complete\"") {
                return Err(RunError::Exists(cfg.out.clone()));
            }
        }
        // Not `with_extension`, which replaces a dotted name's last part:
        // `loss-0.01` and `loss-0.05` would share `loss-0.partial`.
        let work = partial_dir(&cfg.out);
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot create {}: {e}", work.display()))
        })?;
        let started = now_rfc3339();
        std::fs::write(
            work.join("scenario.toml"),
            toml::to_string(&sc.to_toml()).unwrap_or_default(),
        )?;
        write_json_atomic(
            &work.join("metadata.json"),
            &metadata(cfg.backend, cfg.emu_mode, &started),
        )?;
        write_json_atomic(
            &work.join("status.json"),
            &serde_json::json!({"state": "running", "started_at": started}),
        )?;
        Ok(WorkDir {
            path: work,
            started,
        })
    }

    /// The directory.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the summary and the final status, and moves the directory
    /// to `out`.
    pub(super) fn finish(
        self,
        out: &Path,
        status: &str,
        summary: &RunSummary,
        failure: Option<&RunError>,
    ) -> Result<(), RunError> {
        write_json_atomic(&self.path.join("summary.json"), summary)?;
        write_json_atomic(
            &self.path.join("status.json"),
            &serde_json::json!({"state": status, "started_at": self.started, "ended_at": now_rfc3339(),
                "error": failure.map(|e| e.to_string())}),
        )?;
        let _ = std::fs::remove_dir_all(out);
        std::fs::rename(&self.path, out)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_run_names_get_their_own_work_directory() {
        let a = partial_dir(Path::new("/r/loss-0.01"));
        let b = partial_dir(Path::new("/r/loss-0.05"));
        assert_eq!(a, Path::new("/r/loss-0.01.partial"));
        assert_ne!(a, b);
    }

    #[test]
    fn timestamps() {
        let s = now_rfc3339();
        assert_eq!(s.len(), 20);
        assert!(s.starts_with("20") && s.ends_with('Z'));
    }
}
