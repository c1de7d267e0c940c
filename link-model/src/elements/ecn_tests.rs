//! Tests of ECN marking across the queue elements: RED, CoDel and PIE
//! with `ecn`, the step threshold and DualPI2, each with ECN-capable and
//! Not-ECT traffic, some open loop and some against window-based senders
//! that react to marks (a small closed-loop model: a DCTCP-like scalable
//! sender and a Reno-like classic one behind one bottleneck).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::packet::{DropReason, Ecn, MarkReason, Packet};
use super::queue::Queue;
use super::rng::Rng;
use super::sched::{ClassQueue, Scheduler};
use crate::link::{
    Aqm, CoDelParams, DualPi2Params, PieParams, RedParams, Sched, StepParams, StepThreshold,
};

const MS: u64 = 1_000_000;

fn queue(aqm: Aqm, limit_bytes: u64) -> Queue {
    Queue::new(limit_bytes, None, &aqm, 10e6, Rng::new(3, 3))
}

fn sched(aqm: Aqm, limit_bytes: u64) -> Scheduler {
    Scheduler::new(
        Sched::Fifo,
        ClassQueue {
            limit_bytes,
            limit_packets: None,
            aqm,
            rate_bps: 20e6,
            seed: 7,
            stream: 3,
        },
        &[],
        1500,
    )
}

/// Marks and drops by codepoint: `[ect][kind]`, ect 0 Not-ECT, 1 ECT;
/// kind 0 marks, 1 drops.
#[derive(Debug, Default, PartialEq)]
struct Tally([[u64; 2]; 2]);

impl Tally {
    fn ect_marks(&self) -> u64 {
        self.0[1][0]
    }
    fn ect_drops(&self) -> u64 {
        self.0[1][1]
    }
    fn plain_marks(&self) -> u64 {
        self.0[0][0]
    }
    fn plain_drops(&self) -> u64 {
        self.0[0][1]
    }
}

fn ecn_red() -> Aqm {
    Aqm::Red(RedParams {
        wq: 0.2,
        ecn: true,
        ..RedParams::default()
    })
}

#[test]
fn red_with_ecn_marks_ect_and_drops_not_ect_early() {
    let mut q = queue(ecn_red(), 10_000_000);
    let mut t = Tally::default();
    // Every other arrival is ECT(0); the queue is held near 12 packets,
    // between min_th (5) and max_th (15): only early, unforced decisions.
    for i in 0..20_000u64 {
        let ecn = if i % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
        let e = ecn.is_ect() as usize;
        match q.enqueue(Packet::sized(1000, 0, i).with_ecn(ecn), i) {
            Ok(Some(why)) => {
                assert_eq!(why, MarkReason::Red);
                t.0[e][0] += 1;
            }
            Ok(None) => {}
            Err((_, why)) => {
                assert_eq!(why, DropReason::Red);
                t.0[e][1] += 1;
            }
        }
        while q.len() > 12 {
            let (p, _, m) = q.dequeue(i, |_, _, _| panic!()).unwrap();
            assert!(m.is_none());
            // Only the ECT(0) arrivals (even times) may leave with CE.
            if p.arrival_ns % 2 == 1 {
                assert_eq!(p.ecn, Ecn::NotEct);
            } else {
                assert!(matches!(p.ecn, Ecn::Ect0 | Ecn::Ce));
            }
        }
    }
    assert_eq!((t.ect_drops(), t.plain_marks()), (0, 0), "{t:?}");
    // The same probability for both: as many marks as drops, roughly.
    assert!(t.ect_marks() > 300 && t.plain_drops() > 300, "{t:?}");
    let ratio = t.ect_marks() as f64 / t.plain_drops() as f64;
    assert!((0.8..1.25).contains(&ratio), "{t:?}");
    // Without ecn the ECT packets are dropped like the others.
    let mut q = queue(
        Aqm::Red(RedParams {
            wq: 0.2,
            ..RedParams::default()
        }),
        10_000_000,
    );
    let mut drops_ect = 0;
    for i in 0..20_000u64 {
        match q.enqueue(Packet::sized(1000, 0, i).with_ecn(Ecn::Ect0), i) {
            Ok(m) => assert!(m.is_none()),
            Err(_) => drops_ect += 1,
        }
        while q.len() > 12 {
            q.dequeue(i, |_, _, _| ());
        }
    }
    assert!(drops_ect > 300, "{drops_ect}");
}

#[test]
fn red_with_ecn_still_drops_when_forced_or_full() {
    // No dequeues: the queue and its average pass 2·max_th, where RED's
    // drop is forced, then the 40-packet limit. Each verdict must lie in
    // its own region of the average: marks between min_th and 2·max_th
    // (gentle), forced drops at 2·max_th or above, and so every mark
    // comes before the first forced drop.
    let Aqm::Red(p) = ecn_red() else {
        unreachable!()
    };
    assert!(p.gentle);
    let mut q = queue(ecn_red(), 40_000);
    let (mut marks, mut red_drops, mut full) = (0, 0, 0);
    let (mut last_mark, mut first_forced) = (None, None);
    for i in 0..200u64 {
        let verdict = q.enqueue(Packet::sized(1000, 0, i).with_ecn(Ecn::Ect1), i);
        let avg = q.red().unwrap().avg;
        match verdict {
            Ok(Some(_)) => {
                assert!(
                    (p.min_th..2.0 * p.max_th).contains(&avg),
                    "arrival {i} marked at average {avg}"
                );
                marks += 1;
                last_mark = Some(i);
            }
            Ok(None) => {}
            Err((pkt, DropReason::Red)) => {
                assert_eq!(pkt.ecn, Ecn::Ect1, "a forced drop does not mark");
                assert!(
                    avg >= 2.0 * p.max_th,
                    "arrival {i} dropped by RED at average {avg}, below the forced region"
                );
                red_drops += 1;
                first_forced.get_or_insert(i);
            }
            Err((_, DropReason::QueueFull)) => full += 1,
            Err((_, why)) => panic!("{why:?}"),
        }
    }
    assert!(
        marks > 0 && red_drops > 0,
        "marks {marks}, forced {red_drops}"
    );
    assert!(last_mark < first_forced, "{last_mark:?} {first_forced:?}");
    assert_eq!(q.len() as u64, 200 - red_drops - full);
}

#[test]
fn codel_with_ecn_marks_ect_in_place_of_drops() {
    let run = |ecn_flag: bool, ecn: fn(u64) -> Ecn| {
        let mut q = queue(
            Aqm::CoDel(CoDelParams {
                ecn: ecn_flag,
                ..CoDelParams::default()
            }),
            100_000_000,
        );
        let mut t = Tally::default();
        // Arrivals every ms, dequeues every 2 ms: the sojourn grows.
        for i in 0..3000u64 {
            q.enqueue(Packet::sized(1200, 0, i).with_ecn(ecn(i)), i * MS)
                .unwrap();
            if i % 2 == 0 {
                let got = q.dequeue(i * MS, |p, why, s| {
                    assert_eq!(why, DropReason::CoDel);
                    assert!(s >= 5 * MS);
                    t.0[p.ecn.is_ect() as usize][1] += 1;
                });
                if let Some((p, s, Some(why))) = got {
                    assert_eq!((why, p.ecn), (MarkReason::CoDel, Ecn::Ce));
                    assert!(s >= 5 * MS);
                    t.0[1][0] += 1;
                }
            }
        }
        t
    };
    let all_ect = run(true, |_| Ecn::Ect0);
    assert_eq!(
        all_ect.ect_drops() + all_ect.plain_drops(),
        0,
        "{all_ect:?}"
    );
    assert!(all_ect.ect_marks() > 50, "{all_ect:?}");
    let mixed = run(true, |i| if i % 4 < 2 { Ecn::Ect1 } else { Ecn::NotEct });
    assert!(
        mixed.ect_marks() > 20 && mixed.plain_drops() > 20,
        "{mixed:?}"
    );
    assert_eq!(
        (mixed.ect_drops(), mixed.plain_marks()),
        (0, 0),
        "{mixed:?}"
    );
    // ecn off: ECT packets are dropped as before.
    let off = run(false, |_| Ecn::Ect0);
    assert_eq!(off.ect_marks(), 0);
    assert!(off.ect_drops() > 50, "{off:?}");
}

#[test]
fn codel_ce_threshold_marks_every_ect_packet_above_it() {
    let mut q = queue(
        Aqm::CoDel(CoDelParams {
            ce_threshold_ns: Some(2 * MS),
            ..CoDelParams::default()
        }),
        100_000_000,
    );
    // Sojourn 1 ms, 3 ms: below target, so CoDel itself never acts.
    for (sojourn, want) in [(MS, None), (3 * MS, Some(MarkReason::Step))] {
        let t0 = 10 * sojourn;
        q.enqueue(Packet::sized(1000, 0, t0).with_ecn(Ecn::Ect1), t0)
            .unwrap();
        q.enqueue(Packet::sized(1000, 0, t0), t0).unwrap();
        let (p, _, m) = q.dequeue(t0 + sojourn, |_, _, _| panic!()).unwrap();
        assert_eq!(m, want);
        assert_eq!(p.ecn == Ecn::Ce, want.is_some());
        let (p, _, m) = q.dequeue(t0 + sojourn, |_, _, _| panic!()).unwrap();
        assert_eq!((p.ecn, m), (Ecn::NotEct, None), "Not-ECT is left alone");
    }
}

#[test]
fn pie_with_ecn_marks_only_up_to_ten_percent() {
    let mut q = queue(
        Aqm::Pie(PieParams {
            ecn: true,
            ..PieParams::default()
        }),
        2000 * 1200,
    );
    let (mut marks, mut ect_drops, mut plain_drops) = (0, 0, 0);
    let mut max_mark_p: f64 = 0.0;
    let mut min_ect_drop_p: f64 = 1.0;
    // 4 % over the link's rate, unresponsive. PIE's de-randomized drops
    // come at about p/1.85 of the arrivals (pie.rs), half of them Not-ECT:
    // dropping only those would need p near 15 %, dropping both types
    // p near 7 %, so p hovers around 10 %, where ECT packets turn from
    // marked to dropped.
    for i in 0..30_000u64 {
        let ecn = if i % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
        let got = q.enqueue(Packet::sized(1200, 0, i * MS).with_ecn(ecn), i * MS);
        let p = q.pie().unwrap().prob();
        match got {
            Ok(Some(why)) => {
                assert_eq!((why, ecn), (MarkReason::Pie, Ecn::Ect0));
                marks += 1;
                max_mark_p = max_mark_p.max(p);
            }
            Ok(None) => {}
            Err((_, DropReason::Pie)) if ecn.is_ect() => {
                ect_drops += 1;
                min_ect_drop_p = min_ect_drop_p.min(p);
            }
            Err((_, DropReason::Pie)) => plain_drops += 1,
            Err((_, DropReason::QueueFull)) => {}
            Err((_, why)) => panic!("{why:?}"),
        }
        if i % 25 != 24 {
            q.dequeue(i * MS, |_, _, _| panic!("PIE drops at enqueue"));
        }
    }
    eprintln!("pie ecn: marks {marks}, ECT drops {ect_drops}, Not-ECT drops {plain_drops}, largest p at a mark {max_mark_p:.4}, smallest p at an ECT drop {min_ect_drop_p:.4}");
    assert!(
        marks > 50 && ect_drops > 50 && plain_drops > 100,
        "{marks} {ect_drops} {plain_drops}"
    );
    assert!(max_mark_p <= 0.1, "{max_mark_p}");
    assert!(min_ect_drop_p > 0.1, "{min_ect_drop_p}");
}

#[test]
fn nothing_is_marked_without_ect() {
    let aqms = [
        ecn_red(),
        Aqm::CoDel(CoDelParams {
            ecn: true,
            ce_threshold_ns: Some(MS),
            ..CoDelParams::default()
        }),
        Aqm::Pie(PieParams {
            ecn: true,
            ..PieParams::default()
        }),
        Aqm::Step(StepParams {
            threshold: StepThreshold::Packets(5),
        }),
        Aqm::Step(StepParams::default()),
        Aqm::DualPi2(DualPi2Params::default()),
    ];
    for aqm in aqms {
        let mut s = sched(aqm, 200 * 1200);
        let mut drops = 0;
        for i in 0..20_000u64 {
            match s.enqueue(Packet::sized(1200, 0, i * MS), i * MS) {
                Ok(m) => assert!(m.is_none(), "{aqm:?}"),
                Err(_) => drops += 1,
            }
            if i % 2 == 0 {
                if let Some((p, _, m)) = s.dequeue(i * MS, |_, _, _| drops += 1) {
                    assert!(m.is_none() && p.ecn == Ecn::NotEct, "{aqm:?}");
                }
            }
        }
        assert!(drops > 1000, "{aqm:?}: {drops}");
    }
}

/// A window-based sender in the closed-loop model.
#[derive(Clone, Debug)]
struct Src {
    /// The codepoint it sends.
    ecn: Ecn,
    /// Scalable (DCTCP: once per window, `cwnd·(1 − alpha/2)` with alpha
    /// the moving average, gain 1/16, of the fraction of packets marked)
    /// or classic (Reno: halve once per round trip on a mark or loss).
    scalable: bool,
    cwnd: f64,
    inflight: u32,
    /// No classic reduction before this time (one per round trip).
    hold_until: u64,
    /// DCTCP's state: alpha, and this window's acks, marks and end.
    alpha: f64,
    acked: u32,
    marked: u32,
    window_end: u64,
}

impl Src {
    fn new(ecn: Ecn, scalable: bool, cwnd: f64) -> Src {
        Src {
            ecn,
            scalable,
            cwnd,
            inflight: 0,
            hold_until: 0,
            alpha: 1.0,
            acked: 0,
            marked: 0,
            window_end: 0,
        }
    }

    /// DCTCP's per-ack bookkeeping, and its once-a-window update.
    fn dctcp_ack(&mut self, ce: bool, now: u64, rtt: u64) {
        self.acked += 1;
        self.marked += ce as u32;
        if now >= self.window_end {
            let f = self.marked as f64 / self.acked as f64;
            self.alpha += (f - self.alpha) / 16.0;
            if self.marked > 0 {
                self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(2.0);
            }
            (self.acked, self.marked) = (0, 0);
            self.window_end = now + rtt;
        }
    }
}

/// What the closed loop measured after its warm-up, per source.
#[derive(Debug, Default)]
struct Measured {
    departures: Vec<u64>,
    sojourn_ns: Vec<Vec<u64>>,
    marks: Vec<u64>,
    drops: Vec<u64>,
    /// Packets queued after each departure (every source).
    queue_after: Vec<usize>,
    busy_ns: u64,
    window_ns: u64,
    /// Marks by reason, every source.
    reasons: Vec<MarkReason>,
}

impl Measured {
    fn mean_sojourn_ms(&self, i: usize) -> f64 {
        let s = &self.sojourn_ns[i];
        s.iter().sum::<u64>() as f64 / s.len().max(1) as f64 / 1e6
    }
    fn utilization(&self) -> f64 {
        self.busy_ns as f64 / self.window_ns as f64
    }
    fn mean_queue(&self) -> f64 {
        self.queue_after.iter().sum::<usize>() as f64 / self.queue_after.len().max(1) as f64
    }
}

/// Runs `srcs` through `s` at `rate_bps` with base round trip `rtt`
/// (1500-byte packets) until `until`, measuring from `warmup`.
fn closed_loop(
    s: &mut Scheduler,
    srcs: &mut [Src],
    rate_bps: f64,
    rtt: u64,
    warmup: u64,
    until: u64,
) -> Measured {
    const SIZE: usize = 1500;
    let service = (SIZE as f64 * 8.0 / rate_bps * 1e9) as u64;
    let n = srcs.len();
    let mut m = Measured {
        sojourn_ns: vec![Vec::new(); n],
        departures: vec![0; n],
        marks: vec![0; n],
        drops: vec![0; n],
        window_ns: until - warmup,
        ..Measured::default()
    };
    // (time, seq, source, signal: 0 ack, 1 ack with CE, 2 loss)
    let mut acks: BinaryHeap<Reverse<(u64, u64, usize, u8)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut link_free = 0u64;
    let mut lost = Vec::new();
    // Marks at enqueue: (source, time, reason).
    let mut enq_marks: Vec<(usize, u64, MarkReason)> = Vec::new();
    let send = |s: &mut Scheduler,
                src: &mut Src,
                i: usize,
                now: u64,
                lost: &mut Vec<(usize, u64)>,
                enq_marks: &mut Vec<(usize, u64, MarkReason)>| {
        while (src.inflight as f64) < src.cwnd.floor() {
            src.inflight += 1;
            let p = Packet::sized(SIZE, i as u16, now).with_ecn(src.ecn);
            match s.enqueue(p, now) {
                Err(_) => lost.push((i, now)),
                Ok(Some(why)) => enq_marks.push((i, now, why)),
                Ok(None) => {}
            }
        }
    };
    for (i, src) in srcs.iter_mut().enumerate() {
        send(s, src, i, 0, &mut lost, &mut enq_marks);
    }
    loop {
        for (i, t, why) in enq_marks.drain(..) {
            if t >= warmup {
                m.marks[i] += 1;
                m.reasons.push(why);
            }
        }
        for (i, t) in lost.drain(..) {
            seq += 1;
            acks.push(Reverse((t + rtt, seq, i, 2)));
            if t >= warmup {
                m.drops[i] += 1;
            }
        }
        let t_link = s.head().map_or(u64::MAX, |(_, enq)| link_free.max(enq));
        let t_ack = acks.peek().map_or(u64::MAX, |a| a.0 .0);
        let now = t_link.min(t_ack);
        if now >= until {
            break;
        }
        if t_ack <= t_link {
            let Reverse((_, _, i, signal)) = acks.pop().unwrap();
            let src = &mut srcs[i];
            src.inflight -= 1;
            let classic_cut = |src: &mut Src| {
                if now >= src.hold_until {
                    src.cwnd = (src.cwnd / 2.0).max(2.0);
                    src.hold_until = now + rtt * 3 / 2;
                }
            };
            match signal {
                0 | 1 if src.scalable => {
                    if signal == 0 {
                        src.cwnd += 1.0 / src.cwnd;
                    }
                    src.dctcp_ack(signal == 1, now, rtt);
                }
                0 => src.cwnd += 1.0 / src.cwnd,
                _ => classic_cut(src),
            }
            send(s, src, i, now, &mut lost, &mut enq_marks);
        } else {
            let mut dropped = Vec::new();
            let got = s.dequeue(now, |p, _, _| dropped.push(p.flow as usize));
            for i in dropped {
                lost.push((i, now));
            }
            let Some((p, sojourn, mark)) = got else {
                continue;
            };
            let i = p.flow as usize;
            link_free = now + service;
            seq += 1;
            acks.push(Reverse((
                now + service + rtt,
                seq,
                i,
                (p.ecn == Ecn::Ce) as u8,
            )));
            if now >= warmup {
                m.departures[i] += 1;
                m.sojourn_ns[i].push(sojourn);
                m.queue_after.push(s.len());
                m.busy_ns += service.min(until - now);
                if let Some(why) = mark {
                    m.marks[i] += 1;
                    m.reasons.push(why);
                }
            }
        }
    }
    m
}

/// DCTCP's own setting (20 Mbit/s, 40 ms, K = 20 packets): a scalable
/// sender holds the queue near K with marks alone.
#[test]
fn a_step_threshold_holds_a_scalable_sender_near_k() {
    let k = 20;
    let mut s = sched(
        Aqm::Step(StepParams {
            threshold: StepThreshold::Packets(k),
        }),
        1000 * 1500,
    );
    let mut srcs = [Src::new(Ecn::Ect0, true, 10.0)];
    let m = closed_loop(&mut s, &mut srcs, 20e6, 40 * MS, 10_000 * MS, 40_000 * MS);
    let q = m.mean_queue();
    eprintln!(
        "step K={k}: mean queue {q:.1} pkt, utilization {:.3}, marks {}, drops {}",
        m.utilization(),
        m.marks[0],
        m.drops[0]
    );
    assert!(
        (0.5 * k as f64..=1.5 * k as f64).contains(&q),
        "mean queue {q} packets"
    );
    assert_eq!(m.drops[0], 0);
    assert!(m.marks[0] > 100, "{:?}", m.marks);
    assert!(m.reasons.iter().all(|r| *r == MarkReason::Step));
    assert!(m.utilization() >= 0.95, "utilization {}", m.utilization());
    // The same sender, Not-ECT: no marks, so it fills the buffer to its
    // limit and loses packets there.
    let mut s = sched(
        Aqm::Step(StepParams {
            threshold: StepThreshold::Packets(k),
        }),
        200 * 1500,
    );
    let mut srcs = [Src::new(Ecn::NotEct, true, 10.0)];
    let m = closed_loop(&mut s, &mut srcs, 20e6, 40 * MS, 10_000 * MS, 40_000 * MS);
    assert_eq!(m.marks[0], 0);
    assert!(m.drops[0] > 0);
    assert!(m.mean_queue() > 2.0 * k as f64, "{}", m.mean_queue());
}

/// The same on delay: `step:threshold=5ms` at 20 Mbit/s is 8.3 packets
/// of 1500 bytes (above DCTCP's guideline of a seventh of the 33-packet
/// BDP): the sender's packets wait about that long.
#[test]
fn a_delay_step_holds_the_sojourn_near_its_threshold() {
    let mut s = sched(
        Aqm::Step(StepParams {
            threshold: StepThreshold::Time(5 * MS),
        }),
        1000 * 1500,
    );
    let mut srcs = [Src::new(Ecn::Ect1, true, 10.0)];
    let m = closed_loop(&mut s, &mut srcs, 20e6, 20 * MS, 10_000 * MS, 30_000 * MS);
    let d = m.mean_sojourn_ms(0);
    eprintln!(
        "step 5ms: mean sojourn {d:.2} ms, utilization {:.3}, marks {}",
        m.utilization(),
        m.marks[0]
    );
    assert!((2.5..7.5).contains(&d), "mean sojourn {d} ms");
    assert!(m.reasons.iter().all(|r| *r == MarkReason::Step));
    assert!(m.marks[0] > 100, "{:?}", m.marks);
    assert!(m.utilization() >= 0.95, "{}", m.utilization());
}

/// DualPI2 with one scalable (ECT(1)) and one classic (Not-ECT) sender:
/// the L packets wait about the L step (1 ms), the classic ones about
/// the PI2 target (15 ms), and the link stays busy.
#[test]
fn dualpi2_separates_l4s_and_classic_delays() {
    let mut s = sched(Aqm::DualPi2(DualPi2Params::default()), 1000 * 1500);
    let mut srcs = [
        Src::new(Ecn::Ect1, true, 10.0),
        Src::new(Ecn::NotEct, false, 10.0),
    ];
    let m = closed_loop(&mut s, &mut srcs, 20e6, 20 * MS, 10_000 * MS, 60_000 * MS);
    let (l, c) = (m.mean_sojourn_ms(0), m.mean_sojourn_ms(1));
    let share = m.departures[0] as f64 / (m.departures[0] + m.departures[1]) as f64;
    eprintln!(
        "dualpi2 closed loop: L sojourn {l:.3} ms, C sojourn {c:.2} ms, utilization {:.3}, L share {share:.3}, L marks {}, C drops {}",
        m.utilization(),
        m.marks[0],
        m.drops[1]
    );
    assert!(l < 1.5, "L mean sojourn {l} ms");
    assert!((8.0..22.0).contains(&c), "C mean sojourn {c} ms");
    assert!(m.utilization() >= 0.95, "{}", m.utilization());
    // The L sender sees marks only, the classic one drops only.
    assert_eq!(m.drops[0], 0);
    assert!(m.marks[0] > 100 && m.drops[1] > 10, "{m:?}");
    assert_eq!(m.marks[1], 0);
    assert!(m.reasons.iter().all(|r| *r == MarkReason::DualPi2L));
}

/// Open loop (Poisson, unresponsive): L traffic at 30 % of the link and
/// Not-ECT classic traffic at 80 %. PI2 drops the classic excess (1/8 of
/// it) to hold its delay at the target, so p' settles near √(1/8) and the
/// L marking probability near 2·p'; measured over the packets, the L mark
/// rate is 2·√(classic drop rate) (RFC 9332 §2.1's coupling, k = 2).
#[test]
fn dualpi2_coupling_holds_between_measured_rates() {
    let rate = 100e6;
    let size = 1250usize;
    let service = (size as f64 * 8.0 / rate * 1e9) as u64; // 100 us
    let mut s = sched(Aqm::DualPi2(DualPi2Params::default()), 100_000 * 1250);
    let mut rng = Rng::new(11, 1);
    let gap = |load: f64, rng: &mut Rng| {
        let u = 1.0 - rng.unit();
        (-u.ln() * service as f64 / load) as u64 + 1
    };
    let (mut next_l, mut next_c) = (0u64, 0u64);
    let mut link_free = 0u64;
    let until = 60_000 * MS;
    let warm = 20_000 * MS;
    let (mut l_sent, mut l_marked, mut c_arrived, mut c_dropped) = (0u64, 0u64, 0u64, 0u64);
    let mut l_sojourn = Vec::new();
    loop {
        let t_link = s.head().map_or(u64::MAX, |(_, e)| link_free.max(e));
        let t = next_l.min(next_c).min(t_link);
        if t >= until {
            break;
        }
        if t == next_l {
            s.enqueue(Packet::sized(size, 0, t).with_ecn(Ecn::Ect1), t)
                .unwrap();
            next_l = t + gap(0.3, &mut rng);
        } else if t == next_c {
            s.enqueue(Packet::sized(size, 1, t), t).unwrap();
            if t >= warm {
                c_arrived += 1;
            }
            next_c = t + gap(0.8, &mut rng);
        } else {
            let got = s.dequeue(t, |p, why, _| {
                assert_eq!((p.flow, why), (1, DropReason::DualPi2C));
                if t >= warm {
                    c_dropped += 1;
                }
            });
            if let Some((p, sojourn, mark)) = got {
                link_free = t + service;
                if p.flow == 0 && t >= warm {
                    l_sent += 1;
                    l_marked += mark.is_some() as u64;
                    l_sojourn.push(sojourn);
                }
            }
        }
    }
    let p_c = c_dropped as f64 / c_arrived as f64;
    let p_l = l_marked as f64 / l_sent as f64;
    let mean = l_sojourn.iter().sum::<u64>() as f64 / l_sojourn.len() as f64 / 1e6;
    eprintln!(
        "dualpi2 open loop: classic drop rate {p_c:.4}, L mark rate {p_l:.4}, 2·sqrt(p_C) {:.4}, L mean sojourn {mean:.3} ms",
        2.0 * p_c.sqrt()
    );
    // The classic excess: 1 − (1 − 0.3)/0.8 = 1/8, a little more as
    // Poisson arrivals leave the link idle now and then.
    assert!((0.11..0.15).contains(&p_c), "classic drop rate {p_c}");
    let want = 2.0 * p_c.sqrt();
    assert!(
        (p_l - want).abs() < 0.05 * want,
        "L mark rate {p_l}, 2·√p_C = {want}"
    );
    let d = s.dualpi2().unwrap();
    assert!((d.coupled_prob() - 2.0 * d.classic_prob().sqrt()).abs() < 1e-12);
    // The L queue stays short: its mean sojourn is well under 1 ms.
    assert!(mean < 0.5, "L mean sojourn {mean} ms");
}

/// The step threshold's one meaning (DCTCP's K, Alizadeh et al. 2010
/// §3.1, "greater than K"): an ECN-capable arrival is marked when the
/// packets (bytes) already waiting, not counting itself nor the one on
/// the wire, are more than K. Not-ECT arrivals are left alone.
#[test]
fn a_step_marks_an_arrival_that_finds_more_than_k_waiting() {
    for (threshold, size, k_packets) in [
        (StepThreshold::Packets(3), 1000, 3),
        // 3000 bytes: three 1000-byte packets are exactly K.
        (StepThreshold::Bytes(3000), 1000, 3),
        // `step:threshold=30kb` (30 720 bytes) in 1500-byte packets: 20
        // are 30 000 bytes, 21 are over.
        (StepThreshold::Bytes(30 * 1024), 1500, 20),
    ] {
        let mut q = queue(Aqm::Step(StepParams { threshold }), 10_000_000);
        for i in 0..k_packets + 3 {
            // Before this arrival, i packets of `size` bytes wait.
            let m = q
                .enqueue(Packet::sized(size, 0, i).with_ecn(Ecn::Ect0), i)
                .unwrap();
            let want = (i > k_packets).then_some(MarkReason::Step);
            assert_eq!(m, want, "{threshold:?}: arrival finding {i} waiting");
        }
        let plain = q.enqueue(Packet::sized(size, 0, 99), 99).unwrap();
        assert_eq!(plain, None, "{threshold:?}: Not-ECT is never marked");
    }
}

/// `step:threshold=30kb` in a closed loop: a scalable sender of 1500-byte
/// packets holds the queue near 30 720 bytes (20.5 packets), with marks
/// alone.
#[test]
fn a_byte_step_holds_a_scalable_sender_near_its_bytes() {
    let k_bytes = 30 * 1024;
    let mut s = sched(
        Aqm::Step(StepParams {
            threshold: StepThreshold::Bytes(k_bytes),
        }),
        1000 * 1500,
    );
    let mut srcs = [Src::new(Ecn::Ect0, true, 10.0)];
    let m = closed_loop(&mut s, &mut srcs, 20e6, 40 * MS, 10_000 * MS, 40_000 * MS);
    let q = m.mean_queue() * 1500.0;
    eprintln!(
        "step K={k_bytes} B: mean queue {q:.0} B, utilization {:.3}, marks {}",
        m.utilization(),
        m.marks[0]
    );
    let k = k_bytes as f64;
    assert!((0.5 * k..=1.5 * k).contains(&q), "mean queue {q} bytes");
    assert_eq!(m.drops[0], 0);
    assert!(m.marks[0] > 100, "{:?}", m.marks);
    assert!(m.utilization() >= 0.95, "utilization {}", m.utilization());
}
