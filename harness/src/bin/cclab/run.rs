//! `cclab run`: the scenario (a file, the flags on top) goes to
//! [`harness::run::run`], which writes the result directory; then the
//! summary table (or summary.json).

use std::path::{Path, PathBuf};

use harness::cli::LinkArgs;
use harness::run::{RunConfig, RunError, RunSummary};
use harness::scenario::Scenario;

use crate::common::{
    bad_input, bin_dir, default_out, emu_mode, qlog_level, resolve_scenario_backend, stop_flag,
    QLOG_DEFAULT,
};

#[derive(clap::Args)]
pub struct RunArgs {
    /// A scenario file (TOML); without one, the flags build the scenario.
    scenario: Option<PathBuf>,
    /// Result directory (default results/<name>-<time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// An algorithm spec; repeat for several flows (replaces the file's flows).
    #[arg(long = "cc")]
    cc: Vec<String>,
    /// Flows of each --cc.
    #[arg(long)]
    flows: Option<u32>,
    /// How long each repetition runs (e.g. 30s).
    #[arg(long)]
    duration: Option<String>,
    /// Repetitions.
    #[arg(long)]
    repetitions: Option<u32>,
    #[command(flatten)]
    link: LinkArgs,
    /// How packets reach the userspace emulator (--link emu): relay (the
    /// default: a UDP relay on loopback, no root, UDP only) or ip (the
    /// endpoints in two network namespaces joined by TUN devices, so any
    /// IPv4 traffic, TCP too, crosses the link; needs root and
    /// /dev/net/tun).
    #[arg(long, value_name = "MODE")]
    emu_mode: Option<String>,
    /// Count the endpoints' system calls (every server and client
    /// process, every thread, exec to exit, with the kernel's
    /// raw_syscalls:sys_enter counter through `cclab-syscount`) and
    /// report them per data packet (`syscalls` in each repetition of
    /// summary.json). Real links only; needs root (or
    /// kernel.perf_event_paranoid at most 1) and tracefs.
    #[arg(long)]
    count_syscalls: bool,
    /// Skip emu's per-packet log (samples are still written).
    #[arg(long)]
    no_packet_log: bool,
    /// How much qlog both ends write: off, metrics (recovery metrics and
    /// losses, no per-packet events: cwnd/RTT statistics at a fraction of
    /// the size), core or its alias packets (packets sent, received and
    /// lost, recovery metrics: what `qlog-analysis`, `report` and qvis
    /// need), base (+ stream data and congestion-state changes) or extra
    /// (everything quiche logs). Files are zstd-compressed (.sqlog.zst);
    /// CCLAB_QLOG_COMPRESS=0 in the environment writes plain .sqlog.
    #[arg(long, default_value = QLOG_DEFAULT)]
    qlog_level: String,
    /// Run this command in a throwaway Linux guest (see `cclab vm`), for
    /// --link netem on a host whose kernel has no netem: `--vm` (user-mode
    /// Linux) or `--vm=qemu`.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "uml", value_name = "KIND")]
    vm: Option<String>,
    /// Every flow's ACK policy, both ends (replaces the file's
    /// `ack_policy`): immediate (quiche's own), rfc9000 (every 2
    /// ack-eliciting packets or 25 ms) or delayed:packets=N,max_delay=Dms.
    #[arg(long, value_name = "POLICY")]
    ack_policy: Option<String>,
    /// Every flow's small-packet behaviour (replaces the file's
    /// `small_packets`): allow (quiche's own) or avoid (send data only when
    /// a full-size packet fits the window or nothing is in flight).
    #[arg(long, value_name = "MODE")]
    small_packets: Option<String>,
    /// Print summary.json on standard output.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// `cclab run`.
pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    if let Some(kind) = &a.vm {
        if std::env::var_os("CCLAB_IN_VM").is_none() {
            if let Some(out) = &a.out {
                refuse_out_lost_in_guest(out);
            }
            return crate::vm::rerun_in_vm(kind, a.quiet);
        }
    }
    let sc = build_scenario(&a);
    let backend = resolve_scenario_backend(&sc);
    let emu_mode = emu_mode(a.emu_mode.as_deref(), &sc, backend);
    if a.count_syscalls && !backend.real_time() {
        bad_input("--count-syscalls counts the endpoint processes of a real link (--link emu or netem); the simulator (--link sim) runs none");
    }
    let out = a.out.clone().unwrap_or_else(|| default_out(&sc.name));
    refuse_complete(&out);
    let stop = stop_flag()?;
    let cfg = RunConfig {
        out: out.clone(),
        bin_dir: bin_dir(),
        backend,
        quiet: a.quiet,
        stop,
        threads: 0,
        qlog_level: qlog_level(&a.qlog_level),
        per_packet_log: !a.no_packet_log,
        emu_mode,
        netem_router: None,
        count_syscalls: a.count_syscalls,
    };
    match harness::run::run(&sc, &cfg) {
        Ok(s) => {
            if a.json {
                crate::common::print_json(&s)?;
            } else if !a.quiet {
                print_summary(&s);
                println!("  results: {}", out.display());
            }
            Ok(0)
        }
        Err(RunError::Interrupted) => {
            eprintln!(
                "cclab: interrupted; partial results in {} (status: interrupted)",
                out.display()
            );
            Ok(130)
        }
        Err(e) => Err(e.into()),
    }
}

/// Refuses, before a guest boots, an `--out` the guest could not write
/// (it would fail there, after the boot and the run).
fn refuse_out_lost_in_guest(out: &Path) {
    let cwd = std::env::current_dir().unwrap_or_default();
    if !harness::vm::guest_can_write(out, &cwd, &[]) {
        bad_input(format!(
            "--out {}: a guest (--vm) can write only under the working directory ({}), {} \
             and directories given to `cclab vm --rw`; choose an --out there, or run \
             `cclab vm --rw DIR -- cclab run --link netem ...` with DIR holding the --out",
            out.display(),
            cwd.display(),
            harness::vm::SHARED_TMP.join(" and "),
        ));
    }
}

/// A complete run is never overwritten (an incomplete one is resumed).
fn refuse_complete(out: &Path) {
    if let Ok(s) = std::fs::read_to_string(out.join("status.json")) {
        if s.contains("\"complete\"") {
            bad_input(format!(
                "--out: {} already holds a complete run",
                out.display()
            ));
        }
    }
}

/// The scenario file (or the defaults), its flows replaced by --cc and
/// --flows, the other flags applied as overrides.
fn build_scenario(a: &RunArgs) -> Scenario {
    let sc = match &a.scenario {
        Some(p) => Scenario::load(p).unwrap_or_else(|e| bad_input(e)),
        None => Scenario {
            name: "cli".into(),
            ..Scenario::default()
        },
    };
    let o = overrides(a);
    if !a.quiet {
        for note in byte_rate_notes(a.scenario.as_deref(), &o) {
            eprintln!("cclab: {note}");
        }
    }
    if a.link.link_file.is_some() {
        bad_input("--link-file is for `cclab emu` and `cclab link show`; give `cclab run` a scenario file with a [link] table");
    }
    let sc = if !a.cc.is_empty() || a.flows.is_some() {
        with_flows(sc, &a.cc, a.flows.unwrap_or(1))
    } else {
        sc
    };
    let mut sc = if o.is_empty() {
        sc
    } else {
        sc.with_overrides(&o, "command line")
            .unwrap_or_else(|e| bad_input(e))
    };
    set_transport(&mut sc, a.ack_policy.as_deref(), a.small_packets.as_deref());
    sc
}

/// A note for every rate written in tc's byte units (`20mbps`), in the
/// scenario file or on the command line: such a rate is 8 times what a
/// reader of "Mbps" may expect.
fn byte_rate_notes(file: Option<&Path>, o: &[(String, toml::Value)]) -> Vec<String> {
    fn walk(v: &toml::Value, key: &str, out: &mut Vec<String>) {
        match v {
            toml::Value::String(s) if key.ends_with("rate") => {
                out.extend(harness::link::units::byte_rate_note(s));
            }
            toml::Value::Table(t) => t.iter().for_each(|(k, v)| walk(v, k, out)),
            toml::Value::Array(a) => a.iter().for_each(|v| walk(v, key, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(t) = file
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| t.parse::<toml::Table>().ok())
    {
        walk(&toml::Value::Table(t), "", &mut out);
    }
    for (k, v) in o {
        walk(v, k, &mut out);
    }
    out.dedup();
    out
}

/// `--ack-policy` and `--small-packets` on every flow.
pub fn set_transport(sc: &mut Scenario, ack: Option<&str>, small: Option<&str>) {
    use quic_app::transport::{AckPolicy, SmallPackets};
    let ack = ack
        .map(|s| AckPolicy::parse(s).unwrap_or_else(|e| bad_input(format!("--ack-policy: {e}"))));
    let small = small.map(|s| {
        SmallPackets::parse(s).unwrap_or_else(|e| bad_input(format!("--small-packets: {e}")))
    });
    // QUIC's transport settings: a Linux TCP flow has none.
    for f in sc.flows.iter_mut().filter(|f| f.tcp_cc().is_none()) {
        if let Some(a) = ack {
            f.transport.ack = a;
        }
        if let Some(s) = small {
            f.transport.small_packets = s;
        }
    }
}

/// The scenario keys the flags set, e.g. (`link.rate`, "20mbit").
fn overrides(a: &RunArgs) -> Vec<(String, toml::Value)> {
    let mut o = link_overrides(&a.link);
    if let Some(d) = &a.duration {
        o.push(("duration".into(), toml::Value::String(d.clone())));
    }
    if let Some(r) = a.repetitions {
        o.push(("repetitions".into(), toml::Value::Integer(r as i64)));
    }
    o
}

/// The `link.*` keys the link flags and --up/--down set, and `--seed`
/// (the scenario's and the link's).
pub fn link_overrides(l: &LinkArgs) -> Vec<(String, toml::Value)> {
    let mut o = Vec::new();
    for (k, v) in l.fields() {
        if let Some(v) = v {
            o.push((format!("link.{k}"), toml::Value::String(v.clone())));
        }
    }
    for (dir, items) in [("up", &l.up), ("down", &l.down)] {
        for item in items {
            let Some((k, v)) = item.split_once('=') else {
                bad_input(format!(
                    "--{dir}: `{item}` is not KEY=VALUE, e.g. --{dir} rate=5mbit"
                ));
            };
            o.push((
                format!("link.{dir}.{}", k.trim()),
                toml::Value::String(v.trim().into()),
            ));
        }
    }
    if let Some(s) = &l.seed {
        let s: i64 = s
            .trim()
            .parse()
            .ok()
            .filter(|v| *v >= 0)
            .unwrap_or_else(|| bad_input(format!("--seed: `{s}` is not a non-negative integer")));
        o.push(("seed".into(), toml::Value::Integer(s)));
        o.push(("link.seed".into(), toml::Value::Integer(s)));
    }
    o
}

/// The scenario with `count` flows of each of `cc` (without --cc, of the
/// first flow's algorithm) instead of its own.
fn with_flows(sc: Scenario, cc: &[String], count: u32) -> Scenario {
    let ccs = if cc.is_empty() {
        vec![sc.flows[0].cc.clone()]
    } else {
        cc.to_vec()
    };
    if count == 0 || count > 200 {
        bad_input(format!("--flows: {count} is not from 1 to 200"));
    }
    let mut t = sc.to_toml();
    let flows: Vec<toml::Value> = ccs
        .iter()
        .map(|cc| {
            let mut f = toml::Table::new();
            f.insert("cc".into(), cc.clone().into());
            f.insert("count".into(), toml::Value::Integer(count as i64));
            toml::Value::Table(f)
        })
        .collect();
    t.insert("flows".into(), toml::Value::Array(flows));
    Scenario::parse(
        &toml::to_string(&t).unwrap_or_default(),
        "command line",
        Path::new("."),
    )
    .unwrap_or_else(|e| bad_input(e))
}

/// The summary table: one line per flow, then the bottleneck's.
fn print_summary(s: &RunSummary) {
    println!(
        "{} ({} backend, {:.0} Mbit/s, {:.0} ms RTT, {}): {}",
        s.scenario,
        s.link.backend,
        s.link.rate_bps / 1e6,
        s.link.rtt_ms,
        s.link.aqm,
        s.status
    );
    println!(
        "  {:<5} {:<28} {:>14} {:>10} {:>10} {:>8} {:>6}",
        "flow", "cc", "goodput Mbit/s", "RTT ms", "p95 ms", "lost", "done"
    );
    let reps = s.repetitions.len().max(1);
    for f in &s.flows {
        let ci = f.ci95.get("goodput_bps").copied().unwrap_or(0.0);
        let g = if reps > 1 {
            format!("{:.2} ±{:.2}", f.goodput_bps / 1e6, ci / 1e6)
        } else {
            format!("{:.2}", f.goodput_bps / 1e6)
        };
        println!(
            "  {:<5} {:<28} {:>14} {:>10} {:>10} {:>8} {:>6}",
            f.index,
            f.cc,
            g,
            f.rtt_ms
                .as_ref()
                .map_or("-".into(), |r| format!("{:.1}", r.mean)),
            f.rtt_ms
                .as_ref()
                .map_or("-".into(), |r| format!("{:.1}", r.p95)),
            f.lost_packets
                .map(|l| format!("{l:.0}"))
                .or(f.retransmitted_packets.map(|r| format!("{r:.0} retx")))
                .unwrap_or_else(|| "\u{2014}".into()),
            format!("{}/{}", f.completed, reps)
        );
    }
    println!(
        "  bottleneck ({}): utilization {:.1}%, mean queueing delay {:.1} ms, {} drops; Jain's fairness {}",
        s.bottleneck.direction,
        s.bottleneck.utilization * 100.0,
        s.bottleneck.queue_delay_ms_mean,
        s.bottleneck.drops,
        s.jain_fairness.map_or("-".into(), |j| format!("{j:.3}"))
    );
    for r in &s.repetitions {
        let Some(c) = &r.syscalls else { continue };
        let busiest: Vec<String> = {
            let mut v: Vec<_> = c.by_name.iter().filter(|(_, &k)| k > 0).collect();
            v.sort_by(|a, b| b.1.cmp(a.1));
            v.iter().take(4).map(|(n, k)| format!("{n} {k}")).collect()
        };
        println!(
            "  system calls (rep {}): {} by {} endpoint processes{} for {} data packets: {} per data packet ({})",
            r.rep,
            c.calls,
            c.processes,
            if c.missing > 0 {
                format!(" ({} not counted)", c.missing)
            } else {
                String::new()
            },
            c.data_packets,
            c.per_data_packet.map_or_else(
                || {
                    if c.data_packets == 0 {
                        "- (the data packets are counted from qlog level core up)".into()
                    } else {
                        "-".into()
                    }
                },
                |p| format!("{p:.2}")
            ),
            busiest.join(", ")
        );
    }
}
