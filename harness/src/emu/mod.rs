//! `emu`, the userspace link emulator.
//!
//! A UDP relay with an emulated bottleneck in each direction. Clients send
//! to a listening address of the emulator; it forwards each client's
//! datagrams to the route's target (the server) from a socket of its own
//! per client, and the server's replies back to the client, so every flow
//! of every route shares the same two bottlenecks. It runs on loopback, or
//! between network namespaces when its sockets are created in a router
//! namespace ([`EmuConfig::netns`]).
//!
//! Each direction is a [`pipeline::Pipeline`]: loss, duplication, queue +
//! AQM (one FIFO, or deficit round robin over per-class queues:
//! [`sched`]), serialization, delay + jitter, reordering, one element per file,
//! each driven by explicit times so it is testable alone with a fake
//! clock. The emulator's own thread keeps time with `CLOCK_MONOTONIC`,
//! sleeps in `ppoll` with a 1 ns timer slack (high-resolution timers, not
//! a 1 ms tick). While the link is busy (packets coming and going more
//! often than one per [`EmuConfig::wake_gap`], 50 µs unless
//! `CCLAB_EMU_WAKE_GAP` says otherwise) it wakes at most once per gap, serving every event of the gap
//! at once; otherwise it wakes for every event, 20 µs early, and spins the
//! rest of the way. `CCLAB_EMU_PRIORITY=fifo` runs the thread at a
//! real-time priority ([`priority`]), so that a busy host does not make
//! the link late.
//!
//! In IP mode ([`EmuMode::Ip`], [`Emulator::start_ip`]) the same links
//! carry whole IP packets instead: the endpoints run in two network
//! namespaces joined only by a TUN device each ([`tun::TunNet`]), so TCP
//! and any other IPv4 traffic crosses the link, charged as the relay
//! charges a UDP datagram ([`tunnel`]).

// The elements live in the link model; they are re-exported under their
// old paths (`emu::pipeline`, `emu::rng`, ...).
pub use link_model::elements::{
    codel, delay, duplicate, loss, packet, pie, pipeline, queue, red, reorder, rng, sched,
    serializer,
};
mod config;
mod engine;
pub mod priority;
mod relay;
mod runtime;
mod sockets;
pub mod tun;
pub mod tunnel;

pub use config::{
    wake_gap_from_env, EmuConfig, EmuError, EmuMode, EmuReport, Forward, IpStats, Lateness,
    Snapshot, DEFAULT_WAKE_GAP,
};
pub use packet::{DropReason, Packet};
pub use pipeline::{Counters, Pipeline};
pub use priority::{Priority, DEFAULT_PRIORITY};
pub use runtime::Emulator;

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds on `CLOCK_MONOTONIC`, the clock shared by every process on
/// the machine (and every namespace), so a probe and the emulator agree.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time this thread has used, ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}
