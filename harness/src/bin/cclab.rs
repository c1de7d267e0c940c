//! `cclab`: the bench harness's command line.
//!
//! `run` runs a scenario, `demo` every algorithm on the default link,
//! `list` describes the algorithms, `emu` runs the link emulator alone,
//! `link` inspects link descriptions and the kernel, `cleanup` removes
//! leftovers of killed runs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use harness::cli::LinkArgs;
use harness::emu::{EmuConfig, Emulator, Route};
use harness::link::units::parse_duration_ns;
use harness::link::Backend;
use harness::netns;
use harness::tune::{request, Outcome, Progress, TuneError};

#[derive(Parser)]
#[command(
    name = "cclab",
    version,
    about = "Bench harness for QUIC congestion-control algorithms"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario (all repetitions) and write a result directory.
    Run(Box<RunArgs>),
    /// The main job: every registered algorithm alone on the default link
    /// (20 Mbit/s, 40 ms RTT, 1 BDP drop-tail) on the userspace emulator.
    Demo {
        /// Result directory (default results/demo-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seconds per algorithm.
        #[arg(long, default_value = "7s")]
        duration: String,
        /// Print the summary table as JSON.
        #[arg(long)]
        json: bool,
        /// No progress output.
        #[arg(long)]
        quiet: bool,
    },
    /// Run a grid of scenarios (resumable; --shard I/N splits it across machines).
    Sweep(SweepArgs),
    /// Tune any algorithm's parameters for an objective, per network
    /// condition, on the virtual-time link: writes a table the algorithm
    /// loads (`ALG:table=FILE`). `cclab tune smcc` is SMCC's offline mode.
    Tune(Box<TuneArgs>),
    /// Re-run a seed paper's evaluation and check its claims: PASS, FAIL
    /// (with the measured figures and the likely reason) or N/A.
    Reproduce(ReproduceArgs),
    /// Join sweep or shard directories into one.
    Merge {
        /// Sweep output directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The merged directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// One self-contained HTML report (or Markdown, for .md) from result directories.
    Report {
        /// Result directories (runs, sweeps, or a demo's directory).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The report file: .html or .md.
        #[arg(long)]
        out: PathBuf,
    },
    /// The algorithms, their parameters, units and defaults.
    List {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the userspace link emulator as a UDP relay until Ctrl-C (or
    /// --duration): clients send to --listen, the emulator forwards to
    /// --target and back, through the emulated bottleneck.
    Emu(Box<EmuArgs>),
    /// Inspect link descriptions and the kernel's link support.
    Link {
        #[command(subcommand)]
        cmd: LinkCmd,
    },
    /// Run a command as root in a throwaway Linux guest whose kernel has
    /// netem, red, codel, fq_codel and pie (user-mode Linux by default, or
    /// QEMU): the host's files read-only, the working directory writable.
    /// Exit status, standard output and error are the command's.
    Vm(VmArgs),
    /// Remove namespaces (with their veths, qdiscs and processes) left by
    /// runs that were killed.
    Cleanup {
        /// Also remove those of runs that are still alive.
        #[arg(long)]
        all: bool,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
struct VmArgs {
    /// Guest: uml (user-mode Linux: no KVM needed, boots in about a
    /// second, guest programs at native speed, one CPU) or qemu (a stock
    /// Debian kernel under QEMU through virtme-ng; KVM where usable, else
    /// software emulation).
    #[arg(long, default_value = "uml", value_name = "KIND")]
    kind: String,
    /// Guest memory, e.g. 2048M or 2G.
    #[arg(long, default_value = "2G")]
    memory: String,
    /// Virtual CPUs (qemu; UML has one).
    #[arg(long, default_value_t = 2)]
    cpus: u32,
    /// Another host directory the guest may write (the working directory
    /// always is).
    #[arg(long = "rw", value_name = "DIR")]
    rw: Vec<PathBuf>,
    /// Stop the guest after this long (exit status 124), e.g. 600s.
    #[arg(long)]
    timeout: Option<String>,
    /// Do not install missing host packages.
    #[arg(long)]
    no_install: bool,
    /// No messages about the guest itself.
    #[arg(long)]
    quiet: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

#[derive(clap::Args)]
struct RunArgs {
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
    /// Print summary.json on standard output.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

#[derive(clap::Args)]
struct SweepArgs {
    /// The sweep file (TOML: scenario, grid, repetitions, randomize, seed).
    file: PathBuf,
    /// Output directory (re-running with it finishes what is missing).
    #[arg(long)]
    out: PathBuf,
    /// Backend for every point, overriding the scenario's `link.backend`:
    /// auto, emu, netem or sim.
    #[arg(long)]
    link: Option<String>,
    /// Points run in parallel (each its own link and processes; on a
    /// small machine they compete for CPU). Default: one per core with
    /// `backend = "sim"` (each simulation uses one core), else 1.
    #[arg(long)]
    jobs: Option<usize>,
    /// Take only this shard of the grid: I/N takes points with index % N == I.
    #[arg(long, default_value = "0/1")]
    shard: String,
    /// Skip emu's per-packet logs.
    #[arg(long)]
    no_packet_log: bool,
    /// How much qlog both ends write: off, metrics (no per-packet
    /// events), packets (= core: per-packet events), base, extra.
    /// zstd-compressed unless CCLAB_QLOG_COMPRESS=0.
    #[arg(long, default_value = QLOG_DEFAULT)]
    qlog_level: String,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

#[derive(clap::Args)]
struct ReproduceArgs {
    /// A paper (smcc, ewphcc, tcp-exp, br-tcp, dcm-plus), several, or `all`.
    #[arg(required = true)]
    papers: Vec<String>,
    /// Output root: each paper writes OUT/<paper>/ (claims.json,
    /// REPRODUCTION.md, figures, runs/). Re-running resumes.
    #[arg(long, default_value = "results/reproduce")]
    out: PathBuf,
    /// Fewer repetitions and shorter runs (for CI): verdicts are indicative.
    #[arg(long)]
    quick: bool,
    /// Link backend: sim (default; virtual time), emu (real processes on
    /// the userspace emulator) or netem.
    #[arg(long, default_value = "sim")]
    link: String,
    /// Runs at once (default: one per core on sim, 1 otherwise).
    #[arg(long)]
    jobs: Option<usize>,
    /// Where the papers' directories are (default: scenarios/reproduce of
    /// this checkout).
    #[arg(long)]
    papers_dir: Option<PathBuf>,
    /// qlog level at the points that need the senders' cwnd or RTT (the
    /// others run with qlog off): metrics, core (alias packets), base or
    /// extra.
    #[arg(long, default_value = "metrics")]
    qlog_level: String,
    /// List the papers and their claims, and exit.
    #[arg(long)]
    list: bool,
    /// Print the results as JSON (all papers, every claim).
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// `cclab tune` arguments.
#[derive(clap::Args)]
struct TuneArgs {
    /// The algorithm to tune (any registered one with numeric parameters;
    /// `cclab list` shows them), or `smcc`: SMCC's offline mode, the same as
    /// `vegas --param alpha=1..19.5 --param beta=1.5..20 --objective smcc`.
    algorithm: String,
    /// A parameter to search and its range: NAME=LO..HI (repeatable), within
    /// the range the registry allows.
    #[arg(long = "param", value_name = "NAME=LO..HI")]
    params: Vec<String>,
    /// What to maximise: a preset (smcc, power, utilization-delay) or an
    /// expression over utilization, goodput, goodput_mbps, queue_delay,
    /// p95_queue_delay, base_rtt, rtt, p95_rtt, loss_rate, drop_rate, jain,
    /// flows (delays in ms), e.g. 'utilization - 0.5*p95_queue_delay/base_rtt'.
    /// Required except for `smcc`.
    #[arg(long)]
    objective: Option<String>,
    /// A network condition to tune for: rate=RATE,rtt=TIME[,loss=P,flows=N]
    /// (repeatable; each gets its own search and table entry; default
    /// rate=20mbit,rtt=40ms).
    #[arg(long = "conditions", value_name = "rate=..,rtt=..")]
    conditions: Vec<String>,
    /// Bottleneck rates (repeatable): every pair with --rtt is a condition.
    #[arg(long = "rate")]
    rates: Vec<String>,
    /// Round-trip times (repeatable), see --rate.
    #[arg(long = "rtt")]
    rtts: Vec<String>,
    /// Parameters held fixed: a spec of the algorithm, e.g. vegas:gamma=2.
    #[arg(long)]
    base: Option<String>,
    /// A scenario file to evaluate in (its flows running the algorithm get
    /// the candidate; the condition sets rate, RTT, loss and their count);
    /// default: one download over a 1 BDP drop-tail link.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Queue limit of the default scenario.
    #[arg(long, default_value = "1bdp")]
    queue: String,
    /// Queue management of the default scenario.
    #[arg(long, default_value = "droptail")]
    aqm: String,
    /// Where evaluations run: sim (virtual time, the default: fast and
    /// repeatable) or emu (real processes on the userspace emulator).
    #[arg(long, default_value = "sim")]
    link: String,
    /// Length of each evaluation run (default: the scenario's, 6s).
    #[arg(long)]
    duration: Option<String>,
    /// The optimiser: pso (particle swarm, as SMCC's paper) or cmaes
    /// (CMA-ES, the `cmaes` crate).
    #[arg(long, default_value = "pso")]
    optimizer: String,
    /// Particles (pso, default 6) or population (cmaes, default 4 + 3 ln d).
    #[arg(long)]
    swarm: Option<usize>,
    /// Iterations (pso) or generations (cmaes), default 5.
    #[arg(long)]
    iterations: Option<usize>,
    /// Seed of the optimiser.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Link seeds each point is measured on (its value is their mean).
    #[arg(long, default_value_t = 1)]
    seeds: usize,
    /// Fresh link seeds the best and the defaults are compared on at the end.
    #[arg(long, default_value_t = 3)]
    validate: usize,
    /// Evaluations at once (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run only shard I of N of the pending batch and exit (job arrays; a
    /// later call without --shard, or the next wave, advances the search).
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// The table to write (TOML); load it with --cc ALG:table=FILE.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The work directory: every evaluation, result.json, convergence.svg
    /// (default: next to the table, TABLE.runs). Running the same command
    /// again resumes from it.
    #[arg(long)]
    work: Option<PathBuf>,
    /// Keep every evaluation's run directory (WORK/runs/); by default only
    /// its metrics are kept (WORK/evals/, naming spec, condition and seed).
    #[arg(long)]
    keep_runs: bool,
    /// Print result.json on standard output.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

#[derive(clap::Args)]
struct EmuArgs {
    /// Where clients send (default 127.0.0.1:4433; with --netns,
    /// 10.201.1.1:4433 in the router namespace).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// The server to forward to (with --netns, usually 10.201.2.2:PORT).
    #[arg(long)]
    target: SocketAddr,
    #[command(flatten)]
    link: LinkArgs,
    /// Create client, router and server namespaces joined by veth pairs and
    /// run the emulator in the router (root). Start your server with
    /// `ip netns exec <server-ns> ...` and your client in the client ns.
    #[arg(long)]
    netns: bool,
    /// Write bottleneck.bin and bottleneck-samples.jsonl here.
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Stop after this long (e.g. 30s); default: until Ctrl-C.
    #[arg(long)]
    duration: Option<String>,
    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
    /// Print nothing but errors (and the JSON report).
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
enum LinkCmd {
    /// Which qdiscs the kernel has (netem, tbf, htb, red, codel, fq_codel, pie): root only.
    Probe {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure what a link really does with a paced UDP probe (no
    /// congestion control in the way), in the down direction: delivered
    /// rate at 105% load and one-way delay at 30% load, against the
    /// description. `--link emu` (default) or `--link netem`.
    Measure {
        #[command(flatten)]
        link: Box<LinkArgs>,
        /// Seconds per phase.
        #[arg(long = "for", default_value = "4s", value_name = "DURATION")]
        duration: String,
        /// Datagram size (UDP payload), bytes.
        #[arg(long, default_value_t = 1350)]
        size: usize,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a link description and print it fully resolved.
    Show {
        #[command(flatten)]
        link: Box<LinkArgs>,
        /// Print as JSON instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

/// Exit status for bad input.
const BAD_INPUT: i32 = 2;

fn bad_input(msg: impl std::fmt::Display) -> ! {
    eprintln!("cclab: {msg}");
    std::process::exit(BAD_INPUT);
}

fn main() {
    let cli = Cli::parse();
    // Plain or zstd qlog files (CCLAB_QLOG_COMPRESS): the simulator reads
    // it here, the endpoint processes inherit it.
    if let Err(e) = quic_app::qlog_file::choose(None) {
        bad_input(e);
    }
    let code = match cli.cmd {
        Cmd::Run(a) => run(*a),
        Cmd::Demo {
            out,
            duration,
            json,
            quiet,
        } => demo(out, &duration, json, quiet),
        Cmd::List { json } => list(json),
        Cmd::Sweep(a) => sweep(&a),
        Cmd::Tune(a) => tune(*a),
        Cmd::Reproduce(a) => reproduce(&a),
        Cmd::Merge { dirs, out } => match harness::sweep::merge(&dirs, &out) {
            Ok(n) => {
                println!("{}: {n} run(s) merged", out.display());
                Ok(0)
            }
            Err(e) => Err(e.into()),
        },
        Cmd::Report { dirs, out } => match harness::report::write(&dirs, &out) {
            Ok(n) => {
                println!("{}: {n} run(s)", out.display());
                Ok(0)
            }
            Err(e) => bad_input(e),
        },
        Cmd::Emu(a) => emu(*a),
        Cmd::Link { cmd } => link(cmd),
        Cmd::Cleanup { all, json } => cleanup(all, json),
        Cmd::Vm(a) => vm(a),
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("cclab: {e:#}");
            std::process::exit(1);
        }
    }
}

fn vm_options(kind: &str, quiet: bool) -> harness::vm::VmOptions {
    harness::vm::VmOptions {
        kind: harness::vm::VmKind::parse(kind)
            .unwrap_or_else(|| bad_input(format!("--kind: `{kind}` is not one of uml, qemu"))),
        verbose: !quiet,
        ..Default::default()
    }
}

fn vm(a: VmArgs) -> anyhow::Result<i32> {
    let mut o = vm_options(&a.kind, a.quiet);
    let mem =
        harness::link::units::parse_size_bytes(&a.memory.to_lowercase()).unwrap_or_else(|| {
            bad_input(format!(
                "--memory: `{}` is not a size such as 2G or 1536M",
                a.memory
            ))
        });
    o.memory_mb = (mem / (1 << 20)).clamp(128, 1 << 20) as u32;
    o.cpus = a.cpus.max(1);
    o.writable = a.rw;
    o.install = !a.no_install;
    o.timeout = a.timeout.as_deref().map(|t| {
        std::time::Duration::from_nanos(harness::link::units::parse_duration_ns(t).unwrap_or_else(
            || {
                bad_input(format!(
                    "--timeout: `{t}` is not a duration such as 90s or 600s"
                ))
            },
        ))
    });
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(harness::vm::run(&a.cmd, &o, stop)?)
}

/// Runs this same `cclab` command line, minus `--vm[=KIND]`, in a guest.
fn rerun_in_vm(kind: &str, quiet: bool) -> anyhow::Result<i32> {
    let mut cmd = vec![std::env::current_exe()?.to_string_lossy().into_owned()];
    cmd.extend(
        std::env::args()
            .skip(1)
            .filter(|a| a != "--vm" && !a.starts_with("--vm=")),
    );
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(harness::vm::run(&cmd, &vm_options(kind, quiet), stop)?)
}

fn cleanup(all: bool, json: bool) -> anyhow::Result<i32> {
    let done = netns::cleanup(!all)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&done)?);
    } else if done.namespaces.is_empty() {
        println!("nothing to clean up");
    } else {
        println!(
            "removed {} namespace(s) and {} process(es): {}",
            done.namespaces.len(),
            done.processes,
            done.namespaces.join(", ")
        );
    }
    Ok(0)
}

fn link(cmd: LinkCmd) -> anyhow::Result<i32> {
    match cmd {
        LinkCmd::Measure {
            link,
            duration,
            size,
            json,
        } => link_measure(&link, &duration, size, json),
        LinkCmd::Probe { json } => {
            if !netns::is_root() {
                bad_input(
                    "probing the kernel's qdiscs needs root (it adds them to a scratch namespace)",
                );
            }
            let caps = harness::netem::probe();
            if json {
                println!("{}", serde_json::to_string_pretty(&caps)?);
            } else {
                for (name, ok) in [
                    ("netem", caps.netem),
                    ("tbf", caps.tbf),
                    ("htb", caps.htb),
                    ("red", caps.red),
                    ("codel", caps.codel),
                    ("fq_codel", caps.fq_codel),
                    ("pie", caps.pie),
                    ("netem seed (tc)", caps.netem_seed),
                ] {
                    println!("{name:<16} {}", if ok { "yes" } else { "no" });
                }
                if !caps.netem {
                    println!(
                        "\nThis kernel has no sch_netem: use the userspace emulator (--link emu)."
                    );
                }
            }
            Ok(0)
        }
        LinkCmd::Show { link, json } => {
            let spec = link.to_spec().unwrap_or_else(|e| bad_input(e));
            let t = spec.to_toml();
            if json {
                println!("{}", serde_json::to_string_pretty(&t)?);
            } else {
                let mut doc = toml::Table::new();
                doc.insert("link".into(), toml::Value::Table(t));
                print!("{}", toml::to_string(&doc)?);
            }
            Ok(0)
        }
    }
}

fn link_measure(a: &LinkArgs, duration: &str, size: usize, json: bool) -> anyhow::Result<i32> {
    use harness::probe::{measure_link, ProbeLink};
    let spec = a.to_spec().unwrap_or_else(|e| bad_input(e));
    let kind = match a.link.as_deref().unwrap_or("emu") {
        "emu" => ProbeLink::Emu,
        "netem" => ProbeLink::Netem,
        other => bad_input(format!(
            "--link: `{other}` is not one of emu, netem (the probe needs a real link)"
        )),
    };
    if kind == ProbeLink::Netem {
        resolve_backend(&harness::link::LinkSpec {
            backend: Backend::Netem,
            ..spec.clone()
        });
    }
    let secs = harness::link::units::parse_duration_ns(duration)
        .unwrap_or_else(|| bad_input(format!("--for: `{duration}` is not a duration such as 4s")));
    let dur = std::time::Duration::from_nanos(secs);
    let d = spec.dir(harness::link::Dir::Down);
    // Offered load in payload bits so that the link sees 105% / 30% of
    // its rate counted its own way.
    let payload_share = size as f64 / harness::probe::wire_bytes(kind, size as u64) as f64;
    let mut out = serde_json::Map::new();
    for (phase, load) in [("rate", 1.05), ("delay", 0.3)] {
        let p = measure_link(kind, &spec, d.rate_bps * load * payload_share, size, dur)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let rate_err = (p.delivered_wire_bps - d.rate_bps) / d.rate_bps * 100.0;
        if !json {
            println!(
                "{phase:>5}: offered {:.3} Mbit/s, delivered {:.3} Mbit/s counted as the link counts ({rate_err:+.2}% of {:.3}), one-way delay p50 {:.3} ms p99 {:.3} ms (error p50 {:+.3} p99 {:+.3} max {:+.3} ms), lost {} of {}, reordered {}",
                p.offered_bps / 1e6,
                p.delivered_wire_bps / 1e6,
                d.rate_bps / 1e6,
                p.measured.owd_ms[0],
                p.measured.owd_ms[1],
                p.owd_error_ms[0],
                p.owd_error_ms[1],
                p.owd_error_ms[2],
                p.measured.sent - p.measured.received,
                p.measured.sent,
                p.measured.reordered,
            );
        }
        let mut v = serde_json::to_value(&p)?;
        v["rate_error_pct"] = rate_err.into();
        out.insert(phase.into(), v);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(0)
}

fn emu(a: EmuArgs) -> anyhow::Result<i32> {
    let spec = a.link.to_spec().unwrap_or_else(|e| bad_input(e));
    if spec.backend == Backend::Netem {
        bad_input(
            "link.backend: `cclab emu` runs the userspace emulator; netem is used by scenario runs",
        );
    }
    let duration = a.duration.as_deref().map(|d| {
        parse_duration_ns(d)
            .filter(|&n| n > 0)
            .map(Duration::from_nanos)
            .unwrap_or_else(|| {
                bad_input(format!(
                    "--duration: `{d}` is not a positive time such as 30s"
                ))
            })
    });
    if let Some(dir) = &a.log_dir {
        std::fs::create_dir_all(dir)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let topology = if a.netns {
        Some(netns::Topology::create(false)?)
    } else {
        None
    };
    let listen = a.listen.unwrap_or_else(|| {
        if a.netns {
            SocketAddr::new(netns::ROUTER_CLIENT_IP.into(), 4433)
        } else {
            "127.0.0.1:4433".parse().unwrap()
        }
    });
    let mut cfg = EmuConfig::new(
        spec,
        vec![Route {
            listen,
            target: a.target,
        }],
    );
    cfg.log_dir = a.log_dir.clone();
    cfg.netns = topology.as_ref().map(|t| t.router.clone());
    let emu = Emulator::start(cfg)?;
    if !a.quiet {
        eprintln!(
            "cclab emu: listening on {}, forwarding to {}",
            emu.listen_addrs()[0],
            a.target
        );
        if let Some(t) = &topology {
            eprintln!(
                "namespaces: client {} ({}), router {}, server {} ({})",
                t.client,
                netns::CLIENT_IP,
                t.router,
                t.server,
                netns::SERVER_IP
            );
        }
        eprintln!("Ctrl-C stops it and removes everything it created.");
    }
    let started = Instant::now();
    let mut last_print = Instant::now();
    while !stop.load(Ordering::Relaxed) && duration.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
        if !a.quiet && last_print.elapsed() >= Duration::from_secs(1) {
            let s = emu.snapshot();
            eprint!(
                "\r{:>6.1} s  flows {}  up {:>8} pkts ({} dropped)  down {:>8} pkts ({} dropped)  ",
                s.t_s,
                s.flows,
                s.up.delivered_packets,
                s.up.drops(),
                s.down.delivered_packets,
                s.down.drops()
            );
            last_print = Instant::now();
        }
    }
    let report = emu.stop()?;
    drop(topology);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !a.quiet {
        eprintln!(
            "\nstopped after {:.1} s: up {} delivered / {} dropped, down {} delivered / {} dropped, emulator CPU {:.1} s",
            report.duration_s,
            report.up.delivered_packets,
            report.up.drops(),
            report.down.delivered_packets,
            report.down.drops(),
            report.cpu_s
        );
    }
    Ok(if stop.load(Ordering::Relaxed) { 130 } else { 0 })
}

fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CCLAB_BIN_DIR") {
        return PathBuf::from(d);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Ctrl-C sets the flag; a second one ends the process at once.
fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// The qlog level runs use unless told otherwise.
const QLOG_DEFAULT: &str = "core";

fn qlog_level(s: &str) -> quic_app::QlogLevel {
    quic_app::QlogLevel::parse(s).unwrap_or_else(|| {
        bad_input(format!(
            "--qlog-level: `{s}` is not one of off, metrics, core (packets), base, extra"
        ))
    })
}

fn resolve_backend(spec: &harness::link::LinkSpec) -> Backend {
    match spec.backend {
        Backend::Emu => Backend::Emu,
        Backend::Sim => Backend::Sim,
        Backend::Netem => {
            if !netns::is_root() {
                bad_input("link.backend = netem needs root (network namespaces and tc); run as root, or use --link emu");
            }
            let caps = harness::netem::probe();
            let needs =
                harness::netem::needs_netem(&spec.up) || harness::netem::needs_netem(&spec.down);
            if needs && !caps.netem {
                bad_input(format!(
                    "{}\n  or run it on a kernel that has netem, in a throwaway guest: add --vm to this command (or: cclab vm -- cclab run ...)",
                    harness::netem::NetemError::MissingQdisc {
                        qdisc: "netem".into(),
                    }
                ));
            }
            Backend::Netem
        }
        Backend::Auto => {
            if netns::is_root()
                && harness::netem::probe().netem
                && spec.up.trace.is_none()
                && spec.down.trace.is_none()
                && harness::netem::unsupported_sched(spec).is_none()
            {
                Backend::Netem
            } else {
                Backend::Emu
            }
        }
    }
}

fn default_out(name: &str) -> PathBuf {
    let t = harness::run::now_rfc3339().replace([':', '-'], "");
    PathBuf::from("results").join(format!("{name}-{t}"))
}

fn build_scenario(a: &RunArgs) -> harness::scenario::Scenario {
    use harness::scenario::Scenario;
    let mut sc = match &a.scenario {
        Some(p) => Scenario::load(p).unwrap_or_else(|e| bad_input(e)),
        None => Scenario {
            name: "cli".into(),
            ..Scenario::default()
        },
    };
    let mut o: Vec<(String, toml::Value)> = Vec::new();
    let flags = [
        ("backend", &a.link.link),
        ("rate", &a.link.rate),
        ("rtt", &a.link.rtt),
        ("delay", &a.link.delay),
        ("jitter", &a.link.jitter),
        ("jitter_distribution", &a.link.jitter_distribution),
        ("loss", &a.link.loss),
        ("duplicate", &a.link.duplicate),
        ("reorder", &a.link.reorder),
        ("queue", &a.link.queue),
        ("aqm", &a.link.aqm),
        ("trace", &a.link.trace),
    ];
    for (k, v) in flags {
        if let Some(v) = v {
            o.push((format!("link.{k}"), toml::Value::String(v.clone())));
        }
    }
    for (dir, items) in [("up", &a.link.up), ("down", &a.link.down)] {
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
    if let Some(d) = &a.duration {
        o.push(("duration".into(), toml::Value::String(d.clone())));
    }
    if let Some(r) = a.repetitions {
        o.push(("repetitions".into(), toml::Value::Integer(r as i64)));
    }
    if let Some(s) = &a.link.seed {
        let s: i64 = s
            .trim()
            .parse()
            .ok()
            .filter(|v| *v >= 0)
            .unwrap_or_else(|| bad_input(format!("--seed: `{s}` is not a non-negative integer")));
        o.push(("seed".into(), toml::Value::Integer(s)));
        o.push(("link.seed".into(), toml::Value::Integer(s)));
    }
    if a.link.link_file.is_some() {
        bad_input("--link-file is for `cclab emu` and `cclab link show`; give `cclab run` a scenario file with a [link] table");
    }
    if !a.cc.is_empty() || a.flows.is_some() {
        let ccs = if a.cc.is_empty() {
            vec![sc.flows[0].cc.clone()]
        } else {
            a.cc.clone()
        };
        let count = a.flows.unwrap_or(1);
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
        sc = Scenario::parse(
            &toml::to_string(&t).unwrap_or_default(),
            "command line",
            std::path::Path::new("."),
        )
        .unwrap_or_else(|e| bad_input(e));
    }
    if !o.is_empty() {
        sc = sc
            .with_overrides(&o, "command line")
            .unwrap_or_else(|e| bad_input(e));
    }
    sc
}

fn print_summary(s: &harness::run::RunSummary) {
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
            "  {:<5} {:<28} {:>14} {:>10} {:>10} {:>8.0} {:>6}",
            f.index,
            f.cc,
            g,
            f.rtt_ms
                .as_ref()
                .map_or("-".into(), |r| format!("{:.1}", r.mean)),
            f.rtt_ms
                .as_ref()
                .map_or("-".into(), |r| format!("{:.1}", r.p95)),
            f.lost_packets,
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
}

fn run(a: RunArgs) -> anyhow::Result<i32> {
    if let Some(kind) = &a.vm {
        if std::env::var_os("CCLAB_IN_VM").is_none() {
            return rerun_in_vm(kind, a.quiet);
        }
    }
    let sc = build_scenario(&a);
    let backend = resolve_backend(&sc.link);
    let out = a.out.clone().unwrap_or_else(|| default_out(&sc.name));
    if let Ok(s) = std::fs::read_to_string(out.join("status.json")) {
        if s.contains("\"complete\"") {
            bad_input(format!(
                "--out: {} already holds a complete run",
                out.display()
            ));
        }
    }
    let stop = stop_flag()?;
    let cfg = harness::run::RunConfig {
        out: out.clone(),
        bin_dir: bin_dir(),
        backend,
        quiet: a.quiet,
        stop,
        threads: 0,
        qlog_level: qlog_level(&a.qlog_level),
        per_packet_log: !a.no_packet_log,
    };
    match harness::run::run(&sc, &cfg) {
        Ok(s) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else if !a.quiet {
                print_summary(&s);
                println!("  results: {}", out.display());
            }
            Ok(0)
        }
        Err(harness::run::RunError::Interrupted) => {
            eprintln!(
                "cclab: interrupted; partial results in {} (status: interrupted)",
                out.display()
            );
            Ok(130)
        }
        Err(e) => Err(e.into()),
    }
}

fn list(json: bool) -> anyhow::Result<i32> {
    let algs: Vec<_> = cc_algorithms::algorithms().collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&algs)?);
        return Ok(0);
    }
    for a in algs {
        println!("{:<10} {:?}  {}", a.name, a.origin, a.summary);
        for p in a.params {
            println!(
                "    {:<12} {:<10} default {:<10} range {}..{}  {}",
                p.name,
                p.unit,
                p.default.map_or("required".into(), |d| d.to_string()),
                p.min,
                p.max,
                p.help
            );
        }
    }
    Ok(0)
}

fn demo(out: Option<PathBuf>, duration: &str, json: bool, quiet: bool) -> anyhow::Result<i32> {
    use harness::scenario::Scenario;
    let dur = parse_duration_ns(duration)
        .filter(|&d| d >= 1_000_000_000)
        .unwrap_or_else(|| {
            bad_input(format!(
                "--duration: `{duration}` is not a time of at least 1s"
            ))
        });
    let out = out.unwrap_or_else(|| default_out("demo"));
    let stop = stop_flag()?;
    let link = harness::link::LinkSpec {
        backend: Backend::Emu,
        ..Default::default()
    };
    let mut rows = Vec::new();
    let algs: Vec<_> = cc_algorithms::algorithms().collect();
    let started = Instant::now();
    for (i, a) in algs.iter().enumerate() {
        // Required rates (br-tcp's reservation) get half the link.
        let spec = a.example_spec().replace("=40mbit", "=10mbit");
        if !quiet {
            eprint!("[{:>2}/{}] {:<28} ", i + 1, algs.len(), spec);
        }
        let sc = Scenario {
            name: a.name.replace('+', "plus"),
            duration_ns: dur,
            link: link.clone(),
            flows: vec![harness::scenario::FlowSpec::download(spec.clone())],
            ..Scenario::default()
        };
        let cfg = harness::run::RunConfig {
            out: out.join(&sc.name),
            bin_dir: bin_dir(),
            backend: Backend::Emu,
            quiet: true,
            stop: stop.clone(),
            threads: 0,
            qlog_level: quic_app::QlogLevel::Core,
            per_packet_log: false,
        };
        match harness::run::run(&sc, &cfg) {
            Ok(s) => {
                let f = &s.flows[0];
                if !quiet {
                    eprintln!(
                        "{:>6.2} Mbit/s  util {:>5.1}%  queue {:>5.1} ms  lost {:>5.0}",
                        f.goodput_bps / 1e6,
                        s.bottleneck.utilization * 100.0,
                        s.bottleneck.queue_delay_ms_mean,
                        f.lost_packets
                    );
                }
                rows.push(serde_json::json!({
                    "cc": spec,
                    "goodput_bps": f.goodput_bps,
                    "utilization": s.bottleneck.utilization,
                    "queue_delay_ms_mean": s.bottleneck.queue_delay_ms_mean,
                    "lost_packets": f.lost_packets,
                    "rtt_ms": f.rtt_ms,
                    "completed": f.completed == 1,
                    "results": cfg.out,
                }));
            }
            Err(harness::run::RunError::Interrupted) => {
                eprintln!("\ncclab: interrupted");
                return Ok(130);
            }
            Err(e) => {
                if !quiet {
                    eprintln!("failed: {e}");
                }
                rows.push(serde_json::json!({"cc": spec, "error": e.to_string()}));
            }
        }
    }
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("demo.json"), serde_json::to_vec_pretty(&rows)?)?;
    let report = out.join("report.html");
    let dirs: Vec<PathBuf> = algs
        .iter()
        .map(|a| out.join(a.name.replace('+', "plus")))
        .filter(|d| d.exists())
        .collect();
    let report_ok = harness::report::write(&dirs, &report)
        .map_err(|e| eprintln!("cclab: report: {e}"))
        .is_ok();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!(
            "\n{:<28} {:>10} {:>7} {:>9} {:>7} {:>8}",
            "algorithm", "Mbit/s", "util", "queue ms", "lost", "RTT ms"
        );
        for r in &rows {
            if let Some(e) = r.get("error") {
                println!("{:<28} failed: {}", r["cc"].as_str().unwrap_or(""), e);
                continue;
            }
            println!(
                "{:<28} {:>10.2} {:>6.1}% {:>9.1} {:>7.0} {:>8.1}",
                r["cc"].as_str().unwrap_or(""),
                r["goodput_bps"].as_f64().unwrap_or(0.0) / 1e6,
                r["utilization"].as_f64().unwrap_or(0.0) * 100.0,
                r["queue_delay_ms_mean"].as_f64().unwrap_or(0.0),
                r["lost_packets"].as_f64().unwrap_or(0.0),
                r["rtt_ms"]["mean"].as_f64().unwrap_or(0.0)
            );
        }
        println!(
            "\n{} algorithms in {:.0} s; results in {}",
            rows.len(),
            started.elapsed().as_secs_f64(),
            out.display()
        );
        if report_ok {
            println!("report: {}", report.display());
        }
    }
    Ok(0)
}

fn sweep(a: &SweepArgs) -> anyhow::Result<i32> {
    let sw = harness::sweep::Sweep::load(&a.file).unwrap_or_else(|e| bad_input(e));
    let shard = harness::sweep::parse_shard(&a.shard).unwrap_or_else(|| {
        bad_input(format!(
            "--shard: `{}` is not I/N with 0 <= I < N, e.g. 0/4",
            a.shard
        ))
    });
    let mut sw = sw;
    if let Some(b) = &a.link {
        sw.base.link.backend = Backend::parse(b).unwrap_or_else(|| {
            bad_input(format!("--link: `{b}` is not one of auto, emu, netem, sim"))
        });
    }
    let backend = resolve_backend(&sw.base.link);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = a
        .jobs
        .unwrap_or(if backend == Backend::Sim { cores } else { 1 });
    if jobs == 0 || jobs > 64 {
        bad_input(format!("--jobs: {jobs} is not from 1 to 64"));
    }
    let cfg = harness::run::RunConfig {
        out: a.out.clone(),
        bin_dir: bin_dir(),
        backend,
        quiet: a.quiet,
        stop: stop_flag()?,
        // Points already run in parallel: one simulation per job.
        threads: if jobs > 1 { 1 } else { 0 },
        qlog_level: qlog_level(&a.qlog_level),
        per_packet_log: !a.no_packet_log,
    };
    if !a.quiet {
        eprintln!(
            "cclab sweep: {} point(s) in the grid; shard {}/{}; {} job(s)",
            sw.len(),
            shard.0,
            shard.1,
            jobs
        );
    }
    let r = harness::sweep::run_sweep(&sw, &a.out, shard, jobs, &cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{}: {} point(s): {} already complete, {} completed now, {} failed{}",
            a.out.display(),
            r.points,
            r.skipped,
            r.completed,
            r.failed,
            if r.interrupted {
                "; interrupted (run again to finish)"
            } else {
                ""
            }
        );
    }
    Ok(if r.interrupted {
        130
    } else if r.failed > 0 {
        1
    } else {
        0
    })
}

fn papers_root(a: &ReproduceArgs) -> PathBuf {
    if let Some(d) = &a.papers_dir {
        return d.clone();
    }
    let here = PathBuf::from("scenarios/reproduce");
    if here.is_dir() {
        return here;
    }
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/reproduce"
    ))
}

fn reproduce(a: &ReproduceArgs) -> anyhow::Result<i32> {
    use harness::reproduce;
    let root = papers_root(a);
    let known = reproduce::papers(&root);
    if known.is_empty() {
        bad_input(format!(
            "no papers under {} (directories with a paper.toml); use --papers-dir",
            root.display()
        ));
    }
    let names: Vec<&str> = known.iter().map(|(n, _)| n.as_str()).collect();
    let mut chosen = Vec::new();
    for p in &a.papers {
        if p == "all" {
            chosen.extend(known.iter().cloned());
        } else if let Some(k) = known.iter().find(|(n, _)| n == p) {
            chosen.push(k.clone());
        } else {
            bad_input(format!(
                "reproduce: unknown paper `{p}`; known: {}, or all",
                names.join(", ")
            ));
        }
    }
    chosen.dedup();
    if a.list {
        for (name, dir) in &chosen {
            let m = reproduce::manifest::Manifest::load(dir).unwrap_or_else(|e| bad_input(e));
            println!(
                "{name}: {} ({} claims, {} experiments)",
                m.title,
                m.claims.len(),
                m.experiments.len()
            );
            for c in &m.claims {
                println!("  {:<28} {:<28} {}", c.id, c.source, c.statement);
            }
        }
        return Ok(0);
    }
    let backend = match a.link.as_str() {
        "sim" => Backend::Sim,
        "emu" => Backend::Emu,
        "netem" => Backend::Netem,
        other => bad_input(format!("--link: `{other}` is not one of sim, emu, netem")),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = a
        .jobs
        .unwrap_or(if backend == Backend::Sim { cores } else { 1 });
    if jobs == 0 || jobs > 64 {
        bad_input(format!("--jobs: {jobs} is not from 1 to 64"));
    }
    let opts = reproduce::Options {
        out: a.out.clone(),
        quick: a.quick,
        backend,
        jobs,
        quiet: a.quiet,
        stop: stop_flag()?,
        bin_dir: bin_dir(),
        qlog_level: match qlog_level(&a.qlog_level) {
            quic_app::QlogLevel::Off => bad_input(
                "--qlog-level: off would leave the cwnd and RTT claims unmeasured; use metrics or more",
            ),
            l => l,
        },
    };
    let mut results = Vec::new();
    let mut failed = false;
    for (name, dir) in &chosen {
        match reproduce::reproduce(dir, &opts) {
            Ok(r) => {
                if !a.json {
                    print!("{}", reproduce::terminal(&r));
                }
                failed |= !r.failed.is_empty();
                results.push(r);
            }
            Err(e) => {
                eprintln!("cclab reproduce {name}: {e}");
                failed = true;
            }
        }
        if opts.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "papers": results }))?
        );
    } else if results.len() > 1 {
        let mut line = String::from("time per paper:");
        for r in &results {
            line.push_str(&format!(" {} {:.0} s;", r.paper, r.wall_s));
        }
        let (p, f, n) = results.iter().fold((0, 0, 0), |acc, r| {
            let c = r.counts();
            (acc.0 + c.0, acc.1 + c.1, acc.2 + c.2)
        });
        println!("{line} total {p} PASS, {f} FAIL, {n} N/A");
    }
    Ok(if opts.stop.load(Ordering::Relaxed) {
        130
    } else if failed {
        1
    } else {
        0
    })
}

fn parse_shard(s: &str) -> Option<(usize, usize)> {
    let (i, n) = s.split_once('/')?;
    let (i, n) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
    (n > 0 && i < n).then_some((i, n))
}

fn fmt_eta(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let s = s.round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn show_progress(p: &Progress) {
    let value = if let Some(e) = &p.last.error {
        format!("refused ({})", e.lines().next().unwrap_or(""))
    } else {
        format!(
            "{}",
            harness::tune::output::brief(&p.last.metrics)
        )
    };
    let best: Vec<String> = p
        .best
        .iter()
        .map(|b| if b.is_finite() { format!("{b:.3}") } else { "-".into() })
        .collect();
    eprintln!(
        "[{}/{}] {} | {} seed {}: {} | best so far {} | ETA {}",
        p.done,
        p.total,
        p.last.key.condition.label(),
        p.last.key.spec,
        p.last.key.seed,
        value,
        best.join(", "),
        fmt_eta(p.eta_s)
    );
}

/// `cclab tune`.
fn tune(a: TuneArgs) -> anyhow::Result<i32> {
    let req = request::Request {
        algorithm: a.algorithm.clone(),
        base: a.base.clone(),
        params: a.params.clone(),
        objective: a.objective.clone(),
        conditions: a.conditions.clone(),
        rates: a.rates.clone(),
        rtts: a.rtts.clone(),
        scenario: a.scenario.clone(),
        queue: a.queue.clone(),
        aqm: a.aqm.clone(),
        link: a.link.clone(),
        duration: a.duration.clone(),
        optimizer: a.optimizer.clone(),
        swarm: a.swarm,
        iterations: a.iterations,
        seed: a.seed,
        seeds: a.seeds,
        validate: a.validate,
    };
    let (cfg, scenario) = request::plan(&req).unwrap_or_else(|e| bad_input(format!("tune: {e}")));
    let shard = a.shard.as_deref().map(|s| {
        parse_shard(s).unwrap_or_else(|| bad_input(format!("--shard: `{s}` is not I/N with 0 <= I < N")))
    });
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/tune-{}.toml", a.algorithm)));
    let work = a.work.clone().unwrap_or_else(|| harness::tune::default_work(&out));
    let backend = harness::link::Backend::parse(&cfg.backend).unwrap_or(harness::link::Backend::Sim);
    let run_cfg = harness::run::RunConfig {
        out: work.clone(),
        bin_dir: bin_dir(),
        backend,
        quiet: true,
        stop: stop_flag()?,
        threads: 0,
        qlog_level: quic_app::QlogLevel::Metrics,
        per_packet_log: true,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = a.jobs.unwrap_or(if backend == harness::link::Backend::Sim { cores } else { 1 });
    let quiet = a.quiet;
    if !quiet {
        eprintln!(
            "tune {}: {} parameter(s), {} condition(s), objective {}, {} x {} ({}), {} job(s); work directory {}",
            cfg.space.algorithm,
            cfg.space.dims(),
            cfg.conditions.len(),
            cfg.objective,
            cfg.optimizer.population,
            cfg.optimizer.iterations,
            cfg.optimizer.kind.name(),
            jobs,
            work.display()
        );
    }
    let shown = |p: &Progress| {
        if !quiet {
            show_progress(p)
        }
    };
    let exec = harness::tune::Exec {
        run: run_cfg,
        jobs,
        shard,
        keep_runs: a.keep_runs,
        progress: &shown,
    };
    match harness::tune::tune(&cfg, &scenario, &exec, &work, &out) {
        Ok(Outcome::Done(r)) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", harness::tune::output::summary_text(&r, &out, &work));
            }
            Ok(0)
        }
        Ok(Outcome::Sharded { ran, pending }) => {
            eprintln!(
                "cclab tune: shard {} ran {ran} of the pending batch's {pending} evaluations; run the command again without --shard (or the next wave) to advance",
                a.shard.as_deref().unwrap_or("")
            );
            Ok(0)
        }
        Err(TuneError::Run(harness::run::RunError::Interrupted)) => {
            eprintln!(
                "cclab tune: interrupted; the evaluations so far are kept in {}: run the same command again to resume",
                work.display()
            );
            Ok(130)
        }
        Err(TuneError::Input(e)) => bad_input(format!("tune: {e}")),
        Err(e) => Err(e.into()),
    }
}
