//! One direction of the emulated link: the elements in order.
//!
//! ```text
//! arrive → loss → duplicate → policer → queue (+ AQM; FIFO or per-class DRR) → serializer → delay + jitter → (reorder) → aggregation → deliver
//! ```
//!
//! Time is virtual: every step happens at the time it would on a real link
//! (a packet leaves the queue when the serializer is free, not when the
//! emulator's thread happened to wake up), so a late wake-up delays only
//! the final hand-off to the socket, never the link's own accounting.
//! Callers must feed arrivals in time order and call [`Pipeline::advance`]
//! with a time no earlier than the last one.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::aggregate::Releases;
use super::delay::Delay;
use super::duplicate::Duplicate;
use super::loss::Loss;
use super::packet::{DropReason, MarkReason, Packet};
use super::policer::TokenBucket;
use super::reorder::Reorder;
use super::rng::Rng;
use super::sched::{ClassQueue, Scheduler};
use super::serializer::Serializer;
use crate::link::changes::{Change, Schedule};
use crate::link::{Dir, LinkSpec, QueueLimit};
use crate::log::{Kind, Record, Sample, Sink};

/// What one direction has done since it started.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Counters {
    /// Packets that reached the emulator.
    pub arrived_packets: u64,
    /// Their bytes.
    pub arrived_bytes: u64,
    /// Drops by reason, in [`DropReason::ALL`]'s order: loss, queue_full,
    /// red, codel, pie (the reasons before DualPI2; this array keeps its
    /// length, so readers of the JSON and of `dropped[i]` are unchanged).
    pub dropped: [u64; 5],
    /// DualPI2's drops: dualpi2_c, dualpi2_l (absent from JSON while none).
    #[serde(skip_serializing_if = "no_dualpi2_drops")]
    pub dropped_dualpi2: [u64; 2],
    /// The policer's drops (absent from JSON while none).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_policer: u64,
    /// CE marks by reason, in [`MarkReason::ALL`]'s order: red, codel,
    /// pie, dualpi2_c, dualpi2_l, step (absent from JSON while none).
    #[serde(skip_serializing_if = "no_marks")]
    pub marked: [u64; 6],
    /// Bytes dropped, every reason.
    pub dropped_bytes: u64,
    /// Copies added by duplication.
    pub duplicated: u64,
    /// Packets that left the queue onto the link.
    pub sent_packets: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Sum of their queueing delays, ns.
    pub sojourn_ns_total: u128,
    /// Packets delivered past the delay line.
    pub delivered_packets: u64,
    /// Their bytes.
    pub delivered_bytes: u64,
    /// Packets that skipped the delay line.
    pub reordered: u64,
    /// The largest queue seen, bytes.
    pub max_queue_bytes: u64,
}

fn no_marks(m: &[u64; 6]) -> bool {
    m.iter().all(|&x| x == 0)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn no_dualpi2_drops(m: &[u64; 2]) -> bool {
    m.iter().all(|&x| x == 0)
}

impl Counters {
    /// Drops of every reason.
    pub fn drops(&self) -> u64 {
        self.dropped.iter().sum::<u64>()
            + self.dropped_dualpi2.iter().sum::<u64>()
            + self.dropped_policer
    }

    /// Drops of one reason.
    pub fn dropped_by(&self, why: DropReason) -> u64 {
        let i = why.index();
        let (a, b) = (self.dropped.len(), self.dropped_dualpi2.len());
        if i < a {
            self.dropped[i]
        } else if i < a + b {
            self.dropped_dualpi2[i - a]
        } else {
            self.dropped_policer
        }
    }

    /// The counter of one reason: [`DropReason::ALL`]'s order runs
    /// through `dropped`, then `dropped_dualpi2`, then `dropped_policer`.
    fn drop_slot(&mut self, why: DropReason) -> &mut u64 {
        let i = why.index();
        let (a, b) = (self.dropped.len(), self.dropped_dualpi2.len());
        if i < a {
            &mut self.dropped[i]
        } else if i < a + b {
            &mut self.dropped_dualpi2[i - a]
        } else {
            &mut self.dropped_policer
        }
    }

    /// CE marks of every reason.
    pub fn marks(&self) -> u64 {
        self.marked.iter().sum()
    }

    /// CE marks of one reason.
    pub fn marked_by(&self, why: MarkReason) -> u64 {
        self.marked[why.index()]
    }
}

struct InFlight {
    at: u64,
    seq: u64,
    pkt: Packet,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// One direction's pipeline.
pub struct Pipeline {
    dir: Dir,
    loss: Loss,
    duplicate: Duplicate,
    queue: Scheduler,
    serializer: Serializer,
    delay: Delay,
    reorder: Reorder,
    policer: Option<TokenBucket>,
    aggregate: Option<Releases>,
    /// A random number from the link's seed that places the releases of
    /// an aggregation without a phase of its own.
    phase_draw: u64,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    /// Scheduled changes not yet made.
    schedule: Schedule,
    /// Whether its capacity moves (a trace, rate changes or pauses): its
    /// samples then carry their capacity.
    capacity_varies: bool,
    /// Arrivals before this time are lost (an outage).
    outage_until: u64,
    /// Byte limits of queue changes, resolved as the link resolves its own.
    limits: Box<dyn Fn(QueueLimit) -> (u64, Option<u64>) + Send>,
    /// What it has done.
    pub counters: Counters,
}

impl Pipeline {
    /// The pipeline for direction `dir` of `link`; `mtu` sizes packet-count
    /// queue limits in bytes. With `sched = "wfq"` every class has weight 1.
    pub fn new(link: &LinkSpec, dir: Dir, mtu: u64) -> Pipeline {
        Pipeline::with_weights(link, dir, mtu, &[])
    }

    /// The pipeline for direction `dir` of `link`, where `weights[c]` is
    /// the weight of class `c` ([`Packet::class`]) when the direction's
    /// scheduler is `wfq` (a class without one gets the smallest weight).
    /// `mtu` sizes packet-count queue limits in bytes and is the DRR
    /// quantum of the lightest class.
    pub fn with_weights(link: &LinkSpec, dir: Dir, mtu: u64, weights: &[f64]) -> Pipeline {
        let s = link.dir(dir);
        // Each element gets its own stream, so changing one parameter does
        // not reshuffle the others' choices.
        let stream = |k: u64| Rng::new(link.seed, (dir as u64) << 8 | k);
        let serializer = match &s.trace {
            Some(t) => Serializer::trace(t),
            None => Serializer::rate(s.rate_bps),
        };
        let phase_draw = stream(6).next_u64();
        Pipeline {
            dir,
            loss: Loss::new(s.loss, stream(1)),
            duplicate: Duplicate::new(s.duplicate, stream(2)),
            queue: Scheduler::new(
                s.sched,
                ClassQueue {
                    limit_bytes: link.queue_bytes(dir, mtu),
                    limit_packets: link.queue_packets(dir),
                    aqm: s.aqm.resolved(s.rate_bps, s.delay_ns),
                    rate_bps: s.rate_bps,
                    seed: link.seed,
                    stream: (dir as u64) << 8 | 3,
                },
                weights,
                mtu,
            ),
            serializer,
            delay: Delay::new(s.delay_ns, s.jitter_ns, s.jitter_distribution, stream(4)),
            reorder: Reorder::new(s.reorder, stream(5)),
            policer: s
                .policer
                .map(|p| TokenBucket::new(p.rate_bps, p.burst_bytes(mtu))),
            aggregate: s.aggregate.as_ref().map(|a| Releases::new(a, phase_draw)),
            phase_draw,
            in_flight: BinaryHeap::new(),
            seq: 0,
            schedule: Schedule::new(&s.changes),
            capacity_varies: s.trace.is_some() || moves_capacity(&s.changes),
            outage_until: 0,
            limits: {
                let link = link.clone();
                Box::new(move |q| {
                    let packets = match q {
                        QueueLimit::Packets(p) => Some(p),
                        _ => None,
                    };
                    (link.limit_bytes(dir, q, mtu), packets)
                })
            },
            counters: Counters::default(),
        }
    }

    /// Makes every scheduled change due at or before `now`, in time order.
    fn apply_due(&mut self, now: u64) {
        while let Some((at, c)) = self.schedule.pop(now) {
            let c: Change = c.clone();
            shape(&mut self.serializer, at, &c);
            if let Some(d) = c.delay_ns {
                self.delay.set_delay(d);
            }
            if let Some(l) = c.loss {
                self.loss.set_model(l);
            }
            if let Some(q) = c.queue {
                let (bytes, packets) = (self.limits)(q);
                self.queue.set_limits(bytes, packets);
            }
            if let Some(a) = &c.aggregate {
                self.aggregate = a.as_ref().map(|a| Releases::new(a, self.phase_draw));
            }
            if let Some(o) = c.outage_ns {
                self.outage_until = self.outage_until.max(at.saturating_add(o));
            }
        }
    }

    fn rec(&self, t: u64, kind: Kind, pkt: &Packet, reason: u8, sojourn: u64) -> Record {
        Record {
            t_ns: t,
            flow: pkt.flow,
            dir: self.dir as u8,
            kind: kind as u8,
            reason,
            ecn: pkt.ecn.bits(),
            size: pkt.len().min(u16::MAX as usize) as u16,
            queue_bytes: self.queue.bytes().min(u32::MAX as u64) as u32,
            queue_packets: self.queue.len() as u32,
            sojourn_ns: sojourn.min(u32::MAX as u64) as u32,
        }
    }

    fn drop_packet(
        &mut self,
        t: u64,
        pkt: &Packet,
        why: DropReason,
        sojourn: u64,
        log: &mut dyn Sink,
    ) {
        *self.counters.drop_slot(why) += 1;
        self.counters.dropped_bytes += pkt.len() as u64;
        log.record(&self.rec(t, Kind::Drop, pkt, why as u8, sojourn));
    }

    fn mark_packet(
        &mut self,
        t: u64,
        pkt: &Packet,
        why: MarkReason,
        sojourn: u64,
        log: &mut dyn Sink,
    ) {
        self.counters.marked[why.index()] += 1;
        log.record(&self.rec(t, Kind::Mark, pkt, why as u8, sojourn));
    }

    /// A packet arrives at `now`.
    pub fn push(&mut self, pkt: Packet, now: u64, log: &mut dyn Sink) {
        self.run_link(now, log);
        self.apply_due(now);
        self.counters.arrived_packets += 1;
        self.counters.arrived_bytes += pkt.len() as u64;
        if now < self.outage_until || self.loss.drop_next() {
            self.drop_packet(now, &pkt, DropReason::Loss, 0, log);
            return;
        }
        let copy = (self.duplicate.copies() == 2).then(|| pkt.clone());
        self.offer(pkt, now, Kind::Arrive, log);
        if let Some(c) = copy {
            self.counters.duplicated += 1;
            self.offer(c, now, Kind::Duplicate, log);
        }
    }

    fn offer(&mut self, pkt: Packet, now: u64, kind: Kind, log: &mut dyn Sink) {
        let r = self.rec(now, kind, &pkt, 0, 0);
        if let Some(p) = &mut self.policer {
            if !p.conform(pkt.len(), now) {
                log.record(&r);
                self.drop_packet(now, &pkt, DropReason::Policer, 0, log);
                return;
            }
        }
        match self.queue.enqueue(pkt, now) {
            Ok(mark) => {
                let mut r = r;
                r.queue_bytes = self.queue.bytes() as u32;
                r.queue_packets = self.queue.len() as u32;
                log.record(&r);
                if let Some(why) = mark {
                    // Marked at enqueue: logged after its arrival, with
                    // the codepoint it now has.
                    self.counters.marked[why.index()] += 1;
                    r.kind = Kind::Mark as u8;
                    r.reason = why as u8;
                    r.ecn = super::packet::Ecn::Ce.bits();
                    log.record(&r);
                }
                self.counters.max_queue_bytes =
                    self.counters.max_queue_bytes.max(self.queue.bytes());
            }
            Err((pkt, why)) => {
                log.record(&r);
                self.drop_packet(now, &pkt, why, 0, log);
            }
        }
    }

    /// Moves packets from the queue onto the link up to `now`.
    fn run_link(&mut self, now: u64, log: &mut dyn Sink) {
        while let Some((size, enqueued)) = self.queue.head() {
            let plan = self.serializer.plan(size, enqueued);
            if plan.start > now {
                break;
            }
            // A change due by the time this packet would start comes
            // first (a new rate, a pause), then the packet is planned again.
            if let Some(t) = self.schedule.due().filter(|&t| t <= plan.start) {
                self.apply_due(t);
                continue;
            }
            let mut drops = Vec::new();
            let got = self
                .queue
                .dequeue(plan.start, |p, why, s| drops.push((p, why, s)));
            for (p, why, s) in drops {
                self.drop_packet(plan.start, &p, why, s, log);
            }
            let Some((pkt, sojourn, mark)) = got else {
                break;
            };
            if let Some(why) = mark {
                self.mark_packet(plan.start, &pkt, why, sojourn, log);
            }
            let plan = if pkt.len() == size {
                plan
            } else {
                self.serializer.plan(pkt.len(), plan.start)
            };
            let end = self.serializer.commit(plan);
            self.counters.sent_packets += 1;
            self.counters.sent_bytes += pkt.len() as u64;
            self.counters.sojourn_ns_total += sojourn as u128;
            log.record(&self.rec(plan.start, Kind::Depart, &pkt, 0, sojourn));
            let at = if self.reorder.jump() {
                self.counters.reordered += 1;
                end
            } else {
                self.delay.deliver_at(end)
            };
            let at = match &mut self.aggregate {
                Some(a) => a.release_at(at, pkt.len() as u64),
                None => at,
            };
            self.seq += 1;
            self.in_flight.push(Reverse(InFlight {
                at,
                seq: self.seq,
                pkt,
            }));
        }
    }

    /// Runs the link up to `now` and appends to `out` every packet whose
    /// delivery time has come, in delivery order.
    pub fn advance(&mut self, now: u64, log: &mut dyn Sink, out: &mut Vec<(u64, Packet)>) {
        self.run_link(now, log);
        self.apply_due(now);
        while self.in_flight.peek().is_some_and(|f| f.0.at <= now) {
            let f = self.in_flight.pop().unwrap().0;
            self.counters.delivered_packets += 1;
            self.counters.delivered_bytes += f.pkt.len() as u64;
            out.push((f.at, f.pkt));
        }
    }

    /// When something next happens, if anything is pending.
    pub fn next_event(&self) -> Option<u64> {
        let link = self
            .queue
            .head()
            .map(|(size, enq)| self.serializer.plan(size, enq).start);
        let deliver = self.in_flight.peek().map(|f| f.0.at);
        match (link, deliver) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Queued bytes and packets now (every class).
    pub fn queue(&self) -> (u64, u64) {
        (self.queue.bytes(), self.queue.len() as u64)
    }

    /// Packets on the wire (past the queue, not yet delivered).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The link's capacity in bits between two times.
    pub fn capacity_bits(&self, t0: u64, t1: u64) -> f64 {
        // Rate changes and pauses due by `t1` but not yet made (nothing
        // happened on the link since) count too.
        if self.schedule.due().is_some_and(|t| t <= t1) {
            let (mut s, mut sch) = (self.serializer.clone(), self.schedule.clone());
            while let Some((at, c)) = sch.pop(t1) {
                shape(&mut s, at, c);
            }
            return s.capacity_bits(t0, t1);
        }
        self.serializer.capacity_bits(t0, t1)
    }
}

/// Whether any of `changes` moves a direction's capacity (its rate, or a
/// pause).
fn moves_capacity(changes: &[Change]) -> bool {
    changes
        .iter()
        .any(|c| c.rate_bps.is_some() || c.pause_ns.is_some())
}

/// A direction's capacity over time as its scheduled changes shape it (its
/// rate changes and pauses, as [`Pipeline::capacity_bits`] counts them),
/// for what samples a link from outside the pipeline: the kernel links'
/// sampler and the summary of their samples.
#[derive(Clone, Debug)]
pub struct ScheduledCapacity {
    serializer: Serializer,
    schedule: Schedule,
    varies: bool,
}

impl ScheduledCapacity {
    /// A direction of `rate_bps` (as written) with `changes`.
    pub fn new(rate_bps: f64, changes: &[Change]) -> ScheduledCapacity {
        ScheduledCapacity {
            serializer: Serializer::rate(rate_bps),
            schedule: Schedule::new(changes),
            varies: moves_capacity(changes),
        }
    }

    /// Whether the changes move the capacity (rate changes, pauses): the
    /// samples then carry theirs ([`Sample::capacity_bits`]).
    pub fn varies(&self) -> bool {
        self.varies
    }

    /// Bits it can carry from `t0` to `t1` ns. Calls come in time order
    /// (`t1` never earlier than a previous call's).
    pub fn bits(&mut self, t0: u64, t1: u64) -> f64 {
        while let Some((at, c)) = self.schedule.pop(t1) {
            shape(&mut self.serializer, at, c);
        }
        self.serializer.capacity_bits(t0, t1)
    }
}

/// What change `c`, made at `at`, does to the link's transmitter: its
/// rate and its pauses (the capacity the samples divide by follows them).
fn shape(s: &mut Serializer, at: u64, c: &Change) {
    if let Some(r) = c.rate_bps {
        s.set_rate(at, r);
    }
    if let Some(p) = c.pause_ns {
        s.pause(at, at.saturating_add(p));
    }
}

/// Periodic samples of both directions (`bottleneck-samples.jsonl`): what
/// left each queue, utilization of the capacity, queue and drops.
pub struct Sampler {
    interval: u64,
    next: u64,
    last: [(u64, Counters); 2],
}

impl Sampler {
    /// Samples every `interval_ns` from time 0.
    pub fn new(interval_ns: u64) -> Sampler {
        let interval = interval_ns.max(1_000_000);
        Sampler {
            interval,
            next: interval,
            last: Default::default(),
        }
    }

    /// When the next sample is due.
    pub fn next_due(&self) -> u64 {
        self.next
    }

    /// The samples of `dirs` (up, down) at `t`; the next falls due one
    /// interval later.
    pub fn take(&mut self, t: u64, dirs: &[Pipeline; 2]) -> [Sample; 2] {
        let out = [0, 1].map(|i| {
            let d = &dirs[i];
            let (t0, prev) = &self.last[i];
            let c = &d.counters;
            let (qb, qp) = d.queue();
            let cap = d.capacity_bits(*t0, t);
            let sent = c.sent_bytes - prev.sent_bytes;
            Sample {
                t_s: t as f64 / 1e9,
                dir: if i == 0 { "up" } else { "down" }.into(),
                interval_s: (t - t0) as f64 / 1e9,
                sent_bytes: sent,
                sent_packets: c.sent_packets - prev.sent_packets,
                utilization: if cap > 0.0 {
                    sent as f64 * 8.0 / cap
                } else {
                    0.0
                },
                queue_bytes: qb,
                queue_packets: qp,
                drops: c.drops() - prev.drops(),
                drops_total: c.drops(),
                marks: c.marks() - prev.marks(),
                marks_total: c.marks(),
                capacity_bits: d.capacity_varies.then_some(cap),
            }
        });
        for (i, d) in dirs.iter().enumerate() {
            self.last[i] = (t, d.counters.clone());
        }
        self.next = t + self.interval;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Aqm, LinkSpec, LossModel, QueueLimit};
    use crate::log::NoSink;

    fn link(rate: f64, delay_ms: u64, queue: QueueLimit) -> LinkSpec {
        let mut l = LinkSpec::default();
        for d in [&mut l.up, &mut l.down] {
            d.rate_bps = rate;
            d.delay_ns = delay_ms * 1_000_000;
            d.queue = queue;
        }
        l
    }

    #[test]
    fn a_burst_is_serialized_delayed_and_tail_dropped() {
        // 12 Mbit/s: 1500 B every 1 ms; 10 ms delay; room for 5 packets.
        let l = link(12e6, 10, QueueLimit::Packets(5));
        let mut d = Pipeline::new(&l, Dir::Down, 1500);
        let mut log: Vec<Record> = Vec::new();
        for i in 0..10 {
            d.push(Packet::sized(1500, i, 0), 0, &mut log);
        }
        // The first goes straight onto the link; 5 wait; 4 are dropped.
        assert_eq!(d.counters.dropped[DropReason::QueueFull as usize - 1], 4);
        let mut out = Vec::new();
        d.advance(1_000_000_000, &mut log, &mut out);
        let times: Vec<u64> = out.iter().map(|(t, _)| *t / 1000).collect();
        assert_eq!(times, vec![11_000, 12_000, 13_000, 14_000, 15_000, 16_000]);
        let flows: Vec<u16> = out.iter().map(|(_, p)| p.flow).collect();
        assert_eq!(flows, vec![0, 1, 2, 3, 4, 5]);
        // The log: 10 arrivals, 4 drops, 6 departs with growing sojourn.
        let count = |k: Kind| log.iter().filter(|r| r.kind == k as u8).count();
        assert_eq!(
            (count(Kind::Arrive), count(Kind::Drop), count(Kind::Depart)),
            (10, 4, 6)
        );
        let sojourns: Vec<u32> = log
            .iter()
            .filter(|r| r.kind == Kind::Depart as u8)
            .map(|r| r.sojourn_ns / 1000)
            .collect();
        assert_eq!(sojourns, vec![0, 1000, 2000, 3000, 4000, 5000]);
        assert_eq!(d.next_event(), None);
    }

    /// A standing queue of 20 packets of 1250 bytes on a 100 Mbit/s link
    /// (50 mean packets of 500 bytes): automatic RED's min_th there is
    /// 62.5 (ns-2's 5 ms of the link), so it drops nothing; if its
    /// thresholds were not derived from the link (left at 5 and 15), the
    /// average would pass 2·max_th and RED would drop nearly every arrival.
    #[test]
    fn automatic_red_takes_its_thresholds_from_the_link() {
        let run = |aqm: &str| {
            let t: toml::Table = toml::from_str(&format!(
                "rate = \"100mbit\"\ndelay = \"20ms\"\nqueue = \"1000pkt\"\naqm = \"{aqm}\""
            ))
            .unwrap();
            let l = LinkSpec::from_toml(&t, std::path::Path::new("."), "link").unwrap();
            let mut d = Pipeline::new(&l, Dir::Down, 1500);
            let mut out = Vec::new();
            // 1250 bytes take 100 us at 100 Mbit/s: a burst of 20, then
            // one arrival per transmission time for 2 s, and one more
            // whenever fewer than 20 are queued (a sender that keeps 20
            // packets in the queue, whatever RED drops).
            for _ in 0..20 {
                d.push(Packet::sized(1250, 0, 0), 0, &mut NoSink);
            }
            for i in 1..=20_000u64 {
                let t = i * 100_000;
                d.advance(t, &mut NoSink, &mut out);
                d.push(Packet::sized(1250, 0, t), t, &mut NoSink);
                if d.queue().1 < 20 {
                    d.push(Packet::sized(1250, 0, t), t, &mut NoSink);
                }
            }
            (
                d.counters.dropped[DropReason::Red as usize - 1],
                d.queue().1,
            )
        };
        let (drops, queued) = run("red:auto=true");
        assert_eq!(drops, 0);
        assert!((15..=21).contains(&queued), "{queued}");
        // The same queue under fixed thresholds of 5 and 15 mean packets.
        let (drops, _) = run("red:min_th=5,max_th=15,mean_pktsize=500,bytes=true,wait=true");
        assert!(drops > 1000, "{drops}");
    }

    #[test]
    fn late_advance_does_not_change_link_timing() {
        let l = link(12e6, 10, QueueLimit::Bdp(10.0));
        let mut early = Pipeline::new(&l, Dir::Up, 1500);
        let mut late = Pipeline::new(&l, Dir::Up, 1500);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..100u64 {
            let t = i * 500_000; // twice the link rate
            early.push(Packet::sized(1500, 0, t), t, &mut NoSink);
            early.advance(t, &mut NoSink, &mut a);
            late.push(Packet::sized(1500, 0, t), t, &mut NoSink);
            if i % 10 == 9 {
                late.advance(t + 300_000, &mut NoSink, &mut b);
            }
        }
        early.advance(u64::MAX / 2, &mut NoSink, &mut a);
        late.advance(u64::MAX / 2, &mut NoSink, &mut b);
        let ta: Vec<u64> = a.iter().map(|x| x.0).collect();
        let tb: Vec<u64> = b.iter().map(|x| x.0).collect();
        assert_eq!(ta, tb);
    }

    #[test]
    fn loss_and_duplication_are_counted_and_logged() {
        let mut l = link(100e6, 1, QueueLimit::Bdp(100.0));
        l.down.loss = LossModel::Random(0.1);
        l.down.duplicate = 0.1;
        l.down.aqm = Aqm::DropTail;
        let mut d = Pipeline::new(&l, Dir::Down, 1500);
        let mut log: Vec<Record> = Vec::new();
        let mut out = Vec::new();
        for i in 0..10_000u64 {
            let t = i * 200_000;
            d.push(Packet::sized(1000, 0, t), t, &mut log);
            d.advance(t, &mut log, &mut out);
        }
        d.advance(u64::MAX / 2, &mut log, &mut out);
        let c = &d.counters;
        let lost = c.dropped[0];
        assert!((900..1100).contains(&lost), "{lost}");
        assert_eq!(c.delivered_packets, 10_000 - lost + c.duplicated);
        assert_eq!(out.len() as u64, c.delivered_packets);
        let dups = log
            .iter()
            .filter(|r| r.kind == Kind::Duplicate as u8)
            .count() as u64;
        assert_eq!(dups, c.duplicated);
        // Same seed, same choices.
        let mut d2 = Pipeline::new(&l, Dir::Down, 1500);
        for i in 0..10_000u64 {
            d2.push(
                Packet::sized(1000, 0, i * 200_000),
                i * 200_000,
                &mut NoSink,
            );
        }
        assert_eq!(d2.counters.dropped, d.counters.dropped);
        assert_eq!(d2.counters.duplicated, d.counters.duplicated);
    }

    #[test]
    fn reordered_packets_overtake() {
        let mut l = link(100e6, 20, QueueLimit::Bdp(10.0));
        l.down.reorder = 0.2;
        let mut d = Pipeline::new(&l, Dir::Down, 1500);
        let mut out = Vec::new();
        for i in 0..1000u64 {
            let t = i * 1_000_000;
            d.push(Packet::sized(100, (i % 60000) as u16, t), t, &mut NoSink);
            d.advance(t, &mut NoSink, &mut out);
        }
        d.advance(u64::MAX / 2, &mut NoSink, &mut out);
        let inversions = out.windows(2).filter(|w| w[1].1.flow < w[0].1.flow).count();
        assert!(inversions > 100, "{inversions}");
        assert_eq!(
            d.counters.reordered as usize,
            out.iter()
                .filter(|(t, p)| *t < p.arrival_ns + 20_000_000)
                .count()
        );
    }

    /// Drives `aqm` (a `[link]` aqm spec) at 10 Mbit/s with twice its
    /// rate of 1250-byte packets of codepoint `ecn` for 2 s; returns the
    /// log and the direction.
    fn overload(aqm: &str, ecn: crate::elements::Ecn) -> (Vec<Record>, Pipeline, Vec<Sample>) {
        let t: toml::Table = toml::from_str(&format!(
            "rate = \"10mbit\"\ndelay = \"10ms\"\nqueue = \"100pkt\"\naqm = \"{aqm}\""
        ))
        .unwrap();
        let l = LinkSpec::from_toml(&t, std::path::Path::new("."), "link").unwrap();
        let mut dirs = [
            Pipeline::new(&l, Dir::Up, 1500),
            Pipeline::new(&l, Dir::Down, 1500),
        ];
        let mut sampler = Sampler::new(100_000_000);
        let mut samples = Vec::new();
        let mut log: Vec<Record> = Vec::new();
        let mut out = Vec::new();
        for i in 0..4000u64 {
            let t = i * 500_000;
            while sampler.next_due() <= t {
                let due = sampler.next_due();
                samples.extend(sampler.take(due, &dirs));
            }
            dirs[1].push(Packet::sized(1250, 0, t).with_ecn(ecn), t, &mut log);
            dirs[1].advance(t, &mut log, &mut out);
        }
        let [_, d] = dirs;
        (log, d, samples)
    }

    #[test]
    fn marks_are_logged_counted_and_sampled() {
        use crate::elements::Ecn;
        let (log, d, samples) = overload("step:threshold=10pkt", Ecn::Ect0);
        let marks: Vec<&Record> = log.iter().filter(|r| r.kind == Kind::Mark as u8).collect();
        assert!(marks.len() > 1000, "{}", marks.len());
        assert!(marks
            .iter()
            .all(|r| r.reason == MarkReason::Step as u8 && r.ecn == Ecn::Ce.bits()));
        assert_eq!(d.counters.marks(), marks.len() as u64);
        assert_eq!(d.counters.marked_by(MarkReason::Step), marks.len() as u64);
        // Marked at enqueue: each mark follows its own arrival record.
        for (i, r) in log.iter().enumerate() {
            if r.kind == Kind::Mark as u8 {
                let a = &log[i - 1];
                assert_eq!(
                    (a.kind, a.t_ns, a.ecn),
                    (Kind::Arrive as u8, r.t_ns, Ecn::Ect0.bits())
                );
            }
        }
        // Departures carry the codepoint they leave with.
        let ce_departs = log
            .iter()
            .filter(|r| r.kind == Kind::Depart as u8 && r.ecn == Ecn::Ce.bits())
            .count();
        assert!(ce_departs > 0);
        let last = samples.iter().rfind(|s| s.dir == "down").unwrap();
        assert!(last.marks_total > 0 && last.marks_total <= d.counters.marks());
        let json = serde_json::to_string(last).unwrap();
        assert!(json.contains("\"marks_total\""), "{json}");
        // CoDel marks at dequeue: logged just before the departure.
        let (log, d, _) = overload("codel:ecn=true", Ecn::Ect1);
        assert!(d.counters.marked_by(MarkReason::CoDel) > 10);
        assert_eq!(d.counters.dropped_by(DropReason::CoDel), 0);
        for (i, r) in log.iter().enumerate() {
            if r.kind == Kind::Mark as u8 {
                let next = &log[i + 1];
                assert_eq!(
                    (next.kind, next.t_ns, next.ecn),
                    (Kind::Depart as u8, r.t_ns, 3)
                );
                assert!(r.sojourn_ns >= 5_000_000);
            }
        }
    }

    /// DualPI2's drops are counted beside the older reasons, whose array
    /// keeps its five entries; its L marks carry their reason.
    #[test]
    fn dualpi2_drops_and_marks_are_counted() {
        use crate::elements::Ecn;
        let (log, d, _) = overload("dualpi2", Ecn::NotEct);
        let c = &d.counters;
        assert!(c.dropped_by(DropReason::DualPi2C) > 100, "{c:?}");
        assert_eq!(c.dropped_dualpi2[0], c.dropped_by(DropReason::DualPi2C));
        assert_eq!(
            c.drops(),
            log.iter().filter(|r| r.kind == Kind::Drop as u8).count() as u64
        );
        let j = serde_json::to_value(c).unwrap();
        assert_eq!(j["dropped"].as_array().unwrap().len(), 5);
        assert!(j.get("dropped_dualpi2").is_some() && j.get("marked").is_none());
        let (_, d, _) = overload("dualpi2", Ecn::Ect1);
        assert!(d.counters.marked_by(MarkReason::DualPi2L) > 100);
        // Unresponsive L traffic raises p' too (PI2 reads the greater of
        // the two queues' delays), into overload: its packets are then
        // dropped with p_C, not only at the queue's limit.
        assert!(
            d.counters.dropped_by(DropReason::DualPi2L) > 0,
            "{:?}",
            d.counters
        );
        let j = serde_json::to_value(&d.counters).unwrap();
        assert!(j.get("dropped_dualpi2").is_some() && j.get("marked").is_some());
        // Unresponsive ECT(0) traffic in the classic queue: in overload
        // ECN is disabled, so it is dropped as well as marked.
        let (_, d, _) = overload("dualpi2", Ecn::Ect0);
        assert!(
            d.counters.marked_by(MarkReason::DualPi2C) > 0,
            "{:?}",
            d.counters
        );
        assert!(
            d.counters.dropped_by(DropReason::DualPi2C) > 0,
            "{:?}",
            d.counters
        );
    }

    /// With Not-ECT traffic an AQM's `ecn` changes nothing: the same log,
    /// record for record, the same counters, and samples whose JSON has
    /// no mark fields (as before ECN existed).
    #[test]
    fn without_ect_packets_ecn_changes_nothing() {
        use crate::elements::Ecn;
        for (plain, with_ecn) in [
            ("codel", "codel:ecn=true,ce_threshold=1ms"),
            ("red:wq=0.02", "red:wq=0.02,ecn=true"),
            ("pie", "pie:ecn=true"),
            ("droptail", "step:threshold=5pkt"),
        ] {
            let (a, da, sa) = overload(plain, Ecn::NotEct);
            let (b, db, sb) = overload(with_ecn, Ecn::NotEct);
            assert!(a == b, "{plain} / {with_ecn}");
            assert_eq!(da.counters, db.counters);
            assert_eq!(db.counters.marks(), 0);
            for (x, y) in sa.iter().zip(&sb) {
                let (jx, jy) = (
                    serde_json::to_string(x).unwrap(),
                    serde_json::to_string(y).unwrap(),
                );
                assert_eq!(jx, jy);
                assert!(!jy.contains("marks"), "{jy}");
            }
            assert!(
                da.counters.drops() > 100,
                "{plain}: {}",
                da.counters.drops()
            );
        }
    }
}
