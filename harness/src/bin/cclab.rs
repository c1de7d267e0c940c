//! `cclab`: the bench harness's command line.
//!
//! Implemented so far: the link backends (`emu`, `link probe`, `link show`)
//! and `cleanup`. Scenario runs, sweeps and reports are not implemented yet.

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
    /// Run the userspace link emulator as a UDP relay until Ctrl-C (or
    /// --duration): clients send to --listen, the emulator forwards to
    /// --target and back, through the emulated bottleneck.
    Emu(Box<EmuArgs>),
    /// Inspect link descriptions and the kernel's link support.
    Link {
        #[command(subcommand)]
        cmd: LinkCmd,
    },
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
    /// Which qdiscs the kernel has (netem, tbf, htb, red, codel): root only.
    Probe {
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
    let code = match cli.cmd {
        Cmd::Emu(a) => emu(*a),
        Cmd::Link { cmd } => link(cmd),
        Cmd::Cleanup { all, json } => cleanup(all, json),
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("cclab: {e:#}");
            std::process::exit(1);
        }
    }
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
