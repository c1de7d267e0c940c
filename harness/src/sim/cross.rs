//! Simulated cross traffic: the emulator's constant-bit-rate schedule,
//! optionally on/off, each source its own traffic class after the flows.

use super::world::World;
use crate::emu::Packet;
use crate::link::Dir;
use crate::scenario::{self, Scenario};
use link_model::topology::LinkSinks;

/// A cross-traffic source: constant bit rate, optionally on/off.
pub(super) struct CrossSource {
    spec: scenario::CrossSpec,
    gap_ns: f64,
    k: u64,
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

impl World {
    /// Sends every cross datagram due by `now` (`end_ns`: the scenario's
    /// end), with a marker in every qlog where a source turns on or off.
    pub(super) fn send_cross(&mut self, now: u64, end_ns: u64, log: &mut dyn LinkSinks) {
        let nflows = self.flows.len();
        for j in 0..self.cross.len() {
            while let Some(t) = self.cross[j].next(end_ns) {
                if t > now {
                    break;
                }
                let c = &mut self.cross[j];
                c.k += 1;
                let on = c.spec.is_on(t - c.spec.start_ns);
                if c.was_on != Some(on) {
                    c.was_on = Some(on);
                    let marker = serde_json::json!({
                        "type": if on { "cross_on" } else { "cross_off" },
                        "source": j,
                        "rate_bps": c.spec.rate_bps,
                    });
                    let now_i = self.at(now);
                    self.marker(marker, now_i);
                }
                if on {
                    self.cross_datagram(j, nflows + j, now, log);
                }
            }
        }
    }

    /// One datagram of source `j` (traffic class `class`) onto the link.
    fn cross_datagram(&mut self, j: usize, class: usize, now: u64, log: &mut dyn LinkSinks) {
        let c = &mut self.cross[j];
        let size = c.spec.packet_size as usize;
        c.sent += size as u64;
        let d = match c.spec.direction {
            scenario::Direction::Upload => Dir::Up,
            scenario::Direction::Download => Dir::Down,
        };
        let mut data = self.bufs.pool.pop().unwrap_or_default();
        data.clear();
        data.resize(size, 0);
        let pkt = Packet {
            data,
            flow: class as u16,
            class: class as u16,
            arrival_ns: now,
            hop: 0,
        };
        self.net.push(d, pkt, now, log);
    }
}
