//! A throwaway Linux guest for running commands on a kernel that has what
//! this host's lacks (netem, red, codel, fq_codel, pie): `cclab vm -- CMD`.
//! Its 6.1 kernel has no `sch_dualpi2` (Linux 6.17): DualPI2 runs on emu
//! and sim only.
//!
//! Two kinds of guest:
//!
//! - **uml** (default): User-mode Linux, Debian's `user-mode-linux` package
//!   (a 6.1 kernel built as a host program, with its modules). It needs no
//!   KVM, boots in about a second, and runs guest programs on the host CPU
//!   at native speed (system calls are slower: each one traps into the UML
//!   kernel). One virtual CPU.
//! - **qemu**: a stock Debian kernel (`linux-image-*-amd64`, fetched with
//!   `apt-get download`, unpacked into a cache, never installed) booted by
//!   virtme-ng under QEMU, with KVM where the host's KVM can boot it, else
//!   software emulation (TCG: every instruction emulated, about 30 s to boot
//!   and slow for CPU-heavy work such as QUIC's cryptography).
//!
//! `CCLAB_VM_KERNEL` in the environment names another guest kernel (a
//! `linux.uml` for uml, a vmlinuz for qemu).
//!
//! Either way the guest sees the host's root filesystem read-only, with a
//! fresh in-memory `/run` (programs' own temporary files go there too:
//! `TMPDIR=/run/tmp`), and the host's `/tmp` and `/var/tmp`, the working
//! directory (the project checkout) and any `--rw DIR` writable, so whatever
//! the command writes lands on the host: a result directory such as
//! `--out /tmp/x` is on the host when the guest has gone, and a path the
//! guest cannot write fails with "Read-only file system" rather than
//! vanishing with the guest. `cclab run --vm` refuses, before booting, an
//! `--out` the guest could not write ([`guest_can_write`]). The command runs as root in the guest with the
//! host's environment; its standard output and error come back on separate
//! channels, and its exit status becomes `cclab vm`'s. The guest kernel's
//! own console goes to `console.log` in the job directory, printed when
//! the guest fails before the command ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmKind {
    /// User-mode Linux.
    Uml,
    /// QEMU through virtme-ng.
    Qemu,
}

impl VmKind {
    /// `uml` or `qemu`.
    pub fn name(self) -> &'static str {
        match self {
            VmKind::Uml => "uml",
            VmKind::Qemu => "qemu",
        }
    }

    /// Parses `uml` or `qemu`.
    pub fn parse(s: &str) -> Option<VmKind> {
        match s {
            "uml" => Some(VmKind::Uml),
            "qemu" => Some(VmKind::Qemu),
            _ => None,
        }
    }
}

/// How to run the guest.
#[derive(Clone, Debug)]
pub struct VmOptions {
    /// Which guest.
    pub kind: VmKind,
    /// Guest memory, MiB.
    pub memory_mb: u32,
    /// Virtual CPUs (qemu only; UML has one).
    pub cpus: u32,
    /// Directories the guest may write (the working directory is added).
    pub writable: Vec<PathBuf>,
    /// Install missing host packages (root only).
    pub install: bool,
    /// Print what is being prepared (kind, KVM or not, boot time).
    pub verbose: bool,
    /// Give up after this long (the guest is stopped; exit status 124).
    pub timeout: Option<Duration>,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            kind: VmKind::Uml,
            memory_mb: 2048,
            cpus: 2,
            writable: Vec::new(),
            install: true,
            verbose: true,
            timeout: None,
        }
    }
}

/// Why the guest cannot run.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// A host program or package is missing and could not be installed.
    #[error("cannot start a {kind} guest: {what} is missing ({how})")]
    Missing {
        /// uml or qemu.
        kind: &'static str,
        /// What is missing.
        what: String,
        /// How to get it.
        how: String,
    },
    /// The guest started but the command's exit status never came back.
    #[error("the {kind} guest stopped before the command finished; its console said:\n{console}")]
    GuestFailed {
        /// uml or qemu.
        kind: &'static str,
        /// The last lines of the guest kernel's console.
        console: String,
    },
    /// Host I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Kernel modules loaded before the command runs (the rest load on demand).
const MODULES: &[&str] = &[
    "veth",
    "sch_netem",
    "sch_tbf",
    "sch_htb",
    "sch_red",
    "sch_codel",
    "sch_fq_codel",
    "sch_pie",
    "sch_fq",
];

/// Prefix of job directories (under the host's temporary directory).
pub const JOB_PREFIX: &str = "cclab-vm-";

/// A job directory, removed on drop.
pub(crate) struct Job {
    pub(crate) dir: PathBuf,
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes job directories of `cclab vm` processes that no longer exist
/// (a guest killed with SIGKILL leaves its job directory behind).
pub fn remove_stale_jobs(tmp: &Path) {
    let Ok(rd) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(JOB_PREFIX) else {
            continue;
        };
        let pid: Option<i32> = rest.split('-').next().and_then(|p| p.parse().ok());
        if let Some(pid) = pid {
            // SAFETY: signal 0 only checks that the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            if !alive {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

pub(crate) fn new_job() -> std::io::Result<Job> {
    let tmp = std::env::temp_dir();
    remove_stale_jobs(&tmp);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = tmp.join(format!("{JOB_PREFIX}{}-{nanos:x}", std::process::id()));
    std::fs::create_dir(&dir)?;
    Ok(Job { dir })
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn which(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        return Path::new(prog).exists().then(|| PathBuf::from(prog));
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(["/usr/bin".into(), "/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Installs Debian packages with apt-get (root), quietly.
fn apt_install(pkgs: &[&str], verbose: bool) -> bool {
    if !is_root() {
        return false;
    }
    if verbose {
        eprintln!(
            "cclab vm: installing host packages (first use): {}",
            pkgs.join(" ")
        );
    }
    let ok = |c: &mut Command| {
        c.env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    ok(Command::new("apt-get")
        .args(["install", "-y", "-q"])
        .args(pkgs))
        || (ok(Command::new("apt-get").args(["update", "-q"]))
            && ok(Command::new("apt-get")
                .args(["install", "-y", "-q"])
                .args(pkgs)))
}

/// Programs' own temporary files (TMPDIR: tempfile, mktemp, a server's
/// certificate) stay in the guest, in memory: only paths the user names
/// under /tmp reach the host's. Guest processes have their own process ids,
/// so a host program that tidies up /tmp by pid (quic-server's stale
/// certificates) would take a guest's files for a dead process's, and the
/// other way round.
const GUEST_TMPDIR: &str = "mkdir -p /run/tmp && chmod 1777 /run/tmp && export TMPDIR=/run/tmp\n";

/// The host directories every guest may write besides the working
/// directory and `--rw` ones: the host's own temporary directories.
pub const SHARED_TMP: &[&str] = &["/tmp", "/var/tmp"];

/// Whether a command in the guest can write `path` (absolute, or relative
/// to `cwd`): it lies under `cwd`, under one of `writable`, or under the
/// shared temporary directories. Lexical: `..` is resolved, symbolic links
/// are not followed.
pub fn guest_can_write(path: &Path, cwd: &Path, writable: &[PathBuf]) -> bool {
    let abs = normalize(&cwd.join(path));
    let under = |d: &Path| abs.starts_with(normalize(d));
    under(cwd)
        || writable.iter().any(|w| under(w))
        || SHARED_TMP.iter().any(|t| under(Path::new(t)))
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Finds `prog`, installing `pkg` first if allowed.
fn need(kind: &'static str, prog: &str, pkg: &str, opts: &VmOptions) -> Result<PathBuf, VmError> {
    if let Some(p) = which(prog) {
        return Ok(p);
    }
    if opts.install && apt_install(&[pkg], opts.verbose) {
        if let Some(p) = which(prog) {
            return Ok(p);
        }
    }
    Err(VmError::Missing {
        kind,
        what: format!("`{prog}`"),
        how: format!("apt-get install {pkg}, as root"),
    })
}

/// The guest's init script: mounts, writable directories, modules, then
/// the command with its output on the two channels and its status written
/// to the job directory; powers the guest off.
fn init_script(
    job: &Path,
    modules_root: Option<(&Path, &Path)>,
    cwd: &Path,
    writable: &[PathBuf],
    cmd: &[String],
) -> String {
    let q = |p: &Path| shell_quote(&p.to_string_lossy());
    // Where the guest kernel switches only the x87/SSE registers
    // (`NO_XSTATE_FILTER`), glibc's AVX string functions, interrupted by a
    // page fault, come back with their vector registers' upper halves
    // lost: keep glibc to SSE in every guest process, from the first (the
    // kernel's own modprobe calls included).
    let no_avx = if uml_needs_legacy_fp() {
        format!("export GLIBC_TUNABLES={GUEST_NO_AVX}\n")
    } else {
        String::new()
    };
    let mut s = String::from("#!/bin/sh\n# Written by cclab vm: the guest's first process.\n");
    s += &no_avx;
    s += "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
    s += "mount -t proc proc /proc\nmount -t sysfs sysfs /sys\n";
    s += "mount -t tmpfs -o mode=755 run /run\nmkdir -p /run/job /run/netns\n";
    s += &format!("mount -t hostfs -o {} none /run/job\n", q(job));
    // The host's temporary directories, not the guest's own: a result
    // written under /tmp must outlive the guest.
    for t in SHARED_TMP {
        s += &format!("[ -d {t} ] && mount -t hostfs -o {t} none {t}\n");
    }
    for w in writable {
        s += &format!(
            "mkdir -p {0} 2>/dev/null; mount -t hostfs -o {0} none {0}\n",
            q(w)
        );
    }
    if let Some((root, modprobe)) = modules_root {
        // The guest kernel looks for modules under /lib/modules, which the
        // read-only host root does not have: point modprobe (ours and the
        // kernel's on-demand calls) at the package's tree.
        s += "mkdir -p /run/mod/lib\n";
        s += &format!("ln -s {} /run/mod/lib/modules\n", q(root));
        // (The tunable's text has no `%`, `'` or `\\`: it goes into the
        // printf format as it is.)
        s += &format!(
            "printf '#!/bin/sh\\n{}exec %s -d /run/mod \"$@\"\\n' {} > /run/modprobe\n",
            no_avx.replace('\n', "\\n"),
            q(modprobe)
        );
        s += "chmod +x /run/modprobe\necho /run/modprobe > /proc/sys/kernel/modprobe\n";
        s += &format!(
            "for m in {}; do /run/modprobe -q $m; done\n",
            MODULES.join(" ")
        );
    } else {
        s += &format!("for m in {}; do modprobe -q $m; done\n", MODULES.join(" "));
    }
    s += "ip link set lo up\n";
    for (k, v) in std::env::vars() {
        let skip = ["PWD", "OLDPWD", "SHLVL", "_", "PATH", "TMPDIR"];
        if skip.contains(&k.as_str())
            || k.is_empty()
            || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            || k.as_bytes()[0].is_ascii_digit()
        {
            continue;
        }
        s += &format!("export {k}={}\n", shell_quote(&v));
    }
    if let Some(p) = std::env::var_os("PATH") {
        s += &format!("export PATH={}:$PATH\n", shell_quote(&p.to_string_lossy()));
    }
    s += "export CCLAB_IN_VM=1\n";
    s += &no_avx;
    s += GUEST_TMPDIR;
    let line: Vec<String> = cmd.iter().map(|a| shell_quote(a)).collect();
    s += &format!("cd {} || exit 1\n", q(cwd));
    s += &format!("{} </dev/null >/dev/tty1 2>/dev/tty2\n", line.join(" "));
    s += "echo $? > /run/job/rc\nsync\n";
    s += "echo o > /proc/sysrq-trigger\nsleep 10\npoweroff -f\n";
    s
}

/// `/dev/shm` if it is tmpfs with room for the guest's memory.
fn memory_dir(memory_mb: u32) -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let c = std::ffi::CString::new("/dev/shm").ok()?;
    // SAFETY: statvfs fills the struct we pass; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let free_mb = (st.f_bavail as u64 * st.f_frsize as u64) >> 20;
    let tmpfs = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some("/dev/shm") && l.contains(" tmpfs "));
    (tmpfs && free_mb > memory_mb as u64 + 256).then(|| shm.to_path_buf())
}

/// The UML modules tree of the installed package (`/usr/lib/uml/modules`).
fn uml_modules() -> Option<PathBuf> {
    let root = PathBuf::from("/usr/lib/uml/modules");
    let has = std::fs::read_dir(&root)
        .ok()?
        .flatten()
        .any(|e| e.path().join("modules.dep").exists());
    has.then_some(root)
}

/// The last `lines` lines of the file at `path` (none if unreadable).
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Waits for `child`, stopping it on `stop` or after `timeout`; returns
/// why it was stopped (`interrupted`, `timeout`), or `None` if it ended.
fn wait(
    child: &mut std::process::Child,
    stop: &AtomicBool,
    timeout: Option<Duration>,
) -> std::io::Result<Option<&'static str>> {
    let t0 = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            return Ok(None);
        }
        let why = if stop.load(Ordering::Relaxed) {
            Some("interrupted")
        } else if timeout.is_some_and(|t| t0.elapsed() > t) {
            Some("timeout")
        } else {
            None
        };
        if let Some(why) = why {
            // SAFETY: plain signals to our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let t1 = Instant::now();
            while child.try_wait()?.is_none() {
                if t1.elapsed() > Duration::from_secs(3) {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            return Ok(Some(why));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` in a guest; returns its exit status (124 on timeout, 130
/// when `stop` was set).
pub fn run(cmd: &[String], opts: &VmOptions, stop: Arc<AtomicBool>) -> Result<i32, VmError> {
    if cmd.is_empty() {
        return Err(VmError::Missing {
            kind: "uml",
            what: "the command to run".into(),
            how: "cclab vm -- CMD [ARGS...]".into(),
        });
    }
    let cwd = std::env::current_dir()?;
    let mut writable = vec![cwd.clone()];
    for w in &opts.writable {
        writable
            .push(std::fs::canonicalize(w).map_err(|e| {
                std::io::Error::new(e.kind(), format!("--rw {}: {e}", w.display()))
            })?);
    }
    let job = new_job()?;
    let t0 = Instant::now();
    let (mut child, console) = match opts.kind {
        VmKind::Uml => start_uml(&job, &cwd, &writable, cmd, opts, &UmlExtras::default())?,
        VmKind::Qemu => start_qemu(&job, &cwd, &writable, cmd, opts)?,
    };
    let stopped = wait(&mut child, &stop, opts.timeout)?;
    if opts.verbose {
        eprintln!(
            "cclab vm: guest ran {:.1} s (boot included)",
            t0.elapsed().as_secs_f64()
        );
    }
    match stopped {
        Some("timeout") => return Ok(124),
        Some(_) => return Ok(130),
        None => {}
    }
    // The guest writes the command's exit status to the job directory:
    // UML's own says nothing of it, and virtme-ng's may be its own.
    let rc = std::fs::read_to_string(job.dir.join("rc"))
        .ok()
        .and_then(|s| s.trim().parse().ok());
    rc.ok_or_else(|| VmError::GuestFailed {
        kind: opts.kind.name(),
        console: tail(&console, 30),
    })
}

/// What a user-mode Linux guest gets besides [`run`]'s: more kernel
/// arguments (network interfaces, consoles), host descriptors passed in
/// under fixed numbers, the network namespace it starts in, and where its
/// standard output and error go (the caller's by default).
#[derive(Default)]
pub(crate) struct UmlExtras {
    /// Appended to the kernel command line.
    pub args: Vec<String>,
    /// (descriptor open here, number it gets in the guest process).
    pub fds: Vec<(std::os::fd::RawFd, std::os::fd::RawFd)>,
    /// The network namespace (`/run/netns/NAME`) the guest runs in.
    pub netns: Option<String>,
    /// The guest's consoles 1 and 2 (its command's output), if not ours.
    pub output: Option<std::fs::File>,
    /// Killed with SIGKILL when the thread that started it ends, and in a
    /// process group of its own (a Ctrl-C at the terminal reaches the
    /// caller, which then stops it in order, and not the guest).
    pub die_with_parent: bool,
}

/// Starts a user-mode Linux guest running `cmd` with `extra`; the process
/// and its console log.
pub(crate) fn spawn_uml(
    job: &Job,
    cmd: &[String],
    opts: &VmOptions,
    extra: &UmlExtras,
) -> Result<(std::process::Child, PathBuf), VmError> {
    let cwd = std::env::current_dir()?;
    start_uml(job, &cwd, std::slice::from_ref(&cwd), cmd, opts, extra)
}

fn start_uml(
    job: &Job,
    cwd: &Path,
    writable: &[PathBuf],
    cmd: &[String],
    opts: &VmOptions,
    extra: &UmlExtras,
) -> Result<(std::process::Child, PathBuf), VmError> {
    let linux = match kernel_override("uml", "a user-mode Linux kernel (linux.uml)")? {
        Some(k) => k,
        None => need("uml", "linux.uml", "user-mode-linux", opts)?,
    };
    // The guest loads its modules (sch_netem, ...) with the host's modprobe
    // (kmod): without it every qdisc module is "unknown" in the guest.
    let modprobe = need("uml", "modprobe", "kmod", opts)?;
    let modules = uml_modules().ok_or_else(|| VmError::Missing {
        kind: "uml",
        what: "the UML kernel modules (/usr/lib/uml/modules/*/modules.dep)".into(),
        how: "apt-get install --reinstall user-mode-linux".into(),
    })?;
    let init = job.dir.join("init");
    std::fs::write(
        &init,
        init_script(&job.dir, Some((&modules, &modprobe)), cwd, writable, cmd),
    )?;
    std::fs::set_permissions(&init, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let console = job.dir.join("console.log");
    let log = std::fs::File::create(&console)?;
    if opts.verbose {
        eprintln!(
            "cclab vm: user-mode Linux guest ({}), no KVM needed",
            linux.display()
        );
    }
    let mut c = Command::new(linux);
    c.arg(format!("mem={}M", opts.memory_mb))
        .args(["rootfstype=hostfs", "rootflags=/", "ro", "quiet"])
        .arg(format!("init={}", init.display()))
        .arg(format!("umid=job{}", std::process::id()))
        .arg(format!("uml_dir={}", job.dir.display()))
        .args([
            "con=null",
            "con0=null,fd:3",
            "con1=null,fd:1",
            "con2=null,fd:2",
            "ssl=null",
        ])
        .args(&extra.args)
        .stdin(Stdio::null())
        // UML keeps its guest memory in a (deleted) file under TMPDIR,
        // best on tmpfs.
        .env(
            "TMPDIR",
            memory_dir(opts.memory_mb).unwrap_or(job.dir.clone()),
        );
    if let Some(out) = &extra.output {
        c.stdout(out.try_clone()?).stderr(out.try_clone()?);
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&log);
    let mut fds = vec![(fd, 3)];
    fds.extend(extra.fds.iter().copied());
    let netns = match &extra.netns {
        Some(ns) => Some(std::fs::File::open(format!("/run/netns/{ns}"))?),
        None => None,
    };
    let netns_fd = netns.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    let die = extra.die_with_parent;
    let legacy_fp = uml_needs_legacy_fp();
    // SAFETY: between fork and exec the child only makes async-signal-safe
    // system calls (fcntl, dup2, setns, prctl) on descriptors open here.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, move || {
            let err = || Err(std::io::Error::last_os_error());
            // Out of the way first, so no target number clobbers a source.
            let mut high = [0; 8];
            for (i, &(src, _)) in fds.iter().enumerate().take(8) {
                high[i] = libc::fcntl(src, libc::F_DUPFD_CLOEXEC, 100);
                if high[i] < 0 {
                    return err();
                }
            }
            for (i, &(_, dst)) in fds.iter().enumerate().take(8) {
                if libc::dup2(high[i], dst) < 0 {
                    return err();
                }
            }
            if let Some(ns) = netns_fd {
                if libc::setns(ns, libc::CLONE_NEWNET) != 0 {
                    return err();
                }
            }
            if die
                && (libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
                    || libc::setpgid(0, 0) != 0)
            {
                return err();
            }
            if legacy_fp {
                let prog = libc::sock_fprog {
                    len: NO_XSTATE_FILTER.len() as u16,
                    filter: NO_XSTATE_FILTER.as_ptr() as *mut libc::sock_filter,
                };
                if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0 {
                    return err();
                }
            }
            Ok(())
        });
    }
    Ok((c.spawn()?, console))
}

/// The floating-point state size the user-mode kernel (Debian's 6.1)
/// moves with `PTRACE_SETREGSET`/`NT_X86_XSTATE`: x87, SSE, AVX and
/// AVX-512, no more (its `HOST_FP_SIZE`).
const UML_XSTATE_BYTES: u32 = 2696;

/// Whether this host's CPU has more extended state than the user-mode
/// kernel can move (AMX tiles: the host's kernel then refuses its
/// `PTRACE_SETREGSET` as too short, and the guest's first process dies
/// of a fatal SIGSEGV while it boots). `CCLAB_UML_LEGACY_FP=1` or `0`
/// forces the answer.
pub fn uml_needs_legacy_fp() -> bool {
    match std::env::var("CCLAB_UML_LEGACY_FP").as_deref() {
        Ok("1") => return true,
        Ok("0") => return false,
        _ => {}
    }
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID leaf 0xD is the XSAVE enumeration; ECX is the largest
        // area the CPU's features need.
        let max = core::arch::x86_64::__cpuid_count(0xD, 0).ecx;
        max > UML_XSTATE_BYTES
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// glibc's tunable that keeps its string and memory functions off AVX,
/// for the guest's processes where [`uml_needs_legacy_fp`].
///
/// `AVX_Fast_Unaligned_Load` is a preference, not a feature: clearing AVX
/// leaves it set, and glibc 2.36's memmove still picks its AVX version by
/// it. With it set, a guest router's agent (three threads) wrote a 15 kB
/// answer with 16-byte runs lost, the upper halves of YMM registers.
const GUEST_NO_AVX: &str =
    "glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-EVEX,-FMA,-BMI2,-AVX_Fast_Unaligned_Load";

/// A seccomp filter for the user-mode kernel where [`uml_needs_legacy_fp`]:
/// its `ptrace(PTRACE_GETREGSET or PTRACE_SETREGSET, _, NT_X86_XSTATE, _)`
/// fails with EIO, everything else passes. It probes XSTATE support once
/// at boot with `GETREGSET`, so it falls back to `PTRACE_GETFPREGS` and
/// `SETFPREGS` (the x87/SSE area), which the host accepts. The cost: the
/// AVX registers' upper halves are not switched between the threads of
/// one guest process (each guest process is a host process of its own,
/// whose state the host keeps).
const NO_XSTATE_FILTER: [libc::sock_filter; 11] = {
    const fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
        libc::sock_filter { code, jt, jf, k }
    }
    const LD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    [
        op(LD, 0, 0, 4),                               // seccomp_data.arch
        op(JEQ, 0, 7, 0xc000_003e),                    // AUDIT_ARCH_X86_64, else allow
        op(LD, 0, 0, 0),                               // nr
        op(JEQ, 0, 5, 101),                            // ptrace, else allow
        op(LD, 0, 0, 16),                              // args[0]: the request
        op(JEQ, 1, 0, 0x4204),                         // PTRACE_GETREGSET
        op(JEQ, 0, 2, 0x4205),                         // PTRACE_SETREGSET, else allow
        op(LD, 0, 0, 32),                              // args[2]: the regset
        op(JEQ, 1, 0, 0x202),                          // NT_X86_XSTATE: EIO
        op(RET, 0, 0, 0x7fff_0000),                    // SECCOMP_RET_ALLOW
        op(RET, 0, 0, 0x0005_0000 | libc::EIO as u32), // SECCOMP_RET_ERRNO
    ]
};

/// The guest kernel named by `CCLAB_VM_KERNEL`, if set; an error if it
/// names no file.
fn kernel_override(kind: &'static str, what: &str) -> Result<Option<PathBuf>, VmError> {
    let Some(k) = std::env::var_os("CCLAB_VM_KERNEL") else {
        return Ok(None);
    };
    let p = PathBuf::from(k);
    if p.is_file() {
        return Ok(Some(p));
    }
    Err(VmError::Missing {
        kind,
        what: format!("the kernel CCLAB_VM_KERNEL names ({})", p.display()),
        how: format!("point CCLAB_VM_KERNEL at {what}, or unset it"),
    })
}

/// Where the qemu guest's kernel is cached.
fn kernel_cache() -> PathBuf {
    std::env::var_os("CCLAB_VM_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("cclab/vm")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/cclab/vm")))
        .unwrap_or_else(|| PathBuf::from("/var/cache/cclab/vm"))
}

/// Fetches (once) the stock Debian kernel that `linux-image-amd64` points
/// to, unpacked into the cache; returns the path of its vmlinuz.
fn stock_kernel(opts: &VmOptions) -> Result<PathBuf, VmError> {
    let cache = kernel_cache();
    let find = || -> Option<PathBuf> {
        std::fs::read_dir(cache.join("boot"))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
            })
    };
    if let Some(k) = find() {
        return Ok(k);
    }
    let missing = |what: &str| {
        VmError::Missing {
        kind: "qemu",
        what: what.into(),
        how: "apt-get download linux-image-amd64's kernel package and dpkg -x it into the cache (needs a Debian package mirror)".into(),
    }
    };
    let deps = Command::new("apt-cache")
        .args(["depends", "linux-image-amd64"])
        .output()
        .map_err(|_| missing("apt-cache"))?;
    let pkg = String::from_utf8_lossy(&deps.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Depends: ").map(str::to_string))
        .filter(|p| p.starts_with("linux-image-"))
        .ok_or_else(|| missing("a linux-image-*-amd64 package in apt's lists"))?;
    if opts.verbose {
        eprintln!(
            "cclab vm: fetching {pkg} into {} (first use)",
            cache.display()
        );
    }
    std::fs::create_dir_all(&cache)?;
    let dl = Command::new("apt-get")
        .args(["download", &pkg])
        .current_dir(&cache)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let deb = std::fs::read_dir(&cache)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"));
    let (true, Some(deb)) = (dl.success(), deb) else {
        return Err(missing(&format!("the kernel package {pkg}")));
    };
    let x = Command::new("dpkg")
        .arg("-x")
        .arg(&deb)
        .arg(&cache)
        .status()?;
    let _ = std::fs::remove_file(&deb);
    if !x.success() {
        return Err(missing(&format!("an unpacked {pkg}")));
    }
    find().ok_or_else(|| missing("vmlinuz in the unpacked kernel package"))
}

/// Whether the host's KVM can run a stock kernel: a /dev/kvm and a CPU
/// with hardware virtualisation (a paravirtual KVM without vmx/svm, as on
/// this project's machines, cannot).
fn kvm_usable() -> bool {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Path::new("/dev/kvm").exists()
        && flags
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
}

fn start_qemu(
    job: &Job,
    cwd: &Path,
    writable: &[PathBuf],
    cmd: &[String],
    opts: &VmOptions,
) -> Result<(std::process::Child, PathBuf), VmError> {
    need("qemu", "qemu-system-x86_64", "qemu-system-x86", opts)?;
    need("qemu", "busybox", "busybox-static", opts)?;
    need("qemu", "depmod", "kmod", opts)?;
    need("qemu", "udevadm", "udev", opts)?;
    let vng = which("vng").ok_or_else(|| VmError::Missing {
        kind: "qemu",
        what: "virtme-ng's `vng`".into(),
        how: "pip install virtme-ng".into(),
    })?;
    let kernel = match kernel_override("qemu", "a bootable kernel image (vmlinuz)")? {
        Some(k) => k,
        None => stock_kernel(opts)?,
    };
    let kvm = kvm_usable();
    if opts.verbose {
        eprintln!(
            "cclab vm: QEMU guest, kernel {}, {}",
            kernel.display(),
            if kvm {
                "KVM"
            } else {
                "software emulation (no usable KVM: slow, about 30 s to boot)"
            }
        );
    }
    // virtme-ng boots the guest itself; our script runs as its command.
    let script = job.dir.join("cmd.sh");
    let mut body = String::from("#!/bin/sh\n");
    let line: Vec<String> = cmd.iter().map(|a| shell_quote(a)).collect();
    body += &format!(
        "for m in {}; do modprobe -q $m; done\ncd {} || exit 1\nexport CCLAB_IN_VM=1\n{GUEST_TMPDIR}{}\nrc=$?\necho $rc > {}/rc\nexit $rc\n",
        MODULES.join(" "),
        shell_quote(&cwd.to_string_lossy()),
        line.join(" "),
        shell_quote(&job.dir.to_string_lossy()),
    );
    std::fs::write(&script, body)?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let console = job.dir.join("console.log");
    let mut c = Command::new(vng);
    c.arg("--run").arg(&kernel);
    c.args(["--memory", &format!("{}M", opts.memory_mb)]);
    c.args(["--cpus", &opts.cpus.to_string()]);
    if !kvm {
        c.arg("--disable-kvm");
    }
    for w in writable.iter().chain([&job.dir]) {
        c.arg(format!("--rwdir={}", w.display()));
    }
    for t in SHARED_TMP.iter().filter(|t| Path::new(t).is_dir()) {
        c.arg(format!("--rwdir={t}"));
    }
    c.arg("--").arg(&script);
    c.stdin(Stdio::null())
        .stderr(std::fs::File::create(&console)?);
    Ok((c.spawn()?, console))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter refuses the XSTATE regset with EIO and leaves every
    /// other ptrace call alone (pid 1 is no tracee of ours: ESRCH).
    #[test]
    fn the_legacy_fp_filter_refuses_only_the_xstate_regset() {
        let mut c = Command::new("true");
        // SAFETY: the child only makes system calls (prctl, ptrace)
        // before exec; its errors are raw OS errors, no allocation.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                let prog = libc::sock_fprog {
                    len: NO_XSTATE_FILTER.len() as u16,
                    filter: NO_XSTATE_FILTER.as_ptr() as *mut libc::sock_filter,
                };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                let mut buf = [0u8; 64];
                let mut iov = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                let call = |req: libc::c_uint, set: usize, iov: &mut libc::iovec| {
                    let r = libc::ptrace(req, 1, set, iov as *mut libc::iovec);
                    (r, *libc::__errno_location())
                };
                let wrong = std::io::Error::from_raw_os_error(libc::EPROTO);
                for req in [libc::PTRACE_GETREGSET, libc::PTRACE_SETREGSET] {
                    if call(req, 0x202, &mut iov) != (-1, libc::EIO) {
                        return Err(wrong);
                    }
                    // NT_PRSTATUS passes the filter.
                    if call(req, 1, &mut iov) != (-1, libc::ESRCH) {
                        return Err(std::io::Error::from_raw_os_error(libc::EBADMSG));
                    }
                }
                Ok(())
            });
        }
        let st = c.status().unwrap();
        assert!(st.success());
    }

    #[test]
    fn quoting_survives_a_shell() {
        for s in ["plain", "a b", "it's", "$HOME", "x;rm -rf /", "", "a\"b"] {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_quote(s)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), s);
        }
    }

    #[test]
    fn init_script_mounts_then_runs_and_reports() {
        let s = init_script(
            Path::new("/tmp/cclab-vm-1-a"),
            Some((
                Path::new("/usr/lib/uml/modules"),
                Path::new("/usr/sbin/modprobe"),
            )),
            Path::new("/work/p q"),
            &[PathBuf::from("/work/p q")],
            &[
                "cclab".into(),
                "run".into(),
                "--cc".into(),
                "alg:k=1".into(),
            ],
        );
        let pos = |needle: &str| {
            s.find(needle)
                .unwrap_or_else(|| panic!("{needle} missing:\n{s}"))
        };
        assert!(pos("mount -t hostfs -o /tmp none /tmp") < pos("cd '/work/p q'"));
        assert!(pos("mount -t hostfs -o /var/tmp none /var/tmp") < pos("cd '/work/p q'"));
        assert!(!s.contains("tmpfs -o mode=1777 tmp /tmp"), "{s}");
        assert!(pos("export TMPDIR=/run/tmp") < pos("cd '/work/p q'"));
        assert!(pos("/usr/sbin/modprobe > /run/modprobe") < pos("cd '/work/p q'"));
        assert!(pos("/proc/sys/kernel/modprobe") < pos("cd '/work/p q'"));
        assert!(
            pos("cclab run --cc alg:k=1 </dev/null >/dev/tty1 2>/dev/tty2")
                < pos("echo $? > /run/job/rc")
        );
        assert!(pos("echo $? > /run/job/rc") < pos("sysrq-trigger"));
    }

    #[test]
    fn what_the_guest_can_write() {
        let cwd = Path::new("/work/p");
        let rw = [PathBuf::from("/srv/out")];
        for (p, ok) in [
            ("results/x", true),
            ("/work/p/results", true),
            ("/tmp/x", true),
            ("/var/tmp/a/b", true),
            ("/srv/out/run1", true),
            ("/srv/other", false),
            ("/work/pq", false),
            ("../elsewhere", false),
            ("/tmp/../etc/x", false),
            ("/run/x", false),
        ] {
            assert_eq!(guest_can_write(Path::new(p), cwd, &rw), ok, "{p}");
        }
    }

    #[test]
    fn stale_job_dirs_of_dead_processes_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        // pid 0x7ffffffe is never a live process here; ours is.
        let dead = tmp.path().join(format!("{JOB_PREFIX}2147483646-1"));
        let live = tmp
            .path()
            .join(format!("{JOB_PREFIX}{}-1", std::process::id()));
        let other = tmp.path().join("unrelated");
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).unwrap();
        }
        remove_stale_jobs(tmp.path());
        assert!(!dead.exists() && live.exists() && other.exists());
    }
}
