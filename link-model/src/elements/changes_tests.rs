//! Scheduled link changes through one direction's pipeline: a rate step,
//! a pause, an outage, a delay change, a new queue limit, a new loss
//! model, a repeating change; and the capacity the samples divide by.

use super::packet::{DropReason, Packet};
use super::pipeline::Pipeline;
use crate::link::{Dir, LinkSpec};
use crate::log::{Kind, Record};

pub(super) const MS: u64 = 1_000_000;
pub(super) const S: u64 = 1_000_000_000;

/// A link whose `[link]` table is `extra` after 12 Mbit/s, 20 ms one way
/// and a 1000-packet queue (1500-byte packets take 1 ms at 12 Mbit/s).
pub(super) fn link(extra: &str) -> LinkSpec {
    let text = format!("rate = \"12mbit\"\ndelay = \"20ms\"\nqueue = \"1000pkt\"\n{extra}");
    let t: toml::Table = text.parse().unwrap();
    LinkSpec::from_toml(&t, std::path::Path::new("."), "link").unwrap()
}

/// Offers `n` 1500-byte packets at `every` ns from `from`, advancing the
/// link to each arrival and then 10 s past the last; returns the log and
/// the deliveries.
pub(super) fn offer(
    d: &mut Pipeline,
    from: u64,
    every: u64,
    n: u64,
) -> (Vec<Record>, Vec<(u64, Packet)>) {
    let (mut log, mut out) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = from + i * every;
        d.advance(t, &mut log, &mut out);
        d.push(Packet::sized(1500, 0, t), t, &mut log);
    }
    d.advance(from + n * every + 10 * S, &mut log, &mut out);
    (log, out)
}

/// Departure times, ns.
fn departures(log: &[Record]) -> Vec<u64> {
    log.iter()
        .filter(|r| r.kind == Kind::Depart as u8)
        .map(|r| r.t_ns)
        .collect()
}

#[test]
fn a_rate_step_changes_the_spacing_of_what_leaves_from_its_time() {
    // Saturated (a packet every 0.5 ms against 1 ms of serialization)
    // for 3 s; at 1 s the rate falls to 3 Mbit/s (4 ms a packet), at 2 s
    // it is back.
    let l = link(
        "[[changes]]\nat = \"1s\"\nrate = \"3mbit\"\n[[changes]]\nat = \"2s\"\nrate = \"12mbit\"\n",
    );
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (log, _) = offer(&mut d, 0, MS / 2, 6000);
    let dep = departures(&log);
    let in_window = |a: u64, b: u64| dep.iter().filter(|&&t| t >= a && t < b).count();
    // 1000 packets in the first second, 250 in the second, 1000 in the
    // third (the packet on the wire at a change finishes at its rate: at
    // most one off).
    assert!(
        (999..=1001).contains(&in_window(0, S)),
        "{}",
        in_window(0, S)
    );
    assert!(
        (249..=251).contains(&in_window(S, 2 * S)),
        "{}",
        in_window(S, 2 * S)
    );
    assert!(
        (999..=1001).contains(&in_window(2 * S, 3 * S)),
        "{}",
        in_window(2 * S, 3 * S)
    );
    // Spacing: 1 ms before, 4 ms during.
    let gap = |t: u64| {
        let i = dep.iter().position(|&x| x >= t).unwrap();
        dep[i + 1] - dep[i]
    };
    assert_eq!(gap(S / 2), MS);
    assert_eq!(gap(3 * S / 2), 4 * MS);
    assert_eq!(gap(5 * S / 2), MS);
    // The capacity the samples divide by follows: 12 + 3 + 12 Mbit.
    assert_eq!(d.capacity_bits(0, 3 * S), 27e6);
    assert_eq!(d.capacity_bits(S / 2, 3 * S / 2), 6e6 + 1.5e6);
}

#[test]
fn a_scheduled_capacity_counts_as_the_pipeline_does() {
    // What samples a link from outside (the kernel links) divides by:
    // the same capacity as the pipeline's, from the changes alone.
    use super::pipeline::ScheduledCapacity;
    let l = link(
        "[[changes]]\nat = \"1s\"\nrate = \"3mbit\"\n[[changes]]\nat = \"2s\"\ndelay = \"50ms\"\n[[changes]]\nat = \"3s\"\nrate = \"6mbit\"\n",
    );
    let d = Pipeline::new(&l, Dir::Down, 1500);
    let mut c = ScheduledCapacity::new(l.down.rate_bps, &l.down.changes);
    // 12 Mbit/s for half a second, 3 for two (across the delay change), 6
    // for half a second.
    assert_eq!(c.bits(S / 2, 7 * S / 2), 6e6 + 6e6 + 3e6);
    assert_eq!(c.bits(S / 2, 7 * S / 2), d.capacity_bits(S / 2, 7 * S / 2));
    assert_eq!(c.bits(4 * S, 5 * S), 6e6);
}

#[test]
fn the_capacity_counts_a_change_nothing_has_made_yet() {
    // An idle link: no packet ever makes the change, the samples must
    // still see it.
    let l = link("[[changes]]\nat = \"1s\"\nrate = \"3mbit\"\n");
    let d = Pipeline::new(&l, Dir::Down, 1500);
    assert_eq!(d.capacity_bits(0, 2 * S), 15e6);
    assert_eq!(d.capacity_bits(0, S), 12e6);
}

#[test]
fn a_pause_holds_the_queue_and_an_outage_loses_arrivals() {
    // A packet every 2 ms (half the link) for 3 s. From 1 s the link
    // pauses for 200 ms: nothing leaves, the 100 arrivals wait and leave
    // back to back after it. From 2 s an outage of 100 ms loses the 50
    // arrivals in it and nothing else.
    let l = link("[[changes]]\nat = \"1s\"\npause = \"200ms\"\n[[changes]]\nat = \"2s\"\noutage = \"100ms\"\n");
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (log, _) = offer(&mut d, 0, 2 * MS, 1500);
    let dep = departures(&log);
    assert_eq!(
        dep.iter().filter(|&&t| t > S && t < S + 200 * MS).count(),
        0
    );
    let after = dep.iter().position(|&t| t >= S + 200 * MS).unwrap();
    assert_eq!(dep[after], S + 200 * MS);
    assert_eq!(
        dep[after + 1] - dep[after],
        MS,
        "the backlog leaves back to back"
    );
    assert_eq!(d.counters.dropped_by(DropReason::Loss), 50);
    let lost: Vec<u64> = log
        .iter()
        .filter(|r| r.kind == Kind::Drop as u8)
        .map(|r| r.t_ns)
        .collect();
    assert!(
        lost.iter().all(|&t| (2 * S..2 * S + 100 * MS).contains(&t)),
        "{lost:?}"
    );
    // Paused capacity is no capacity.
    assert_eq!(d.capacity_bits(0, 2 * S), 12e6 * 1.8);
}

#[test]
fn delay_queue_and_loss_changes_apply_from_their_time() {
    let l = link(
        "[[changes]]\nat = \"1s\"\ndelay = \"100ms\"\nqueue = \"3pkt\"\n[[changes]]\nat = \"2s\"\nloss = \"100%\"\n",
    );
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (mut log, mut out) = (Vec::new(), Vec::new());
    // Before: 20 ms after leaving.
    d.push(Packet::sized(1500, 0, 0), 0, &mut log);
    d.advance(S / 2, &mut log, &mut out);
    assert_eq!(out.pop().unwrap().0, MS + 20 * MS);
    // After 1 s: 100 ms, and a burst of 10 finds room for the one on the
    // wire and 3 waiting.
    for _ in 0..10 {
        d.push(Packet::sized(1500, 0, S), S, &mut log);
    }
    assert_eq!(d.counters.dropped_by(DropReason::QueueFull), 6);
    d.advance(3 * S / 2, &mut log, &mut out);
    let t: Vec<u64> = out.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        t,
        (1..=4).map(|k| S + k * MS + 100 * MS).collect::<Vec<_>>()
    );
    // After 2 s every arrival is lost.
    for i in 0..20 {
        d.push(Packet::sized(1500, 0, 2 * S + i), 2 * S + i, &mut log);
    }
    assert_eq!(d.counters.dropped_by(DropReason::Loss), 20);
}

#[test]
fn a_change_with_every_repeats_for_the_whole_run() {
    // The link pauses for 50 ms every second from 0.5 s: a packet every
    // 2 ms for 4 s sees four pauses, each holding 25 arrivals.
    let l = link("[[changes]]\nat = \"500ms\"\nevery = \"1s\"\npause = \"50ms\"\n");
    let mut d = Pipeline::new(&l, Dir::Down, 1500);
    let (log, _) = offer(&mut d, 0, 2 * MS, 2000);
    let dep = departures(&log);
    for k in 0..4 {
        let p = S / 2 + k * S;
        assert_eq!(
            dep.iter().filter(|&&t| t > p && t < p + 50 * MS).count(),
            0,
            "pause {k}"
        );
        assert!(
            dep.contains(&(p + 50 * MS)),
            "pause {k} ends with a departure"
        );
    }
    assert_eq!(d.capacity_bits(0, 4 * S), 12e6 * (4.0 - 0.2));
}

#[test]
fn changes_are_read_written_back_and_refused_with_reasons() {
    let l = link(
        "[[changes]]\nat = \"2s\"\nrate = \"5mbit\"\n[[changes]]\nat = \"1s\"\nevery = \"10s\"\noutage = \"1s\"\n[down]\n[[down.changes]]\nat = \"3s\"\ndelay = \"100ms\"\nloss = \"1%\"\nqueue = \"0.5bdp\"\npause = \"10ms\"\n",
    );
    // Sorted by time; [[down.changes]] replaces the shared ones downstream.
    assert_eq!(l.up.changes.len(), 2);
    assert_eq!(l.up.changes[0].at_ns, S);
    assert_eq!(l.down.changes.len(), 1);
    let back = LinkSpec::from_toml(&l.to_toml(), std::path::Path::new("."), "link").unwrap();
    assert_eq!(back, l);
    assert!(
        l.describe().contains("2 scheduled changes"),
        "{}",
        l.describe()
    );
    let bad = |extra: &str| {
        let text = format!("rate = \"12mbit\"\n{extra}");
        let t: toml::Table = text.parse().unwrap();
        LinkSpec::from_toml(&t, std::path::Path::new("."), "link")
            .unwrap_err()
            .to_string()
    };
    for (extra, want) in [
        (
            "[[changes]]\nrate = \"5mbit\"\n",
            "link.changes[0].at: missing",
        ),
        ("[[changes]]\nat = \"1s\"\n", "changes nothing"),
        (
            "[[changes]]\nat = \"1s\"\nspeed = \"5mbit\"\n",
            "link.changes[0].speed: unknown field",
        ),
        (
            "[[changes]]\nat = \"1s\"\nrate = \"fast\"\n",
            "link.changes[0].rate",
        ),
        (
            "[[changes]]\nat = \"soon\"\nrate = \"5mbit\"\n",
            "link.changes[0].at",
        ),
        (
            "[[changes]]\nat = \"1s\"\nevery = \"1ms\"\npause = \"1ms\"\n",
            "link.changes[0].every",
        ),
        (
            "[[changes]]\nat = \"1s\"\nevery = \"1s\"\noutage = \"1s\"\n",
            "never come back",
        ),
        (
            "[[changes]]\nat = \"1s\"\npause = \"0s\"\n",
            "longer than 0",
        ),
        ("changes = 3\n", "an array of tables"),
    ] {
        let e = bad(extra);
        assert!(e.contains(want), "{extra}: {e}");
    }
}

#[test]
fn changes_after_the_end_and_overlapping_outages_are_refused() {
    let check = |extra: &str| link(extra).check_schedule("link", 20 * S);
    assert!(check("[[changes]]\nat = \"19s\"\nrate = \"5mbit\"\n").is_ok());
    let e = check("[[changes]]\nat = \"20s\"\nrate = \"5mbit\"\n").unwrap_err();
    assert_eq!(e.field, "link.changes");
    assert!(
        e.problem
            .contains("at 20s is at or after the run's end (20s)"),
        "{e}"
    );
    // Two outages that overlap, one of them repeating; pauses alike.
    let e = check(
        "[[changes]]\nat = \"5s\"\nevery = \"5s\"\noutage = \"1s\"\n[[changes]]\nat = \"10.5s\"\noutage = \"100ms\"\n",
    )
    .unwrap_err();
    assert!(
        e.problem
            .contains("the outage from 10s to 11s overlaps the outage from 10500ms"),
        "{e}"
    );
    let e = check("[down]\n[[down.changes]]\nat = \"1s\"\npause = \"2s\"\n[[down.changes]]\nat = \"2s\"\npause = \"1s\"\n")
        .unwrap_err();
    assert_eq!(e.field, "link.down.changes");
    assert!(e.problem.contains("a pause may not begin"), "{e}");
    // Back to back, or an outage during a pause, is allowed.
    assert!(check(
        "[[changes]]\nat = \"1s\"\noutage = \"1s\"\n[[changes]]\nat = \"2s\"\noutage = \"1s\"\n[[changes]]\nat = \"1.5s\"\npause = \"1s\"\n"
    )
    .is_ok());
}
