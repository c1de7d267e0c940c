//! The shipped link descriptions parse, and bad ones are refused by the
//! command line with the field, the value and what is allowed (exit 2).

use std::path::PathBuf;
use std::process::Command;

use harness::cli::LinkArgs;

fn links_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/links")
}

#[test]
fn every_shipped_link_parses() {
    let mut n = 0;
    for e in std::fs::read_dir(links_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let spec = LinkArgs {
                link_file: Some(p.clone()),
                ..LinkArgs::default()
            }
            .to_spec()
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            if p.ends_with("step-trace.toml") {
                // 2000 + 500 opportunities of 1500 B in 2 s.
                assert!(
                    (spec.down.rate_bps - 15e6).abs() < 1.0,
                    "{}",
                    spec.down.rate_bps
                );
            }
            if p.ends_with("reference.toml") {
                assert_eq!((spec.up.rate_bps, spec.up.delay_ns), (5e6, 25_000_000));
                assert_eq!((spec.down.rate_bps, spec.down.delay_ns), (20e6, 15_000_000));
            }
            n += 1;
        }
    }
    assert!(n >= 5, "{n} files");
}

#[test]
fn the_cli_rejects_bad_links_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "fast"], "link.rate: `fast` is not a rate"),
        (
            &["--queue", "100"],
            "link.queue: `100` is not a queue limit",
        ),
        (
            &["--aqm", "blue"],
            "link.aqm: `blue` is not one of droptail, red",
        ),
        (
            &["--up", "speed=1mbit"],
            "link.up.speed: unknown field; allowed: rate",
        ),
        (&["--loss", "ge:p=1%"], "needs both p and r"),
        (&["--rtt", "40ms", "--delay", "20ms"], "not both"),
        (
            &["--link", "docker"],
            "link.backend: `docker` is not one of auto, emu, netem",
        ),
    ];
    for (args, needle) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_cclab"))
            .args(["link", "show"])
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .args(["link", "show", "--link-file", "/nonexistent/link.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/link.toml"));
}

#[test]
fn every_shipped_scenario_parses() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let s = harness::scenario::Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(!s.flows.is_empty());
            n += 1;
        }
    }
    assert!(n >= 4, "{n} scenarios");
    for e in std::fs::read_dir(dir.join("sweeps")).unwrap() {
        let p = e.unwrap().path();
        let sw = harness::sweep::Sweep::load(&p).unwrap_or_else(|e| panic!("{e}"));
        assert!(sw.len() > 1);
    }
}
