//! Workspace-level end-to-end tests live in `tests/tests/`. They arrive with
//! the client, server and harness; the congestion-control tests that need
//! only quiche live beside their code in `cc-algorithms`.
