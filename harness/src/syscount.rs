//! System calls of a process tree, counted by the kernel (`cclab run
//! --count-syscalls`): the endpoint's command runs under `cclab-syscount`,
//! which opens perf counters on the `raw_syscalls:sys_enter` tracepoint
//! (every system call) and on a few `syscalls:sys_enter_NAME` ones (where
//! they go), inherited by every thread and child the command makes and
//! enabled when it execs, so the counts cover the program from its exec to
//! its exit and nothing of the wrapper's own. The kernel counts in place:
//! unlike strace, nothing stops the process at each call.
//!
//! Needs the tracepoints (tracefs at `/sys/kernel/tracing`, mounted
//! there when root finds it unmounted, or under debugfs) and permission
//! to open them (root, or `perf_event_paranoid` at most 1 for one's own
//! processes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The wrapper's program name (in the run's `bin_dir`, beside the
/// endpoints).
pub const PROGRAM: &str = "cclab-syscount";

/// The calls counted by name besides the total: how a QUIC or TCP
/// endpoint moves packets, waits and arms timers.
pub const NAMED: &[&str] = &[
    "sendmsg",
    "sendmmsg",
    "sendto",
    "recvmsg",
    "recvmmsg",
    "recvfrom",
    "epoll_wait",
    "epoll_pwait",
    "io_uring_enter",
    "timerfd_settime",
    "futex",
    "read",
    "write",
    "ppoll",
];

/// One process tree's counts (`cclab-syscount`'s output file).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// The program counted.
    pub program: String,
    /// Every system call it and its threads and children entered.
    pub calls: u64,
    /// Of those, the ones in [`NAMED`] whose tracepoint this kernel has.
    pub by_name: BTreeMap<String, u64>,
}

/// Where the tracepoints' ids are. Where the kernel has tracefs but
/// nothing mounted it (a fresh machine's /sys/kernel/tracing is an empty
/// directory), mounts it there once, as root, as `mount -t tracefs nodev
/// /sys/kernel/tracing` would.
fn tracefs() -> Option<PathBuf> {
    let find = || {
        ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("events/raw_syscalls/sys_enter/id").exists())
    };
    if let Some(p) = find() {
        return Some(p);
    }
    static MOUNTED: std::sync::Once = std::sync::Once::new();
    MOUNTED.call_once(|| {
        let dir = Path::new("/sys/kernel/tracing");
        if crate::netns::is_root() && dir.is_dir() {
            // SAFETY: mount(2) with NUL-terminated strings that outlive
            // the call and no data.
            unsafe {
                libc::mount(
                    c"nodev".as_ptr(),
                    c"/sys/kernel/tracing".as_ptr(),
                    c"tracefs".as_ptr(),
                    0,
                    std::ptr::null(),
                );
            }
        }
    });
    find()
}

/// A tracepoint's id (`events/GROUP/NAME/id`).
fn tracepoint_id(fs: &Path, group: &str, name: &str) -> Option<u64> {
    std::fs::read_to_string(fs.join("events").join(group).join(name).join("id"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `struct perf_event_attr` as far as its first published size
/// (PERF_ATTR_SIZE_VER0, 64 bytes), which every kernel accepts.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_ENABLE_ON_EXEC: u64 = 1 << 12;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// A counter of one tracepoint on this process, disabled here, inherited
/// by the threads and children made after it, and enabled in each of
/// those when it execs.
struct Counter {
    fd: std::os::fd::OwnedFd,
}

impl Counter {
    fn open(id: u64) -> std::io::Result<Counter> {
        use std::os::fd::FromRawFd;
        let attr = PerfEventAttr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            flags: FLAG_DISABLED | FLAG_INHERIT | FLAG_ENABLE_ON_EXEC,
            ..Default::default()
        };
        // SAFETY: perf_event_open reads `attr` (which lives through the
        // call) and returns a new descriptor or -1; pid 0 and cpu -1 mean
        // this process on any CPU.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor perf_event_open just returned, owned here.
        Ok(Counter {
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    /// The count: this process's (none: it never execs) and its exited
    /// children's, which the kernel adds in when each exits.
    fn read(&self) -> std::io::Result<u64> {
        use std::io::Read;
        let mut f = std::fs::File::from(self.fd.try_clone()?);
        let mut b = [0u8; 8];
        f.read_exact(&mut b)?;
        Ok(u64::from_ne_bytes(b))
    }
}

/// The environment variable through which a caller hands the
/// tracepoints' ids to `cclab-syscount` (`raw=ID,NAME=ID,...`): inside a
/// namespace entered with `ip netns exec`, /sys is the namespace's own
/// and has no tracefs, while the ids are the kernel's, the same
/// everywhere.
pub const IDS_ENV: &str = "CCLAB_SYSCOUNT_IDS";

/// The tracepoints' ids: `raw` (every system call) first, then each of
/// [`NAMED`] this kernel has; from [`IDS_ENV`] when it is set, else from
/// tracefs.
pub fn ids() -> Result<Vec<(String, u64)>, String> {
    if let Ok(v) = std::env::var(IDS_ENV) {
        let mut out = Vec::new();
        for part in v.split(',').filter(|p| !p.is_empty()) {
            let (n, id) = part
                .split_once('=')
                .and_then(|(n, id)| Some((n, id.parse::<u64>().ok()?)))
                .ok_or_else(|| format!("{IDS_ENV}: `{part}` is not NAME=ID"))?;
            out.push((n.to_string(), id));
        }
        if out.first().map(|(n, _)| n.as_str()) != Some("raw") {
            return Err(format!("{IDS_ENV}: `{v}` does not start with raw=ID"));
        }
        return Ok(out);
    }
    let fs = tracefs().ok_or(
        "no tracefs with raw_syscalls:sys_enter (mount it: mount -t tracefs nodev /sys/kernel/tracing)",
    )?;
    let raw = tracepoint_id(&fs, "raw_syscalls", "sys_enter")
        .ok_or("raw_syscalls:sys_enter has no readable id")?;
    let mut out = vec![("raw".to_string(), raw)];
    for &n in NAMED {
        if let Some(id) = tracepoint_id(&fs, "syscalls", &format!("sys_enter_{n}")) {
            out.push((n.to_string(), id));
        }
    }
    Ok(out)
}

/// [`ids`] as [`IDS_ENV`] takes them.
pub fn ids_env() -> Result<String, String> {
    Ok(ids()?
        .iter()
        .map(|(n, id)| format!("{n}={id}"))
        .collect::<Vec<_>>()
        .join(","))
}

/// The counters for the total and each of [`NAMED`] this kernel has.
pub struct Counters {
    total: Counter,
    named: Vec<(String, Counter)>,
}

impl Counters {
    /// Opens them on this process (before it starts the command); an
    /// error saying what is missing where the kernel refuses.
    pub fn open() -> Result<Counters, String> {
        let ids = ids()?;
        let total = Counter::open(ids[0].1).map_err(|e| {
            format!("perf_event_open(raw_syscalls:sys_enter): {e} (needs root, or kernel.perf_event_paranoid at most 1)")
        })?;
        let mut named = Vec::new();
        for (n, id) in &ids[1..] {
            if let Ok(c) = Counter::open(*id) {
                named.push((n.clone(), c));
            }
        }
        Ok(Counters { total, named })
    }

    /// The counts once the command (and all it started) has exited.
    pub fn read(&self, program: &str) -> std::io::Result<Counts> {
        let mut by_name = BTreeMap::new();
        for (n, c) in &self.named {
            by_name.insert(n.to_string(), c.read()?);
        }
        Ok(Counts {
            program: program.to_string(),
            calls: self.total.read()?,
            by_name,
        })
    }
}

/// Reads every `*.json` count in `dir`: the files and their counts, in
/// name order; an error naming a file that is not one.
pub fn read_dir(dir: &Path) -> std::io::Result<Vec<(String, Counts)>> {
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    for n in names {
        let text = std::fs::read_to_string(dir.join(&n))?;
        let c: Counts = serde_json::from_str(&text).map_err(|e| {
            std::io::Error::other(format!(
                "{}: not a system call count: {e}",
                dir.join(&n).display()
            ))
        })?;
        out.push((n, c));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command whose calls are known: `sh -c` that writes N lines by
    /// itself (one `write` each, the shell's builtin echo) counts at least
    /// N writes and more calls in all than a bare `true`; the wrapper's
    /// own calls are not counted. Runs where the kernel lets this process
    /// open the counters; says so and returns where it does not.
    #[test]
    fn counts_a_child_from_exec_to_exit_and_not_the_wrapper() {
        let count = |script: &str| -> Option<Counts> {
            let c = match Counters::open() {
                Ok(c) => c,
                Err(e) => {
                    assert!(
                        std::env::var_os("CI").is_none(),
                        "system call counters cannot be opened under CI: {e}"
                    );
                    eprintln!("SKIPPED: system call counters: {e}");
                    return None;
                }
            };
            let st = std::process::Command::new("sh")
                .args(["-c", script])
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(st.success());
            Some(c.read("sh").unwrap())
        };
        let Some(bare) = count("true") else { return };
        let lines = count("for i in $(seq 2000); do echo $i; done").unwrap();
        assert!(bare.calls > 0, "{bare:?}");
        let writes = lines.by_name.get("write").copied().unwrap_or(0);
        assert!(writes >= 2000, "{lines:?}");
        assert!(lines.calls > bare.calls + 2000, "{bare:?} {lines:?}");
        // Nothing of this process's: reading and spawning here made
        // calls, and a counter of this process would have counted them
        // before the child ran.
        let again = count("true").unwrap();
        assert!(again.calls < bare.calls + 50, "{bare:?} {again:?}");
    }
}
