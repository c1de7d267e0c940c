//! qlog readers, per-connection series and summaries, plots and qvis export.
//!
//! Not implemented yet: this crate is a placeholder in the workspace layout.
