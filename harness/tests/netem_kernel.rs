//! The netem backend on a kernel that has netem: end to end with the real
//! quic-server and quic-client, and the link itself measured with the UDP
//! probe (rate, delay, jitter order, loss models, kernel AQMs).
//!
//! Ignored in a plain `cargo test`: this project's machines have no
//! sch_netem. `scripts/test-netem.sh` (part of `make test`) runs them in a
//! user-mode Linux guest (`cclab vm`), or directly on a host with netem,
//! and prints why when it cannot.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use harness::link::LinkSpec;
use harness::netns;
use harness::probe::{measure_link, ProbeLink};

fn link(pairs: &[(&str, &str)]) -> LinkSpec {
    LinkSpec::from_pairs(pairs.iter().copied(), Path::new(".")).unwrap()
}

fn require_netem() {
    assert!(netns::is_root(), "these tests need root");
    assert!(
        harness::netem::probe().netem,
        "this kernel has no sch_netem: run these tests through scripts/test-netem.sh"
    );
}

fn ours() -> Vec<String> {
    netns::list()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(netns::PREFIX))
        .collect()
}

fn cclab() -> Command {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_cclab"));
    let dir = exe.parent().unwrap().to_path_buf();
    for b in ["quic-server", "quic-client"] {
        assert!(
            dir.join(b).exists(),
            "{b} is not built in {}",
            dir.display()
        );
    }
    Command::new(exe)
}

#[test]
#[ignore = "needs a kernel with sch_netem: run by scripts/test-netem.sh (make test)"]
fn a_quic_flow_runs_end_to_end_on_netem() {
    require_netem();
    let out = tempfile::tempdir().unwrap();
    let o = cclab()
        .args([
            "run",
            "--link",
            "netem",
            "--cc",
            "cubic",
            "--duration",
            "5s",
        ])
        .args(["--rate", "10mbit", "--rtt", "40ms", "--queue", "1bdp"])
        .args([
            "--jitter",
            "1ms",
            "--qlog-level",
            "metrics",
            "--quiet",
            "--out",
        ])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cclab run --link netem: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["status"], "complete");
    assert_eq!(s["link"]["backend"], "netem");
    let f = &s["flows"][0];
    assert_eq!(f["completed"], 1, "{f}");
    let g = f["goodput_bps"].as_f64().unwrap();
    assert!(g > 5e6 && g < 10e6, "goodput {g}");
    let rtt_min = f["rtt_ms"]["min"].as_f64().unwrap();
    // 40 ms of propagation, jitter ±1 ms each way.
    assert!((37.5..46.0).contains(&rtt_min), "min RTT {rtt_min}");
    let b = &s["bottleneck"];
    assert!(b["bytes"].as_u64().unwrap() > 2_000_000, "{b}");
    let qd = b["queue_delay_ms_mean"].as_f64().unwrap();
    // A 1-BDP drop-tail queue holds at most 40 ms.
    assert!(qd > 0.0 && qd < 45.0, "{b}");
    assert!(b["utilization"].as_f64().unwrap() > 0.5, "{b}");
    // The tc lines that built the link are kept with the repetition.
    let tc = std::fs::read_to_string(out.path().join("rep-1/tc-commands.txt")).unwrap();
    assert!(
        tc.contains(" netem limit ") && tc.contains(" tbf rate 10000000bit "),
        "{tc}"
    );
    assert!(
        tc.contains(" rate 100gbit"),
        "jitter without reordering: {tc}"
    );
    assert!(ours().is_empty(), "namespaces left: {:?}", ours());
}

#[test]
#[ignore = "needs a kernel with sch_netem: run by scripts/test-netem.sh (make test)"]
fn the_probe_sees_the_configured_rate_and_delay() {
    require_netem();
    let l = link(&[("rate", "10mbit"), ("rtt", "40ms"), ("queue", "1bdp")]);
    // 30% load: one-way delay is the configured 20 ms (+ at most one
    // packet's serialization, 1.1 ms at 10 Mbit/s).
    let p = measure_link(ProbeLink::Netem, &l, 3e6, 1350, Duration::from_secs(2)).unwrap();
    assert_eq!(p.measured.sent, p.measured.received);
    let owd = p.measured.owd_ms[0];
    assert!((19.8..21.5).contains(&owd), "owd p50 {owd}");
    // 105% load: the delivered rate, counted on the wire as tbf does.
    let p = measure_link(
        ProbeLink::Netem,
        &l,
        10.5e6 * 1350.0 / 1392.0,
        1350,
        Duration::from_secs(3),
    )
    .unwrap();
    let err = (p.delivered_wire_bps - 10e6) / 10e6;
    assert!(
        err.abs() < 0.03,
        "delivered {} ({err:+.3})",
        p.delivered_wire_bps
    );
    assert!(
        p.measured.loss_rate > 0.0,
        "an overloaded drop-tail queue drops"
    );
}

#[test]
#[ignore = "needs a kernel with sch_netem: run by scripts/test-netem.sh (make test)"]
fn jitter_keeps_packets_in_order_unless_reordering_is_asked() {
    require_netem();
    let jit = link(&[("rate", "50mbit"), ("rtt", "40ms"), ("jitter", "5ms")]);
    let p = measure_link(ProbeLink::Netem, &jit, 5e6, 1000, Duration::from_secs(2)).unwrap();
    assert_eq!(p.measured.reordered, 0, "{:?}", p.measured);
    // The jitter is there: delays spread over several ms.
    assert!(
        p.measured.owd_ms[1] - p.measured.owd_ms[0] > 2.0,
        "{:?}",
        p.measured.owd_ms
    );
    let re = link(&[
        ("rate", "50mbit"),
        ("rtt", "40ms"),
        ("jitter", "5ms"),
        ("reorder", "10%"),
    ]);
    let p = measure_link(ProbeLink::Netem, &re, 5e6, 1000, Duration::from_secs(2)).unwrap();
    assert!(p.measured.reordered > 10, "{:?}", p.measured);
}

#[test]
#[ignore = "needs a kernel with sch_netem: run by scripts/test-netem.sh (make test)"]
fn random_and_gilbert_elliott_loss() {
    require_netem();
    let l = link(&[("rate", "50mbit"), ("rtt", "10ms"), ("loss", "5%")]);
    let p = measure_link(ProbeLink::Netem, &l, 10e6, 1000, Duration::from_secs(2)).unwrap();
    let (lo, hi) = harness::probe::binomial_99(p.measured.sent, 0.05);
    let lost = (p.measured.sent - p.measured.received) as f64;
    assert!(
        lost >= lo && lost <= hi,
        "{lost} lost of {}, 99% interval {lo}..{hi}",
        p.measured.sent
    );
    // Gilbert-Elliott: p = 2%, r = 20%, all lost in the bad state: the
    // stationary loss is p / (p + r) = 9.1%, in bursts of 1/r = 5 on average.
    let ge = link(&[
        ("rate", "50mbit"),
        ("rtt", "10ms"),
        ("loss", "ge:p=2%,r=20%,bad=100%,good=0%"),
    ]);
    let p = measure_link(ProbeLink::Netem, &ge, 10e6, 1000, Duration::from_secs(3)).unwrap();
    let rate = p.measured.loss_rate;
    assert!((0.05..0.14).contains(&rate), "GE loss rate {rate}");
}

#[test]
#[ignore = "needs a kernel with sch_netem: run by scripts/test-netem.sh (make test)"]
fn kernel_aqms_keep_the_queue_shorter_than_drop_tail() {
    require_netem();
    let base = [("rate", "10mbit"), ("rtt", "40ms"), ("queue", "2bdp")];
    // 10% overload for 4 s: drop-tail fills its 2 BDP (80 ms); each AQM
    // drops early. Their controllers take a second or more to settle
    // (CoDel's drop rate grows with the square root of its count, PIE's
    // probability in small steps), and in a guest the shaper's late timers
    // add their own queueing, so the check is against drop-tail (at least
    // 10 ms shorter), not against their targets. Measured in a user-mode
    // Linux guest on a loaded host: drop-tail 78.6 ms, CoDel 61.2 ms.
    let at_overload = |aqm: &str| {
        let mut pairs = base.to_vec();
        pairs.push(("aqm", aqm));
        let p = measure_link(
            ProbeLink::Netem,
            &link(&pairs),
            11e6,
            1350,
            Duration::from_secs(4),
        )
        .unwrap();
        (p.measured.owd_ms[0] - 20.0, p.measured.loss_rate)
    };
    let (tail_q, tail_loss) = at_overload("droptail");
    assert!(
        tail_q > 60.0 && tail_loss > 0.0,
        "drop-tail queueing {tail_q} ms"
    );
    for aqm in ["codel", "red", "fq_codel", "pie"] {
        let (q, loss) = at_overload(aqm);
        assert!(
            q < tail_q - 10.0 && loss > 0.0,
            "{aqm}: queueing {q} ms (drop-tail {tail_q}), loss {loss}"
        );
    }
    assert!(ours().is_empty(), "namespaces left: {:?}", ours());
}
