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

#[test]
fn the_cellular_scenarios_follow_their_traces_on_sim() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/cellular");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let mut sc = harness::scenario::Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
        // Each direction's mean rate is its trace's: one 1500-byte packet a
        // line over the trace's length.
        for (d, ext) in [(&sc.link.down, "down"), (&sc.link.up, "up")] {
            let name = p
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .replace("-lte-short", "");
            let file = std::fs::read_dir(dir.join("../traces/mahimahi"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|f| {
                    let s = f.file_name().unwrap().to_string_lossy().to_lowercase();
                    s.starts_with(&name) && s.ends_with(ext)
                })
                .unwrap();
            let t: Vec<u64> = std::fs::read_to_string(&file)
                .unwrap()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            let mean = t.len() as f64 * 1500.0 * 8.0 / (*t.last().unwrap() as f64 / 1e3);
            assert!(
                (d.rate_bps - mean).abs() < 0.01 * mean,
                "{}: {} against {mean}",
                file.display(),
                d.rate_bps
            );
        }
        sc.duration_ns = 3_000_000_000;
        sc.repetitions = 1;
        let out = tempfile::tempdir().unwrap();
        let cfg = harness::run::RunConfig {
            out: out.path().join("r"),
            bin_dir: PathBuf::from("/nonexistent"),
            backend: harness::link::Backend::Sim,
            quiet: true,
            stop: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            per_packet_log: false,
            threads: 0,
            qlog_level: quic_app::QlogLevel::Off,
            emu_mode: harness::emu::EmuMode::Relay,
            netem_router: None,
            count_syscalls: false,
        };
        let s = harness::run::run(&sc, &cfg).unwrap();
        let r = &s.repetitions[0];
        assert!(r.flows[0].goodput_bps > 1e5, "{}", p.display());
        assert!(r.bottleneck.utilization > 0.3 && r.bottleneck.utilization <= 1.0);
        n += 1;
    }
    assert_eq!(n, 2);
}
