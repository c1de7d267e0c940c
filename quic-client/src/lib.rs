//! HTTP/3 bulk-data client (tokio + quiche).
//!
//! Not implemented yet: this crate is a placeholder in the workspace layout.
//! It ships no binary until the client exists, so nothing here pretends to work.
