//! DualPI2, the DualQ Coupled AQM of RFC 9332 (L4S), written from the
//! RFC's description and its Appendix A. The defaults are those Linux's
//! `dualpi2` qdisc ships (target 15 ms, tupdate 16 ms, alpha 0.16 Hz,
//! beta 3.2 Hz, a 1 ms step), except `l_min_qlen`, Appendix A's `Th_len`
//! of 1 (Linux's `min_qlen_step` is 0).
//!
//! **Two queues, one limit.** ECT(1) and CE packets go to the L queue,
//! Not-ECT and ECT(0) to the classic (C) queue (RFC 9332 §4.1, RFC 9331
//! §5.1). The link's `queue` limit (bytes, and packets if given) holds
//! both; an arrival that does not fit is dropped (`queue_full`).
//!
//! **Base probability** (PI2, Appendix A.1): every `tupdate`,
//!
//! ```text
//! p' += alpha · (qdelay − target) + beta · (qdelay − qdelay_old)     (delays in s)
//! ```
//!
//! where `qdelay` is the greater of the two queues' head sojourn times at
//! the update (0 when both are empty; Appendix A.2's `dualpi2_update` and
//! Linux), and p' stays in [0, 1]. As PIE's here, updates
//! run lazily, at the next enqueue or dequeue, for every boundary passed;
//! the first is due one `tupdate` after the first packet.
//!
//! **Classic.** At dequeue a C packet meets `p_C = p'²`: an ECT(0) packet
//! is marked CE, a Not-ECT one dropped (`dualpi2_c`; at dequeue, as the
//! RFC's example and Linux's default `drop_dequeue`). In overload (below)
//! ECN is disabled and an ECT(0) packet is dropped too.
//!
//! **L4S.** At dequeue an L packet is marked with `p_L = max(p_L', p_CL)`:
//! `p_CL = k·p'` is the coupled probability, `p_L'` the native AQM on the
//! packet's own sojourn time (a ramp from `l_thresh` over `l_range`; a
//! step at `l_thresh` when `l_range` is 0, the Linux default), 0 while
//! the L queue holds `l_min_qlen` packets or fewer, the one being
//! dequeued included (Appendix A.1's `Th_len` counts those behind it).
//! Once `p_CL` reaches 1 (`p_C` >= 1/k²) the link is overloaded (§4.2.3):
//! ECN is disabled, and an ECN-capable packet of either queue is dropped
//! with `p_C` (`dualpi2_l`, `dualpi2_c`); an L packet not dropped is
//! marked.
//!
//! **Scheduler.** A time-shifted FIFO (the RFC's example, §A.1): the L
//! head goes first unless the C head has waited more than `tshift`
//! longer, so the C queue cannot starve. Linux uses a weighted round
//! robin (`classic_protection`, 10 %) instead; both give L priority while
//! keeping C alive.
//!
//! Random choices come from the link's seeded stream, as every other
//! element's, so a run is reproducible.

use std::collections::VecDeque;

use super::packet::{DropReason, MarkReason, Packet};
use super::queue::Dequeued;
use super::rng::Rng;
use crate::link::DualPi2Params;

/// DualPI2's queues and state.
pub struct DualPi2 {
    p: DualPi2Params,
    limit_bytes: u64,
    limit_packets: Option<u64>,
    l: VecDeque<(Packet, u64)>,
    c: VecDeque<(Packet, u64)>,
    bytes: u64,
    /// The base probability p'.
    prob: f64,
    /// The C queue's delay at the previous update, ns.
    qdelay_old_ns: u64,
    /// When the next update is due (None before the first packet).
    next_update: Option<u64>,
    rng: Rng,
}

impl DualPi2 {
    /// Changes the limits (over both queues): arrivals from now on meet
    /// them; what is queued stays.
    pub fn set_limits(&mut self, limit_bytes: u64, limit_packets: Option<u64>) {
        self.limit_bytes = limit_bytes;
        self.limit_packets = limit_packets;
    }

    /// DualPI2 holding at most `limit_bytes` (and `limit_packets`) over
    /// both queues.
    pub fn new(p: DualPi2Params, limit_bytes: u64, limit_packets: Option<u64>, rng: Rng) -> Self {
        DualPi2 {
            p,
            limit_bytes,
            limit_packets,
            l: VecDeque::new(),
            c: VecDeque::new(),
            bytes: 0,
            prob: 0.0,
            qdelay_old_ns: 0,
            next_update: None,
            rng,
        }
    }

    /// The base probability p'.
    pub fn base_prob(&self) -> f64 {
        self.prob
    }

    /// The classic drop/mark probability p' squared.
    pub fn classic_prob(&self) -> f64 {
        self.prob * self.prob
    }

    /// The coupled L marking probability k·p' (at most 1).
    pub fn coupled_prob(&self) -> f64 {
        (self.p.k * self.prob).min(1.0)
    }

    /// Queued bytes, both queues.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Queued packets, both queues.
    pub fn len(&self) -> usize {
        self.l.len() + self.c.len()
    }

    /// True when both queues are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Packets in the L queue and in the C queue.
    pub fn lens(&self) -> (usize, usize) {
        (self.l.len(), self.c.len())
    }

    /// True to serve the L queue next, None when both are empty.
    fn pick_l(&self) -> Option<bool> {
        match (self.l.front(), self.c.front()) {
            (Some((_, tl)), Some((_, tc))) => Some(*tl <= tc.saturating_add(self.p.tshift_ns)),
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }

    /// The size and enqueue time of the packet the scheduler serves next.
    pub fn head(&self) -> Option<(usize, u64)> {
        let q = if self.pick_l()? { &self.l } else { &self.c };
        q.front().map(|(p, t)| (p.len(), *t))
    }

    /// Runs the updates of p' due up to `now`.
    fn advance(&mut self, now: u64) {
        let tupdate = self.p.tupdate_ns.max(1);
        let mut next = *self.next_update.get_or_insert(now.saturating_add(tupdate));
        while next <= now {
            let before = (self.prob, self.qdelay_old_ns);
            // The greater of the two heads' sojourns (RFC 9332 A.2's
            // dualpi2_update, and Linux): unresponsive L traffic raises
            // p' too, so the overload rules can engage.
            let sojourn =
                |q: &VecDeque<(Packet, u64)>| q.front().map_or(0, |(_, t)| next.saturating_sub(*t));
            let qdelay = sojourn(&self.c).max(sojourn(&self.l));
            let s = |ns: u64| ns as f64 / 1e9;
            let delta = self.p.alpha * (s(qdelay) - s(self.p.target_ns))
                + self.p.beta * (s(qdelay) - s(self.qdelay_old_ns));
            let p = self.prob + delta;
            if !p.is_nan() {
                self.prob = p.clamp(0.0, 1.0);
            }
            self.qdelay_old_ns = qdelay;
            let Some(n) = next.checked_add(tupdate) else {
                break;
            };
            next = n;
            if self.c.is_empty()
                && self.l.is_empty()
                && (self.prob, self.qdelay_old_ns) == before
                && next <= now
            {
                // At rest (p' at 0 with nothing queued): the updates left
                // before `now` change nothing.
                next += (now - next) / tupdate * tupdate;
            }
        }
        self.next_update = Some(next);
    }

    /// Offers a packet at `now`: queued in L or C by its codepoint, or
    /// handed back when the shared limit is reached. Nothing is marked at
    /// enqueue.
    pub fn enqueue(
        &mut self,
        pkt: Packet,
        now: u64,
    ) -> Result<Option<MarkReason>, (Packet, DropReason)> {
        self.advance(now);
        let size = pkt.len() as u64;
        let over_packets = self.limit_packets.is_some_and(|l| self.len() as u64 >= l);
        if self.bytes + size > self.limit_bytes || over_packets {
            return Err((pkt, DropReason::QueueFull));
        }
        self.bytes += size;
        if pkt.ecn.is_l4s() {
            self.l.push_back((pkt, now));
        } else {
            self.c.push_back((pkt, now));
        }
        Ok(None)
    }

    /// The native L AQM's probability for a packet that waited `sojourn`.
    fn native_l(&self, sojourn: u64, l_len: usize) -> f64 {
        let (th, range) = (self.p.l_thresh_ns, self.p.l_range_ns);
        if l_len as u64 <= self.p.l_min_qlen || sojourn <= th {
            0.0
        } else if range == 0 || sojourn >= th + range {
            1.0
        } else {
            (sojourn - th) as f64 / range as f64
        }
    }

    /// Takes the next packet at `now` with its sojourn time and mark;
    /// packets dropped on the way go to `dropped`.
    pub fn dequeue(
        &mut self,
        now: u64,
        mut dropped: impl FnMut(Packet, DropReason, u64),
    ) -> Option<Dequeued> {
        self.advance(now);
        loop {
            let from_l = self.pick_l()?;
            let l_len = self.l.len();
            let (mut pkt, t) = if from_l {
                self.l.pop_front()?
            } else {
                self.c.pop_front()?
            };
            self.bytes -= pkt.len() as u64;
            let sojourn = now.saturating_sub(t);
            // Overload (RFC 9332 4.2.3, A.2): the coupled probability is
            // saturated, p_C >= 1/k^2; ECN is disabled, so ECN-capable
            // packets of either queue are dropped with p_C.
            let p_cl = self.p.k * self.prob;
            let overload = p_cl >= 1.0;
            if from_l {
                if overload {
                    // Overload: the coupled probability is saturated.
                    if self.rng.chance(self.classic_prob()) {
                        dropped(pkt, DropReason::DualPi2L, sojourn);
                        continue;
                    }
                    pkt.mark_ce();
                    return Some((pkt, sojourn, Some(MarkReason::DualPi2L)));
                }
                let p_l = self.native_l(sojourn, l_len).max(p_cl);
                let mark = (p_l >= 1.0 || self.rng.chance(p_l)) && pkt.mark_ce();
                return Some((pkt, sojourn, mark.then_some(MarkReason::DualPi2L)));
            }
            if self.rng.chance(self.classic_prob()) {
                if !overload && pkt.mark_ce() {
                    return Some((pkt, sojourn, Some(MarkReason::DualPi2C)));
                }
                dropped(pkt, DropReason::DualPi2C, sojourn);
                continue;
            }
            return Some((pkt, sojourn, None));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::packet::Ecn;

    const MS: u64 = 1_000_000;

    fn dq(p: DualPi2Params) -> DualPi2 {
        DualPi2::new(p, 1 << 30, None, Rng::new(1, 1))
    }

    #[test]
    fn classifies_by_codepoint_and_shifts_the_fifo() {
        let mut d = dq(DualPi2Params::default());
        for (i, e) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce]
            .into_iter()
            .enumerate()
        {
            d.enqueue(Packet::sized(100, i as u16, 0).with_ecn(e), 0)
                .unwrap();
        }
        assert_eq!(d.lens(), (2, 2));
        // Same enqueue time: L first.
        let order: Vec<u16> = std::iter::from_fn(|| d.dequeue(MS, |_, _, _| panic!()))
            .map(|(p, _, _)| p.flow)
            .collect();
        assert_eq!(order, vec![2, 3, 0, 1]);
        // A C packet that has waited more than tshift (30 ms) longer than
        // the L head goes first; one that has not, after it (no updates
        // of p' in this test, so nothing is dropped).
        let mut d = dq(DualPi2Params {
            tupdate_ns: 10_000 * MS,
            ..DualPi2Params::default()
        });
        d.enqueue(Packet::sized(100, 0, 0), 0).unwrap();
        d.enqueue(Packet::sized(100, 1, 0).with_ecn(Ecn::Ect1), 31 * MS)
            .unwrap();
        assert_eq!(d.dequeue(32 * MS, |_, _, _| ()).unwrap().0.flow, 0);
        d.enqueue(Packet::sized(100, 2, 0), 33 * MS).unwrap();
        assert_eq!(d.dequeue(40 * MS, |_, _, _| ()).unwrap().0.flow, 1);
        assert_eq!(d.dequeue(41 * MS, |_, _, _| ()).unwrap().0.flow, 2);
    }

    #[test]
    fn one_update_follows_the_pi_formula() {
        let mut d = dq(DualPi2Params::default());
        // A C packet queued at 0: the first update (16 ms) sees 16 ms.
        d.enqueue(Packet::sized(100, 0, 0), 0).unwrap();
        d.advance(16 * MS);
        let want = 0.16 * (0.016 - 0.015) + 3.2 * 0.016;
        assert!((d.base_prob() - want).abs() < 1e-12, "{}", d.base_prob());
        // The next sees 32 ms.
        d.advance(32 * MS);
        let want2 = want + 0.16 * (0.032 - 0.015) + 3.2 * 0.016;
        assert!((d.base_prob() - want2).abs() < 1e-12, "{}", d.base_prob());
        assert!((d.classic_prob() - want2 * want2).abs() < 1e-12);
        assert!((d.coupled_prob() - 2.0 * want2).abs() < 1e-12);
        // Drained and idle: p' falls back to 0 and stays there, and an
        // hour of idleness costs a few updates.
        d.dequeue(33 * MS, |_, _, _| ());
        d.advance(3_600_000 * MS);
        assert_eq!(d.base_prob(), 0.0);
        assert!(d.next_update.unwrap() <= 3_600_000 * MS + 16 * MS);
    }

    #[test]
    fn the_l_step_marks_above_one_millisecond() {
        let mut d = dq(DualPi2Params::default());
        for i in 0..4 {
            d.enqueue(Packet::sized(100, i, 0).with_ecn(Ecn::Ect1), 0)
                .unwrap();
        }
        // p' is 0: only the native step marks. Waited 1 ms: not above it.
        let (_, s, m) = d.dequeue(MS, |_, _, _| ()).unwrap();
        assert_eq!((s, m), (MS, None));
        let (p, _, m) = d.dequeue(MS + 1, |_, _, _| ()).unwrap();
        assert_eq!((p.ecn, m), (Ecn::Ce, Some(MarkReason::DualPi2L)));
        assert!(d.dequeue(2 * MS, |_, _, _| ()).unwrap().2.is_some());
        // The last one alone in the L queue (l_min_qlen = 1): not marked.
        assert!(d.dequeue(5 * MS, |_, _, _| ()).unwrap().2.is_none());
        // A ramp from 1 ms over 1 ms marks half the packets at 1.5 ms.
        let mut r = dq(DualPi2Params {
            l_range_ns: MS,
            l_min_qlen: 0,
            ..DualPi2Params::default()
        });
        let mut marks = 0;
        for i in 0..10_000u64 {
            let t = i * 10 * MS;
            r.enqueue(Packet::sized(100, 0, t).with_ecn(Ecn::Ect1), t)
                .unwrap();
            marks += r.dequeue(t + 3 * MS / 2, |_, _, _| ()).unwrap().2.is_some() as u32;
        }
        assert!((4800..5200).contains(&marks), "{marks}");
    }
}
