//! Helpers shared by the integration tests (each test crate uses some).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::Backend;
use harness::run::RunConfig;

/// A simulator run into `out` with the per-packet log, repetitions on every
/// core, and qlog at `qlog_level`.
pub fn sim_config(out: &Path, qlog_level: quic_app::QlogLevel) -> RunConfig {
    RunConfig {
        out: out.to_path_buf(),
        bin_dir: PathBuf::from("/nonexistent"),
        backend: Backend::Sim,
        quiet: true,
        stop: Arc::new(AtomicBool::new(false)),
        per_packet_log: true,
        threads: 0,
        qlog_level,
        emu_mode: harness::emu::EmuMode::Relay,
        netem_router: None,
        count_syscalls: false,
    }
}

/// Every file of a run, relative path to bytes, except those that hold
/// wall-clock facts by design (metadata.json, status.json: start times;
/// sim.json: wall time of the simulation).
pub fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if ["metadata.json", "status.json", "sim.json"].contains(&name.as_str()) {
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            out.push((rel, std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

/// The workspace's `cclab`, once the binaries it starts for emu and netem
/// runs are known to be built beside it.
pub fn cclab() -> Command {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_cclab"));
    let dir = exe.parent().unwrap().to_path_buf();
    for b in ["quic-server", "quic-client"] {
        assert!(
            dir.join(b).exists(),
            "{b} is not built in {}; run the tests with `cargo test --workspace` (or build it first)",
            dir.display()
        );
    }
    Command::new(exe)
}

/// `cclab run ARGS --quiet --out OUT`, which must succeed; its summary.json.
pub fn cclab_run(args: &[&str], out: &Path) -> serde_json::Value {
    let o = cclab()
        .arg("run")
        .args(args)
        .args(["--quiet", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cclab run {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// `cclab ARGS` (a command given `--json`), which must succeed; what it
/// printed, as JSON.
pub fn cclab_json(args: &[&str]) -> serde_json::Value {
    let o = cclab().args(args).output().unwrap();
    assert!(
        o.status.success(),
        "cclab {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "cclab {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// Waits until the `cclab run` in `child` (writing to `out`) has started
/// its first client and run for half a second, calls `while_running`
/// with its pid, then sends it SIGINT (Ctrl-C); its output.
#[allow(dead_code)]
pub fn interrupt_once_running(
    child: std::process::Child,
    out: &Path,
    while_running: impl FnOnce(i32),
) -> std::process::Output {
    use std::time::{Duration, Instant};
    let pid = child.id() as i32;
    let t = Instant::now();
    while !out
        .with_extension("partial")
        .join("rep-1/flow-0/client.stderr")
        .exists()
    {
        // Generous: a run on the guest router boots a guest first, and
        // a loaded host takes a while to.
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    while_running(pid);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    child.wait_with_output().unwrap()
}

/// Sends `n` datagrams of 1000 bytes from `s` to `to` at once, each with
/// `tos` in its IP header (`IP_TOS`).
#[allow(dead_code)]
pub fn send_burst(s: &std::net::UdpSocket, to: std::net::SocketAddr, n: usize, tos: u8, tag: u8) {
    use std::os::fd::AsRawFd;
    let v: libc::c_int = tos.into();
    // SAFETY: setsockopt with an int option on a valid fd.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    for _ in 0..n {
        s.send_to(&[tag; 1000], to).unwrap();
    }
}

/// Reads datagrams from `s` until it stays quiet for 300 ms: each one's
/// first byte and TOS byte (`IP_RECVTOS`).
#[allow(dead_code)]
pub fn recv_with_tos(s: &std::net::UdpSocket) -> Vec<(u8, u8)> {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with an int option on a valid fd.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_RECVTOS,
            &on as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    s.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let mut got = Vec::new();
    loop {
        let mut buf = [0u8; 2048];
        let mut control = [0u64; 8];
        // SAFETY: recvmsg into buffers we own, of the lengths given.
        let (n, tos) = unsafe {
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            };
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&control);
            let n = libc::recvmsg(s.as_raw_fd(), &mut msg, 0);
            let mut tos = None;
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while n > 0 && !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                    tos = Some(*libc::CMSG_DATA(c));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
            (n, tos)
        };
        if n <= 0 {
            return got;
        }
        got.push((buf[0], tos.expect("the kernel passes IP_TOS")));
    }
}

/// The emulator's IP mode can run here (root, `/dev/net/tun`, `ip`), or
/// a skip (a failure under CI) naming what is missing.
#[allow(dead_code)]
pub fn ip_mode() -> bool {
    match harness::emu::tun::check() {
        Ok(()) => true,
        Err(e) => {
            test_support::skip(&e.to_string());
            false
        }
    }
}
