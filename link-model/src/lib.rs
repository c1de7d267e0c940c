//! The link model of cclab, apart from any way of driving it.
//!
//! - [`link`]: link descriptions as users write them (rate or trace,
//!   delay, jitter, loss, queue, AQM, scheduler, per direction), parsed
//!   from TOML with errors that name the field.
//! - [`elements`]: one direction of a link as a pipeline of elements
//!   (loss, duplication, queue + AQM or per-class DRR, serializer, delay,
//!   reordering) driven by explicit times.
//! - [`topology`]: named links and the path each flow takes through them.
//! - [`log`]: the per-packet records and periodic samples a link reports.
//!
//! Nothing here opens a socket, starts a thread or reads a clock: the
//! userspace emulator (harness's `emu`, real time) and the simulator
//! (harness's `sim`, virtual time) are two drivers of the same elements,
//! and another QUIC stack's tests could be a third.

pub mod elements;
pub mod link;
pub mod log;
pub mod topology;
