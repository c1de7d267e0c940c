//! The bench harness behind `cclab`: link descriptions and the two link
//! backends (the userspace emulator [`emu`] and kernel [`netem`] on veth
//! between namespaces), with the bottleneck log both write.
//!
//! Scenarios, runs, sweeps and reports are not implemented yet.

pub mod bottleneck;
pub mod cli;
pub mod cross;
pub mod emu;
pub mod link;
pub mod netem;
pub mod netns;
pub mod probe;
pub mod report;
pub mod run;
pub mod scenario;
pub mod sweep;
pub mod tune;
