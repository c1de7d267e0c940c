//! The policer and aggregation through one direction's pipeline.

//! The link and the offered load are the scheduled changes' tests' own:
//! 12 Mbit/s (a 1500-byte packet per ms), 20 ms one way, 1000 packets of
//! queue, 1500-byte packets at a fixed spacing from time 0.

use super::changes_tests::{link, offer as offer_from, MS};
use super::packet::{DropReason, Packet};
use super::pipeline::Pipeline;
use crate::link::{Dir, LinkSpec};
use crate::log::{Kind, Record};

fn offer(d: &mut Pipeline, every: u64, n: u64) -> (Vec<Record>, Vec<(u64, Packet)>) {
    offer_from(d, 0, every, n)
}

#[test]
fn the_policer_passes_its_burst_and_rate_and_drops_the_rest_unqueued() {
    // Offered 12 Mbit/s for 2 s to a 6 Mbit/s policer with a 15,000-byte
    // bucket: the first 10 packets ride the bucket, then every other one.
    let l = link("policer = \"rate=6mbit,burst=10pkt\"\n");
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (log, out) = offer(&mut d, MS, 2000);
    let c = &d.counters;
    let passed = 2000 - c.dropped_by(DropReason::Policer);
    // 10 from the bucket, then 6 Mbit/s over 1.999 s: 999 more.
    assert_eq!(passed, 10 + 999, "{c:?}");
    assert_eq!(c.drops(), c.dropped_policer);
    assert_eq!(out.len() as u64, passed);
    // What passes never waits: the link is twice the policed rate.
    assert!(c.max_queue_bytes <= 1500, "{}", c.max_queue_bytes);
    let logged = log
        .iter()
        .filter(|r| r.kind == Kind::Drop as u8 && r.reason == DropReason::Policer as u8)
        .count() as u64;
    assert_eq!(logged, c.dropped_policer);
    let j = serde_json::to_value(c).unwrap();
    assert_eq!(j["dropped_policer"], c.dropped_policer);
    // Without a policer the field is absent, as in results before it.
    let mut plain = Pipeline::new(&link(""), Dir::Down, 1500);
    offer(&mut plain, MS, 10);
    assert!(serde_json::to_value(&plain.counters)
        .unwrap()
        .get("dropped_policer")
        .is_none());
}

#[test]
fn aggregation_delivers_at_releases_and_a_burst_caps_each() {
    // Packets cross in 1 ms each and would arrive at 21, 22, ... ms; with
    // a release every 4 ms they arrive 4 at a time at 24, 28, ... ms.
    let l = link("aggregate = \"period=4ms,phase=0ms\"\n");
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (_, out) = offer(&mut d, MS, 400);
    assert!(out.iter().all(|(t, _)| t % (4 * MS) == 0));
    assert_eq!(out[0].0, 24 * MS);
    assert_eq!(out.iter().filter(|(t, _)| *t == 28 * MS).count(), 4);
    // In order, and never before they would have arrived unaggregated.
    for (i, (t, p)) in out.iter().enumerate() {
        let plain = p.arrival_ns + MS + 20 * MS;
        assert!(*t >= plain && *t < plain + 4 * MS, "{i}: {t} vs {plain}");
    }
    assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    // At most 2 per 4 ms release: the link delivers half its rate and the
    // wait grows by 2 ms per release.
    let l = link("aggregate = \"period=4ms,burst=2pkt,phase=0ms\"\n");
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (_, out) = offer(&mut d, MS, 400);
    assert_eq!(out.len(), 400);
    let last = out.last().unwrap().0;
    assert_eq!(last, 20 * MS + 200 * 4 * MS, "{}", last / MS);
    // The uplink alone: the downlink is untouched.
    let l = link("[up]\naggregate = \"period=10ms\"\n");
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (_, out) = offer(&mut d, MS, 10);
    assert_eq!(out[0].0, 21 * MS);
}

#[test]
fn a_change_turns_aggregation_on_and_off() {
    let l = link(
        "[[changes]]\nat = \"100ms\"\naggregate = \"period=5ms,phase=0ms\"\n[[changes]]\nat = \"200ms\"\naggregate = \"none\"\n",
    );
    assert!(l.describe().contains("2 scheduled changes"));
    let back = LinkSpec::from_toml(&l.to_toml(), std::path::Path::new("."), "link").unwrap();
    assert_eq!(back, l);
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (_, out) = offer(&mut d, MS, 300);
    // Packets that left the link before 100 ms arrive one per ms; from
    // then until 200 ms only at multiples of 5 ms; then one per ms again.
    let left = |p: &Packet| p.arrival_ns + MS;
    for (t, p) in &out {
        let plain = left(p) + 20 * MS;
        if left(p) < 100 * MS || left(p) >= 200 * MS {
            assert_eq!(*t, plain);
        } else {
            assert!(t % (5 * MS) == 0 && *t >= plain && *t < plain + 5 * MS);
        }
    }
}

#[test]
fn without_a_phase_the_seed_places_the_releases() {
    // Each seed puts every release at the same offset within the period;
    // the same seed the same offset again, another seed another.
    let offsets = |seed: u64| {
        let mut l = link("aggregate = \"period=4ms\"\n");
        l.seed = seed;
        let mut d = Pipeline::new(&l, Dir::Down, 1500);
        let (_, out) = offer(&mut d, MS, 50);
        let mut o: Vec<u64> = out.iter().map(|(t, _)| t % (4 * MS)).collect();
        o.dedup();
        o
    };
    let (a, b) = (offsets(1), offsets(2));
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a, offsets(1));
    assert_ne!(a, b);
}
