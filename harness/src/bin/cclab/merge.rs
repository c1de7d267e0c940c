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
    let m = harness::sweep::merge(&a.dirs, &a.out)?;
    let of = m.total.map_or(String::new(), |t| format!(" of {t}"));
    println!(
        "{}: {} run(s) copied; {}{of} point(s) complete",
        a.out.display(),
        m.copied,
        m.complete
    );
    if !m.missing.is_empty() {
        let shown: Vec<String> = m.missing.iter().take(20).map(|i| i.to_string()).collect();
        eprintln!(
            "cclab merge: incomplete: {} point(s) missing or not complete (grid index {}{}); merge again when their shards have run",
            m.missing.len(),
            shown.join(", "),
            if m.missing.len() > 20 { ", ..." } else { "" }
        );
        return Ok(1);
    }
    Ok(0)
}
