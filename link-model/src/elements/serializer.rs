//! Serialization at the link rate: when a packet starts and finishes
//! crossing the bottleneck.
//!
//! At a fixed rate, a packet of `n` bytes occupies the link for
//! `n·8·10⁹/rate` ns. The division's remainder is carried into the next
//! packet, so over any run the link moves exactly `rate` bits per second,
//! whatever the packet sizes (a 1350-byte packet at 1 Gbit/s takes
//! 10 800 ns; at 3 Gbit/s 3600 ns; at 7 Mbit/s 1 542 857.14 ns).
//!
//! With a mahimahi trace, the link instead has delivery opportunities of
//! 1500 bytes at the trace's times; a packet leaves at the opportunity
//! that covers its last byte, an opportunity's unused bytes carry over only
//! to a packet that was already waiting, and opportunities that find the
//! queue empty are lost (as in mahimahi).

use crate::link::trace::{Trace, OPPORTUNITY_BYTES};

#[derive(Clone, Debug)]
enum Mode {
    Rate {
        bps: u64,
        /// Remainder of the last division, in bit·ns units (< bps).
        carry: u64,
    },
    Trace {
        ops: std::sync::Arc<[u64]>,
        period: u64,
        /// Index of the next unused opportunity (counting across periods).
        next: u64,
        /// Bytes left in the last used opportunity, and its time.
        left: u64,
        left_at: u64,
    },
}

/// When a packet may leave the queue and when it is off the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Leaves the queue.
    pub start: u64,
    /// Last bit on the wire.
    pub end: u64,
    state: (u64, u64, u64),
}

/// The link's transmitter.
#[derive(Clone, Debug)]
pub struct Serializer {
    mode: Mode,
    /// The link is busy until then.
    busy_until: u64,
    /// Scheduled changes of a fixed-rate link, for its capacity: from each
    /// time on, the rate (bit/s), and the pauses (from, until) during
    /// which it sends nothing. Empty for a link that never changed.
    rates: Vec<(u64, u64)>,
    pauses: Vec<(u64, u64)>,
}

impl Serializer {
    /// A link of `rate_bps` bit/s.
    pub fn rate(rate_bps: f64) -> Serializer {
        Serializer {
            mode: Mode::Rate {
                bps: rate_bps.round().max(1.0) as u64,
                carry: 0,
            },
            busy_until: 0,
            rates: Vec::new(),
            pauses: Vec::new(),
        }
    }

    /// A link that follows a trace, starting at time 0.
    pub fn trace(t: &Trace) -> Serializer {
        Serializer {
            mode: Mode::Trace {
                ops: t.opportunities_ns.clone(),
                period: t.period_ns,
                next: 0,
                left: 0,
                left_at: 0,
            },
            busy_until: 0,
            rates: Vec::new(),
            pauses: Vec::new(),
        }
    }

    /// Plans a packet of `size` bytes that is at the head of the queue
    /// from `ready` on. Nothing changes until [`Serializer::commit`].
    pub fn plan(&self, size: usize, ready: u64) -> Plan {
        let size = size as u64;
        match &self.mode {
            Mode::Rate { bps, carry } => {
                let start = ready.max(self.busy_until);
                let num = size as u128 * 8 * 1_000_000_000 + *carry as u128;
                let dur = (num / *bps as u128) as u64;
                let rem = (num % *bps as u128) as u64;
                Plan {
                    start,
                    end: start + dur,
                    state: (rem, 0, 0),
                }
            }
            Mode::Trace {
                ops,
                period,
                next,
                left,
                left_at,
            } => {
                let n = ops.len() as u64;
                let time = |i: u64| (i / n) * period + ops[(i % n) as usize];
                let mut need = size;
                // Leftover bytes of an opportunity serve only a packet that
                // was already waiting at that time.
                if *left > 0 && ready <= *left_at {
                    if need <= *left {
                        return Plan {
                            start: *left_at,
                            end: *left_at,
                            state: (*next, *left - need, *left_at),
                        };
                    }
                    need -= *left;
                }
                // Skip opportunities that passed before the packet was ready.
                let mut i = *next;
                if time(i) < ready {
                    let base = (ready / period) * n;
                    i = i.max(base);
                    let p = ready % period;
                    let off = ops.partition_point(|&o| o < p) as u64;
                    i = i.max(base + off);
                    while time(i) < ready {
                        i += 1;
                    }
                }
                loop {
                    let t = time(i);
                    i += 1;
                    if need <= OPPORTUNITY_BYTES {
                        return Plan {
                            start: t,
                            end: t,
                            state: (i, OPPORTUNITY_BYTES - need, t),
                        };
                    }
                    need -= OPPORTUNITY_BYTES;
                }
            }
        }
    }

    /// Commits a plan made by [`Serializer::plan`]; returns when the packet is off the link.
    pub fn commit(&mut self, plan: Plan) -> u64 {
        match &mut self.mode {
            Mode::Rate { carry, .. } => *carry = plan.state.0,
            Mode::Trace {
                next,
                left,
                left_at,
                ..
            } => (*next, *left, *left_at) = plan.state,
        }
        self.busy_until = plan.end;
        plan.end
    }

    /// From `at` on, packets that start crossing take `rate_bps` (a
    /// fixed-rate link; a trace's capacity is the trace's).
    pub fn set_rate(&mut self, at: u64, rate_bps: f64) {
        if let Mode::Rate { bps, carry } = &mut self.mode {
            if self.rates.is_empty() {
                self.rates.push((0, *bps));
            }
            *bps = rate_bps.round().max(1.0) as u64;
            *carry = 0;
            self.rates.push((at, *bps));
        }
    }

    /// The link starts nothing between `from` and `until` (a packet on
    /// the wire at `from` finishes).
    pub fn pause(&mut self, from: u64, until: u64) {
        self.busy_until = self.busy_until.max(until);
        if let Mode::Rate { bps, .. } = self.mode {
            if self.rates.is_empty() {
                self.rates.push((0, bps));
            }
        }
        // Kept disjoint and in order (merged with the last if they
        // overlap), so the capacity finds the ones it needs by search.
        match self.pauses.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(until),
            _ => self.pauses.push((from, until)),
        }
    }

    /// The capacity in bits between `t0` and `t1` ns (for utilization).
    pub fn capacity_bits(&self, t0: u64, t1: u64) -> f64 {
        if t1 <= t0 {
            return 0.0;
        }
        match &self.mode {
            Mode::Rate { bps, .. } if self.rates.is_empty() => *bps as f64 * (t1 - t0) as f64 / 1e9,
            Mode::Rate { .. } => {
                // The rate from each change on, less the pauses; both lists
                // are in time order, so only the pieces in [t0, t1) are read.
                let first = self.rates.partition_point(|r| r.0 <= t0).saturating_sub(1);
                let mut bits = 0.0;
                for (i, &(from, rate)) in self.rates.iter().enumerate().skip(first) {
                    if from >= t1 {
                        break;
                    }
                    let to = self.rates.get(i + 1).map_or(u64::MAX, |r| r.0);
                    let (a, b) = (from.max(t0), to.min(t1));
                    if a >= b {
                        continue;
                    }
                    let p = self.pauses.partition_point(|p| p.1 <= a);
                    let paused: u64 = self.pauses[p..]
                        .iter()
                        .take_while(|p| p.0 < b)
                        .map(|&(p0, p1)| p1.min(b).saturating_sub(p0.max(a)))
                        .sum();
                    bits += rate as f64 * (b - a).saturating_sub(paused) as f64 / 1e9;
                }
                bits
            }
            Mode::Trace { ops, period, .. } => {
                let count = |t: u64| -> u64 {
                    (t / period) * ops.len() as u64
                        + ops.partition_point(|&o| o < t % period) as u64
                };
                (count(t1) - count(t0)) as f64 * OPPORTUNITY_BYTES as f64 * 8.0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn send(s: &mut Serializer, size: usize, ready: u64) -> (u64, u64) {
        let p = s.plan(size, ready);
        let start = p.start;
        (start, s.commit(p))
    }

    #[test]
    fn exact_rate_with_carry() {
        // 7 Mbit/s: 1350 B takes 1 542 857.142857 ns; a million packets
        // back to back end exactly at 10⁶·1350·8/7e6 s, within 1 ns.
        let mut s = Serializer::rate(7e6);
        let mut end = 0;
        for _ in 0..1_000_000 {
            end = send(&mut s, 1350, 0).1;
        }
        let exact = 1_000_000u128 * 1350 * 8 * 1_000_000_000 / 7_000_000;
        assert!((end as i128 - exact as i128).abs() <= 1, "{end} vs {exact}");
        // Without carry the error would be 0.142857 ns × 10⁶ = 142 µs.
    }

    #[test]
    fn idle_link_starts_at_ready() {
        let mut s = Serializer::rate(1e9);
        assert_eq!(send(&mut s, 1250, 100), (100, 10_100));
        // Ready before the link is free: waits for it.
        assert_eq!(send(&mut s, 1250, 5_000), (10_100, 20_100));
        // Ready after: starts when ready.
        assert_eq!(send(&mut s, 1250, 50_000), (50_000, 60_000));
        assert_eq!(s.capacity_bits(0, 1_000_000_000), 1e9);
    }

    #[test]
    fn trace_opportunities() {
        // Opportunities at 1, 1, 2 ms; period 4 ms (the last line).
        let t = Trace::parse("1\n1\n2\n4\n", Path::new("t")).unwrap();
        let mut s = Serializer::trace(&t);
        let ms = 1_000_000;
        // Two 1000 B packets waiting from 0: the first leaves at 1 ms; the
        // second uses 500 B left in it plus 500 B of the second 1 ms slot.
        assert_eq!(send(&mut s, 1000, 0).1, ms);
        assert_eq!(send(&mut s, 1000, 0).1, ms);
        // A packet ready at 3 ms: the 2 ms slot is lost; 4 ms slot it is.
        assert_eq!(send(&mut s, 1000, 3 * ms).1, 4 * ms);
        // Next period: 1 ms + 4 ms = 5 ms.
        assert_eq!(send(&mut s, 1500, 4 * ms + 1).1, 5 * ms);
        // A 3000 B packet spans two opportunities: 5 ms (second) and 6 ms.
        assert_eq!(send(&mut s, 3000, 5 * ms).1, 6 * ms);
        // Capacity: 4 opportunities per 4 ms = 12 Mbit/s.
        assert_eq!(s.capacity_bits(0, 4 * ms), 4.0 * 1500.0 * 8.0);
        assert_eq!(s.capacity_bits(0, 400 * ms), 400.0 * 1500.0 * 8.0);
    }
}
