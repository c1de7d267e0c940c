//! Every algorithm, driven by random event sequences, never panics and never
//! gives a NaN, infinite or too-small window: the window stays at or above
//! 2 x the current max datagram size. The events include ECN feedback
//! (`on_ecn`) with any counts: none, zero, huge (up to u64::MAX), more marks
//! than ECN-capable packets, marks with no acknowledged bytes, and marks on
//! packets sent at any time. 200 cases x 600 events = 120,000
//! events per algorithm with default parameters and as many with `ecn` at
//! its maximum (`ecn=classic`), and 30,000 more for each other
//! parameter at its minimum and at its maximum. Each extreme runs with the
//! other parameters at values the registry accepts with it (searched: Vegas
//! alpha at its maximum needs beta there too); an extreme no accepted spec
//! reaches, or one that did not run, fails the test.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cc_algorithms::registry::{AlgorithmInfo, ParamInfo, ParamKind};
use cc_algorithms::{algorithms, Controller, Origin};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use quiche::cc::*;

#[derive(Debug, Clone)]
enum Op {
    Send {
        n: usize,
        size: usize,
        app_limited: bool,
    },
    Ack {
        n: usize,
        rtt_us: u64,
        rate: u64,
        app_limited: bool,
        sample: bool,
    },
    Loss {
        n: usize,
        new_period: bool,
    },
    Persistent,
    Pto(u32),
    Spurious,
    Mtu(usize),
    Idle(u64),
    Ecn {
        ce: u64,
        ect: u64,
        acked_bytes: usize,
        /// 0: the last ACK's newest packet; 1: now; 2: the start.
        sent: u8,
        srtt_us: u64,
    },
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        4 => 1u64..64,
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..40, 1usize..1500, any::<bool>())
            .prop_map(|(n, size, app_limited)| Op::Send { n, size, app_limited }),
        6 => (1usize..40, 0u64..20_000_000, any::<u64>(), any::<bool>(), any::<bool>())
            .prop_map(|(n, rtt_us, rate, app_limited, sample)| Op::Ack { n, rtt_us, rate, app_limited, sample }),
        2 => (1usize..20, any::<bool>()).prop_map(|(n, new_period)| Op::Loss { n, new_period }),
        1 => Just(Op::Persistent),
        1 => (1u32..20).prop_map(Op::Pto),
        1 => Just(Op::Spurious),
        1 => (1200usize..9000).prop_map(Op::Mtu),
        1 => (0u64..100_000_000).prop_map(Op::Idle),
        4 => (count(), count(), prop_oneof![Just(0usize), 1usize..100_000, Just(usize::MAX)], 0u8..3, prop_oneof![Just(0u64), 1u64..2_000_000])
            .prop_map(|(ce, ect, acked_bytes, sent, srtt_us)| Op::Ecn { ce, ect, acked_bytes, sent, srtt_us }),
    ]
}

fn check(name: &str, cc: &dyn CongestionController, mss: usize) {
    let w = cc.congestion_window();
    assert!(w >= 2 * mss, "{name}: window {w} below 2 x {mss}");
    if let Some(rate) = cc.pacing_rate() {
        assert!(rate > 0, "{name}: zero pacing rate");
    }
    cc.visit_metrics(&mut |k, v| assert!(v.is_finite(), "{name}: metric {k} = {v}"));
    let _ = cc.state_name();
    let _ = cc.ssthresh();
}

fn run(name: &str, cc: &mut dyn CongestionController, ops: &[Op]) {
    let mut now = Instant::now();
    let mut mss = 1200;
    let mut pn = 0u64;
    let mut in_flight: Vec<(u64, usize, Instant)> = Vec::new();
    let mut min_rtt: Option<Duration> = None;
    let mut acked = Vec::new();
    let start = now;
    let mut last_acked_sent: Option<Instant> = None;
    check(name, cc, mss);
    for op in ops {
        now += Duration::from_micros(10);
        let bif: usize = in_flight.iter().map(|p| p.1).sum();
        match *op {
            Op::Send {
                n,
                size,
                app_limited,
            } => {
                for _ in 0..n {
                    let b: usize = in_flight.iter().map(|p| p.1).sum();
                    let p = SentPacket {
                        space: PacketSpace::Application,
                        pkt_num: pn,
                        size,
                        bytes_in_flight: b,
                        app_limited,
                    };
                    cc.on_packet_sent(&p, now);
                    in_flight.push((pn, size, now));
                    pn += 1;
                }
            }
            Op::Ack {
                n,
                rtt_us,
                rate,
                app_limited,
                sample,
            } => {
                let n = n.min(in_flight.len());
                now += Duration::from_micros(rtt_us);
                acked.clear();
                acked.extend(
                    in_flight
                        .drain(..n)
                        .map(|(pkt_num, size, time_sent)| AckedPacket {
                            pkt_num,
                            size,
                            time_sent,
                        }),
                );
                let bytes: usize = acked.iter().map(|p: &AckedPacket| p.size).sum();
                if n > 0 {
                    last_acked_sent = Some(acked[n - 1].time_sent);
                }
                let rtt_sample = (sample && n > 0).then(|| now - acked[n - 1].time_sent);
                if let Some(s) = rtt_sample {
                    min_rtt = Some(min_rtt.map_or(s, |m| m.min(s)));
                }
                let latest = rtt_sample.unwrap_or(Duration::from_millis(100));
                let ack = AckEvent {
                    space: PacketSpace::Application,
                    acked: &acked,
                    acked_bytes: bytes,
                    rtt_sample,
                    rtt: RttEstimates {
                        latest_rtt: latest,
                        min_rtt,
                        smoothed_rtt: latest,
                        rttvar: latest / 2,
                    },
                    bytes_in_flight_before: bif,
                    bytes_in_flight_after: bif - bytes,
                    app_limited,
                    delivery_rate: rate,
                    delivery_rate_app_limited: app_limited,
                    recovery_start_time: None,
                };
                cc.on_ack(&ack, now);
            }
            Op::Loss { n, new_period } => {
                let n = n.min(in_flight.len());
                if n > 0 {
                    let lost: Vec<_> = in_flight.drain(..n).collect();
                    let last = lost[n - 1];
                    let ev = LossEvent {
                        space: PacketSpace::Application,
                        lost_bytes: lost.iter().map(|p| p.1).sum(),
                        lost_packets: n,
                        largest_lost_pkt_num: last.0,
                        largest_lost_time_sent: last.2,
                        new_recovery_period: new_period,
                        bytes_in_flight: bif,
                        rtt: RttEstimates {
                            latest_rtt: Duration::from_millis(50),
                            min_rtt,
                            smoothed_rtt: Duration::from_millis(50),
                            rttvar: Duration::from_millis(5),
                        },
                    };
                    cc.on_congestion_event(&ev, now);
                }
            }
            Op::Persistent => cc.on_persistent_congestion(now),
            Op::Pto(k) => cc.on_pto(k, now),
            Op::Spurious => cc.on_spurious_loss(now),
            Op::Mtu(m) => {
                mss = m;
                cc.on_mtu_change(m);
            }
            Op::Idle(us) => {
                now += Duration::from_micros(us);
                cc.on_restart_after_idle(Duration::from_micros(us), now);
            }
            Op::Ecn {
                ce,
                ect,
                acked_bytes,
                sent,
                srtt_us,
            } => {
                let srtt = Duration::from_micros(srtt_us);
                let ev = EcnEvent {
                    space: PacketSpace::Application,
                    newly_ce: ce,
                    newly_ect: ect,
                    acked_bytes,
                    largest_acked_time_sent: match sent {
                        0 => last_acked_sent.unwrap_or(now),
                        1 => now,
                        _ => start,
                    },
                    bytes_in_flight: bif,
                    rtt: RttEstimates {
                        latest_rtt: srtt,
                        min_rtt,
                        smoothed_rtt: srtt,
                        rttvar: srtt / 2,
                    },
                };
                cc.on_ecn(&ev, now);
            }
        }
        check(name, cc, mss);
    }
}

/// One setting a plugin is run at: its defaults, or one parameter at one
/// end of its declared range.
struct Setting {
    /// `defaults`, or `NAME=min` / `NAME=max`.
    what: String,
    /// A spec the registry accepts with that setting.
    spec: String,
}

/// The values tried for a parameter that is not the one at its extreme:
/// its default (or, when required, the value `example_spec` gives it),
/// then its minimum, maximum and midpoint.
fn candidates(p: &ParamInfo) -> Vec<f64> {
    let first = p.default.unwrap_or(match p.kind {
        ParamKind::Rate => 40e6,
        _ => p.min,
    });
    let mut v = vec![first];
    for x in [p.min, p.max, (p.min + p.max) / 2.0] {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// A spec the registry accepts as a plugin with `fixed` (a parameter and
/// its value) and the others as [`candidates`] give them, defaults first:
/// the first accepted combination, or the first refusals if none is.
fn accepted(info: &AlgorithmInfo, fixed: Option<(&ParamInfo, f64)>) -> Result<String, String> {
    let others: Vec<&ParamInfo> = info
        .params
        .iter()
        .filter(|p| p.kind != ParamKind::File && fixed.is_none_or(|(f, _)| f.name != p.name))
        .collect();
    // A slow-start rule's constant is tried with that rule chosen.
    let rule = fixed.and_then(|(f, _)| {
        if f.name.starts_with("hs_") {
            Some(1.0)
        } else if f.name.starts_with("search_") {
            Some(2.0)
        } else {
            None
        }
    });
    let choices: Vec<Vec<f64>> = others
        .iter()
        .map(|p| match rule {
            Some(code) if p.name == "slow_start" => vec![code],
            _ => candidates(p),
        })
        .collect();
    let combinations: usize = choices.iter().map(Vec::len).product();
    let mut refusals = Vec::new();
    for mut n in 0..combinations {
        let mut items = Vec::new();
        for (p, c) in others.iter().zip(&choices) {
            let v = c[n % c.len()];
            n /= c.len();
            // Optional parameters at their default are left out, so the
            // plain defaults are the bare name.
            if p.default != Some(v) {
                items.push(format!("{}={v}", p.name));
            }
        }
        if let Some((p, v)) = fixed {
            items.push(format!("{}={v}", p.name));
        }
        let spec = if items.is_empty() {
            info.name.to_string()
        } else {
            format!("{}:{}", info.name, items.join(","))
        };
        match cc_algorithms::parse(&spec) {
            Ok(Controller::Plugin(_)) => return Ok(spec),
            Ok(Controller::Builtin(..)) => refusals.push(format!("{spec}: not a plugin")),
            Err(e) => refusals.push(e.to_string()),
        }
    }
    let n = refusals.len();
    refusals.truncate(3);
    Err(format!(
        "{} ({n} combinations refused)",
        refusals.join("; ")
    ))
}

/// Every plugin's settings: its defaults, and each numeric parameter at
/// its declared minimum and at its maximum (Vegas's alpha at 1000 needs a
/// beta of 1000 too: the other parameters are searched for values that
/// make the spec valid). Panics naming each setting no spec could reach.
fn settings() -> Vec<(&'static str, Vec<Setting>)> {
    let mut out = Vec::new();
    let mut unreachable = Vec::new();
    for info in algorithms().filter(|a| a.origin == Origin::Plugin) {
        let mut all = Vec::new();
        let mut wanted = vec![("defaults".to_string(), None)];
        for p in info.params.iter().filter(|p| p.kind != ParamKind::File) {
            if let ParamKind::Choice(names) = p.kind {
                // Every choice (every slow start, every codepoint), not
                // only the first and the last.
                for (i, n) in names.iter().enumerate() {
                    wanted.push((format!("{}={n}", p.name), Some((p, i as f64))));
                }
            } else {
                wanted.push((format!("{}=min", p.name), Some((p, p.min))));
                wanted.push((format!("{}=max", p.name), Some((p, p.max))));
            }
        }
        for (what, fixed) in wanted {
            match accepted(info, fixed) {
                Ok(spec) => all.push(Setting { what, spec }),
                Err(why) => unreachable.push(format!("{} {what}: {why}", info.name)),
            }
        }
        out.push((info.name, all));
    }
    assert!(
        unreachable.is_empty(),
        "no spec the registry accepts reaches:\n{}",
        unreachable.join("\n")
    );
    out
}

#[test]
fn every_plugin_stays_numerically_safe() {
    let config = ControllerConfig {
        max_datagram_size: 1200,
        initial_congestion_window_packets: 10,
        initial_rtt: Duration::from_millis(333),
    };
    let plugins = settings();
    assert!(plugins.len() >= 18, "{} plugins", plugins.len());
    for (name, settings) in &plugins {
        // Every plugin runs ECN-capable: with `ecn=classic`, or DCTCP and
        // Prague as they are. BBRv3 has no ECN response (its draft leaves
        // ECN out) and sends Not-ECT; the ECN events below reach it all
        // the same.
        assert!(
            settings.iter().any(|s| s.what == "ecn=classic")
                || matches!(*name, "dctcp" | "prague" | "bbr3"),
            "{name} never runs with ECN"
        );
    }
    // Each setting's runs, counted after the run ends (a spec refused here
    // fails the case; nothing is skipped).
    let runs: RefCell<BTreeMap<(&str, String), usize>> = RefCell::new(BTreeMap::new());
    let cases = 200;
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 600), |ops| {
        for (name, settings) in &plugins {
            // The defaults and `ecn=classic` get every event; each other
            // extreme setting the first quarter (30,000 events over the 200
            // cases).
            for (i, s) in settings.iter().enumerate() {
                let factory = match cc_algorithms::parse(&s.spec) {
                    Ok(Controller::Plugin(f)) => f,
                    Ok(Controller::Builtin(..)) => panic!("{}: not a plugin", s.spec),
                    Err(e) => panic!("{}: accepted once, refused now: {e}", s.spec),
                };
                let mut cc = factory.build(&config);
                let events = if i == 0 || s.what == "ecn=classic" {
                    &ops[..]
                } else {
                    &ops[..ops.len() / 4]
                };
                run(&s.spec, cc.as_mut(), events);
                *runs
                    .borrow_mut()
                    .entry((*name, s.what.clone()))
                    .or_default() += 1;
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Every plugin ran at its defaults and at both ends of every numeric
    // parameter, in every case.
    let runs = runs.into_inner();
    for (name, settings) in &plugins {
        assert_eq!(settings[0].what, "defaults");
        for s in settings {
            let n = runs.get(&(*name, s.what.clone())).copied().unwrap_or(0);
            assert!(
                n >= cases as usize,
                "{name} {}: {} ran {n} times in {cases} cases",
                s.what,
                s.spec
            );
        }
    }
}
