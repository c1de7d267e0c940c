//! Congestion-control algorithms as plugins for quiche's public
//! congestion-control interface (`quiche::cc`, added by this project's patch
//! in `patches/`), with a registry that turns specs such as
//! `vegas:alpha=2,beta=4` into controllers.
//!
//! ```
//! let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
//! cc_algorithms::parse("vegas:alpha=2,beta=4").unwrap().apply(&mut config);
//! ```
//!
//! # Mapping TCP papers onto QUIC
//!
//! The papers these algorithms come from speak TCP. One mapping is used
//! everywhere:
//!
//! | TCP                               | QUIC (quiche::cc)                                           |
//! |-----------------------------------|-------------------------------------------------------------|
//! | 3 duplicate ACKs / fast retransmit | a loss-detection congestion event ([`LossEvent`]); one reaction per recovery period (RFC 9002 7.3.2, `new_recovery_period`) |
//! | timeout / RTO                     | persistent congestion (RFC 9002 7.6); PTO expiry is reported separately and is not a loss |
//! | packet / segment                  | one maximum datagram (`max_datagram_size`); windows are kept in bytes |
//! | RTT sample                        | quiche's latest RTT for the newest acknowledged packet (`rtt_sample`) |
//! | base / min RTT                    | the minimum of those samples; quiche's `min_rtt` likewise does not subtract ACK delay |
//! | "per RTT"                         | a round: ends when a packet sent after the round began is acknowledged ([`estimators::RoundTracker`]) |
//! | ECN-Echo / CE mark (RFC 3168)     | `on_ecn` after the `on_ack` of the same ACK frame, with the frame's newly reported CE and ECN-capable packet counts; never a loss. `ecn=classic` ([`ecn`]) answers it with the algorithm's loss response once per recovery period; [`dctcp`] and [`prague`] with alpha |
//! | application-limited (RFC 9002 7.8) | `NewReno::window_underused`: `delivery_rate_app_limited` (the application had nothing to send when the acknowledged packet left), unless the last packet sent filled the window. Not `app_limited`, which quiche sets whenever a packet leaves with bytes in flight below the window, and that is every packet of a paced sender; and not the sample alone, which quiche also sets when an event loop reads two ACKs before the application writes again |
//!
//! Where a paper changes something outside the window and pacing (an RTO
//! rule, a path switch), the algorithm's module says whether a hook carries it
//! over or why it does not.
//!
//! [`LossEvent`]: quiche::cc::LossEvent

pub mod bbr3;
pub mod binomial;
pub mod br_tcp;
pub mod dcm;
pub mod dctcp;
pub mod ecn;
pub mod estimators;
pub mod ewphcc;
pub mod exp;
pub mod fixed;
pub mod newreno;
pub mod prague;
pub mod pso;
pub mod registry;
pub mod rwnd;
pub mod slow_start;
pub mod smcc;
pub mod testing;
pub mod tuned;
pub mod units;
pub mod vegas;
pub mod westwood;

pub use registry::{
    algorithms, parse, AlgorithmInfo, Controller, Origin, ParamInfo, ParamKind, SpecError,
};
