//! The elements of one link direction, one per file, each driven by
//! explicit times so it is testable alone with a fake clock, and
//! [`pipeline::Pipeline`], which chains them:
//!
//! ```text
//! arrive → loss → duplicate → policer → queue (+ AQM; FIFO or per-class DRR) → serializer → delay + jitter → (reorder) → aggregation → deliver
//! ```

pub mod aggregate;
#[cfg(test)]
mod burst_tests;
#[cfg(test)]
mod changes_tests;
pub mod codel;
pub mod delay;
pub mod dualpi2;
pub mod duplicate;
#[cfg(test)]
mod ecn_tests;
pub mod loss;
pub mod packet;
pub mod pie;
pub mod pipeline;
pub mod policer;
pub mod queue;
pub mod red;
pub mod reorder;
pub mod rng;
pub mod sched;
pub mod serializer;

pub use packet::{DropReason, Ecn, MarkReason, Packet};
pub use pipeline::{Counters, Pipeline, Sampler};
