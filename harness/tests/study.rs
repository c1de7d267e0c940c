//! `cclab study` on a small study on sim: points run, a Linux TCP point
//! the simulator cannot run is skipped with its reason, goals judged
//! from the runs (one met, one missed beyond noise), the table filled,
//! the pages written, a second invocation reuses every run, a shard runs
//! its share only, and `publish` replaces the docs block.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::Backend;
use harness::reproduce::Options;
use harness::study::{self, Study, StudyOptions};

const STUDY: &str = r#"
study = "toy"
title = "A toy study"
about = "two rates, two algorithms"
doc = "page.md"
[scenario]
duration = "3s"
repetitions = 2
[scenario.link]
rate = "10mbit"
rtt = "20ms"
queue = "1bdp"
[[scenario.flows]]
cc = "newreno"

[[axis]]
name = "rate"
field = "link.rate"
values = ["2mbit", "8mbit"]
labels = ["2", "8"]

[[experiment]]
id = "main"
[[experiment.axis]]
name = "cc"
field = "flows.0.cc"
values = ["newreno", "cubic", "tcp:reno"]

[[goal]]
id = "same-utilization"
statement = "NewReno and CUBIC fill the link alike"
metric = "utilization"
a = "cc=newreno"
b = "cc=cubic"
within = 15

[[goal]]
id = "rate-free"
statement = "goodput does not depend on the rate (false)"
metric = "goodput_mbps"
a = "rate=2"
b = "rate=8"
within = [0.5, "5%"]

[[goal]]
id = "half"
statement = "at 2 Mbit/s, at most half the goodput of 8 Mbit/s"
metric = "goodput_mbps"
a = "rate=2"
b = "rate=8"
at_most = "50%"

[[goal]]
id = "fixed"
statement = "NewReno's utilization at most 50% (false)"
metric = "utilization"
a = "cc=newreno"
at_most = 50

[[table]]
id = "goodput"
title = "Goodput"
rows = ["cc"]
by = "rate"
metrics = ["goodput_mbps", "utilization"]

[[table]]
id = "slow-start"
rows = ["cc", "rate"]
metrics = ["ss_exit_ms", "ss_reason", "ss_lost", "entered:slow_start"]

[[figure]]
id = "states"
title = "NewReno at 8"
experiment = "main"
kind = "states"
series = { run = "cc=newreno,rate=8" }
panels = [["link_rate", "pacing_rate"], ["cwnd", "bytes_in_flight"], ["latest_rtt"]]

[[figure]]
id = "every"
title = "each"
experiment = "*"
kind = "states"
panels = [["cwnd"]]
"#;

fn opts(out: &std::path::Path) -> StudyOptions {
    StudyOptions {
        run: Options {
            out: out.to_path_buf(),
            quick: false,
            backend: Backend::Sim,
            jobs: 2,
            quiet: true,
            stop: Arc::new(AtomicBool::new(false)),
            bin_dir: PathBuf::from("/nonexistent"),
            qlog_level: quic_app::QlogLevel::Metrics,
        },
        shard: None,
        no_run: false,
        command: None,
    }
}

#[test]
fn a_study_runs_judges_reuses_and_publishes() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("toy.toml");
    std::fs::write(&file, STUDY).unwrap();
    let s = Study::load(&file).unwrap();
    let out = tmp.path().join("out");

    // A shard runs its share of the 4 runnable points and judges nothing.
    let mut o = opts(&out);
    o.shard = Some((1, 2));
    let r = study::run(&s, &o).unwrap();
    assert_eq!((r.runs, r.ran), (4, 2));
    assert!(r.goals.is_empty() && !out.join("toy/study.json").exists());

    let r = study::run(&s, &opts(&out)).unwrap();
    assert_eq!(r.ran, 2, "the shard's runs are reused");
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    assert_eq!(r.skipped.len(), 2);
    assert!(r.skipped[0].point.contains("tcp_reno") && r.skipped[0].why.contains("sim"));

    let same = &r.goals[0];
    assert_eq!((same.measured, same.met), (2, 2), "{same:?}");
    let free = &r.goals[1];
    // Two places (newreno, cubic); tcp:reno's were skipped: no place.
    assert_eq!(
        (free.measured, free.met, free.places.len()),
        (2, 0, 2),
        "{free:?}"
    );
    assert_eq!(free.missed_beyond_noise, 2);
    let p = &free.places[0];
    assert_eq!(p.at, "cc=newreno");
    assert!(p.a.unwrap().mean < 2.0 && p.b.unwrap().mean > 6.0, "{p:?}");
    // The tolerance is the larger of 0.5 and 5% of b.
    assert!((p.tolerance.unwrap() - (0.05 * p.b.unwrap().mean).max(0.5)).abs() < 1e-9);

    // One-sided: a percentage of b, and a fixed bound without b.
    let half = &r.goals[2];
    assert_eq!((half.measured, half.met), (2, 2), "{half:?}");
    let p = &half.places[0];
    assert!((p.bound.unwrap() - 0.5 * p.b.unwrap().mean).abs() < 1e-9);
    assert!(p.tolerance.is_none() && !half.two_sided);
    let fixed = &r.goals[3];
    assert_eq!(
        (fixed.measured, fixed.met, fixed.missed_beyond_noise),
        (2, 0, 2),
        "{fixed:?}"
    );
    assert_eq!(fixed.places[0].bound, Some(50.0));
    assert!(fixed.places[0].b.is_none() && fixed.b.is_none());

    // The first slow start, read from the senders' qlog (the study ran
    // them at level base for it): NewReno at 8 Mbit/s leaves it on a loss.
    let ss = &r.tables[1];
    let row = ss
        .rows
        .iter()
        .find(|(k, _)| k == &["newreno", "8"])
        .expect("a newreno row at 8");
    let exit = row.1[0].unwrap().mean;
    assert!(exit > 20.0 && exit < 3000.0, "{exit}");
    assert_eq!(row.1[1].unwrap().mean, 1.0, "loss");
    assert!(row.1[3].unwrap().mean >= 1.0, "entered slow start");

    // The states figures: the one run named, and one per experiment
    // (its first point), with the states as bands and in the legend.
    let names: Vec<&str> = r.figures.iter().map(|f| f.1.as_str()).collect();
    assert_eq!(names, ["fig-states.svg", "fig-every-main.svg"], "{names:?}");
    let svg = std::fs::read_to_string(out.join("toy/fig-states.svg")).unwrap();
    assert!(
        svg.contains("slow_start")
            && svg.contains("congestion_avoidance")
            && svg.contains("link_rate"),
        "the states figure lacks its bands' legend or its lines"
    );
    // Its link_rate is what the link delivered: at most the 8 Mbit/s
    // link, and most of it once the flow runs.
    let dir = out.join("toy/runs/main/8-newreno");
    let data = harness::reproduce::metrics::RunData::load(&dir).unwrap();
    let rate = harness::reproduce::metrics::bottleneck_signal(&dir, &data, "delivered_bps");
    let late: Vec<f64> = rate.iter().filter(|p| p.0 > 1.0).map(|p| p.1).collect();
    let mean = late.iter().sum::<f64>() / late.len() as f64;
    assert!(
        late.iter().all(|r| *r <= 8.1e6) && mean > 6e6,
        "delivered {mean} bit/s: {late:?}"
    );

    let t = &r.tables[0];
    assert_eq!(t.columns.len(), 4);
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[0].0, ["newreno"]);
    let g2 = t.rows[0].1[0].unwrap().mean;
    let g8 = t.rows[0].1[1].unwrap().mean;
    assert!(g2 < 2.0 && g8 > 6.0, "{g2} {g8}");

    let md = std::fs::read_to_string(out.join("toy/STUDY.md")).unwrap();
    assert!(md.contains("| cc | goodput_mbps (Mbit/s) 2 |"), "{md}");
    assert!(
        md.contains("| newreno | 8 | ") && md.contains(" | loss | "),
        "{md}"
    );
    assert!(
        md.contains("`rate=2` against `rate=8`, at most 50% of b"),
        "{md}"
    );
    assert!(md.contains("`cc=newreno`, at most 50 points"), "{md}");
    assert!(
        md.contains("met at 0 of 2; 2 of the 2 missed beyond noise"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("toy/index.html")).unwrap();
    assert!(html.contains("<h1>A toy study</h1>") && html.contains("class=\"missed\""));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("toy/study.json")).unwrap()).unwrap();
    assert_eq!(json["goals"][1]["missed_beyond_noise"], 2);

    // Everything reused.
    let again = study::run(&s, &opts(&out)).unwrap();
    assert_eq!(again.ran, 0);

    // Publishing replaces the block, and names the markers when missing.
    let page = tmp.path().join("page.md");
    std::fs::write(
        &page,
        "# Page\n\n<!-- study toy -->\nold\n<!-- /study toy -->\n\nafter\n",
    )
    .unwrap();
    study::publish(&again, &page).unwrap();
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        !text.contains("old")
            && text.contains("### A toy study")
            && text.ends_with("<!-- /study toy -->\n\nafter\n")
    );
    std::fs::write(&page, "# Page\n").unwrap();
    let e = study::publish(&again, &page).unwrap_err().to_string();
    assert!(e.contains("<!-- study toy -->"), "{e}");
}

/// Every study under `studies/` loads, and plans every point on sim (each
/// scenario resolved, each override applied) without running one.
#[test]
fn every_shipped_study_loads_and_plans() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../studies");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let mut s = Study::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // On sim, so that no endpoint binary is needed (the Linux TCP
        // points are skipped, each with its reason).
        s.apply(&study::Overrides {
            link: vec!["sim".into()],
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let tmp = tempfile::tempdir().unwrap();
        let mut o = opts(tmp.path());
        o.no_run = true;
        let r = study::run(&s, &o).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(r.ran, 0, "{}", path.display());
        // (Every point of coexistence has a Linux TCP flow: all skipped.)
        assert!(
            r.runs + r.skipped.len() > 0,
            "{}: no point planned",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 9, "{n} studies under {}", dir.display());
}
