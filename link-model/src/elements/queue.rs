//! The bottleneck queue: a FIFO with a byte (and optionally packet) limit,
//! managed by drop-tail, RED or PIE (at enqueue), CoDel (at dequeue) or a
//! step marking threshold (either).
//!
//! With `ecn`, where RED, PIE or CoDel would drop an ECN-capable packet it
//! sets CE on it and keeps it (RFC 3168 §7): RED for its unforced early
//! drops only (a forced drop, beyond the thresholds, stays a drop, as in
//! ns-2 and Linux's `red ecn harddrop`); PIE while its drop probability
//! is at most 10 % (RFC 8033 §5.1, Linux's `pie ecn`); CoDel in place of
//! each drop of its control law, after which the marked packet is sent
//! (Linux's `codel_dequeue`). A full queue drops whatever arrives.

use std::collections::VecDeque;

use super::codel::{CoDel, Verdict};
use super::packet::{DropReason, MarkReason, Packet};
use super::pie::Pie;
use super::red::{Red, RedVerdict};
use super::rng::Rng;
use crate::link::{Aqm, StepParams, StepThreshold};

/// PIE marks instead of dropping only up to this probability (RFC 8033
/// §5.1 `mark_ecnth`; Linux `MAX_PROB / 10`).
const PIE_MARK_ECNTH: f64 = 0.1;

enum Manager {
    DropTail,
    Red(Red, bool),
    CoDel(CoDel, bool, Option<u64>),
    Pie(Pie, bool),
    Step(StepParams),
}

/// A FIFO queue with a limit and an AQM.
pub struct Queue {
    limit_bytes: u64,
    limit_packets: Option<u64>,
    items: VecDeque<(Packet, u64)>,
    bytes: u64,
    manager: Manager,
    max_packet: u64,
}

/// What a dequeue hands out: the packet, its sojourn time (ns), and the
/// reason it was marked CE on its way out, if it was.
pub type Dequeued = (Packet, u64, Option<MarkReason>);

impl Queue {
    /// A queue holding at most `limit_bytes` (and `limit_packets`, if
    /// given), managed by `aqm` for a link of `rate_bps`. DualPI2 is a
    /// scheduler of two queues ([`super::dualpi2::DualPi2`], which
    /// [`super::sched::Scheduler`] builds); here it is drop-tail.
    pub fn new(
        limit_bytes: u64,
        limit_packets: Option<u64>,
        aqm: &Aqm,
        rate_bps: f64,
        rng: Rng,
    ) -> Queue {
        let manager = match aqm {
            Aqm::DropTail | Aqm::DualPi2(_) => Manager::DropTail,
            Aqm::Red(p) => Manager::Red(Red::new(*p, rate_bps, rng), p.ecn),
            Aqm::CoDel(p) => Manager::CoDel(CoDel::new(*p), p.ecn, p.ce_threshold_ns),
            Aqm::Pie(p) => Manager::Pie(Pie::new(*p, rng), p.ecn),
            Aqm::Step(p) => Manager::Step(*p),
        };
        Queue {
            limit_bytes,
            limit_packets,
            items: VecDeque::new(),
            bytes: 0,
            manager,
            max_packet: 1500,
        }
    }

    /// Queued bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Queued packets.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Changes the limits: arrivals from now on meet them; what is queued
    /// stays.
    pub fn set_limits(&mut self, limit_bytes: u64, limit_packets: Option<u64>) {
        self.limit_bytes = limit_bytes;
        self.limit_packets = limit_packets;
    }

    /// The head's size and enqueue time.
    pub fn head(&self) -> Option<(usize, u64)> {
        self.items.front().map(|(p, t)| (p.len(), *t))
    }

    /// RED's state, when this queue runs RED.
    pub fn red(&self) -> Option<&super::red::Red> {
        match &self.manager {
            Manager::Red(r, _) => Some(r),
            _ => None,
        }
    }

    /// PIE's state, when this queue runs PIE.
    pub fn pie(&self) -> Option<&Pie> {
        match &self.manager {
            Manager::Pie(p, _) => Some(p),
            _ => None,
        }
    }

    /// Offers a packet at `now`: queued (with the reason it was marked CE,
    /// if it was), or handed back with the reason it was dropped (RED's
    /// early drop is decided before the hard limit, as ns-2 does; PIE's
    /// after it, as Linux does).
    pub fn enqueue(
        &mut self,
        mut pkt: Packet,
        now: u64,
    ) -> Result<Option<MarkReason>, (Packet, DropReason)> {
        let mut mark = None;
        if let Manager::Red(red, ecn) = &mut self.manager {
            match red.judge(self.items.len(), self.bytes, pkt.len(), now) {
                RedVerdict::Pass => {}
                RedVerdict::Early if *ecn && pkt.mark_ce() => mark = Some(MarkReason::Red),
                _ => return Err((pkt, DropReason::Red)),
            }
        }
        if let Manager::Pie(pie, _) = &mut self.manager {
            pie.advance(now, self.bytes);
        }
        let size = pkt.len() as u64;
        let over_packets = self
            .limit_packets
            .is_some_and(|l| self.items.len() as u64 >= l);
        if self.bytes + size > self.limit_bytes || over_packets {
            if let Manager::Pie(pie, _) = &mut self.manager {
                pie.on_overflow();
            }
            return Err((pkt, DropReason::QueueFull));
        }
        if let Manager::Pie(pie, ecn) = &mut self.manager {
            if pie.on_arrival(self.bytes, size, self.max_packet) {
                if *ecn && pie.prob() <= PIE_MARK_ECNTH && pkt.mark_ce() {
                    mark = Some(MarkReason::Pie);
                } else {
                    return Err((pkt, DropReason::Pie));
                }
            }
        }
        if let Manager::Step(p) = &self.manager {
            let over = match p.threshold {
                StepThreshold::Packets(k) => self.items.len() as u64 > k,
                StepThreshold::Bytes(k) => self.bytes > k,
                StepThreshold::Time(_) => false,
            };
            if over && pkt.mark_ce() {
                mark = Some(MarkReason::Step);
            }
        }
        self.max_packet = self.max_packet.max(size);
        self.bytes += size;
        self.items.push_back((pkt, now));
        Ok(mark)
    }

    /// Takes the head at `now`, with its sojourn time and the reason it
    /// was marked on the way out, if it was. CoDel may drop heads first;
    /// each goes to `dropped` with its sojourn time.
    pub fn dequeue(
        &mut self,
        now: u64,
        mut dropped: impl FnMut(Packet, DropReason, u64),
    ) -> Option<Dequeued> {
        if let Manager::Pie(pie, _) = &mut self.manager {
            pie.advance(now, self.bytes);
        }
        let mut first = true;
        loop {
            let Some((mut pkt, t)) = self.items.pop_front() else {
                if let Manager::CoDel(c, _, _) = &mut self.manager {
                    c.on_empty();
                }
                return None;
            };
            self.bytes -= pkt.len() as u64;
            let sojourn = now.saturating_sub(t);
            if self.items.is_empty() {
                if let Manager::Red(red, _) = &mut self.manager {
                    red.on_idle(now);
                }
            }
            if let Manager::Pie(pie, _) = &mut self.manager {
                pie.on_dequeue(sojourn, self.bytes, now);
            }
            let mut mark = None;
            if let Manager::CoDel(c, ecn, ce_threshold) = &mut self.manager {
                // RFC 8289 counts the packet itself in the "bytes left" test.
                let left = self.bytes + pkt.len() as u64;
                if c.judge(first, sojourn, left, self.max_packet, now) == Verdict::Drop {
                    if *ecn && pkt.mark_ce() {
                        mark = Some(MarkReason::CoDel);
                    } else {
                        dropped(pkt, DropReason::CoDel, sojourn);
                        first = false;
                        continue;
                    }
                }
                // Linux's ce_threshold, on what CoDel lets through.
                if mark.is_none() && ce_threshold.is_some_and(|k| sojourn > k) && pkt.mark_ce() {
                    mark = Some(MarkReason::Step);
                }
            }
            if let Manager::Step(StepParams {
                threshold: StepThreshold::Time(k),
            }) = self.manager
            {
                if sojourn > k && pkt.mark_ce() {
                    mark = Some(MarkReason::Step);
                }
            }
            return Some((pkt, sojourn, mark));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{CoDelParams, PieParams, RedParams};

    fn pkt(n: usize) -> Packet {
        Packet::sized(n, 0, 0)
    }

    #[test]
    fn droptail_limits_bytes_and_packets() {
        let mut q = Queue::new(3000, None, &Aqm::DropTail, 1e6, Rng::new(0, 0));
        assert!(q.enqueue(pkt(1500), 0).is_ok());
        assert!(q.enqueue(pkt(1500), 1).is_ok());
        let (_, why) = q.enqueue(pkt(1), 2).unwrap_err();
        assert_eq!(why, DropReason::QueueFull);
        assert_eq!((q.len(), q.bytes()), (2, 3000));
        let (p, sojourn, _) = q.dequeue(10, |_, _, _| panic!()).unwrap();
        assert_eq!((p.len(), sojourn), (1500, 10));
        let mut qp = Queue::new(1_000_000, Some(2), &Aqm::DropTail, 1e6, Rng::new(0, 0));
        assert!(qp.enqueue(pkt(10), 0).is_ok() && qp.enqueue(pkt(10), 0).is_ok());
        assert!(qp.enqueue(pkt(10), 0).is_err());
    }

    #[test]
    fn red_drops_early_before_the_limit() {
        let red = Aqm::Red(RedParams {
            wq: 0.2,
            ..RedParams::default()
        });
        let mut q = Queue::new(1_000_000, None, &red, 10e6, Rng::new(0, 0));
        let mut early = 0;
        for i in 0..200 {
            if let Err((_, why)) = q.enqueue(pkt(1000), i) {
                assert_eq!(why, DropReason::Red);
                early += 1;
            }
        }
        // The byte limit (1000 packets) was never reached, yet RED held the
        // queue near its thresholds.
        assert!(early > 100, "{early}");
        assert!(q.len() < 40, "{}", q.len());
    }

    #[test]
    fn codel_drops_at_dequeue_from_a_standing_queue() {
        let mut q = Queue::new(
            10_000_000,
            None,
            &Aqm::CoDel(CoDelParams::default()),
            1e6,
            Rng::new(0, 0),
        );
        let ms = 1_000_000u64;
        let mut drops = 0;
        // Arrivals every ms, dequeues every 2 ms: the queue and sojourn grow.
        for i in 0..2000u64 {
            q.enqueue(pkt(1200), i * ms).unwrap();
            if i % 2 == 0 {
                q.dequeue(i * ms, |_, why, s| {
                    assert_eq!(why, DropReason::CoDel);
                    assert!(s >= 5 * ms);
                    drops += 1;
                });
            }
        }
        assert!(drops > 50, "{drops}");
    }

    #[test]
    fn pie_drops_early_at_enqueue_after_the_hard_limit() {
        let mut q = Queue::new(
            40 * 1200,
            None,
            &Aqm::Pie(PieParams::default()),
            1e6,
            Rng::new(0, 0),
        );
        let ms = 1_000_000u64;
        let (mut early, mut full) = (0, 0);
        // Arrivals every ms, dequeues every 2 ms: the delay grows past
        // target; once the burst allowance is spent PIE's probability
        // climbs (slowly at first: its gains are scaled down while p is
        // small) and the 40-packet limit (80 ms) overflows meanwhile.
        for i in 0..20_000u64 {
            if i == 10_000 {
                assert!(early > 0 && full > 0, "early {early}, full {full}");
                (early, full) = (0, 0);
            }
            match q.enqueue(pkt(1200), i * ms) {
                Err((_, DropReason::Pie)) => early += 1,
                Err((_, DropReason::QueueFull)) => full += 1,
                Err((_, why)) => panic!("{why:?}"),
                Ok(_) => {}
            }
            if i % 2 == 0 {
                q.dequeue(i * ms, |_, _, _| panic!("PIE never drops at dequeue"));
            }
        }
        // Then PIE alone takes the excess, half the arrivals, early.
        assert_eq!(full, 0);
        assert!((4900..=5100).contains(&early), "{early}");
        assert!(q.pie().is_some_and(|p| p.prob() > 0.1));
        assert!(Queue::new(1, None, &Aqm::DropTail, 1e6, Rng::new(0, 0))
            .pie()
            .is_none());
    }
}
