//! ECN and L4S on the simulator: DCTCP on a step-marking link, the same
//! flow where nothing marks, and Prague against NewReno through DualPI2.

mod common;

use std::path::Path;

use harness::run::run;
use harness::scenario::Scenario;
use serde_json::Value;

fn sim(text: &str, out: &Path) -> Value {
    let sc = Scenario::parse(text, "test", Path::new(".")).unwrap();
    let cfg = common::sim_config(out, quic_app::QlogLevel::Metrics);
    run(&sc, &cfg).unwrap();
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// DCTCP alone at 20 Mbit/s, 40 ms for 10 s behind `aqm`.
fn dctcp(aqm: &str, out: &Path) -> Value {
    sim(
        &format!(
            "name = \"dctcp\"\nduration = \"10s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"200pkt\"\naqm = \"{aqm}\"\n[[flows]]\ncc = \"dctcp\"\n"
        ),
        out,
    )
}

#[test]
fn dctcp_holds_a_step_marking_queue_near_k_without_a_drop() {
    const K: f64 = 20.0;
    let dir = tempfile::tempdir().unwrap();
    let s = dctcp("step:threshold=20pkt", &dir.path().join("step"));
    let b = &s["bottleneck"];
    let f = &s["flows"][0];
    assert_eq!(f["completed"], 1, "{f}");
    assert_eq!(b["drops"], 0, "{b}");
    assert!(b["marks"].as_u64().unwrap() > 100, "{b}");
    assert_eq!(b["marks_by_reason"]["step"], b["marks"], "{b}");
    assert_eq!(f["lost_packets"].as_f64(), Some(0.0), "{f}");
    // The mean queue in packets: its delay at the link's rate, in the
    // flow's full-size datagrams (1350 bytes, as the link charges them).
    let queue_pkts = b["queue_delay_ms_mean"].as_f64().unwrap() / 1e3 * 20e6 / 8.0 / 1350.0;
    eprintln!(
        "DCTCP, step K = 20: mean queue {queue_pkts:.1} packets, utilization {:.4}, {} marks",
        b["utilization"], b["marks"]
    );
    assert!(
        (0.5 * K..=1.5 * K).contains(&queue_pkts),
        "mean queue {queue_pkts:.1} packets, K {K}"
    );
    assert!(b["utilization"].as_f64().unwrap() >= 0.95, "{b}");
}

#[test]
fn dctcp_falls_back_to_its_loss_response_where_nothing_marks() {
    let dir = tempfile::tempdir().unwrap();
    let s = dctcp("droptail", &dir.path().join("droptail"));
    let b = &s["bottleneck"];
    let f = &s["flows"][0];
    assert_eq!(f["completed"], 1, "{f}");
    assert!(b.get("marks").is_none_or(|m| m == 0), "{b}");
    assert!(b["drops"].as_u64().unwrap() > 0, "{b}");
    assert!(f["lost_packets"].as_f64().unwrap() > 0.0, "{f}");
    assert!(b["utilization"].as_f64().unwrap() >= 0.9, "{b}");
}

#[test]
fn prague_through_dualpi2_loses_less_and_waits_less_than_classic_newreno() {
    // In the style of picoquic's L4S test (scenarios/ecn/l4s-dualpi2.toml):
    // four 1,000,000-byte transfers, 10 Mbit/s, 10 ms each way, DualPI2.
    let dir = tempfile::tempdir().unwrap();
    let run_cc = |cc: &str| -> Value {
        let s = sim(
            &format!(
                "name = \"l4s\"\nduration = \"20s\"\n[link]\nbackend = \"sim\"\nrate = \"10mbit\"\nrtt = \"20ms\"\nqueue = \"25kb\"\naqm = \"dualpi2\"\n[[flows]]\ncc = \"{cc}\"\nsize = \"1000000\"\nrequests = 4\n"
            ),
            &dir.path().join(cc.replace([':', '='], "_")),
        );
        s["flows"][0].clone()
    };
    let prague = run_cc("prague");
    let reno = run_cc("newreno:ecn=classic");
    let lost = |f: &Value| f["lost_packets"].as_f64().unwrap();
    let rtt = |f: &Value| f["rtt_ms"]["mean"].as_f64().unwrap();
    let secs = |f: &Value| f["completion_s"].as_f64().unwrap();
    eprintln!(
        "prague: {:.2} s, {} lost, RTT mean {:.1} ms; newreno:ecn=classic: {:.2} s, {} lost, RTT mean {:.1} ms",
        secs(&prague), lost(&prague), rtt(&prague),
        secs(&reno), lost(&reno), rtt(&reno)
    );
    for f in [&prague, &reno] {
        assert_eq!(f["completed"], 1, "{f}");
        // 4 MB at 10 Mbit/s takes 3.2 s: nothing completes sooner.
        assert!(secs(f) >= 3.2, "{f}");
    }
    // picoquic's own thresholds for this test (l4s_test.c): Prague within
    // 4.1 s, NewReno within 5.6 s.
    assert!(secs(&prague) <= 4.1, "{prague}");
    assert!(secs(&reno) <= 5.6, "{reno}");
    // Prague's packets go to the L queue, which marks above 1 ms and
    // never needs to drop: no loss at all, and a mean RTT within the
    // 20 ms of propagation plus that 1 ms and a packet's 1.1 ms on the
    // wire (and a millisecond for quiche's ACK timing).
    assert_eq!(lost(&prague), 0.0, "{prague}");
    assert!(rtt(&prague) < 20.0 + 1.0 + 1.1 + 1.0, "{prague}");
    // Classic NewReno's go to the classic queue, whose PI2 aims at 15 ms
    // and whose 25 kB (one BDP) fills in slow start before PI2 answers: it
    // loses packets and waits well above Prague.
    assert!(lost(&reno) > 0.0, "{reno}");
    assert!(rtt(&reno) > rtt(&prague) + 5.0, "{prague}\n{reno}");
}
