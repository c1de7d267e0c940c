//! Linux TCP flows: a `[[flows]]` entry whose `cc` is `tcp:NAME` moves
//! its data over the kernel's TCP with congestion control NAME (`tcp-bulk`
//! at both ends, the sender sampling `TCP_INFO`), beside the QUIC flows
//! and through the same link. What the kernel offers is read here (for
//! the scenario's checks and `cclab list`; `tcp-bulk` reads the same
//! files when it sets the algorithm), and so are the records `tcp-bulk`
//! leaves in a flow's directory (for the run's summary and the report).
//!
//! A TCP flow needs the kernel's network stack between its ends: the
//! `netem` backend (in the guest of `--vm` where this host has no netem)
//! or the userspace emulator's IP mode. The simulator runs quiche in
//! virtual time and the emulator's UDP relay carries UDP datagrams only,
//! so neither can carry one. QUIC's own knobs (`ack_policy`,
//! `small_packets`, `pacing`, `mtu`, `rate`) and algorithm parameters
//! have no meaning for it and are refused.

use std::path::Path;

/// What a TCP flow's `cc` starts with.
pub const PREFIX: &str = "tcp:";

use tcp_bulk::cc::{cc_of_module, modules_in, release};
pub use tcp_bulk::cc::{ALLOWED, AVAILABLE};

/// Where Debian's user-mode Linux (the guest of `cclab vm`) keeps its
/// modules, one directory per kernel release.
pub const UML_MODULES: &str = "/usr/lib/uml/modules";

/// The flow fields a TCP flow refuses: QUIC's transport knobs and the
/// application's rate limit, which quic-app implements.
pub const QUIC_ONLY_FIELDS: &[(&str, &str)] = &[
    ("ack_policy", "the kernel's TCP acknowledges by its own rules (delayed ACKs, quick ACKs), which a scenario does not set"),
    ("small_packets", "the kernel's TCP decides its segment sizes itself (Nagle, TSO autosizing)"),
    ("pacing", "the kernel's TCP paces as its algorithm asks (bbr does; the others only under the fq qdisc)"),
    ("mtu", "mtu is QUIC's UDP payload size; a TCP flow's segments follow the link's MTU (1500 bytes)"),
    ("rate", "tcp-bulk writes as fast as the socket takes; an application rate limit is quic-app's"),
    ("requests", "tcp-bulk makes one transfer per connection; several requests on one connection are quic-app's"),
    ("think", "tcp-bulk makes one transfer per connection; a pause between requests is quic-app's"),
];

/// NAME of `tcp:NAME`; `None` for a QUIC algorithm spec.
pub fn tcp_name(cc: &str) -> Option<&str> {
    cc.trim().strip_prefix(PREFIX)
}

/// The TCP congestion controls of a kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelAlgorithms {
    /// `uname -r`.
    pub release: String,
    /// Usable now ([`AVAILABLE`]).
    pub available: Vec<String>,
    /// Open to unprivileged sockets ([`ALLOWED`]).
    pub allowed: Vec<String>,
    /// Modules it has and has not loaded (root loads them).
    pub loadable: Vec<String>,
    /// Why the lists could not be read (not Linux).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// This kernel's: the lists in `/proc`, and the modules under
/// `/lib/modules/RELEASE` and (inside the user-mode Linux guest)
/// `/usr/lib/uml/modules/RELEASE`.
pub fn this_kernel() -> KernelAlgorithms {
    let release = release();
    let (available, error) = match tcp_bulk::cc::available() {
        Ok(a) => (a, None),
        Err(e) => (
            Vec::new(),
            Some(format!(
                "cannot read {AVAILABLE} ({e}): Linux TCP flows need Linux"
            )),
        ),
    };
    let loadable = tcp_bulk::cc::loadable();
    KernelAlgorithms {
        release,
        available,
        allowed: tcp_bulk::cc::allowed(),
        loadable,
        error,
    }
}

/// The TCP congestion controls of the user-mode Linux guest `cclab vm`
/// boots (none when its package is not installed): `reno` and those its
/// `modules.builtin` lists as built in (`available`), and its modules
/// (`loadable`).
pub fn uml_guest() -> Option<KernelAlgorithms> {
    let dir = std::fs::read_dir(UML_MODULES)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("modules.dep").exists())
        .max()?;
    let builtin = std::fs::read_to_string(dir.join("modules.builtin")).unwrap_or_default();
    let mut available = vec!["reno".to_string()];
    available.extend(
        builtin
            .lines()
            .filter(|l| l.starts_with("kernel/net/ipv4/"))
            .filter_map(|l| cc_of_module(l.rsplit('/').next().unwrap_or(""))),
    );
    Some(KernelAlgorithms {
        release: dir_name(&dir),
        available,
        allowed: Vec::new(),
        loadable: modules_in(&dir),
        error: None,
    })
}

fn dir_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl KernelAlgorithms {
    /// Whether `name` is usable now or as a module.
    pub fn has(&self, name: &str) -> bool {
        self.available
            .iter()
            .chain(&self.loadable)
            .any(|n| n == name)
    }

    /// `available: ...; loadable modules: ...`.
    pub fn listing(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(" ")
            }
        };
        format!(
            "available: {}; loadable modules: {}",
            list(&self.available),
            list(&self.loadable)
        )
    }
}

fn is_root() -> bool {
    // SAFETY: no arguments, no failure.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `tcp:NAME` can run here, for the scenario's `cc` field: the
/// name's form, and this kernel having it (now, or as a module when
/// root), or, as root, the user-mode Linux guest having it (the guest
/// router runs such a flow's endpoints in the guest); the error lists
/// what this kernel has and, when the guest has it, says how to use it.
pub fn check_name(spec: &str, name: &str) -> Result<(), String> {
    let ok_form = !name.is_empty()
        && name.len() <= 15
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if name.contains([':', '=', ',']) {
        return Err(format!(
            "`{spec}`: a Linux TCP algorithm takes no parameters in a scenario (its module parameters, /sys/module/tcp_NAME/parameters, belong to the kernel); allowed: tcp:NAME, such as tcp:cubic"
        ));
    }
    let k = this_kernel();
    if !ok_form {
        return Err(format!(
            "`{spec}`: `{name}` is not a TCP congestion control name (1 to 15 of a-z, 0-9, _ and -); this kernel ({}) has {}",
            k.release,
            k.listing()
        ));
    }
    if let Some(e) = &k.error {
        return Err(format!("`{spec}`: {e}"));
    }
    if k.available.iter().any(|n| n == name) {
        return Ok(());
    }
    if k.loadable.iter().any(|n| n == name) {
        return if is_root() {
            Ok(())
        } else {
            Err(format!(
                "`{spec}`: {name} is a module this kernel ({}) has not loaded (tcp_{name}), and loading it needs root: run as root, or `modprobe tcp_{name}` first",
                k.release
            ))
        };
    }
    // The guest router's kernel has it: its endpoints run in the guest
    // on a netem link (checked again when the run knows its backend).
    if is_root() && uml_guest().is_some_and(|g| g.release != k.release && g.has(name)) {
        return Ok(());
    }
    let guest = uml_guest()
        .filter(|g| g.release != k.release && g.has(name))
        .map(|g| {
            format!(
                "; the user-mode Linux guest ({}) has it: as root, run it with --link netem (its endpoints then run in the guest router) or with --vm --link netem",
                g.release
            )
        })
        .unwrap_or_default();
    Err(format!(
        "`{spec}`: this kernel ({}) has no TCP congestion control `{name}`: {} ({AVAILABLE}){guest}",
        k.release,
        k.listing()
    ))
}

// The records `tcp-bulk` writes in a TCP flow's directory, read for the
// run's summary (run::collect) and the report's series.

/// A `tcp-bulk` records file: one JSON object a line (unreadable lines,
/// such as one cut off when a process was stopped, are skipped).
pub fn read_records(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// One `TCP_INFO` sample of the sender: s since its start, cwnd in bytes
/// (segments × MSS), smoothed RTT and minimum RTT in ms, bytes acked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Seconds since the sender's start.
    pub t_s: f64,
    /// `cwnd` × `mss`, bytes.
    pub cwnd_bytes: f64,
    /// Smoothed RTT, ms.
    pub srtt_ms: f64,
    /// `tcpi_min_rtt`, ms (null on kernels before 4.6).
    pub min_rtt_ms: Option<f64>,
    /// Bytes the receiver acknowledged so far.
    pub bytes_acked: u64,
}

/// The sender's samples from its records, up to the first that saw all
/// its data acknowledged (the idle moments after it, until the
/// connection closes, are no part of the transfer).
pub fn sender_samples(records: &[serde_json::Value]) -> Vec<Sample> {
    let all: Vec<Sample> = records
        .iter()
        .filter(|r| r["type"] == "sample")
        .filter_map(|r| {
            Some(Sample {
                t_s: r["t"].as_f64()?,
                cwnd_bytes: r["cwnd"].as_f64()? * r["mss"].as_f64()?,
                srtt_ms: r["srtt_us"].as_f64()? / 1e3,
                min_rtt_ms: r["min_rtt_us"].as_f64().map(|u| u / 1e3),
                bytes_acked: r["bytes_acked"].as_u64().unwrap_or(0),
            })
        })
        .collect();
    let last = all.iter().map(|s| s.bytes_acked).max().unwrap_or(0);
    let done = all
        .iter()
        .position(|s| s.bytes_acked >= last)
        .map_or(all.len(), |i| i + 1);
    all[..done].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_flows_are_named_by_their_prefix() {
        assert_eq!(tcp_name("tcp:cubic"), Some("cubic"));
        assert_eq!(tcp_name("cubic"), None);
    }

    #[test]
    fn the_kernels_own_algorithms_pass_and_others_are_listed() {
        let k = this_kernel();
        for n in &k.available {
            assert_eq!(check_name(&format!("tcp:{n}"), n), Ok(()));
        }
        let e = check_name("tcp:nosuchcc", "nosuchcc").unwrap_err();
        assert!(e.contains("no TCP congestion control `nosuchcc`"), "{e}");
        for n in &k.available {
            assert!(e.contains(n.as_str()), "{e} lacks {n}");
        }
        assert!(check_name("tcp:Cubic", "Cubic")
            .unwrap_err()
            .contains("not a TCP congestion control name"));
        assert!(check_name("tcp:cubic:beta=1", "cubic:beta=1")
            .unwrap_err()
            .contains("no parameters"));
    }
}
