//! Slow start as a choice (`slow_start = standard | hystart++ | search`)
//! on the simulator: every window-based plugin takes each, and every
//! flow's `summary.json` reports how its first slow start ended (the
//! `slow_start` object of `qlog_analysis::slow_start`). The figures are
//! docs/slow-start.md's (`make slow-start`).

mod common;

use std::path::Path;

use harness::scenario::Scenario;
use serde_json::Value;

/// One flow of `cc` alone on 20 Mbit/s, 40 ms, a drop-tail buffer of
/// `queue_bdp` BDPs, for `secs`; the whole summary.
fn run(cc: &str, queue_bdp: f64, secs: u32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "name = \"ss\"\nduration = \"{secs}s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\n\
         rtt = \"40ms\"\nqueue = \"{queue_bdp}bdp\"\n[[flows]]\ncc = \"{cc}\"\n"
    );
    let sc = Scenario::parse(&toml, "test", Path::new(".")).unwrap();
    let cfg = common::sim_config(dir.path(), quic_app::QlogLevel::Base);
    harness::run::run(&sc, &cfg).unwrap();
    serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
        .unwrap()
}

/// The first repetition's flow 0 and its `slow_start`.
fn slow_start(summary: &Value) -> (&Value, &Value) {
    let flow = &summary["repetitions"][0]["flows"][0];
    (flow, &flow["slow_start"])
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// Every plugin that declares `slow_start` runs with each choice, and its
/// summary says when, why and with what window slow start ended. A rule
/// never leaves slow start later, nor loses more, than standard's;
/// where it ends it earlier, the reason is the rule's own (HyStart++: a
/// delay increase; SEARCH: a bandwidth plateau). At 4 BDP, where each rule
/// acts before the buffer overflows (docs/slow-start.md).
#[test]
fn every_window_based_plugin_takes_every_slow_start() {
    let plugins: Vec<String> = cc_algorithms::algorithms()
        .filter(|a| a.params.iter().any(|p| p.name == "slow_start"))
        .map(|a| a.example_spec())
        .collect();
    assert!(plugins.len() >= 12, "{plugins:?}");
    let mut acted = Vec::new();
    for base in &plugins {
        let with = |choice: &str| {
            if base.contains(':') {
                format!("{base},slow_start={choice}")
            } else {
                format!("{base}:slow_start={choice}")
            }
        };
        let standard = run(&with("standard"), 4.0, 3);
        let (flow, ss) = slow_start(&standard);
        let std_end = num(ss, "end_s");
        let std_lost = num(ss, "lost_packets");
        assert!(std_end > 0.0 && std_end < 3.0, "{base}: {ss}");
        assert!(num(ss, "exit_cwnd_bytes") > 0.0, "{base}: {ss}");
        assert!(std_lost <= num(flow, "lost_packets"), "{base}: {ss}");
        // The averaged flow carries the reasons too.
        assert_eq!(
            standard["flows"][0]["slow_start"]["exit_reasons"]
                .as_object()
                .map(|o| o.values().filter_map(Value::as_u64).sum::<u64>()),
            Some(1),
            "{base}: {}",
            standard["flows"][0]
        );
        for (choice, reason) in [
            ("hystart++", "delay_increase"),
            ("search", "bandwidth_plateau"),
        ] {
            let s = run(&with(choice), 4.0, 3);
            let (_, ss) = slow_start(&s);
            let end = num(ss, "end_s");
            let exit = num(ss, "exit_s");
            let lost = num(ss, "lost_packets");
            eprintln!(
                "{base} {choice}: exit {exit:.3} s ({}), end {end:.3} s, {lost} lost; standard {std_end:.3} s, {std_lost} lost",
                ss["exit_reason"]
            );
            // Left slow start no later (CSS, which still grows, may end
            // after standard's loss).
            assert!(exit <= std_end + 1e-9, "{base} {choice}: {ss}");
            assert!(lost <= std_lost, "{base} {choice}: {ss}");
            if exit < std_end - 1e-3 {
                assert_eq!(ss["exit_reason"], reason, "{base} {choice}: {ss}");
                assert_eq!(ss["reason_source"], "controller", "{base} {choice}: {ss}");
                acted.push(format!("{base} {choice}"));
            }
        }
    }
    // NewReno's slow start is every plugin's but DCM's and EWPHCC's:
    // both rules act for at least those ten.
    assert!(acted.len() >= 20, "{acted:?}");
}

/// NewReno at 20 Mbit/s, 40 ms, 4 BDP: the RTT rises a whole round before
/// the buffer fills, so HyStart++ enters CSS with the window under the BDP
/// plus the buffer (500 kB); SEARCH sees the delivery rate flatten. Both
/// lose a fraction of standard slow start's overshoot (measured: 94 and 21
/// of 373) and SEARCH's queue stays below the full buffer's 160 ms.
#[test]
fn newreno_at_four_bdp_exits_before_the_buffer_overflows() {
    let (bdp, buffer) = (100_000.0, 400_000.0);
    let standard = run("newreno", 4.0, 2);
    let (_, st) = slow_start(&standard);
    assert_eq!(st["exit_reason"], "loss", "{st}");
    assert!(num(st, "exit_cwnd_bytes") > bdp + buffer, "{st}");
    let st_lost = num(st, "lost_packets");
    assert!(num(st, "peak_queue_ms") > 150.0, "{st}");

    let h = run("newreno:slow_start=hystart++", 4.0, 2);
    let (_, hs) = slow_start(&h);
    assert_eq!(hs["exit_reason"], "delay_increase", "{hs}");
    assert_eq!(hs["next_state"], "conservative_slow_start", "{hs}");
    assert!(num(hs, "exit_cwnd_bytes") < bdp + buffer, "{hs}");
    assert!(num(hs, "css_s") > 0.0, "{hs}");
    assert!(
        num(hs, "lost_packets") <= 0.3 * st_lost,
        "{hs} against {st}"
    );

    let s = run("newreno:slow_start=search", 4.0, 2);
    let (_, ss) = slow_start(&s);
    assert_eq!(ss["exit_reason"], "bandwidth_plateau", "{ss}");
    assert_eq!(ss["next_state"], "congestion_avoidance", "{ss}");
    assert!(
        num(ss, "lost_packets") <= 0.2 * st_lost,
        "{ss} against {st}"
    );
    assert!(num(ss, "peak_queue_ms") < 150.0, "{ss}");
}
