//! The bench harness behind `cclab`: scenarios, link backends, runs, sweeps
//! and reports.
//!
//! Not implemented yet: this crate is a placeholder in the workspace layout.
//! It ships no `cclab` binary until the harness exists.
