//! CoDel, Controlled Delay (RFC 8289), at dequeue.
//!
//! A packet's sojourn time is how long it waited in the queue. When the
//! sojourn time has stayed at or above `target` for a whole `interval`,
//! CoDel enters the dropping state: it drops a packet, then the next ones
//! at times spaced `interval/√count` apart while the sojourn stays above
//! target, and leaves the state when it falls below. On re-entry soon after
//! leaving, `count` resumes from where the last dropping episode left it
//! (RFC 8289 §5.5). As in the RFC, nothing is dropped while the queue holds
//! no more than one maximum-size packet.

use crate::link::CoDelParams;

/// CoDel's control state.
#[derive(Clone, Debug, Default)]
pub struct CoDel {
    p: CoDelParams,
    /// When the sojourn time will have been above target for an interval (0: not above).
    first_above_time: u64,
    /// When the next drop is due in the dropping state.
    drop_next: u64,
    /// Drops in the current dropping state.
    count: u32,
    /// `count` when the last dropping state began.
    lastcount: u32,
    /// In the dropping state.
    dropping: bool,
}

/// What CoDel decides about the packet at the head of the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it.
    Send,
    /// Drop it and look at the next one.
    Drop,
}

impl CoDel {
    /// CoDel with these parameters.
    pub fn new(p: CoDelParams) -> CoDel {
        CoDel {
            p,
            ..CoDel::default()
        }
    }

    fn control_law(&self, t: u64) -> u64 {
        t + (self.p.interval_ns as f64 / (self.count.max(1) as f64).sqrt()) as u64
    }

    /// Whether the sojourn time says "ok to drop" (RFC 8289's dodequeue).
    fn ok_to_drop(&mut self, sojourn: u64, bytes_left: u64, max_packet: u64, now: u64) -> bool {
        if sojourn < self.p.target_ns || bytes_left <= max_packet {
            self.first_above_time = 0;
            false
        } else if self.first_above_time == 0 {
            self.first_above_time = now + self.p.interval_ns;
            false
        } else {
            now >= self.first_above_time
        }
    }

    /// The queue is empty at dequeue time.
    pub fn on_empty(&mut self) {
        self.first_above_time = 0;
        self.dropping = false;
    }

    /// Judges the head packet, dequeued at `now` after `sojourn` ns in the
    /// queue, with `bytes_left` bytes still queued behind it. Call again for
    /// the next head after every `Drop`; `first` is true for the first head
    /// of this dequeue.
    pub fn judge(
        &mut self,
        first: bool,
        sojourn: u64,
        bytes_left: u64,
        max_packet: u64,
        now: u64,
    ) -> Verdict {
        let ok = self.ok_to_drop(sojourn, bytes_left, max_packet, now);
        if self.dropping {
            if !ok {
                self.dropping = false;
                return Verdict::Send;
            }
            if now >= self.drop_next {
                self.count += 1;
                self.drop_next = self.control_law(self.drop_next);
                return Verdict::Drop;
            }
            Verdict::Send
        } else if ok && first {
            // Enter the dropping state: drop this one, and set the schedule
            // (RFC 8289 §5.5: resume the count when re-entering soon).
            self.dropping = true;
            let delta = self.count.saturating_sub(self.lastcount);
            self.count =
                if delta > 1 && now.saturating_sub(self.drop_next) < 16 * self.p.interval_ns {
                    delta
                } else {
                    1
                };
            self.drop_next = self.control_law(now);
            self.lastcount = self.count;
            Verdict::Drop
        } else {
            Verdict::Send
        }
    }

    /// In the dropping state.
    pub fn dropping(&self) -> bool {
        self.dropping
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn no_drops_below_target_or_for_short_bursts() {
        let mut c = CoDel::new(CoDelParams::default());
        for i in 0..1000 {
            assert_eq!(c.judge(true, 4 * MS, 100_000, 1500, i * MS), Verdict::Send);
        }
        // Above target, but less than an interval: no drop.
        for i in 0..99 {
            assert_eq!(
                c.judge(true, 10 * MS, 100_000, 1500, 1000 * MS + i * MS),
                Verdict::Send
            );
        }
        // A queue of one packet is never dropped from.
        let mut d = CoDel::new(CoDelParams::default());
        for i in 0..1000 {
            assert_eq!(d.judge(true, 50 * MS, 1500, 1500, i * MS), Verdict::Send);
        }
    }

    #[test]
    fn drops_follow_the_control_law() {
        let mut c = CoDel::new(CoDelParams::default());
        let mut drops = Vec::new();
        // A standing 20 ms queue, one dequeue per ms.
        for i in 0..1000u64 {
            let now = i * MS;
            if c.judge(true, 20 * MS, 100_000, 1500, now) == Verdict::Drop {
                drops.push(now);
                // The next head is judged right away.
                while c.judge(false, 20 * MS, 100_000, 1500, now) == Verdict::Drop {
                    drops.push(now);
                }
            }
        }
        // First above at t=0 → the first drop at t=100 ms, the next one an
        // interval later (count 1), then gaps of 100/√2, 100/√3, ... ms
        // from the previous due time, seen on the 1 ms dequeue grid.
        assert_eq!(drops[0], 100 * MS);
        let gaps: Vec<u64> = drops.windows(2).map(|w| (w[1] - w[0]) / MS).collect();
        assert_eq!(&gaps[..5], &[100, 71, 58, 50, 45], "{gaps:?}");
        assert!(c.dropping());
        // The queue drains: leave the dropping state.
        assert_eq!(c.judge(true, MS, 100_000, 1500, 1000 * MS), Verdict::Send);
        assert!(!c.dropping());
    }
}
