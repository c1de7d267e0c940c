//! The kernel's TCP congestion controls: which it has now, which it could
//! load as modules, loading one, and setting one on a socket, with errors
//! that list what there is.

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

/// What the kernel can use now (built in or loaded).
pub const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// What an unprivileged socket may choose.
pub const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
/// The program the kernel loads modules with.
const KERNEL_MODPROBE: &str = "/proc/sys/kernel/modprobe";

/// A congestion control that cannot be used, and why, with what there is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcError(pub String);

impl std::fmt::Display for CcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CcError {}

fn words(path: &str) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_to_string(path)?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// The names in [`AVAILABLE`].
pub fn available() -> std::io::Result<Vec<String>> {
    words(AVAILABLE)
}

/// The names in [`ALLOWED`] (empty when unreadable).
pub fn allowed() -> Vec<String> {
    words(ALLOWED).unwrap_or_default()
}

/// The running kernel's release (`uname -r`).
pub fn release() -> String {
    // SAFETY: uname fills the zeroed struct; the release is NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return String::new();
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

/// Where this kernel's modules may be: `/lib/modules/RELEASE`, and
/// `/usr/lib/uml/modules/RELEASE` (the user-mode Linux guest of `cclab
/// vm` sees the host's root, which keeps its modules there); those that
/// exist.
pub fn module_dirs() -> Vec<PathBuf> {
    let r = release();
    ["/lib/modules", "/usr/lib/uml/modules"]
        .iter()
        .map(|d| Path::new(d).join(&r))
        .filter(|d| !r.is_empty() && d.is_dir())
        .collect()
}

/// The congestion controls among the `tcp_NAME.ko` modules (compressed
/// or not) in `dir/kernel/net/ipv4`: NAME, sorted (`tcp_diag` is no
/// congestion control and is left out).
pub fn modules_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("kernel/net/ipv4"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| cc_of_module(&e.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// NAME of a module file name `tcp_NAME.ko[.xz|.zst|.gz]`; `None` for any
/// other file and for `tcp_diag`, which is no congestion control.
pub fn cc_of_module(file: &str) -> Option<String> {
    let (stem, _) = file.split_once(".ko")?;
    let name = stem.strip_prefix("tcp_")?;
    (name != "diag").then(|| name.to_string())
}

/// The congestion controls this kernel could load as modules and has not
/// (from [`module_dirs`]).
pub fn loadable() -> Vec<String> {
    let now = available().unwrap_or_default();
    let mut names: Vec<String> = module_dirs()
        .iter()
        .flat_map(|d| modules_in(d))
        .filter(|n| !now.contains(n))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Whether `name` can be a congestion control's name: 1 to 15 of
/// `a-z0-9_-` (the kernel's `TCP_CA_NAME_MAX` is 16 with the NUL).
pub fn check_name(name: &str) -> Result<(), CcError> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(CcError(format!(
            "`{name}` is not a TCP congestion control name (1 to 15 of a-z, 0-9, _ and -, such as cubic or vegas); {}",
            listing()
        )))
    }
}

/// What this kernel has, for errors: the available list and the
/// loadable modules.
pub fn listing() -> String {
    let avail = match available() {
        Ok(a) => a.join(" "),
        Err(e) => format!("unreadable ({e}: Linux TCP flows need Linux)"),
    };
    let load = loadable();
    format!(
        "this kernel ({}) has {} ({AVAILABLE}); loadable modules: {}",
        release(),
        avail,
        if load.is_empty() {
            "none".to_string()
        } else {
            format!("{} (root loads them)", load.join(" "))
        }
    )
}

fn is_root() -> bool {
    // SAFETY: no arguments, no failure.
    unsafe { libc::geteuid() == 0 }
}

/// The program that loads modules: the kernel's own choice
/// ([`KERNEL_MODPROBE`]; the guest of `cclab vm` points it at a wrapper
/// that finds the guest's modules), else `modprobe`.
fn modprobe_program() -> String {
    std::fs::read_to_string(KERNEL_MODPROBE)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && Path::new(s).exists())
        .unwrap_or_else(|| "modprobe".to_string())
}

/// Makes `name` available: at once if it is; if a module `tcp_NAME` is
/// there and this process is root, after `modprobe tcp_NAME`. The error
/// lists what the kernel has.
pub fn ensure(name: &str) -> Result<(), CcError> {
    check_name(name)?;
    let now = available().map_err(|e| {
        CcError(format!(
            "cannot read {AVAILABLE} ({e}): Linux TCP flows need a Linux kernel"
        ))
    })?;
    if now.iter().any(|n| n == name) {
        return Ok(());
    }
    let has_module = module_dirs()
        .iter()
        .any(|d| modules_in(d).iter().any(|n| n == name));
    if !has_module {
        return Err(CcError(format!(
            "the kernel has no TCP congestion control `{name}`: {}",
            listing()
        )));
    }
    if !is_root() {
        return Err(CcError(format!(
            "TCP congestion control `{name}` is a module (tcp_{name}) this kernel has not loaded, and loading it needs root: run as root, or load it first (modprobe tcp_{name}); {}",
            listing()
        )));
    }
    let prog = modprobe_program();
    let out = std::process::Command::new(&prog)
        .arg(format!("tcp_{name}"))
        .output();
    if available().unwrap_or_default().iter().any(|n| n == name) {
        return Ok(());
    }
    let why = match out {
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    Err(CcError(format!(
        "`{prog} tcp_{name}` did not make TCP congestion control `{name}` available ({why}); {}",
        listing()
    )))
}

/// Sets `name` on socket `fd`, after [`ensure`]; checks it took.
pub fn set(fd: RawFd, name: &str) -> Result<(), CcError> {
    ensure(name)?;
    // SAFETY: a valid fd and a buffer of the given length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(CcError(match e.raw_os_error() {
            Some(libc::EPERM) => format!(
                "TCP congestion control `{name}` is available but not allowed to this unprivileged process ({ALLOWED}: {}); run as root",
                allowed().join(" ")
            ),
            Some(libc::ENOENT) => format!(
                "the kernel has no TCP congestion control `{name}`: {}",
                listing()
            ),
            _ => format!("setting TCP congestion control `{name}`: {e}"),
        }));
    }
    match get(fd) {
        Ok(got) if got == name => Ok(()),
        Ok(got) if got == "dctcp-reno" => Err(CcError(format!(
            "asked for TCP congestion control `{name}`, the socket has `{got}`: Linux's DCTCP falls back to Reno on a connection that did not negotiate ECN (the client asks for it when its socket has dctcp before connecting; the server's net.ipv4.tcp_ecn must accept it, 1 or 2)"
        ))),
        Ok(got) => Err(CcError(format!(
            "asked for TCP congestion control `{name}`, the socket has `{got}`"
        ))),
        Err(e) => Err(CcError(format!("reading TCP_CONGESTION back: {e}"))),
    }
}

/// The congestion control of socket `fd`.
pub fn get(fd: RawFd) -> std::io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: a valid fd and a buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let b = &buf[..len as usize];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Ok(String::from_utf8_lossy(&b[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("cubic").is_ok());
        assert!(check_name("tcp_nv-2").is_ok());
        for bad in ["", "Cubic", "a b", "x/../y", "sixteen_letters_"] {
            let e = check_name(bad).unwrap_err();
            assert!(e.0.contains("not a TCP congestion control name"), "{e}");
        }
    }

    #[test]
    fn modules_are_found_by_file_name() {
        let d = tempfile::tempdir().unwrap();
        let ipv4 = d.path().join("kernel/net/ipv4");
        std::fs::create_dir_all(&ipv4).unwrap();
        for f in [
            "tcp_vegas.ko",
            "tcp_bbr.ko.xz",
            "tcp_diag.ko",
            "udp_diag.ko",
            "tcp_nv.ko.zst",
        ] {
            std::fs::write(ipv4.join(f), b"").unwrap();
        }
        assert_eq!(modules_in(d.path()), vec!["bbr", "nv", "vegas"]);
        assert_eq!(cc_of_module("tcp_bbr.ko.zst"), Some("bbr".into()));
        assert_eq!(cc_of_module("tcp_nv"), None);
        assert!(modules_in(&d.path().join("none")).is_empty());
    }

    #[test]
    fn an_unknown_name_lists_what_there_is() {
        let e = ensure("nosuchcc").unwrap_err();
        assert!(e.0.contains("no TCP congestion control `nosuchcc`"), "{e}");
        for n in available().unwrap() {
            assert!(e.0.contains(&n), "{e} lacks {n}");
        }
        assert!(e.0.contains(AVAILABLE), "{e}");
    }
}
