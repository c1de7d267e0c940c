//! `cclab-syscount OUT.json -- PROGRAM [ARGS...]`: runs PROGRAM and writes
//! how many system calls it, its threads and its children made, from its
//! exec to its exit (`harness::syscount`). The endpoints of a run under
//! `cclab run --count-syscalls` start through it.
//!
//! It stands in for the program as far as its caller can tell: the same
//! stdin, stdout and stderr; SIGTERM, SIGINT, SIGHUP and SIGQUIT passed on
//! to it; its exit status returned (a signal that ended it, raised
//! again). If the wrapper is killed, the kernel kills the program too
//! (PR_SET_PDEATHSIG), so nothing is left running; then no count is
//! written, and the run says which one is missing.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; pid is our child's.
        unsafe { libc::kill(pid, sig) };
    }
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("cclab-syscount: error: {msg}");
    std::process::exit(125);
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let (out, cmd) = match args.iter().position(|a| a == "--") {
        Some(1) if args.len() > 2 => (PathBuf::from(&args[0]), &args[2..]),
        _ => fail("usage: cclab-syscount OUT.json -- PROGRAM [ARGS...]"),
    };
    let program = cmd[0].to_string_lossy().into_owned();
    let counters = harness::syscount::Counters::open().unwrap_or_else(|e| fail(e));
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: installs a handler that only calls kill(2).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let mut c = std::process::Command::new(&cmd[0]);
    c.args(&cmd[1..]);
    // SAFETY: prctl is async-signal-safe; the child dies with the wrapper.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| fail(format!("{program}: {e}")));
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    let status = child
        .wait()
        .unwrap_or_else(|e| fail(format!("waiting for {program}: {e}")));
    let counts = counters
        .read(&program)
        .unwrap_or_else(|e| fail(format!("reading the counters: {e}")));
    let text = serde_json::to_string_pretty(&counts).expect("counts serialize");
    let tmp = out.with_extension("json.partial");
    if let Err(e) = std::fs::write(&tmp, text + "\n").and_then(|_| std::fs::rename(&tmp, &out)) {
        fail(format!("{}: {e}", out.display()));
    }
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    if let Some(sig) = status.signal() {
        // SAFETY: back to the default action, then the same signal.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    std::process::exit(1);
}
