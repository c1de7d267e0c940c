//! Linux TCP flows (`cc = "tcp:NAME"`) in runs: refused where they cannot
//! run (the simulator, an algorithm the kernel lacks, QUIC's knobs, the
//! emulator's UDP relay, a missing tcp-bulk), and end to end beside a QUIC
//! flow through kernel links: on tbf between namespaces on this host
//! (root), and with netem's delay where the kernel has it
//! (`--include-ignored` in the guest of `cclab vm`).

mod common;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::Backend;
use harness::run::{run, RunConfig, RunError};
use harness::scenario::Scenario;
use serde_json::Value;

/// `cclab` alone (refusals start nothing).
fn cclab_bare() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cclab"))
}

/// `cclab ARGS`, which must fail with status 2; its stderr.
fn refused(args: &[&str]) -> String {
    let o = cclab_bare().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "cclab {args:?}: {err}");
    err
}

#[test]
fn the_command_line_refuses_tcp_flows_where_they_cannot_run() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let out = out.to_str().unwrap();
    // The simulator: the flow named, and what to use instead.
    let e = refused(&[
        "run", "--cc", "cubic", "--cc", "tcp:reno", "--link", "sim", "--out", out,
    ]);
    assert!(e.contains("flows[1].cc"), "{e}");
    assert!(
        e.contains("--link emu") && e.contains("--link netem"),
        "{e}"
    );
    // An algorithm the kernel lacks: named, with the kernel's list.
    let e = refused(&["run", "--cc", "tcp:nosuchcc", "--out", out]);
    assert!(e.contains("flows[0].cc") && e.contains("`nosuchcc`"), "{e}");
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    for n in avail.split_whitespace() {
        assert!(e.contains(n), "{e} does not list {n}");
    }
    // A QUIC knob in a scenario file.
    let f = d.path().join("s.toml");
    std::fs::write(
        &f,
        "[[flows]]\ncc = \"tcp:reno\"\nsmall_packets = \"allow\"\n",
    )
    .unwrap();
    let e = refused(&["run", f.to_str().unwrap(), "--out", out]);
    assert!(
        e.contains("flows[0].small_packets") && e.contains("tcp:reno"),
        "{e}"
    );
    assert!(!Path::new(out).exists(), "nothing is written for bad input");
}

#[test]
fn cclab_list_shows_the_kernels_tcp_algorithms() {
    let o = cclab_bare()
        .args(["list", "--tcp", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    let listed: Vec<&str> = v["kernel"]["available"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(listed, avail.split_whitespace().collect::<Vec<_>>());
    assert!(v["kernel"]["loadable"].is_array());
    let table = cclab_bare().arg("list").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("Linux TCP (a flow's cc = \"tcp:NAME\""),
        "{table}"
    );
    assert!(
        table.contains(&format!("available {}", listed.join(" "))),
        "{table}"
    );
}

/// A run of `sc` on `backend` with the programs in `bin_dir`.
fn config(out: &Path, bin_dir: PathBuf, backend: Backend) -> RunConfig {
    RunConfig {
        out: out.to_path_buf(),
        bin_dir,
        backend,
        quiet: true,
        stop: Arc::new(AtomicBool::new(false)),
        per_packet_log: false,
        threads: 0,
        qlog_level: quic_app::QlogLevel::Metrics,
        emu_mode: harness::emu::EmuMode::Relay,
        netem_router: None,
        count_syscalls: false,
    }
}

/// A directory with empty files named as the programs a run looks for.
fn fake_bins(names: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for n in names {
        std::fs::write(d.path().join(n), b"").unwrap();
    }
    d
}

fn one_tcp_flow() -> Scenario {
    Scenario::parse(
        "name = \"t\"\nduration = \"1s\"\n[[flows]]\ncc = \"tcp:reno\"\n",
        "test",
        Path::new("."),
    )
    .unwrap()
}

#[test]
fn a_missing_tcp_bulk_says_how_to_build_it() {
    let bins = fake_bins(&["quic-server", "quic-client"]);
    let d = tempfile::tempdir().unwrap();
    let cfg = config(&d.path().join("r"), bins.path().into(), Backend::Emu);
    let e = run(&one_tcp_flow(), &cfg).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, RunError::Unsupported(_)), "{msg}");
    assert!(msg.contains("tcp-bulk not found"), "{msg}");
    assert!(msg.contains("cargo build --release -p tcp-bulk"), "{msg}");
    assert!(msg.contains("flow 0 (`tcp:reno`)"), "{msg}");
}

#[test]
fn the_emulators_udp_relay_refuses_a_tcp_flow() {
    let bins = fake_bins(&["quic-server", "quic-client", "tcp-bulk"]);
    let d = tempfile::tempdir().unwrap();
    let cfg = config(&d.path().join("r"), bins.path().into(), Backend::Emu);
    let msg = run(&one_tcp_flow(), &cfg).unwrap_err().to_string();
    assert!(msg.contains("flow 0 (`tcp:reno`)"), "{msg}");
    assert!(
        msg.contains("UDP relay carries UDP datagrams only"),
        "{msg}"
    );
    assert!(msg.contains("--link netem"), "{msg}");
}

/// Root, or a skip (a failure under CI).
fn root() -> bool {
    if !harness::netns::is_root() {
        test_support::skip("not root (network namespaces and qdiscs need root)");
    }
    harness::netns::is_root()
}

/// The repetition's flows and bottleneck, checked the same way on every
/// kernel link: both flows complete with goodput and RTT; the TCP flow's
/// figures come from its records (retransmissions, not losses; a cwnd);
/// and the bytes tc counted on the bottleneck (Ethernet frames) are what
/// the two receivers account for: the QUIC flow's UDP payload plus 42
/// bytes of UDP, IP and Ethernet per packet received (from its qlog), the
/// TCP flow's IP bytes plus 14 of Ethernet per data segment received.
/// `framing` gives those per-packet overheads (QUIC, TCP): the emulator's
/// IP mode counts a UDP payload as it is and an IP packet less its first
/// 28 bytes (so (0, -28)), tc counts Ethernet frames ((42, 14)).
///
/// Two things keep them apart, and the bound is their sum: the accounting
/// (1%, as measured on a quiet host), and what was queued or in flight
/// when the receivers stopped counting, which the link still carries
/// after them: at most `in_flight` bytes, the link's queue plus one round
/// trip at its rate plus 10 packets of probes. How much of that is
/// carried depends on how soon the senders stop, which a loaded host
/// delays (1.15% at 6 s with builds beside it).
fn check_both_flows(out: &Path, s: &Value, framing: (i64, i64), in_flight: f64) {
    assert_eq!(s["status"], "complete");
    let rep = &s["repetitions"][0];
    let (q, t) = (&rep["flows"][0], &rep["flows"][1]);
    assert_eq!(t["cc"], "tcp:cubic");
    for f in [q, t] {
        assert_eq!(f["complete"], true, "{f}");
        assert!(f["goodput_bps"].as_f64().unwrap() > 1e6, "{f}");
        let rtt = &f["rtt_ms"];
        assert!(
            rtt["min"].as_f64().unwrap() <= rtt["mean"].as_f64().unwrap(),
            "{f}"
        );
        assert!(
            rtt["mean"].as_f64().unwrap() <= rtt["p95"].as_f64().unwrap() + 1e-9,
            "{f}"
        );
    }
    assert!(t["lost_packets"].is_null(), "TCP counts no losses: {t}");
    assert!(t["retransmitted_packets"].is_u64(), "{t}");
    assert!(t["cwnd_mean"].as_f64().unwrap() > 0.0, "{t}");
    assert!(s["flows"][1]["retransmitted_packets"].is_number());
    for role in ["sender", "receiver"] {
        let rel = t["tcp_records"][role].as_str().unwrap();
        assert!(out.join(rel).exists(), "{rel}");
    }
    let qlog = out.join(q["qlog"]["receiver"].as_str().unwrap());
    let fs = qlog_analysis::summary::summarize_file(&qlog, 0.1).unwrap();
    let packets = fs.connections[0].counts.packets_received;
    let quic = q["wire_bytes_received"].as_u64().unwrap() as i64 + framing.0 * packets as i64;
    let rx = harness::scenario::tcp::read_records(
        &out.join(t["tcp_records"]["receiver"].as_str().unwrap()),
    );
    let segs = rx.last().unwrap()["info"]["data_segs_in"].as_u64().unwrap();
    let tcp = t["wire_bytes_received"].as_u64().unwrap() as i64 + framing.1 * segs as i64;
    let link = rep["bottleneck"]["bytes"].as_f64().unwrap();
    let gap = link - (quic + tcp) as f64;
    let diff = gap.abs() / link;
    eprintln!(
        "bottleneck {link} B; QUIC {quic} B + TCP {tcp} B: {:.3}% apart; goodput QUIC {:.2} Mbit/s, TCP {:.2} Mbit/s",
        diff * 100.0,
        q["goodput_bps"].as_f64().unwrap() / 1e6,
        t["goodput_bps"].as_f64().unwrap() / 1e6
    );
    assert!(
        gap.abs() < 0.01 * link + in_flight,
        "bottleneck {link} vs flows {quic} + {tcp}: {gap} B apart, allowed 1% and {in_flight} B in flight"
    );
}

/// `cclab run` of a QUIC CUBIC and a Linux TCP CUBIC flow on `--link
/// netem` with `link` flags; its summary.
fn both_flows(out: &Path, link: &[&str]) -> Value {
    both_flows_on("netem", out, link)
}

/// The same on `backend`.
fn both_flows_on(backend: &str, out: &Path, link: &[&str]) -> Value {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_cclab"));
    let tcp_bulk = bin.parent().unwrap().join("tcp-bulk");
    assert!(
        tcp_bulk.exists(),
        "{} is not built; run the tests with `cargo test --workspace` (or `cargo build --release -p tcp-bulk` first)",
        tcp_bulk.display()
    );
    common::cclab_run(
        &[
            &[
                "--link",
                backend,
                "--cc",
                "cubic",
                "--cc",
                "tcp:cubic",
                "--qlog-level",
                "core",
            ],
            link,
        ]
        .concat(),
        out,
    )
}

#[test]
fn a_tcp_flow_beside_a_quic_flow_on_kernel_shaping() {
    if !root() {
        return;
    }
    // No delay, so no netem: tbf alone shapes the link (this host's kernel
    // has tbf, not netem).
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let s = both_flows(
        &out,
        &[
            "--rate",
            "20mbit",
            "--rtt",
            "0ms",
            "--queue",
            "50kb",
            "--duration",
            "5s",
        ],
    );
    // 50 kB queued, no delay, 10 packets.
    check_both_flows(&out, &s, (42, 14), 50e3 + 15e3);
    // The report draws the TCP flow beside the QUIC one.
    let html = d.path().join("r.html");
    let o = common::cclab()
        .arg("report")
        .arg(&out)
        .arg("--out")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("flow 1: tcp:cubic"), "a panel per flow");
    assert!(text.contains(" retx"), "retransmissions in the table");
}

#[test]
#[ignore = "needs kernel netem, here or through the guest router: run by scripts/test-netem.sh (make test)"]
fn a_tcp_flow_beside_a_quic_flow_on_netem() {
    assert!(root(), "needs root");
    assert!(
        harness::netem::probe().netem || harness::guest_router::wanted(),
        "this kernel has no sch_netem and CCLAB_NETEM_ROUTER=host: run it through scripts/test-netem.sh"
    );
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let s = both_flows(
        &out,
        &[
            "--rate",
            "20mbit",
            "--rtt",
            "40ms",
            "--queue",
            "1bdp",
            "--duration",
            "15s",
        ],
    );
    // 1 BDP queued (100 kB), 1 BDP in flight, 10 packets.
    check_both_flows(&out, &s, (42, 14), 2.0 * 100e3 + 15e3);
}

#[test]
fn a_tcp_flow_beside_a_quic_flow_on_the_emulators_ip_mode() {
    if !common::ip_mode() {
        return;
    }
    // `--link emu` picks the IP mode for a scenario with a TCP flow.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let s = both_flows_on(
        "emu",
        &out,
        &[
            "--rate",
            "20mbit",
            "--rtt",
            "40ms",
            "--queue",
            "1bdp",
            "--duration",
            "6s",
        ],
    );
    assert!(out.join("rep-1/emu-ip.json").exists());
    check_both_flows(&out, &s, (0, -28), 2.0 * 100e3 + 15e3);
}

#[test]
fn a_sweep_on_the_emulator_runs_tcp_points_in_ip_mode_and_others_on_the_relay() {
    if !common::ip_mode() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("base.toml"),
        "name = \"sweep-tcp\"\nduration = \"2s\"\n[link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n\
         [[flows]]\ncc = \"cubic\"\n[[flows]]\ncc = \"newreno\"\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("sweep.toml"),
        "scenario = \"base.toml\"\n[grid]\n\"flows.1.cc\" = [\"newreno\", \"tcp:cubic\"]\n",
    )
    .unwrap();
    let out = d.path().join("out");
    let o = cclab_bare()
        .args(["sweep", "--link", "emu", "--quiet", "--out"])
        .arg(&out)
        .arg(d.path().join("sweep.toml"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut modes = Vec::new();
    for (point, mode) in [("0000-newreno", "relay"), ("0001-tcp_cubic", "ip")] {
        let dir = out.join("runs").join(point);
        let meta: Value =
            serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
        let s: Value =
            serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
        assert_eq!(s["status"], "complete", "{point}");
        assert_eq!(
            dir.join("rep-1/emu-ip.json").exists(),
            mode == "ip",
            "{point}"
        );
        modes.push(meta["emu_mode"].as_str().unwrap().to_string());
    }
    assert_eq!(modes, ["relay", "ip"]);
}
