//! `cclab emu`: the link from the flags, run by a
//! [`harness::emu::Emulator`] as a UDP relay (optionally in a router
//! namespace) until Ctrl-C or --duration; then its report.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use harness::cli::LinkArgs;
use harness::emu::{EmuConfig, Emulator, Forward};
use harness::link::units::parse_duration_ns;
use harness::link::{Backend, LinkSpec};
use harness::netns::{self, Namespaces};

use crate::common::{bad_input, signal_flag};

#[derive(clap::Args)]
pub struct EmuArgs {
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

/// `cclab emu`.
pub fn emu(a: EmuArgs) -> anyhow::Result<i32> {
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
    let stop = signal_flag(&[
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])?;
    let topology = if a.netns {
        Some(Namespaces::create(false)?)
    } else {
        None
    };
    let emu = start(&a, spec, topology.as_ref())?;
    relay(&a, &emu, topology.as_ref(), &stop, duration);
    let report = emu.stop()?;
    drop(topology);
    if a.json {
        crate::common::print_json(&report)?;
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

/// Starts the emulator: --listen (or its default) forwards to --target,
/// in the router namespace if there is one.
fn start(a: &EmuArgs, spec: LinkSpec, topology: Option<&Namespaces>) -> anyhow::Result<Emulator> {
    let listen = a.listen.unwrap_or_else(|| {
        if a.netns {
            SocketAddr::new(netns::ROUTER_CLIENT_IP.into(), 4433)
        } else {
            "127.0.0.1:4433".parse().unwrap()
        }
    });
    let mut cfg = EmuConfig::new(
        spec,
        vec![Forward {
            listen,
            target: a.target,
        }],
    );
    cfg.log_dir = a.log_dir.clone();
    cfg.wake_gap =
        harness::emu::wake_gap_from_env().unwrap_or_else(|e| crate::common::bad_input(e));
    cfg.priority =
        harness::emu::Priority::from_env().unwrap_or_else(|e| crate::common::bad_input(e));
    cfg.netns = topology.map(|t| t.router.clone());
    Ok(Emulator::start(cfg)?)
}

/// Says where the relay is, then lets it run until `stop` or `duration`,
/// with a status line each second (unless --quiet).
fn relay(
    a: &EmuArgs,
    emu: &Emulator,
    topology: Option<&Namespaces>,
    stop: &AtomicBool,
    duration: Option<Duration>,
) {
    if !a.quiet {
        eprintln!(
            "cclab emu: listening on {}, forwarding to {}",
            emu.listen_addrs()[0],
            a.target
        );
        if let Some(t) = topology {
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
}
