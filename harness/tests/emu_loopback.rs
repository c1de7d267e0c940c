//! The userspace emulator on loopback, measured with the UDP probe.
//!
//! Bounds here are wide enough for a shared, noisy 2-core machine; the
//! accuracy benchmark (`make bench-link`) reports the tight figures.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use harness::bottleneck::{self, Kind};
use harness::emu::{EmuConfig, Emulator, Forward, Priority};
use harness::link::{Dir, LinkSpec};
use harness::probe::{self, Receiver};

fn link(pairs: &[(&str, &str)]) -> LinkSpec {
    LinkSpec::from_pairs(pairs.iter().copied(), Path::new(".")).unwrap()
}

fn lo() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A probe receiver behind an emulator of `l` on loopback (logs into
/// `log_dir` when given).
fn through(l: LinkSpec, log_dir: Option<&Path>) -> (Receiver, Emulator) {
    through_with(l, |cfg| cfg.log_dir = log_dir.map(Path::to_path_buf))
}

/// As [`through`], with `set` changing the emulator's configuration.
fn through_with(l: LinkSpec, set: impl FnOnce(&mut EmuConfig)) -> (Receiver, Emulator) {
    let rx = Receiver::bind(None, lo()).unwrap();
    let mut cfg = EmuConfig::new(
        l,
        vec![Forward {
            listen: lo(),
            target: rx.local_addr(),
        }],
    );
    set(&mut cfg);
    let emu = Emulator::start(cfg).unwrap();
    (rx, emu)
}

#[test]
fn saturated_link_delivers_its_rate_and_logs_every_packet() {
    let l = link(&[("rate", "20mbit"), ("rtt", "20ms"), ("queue", "1bdp")]);
    let dir = tempfile::tempdir().unwrap();
    let (rx, emu) = through(l.clone(), Some(dir.path()));
    // Offer 30 Mbit/s for 2 s: the queue fills and the link runs flat out.
    let sent = probe::send(
        None,
        emu.listen_addrs()[0],
        30e6,
        1350,
        1,
        Duration::from_secs(2),
    )
    .unwrap();
    let arrivals = rx.finish(Duration::from_millis(200)).unwrap();
    let report = emu.stop().unwrap();
    let (m, _) = probe::measure(&sent, &arrivals, |_| 0);
    let err = (m.delivered_bps - 20e6).abs() / 20e6;
    assert!(err < 0.02, "delivered {} bit/s", m.delivered_bps);
    // Every packet is accounted for: delivered + dropped = arrived.
    let up = &report.up;
    assert_eq!(up.arrived_packets, sent.packets);
    assert_eq!(up.delivered_packets + up.drops(), up.arrived_packets);
    assert_eq!(up.delivered_packets, m.received);
    assert!(up.dropped[1] > 0, "the queue must overflow");
    assert!(up.max_queue_bytes <= l.queue_bytes(Dir::Up, 1500));

    // The per-packet log agrees with the counters.
    let log = bottleneck::Reader::open(&dir.path().join("bottleneck.bin")).unwrap();
    assert_eq!(log.header["backend"], "emu");
    let recs: Vec<_> = log.collect();
    let count = |k: Kind| {
        recs.iter()
            .filter(|r| r.kind == k as u8 && r.dir == 0)
            .count() as u64
    };
    assert_eq!(count(Kind::Arrive), up.arrived_packets);
    assert_eq!(count(Kind::Drop), up.drops());
    assert_eq!(count(Kind::Depart), up.sent_packets);
    assert_eq!(recs.len() as u64, report.log_records);
    // Samples: the saturated middle of the run is at full utilization.
    let samples = bottleneck::read_samples(&dir.path().join("bottleneck-samples.jsonl")).unwrap();
    let busy: Vec<f64> = samples
        .iter()
        .filter(|s| s.dir == "up" && s.t_s > 0.3 && s.t_s < 1.9)
        .map(|s| s.utilization)
        .collect();
    assert!(busy.len() >= 10, "{} samples", busy.len());
    // A sample never exceeds the capacity; the mean is full. One sample
    // may fall short: on a loaded 2-core machine the probe's sender can be
    // descheduled for longer than the 20 ms queue takes to drain.
    let mean = busy.iter().sum::<f64>() / busy.len() as f64;
    assert!(
        (0.97..=1.03).contains(&mean),
        "mean utilization {mean} of {busy:?}"
    );
    assert!(busy.iter().all(|u| *u <= 1.1), "{busy:?}");
    let short = busy.iter().filter(|u| **u < 0.9).count();
    assert!(short <= 1, "{short} samples under 90%: {busy:?}");
}

#[test]
fn one_way_delay_matches_the_configuration() {
    let l = link(&[("rate", "10mbit"), ("rtt", "40ms")]);
    let (rx, emu) = through(l, None);
    // 2 Mbit/s offered: no standing queue, so delay = 20 ms + serialization.
    let sent = probe::send(
        None,
        emu.listen_addrs()[0],
        2e6,
        1000,
        1,
        Duration::from_secs(1),
    )
    .unwrap();
    let arrivals = rx.finish(Duration::from_millis(100)).unwrap();
    drop(emu);
    let (m, err) = probe::measure(&sent, &arrivals, |len| 20_000_000 + len as u64 * 8 * 100);
    assert_eq!(m.received, m.sent);
    assert!(
        err[0].abs() < 1.0,
        "median one-way delay error {} ms",
        err[0]
    );
    assert!(
        m.owd_ms[0] > 20.0,
        "delay cannot be shorter than configured: {:?}",
        m.owd_ms
    );
}

#[test]
fn the_link_thread_at_a_real_time_priority_keeps_its_delay_and_says_so() {
    let l = link(&[("rate", "10mbit"), ("rtt", "40ms")]);
    let (rx, emu) = through_with(l, |cfg| {
        assert_eq!(cfg.priority, harness::emu::DEFAULT_PRIORITY);
        assert_eq!(cfg.priority, Priority::Normal);
        cfg.priority = Priority::Fifo(10);
    });
    let sent = probe::send(
        None,
        emu.listen_addrs()[0],
        2e6,
        1000,
        1,
        Duration::from_millis(500),
    )
    .unwrap();
    let arrivals = rx.finish(Duration::from_millis(100)).unwrap();
    let report = emu.stop().unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(report.scheduling, "fifo:10");
    } else {
        assert!(
            report.scheduling == "fifo:10"
                || report.scheduling.starts_with("normal (fifo:10 refused"),
            "{}",
            report.scheduling
        );
    }
    let (m, err) = probe::measure(&sent, &arrivals, |len| 20_000_000 + len as u64 * 8 * 100);
    assert_eq!(m.received, m.sent);
    assert!(
        err[0].abs() < 1.0,
        "median one-way delay error {} ms",
        err[0]
    );
}

#[test]
fn random_loss_is_within_the_binomial_interval() {
    let l = link(&[
        ("rate", "50mbit"),
        ("rtt", "2ms"),
        ("loss", "2%"),
        ("queue", "10bdp"),
        ("seed", "11"),
    ]);
    let (rx, emu) = through(l, None);
    let sent = probe::send(
        None,
        emu.listen_addrs()[0],
        10e6,
        500,
        1,
        Duration::from_secs(1),
    )
    .unwrap();
    let arrivals = rx.finish(Duration::from_millis(100)).unwrap();
    let report = emu.stop().unwrap();
    let (m, _) = probe::measure(&sent, &arrivals, |_| 0);
    let lost = m.sent - m.received;
    let (lo_n, hi_n) = probe::binomial_99(m.sent, 0.02);
    assert!(
        (lo_n..=hi_n).contains(&(lost as f64)),
        "{lost} lost of {}: 99% interval {lo_n:.0}..{hi_n:.0}",
        m.sent
    );
    // All of it from the loss element, none from the queue.
    assert_eq!(report.up.dropped, [lost, 0, 0, 0, 0]);
}

#[test]
fn flows_share_one_bottleneck_in_both_directions() {
    let l = link(&[("rate", "10mbit"), ("rtt", "10ms"), ("queue", "2bdp")]);
    let (rx, emu) = through(l, None);
    let to = emu.listen_addrs()[0];
    // Two senders at 10 Mbit/s each into a 10 Mbit/s link.
    let a = std::thread::spawn(move || {
        probe::send(None, to, 10e6, 1200, 1, Duration::from_secs(2)).unwrap()
    });
    let b = probe::send(None, to, 10e6, 1200, 1, Duration::from_secs(2)).unwrap();
    let a = a.join().unwrap();
    let arrivals = rx.finish(Duration::from_millis(100)).unwrap();
    let report = emu.stop().unwrap();
    assert_eq!(report.flows, 2);
    let total = harness::probe::Sent {
        packets: a.packets + b.packets,
        ..a
    };
    let mut arr = arrivals;
    arr.sort_by_key(|x| x.recv_ns);
    let (m, _) = probe::measure(&total, &arr, |_| 0);
    // Sequence numbers repeat across the two senders, so count bytes.
    let err = (m.delivered_bps - 10e6).abs() / 10e6;
    assert!(
        err < 0.03,
        "shared link delivered {} bit/s",
        m.delivered_bps
    );
    assert_eq!(report.up.delivered_packets as usize, arr.len());
}

#[test]
fn replies_come_back_through_the_down_direction() {
    // A tiny echo server behind the emulator: the client's datagrams go up,
    // the echoes come down, each way with its own delay.
    let l = link(&[
        ("rate", "100mbit"),
        ("up.delay", "5ms"),
        ("down.delay", "15ms"),
    ]);
    let server = std::net::UdpSocket::bind(lo()).unwrap();
    let target = server.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            let _ = server.send_to(&buf[..n], from);
        }
    });
    let emu = Emulator::start(EmuConfig::new(
        l,
        vec![Forward {
            listen: lo(),
            target,
        }],
    ))
    .unwrap();
    let client = std::net::UdpSocket::bind(lo()).unwrap();
    client.connect(emu.listen_addrs()[0]).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut rtts = Vec::new();
    for i in 0..20u8 {
        let t = std::time::Instant::now();
        client.send(&[i; 100]).unwrap();
        let mut buf = [0u8; 200];
        let n = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], &[i; 100]);
        rtts.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let report = emu.stop().unwrap();
    assert_eq!(
        (report.up.delivered_packets, report.down.delivered_packets),
        (20, 20)
    );
    rtts.sort_by(f64::total_cmp);
    assert!(rtts[0] >= 20.0 && rtts[10] < 22.0, "RTTs {rtts:?}");
}

/// Saturates a link with `pairs` for `secs` and returns the per-packet log
/// and the report.
fn saturate(
    pairs: &[(&str, &str)],
    offered: f64,
    size: usize,
    secs: f64,
) -> (
    Vec<bottleneck::Record>,
    harness::emu::EmuReport,
    probe::Measured,
) {
    let dir = tempfile::tempdir().unwrap();
    let l = LinkSpec::from_pairs(pairs.iter().copied(), dir.path()).unwrap();
    let (rx, emu) = through(l, Some(dir.path()));
    let sent = probe::send(
        None,
        emu.listen_addrs()[0],
        offered,
        size,
        1,
        Duration::from_secs_f64(secs),
    )
    .unwrap();
    let arrivals = rx.finish(Duration::from_millis(200)).unwrap();
    let report = emu.stop().unwrap();
    let recs = bottleneck::Reader::open(&dir.path().join("bottleneck.bin"))
        .unwrap()
        .collect();
    (recs, report, probe::measure(&sent, &arrivals, |_| 0).0)
}

#[test]
fn a_mahimahi_trace_sets_the_capacity() {
    // 2 opportunities per ms for 50 ms, then none for 50 ms: a mean of
    // 12 Mbit/s in 100 ms periods of 24 and 0 Mbit/s.
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for ms in 1..=50 {
        text += &format!("{ms}\n{ms}\n");
    }
    text += "100\n";
    let path = dir.path().join("onoff.trace");
    std::fs::write(&path, text).unwrap();
    let trace = path.to_str().unwrap().to_string();
    let l = LinkSpec::from_pairs(
        [
            ("trace", trace.as_str()),
            ("rtt", "10ms"),
            ("queue", "200kb"),
        ],
        Path::new("."),
    )
    .unwrap();
    assert!(
        (l.down.rate_bps - 12.12e6).abs() < 1e3,
        "{}",
        l.down.rate_bps
    );
    let (recs, report, m) = saturate(
        &[("trace", &trace), ("rtt", "10ms"), ("queue", "200kb")],
        20e6,
        1000,
        2.0,
    );
    // 101 opportunities of 1500 B per 100 ms = 12.12 Mbit/s, all used.
    assert!(
        (m.delivered_bps - 12.12e6).abs() / 12.12e6 < 0.03,
        "{}",
        m.delivered_bps
    );
    // Departures only in the "on" half of each period.
    let off = recs
        .iter()
        .filter(|r| r.kind == bottleneck::Kind::Depart as u8)
        .filter(|r| {
            let ms_in_period = (r.t_ns / 1_000_000) % 100;
            ms_in_period > 50 && ms_in_period < 99
        })
        .count();
    assert_eq!(off, 0);
    assert!(report.up.dropped[1] > 0);
}

fn mean_sojourn_ms_after(recs: &[bottleneck::Record], t_ns: u64) -> f64 {
    let s: Vec<f64> = recs
        .iter()
        .filter(|r| r.kind == bottleneck::Kind::Depart as u8 && r.t_ns > t_ns)
        .map(|r| r.sojourn_ns as f64 / 1e6)
        .collect();
    s.iter().sum::<f64>() / s.len().max(1) as f64
}

#[test]
fn codel_and_red_keep_the_queue_shorter_than_droptail() {
    // An unresponsive 10% overload (UDP does not back off): drop-tail fills
    // its 500 packets; RED drops early from the average; CoDel's drop rate
    // climbs as √count until it matches the excess, then holds the queue.
    let base = [("rate", "10mbit"), ("rtt", "20ms"), ("queue", "500pkt")];
    let run = |aqm: &str| {
        let mut p = base.to_vec();
        p.push(("aqm", aqm));
        saturate(&p, 11e6, 1000, 4.0)
    };
    let (tail, tail_r, _) = run("droptail");
    let (codel, codel_r, codel_m) = run("codel");
    let (red, red_r, _) = run("red");
    let last = 3_000_000_000;
    let (t, c, r) = (
        mean_sojourn_ms_after(&tail, last),
        mean_sojourn_ms_after(&codel, last),
        mean_sojourn_ms_after(&red, last),
    );
    eprintln!(
        "mean sojourn in the last second: droptail {t:.1} ms, codel {c:.1} ms, red {r:.1} ms"
    );
    // Drop-tail: 1 Mbit/s of excess for 3 s is 375 kB, about 300 ms of queue.
    assert!(t > 200.0, "drop-tail sojourn {t} ms");
    assert_eq!(tail_r.up.dropped[2..], [0, 0, 0]);
    assert!(c < t / 3.0, "codel sojourn {c} ms vs drop-tail {t} ms");
    assert!(codel_r.up.dropped[3] > 0 && codel_r.up.dropped[1] == 0);
    // CoDel drops only the excess: the link stays busy.
    assert!(
        (codel_m.delivered_bps - 10e6).abs() / 10e6 < 0.03,
        "{}",
        codel_m.delivered_bps
    );
    // RED (min_th 5, max_th 15 packets, gentle) holds the average under
    // 2·max_th = 30 packets of 1000 B, 24 ms at 10 Mbit/s.
    assert!(r < 30.0, "red sojourn {r} ms");
    assert!(red_r.up.dropped[2] > 0);
}

#[test]
fn pie_holds_the_delay_near_its_target() {
    // The same unresponsive 10% overload: after its 150 ms burst allowance
    // PIE's drop probability climbs (slowly while it is small: the gains
    // are scaled down) until it takes the excess, overshoots to about 0.35
    // while the 80 ms queue built meanwhile drains, and winds back down
    // by alpha·(qdelay − target) per update, holding the queueing delay
    // around its 15 ms target from about 2 s on.
    let p = [
        ("rate", "10mbit"),
        ("rtt", "20ms"),
        ("queue", "500pkt"),
        ("aqm", "pie"),
    ];
    let (recs, report, m) = saturate(&p, 11e6, 1000, 5.0);
    let d = mean_sojourn_ms_after(&recs, 3_500_000_000);
    eprintln!(
        "pie: mean sojourn after 3.5 s {d:.1} ms, delivered {:.2} Mbit/s",
        m.delivered_bps / 1e6
    );
    // Drop-tail would sit near 400 ms (500 packets of 1000 B) by now.
    assert!(d < 35.0, "pie sojourn {d} ms");
    // Early drops only (code 5), none for lack of room.
    assert!(report.up.dropped[4] > 0 && report.up.dropped[1] == 0);
    // With a short queue the link idles whenever the sender stalls for
    // longer than the queue lasts (and while the overshoot unwinds), so
    // utilization depends on the machine's load more than drop-tail's.
    assert!(m.delivered_bps > 0.85 * 10e6, "{}", m.delivered_bps);
}

#[test]
fn the_relay_carries_ecn_codepoints_and_marks_ect_packets_ce() {
    // A step marker at 5 packets: a burst of 40 ECT(0) datagrams queues
    // far beyond it, so most leave marked CE; Not-ECT datagrams are never
    // marked, and ECT(1) ones that find no queue keep their codepoint.
    let l = link(&[
        ("rate", "10mbit"),
        ("rtt", "2ms"),
        ("queue", "200pkt"),
        ("aqm", "step:threshold=5pkt"),
    ]);
    let rx = std::net::UdpSocket::bind(lo()).unwrap();
    let emu = Emulator::start(EmuConfig::new(
        l,
        vec![Forward {
            listen: lo(),
            target: rx.local_addr().unwrap(),
        }],
    ))
    .unwrap();
    let tx = std::net::UdpSocket::bind(lo()).unwrap();
    let to = emu.listen_addrs()[0];
    common::send_burst(&tx, to, 1, 0x01, b'1');
    std::thread::sleep(Duration::from_millis(50));
    common::send_burst(&tx, to, 40, 0x02, b'0');
    common::send_burst(&tx, to, 40, 0x00, b'n');
    let got = common::recv_with_tos(&rx);
    emu.stop().unwrap();
    let count = |tag: u8, tos: u8| got.iter().filter(|&&g| g == (tag, tos)).count();
    assert_eq!(count(b'1', 0x01), 1, "{got:?}");
    assert_eq!(count(b'n', 0x00), 40, "{got:?}");
    assert_eq!(count(b'0', 0x02) + count(b'0', 0x03), 40, "{got:?}");
    assert!(count(b'0', 0x03) >= 30, "{got:?}");
    assert!(count(b'0', 0x02) >= 5, "{got:?}");
}
