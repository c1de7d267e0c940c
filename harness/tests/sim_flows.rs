//! Per-flow settings and class-based scheduling under virtual time:
//! application rate limits (`[[flows]] rate`), per-flow MTUs
//! (`[[flows]] mtu`) and the `fq`/`wfq` bottleneck schedulers, each through
//! the same endpoints and link elements the emulator's runs use.

mod common;
use common::files;
use std::path::Path;

use harness::bottleneck::{Kind, Reader};
use harness::run::run;
use harness::scenario::Scenario;
use serde_json::Value;

fn sim(text: &str, out: &Path) -> Value {
    let sc = Scenario::parse(text, "test", Path::new(".")).unwrap();
    let cfg = common::sim_config(out, quic_app::QlogLevel::Core);
    run(&sc, &cfg).unwrap();
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

fn goodput(summary: &Value, flow: usize) -> f64 {
    summary["repetitions"][0]["flows"][flow]["goodput_bps"]
        .as_f64()
        .unwrap()
}

/// Bytes each flow (the bottleneck log's flow number: QUIC flows, then
/// cross sources) sent across the down link between `t0` and `t1` s.
fn down_bytes(run: &Path, t0: f64, t1: f64) -> Vec<u64> {
    let mut bytes = vec![0u64; 8];
    for r in Reader::open(&run.join("rep-1/bottleneck.bin")).unwrap() {
        let t = r.t_ns as f64 / 1e9;
        if r.kind == Kind::Depart as u8 && r.dir == 1 && t >= t0 && t < t1 {
            bytes[r.flow as usize] += r.size as u64;
        }
    }
    bytes
}

#[test]
fn an_app_rate_limited_flow_gets_its_rate() {
    // 2 Mbit/s each way on a 20 Mbit/s link: the application, not the
    // congestion controller, sets the pace.
    let dir = tempfile::tempdir().unwrap();
    let s = sim(
        r#"
name = "app-limited"
duration = "10s"
[link]
backend = "sim"
rate = "20mbit"
rtt = "40ms"
[[flows]]
cc = "cubic"
rate = "2mbit"
[[flows]]
cc = "cubic"
direction = "upload"
rate = "2mbit"
"#,
        &dir.path().join("r"),
    );
    for flow in 0..2 {
        let g = goodput(&s, flow);
        assert!(
            (g / 2e6 - 1.0).abs() < 0.05,
            "flow {flow}: {g} bit/s, want 2 Mbit/s ± 5%"
        );
        assert_eq!(s["repetitions"][0]["flows"][flow]["complete"], true);
    }
    // The link idles most of the time and never drops.
    let util = s["bottleneck"]["utilization"].as_f64().unwrap();
    assert!(util < 0.2, "utilization {util}");
    assert_eq!(s["bottleneck"]["drops"], 0);
}

#[test]
fn wfq_reserves_bandwidth_by_weight() {
    // BR-TCP's setting scaled down: a QUIC flow of weight 40 against
    // 16 Mbit/s of UDP of weight 60 on a 20 Mbit/s link. wfq gives the
    // flow 40% of the link (8 Mbit/s) and the UDP source 60%; fifo lets
    // the unresponsive UDP source take its whole 16 Mbit/s.
    let dir = tempfile::tempdir().unwrap();
    let scenario = |sched: &str, weights: bool| {
        let (fw, cw) = if weights {
            ("weight = 40\n", "weight = 60\n")
        } else {
            ("", "")
        };
        format!(
            "name = \"wfq\"\nduration = \"8s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"100pkt\"\nsched = \"{sched}\"\n[[flows]]\ncc = \"cubic\"\n{fw}[[cross]]\nrate = \"16mbit\"\n{cw}"
        )
    };
    let wfq = dir.path().join("wfq");
    let s = sim(&scenario("wfq", true), &wfq);
    // Shares of what crossed the link in the steady part of the run.
    let b = down_bytes(&wfq, 2.0, 7.5);
    let share = b[0] as f64 / (b[0] + b[1]) as f64;
    assert!((share - 0.4).abs() < 0.01, "wfq: the flow's share {share}");
    // Work-conserving: together they fill the link.
    let bps = (b[0] + b[1]) as f64 * 8.0 / 5.5;
    assert!(bps > 0.99 * 20e6, "{bps} bit/s crossed");
    let g = goodput(&s, 0);
    // (Goodput: payload only, and over the time to close too.)
    assert!(g > 0.8 * 8e6, "wfq: the flow's goodput {g} bit/s");

    let fifo = dir.path().join("fifo");
    let s = sim(&scenario("fifo", false), &fifo);
    let b = down_bytes(&fifo, 2.0, 7.5);
    let share = b[0] as f64 / (b[0] + b[1]) as f64;
    assert!(share < 0.25, "fifo: the flow's share {share}");
    assert!(goodput(&s, 0) < 5e6);
}

#[test]
fn fq_shares_equally_between_quic_and_udp() {
    // An unresponsive 30 Mbit/s UDP source against one QUIC flow on a
    // 20 Mbit/s link: fq keeps half for the flow; the flood overflows
    // only its own class queue.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let s = sim(
        "name = \"fq\"\nduration = \"6s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\nsched = \"fq\"\n[[flows]]\ncc = \"cubic\"\n[[cross]]\nrate = \"30mbit\"\n",
        &out,
    );
    let b = down_bytes(&out, 1.5, 5.5);
    let share = b[0] as f64 / (b[0] + b[1]) as f64;
    assert!((share - 0.5).abs() < 0.01, "the flow's share {share}");
    let g = goodput(&s, 0);
    assert!(g > 8e6, "the flow's goodput {g} bit/s");
    let drops = s["bottleneck"]["drops_by_reason"]["queue_full"]
        .as_u64()
        .unwrap();
    assert!(drops > 1000, "the flood overflows its class: {drops}");
}

#[test]
fn a_flow_mtu_caps_the_data_senders_packets() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let s = sim(
        r#"
name = "mtu"
duration = "2s"
[link]
backend = "sim"
rate = "20mbit"
rtt = "20ms"
[[flows]]
cc = "cubic"
mtu = 1250
[[flows]]
cc = "cubic"
direction = "upload"
mtu = 1300
[[flows]]
cc = "cubic"
[[flows]]
cc = "cubic"
mtu = 1500
"#,
        &out,
    );
    for f in 0..4 {
        assert_eq!(s["repetitions"][0]["flows"][f]["complete"], true, "{s}");
    }
    // The largest packet each flow put on the bottleneck, per direction.
    let mut max = [[0u16; 2]; 4];
    for r in Reader::open(&out.join("rep-1/bottleneck.bin")).unwrap() {
        if r.kind == Kind::Arrive as u8 {
            let m = &mut max[r.flow as usize][r.dir as usize];
            *m = (*m).max(r.size);
        }
    }
    // [up, down]: the data direction reaches the flow's limit exactly;
    // nothing in either direction exceeds it.
    assert_eq!(max[0][1], 1250, "{max:?}");
    assert!(max[0][0] <= 1250, "{max:?}");
    assert_eq!(max[1][0], 1300, "{max:?}");
    assert!(max[1][1] <= 1300, "{max:?}");
    assert_eq!(max[2][1], quic_app::MAX_DATAGRAM_SIZE as u16, "{max:?}");
    assert_eq!(max[3][1], 1500, "{max:?}");
}

/// A deterministic link: drop-tail, no loss, no jitter.
fn drop_tail(jitter: &str) -> String {
    format!(
        r#"
name = "jitter"
duration = "3s"
repetitions = 2
seed = 11
[link]
backend = "sim"
rate = "20mbit"
rtt = "40ms"
queue = "1bdp"
aqm = "droptail"
[[flows]]
cc = "cubic"
count = 2
{jitter}
[[cross]]
rate = "2mbit"
{jitter}
"#
    )
}

#[test]
fn start_jitter_desynchronises_repetitions_and_zero_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // start_jitter = 0 is today's run, file for file.
    let plain = dir.path().join("plain");
    let zero = dir.path().join("zero");
    sim(&drop_tail(""), &plain);
    sim(&drop_tail("start_jitter = \"0s\""), &zero);
    let (fp, fz) = (files(&plain), files(&zero));
    assert_eq!(
        fp.iter().map(|f| &f.0).collect::<Vec<_>>(),
        fz.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for ((n, x), (_, y)) in fp.iter().zip(&fz) {
        assert!(x == y, "{n} differs with start_jitter = 0");
    }

    // With a spread, each repetition starts each flow elsewhere in
    // [0, 1 s), as the scenario's own computation says, and the
    // repetitions' results differ.
    let text = drop_tail("start_jitter = \"1s\"");
    let sc = Scenario::parse(&text, "test", Path::new(".")).unwrap();
    let jit = dir.path().join("jit");
    let s = sim(&text, &jit);
    let reps = s["repetitions"].as_array().unwrap();
    let mut starts = Vec::new();
    for (k, rep) in reps.iter().enumerate() {
        let seed = rep["seed"].as_u64().unwrap();
        assert_eq!(seed, 11 + k as u64);
        let want = sc.rep_flows(seed);
        for (i, f) in rep["flows"].as_array().unwrap().iter().enumerate() {
            assert_eq!(f["complete"], true, "{f}");
            let st = f["start_s"].as_f64().unwrap();
            assert!((0.0..1.0).contains(&st), "{st}");
            assert_eq!(st, want[i].1.start_ns as f64 / 1e9);
            starts.push(st);
        }
        // The simulator started them then: each flow's first packet
        // reaches the bottleneck (upstream) at its start, not before.
        let mut first = [f64::MAX; 3];
        for r in Reader::open(&jit.join(format!("rep-{}/bottleneck.bin", k + 1))).unwrap() {
            if r.kind == Kind::Arrive as u8 {
                let t = r.t_ns as f64 / 1e9;
                let m = &mut first[r.flow as usize];
                *m = m.min(t);
            }
        }
        for i in 0..2 {
            let st = rep["flows"][i]["start_s"].as_f64().unwrap();
            assert!(
                first[i] >= st && first[i] < st + 0.001,
                "flow {i}: first packet at {} s, start {st} s",
                first[i]
            );
        }
        let cross = sc.rep_cross(seed)[0].start_ns as f64 / 1e9;
        assert!(
            first[2] >= cross && first[2] < cross + 0.01,
            "{first:?} {cross}"
        );
    }
    assert!(
        starts[0] != starts[1] && starts[0] != starts[2],
        "{starts:?}"
    );
    let g = |r: usize, f: usize| reps[r]["flows"][f]["goodput_bps"].as_f64().unwrap();
    assert!(g(0, 0) != g(1, 0) && g(0, 1) != g(1, 1));
    assert_ne!(reps[0]["bottleneck"], reps[1]["bottleneck"]);
    // (Each start is a function of the repetition's seed, checked above
    // against `rep_flows`; tests/sim.rs checks that a run is a function
    // of its starts and seeds.)
}

/// A paced packet leaves at its own release time, not the next packet's:
/// an application-limited flow on an idle link sees RTT samples of the
/// path (40 ms plus under a millisecond of serialization), not the path
/// plus a pacing interval (the bug: ~3 ms here, every sample).
#[test]
fn paced_packets_leave_at_their_own_release_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = sim(
        r#"
name = "pacing"
duration = "6s"
[link]
rate = "20mbit"
rtt = "40ms"
queue = "1bdp"
[[flows]]
cc = "newreno"
rate = "2mbit"
"#,
        &dir.path().join("r"),
    );
    let rtt = &s["repetitions"][0]["flows"][0]["rtt_ms"];
    let (min, mean) = (rtt["min"].as_f64().unwrap(), rtt["mean"].as_f64().unwrap());
    assert!(min >= 40.0, "{rtt}");
    assert!(mean < 41.5, "RTT samples carry a pacing delay: {rtt}");
}

/// `think`: the client waits after each response before the next request,
/// and the link is idle meanwhile (what makes a sender restart after idle).
#[test]
fn think_time_spaces_the_requests_and_idles_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let s = sim(
        "name = \"t\"\nduration = \"10s\"\n[link]\nrate = \"10mbit\"\nrtt = \"40ms\"\n[[flows]]\ncc = \"newreno\"\nsize = \"200kb\"\nrequests = 3\nthink = \"2s\"\n",
        &out,
    );
    let f = &s["repetitions"][0]["flows"][0];
    assert_eq!(f["complete"], true, "{f}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("rep-1/flow-0/client.json")).unwrap())
            .unwrap();
    let ends: Vec<f64> = report["request_ends_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_f64().unwrap())
        .collect();
    assert_eq!(ends.len(), 3, "{ends:?}");
    for w in ends.windows(2) {
        // 2 s of thinking, then a 200 kB response (under 0.5 s here).
        let gap = w[1] - w[0];
        assert!((2.0..2.6).contains(&gap), "{ends:?}");
    }
    // Nothing crossed the link in the middle of the first pause.
    let mid = ends[0] + 1.0;
    let idle = down_bytes(&out, mid - 0.5, mid + 0.5);
    assert_eq!(idle[0], 0, "{idle:?} bytes during the pause");
    // And a pause needs several requests.
    let e = Scenario::parse(
        "name = \"t\"\n[[flows]]\ncc = \"newreno\"\nsize = \"200kb\"\nthink = \"2s\"\n",
        "test",
        Path::new("."),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("think") && e.contains("requests = 2 or more"),
        "{e}"
    );
    // Nor may it outlast the connection's idle timeout.
    let e = Scenario::parse(
        "name = \"t\"\n[[flows]]\ncc = \"newreno\"\nsize = \"200kb\"\nrequests = 2\nthink = \"20s\"\n",
        "test",
        Path::new("."),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("think") && e.contains("at most 9s"), "{e}");
}
