//! `cclab reproduce`'s machinery on a small made-up paper: points run on
//! sim, claims evaluated from the runs with verdicts that follow the
//! measurements, outputs written, a second run reuses the first's results,
//! a changed scenario is re-run, and bad manifests are refused with the
//! field named.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::Backend;
use harness::reproduce::{reproduce, Options};
use serde_json::Value;

const SCENARIO: &str = r#"
name = "toy"
duration = "3s"
repetitions = 2
[link]
rate = "10mbit"
rtt = "20ms"
queue = "1bdp"
[[flows]]
cc = "newreno"
"#;

const PAPER: &str = r#"
paper = "toy"
title = "A toy paper"
seed = "none.txt"
notes = ["made up for the test"]

[[experiment]]
id = "rate"
source = "Fig. 1"
scenario = "toy.toml"
quick = { repetitions = 1, keep = { rate = ["2", "8"] } }
[[experiment.axis]]
name = "rate"
field = "link.rate"
values = ["2mbit", "4mbit", "8mbit"]
labels = ["2", "4", "8"]

[[claim]]
id = "more-rate-more-goodput"
source = "Fig. 1"
statement = "goodput grows with the link rate"
experiment = "rate"
metric = "goodput_mbps"
over = "rate"
values = { f = "flow=newreno" }
test = "increasing(f)"

[[claim]]
id = "impossible"
source = "Fig. 1"
statement = "a 2 Mbit/s link carries more than an 8 Mbit/s one"
experiment = "rate"
metric = "goodput_mbps"
values = { slow = "rate=2", fast = "rate=8" }
paper = { slow = 3, fast = 1 }
test = "slow > fast"
if_fail = "capacity bounds goodput"

[[claim]]
id = "middle"
source = "Fig. 1"
statement = "the 4 Mbit/s point"
experiment = "rate"
metric = "utilization"
values = { mid = "rate=4" }
test = "mid > 10"

[[claim]]
id = "na"
source = "§9"
statement = "something we cannot run"
na = "no such link"

[[figure]]
id = "1"
source = "Fig. 1"
paper_says = "goodput vs rate"
experiment = "rate"
kind = "metric:goodput_mbps"
along = "rate"
series = { newreno = "flow=newreno" }
"#;

fn paper_dir(root: &Path, paper: &str) -> PathBuf {
    let d = root.join("papers").join("toy");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("toy.toml"), SCENARIO).unwrap();
    std::fs::write(d.join("paper.toml"), paper).unwrap();
    d
}

fn opts(out: &Path, quick: bool) -> Options {
    Options {
        out: out.to_path_buf(),
        quick,
        backend: Backend::Sim,
        jobs: 2,
        quiet: true,
        stop: Arc::new(AtomicBool::new(false)),
        bin_dir: PathBuf::from("/nonexistent"),
        qlog_level: quic_app::QlogLevel::Core,
    }
}

#[test]
fn claims_follow_the_measurements_and_runs_are_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = paper_dir(tmp.path(), PAPER);
    let out = tmp.path().join("out");
    let r = reproduce(&dir, &opts(&out, true)).unwrap();
    assert_eq!((r.runs, r.ran), (2, 2), "quick keeps two of three points");
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    let v = |id: &str| r.claims.iter().find(|c| c.id == id).unwrap();
    assert_eq!(
        v("more-rate-more-goodput").verdict,
        "PASS",
        "{:?}",
        v("more-rate-more-goodput")
    );
    let imp = v("impossible");
    assert_eq!(imp.verdict, "FAIL");
    assert!(
        !imp.significant,
        "--quick ran one repetition: no spread to judge"
    );
    assert_eq!(imp.reason.as_deref(), Some("capacity bounds goodput"));
    assert!(imp.detail.contains("slow") && imp.detail.chars().any(|c| c.is_ascii_digit()));
    assert_eq!(
        v("middle").verdict,
        "N/A",
        "the 4 Mbit/s point is not run in --quick"
    );
    assert_eq!(v("na").verdict, "N/A");
    assert_eq!(v("na").reason.as_deref(), Some("no such link"));

    // Outputs.
    let paper_out = out.join("toy");
    let claims: Value =
        serde_json::from_slice(&std::fs::read(paper_out.join("claims.json")).unwrap()).unwrap();
    assert_eq!(claims["claims"].as_array().unwrap().len(), 4);
    let md = std::fs::read_to_string(paper_out.join("REPRODUCTION.md")).unwrap();
    assert!(md.contains("| impossible |") && md.contains("capacity bounds goodput"));
    assert!(md.contains("made up for the test"));
    assert!(paper_out.join("runs/rate/2/summary.json").exists());

    // A second run reuses every run; the full mode runs the missing point
    // and re-runs the others, whose repetitions changed.
    let again = reproduce(&dir, &opts(&out, true)).unwrap();
    assert_eq!(again.ran, 0);
    // Each run and claims.json name the build; a run another build made
    // is run again, not reused.
    assert_eq!(claims["build"]["git_revision"], env!("CCLAB_GIT_REV"));
    assert_eq!(claims["counts"]["claims"], 4);
    let b = paper_out.join("runs/rate/2/build.json");
    let mut rec: Value = serde_json::from_slice(&std::fs::read(&b).unwrap()).unwrap();
    assert_eq!(rec, claims["build"]);
    rec["fingerprint"] = "another build".into();
    std::fs::write(&b, rec.to_string()).unwrap();
    let rebuilt = reproduce(&dir, &opts(&out, true)).unwrap();
    assert_eq!(rebuilt.ran, 1, "the run another build made is run again");
    let full = reproduce(&dir, &opts(&out, false)).unwrap();
    assert_eq!((full.runs, full.ran), (3, 3));
    assert_eq!(
        full.claims
            .iter()
            .find(|c| c.id == "middle")
            .unwrap()
            .verdict,
        "PASS"
    );
}

#[test]
fn bad_manifests_name_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    for (bad, says) in [
        (
            PAPER.replace("metric = \"utilization\"", "metric = \"speed\""),
            "metric `speed`",
        ),
        (
            PAPER.replace("test = \"mid > 10\"", "test = \"mid >> 10\""),
            "test:",
        ),
        (
            PAPER.replace(
                "values = { mid = \"rate=4\" }",
                "values = { mid = \"rate=5\" }",
            ),
            "`5` is not a label",
        ),
        (
            PAPER.replace("test = \"mid > 10\"", "test = \"other > 10\""),
            "`other`",
        ),
        (
            PAPER.replace("scenario = \"toy.toml\"", "scenario = \"nope.toml\""),
            "nope.toml",
        ),
        (
            PAPER.replace("statement = \"the 4", "statment = \"the 4"),
            "statment",
        ),
    ] {
        let dir = paper_dir(tmp.path(), &bad);
        let e = reproduce(&dir, &opts(&tmp.path().join("o"), true)).unwrap_err();
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
}

#[test]
fn shipped_papers_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/reproduce");
    let papers = harness::reproduce::papers(&root);
    let names: Vec<&str> = papers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["br-tcp", "dcm-plus", "ewphcc", "smcc", "tcp-exp"]);
    for (_, dir) in &papers {
        let m = harness::reproduce::manifest::Manifest::load(dir).unwrap();
        assert!(!m.claims.is_empty());
        for e in &m.experiments {
            for p in e.points(false) {
                harness::reproduce::point_scenario(&m, e, &p, &opts(Path::new("/tmp"), false))
                    .unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
            }
        }
    }
}
