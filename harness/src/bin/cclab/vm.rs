//! `cclab vm`: a command run as root in a throwaway guest by
//! [`harness::vm::run`]; also how `cclab run --vm` re-runs itself there.

use std::path::PathBuf;

use harness::vm::{VmKind, VmOptions};

use crate::common::{bad_input, signal_flag};

#[derive(clap::Args)]
pub struct VmArgs {
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

/// `cclab vm`.
pub fn vm(a: VmArgs) -> anyhow::Result<i32> {
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
    run_in_guest(&a.cmd, &o)
}

/// Runs this same `cclab` command line, minus `--vm[=KIND]`, in a guest.
pub fn rerun_in_vm(kind: &str, quiet: bool) -> anyhow::Result<i32> {
    let o = vm_options(kind, quiet);
    if o.kind == VmKind::Uml && harness::vm::uml_needs_legacy_fp() {
        bad_input(UML_CANNOT_RUN_CCLAB);
    }
    let mut cmd = vec![std::env::current_exe()?.to_string_lossy().into_owned()];
    cmd.extend(
        std::env::args()
            .skip(1)
            .filter(|a| a != "--vm" && !a.starts_with("--vm=")),
    );
    run_in_guest(&cmd, &o)
}

/// Why `--vm` refuses on a CPU whose extended state the user-mode guest
/// cannot switch (see `harness::vm::uml_needs_legacy_fp`).
pub const UML_CANNOT_RUN_CCLAB: &str = "--vm: on this CPU the user-mode Linux guest cannot run cclab itself: the CPU has more extended register state (AMX) than the guest kernel (Debian's 6.1) can switch, so the guest's processes run with only their x87/SSE registers kept, and cclab's run, whose code picks AVX at run time, misreads even its own arguments there. Run netem links through the guest router instead: the same command without --vm (the endpoints on this host, the qdiscs in the guest); or --vm=qemu (software emulation, slow). docs/links.md says more";

/// The guest's options from `--kind` (or `--vm=KIND`) and `--quiet`.
fn vm_options(kind: &str, quiet: bool) -> VmOptions {
    VmOptions {
        kind: VmKind::parse(kind)
            .unwrap_or_else(|| bad_input(format!("--kind: `{kind}` is not one of uml, qemu"))),
        verbose: !quiet,
        ..Default::default()
    }
}

/// Runs `cmd` in the guest until it ends or Ctrl-C: its exit status.
fn run_in_guest(cmd: &[String], o: &VmOptions) -> anyhow::Result<i32> {
    let stop = signal_flag(&[signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])?;
    Ok(harness::vm::run(cmd, o, stop)?)
}
