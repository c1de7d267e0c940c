//! `cclab report`: result directories made one HTML (or Markdown) file by
//! [`harness::report::write`].

use std::path::PathBuf;

use crate::common::bad_input;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Result directories (runs, sweeps, or a demo's directory).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// The report file: .html or .md.
    #[arg(long)]
    out: PathBuf,
}

/// `cclab report`.
pub fn report(a: &ReportArgs) -> anyhow::Result<i32> {
    let n = harness::report::write(&a.dirs, &a.out).unwrap_or_else(|e| bad_input(e));
    println!("{}: {n} run(s)", a.out.display());
    Ok(0)
}
