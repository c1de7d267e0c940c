//! Topologies under virtual time and on the emulator: per-flow RTTs through
//! one bottleneck, a parking lot of three bottlenecks, a scenario of one
//! link written three ways, determinism, and the scenario errors a bad
//! path gets.

mod common;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::run::run;
use harness::scenario::Scenario;
use serde_json::Value;

fn sim(text: &str, out: &Path) -> Value {
    let sc = Scenario::parse(text, "test", Path::new(".")).unwrap();
    let cfg = common::sim_config(out, quic_app::QlogLevel::Core);
    run(&sc, &cfg).unwrap();
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

fn f64_at(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{ptr} is not a number in {v:#}"))
}

/// The parking lot of the issue: three 10 Mbit/s links of 10 ms each way,
/// one long flow across all three, one short flow on each.
fn parking_lot(backend: &str, duration: &str) -> String {
    format!(
        r#"
name = "parking-lot"
duration = "{duration}"
[link]
backend = "{backend}"
rate = "10mbit"
delay = "10ms"
queue = "1bdp"
[topology]
parking_lot = 3
[[flows]]
cc = "newreno"
path = ["l1", "l2", "l3"]
[[flows]]
cc = "newreno"
path = "l1"
[[flows]]
cc = "newreno"
path = "l2"
[[flows]]
cc = "newreno"
path = "l3"
"#
    )
}

#[test]
fn two_rtts_share_one_bottleneck_and_each_flow_reports_its_base_rtt() {
    let dir = tempfile::tempdir().unwrap();
    let s = sim(
        r#"
name = "rtt-mix"
duration = "20s"
[link]
backend = "sim"
rate = "20mbit"
rtt = "20ms"
queue = "1bdp"
[[flows]]
cc = "newreno"
rtt = "20ms"
[[flows]]
cc = "newreno"
rtt = "80ms"
"#,
        &dir.path().join("r"),
    );
    let short = f64_at(&s, "/flows/0/base_rtt_ms");
    let long = f64_at(&s, "/flows/1/base_rtt_ms");
    assert!((short - 20.0).abs() < 1.0, "{short}");
    assert!((long - 80.0).abs() < 1.0, "{long}");
    // The measured RTTs include the queue: never below the base.
    let rtt0 = f64_at(&s, "/repetitions/0/flows/0/rtt_ms/min");
    let rtt1 = f64_at(&s, "/repetitions/0/flows/1/rtt_ms/min");
    assert!((19.0..60.0).contains(&rtt0), "short flow's min RTT {rtt0}");
    assert!((79.0..120.0).contains(&rtt1), "long flow's min RTT {rtt1}");
    // The short-RTT flow gets more (NewReno's share goes against its RTT).
    let g0 = f64_at(&s, "/flows/0/goodput_bps");
    let g1 = f64_at(&s, "/flows/1/goodput_bps");
    eprintln!(
        "goodput 20 ms {:.2} Mbit/s, 80 ms {:.2} Mbit/s",
        g0 / 1e6,
        g1 / 1e6
    );
    assert!(g0 > 1.5 * g1, "20 ms {g0}, 80 ms {g1}");
    // One link: the bottleneck and nothing per link.
    assert!(f64_at(&s, "/bottleneck/utilization") > 0.9);
    assert!(s.get("links").is_none(), "{:#}", s["links"]);
}

#[test]
fn a_parking_lot_loads_every_link_and_the_long_flow_gets_least() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let s = sim(&parking_lot("sim", "20s"), &out);
    let links = s["links"].as_object().unwrap();
    assert_eq!(
        links.keys().collect::<Vec<_>>(),
        ["l1", "l2", "l3"],
        "{:#}",
        s["links"]
    );
    for (i, name) in ["l1", "l2", "l3"].iter().enumerate() {
        let l = &links[*name];
        let u = l["utilization"].as_f64().unwrap();
        assert!(u > 0.9, "{name}: utilization {u}");
        assert!(l["drops"].as_u64().unwrap() > 0, "{name}: {l:#}");
        assert_eq!(l["flows"], serde_json::json!([0, i + 1]), "{name}");
        // Jain's index of the two flows that cross this link, and no
        // other: the long flow and this link's own short flow. The long
        // one gets less (asserted below), so the index is below 1.
        let j = l["jain_fairness"].as_f64().unwrap();
        let (a, b) = (
            f64_at(&s, "/flows/0/goodput_bps"),
            f64_at(&s, &format!("/flows/{}/goodput_bps", i + 1)),
        );
        let want = (a + b).powi(2) / (2.0 * (a * a + b * b));
        assert!(
            (j - want).abs() < 1e-9,
            "{name}: Jain {j}, from goodputs {want}"
        );
        assert!(
            j < 0.999,
            "{name}: Jain {j} with a long flow at {a} and a short one at {b}"
        );
        // Each link keeps its own log and samples.
        let d = if i == 0 {
            out.join("rep-1")
        } else {
            out.join(format!("rep-1/links/{name}"))
        };
        assert!(
            d.join("bottleneck-samples.jsonl").exists(),
            "{}",
            d.display()
        );
    }
    // The bottleneck of a multi-link run is the first link.
    assert_eq!(s["bottleneck"]["drops"], links["l1"]["drops"]);
    let long = f64_at(&s, "/flows/0/goodput_bps");
    for k in 1..4 {
        let short = f64_at(&s, &format!("/flows/{k}/goodput_bps"));
        assert!(long < short, "long {long} vs short flow {k} {short}");
    }
    assert!((f64_at(&s, "/flows/0/base_rtt_ms") - 60.0).abs() < 1.0);
    assert!((f64_at(&s, "/flows/2/base_rtt_ms") - 20.0).abs() < 1.0);
}

#[test]
fn multi_link_runs_repeat_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let text = parking_lot("sim", "4s");
    sim(&text, &dir.path().join("a"));
    sim(&text, &dir.path().join("b"));
    let a = common::files(&dir.path().join("a"));
    let b = common::files(&dir.path().join("b"));
    assert_eq!(
        a.iter().map(|f| &f.0).collect::<Vec<_>>(),
        b.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (x, y) in a.iter().zip(&b) {
        assert!(x.1 == y.1, "{} differs between two runs", x.0);
    }
    assert!(a.iter().any(|f| f.0.contains("links/l3/")));
}

#[test]
fn one_link_written_three_ways_runs_the_same() {
    let base = r#"
name = "one"
duration = "4s"
[link]
backend = "sim"
rate = "10mbit"
rtt = "30ms"
queue = "1bdp"
[[flows]]
cc = "cubic"
[[flows]]
cc = "newreno"
"#;
    let dir = tempfile::tempdir().unwrap();
    let a = sim(base, &dir.path().join("a"));
    let b = sim(
        &format!("{base}[[links]]\nname = \"only\"\n"),
        &dir.path().join("b"),
    );
    let c = sim(
        &format!("{base}[topology]\nparallel = 1\n"),
        &dir.path().join("c"),
    );
    for (v, what) in [(&b, "[[links]]"), (&c, "[topology] parallel = 1")] {
        for k in 0..2 {
            for f in ["bytes", "goodput_bps", "lost_packets"] {
                let p = format!("/repetitions/0/flows/{k}/{f}");
                assert_eq!(a.pointer(&p), v.pointer(&p), "{what}: {p}");
            }
        }
        for f in ["drops", "bytes", "utilization"] {
            let p = format!("/bottleneck/{f}");
            assert_eq!(a.pointer(&p), v.pointer(&p), "{what}: {p}");
        }
    }
    assert_eq!(b["links"]["only"]["drops"], a["bottleneck"]["drops"]);
    assert_eq!(c["links"]["p1"]["bytes"], a["bottleneck"]["bytes"]);
}

#[test]
fn bad_paths_are_refused_naming_the_field() {
    let head = r#"
name = "bad"
[link]
rate = "10mbit"
rtt = "20ms"
[topology]
parking_lot = 2
"#;
    let cases = [
        (
            "[[flows]]\npath = [\"l1\", \"l9\"]\n[[flows]]\npath = \"l2\"\n",
            "flows[0].path",
            "`l9`",
        ),
        (
            "[[flows]]\npath = [\"l1\", \"l2\", \"l1\"]\n",
            "flows[0].path",
            "twice",
        ),
        ("[[flows]]\npath = \"l1\"\n", "links", "`l2`"),
        ("[[flows]]\nrtt = \"30ms\"\n", "flows[0].rtt", "40ms"),
        (
            "[[flows]]\npath = 3\n",
            "flows[0].path",
            "list of link names",
        ),
        (
            "[[flows]]\n[[cross]]\nrate = \"1mbit\"\npath = [\"x\"]\n",
            "cross[0].path",
            "`x`",
        ),
    ];
    for (tail, field, says) in cases {
        let text = format!("{head}{tail}").replace("[[flows]]\n", "[[flows]]\ncc = \"newreno\"\n");
        let e = Scenario::parse(&text, "bad.toml", Path::new(".")).expect_err(tail);
        assert_eq!(e.field, field, "{tail}: {e}");
        assert!(e.to_string().contains(says), "{tail}: {e}");
    }
    let e = Scenario::parse(
        "[link]\nrate = \"1mbit\"\n[topology]\nring = 3\n",
        "bad.toml",
        Path::new("."),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("parking_lot") && e.to_string().contains("parallel"),
        "{e}"
    );
}

#[test]
fn the_emulator_runs_a_parking_lot_with_a_log_per_link() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lot.toml");
    std::fs::write(&file, parking_lot("emu", "8s")).unwrap();
    let out = dir.path().join("r");
    let s = common::cclab_run(&[file.to_str().unwrap()], &out);
    assert_eq!(s["link"]["backend"], "emu");
    for name in ["l1", "l2", "l3"] {
        let u = f64_at(&s, &format!("/links/{name}/utilization"));
        eprintln!("emu {name}: utilization {:.1}%", u * 100.0);
        assert!(u > 0.8, "{name}: utilization {u}");
    }
    assert!(out.join("rep-1/links/l2/bottleneck-samples.jsonl").exists());
    assert!((f64_at(&s, "/flows/0/base_rtt_ms") - 60.0).abs() < 1.0);
}

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

#[test]
fn the_shipped_topologies_and_their_sweep_resolve() {
    let dir = scenarios_dir();
    for (file, links, flows) in [
        ("rtt-fairness.toml", 1, 2),
        ("rtt-mix-codel.toml", 1, 4),
        ("parking-lot.toml", 3, 4),
        ("reproduce/ewphcc/parallel.toml", 10, 20),
    ] {
        let sc = Scenario::load(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(sc.topology().links.len(), links, "{file}");
        assert_eq!(sc.expanded_flows().len(), flows, "{file}");
        assert!(sc.has_paths(), "{file}");
    }
    let sw = harness::sweep::Sweep::load(&dir.join("sweeps/rtt-fairness.toml")).unwrap();
    assert_eq!(sw.len(), 12);
    let mut rtts = Vec::new();
    for i in 0..sw.len() {
        let sc = sw.scenario(i).unwrap();
        let topo = sc.topology();
        rtts.push(topo.base_rtt_ns(&sc.routes()[1]) / 1_000_000);
    }
    rtts.sort_unstable();
    rtts.dedup();
    assert_eq!(rtts, [20, 40, 80, 160]);
}

#[test]
fn link_show_draws_a_scenario_and_refuses_mixing_it_with_link_flags() {
    let file = scenarios_dir().join("parking-lot.toml");
    let o = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .args(["link", "show", "--scenario"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("client ─[l1]─[l2]─[l3]─ server   base RTT 60ms"),
        "{text}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .args(["link", "show", "--json", "--scenario"])
        .arg(&file)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["paths"][0]["links"],
        serde_json::json!(["l1", "l2", "l3"])
    );
    assert_eq!(v["paths"][3]["base_rtt_ms"], 20.0);
    assert_eq!(v["links"].as_array().unwrap().len(), 3);
    let o = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .args(["link", "show", "--rate", "5mbit", "--scenario"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not both"));
}

#[test]
fn netem_builds_chains_and_refuses_paths_that_fold_back() {
    // The parking lot is a chain of routers; kernel runs of it are in
    // tests/netem_kernel.rs (they need sch_netem).
    let lot = Scenario::parse(&parking_lot("netem", "5s"), "lot.toml", Path::new(".")).unwrap();
    harness::netem::net::check(&lot.topology(), &lot.routes()).unwrap();
    // One flow crosses a then b, the other b then a: a chain of
    // namespaces cannot hold both.
    let fold = Scenario::parse(
        "[link]\nrate = \"5mbit\"\n[[links]]\nname = \"a\"\n[[links]]\nname = \"b\"\n[[flows]]\ncc = \"newreno\"\npath = [\"a\", \"b\"]\n[[flows]]\ncc = \"newreno\"\npath = [\"b\", \"a\"]\n",
        "fold.toml",
        Path::new("."),
    )
    .unwrap();
    let e = harness::netem::net::check(&fold.topology(), &fold.routes()).unwrap_err();
    assert!(e.to_string().contains("--link emu"), "{e}");
}
