//! Programs run in the guest router for the host: a Linux TCP endpoint
//! whose algorithm only the guest's kernel has (vegas, westwood, ...).
//!
//! The host starts `cclab guest-exec --dir DIR --ns NS -- PROG ARGS` as
//! it would start `ip netns exec NS PROG ARGS`: a stand-in process whose
//! standard output and error are the guest program's, whose exit status
//! is its exit status, and which passes SIGTERM and SIGINT on. Between
//! the two, files in `DIR` (the guest's job directory, which the guest
//! mounts): the stand-in writes `ID.req` (the namespace and the command
//! line); the agent's spawner, polling the directory, starts the program
//! in that guest namespace and copies its output into `ID.out` and
//! `ID.err` (synced after every write, so the host sees it at once) and
//! its status into `ID.rc` once it ended; a stand-in told to stop writes
//! `ID.kill`, and the spawner sends the program SIGTERM. Paths in the
//! command line must be ones the guest can write (the directories it
//! mounts: the working directory, `/tmp`, `/var/tmp`, and the run's
//! output directory).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The spawner's directory under the guest's job directory.
pub const SPAWN_DIR: &str = "spawn";

/// How often both sides look at the directory.
const POLL: Duration = Duration::from_millis(10);

/// One program to start.
#[derive(Debug, Serialize, Deserialize)]
struct Spawn {
    /// The guest namespace.
    ns: String,
    /// Program and arguments.
    argv: Vec<String>,
}

/// The stand-in on the host: starts `argv` in guest namespace `ns`
/// through the spawner watching `dir`, relays its output, and returns its
/// exit status.
pub fn stand_in(dir: &Path, ns: &str, argv: &[String]) -> anyhow::Result<i32> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let id = format!("{}-{nanos:x}", std::process::id());
    let file = |ext: &str| dir.join(format!("{id}.{ext}"));
    let req = serde_json::to_vec(&Spawn {
        ns: ns.to_string(),
        argv: argv.to_vec(),
    })?;
    crate::files::write_synced_atomic(&file("req"), &req)?;
    let (mut out_at, mut err_at) = (0u64, 0u64);
    let t0 = Instant::now();
    let mut killed: Option<Instant> = None;
    let relay = |ext: &str, at: &mut u64, to: &mut dyn Write| -> std::io::Result<()> {
        let Ok(mut f) = std::fs::File::open(file(ext)) else {
            return Ok(());
        };
        f.seek(SeekFrom::Start(*at))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        if !buf.is_empty() {
            *at += buf.len() as u64;
            to.write_all(&buf)?;
            to.flush()?;
        }
        Ok(())
    };
    let code = loop {
        let rc = std::fs::read_to_string(file("rc")).ok();
        relay("out", &mut out_at, &mut std::io::stdout())?;
        relay("err", &mut err_at, &mut std::io::stderr())?;
        if let Some(rc) = rc {
            break rc.trim().parse().unwrap_or(1);
        }
        if stop.load(Ordering::Relaxed) && killed.is_none() {
            crate::files::write_synced_atomic(&file("kill"), b"TERM")?;
            killed = Some(Instant::now());
        }
        if killed.is_some_and(|k| k.elapsed() > Duration::from_secs(15)) {
            break 143;
        }
        if !file("out").exists() && t0.elapsed() > Duration::from_secs(30) {
            let _ = std::fs::remove_file(file("req"));
            anyhow::bail!(
                "the guest router did not start `{}` in {ns} within 30 s (is its agent running? {} is its spawn directory)",
                argv.join(" "),
                dir.display()
            );
        }
        std::thread::sleep(POLL);
    };
    for ext in ["req", "out", "err", "rc", "kill"] {
        let _ = std::fs::remove_file(file(ext));
    }
    Ok(code)
}

/// Copies `from` into `path`, syncing after every read, so the host sees
/// the output as it comes.
fn copy_synced(mut from: impl Read + Send + 'static, path: PathBuf) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(mut f) = std::fs::File::create(&path) else {
            return;
        };
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || f.write_all(&buf[..n]).is_err() {
                break;
            }
            let _ = f.sync_data();
        }
        let _ = f.sync_all();
    })
}

/// The spawner in the guest: watches `dir` until `stop`, starting each
/// request and stopping each one asked to stop.
pub fn spawner(dir: PathBuf, stop: Arc<AtomicBool>) {
    let _ = std::fs::create_dir_all(&dir);
    let mut seen: HashMap<String, i32> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            std::thread::sleep(POLL);
            continue;
        };
        let names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for name in &names {
            if let Some(id) = name.strip_suffix(".req") {
                if seen.contains_key(id) {
                    continue;
                }
                let pid = start(&dir, id).unwrap_or_else(|e| {
                    let _ = std::fs::write(dir.join(format!("{id}.err")), format!("{e:#}\n"));
                    let _ =
                        crate::files::write_synced_atomic(&dir.join(format!("{id}.rc")), b"127");
                    0
                });
                seen.insert(id.to_string(), pid);
            } else if let Some(id) = name.strip_suffix(".kill") {
                if let Some(pid) = seen.get_mut(id) {
                    if *pid > 0 {
                        // SAFETY: a signal to a child this spawner started.
                        unsafe { libc::kill(*pid, libc::SIGTERM) };
                        *pid = 0;
                    }
                }
            }
        }
        // Forget requests the host has removed.
        seen.retain(|id, _| names.iter().any(|n| n.starts_with(id.as_str())));
        std::thread::sleep(POLL);
    }
}

/// Starts request `id`: its program's pid.
fn start(dir: &Path, id: &str) -> anyhow::Result<i32> {
    let req: Spawn = serde_json::from_slice(&std::fs::read(dir.join(format!("{id}.req")))?)?;
    crate::netns::validate_name(&req.ns)?;
    let (prog, args) = req
        .argv
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("an empty command"))?;
    // `ip netns exec` becomes the program (it execs), so its pid is the
    // program's.
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &req.ns, prog])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let pid = child.id() as i32;
    let out = copy_synced(
        child.stdout.take().expect("piped"),
        dir.join(format!("{id}.out")),
    );
    let err = copy_synced(
        child.stderr.take().expect("piped"),
        dir.join(format!("{id}.err")),
    );
    let rc = dir.join(format!("{id}.rc"));
    std::thread::spawn(move || {
        let status = child.wait();
        let _ = out.join();
        let _ = err.join();
        let code = match status {
            Ok(s) => s.code().unwrap_or_else(|| {
                128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(0)
            }),
            Err(_) => 1,
        };
        let _ = crate::files::write_synced_atomic(&rc, code.to_string().as_bytes());
    });
    Ok(pid)
}
