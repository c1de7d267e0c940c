//! Skipping a test that cannot run here, the same way in every crate's
//! tests.
//!
//! - **Under CI** (the `CI` variable set to anything but empty, `false` or
//!   `0`; CI services set `CI=true`) nothing skips: a test that cannot run
//!   panics, naming what is missing.
//! - **Elsewhere** it prints one line, `SKIPPED <test>: <what is missing>`,
//!   and the test returns (and passes). The line goes straight to the
//!   process's stderr: libtest captures `eprintln!` of passing tests, so a
//!   skip printed that way is never seen.
//!
//! Only a test's precondition decides a skip (a file is absent, not root):
//! a failure of the test itself is never turned into one.
//!
//! ```no_run
//! // In a #[test] fn:
//! fn needs_a_tun_device() {
//!     let tun = std::path::Path::new("/dev/net/tun");
//!     test_support::require!(tun.exists(), "no {}", tun.display());
//!     // ... the test proper
//! }
//! ```

use std::io::Write;
use std::path::PathBuf;

/// The variable that makes every skip a failure.
pub const CI_ENV: &str = "CI";

/// Where the project's shared qlog samples are read from instead of
/// `shared/qlog-samples` beside the repository.
pub const QLOG_SAMPLES_ENV: &str = "CCLAB_QLOG_SAMPLES";

/// True when running under CI (module docs).
pub fn under_ci() -> bool {
    ci_value(std::env::var(CI_ENV).ok().as_deref())
}

fn ci_value(v: Option<&str>) -> bool {
    match v.map(str::trim) {
        None | Some("") => false,
        Some(v) => !v.eq_ignore_ascii_case("false") && v != "0",
    }
}

/// The running test's name: libtest names each test's thread after it.
fn test_name() -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => n.to_string(),
        _ => "(a test)".to_string(),
    }
}

/// The current test cannot run because of `missing`: under CI, panics
/// naming it; otherwise prints one visible `SKIPPED` line. The caller
/// returns from the test afterwards (or use [`require!`]).
pub fn skip(missing: &str) {
    let test = test_name();
    if under_ci() {
        panic!("{test} cannot run: {missing} ({CI_ENV} is set, so this is a failure, not a skip)");
    }
    visible(&format!("SKIPPED {test}: {missing}"));
}

/// One line the test's reader should see even when it passes (a part of
/// the test that ran differently here, say): `NOTE <test>: <what>`. Never
/// fails, CI or not; for a test that cannot run use [`skip`].
pub fn note(what: &str) {
    visible(&format!("NOTE {}: {what}", test_name()));
}

/// Writes a line to the process's stderr, past libtest's capture, in one
/// write so that parallel tests' lines do not mix.
fn visible(line: &str) {
    let line = format!("{line}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `require!(condition, "what is missing {}", args)`: unless `condition`
/// holds, [`skip`] with the message and return from the test.
#[macro_export]
macro_rules! require {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            $crate::skip(&format!($($why)+));
            return;
        }
    };
}

/// The shared qlog samples' directory: `$CCLAB_QLOG_SAMPLES`, or
/// `shared/qlog-samples` beside the repository (`../shared` from the
/// checkout).
pub fn qlog_samples_dir() -> PathBuf {
    match std::env::var_os(QLOG_SAMPLES_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/qlog-samples"),
    }
}

/// The shared qlog sample `name`, or `None` after a [`skip`] when the
/// samples' directory is absent. A directory that is there but lacks the
/// file is an incomplete set of samples: that panics, CI or not.
pub fn qlog_sample(name: &str) -> Option<PathBuf> {
    let dir = qlog_samples_dir();
    if !dir.is_dir() {
        skip(&format!(
            "the shared qlog samples are not at {} (set {QLOG_SAMPLES_ENV} to their directory)",
            dir.display()
        ));
        return None;
    }
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "{} holds the shared qlog samples but not {name}",
        dir.display()
    );
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_counts_as_ci() {
        for (v, ci) in [
            (None, false),
            (Some(""), false),
            (Some("false"), false),
            (Some("FALSE"), false),
            (Some("0"), false),
            (Some("true"), true),
            (Some("1"), true),
            (Some("yes"), true),
        ] {
            assert_eq!(ci_value(v), ci, "CI={v:?}");
        }
    }

    #[test]
    fn the_test_is_named_after_its_thread() {
        let name = test_name();
        assert!(
            name.ends_with("the_test_is_named_after_its_thread"),
            "{name}"
        );
    }
}
