//! `cclab merge`: sweep or shard directories joined by
//! [`harness::sweep::merge`].

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct MergeArgs {
    /// Sweep output directories.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// The merged directory.
    #[arg(long)]
    out: PathBuf,
}

/// `cclab merge`.
pub fn merge(a: &MergeArgs) -> anyhow::Result<i32> {
    let n = harness::sweep::merge(&a.dirs, &a.out)?;
    println!("{}: {n} run(s) merged", a.out.display());
    Ok(0)
}
