//! Workspace-level end-to-end tests live in `tests/tests/`: the HTTP/3
//! client and server together on loopback, and interoperability with a
//! third-party QUIC stack (aioquic). The congestion-control tests that need
//! only quiche live beside their code in `cc-algorithms`.
