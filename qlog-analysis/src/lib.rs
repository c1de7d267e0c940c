//! Reads qlog from any QUIC implementation and turns it into what a
//! congestion-control researcher looks at: cwnd, bytes in flight,
//! ssthresh, pacing rate, RTTs, losses, goodput and congestion states over
//! time ([`series`]), per-connection summaries with fairness and
//! utilization across connections ([`summary`]), plots ([`plot`]) and
//! files that open in qvis ([`qvis`]). The conditions a run was made
//! under, when the trace logs them (the harness's generic
//! `simulation:scenario` event, and `simulation:marker` events for changes
//! during the run), come out with each summary as `conditions` and
//! `markers`, and pass through to qvis unchanged.
//!
//! The readers ([`reader`]) stream every flavour: quiche 0.30's JSON-SEQ,
//! qlog 0.3/0.4 JSON-SEQ, NDJSON and JSON, and the draft-00..02 documents
//! with `event_fields` (picoquic, aioquic, quic-go, mvfst), plain, gzip or
//! zstd, with memory independent of the file's size. Malformed records
//! are skipped and counted, never fatal.

pub mod analysis;
pub mod event;
pub mod input;
pub mod plot;
pub mod qvis;
pub mod reader;
pub mod series;
pub mod slow_start;
pub mod summary;
pub mod synth;
pub mod units;

pub use event::{Kind, Metrics, Packet};
pub use reader::{read, read_file, Event, Parsed, ReadError, ReadStats, Sink, TraceInfo};
