//! Random Early Detection (Floyd & Jacobson, 1993), with ns-2's parameter
//! names, idle-time decay and "gentle" mode.
//!
//! On every arrival the average queue `avg` (packets) is updated:
//! `avg ← (1 − wq)·avg + wq·q`, or after an idle period of `m` packet
//! times `avg ← (1 − wq)^m·avg`. Below `min_th` nothing is dropped. Between
//! `min_th` and `max_th`, `pb = max_p·(avg − min_th)/(max_th − min_th)` and
//! the packet is dropped with `pa = pb/(1 − count·pb)`, `count` being the
//! packets since the last drop (this spreads drops out evenly). With
//! `gentle`, between `max_th` and `2·max_th` `pb` rises linearly from
//! `max_p` to 1; above that (or above `max_th` without gentle) every
//! arrival is dropped. `q` counts packets; the hard queue limit is applied
//! separately by the queue.
//!
//! As in ns-2 (`REDQueue::enque` tests `qlen > 1` before any early or
//! forced drop), an arrival that finds at most one packet queued is never
//! dropped by RED. Without that guard an average left above `max_th` when
//! the queue drains drops every later arrival to the empty queue, and since
//! each such arrival ends the idle period the average then decays by only
//! `wq` per packet: a sender reduced to timeout probes is cut off for good
//! (seen as connections that never recover on a RED bottleneck).
//!
//! Two options of ns-2's RED (`queue/red.cc`) change this, both off unless
//! asked for (and both on with `red:auto=true`, as in ns-2.35's defaults):
//! `wait` (ns-2 `wait_`) makes the probability after `count` undropped
//! arrivals 0 while `count·pb < 1`, then `pb/(2 − count·pb)`, then 1
//! (`REDQueue::modify_p`); `bytes` (ns-2 `queue_in_bytes_` and `bytes_`)
//! counts `q` in bytes, in units of `mean_pktsize` (so the guard above is
//! "the queue is empty"), counts `count` in bytes over `mean_pktsize`
//! (rounded down, as ns-2's integer division does), and scales a packet's
//! probability by its size over `mean_pktsize`. The parameters this
//! element gets are concrete: automatic RED is resolved before
//! ([`RedParams::resolved`]).

use super::rng::Rng;
use crate::link::RedParams;

/// RED's state.
#[derive(Clone, Debug)]
pub struct Red {
    p: RedParams,
    /// Packets per second the link transmits at `mean_pktsize` (for idle decay).
    ptc: f64,
    /// The average queue, packets.
    pub avg: f64,
    /// Packets since the last drop, or −1 below `min_th`.
    count: i64,
    /// Bytes since the last drop (with `bytes`).
    count_bytes: u64,
    /// When the queue went empty, if it is.
    idle_since: Option<u64>,
    rng: Rng,
}

impl Red {
    /// RED for a link of `rate_bps`.
    pub fn new(p: RedParams, rate_bps: f64, rng: Rng) -> Red {
        Red {
            p,
            ptc: rate_bps / (8.0 * p.mean_pktsize as f64),
            avg: 0.0,
            count: -1,
            count_bytes: 0,
            idle_since: Some(0),
            rng,
        }
    }

    /// The queue became empty at `now`.
    pub fn on_idle(&mut self, now: u64) {
        self.idle_since = Some(now);
    }

    /// An arrival of `size` bytes at `now` finds `q` packets (`q_bytes`
    /// bytes) queued: true to drop it early.
    pub fn on_arrival(&mut self, q: usize, q_bytes: u64, size: usize, now: u64) -> bool {
        self.judge(q, q_bytes, size, now) != RedVerdict::Pass
    }

    /// As [`Red::on_arrival`], telling an unforced (probabilistic) early
    /// drop, which `ecn` turns into a mark, from a forced one (the average
    /// above `max_th`, or `2·max_th` with gentle), which stays a drop
    /// (ns-2 `DTYPE_UNFORCED` / `DTYPE_FORCED`). Either resets `count`,
    /// as a drop does.
    pub fn judge(&mut self, q: usize, q_bytes: u64, size: usize, now: u64) -> RedVerdict {
        let RedParams {
            min_th,
            max_th,
            max_p,
            wq,
            gentle,
            mean_pktsize,
            wait,
            bytes,
            ..
        } = self.p;
        let mean = mean_pktsize as f64;
        // The queue as RED measures it: packets, or bytes in units of
        // mean_pktsize.
        let qlen = if bytes {
            q_bytes as f64 / mean
        } else {
            q as f64
        };
        match self.idle_since.take() {
            Some(since) if q == 0 => {
                let m = now.saturating_sub(since) as f64 / 1e9 * self.ptc;
                self.avg *= (1.0 - wq).powf(m);
            }
            _ => self.avg = (1.0 - wq) * self.avg + wq * qlen,
        }
        // ns-2 drops nothing while `qlen > 1` fails: one packet, or in
        // bytes an empty queue.
        let guarded = if bytes { q_bytes <= 1 } else { q <= 1 };
        let pb = if self.avg < min_th {
            self.count = -1;
            self.count_bytes = 0;
            return RedVerdict::Pass;
        } else if guarded {
            return RedVerdict::Pass;
        } else if self.avg < max_th {
            max_p * (self.avg - min_th) / (max_th - min_th)
        } else if gentle && self.avg < 2.0 * max_th {
            max_p + (1.0 - max_p) * (self.avg - max_th) / max_th
        } else {
            self.count = 0;
            self.count_bytes = 0;
            return RedVerdict::Forced;
        };
        self.count += 1;
        self.count_bytes += size as u64;
        let c = if bytes {
            (self.count_bytes / mean_pktsize as u64) as f64
        } else {
            self.count as f64
        };
        let mut pa = if wait {
            if c * pb < 1.0 {
                0.0
            } else if c * pb < 2.0 {
                pb / (2.0 - c * pb)
            } else {
                1.0
            }
        } else if c * pb < 1.0 {
            pb / (1.0 - c * pb)
        } else {
            1.0
        };
        if bytes && pa < 1.0 {
            pa *= size as f64 / mean;
        }
        if self.rng.chance(pa.min(1.0)) {
            self.count = 0;
            self.count_bytes = 0;
            RedVerdict::Early
        } else {
            RedVerdict::Pass
        }
    }
}

/// What RED decides about an arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedVerdict {
    /// Queue it.
    Pass,
    /// Drop it early, by chance: with `ecn`, mark an ECN-capable one.
    Early,
    /// Drop it: the average is beyond where RED drops every arrival.
    Forced,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red() -> Red {
        Red::new(RedParams::default(), 8e6, Rng::new(1, 1))
    }

    #[test]
    fn average_follows_ewma_and_decays_when_idle() {
        let mut r = red();
        // First arrival after idle at t=0 with q=0: avg stays 0.
        assert!(!r.on_arrival(0, 0, 1000, 0));
        assert_eq!(r.avg, 0.0);
        for _ in 0..3 {
            r.on_arrival(10, 10_000, 1000, 1);
        }
        // avg = 10·(1 − 0.998³)
        let want = 10.0 * (1.0 - 0.998f64.powi(3));
        assert!((r.avg - want).abs() < 1e-12, "{}", r.avg);
        // Idle for 1 s at 1000 packets/s (8 Mbit/s, 1000 B): avg · 0.998^1000.
        r.on_idle(1_000_000_000);
        r.on_arrival(0, 0, 1000, 2_000_000_000);
        assert!((r.avg - want * 0.998f64.powf(1000.0)).abs() < 1e-12);
    }

    #[test]
    fn an_empty_queue_is_never_cut_off() {
        // The average is far above max_th, but the queue has drained: the
        // next arrivals get through, and the queue builds up again.
        let mut r = red();
        r.avg = 40.0;
        r.idle_since = None;
        assert!(!(0..100).any(|_| r.on_arrival(0, 0, 1000, 1)));
        assert!(!r.on_arrival(1, 1000, 1000, 1));
        // Two or more queued: above max_th, RED drops.
        r.avg = 40.0;
        assert!(r.on_arrival(2, 2000, 1000, 1));
    }

    #[test]
    fn drop_probability_regions() {
        // Hold avg fixed at 10 (half way between 5 and 15): pb = 0.05, and
        // with the count spreading, one drop every ~1/pb … 2/pb arrivals.
        let mut r = red();
        r.avg = 10.0; // and q = 10 keeps it there
        let mut drops = 0;
        let n = 100_000;
        for _ in 0..n {
            if r.on_arrival(10, 10_000, 1000, 1) {
                drops += 1;
            }
        }
        // Uniformly spread drops: the mean gap is (1/pb + 1)/2 ≈ 10.5, so
        // the drop rate is ≈ 0.095 (Floyd & Jacobson §7).
        let rate = drops as f64 / n as f64;
        assert!((0.085..0.105).contains(&rate), "{rate}");
        // Gentle region: avg = 22.5 → pb = 0.1 + 0.9·0.5 = 0.55.
        let mut g = red();
        g.avg = 22.5;
        g.idle_since = None;
        let mut gd = 0;
        for _ in 0..10_000 {
            g.avg = 22.5;
            // count −1 → 0 on this arrival, so pa = pb exactly.
            g.count = -1;
            gd += g.on_arrival(22, 22_000, 1000, 1) as u32;
        }
        let grate = gd as f64 / 10_000.0;
        assert!((grate - 0.55).abs() < 0.03, "{grate}");
        // Above 2·max_th: always.
        g.avg = 31.0;
        assert!(g.on_arrival(40, 40_000, 1000, 1));
        // Below min_th: never.
        let mut low = red();
        low.idle_since = None;
        assert!(!(0..1000).any(|_| low.on_arrival(2, 2000, 1000, 1)));
    }

    #[test]
    fn wait_spreads_drops_over_one_to_two_over_pb() {
        // pb = 0.05 held fixed: with wait, no drop before count·pb reaches
        // 1 (20 arrivals), then pb/(2 − count·pb): gaps of 20 … 40
        // arrivals, mean about 30 (ns-2 `modify_p`), a rate near 0.033
        // against 0.095 without wait (see drop_probability_regions).
        let mut r = Red::new(
            RedParams {
                wait: true,
                ..RedParams::default()
            },
            8e6,
            Rng::new(1, 1),
        );
        r.avg = 10.0;
        let mut gaps = Vec::new();
        let mut last = 0;
        for i in 0..100_000 {
            if r.on_arrival(10, 10_000, 1000, 1) {
                gaps.push(i - last);
                last = i;
            }
        }
        let gaps = &gaps[1..];
        assert!(gaps.iter().all(|g| (20..=40).contains(g)), "{gaps:?}");
        let mean = gaps.iter().sum::<i32>() as f64 / gaps.len() as f64;
        assert!((28.0..32.0).contains(&mean), "{mean}");
    }

    #[test]
    fn bytes_mode_counts_the_queue_and_the_gaps_in_mean_packets() {
        let p = RedParams {
            bytes: true,
            mean_pktsize: 500,
            ..RedParams::default()
        };
        // 10 packets of 1000 bytes queued are 20 mean packets: the average
        // moves toward 20, not 10.
        let mut r = Red::new(p, 8e6, Rng::new(1, 1));
        r.idle_since = None;
        r.on_arrival(10, 10_000, 1000, 1);
        assert!((r.avg - 20.0 * 0.002).abs() < 1e-12, "{}", r.avg);
        // One packet queued is not guarded in bytes (ns-2 tests qlen > 1
        // on the byte count): above 2·max_th it is dropped.
        r.avg = 40.0;
        assert!(r.on_arrival(1, 1000, 1000, 1));
        assert!(!r.on_arrival(0, 0, 1000, 1));
        // pb = 0.05 at avg 10; each 1000-byte arrival counts as 2 mean
        // packets and its probability doubles: the drops are those of
        // pb = 0.1 in packet mode, a rate near 0.2, twice what the same
        // average gives in packet mode (near 0.1: drop_probability_regions).
        let mut r = Red::new(p, 8e6, Rng::new(1, 1));
        let n = 100_000;
        let mut drops = 0;
        for _ in 0..n {
            r.avg = 10.0;
            drops += r.on_arrival(10, 5_000, 1000, 1) as u32;
        }
        let rate = drops as f64 / n as f64;
        assert!((0.18..0.22).contains(&rate), "{rate}");
    }
}
