//! Simulated cross traffic: the emulator's constant-bit-rate schedule,
//! optionally on/off, each source its own traffic class after the flows.

use crate::link::Dir;
use crate::scenario::{self, Scenario};

/// A cross-traffic source: constant bit rate, optionally on/off.
pub(super) struct CrossSource {
    spec: scenario::CrossSpec,
    gap_ns: f64,
    k: u64,
    /// Bytes sent and received.
    pub(super) sent: u64,
    pub(super) received: u64,
    /// Whether the last datagram fell in an on period (for markers).
    was_on: Option<bool>,
}

impl CrossSource {
    /// Time of the next datagram and whether it is sent (on period), or
    /// `None` once the source has ended.
    pub(super) fn next(&self, end_ns: u64) -> Option<u64> {
        let t = self.spec.start_ns + (self.k as f64 * self.gap_ns) as u64;
        let stop = self
            .spec
            .duration_ns
            .map_or(end_ns, |d| (self.spec.start_ns + d).min(end_ns));
        (t < stop).then_some(t)
    }

    /// Takes the next datagram if it is due by `now`: whether it falls in
    /// an on period (and so is sent) and whether that changed since the
    /// last one (a marker goes into every qlog).
    pub(super) fn take_due(&mut self, now: u64, end_ns: u64) -> Option<Due> {
        let t = self.next(end_ns).filter(|&t| t <= now)?;
        self.k += 1;
        let on = self.spec.is_on(t - self.spec.start_ns);
        let turned = self.was_on != Some(on);
        self.was_on = Some(on);
        if on {
            self.sent += self.spec.packet_size as u64;
        }
        Some(Due { on, turned })
    }

    /// The size of its datagrams, bytes.
    pub(super) fn packet_size(&self) -> usize {
        self.spec.packet_size as usize
    }

    /// Its rate while on, bit/s.
    pub(super) fn rate_bps(&self) -> f64 {
        self.spec.rate_bps
    }

    /// The way its datagrams go.
    pub(super) fn dir(&self) -> Dir {
        match self.spec.direction {
            scenario::Direction::Upload => Dir::Up,
            scenario::Direction::Download => Dir::Down,
        }
    }
}

/// A datagram of a source that has come due.
pub(super) struct Due {
    /// It falls in an on period: it is sent.
    pub(super) on: bool,
    /// The source turned on or off with it.
    pub(super) turned: bool,
}

/// The scenario's sources with their starts in the repetition of `seed`.
pub(super) fn sources(sc: &Scenario, seed: u64) -> Vec<CrossSource> {
    sc.rep_cross(seed)
        .into_iter()
        .map(|c| CrossSource {
            gap_ns: c.packet_size as f64 * 8.0 / c.rate_bps * 1e9,
            k: 0,
            sent: 0,
            received: 0,
            was_on: None,
            spec: c,
        })
        .collect()
}
