//! The bottleneck's scheduler: one FIFO [`Queue`], or deficit round robin
//! over a queue per class (`fq`, `wfq`).
//!
//! Deficit round robin (Shreedhar & Varghese, "Efficient fair queueing
//! using deficit round robin", SIGCOMM 1995) keeps the backlogged classes
//! in a ring. Each has a quantum of bytes, proportional to its weight, and
//! a deficit counter. The class at the head of the ring sends its head
//! packet if the packet fits in its deficit (which then shrinks by the
//! packet's size); otherwise it gains one quantum and goes to the back of
//! the ring. A class that becomes backlogged joins the back with one
//! quantum of credit, and one that empties leaves the ring and forgets its
//! deficit. Over any period in which two classes stay backlogged, the bytes
//! they send differ from the ratio of their quanta by at most a packet and
//! a quantum each, so shares follow the weights exactly in the long run;
//! and since only backlogged classes are in the ring, capacity an idle
//! class does not use goes to the others (work-conserving).
//!
//! The quantum of the lightest class is one maximum-size packet (`mtu`
//! bytes), so every turn sends at least one packet.
//!
//! Each class is a whole [`Queue`]: its own byte/packet limit (the link's
//! `queue`, per class) and its own instance of the link's AQM. A full class
//! drops its own arrivals and no one else's.
//!
//! The packet the link sends next is decided when the link is free to send
//! it (the pipeline asks for [`Scheduler::head`] and dequeues at that
//! time), so arrivals up to that instant compete for it. [`Drr::pick`]
//! finds, without changing anything, the class the ring would serve: the
//! class at ring position `p` with deficit `d` and head packet `len` is
//! ready in pass `r = ceil((len - d) / quantum)`; the first class in
//! (pass, position) order wins. Dequeuing then applies those passes.

use std::collections::{HashMap, VecDeque};

use super::dualpi2::DualPi2;
use super::packet::{DropReason, MarkReason, Packet};
use super::queue::{Dequeued, Queue};
use super::rng::Rng;
use crate::link::{Aqm, Sched};

/// What each class queue is made of.
#[derive(Clone, Debug)]
pub struct ClassQueue {
    /// Byte limit of each class.
    pub limit_bytes: u64,
    /// Packet limit of each class, if any.
    pub limit_packets: Option<u64>,
    /// The AQM each class runs.
    pub aqm: Aqm,
    /// The link's rate (RED's idle-time decay).
    pub rate_bps: f64,
    /// Seed of the link; each class gets its own random stream from it.
    pub seed: u64,
    /// Stream number of this direction's queue; classes derive theirs.
    pub stream: u64,
}

impl ClassQueue {
    fn make(&self, stream: u64) -> Queue {
        Queue::new(
            self.limit_bytes,
            self.limit_packets,
            &self.aqm,
            self.rate_bps,
            Rng::new(self.seed, stream),
        )
    }
}

/// The bottleneck queue as the pipeline sees it.
pub enum Scheduler {
    /// One FIFO queue (`sched = "fifo"`).
    Fifo(Queue),
    /// Deficit round robin over class queues (`fq`, `wfq`).
    Drr(Drr),
    /// DualPI2's L and classic queues (`aqm = "dualpi2"`, with `fifo`).
    DualPi2(DualPi2),
}

impl Scheduler {
    /// A scheduler of kind `sched`, its queues made as `q` says. `weights`
    /// are the classes' weights for `wfq` (class `i` has `weights[i]`);
    /// `mtu` is the quantum of the lightest class.
    pub fn new(sched: Sched, q: ClassQueue, weights: &[f64], mtu: u64) -> Scheduler {
        if let Aqm::DualPi2(p) = q.aqm {
            // The link's parser allows DualPI2 with `fifo` only.
            return Scheduler::DualPi2(DualPi2::new(
                p,
                q.limit_bytes,
                q.limit_packets,
                Rng::new(q.seed, q.stream),
            ));
        }
        match sched {
            Sched::Fifo => Scheduler::Fifo(q.make(q.stream)),
            Sched::Fq => Scheduler::Drr(Drr::new(Key::Flow, q, &[], mtu)),
            Sched::Wfq => Scheduler::Drr(Drr::new(Key::Class, q, weights, mtu)),
        }
    }

    /// Queued bytes, every class.
    pub fn bytes(&self) -> u64 {
        match self {
            Scheduler::Fifo(q) => q.bytes(),
            Scheduler::Drr(d) => d.bytes,
            Scheduler::DualPi2(d) => d.bytes(),
        }
    }

    /// Queued packets, every class.
    pub fn len(&self) -> usize {
        match self {
            Scheduler::Fifo(q) => q.len(),
            Scheduler::Drr(d) => d.len,
            Scheduler::DualPi2(d) => d.len(),
        }
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size and enqueue time of the packet that would be sent next.
    pub fn head(&self) -> Option<(usize, u64)> {
        match self {
            Scheduler::Fifo(q) => q.head(),
            Scheduler::Drr(d) => d.head(),
            Scheduler::DualPi2(d) => d.head(),
        }
    }

    /// Offers a packet at `now` (see [`Queue::enqueue`]): queued, with
    /// the reason it was marked CE if it was, or handed back with the
    /// reason it was dropped.
    pub fn enqueue(
        &mut self,
        pkt: Packet,
        now: u64,
    ) -> Result<Option<MarkReason>, (Packet, DropReason)> {
        match self {
            Scheduler::Fifo(q) => q.enqueue(pkt, now),
            Scheduler::Drr(d) => d.enqueue(pkt, now),
            Scheduler::DualPi2(d) => d.enqueue(pkt, now),
        }
    }

    /// Changes every class queue's limits (each class's own, as `queue`
    /// is per class under `fq` and `wfq`): arrivals from now on meet them;
    /// what is queued stays.
    pub fn set_limits(&mut self, limit_bytes: u64, limit_packets: Option<u64>) {
        match self {
            Scheduler::Fifo(q) => q.set_limits(limit_bytes, limit_packets),
            Scheduler::Drr(d) => {
                d.make.limit_bytes = limit_bytes;
                d.make.limit_packets = limit_packets;
                for c in &mut d.classes {
                    c.queue.set_limits(limit_bytes, limit_packets);
                }
            }
            Scheduler::DualPi2(d) => d.set_limits(limit_bytes, limit_packets),
        }
    }

    /// DualPI2's state, when the link runs it.
    pub fn dualpi2(&self) -> Option<&DualPi2> {
        match self {
            Scheduler::DualPi2(d) => Some(d),
            _ => None,
        }
    }

    /// Takes the next packet at `now` with its sojourn time and its mark
    /// reason if it was marked on the way out; AQM drops at dequeue go to
    /// `dropped` (see [`Queue::dequeue`]).
    pub fn dequeue(
        &mut self,
        now: u64,
        dropped: impl FnMut(Packet, DropReason, u64),
    ) -> Option<Dequeued> {
        match self {
            Scheduler::Fifo(q) => q.dequeue(now, dropped),
            Scheduler::Drr(d) => d.dequeue(now, dropped),
            Scheduler::DualPi2(d) => d.dequeue(now, dropped),
        }
    }
}

/// Which packet field names the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    /// `Packet::flow`: one class per flow (`fq`).
    Flow,
    /// `Packet::class`: one class per scenario flow or cross source (`wfq`).
    Class,
}

struct Class {
    queue: Queue,
    quantum: u64,
    deficit: u64,
}

/// Deficit round robin over per-class queues.
pub struct Drr {
    key: Key,
    make: ClassQueue,
    weights: Vec<f64>,
    min_weight: f64,
    base_quantum: u64,
    classes: Vec<Class>,
    slot_of: HashMap<u16, usize>,
    /// Backlogged classes (slots), in ring order; the head is served next.
    ring: VecDeque<usize>,
    bytes: u64,
    len: usize,
}

impl Drr {
    fn new(key: Key, make: ClassQueue, weights: &[f64], mtu: u64) -> Drr {
        let min_weight = weights
            .iter()
            .copied()
            .filter(|w| w.is_finite() && *w > 0.0)
            .fold(f64::INFINITY, f64::min);
        Drr {
            key,
            make,
            weights: weights.to_vec(),
            min_weight: if min_weight.is_finite() {
                min_weight
            } else {
                1.0
            },
            base_quantum: mtu.max(1),
            classes: Vec::new(),
            slot_of: HashMap::new(),
            ring: VecDeque::new(),
            bytes: 0,
            len: 0,
        }
    }

    /// The weight of class `id`: its entry in the weights (`wfq`), equal
    /// for every class (`fq`); a class without an entry gets the smallest.
    fn weight(&self, id: u16) -> f64 {
        match self.key {
            Key::Flow => 1.0,
            Key::Class => self
                .weights
                .get(id as usize)
                .copied()
                .filter(|w| w.is_finite() && *w > 0.0)
                .unwrap_or(self.min_weight),
        }
    }

    fn slot(&mut self, id: u16) -> usize {
        if let Some(&s) = self.slot_of.get(&id) {
            return s;
        }
        let quantum = (self.base_quantum as f64 * self.weight(id) / self.min_weight)
            .round()
            .max(1.0) as u64;
        // Each class its own random stream (RED), the same in every run.
        let stream = self.make.stream | (id as u64 + 1) << 16;
        let s = self.classes.len();
        self.classes.push(Class {
            queue: self.make.make(stream),
            quantum,
            deficit: 0,
        });
        self.slot_of.insert(id, s);
        s
    }

    /// The class the ring serves next: (ring position, passes until then).
    fn pick(&self) -> Option<(usize, u64)> {
        let mut best: Option<(u64, usize)> = None;
        for (pos, &slot) in self.ring.iter().enumerate() {
            let c = &self.classes[slot];
            let Some((len, _)) = c.queue.head() else {
                continue;
            };
            let need = (len as u64).saturating_sub(c.deficit);
            let passes = need.div_ceil(c.quantum);
            if best.is_none_or(|(b, _)| passes < b) {
                best = Some((passes, pos));
            }
        }
        best.map(|(passes, pos)| (pos, passes))
    }

    fn head(&self) -> Option<(usize, u64)> {
        let (pos, _) = self.pick()?;
        self.classes[self.ring[pos]].queue.head()
    }

    fn enqueue(
        &mut self,
        pkt: Packet,
        now: u64,
    ) -> Result<Option<MarkReason>, (Packet, DropReason)> {
        let id = match self.key {
            Key::Flow => pkt.flow,
            Key::Class => pkt.class,
        };
        let size = pkt.len() as u64;
        let slot = self.slot(id);
        let c = &mut self.classes[slot];
        let was_empty = c.queue.is_empty();
        let mark = c.queue.enqueue(pkt, now)?;
        self.bytes += size;
        self.len += 1;
        if was_empty {
            c.deficit = c.quantum;
            self.ring.push_back(slot);
        }
        Ok(mark)
    }

    fn dequeue(
        &mut self,
        now: u64,
        mut dropped: impl FnMut(Packet, DropReason, u64),
    ) -> Option<Dequeued> {
        loop {
            let (pos, passes) = self.pick()?;
            // Apply the passes: every class ahead of the winner in the ring
            // was passed over once more than the winner and those behind it.
            for (i, &slot) in self.ring.iter().enumerate() {
                let c = &mut self.classes[slot];
                let gained = passes + u64::from(i < pos);
                c.deficit = c.deficit.saturating_add(gained.saturating_mul(c.quantum));
            }
            self.ring.rotate_left(pos);
            let slot = self.ring[0];
            let c = &mut self.classes[slot];
            let (b0, n0) = (c.queue.bytes(), c.queue.len());
            let got = c.queue.dequeue(now, &mut dropped);
            self.bytes -= b0 - c.queue.bytes();
            self.len -= n0 - c.queue.len();
            if let Some((pkt, _, _)) = &got {
                c.deficit = c.deficit.saturating_sub(pkt.len() as u64);
            }
            if c.queue.is_empty() {
                c.deficit = 0;
                self.ring.pop_front();
            }
            if got.is_some() {
                return got;
            }
            // The AQM dropped everything that class held: serve another.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::CoDelParams;

    fn cq(limit_bytes: u64, limit_packets: Option<u64>) -> ClassQueue {
        ClassQueue {
            limit_bytes,
            limit_packets,
            aqm: Aqm::DropTail,
            rate_bps: 10e6,
            seed: 1,
            stream: 3,
        }
    }

    /// Keeps every class in `backlogged` with at least `depth` packets of
    /// `size` bytes, dequeues `n` packets and returns the bytes each class
    /// sent (indexed by class).
    fn serve(s: &mut Scheduler, backlogged: &[(u16, usize)], depth: usize, n: usize) -> [u64; 16] {
        let mut sent = [0u64; 16];
        let mut queued = [0usize; 16];
        for t in 0..n as u64 {
            for &(class, size) in backlogged {
                while queued[class as usize] < depth {
                    let mut p = Packet::sized(size, class, t);
                    p.class = class;
                    s.enqueue(p, t).unwrap();
                    queued[class as usize] += 1;
                }
            }
            let (p, _, _) = s.dequeue(t, |_, _, _| panic!("no AQM")).unwrap();
            sent[p.class as usize] += p.len() as u64;
            queued[p.class as usize] -= 1;
        }
        sent
    }

    #[test]
    fn two_backlogged_classes_share_by_their_weights() {
        // BR-TCP's reservation: weights 40 and 60.
        let mut s = Scheduler::new(Sched::Wfq, cq(1 << 30, None), &[40.0, 60.0], 1500);
        // Different packet sizes, to show shares are in bytes.
        let sent = serve(&mut s, &[(0, 1350), (1, 1200)], 4, 100_000);
        let share0 = sent[0] as f64 / (sent[0] + sent[1]) as f64;
        assert!((share0 - 0.4).abs() < 0.004, "share {share0}");
        // Weights 1:3.
        let mut s = Scheduler::new(Sched::Wfq, cq(1 << 30, None), &[1.0, 3.0], 1500);
        let sent = serve(&mut s, &[(0, 1500), (1, 1500)], 4, 40_000);
        let share0 = sent[0] as f64 / (sent[0] + sent[1]) as f64;
        assert!((share0 - 0.25).abs() < 0.0025, "share {share0}");
    }

    #[test]
    fn fq_gives_three_flows_a_third_each() {
        let mut s = Scheduler::new(Sched::Fq, cq(1 << 30, None), &[], 1500);
        let sent = serve(&mut s, &[(0, 1500), (1, 1000), (2, 400)], 8, 60_000);
        let total: u64 = sent.iter().sum();
        for (i, &b) in sent.iter().take(3).enumerate() {
            let share = b as f64 / total as f64;
            assert!((share - 1.0 / 3.0).abs() < 0.0033, "flow {i}: {share}");
        }
    }

    #[test]
    fn an_idle_class_leaves_its_share_to_the_others() {
        // Only the weight-40 class is backlogged: it gets every packet.
        let mut s = Scheduler::new(Sched::Wfq, cq(1 << 30, None), &[40.0, 60.0], 1500);
        let sent = serve(&mut s, &[(0, 1500)], 4, 1000);
        assert_eq!(sent[0], 1000 * 1500);
        // Class 1 sends a little (one packet every 10 dequeues): it gets
        // all of that, and class 0 takes everything it leaves.
        let mut s = Scheduler::new(Sched::Wfq, cq(1 << 30, None), &[40.0, 60.0], 1500);
        let mut sent = [0u64; 2];
        let mut queued0 = 0;
        for t in 0..10_000u64 {
            while queued0 < 4 {
                s.enqueue(Packet::sized(1500, 0, t), t).unwrap();
                queued0 += 1;
            }
            if t % 10 == 0 {
                let mut p = Packet::sized(1500, 9, t);
                p.class = 1;
                s.enqueue(p, t).unwrap();
            }
            let (p, _, _) = s.dequeue(t, |_, _, _| {}).unwrap();
            sent[p.class as usize] += 1;
            if p.class == 0 {
                queued0 -= 1;
            }
        }
        assert_eq!(sent[1], 1000, "the light class is served whenever it asks");
        assert_eq!(sent[0], 9000);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn per_class_limits_drop_only_from_the_overflowing_class() {
        // Room for 3 packets (or 10 000 bytes) per class.
        let mut s = Scheduler::new(Sched::Fq, cq(10_000, Some(3)), &[], 1500);
        let mut drops = [0; 3];
        for i in 0..20u64 {
            // Flow 0 floods; flows 1 and 2 send one packet each now and then.
            let flows: &[u16] = if i % 10 == 0 { &[0, 1, 2] } else { &[0] };
            for &f in flows {
                if let Err((p, why)) = s.enqueue(Packet::sized(1000, f, i), i) {
                    assert_eq!(why, DropReason::QueueFull);
                    drops[p.flow as usize] += 1;
                }
            }
        }
        assert_eq!(drops, [17, 0, 0]);
        assert_eq!((s.len(), s.bytes()), (7, 7000));
        // The byte limit, per class: 1400-byte packets, 7 fit in 10 000 B.
        let mut s = Scheduler::new(Sched::Fq, cq(10_000, None), &[], 1500);
        let accepted = (0..10)
            .filter(|_| s.enqueue(Packet::sized(1400, 0, 0), 0).is_ok())
            .count();
        assert_eq!(accepted, 7);
        assert!(s.enqueue(Packet::sized(1400, 1, 0), 0).is_ok());
        // Everything drains, round robin between the two.
        let order: Vec<u16> = std::iter::from_fn(|| s.dequeue(1, |_, _, _| {}))
            .map(|(p, _, _)| p.flow)
            .collect();
        assert_eq!(order.len(), 8);
        assert_eq!(&order[..2], &[0, 1]);
        assert!(s.is_empty() && s.bytes() == 0);
    }

    #[test]
    fn head_is_what_dequeue_returns() {
        let mut s = Scheduler::new(Sched::Wfq, cq(1 << 30, None), &[1.0, 2.0, 5.0], 1500);
        let mut t = 0;
        for round in 0..200u64 {
            for c in 0..3u16 {
                if (round + c as u64).is_multiple_of(c as u64 + 1) {
                    let mut p =
                        Packet::sized(200 + 97 * ((round as usize * 7 + c as usize) % 14), c, t);
                    p.class = c;
                    s.enqueue(p, t).unwrap();
                }
            }
            t += 1;
            for _ in 0..2 {
                let Some((size, enq)) = s.head() else { break };
                let (p, _, _) = s.dequeue(t, |_, _, _| {}).unwrap();
                assert_eq!((p.len(), p.arrival_ns), (size, enq));
            }
        }
    }

    #[test]
    fn each_class_runs_its_own_codel() {
        let mut q = cq(1 << 30, None);
        q.aqm = Aqm::CoDel(CoDelParams::default());
        let mut s = Scheduler::new(Sched::Fq, q, &[], 1500);
        let ms = 1_000_000u64;
        let mut drops = [0u32; 2];
        // Flow 0 arrives at twice its share and builds a standing queue;
        // flow 1 sends less than its share and never waits long.
        for i in 0..3000u64 {
            let now = i * ms;
            s.enqueue(Packet::sized(1000, 0, now), now).unwrap();
            s.enqueue(Packet::sized(1000, 0, now), now).unwrap();
            if i % 2 == 0 {
                s.enqueue(Packet::sized(1000, 1, now), now).unwrap();
            }
            for _ in 0..2 {
                s.dequeue(now, |p, why, _| {
                    assert_eq!(why, DropReason::CoDel);
                    drops[p.flow as usize] += 1;
                });
            }
        }
        assert!(drops[0] > 50, "{drops:?}");
        assert_eq!(drops[1], 0);
    }

    /// fq_codel with `ecn`: the ECT flow that builds a queue is marked
    /// and loses nothing; a Not-ECT flow doing the same is dropped from.
    #[test]
    fn each_class_codel_marks_its_own_ect_flow() {
        use crate::elements::packet::{Ecn, MarkReason};
        let mut q = cq(1 << 30, None);
        q.aqm = Aqm::CoDel(CoDelParams {
            ecn: true,
            ..CoDelParams::default()
        });
        let mut s = Scheduler::new(Sched::Fq, q, &[], 1500);
        let ms = 1_000_000u64;
        let (mut marks, mut drops) = ([0u32; 3], [0u32; 3]);
        // Flows 0 (ECT(0)) and 1 (Not-ECT) each arrive at their share and
        // a half, flow 2 at half its share.
        for i in 0..6000u64 {
            let now = i * ms;
            for f in [0u16, 1] {
                let e = if f == 0 { Ecn::Ect0 } else { Ecn::NotEct };
                s.enqueue(Packet::sized(1000, f, now).with_ecn(e), now)
                    .unwrap();
                if i % 2 == 0 {
                    s.enqueue(Packet::sized(1000, f, now).with_ecn(e), now)
                        .unwrap();
                }
            }
            if i % 3 == 0 {
                s.enqueue(Packet::sized(1000, 2, now).with_ecn(Ecn::Ect1), now)
                    .unwrap();
            }
            for _ in 0..2 {
                let got = s.dequeue(now, |p, why, _| {
                    assert_eq!(why, DropReason::CoDel);
                    drops[p.flow as usize] += 1;
                });
                if let Some((p, _, Some(why))) = got {
                    assert_eq!((why, p.ecn), (MarkReason::CoDel, Ecn::Ce));
                    marks[p.flow as usize] += 1;
                }
            }
        }
        assert!(
            marks[0] > 50 && drops[1] > 50,
            "marks {marks:?} drops {drops:?}"
        );
        assert_eq!((drops[0], marks[1]), (0, 0));
        assert_eq!((drops[2], marks[2]), (0, 0));
    }
}
