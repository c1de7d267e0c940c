//! `cclab cleanup`: what killed runs left behind, removed by
//! [`harness::netns::cleanup`].

use harness::netns;

#[derive(clap::Args)]
pub struct CleanupArgs {
    /// Also remove those of runs that are still alive.
    #[arg(long)]
    all: bool,
    /// Print what was removed as JSON.
    #[arg(long)]
    json: bool,
}

/// `cclab cleanup`.
pub fn cleanup(a: &CleanupArgs) -> anyhow::Result<i32> {
    let done = netns::cleanup(!a.all)?;
    if a.json {
        crate::common::print_json(&done)?;
    } else if done.namespaces.is_empty() {
        println!("nothing to clean up");
    } else {
        println!(
            "removed {} namespace(s) and {} process(es): {}",
            done.namespaces.len(),
            done.processes,
            done.namespaces.join(", ")
        );
    }
    Ok(0)
}
