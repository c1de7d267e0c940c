//! `tcp-bulk`: one Linux TCP bulk transfer between a server and a client,
//! with the sending side's congestion control chosen by name
//! (`TCP_CONGESTION`) and its `TCP_INFO` sampled every few milliseconds
//! into a JSON-lines file. The harness runs it for the flows of a scenario
//! whose `cc` is `tcp:NAME`, beside the QUIC flows of `quic-server` and
//! `quic-client`, and reads the samples as it reads a QUIC sender's qlog.
//!
//! # Why our own tool, not iperf3
//!
//! iperf3 reports cwnd, RTT and retransmissions once per reporting
//! interval (0.1 s at the least); a QUIC flow's qlog logs every change of
//! its window. Reading `TCP_INFO` every 10 ms (the default `--interval-ms`)
//! gives a TCP window series as fine as the qlog's, with the fields a
//! comparison needs (`snd_cwnd` and `snd_mss`, `srtt`/`rttvar`/`min_rtt`,
//! `total_retrans`, bytes sent, retransmitted and acknowledged, delivery
//! and pacing rates). And this program is built with the workspace, so the
//! guest of `cclab vm` (which sees the host's files) and any host run it
//! without installing anything.
//!
//! # Protocol
//!
//! The client connects and sends one JSON line, the request
//! (`{"tcp_bulk":1,"direction":"download","bytes":N,"duration_s":null,
//! "cc":"cubic","interval_ms":10}`); the server answers with one JSON line,
//! `{"ok":true,...}` or `{"error":"..."}`. Then the sender writes the
//! payload: a download is sent by the server until `bytes` have gone or
//! `duration_s` has passed, then it shuts its side down and the client
//! reads to the end; an upload is sent by the client, and the server
//! answers the end of it with `{"received":N}`. The sender sets the
//! congestion control on its socket before the first payload byte.
//!
//! # Files
//!
//! Each end writes its own samples file (`--samples`), one JSON object a
//! line: a `start` record (role, direction, congestion control, the
//! request, the wall clock), on the sender `sample` records every interval
//! (see [`info::Info::to_json`] for the fields and units), and an `end`
//! record (payload bytes this end moved, seconds since the start, whether
//! the transfer completed, the socket's final `TCP_INFO`). Times are
//! seconds since the transfer's start at that end: the request sent
//! (client) or received (server). The client prints its report (bytes,
//! duration, goodput, error) as one JSON object on standard output.

pub mod cc;
pub mod info;
pub mod proto;
pub mod transfer;

/// Payload bytes an unbounded (timed) transfer is allowed, as a limit no
/// run reaches.
pub const UNBOUNDED: u64 = u64::MAX;
