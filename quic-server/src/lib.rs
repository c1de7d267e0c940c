//! HTTP/3 bulk-data server (tokio + quiche).
//!
//! Not implemented yet: this crate is a placeholder in the workspace layout.
//! It ships no binary until the server exists, so nothing here pretends to work.
