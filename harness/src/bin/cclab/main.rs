//! `cclab`: the bench harness's command line.
//!
//! `run` runs a scenario, `demo` every algorithm on the default link,
//! `list` describes the algorithms, `emu` runs the link emulator alone,
//! `link` inspects link descriptions and the kernel, `cleanup` removes
//! leftovers of killed runs.
//!
//! This file parses the command line and hands it on: each subcommand has
//! a module of its own name, holding its arguments and the function that
//! runs it over the `harness` library; `common` holds what they share.

mod cleanup;
mod common;
mod demo;
mod emu;
mod harm;
mod link;
mod list;
mod merge;
mod report;
mod reproduce;
mod run;
mod study;
mod sweep;
mod tune;
mod vm;

use clap::{Parser, Subcommand};

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
    Run(Box<run::RunArgs>),
    /// The main job: every registered algorithm alone on the default link
    /// (20 Mbit/s, 40 ms RTT, 1 BDP drop-tail) on the userspace emulator.
    Demo(demo::DemoArgs),
    /// Run a grid of scenarios (resumable; --shard I/N splits it across machines).
    Sweep(sweep::SweepArgs),
    /// Tune any algorithm's parameters for an objective, per network
    /// condition, on the virtual-time link: writes a table the algorithm
    /// loads (`ALG:table=FILE`); presets algorithms define (`cclab list`) too.
    Tune(Box<tune::TuneArgs>),
    /// Re-run a seed paper's evaluation and check its claims: PASS, FAIL
    /// (with the measured figures and the likely reason) or N/A.
    Reproduce(reproduce::ReproduceArgs),
    /// Run a study file (studies/*.toml): experiments over any axis
    /// (backend, algorithm, link), goals judged between arms, tables and
    /// an HTML page; --cc, --link, --axis and --set change it.
    Study(Box<study::StudyArgs>),
    /// Harm (Ware et al., HotNets 2019): a reference algorithm against its
    /// own kind and against a candidate, per queue limit: how much of its
    /// throughput, delay and loss the candidate costs it.
    Harm(Box<harm::HarmArgs>),
    /// Join sweep or shard directories into one.
    Merge(merge::MergeArgs),
    /// One self-contained HTML report (or Markdown, for .md) from result directories.
    Report(report::ReportArgs),
    /// The algorithms, their parameters, units and defaults.
    List(list::ListArgs),
    /// Run the userspace link emulator as a UDP relay until Ctrl-C (or
    /// --duration): clients send to --listen, the emulator forwards to
    /// --target and back, through the emulated bottleneck.
    Emu(Box<emu::EmuArgs>),
    /// Inspect link descriptions and the kernel's link support.
    Link {
        #[command(subcommand)]
        cmd: link::LinkCmd,
    },
    /// Run a command as root in a throwaway Linux guest whose kernel has
    /// netem, red, codel, fq_codel and pie (user-mode Linux by default, or
    /// QEMU): the host's files read-only, the working directory writable.
    /// Exit status, standard output and error are the command's.
    Vm(vm::VmArgs),
    /// Remove namespaces (with their veths, qdiscs and processes) left by
    /// runs that were killed.
    Cleanup(cleanup::CleanupArgs),
    /// On the host: run a program in a namespace of the guest router and
    /// stand in for it (its output, its exit status).
    #[command(hide = true)]
    GuestExec {
        /// The guest router's spawn directory.
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The guest namespace.
        #[arg(long)]
        ns: String,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Inside the guest router: answer the host's requests on a console.
    #[command(hide = true)]
    GuestAgent {
        /// The console the host is connected to.
        #[arg(long)]
        tty: std::path::PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    // Plain or zstd qlog files (CCLAB_QLOG_COMPRESS): the simulator reads
    // it here, the endpoint processes inherit it.
    if let Err(e) = quic_app::qlog_file::choose(None) {
        common::bad_input(e);
    }
    let code = match cli.cmd {
        Cmd::Run(a) => run::run(*a),
        Cmd::Demo(a) => demo::demo(a),
        Cmd::Sweep(a) => sweep::sweep(&a),
        Cmd::Tune(a) => tune::tune(*a),
        Cmd::Reproduce(a) => reproduce::reproduce(&a),
        Cmd::Study(a) => study::study(&a),
        Cmd::Harm(a) => harm::harm(&a),
        Cmd::Merge(a) => merge::merge(&a),
        Cmd::Report(a) => report::report(&a),
        Cmd::List(a) => list::list(&a),
        Cmd::Emu(a) => emu::emu(*a),
        Cmd::Link { cmd } => link::link(cmd),
        Cmd::Vm(a) => vm::vm(a),
        Cmd::Cleanup(a) => cleanup::cleanup(&a),
        Cmd::GuestAgent { tty } => harness::guest_router::agent(&tty).map(|()| 0),
        Cmd::GuestExec { dir, ns, cmd } => harness::guest_exec::stand_in(&dir, &ns, &cmd),
    };
    // A guest router booted for netem links ends with the command.
    harness::guest_router::shutdown();
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("cclab: {e:#}");
            std::process::exit(1);
        }
    }
}
