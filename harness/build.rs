//! Records the git revision and rustc version for run metadata.
//!
//! The build script re-runs when the checked-out commit changes (HEAD, the
//! branch it points to, packed refs) or a source of the crates a run uses
//! does, not on every change of the index: `git status` itself may rewrite
//! the index, which made every cargo command rebuild the harness. `-dirty`
//! says the tree had uncommitted changes when the harness was built.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        // Never write the index (a refreshed index would look like a change).
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let rev = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!(
        "cargo:rustc-env=CCLAB_GIT_REV={rev}{}",
        if dirty { "-dirty" } else { "" }
    );
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let v = Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=CCLAB_RUSTC={v}");
    // The files that move when the commit does, wherever git keeps them
    // (a worktree's .git is a file naming another directory).
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(r);
    }
    for w in watch {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w]) {
            if std::path::Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    // And when a source that goes into a run changes, so that `-dirty`
    // (an uncommitted change) is true of the build, not of an older one.
    for d in [
        "build.rs",
        "src",
        "../cc-algorithms/src",
        "../quic-app/src",
        "../quic-server/src",
        "../quic-client/src",
        "../qlog-analysis/src",
        "../patches",
        "../Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={d}");
    }
}
