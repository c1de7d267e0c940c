//! Delivery in bursts ([`crate::link::Aggregation`] describes it): each
//! packet's delivery time is moved to the next release, at the phase plus
//! a multiple of the period, that has room for it. Releases are filled in
//! the order packets leave the link, as a MAC's queue is first in first
//! out: a packet never goes in a release before the one the packet ahead
//! of it went in.

use crate::link::{Aggregation, QueueLimit};

/// The release being filled.
#[derive(Clone, Debug)]
pub struct Releases {
    period: u64,
    phase: u64,
    max_packets: u64,
    max_bytes: u64,
    /// The last release given (its time, ns), and the packets and bytes
    /// it carries.
    current: u64,
    packets: u64,
    bytes: u64,
}

impl Releases {
    /// The releases of `a`; `draw`, a random number from the link's seed,
    /// places them when `a` gives no phase.
    pub fn new(a: &Aggregation, draw: u64) -> Releases {
        let (max_packets, max_bytes) = match a.burst {
            None => (u64::MAX, u64::MAX),
            Some(QueueLimit::Packets(p)) => (p.max(1), u64::MAX),
            Some(QueueLimit::Bytes(b)) => (u64::MAX, b.max(1)),
            Some(QueueLimit::Bdp(_)) => unreachable!("parse refuses a BDP burst"),
        };
        let period = a.period_ns.max(1);
        Releases {
            period,
            phase: a.phase_ns.unwrap_or(draw) % period,
            max_packets,
            max_bytes,
            current: 0,
            packets: 0,
            bytes: 0,
        }
    }

    /// When a packet of `len` bytes that would arrive at `at` is handed
    /// over: the first release at or after `at`, and no earlier than the
    /// previous packet's, with room for it (a release always takes its
    /// first packet, however large).
    pub fn release_at(&mut self, at: u64, len: u64) -> u64 {
        let next = match at.checked_sub(self.phase) {
            None | Some(0) => self.phase,
            Some(d) => self
                .phase
                .saturating_add(d.div_ceil(self.period).saturating_mul(self.period)),
        };
        if next > self.current {
            (self.current, self.packets, self.bytes) = (next, 0, 0);
        } else if self.packets > 0
            && (self.packets >= self.max_packets || self.bytes.saturating_add(len) > self.max_bytes)
        {
            (self.current, self.packets, self.bytes) =
                (self.current.saturating_add(self.period), 0, 0);
        }
        self.packets += 1;
        self.bytes = self.bytes.saturating_add(len);
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(period_ms: u64, burst: Option<QueueLimit>) -> Releases {
        Releases::new(
            &Aggregation {
                period_ns: period_ms * 1_000_000,
                burst,
                phase_ns: Some(0),
            },
            12345,
        )
    }

    #[test]
    fn packets_leave_at_the_next_release_with_room() {
        let ms = 1_000_000;
        let mut r = agg(4, None);
        assert_eq!(r.release_at(0, 1500), 0);
        assert_eq!(r.release_at(1, 1500), 4 * ms);
        assert_eq!(r.release_at(4 * ms, 1500), 4 * ms);
        assert_eq!(r.release_at(4 * ms + 1, 1500), 8 * ms);
        // Never before the packet ahead.
        assert_eq!(r.release_at(2 * ms, 1500), 8 * ms);
        // At most 3 packets per release: the fourth waits for the next.
        let mut r = agg(4, Some(QueueLimit::Packets(3)));
        let t: Vec<u64> = (0..7).map(|i| r.release_at(ms + i, 1500) / ms).collect();
        assert_eq!(t, vec![4, 4, 4, 8, 8, 8, 12]);
        // Bytes: 4000 per release; a packet larger than that still goes,
        // alone; a small one after it does not jump ahead into release 8.
        let mut r = agg(4, Some(QueueLimit::Bytes(4000)));
        let t: Vec<u64> = [1500, 1500, 1500, 9000, 100, 3000]
            .iter()
            .map(|&l| r.release_at(ms, l) / ms)
            .collect();
        assert_eq!(t, vec![4, 4, 8, 12, 16, 16]);
        // A later arrival opens its own release.
        assert_eq!(r.release_at(100 * ms, 100) / ms, 100);
    }

    #[test]
    fn a_phase_moves_every_release() {
        let ms = 1_000_000;
        let phased = |phase_ns: Option<u64>, draw: u64| {
            Releases::new(
                &Aggregation {
                    period_ns: 4 * ms,
                    burst: None,
                    phase_ns,
                },
                draw,
            )
        };
        let mut r = phased(Some(ms), 0);
        let t: Vec<u64> = [0, ms, ms + 1, 5 * ms, 6 * ms]
            .iter()
            .map(|&at| r.release_at(at, 1500))
            .collect();
        assert_eq!(t, vec![ms, ms, 5 * ms, 5 * ms, 9 * ms]);
        // Without one, the draw places them within a period.
        let mut r = phased(None, 4 * ms + 3 * ms);
        assert_eq!(r.release_at(0, 1500), 3 * ms);
        assert_eq!(r.release_at(3 * ms + 1, 1500), 7 * ms);
        // Near the end of time it saturates instead of wrapping.
        let mut r = phased(Some(ms), 0);
        assert_eq!(r.release_at(u64::MAX - 1, 1500), u64::MAX);
    }
}
