//! The bench harness behind `cclab`: link descriptions and the link
//! backends (the userspace emulator [`emu`], kernel [`netem`] on veth
//! between namespaces, and the virtual-time simulator [`sim`]), with the
//! bottleneck log they all write; scenarios, runs, sweeps, tuning and
//! reports on top.

pub mod backend;
pub mod bottleneck;
/// Link descriptions: the link model's own ([`link_model::link`]).
pub use link_model::link;
pub mod cli;
pub mod cross;
pub mod emu;
mod files;
pub mod guest_exec;
pub mod guest_router;
pub mod harm;
pub mod netem;
pub mod netns;
pub mod probe;
pub mod report;
pub mod reproduce;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod study;
pub mod sweep;
pub mod syscount;
pub mod tune;
pub mod vm;
