//! Network namespaces and veth pairs for runs that cross real kernel links.
//!
//! A [`Namespaces`] is three namespaces, client, router and server, joined by
//! two veth pairs:
//!
//! ```text
//!  client ns            router ns                 server ns
//!  c0 10.201.1.2 ── rc0 10.201.1.1 | rs0 10.201.2.1 ── s0 10.201.2.2
//! ```
//!
//! The `emu` backend runs its relay with sockets in the router namespace;
//! the `netem` backend turns on IP forwarding there, puts its qdiscs on
//! the veths and has them carry packets, not GSO trains ([`GSO_MAX_SEGS`]). Addresses are the same in every topology, which is fine
//! because each namespace has its own network stack; names carry the
//! project prefix, the owning process id and a counter
//! (`cclab-<pid>-<n>-c`), so leftovers of a killed run can be found and
//! removed by [`cleanup`] (run automatically before each new topology, and
//! by `cclab cleanup`). Every command is an argument list, never a shell
//! string, and every name is validated first.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Every namespace this project creates starts with this.
pub const PREFIX: &str = "cclab-";

/// Client-side address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 1, 2);
/// Router address facing the client.
pub const ROUTER_CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 1, 1);
/// Router address facing the server.
pub const ROUTER_SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 2, 1);
/// Server-side address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 2, 2);

/// Interface names inside the namespaces.
pub const CLIENT_DEV: &str = "c0";
/// Router's interface towards the client (down-direction egress).
pub const ROUTER_CLIENT_DEV: &str = "rc0";
/// Router's interface towards the server (up-direction egress).
pub const ROUTER_SERVER_DEV: &str = "rs0";
/// Server-side interface.
pub const SERVER_DEV: &str = "s0";

/// Segments a GSO packet may carry on the veths of a forwarding (netem)
/// topology: 1, so no GSO packet leaves an endpoint whole.
///
/// The endpoints send UDP with segmentation offload (quic-app sends up to
/// 48 datagrams per `sendmsg`) and kernel TCP builds TSO packets, and veth
/// advertises software GSO, so by default such a super-packet crosses the
/// veth, is forwarded by the router as one skb and sits in the bottleneck
/// qdisc as one: tc counts one drop for a train of datagrams, an AQM drops
/// whole trains and a token bucket releases them as units, where a real
/// router sees packets. With the device's `gso_max_segs` at 1 (set when
/// the veth is created, which kernels allow long before they allow
/// changing it), the kernel's `gso_features_check` clears the device's GSO
/// features for any packet of more than one segment, so `validate_xmit_skb`
/// segments it in software on the sender's own veth (at once when the veth
/// has no qdisc, else on dequeue from it), before the router; TCP sees the
/// limit through its route (`sk_gso_max_segs`) and builds one-MSS packets
/// to begin with. The application keeps its cheap GSO system calls. (Where
/// the veth has netem, the netem backend also segments before netem:
/// `netem::segmenter_args`.)
pub const GSO_MAX_SEGS: u32 = 1;

/// A namespace operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// Not root (or without CAP_NET_ADMIN / CAP_SYS_ADMIN).
    #[error("network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); run as root, or use the userspace emulator on loopback (--link emu)")]
    NotRoot,
    /// A command failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line, for the message.
        command: String,
        /// What it printed.
        stderr: String,
    },
    /// A program could not be started.
    #[error("cannot run `{program}`: {source} (is iproute2 installed?)")]
    Spawn {
        /// Which program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A name that is not ours or not safe.
    #[error(
        "invalid name `{0}`: expected letters, digits, '-' and '_' only, at most 64 characters"
    )]
    BadName(String),
}

/// Checks a namespace or interface name before it reaches a command line.
pub fn validate_name(name: &str) -> Result<(), NetnsError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(NetnsError::BadName(name.to_string()))
    }
}

/// True when running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a program with arguments; its stderr becomes the error.
pub fn run(program: &str, args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            program: program.to_string(),
            source,
        })?;
    if !out.status.success() {
        return Err(NetnsError::Command {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The namespaces that exist now, by name.
pub fn list() -> Result<Vec<String>, NetnsError> {
    let out = run("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// The process ids running inside a namespace.
pub fn pids(ns: &str) -> Vec<i32> {
    run("ip", &["netns", "pids", ns])
        .map(|o| o.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The owner pid encoded in one of our names (`cclab-<pid>-...`).
fn owner(name: &str) -> Option<i32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// [`delete`]s every one of `names`, going on past a failure; the first
/// error.
pub fn delete_all<'a>(names: impl IntoIterator<Item = &'a String>) -> Result<(), NetnsError> {
    let mut first_err = None;
    for ns in names {
        if let Err(e) = delete(ns) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// The `ip` arguments that turn on IPv4 forwarding in `ns`.
pub fn forwarding_args(ns: &str) -> [&str; 6] {
    [
        "netns",
        "exec",
        ns,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
    ]
}

/// Kills every process in `ns`, then deletes it (which removes its veths
/// and their qdiscs).
pub fn delete(ns: &str) -> Result<(), NetnsError> {
    validate_name(ns)?;
    for pid in pids(ns) {
        // SAFETY: sending SIGKILL to a process in a namespace we own.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    match run("ip", &["netns", "del", ns]) {
        Ok(_) => Ok(()),
        // Already gone: fine.
        Err(NetnsError::Command { stderr, .. }) if stderr.contains("No such file") => Ok(()),
        Err(e) => Err(e),
    }
}

/// What a clean-up removed.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Cleaned {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Processes killed inside them.
    pub processes: usize,
}

/// Removes our namespaces (and everything in them). With `stale_only`,
/// only those whose owning process is gone; otherwise all of them except
/// this process's own.
pub fn cleanup(stale_only: bool) -> Result<Cleaned, NetnsError> {
    if !is_root() {
        return Err(NetnsError::NotRoot);
    }
    let me = std::process::id() as i32;
    let mut done = Cleaned::default();
    for ns in list()? {
        let Some(pid) = owner(&ns) else { continue };
        if pid == me || (stale_only && pid_alive(pid)) {
            continue;
        }
        done.processes += pids(&ns).len();
        delete(&ns)?;
        done.namespaces.push(ns);
    }
    Ok(done)
}

/// The `gso_max_segs` of device `dev` in namespace `ns`, from
/// `ip -j -d link show`.
pub fn gso_max_segs(ns: &str, dev: &str) -> Result<u64, NetnsError> {
    validate_name(ns)?;
    validate_name(dev)?;
    let out = run("ip", &["-n", ns, "-j", "-d", "link", "show", "dev", dev])?;
    parse_gso_max_segs(&out).ok_or_else(|| NetnsError::Command {
        command: format!("ip -n {ns} -j -d link show dev {dev}"),
        stderr: format!("no gso_max_segs in the output: {}", out.trim()),
    })
}

/// The MAC address of `dev` in `ns`.
pub(crate) fn mac_address(ns: &str, dev: &str) -> Result<String, NetnsError> {
    let out = run("ip", &["-n", ns, "-j", "link", "show", "dev", dev])?;
    parse_mac(&out).ok_or_else(|| NetnsError::Command {
        command: format!("ip -n {ns} -j link show dev {dev}"),
        stderr: format!("no MAC address in the output: {}", out.trim()),
    })
}

fn parse_mac(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let a = v.as_array()?.first()?.get("address")?.as_str()?;
    (a.len() == 17 && a.bytes().all(|b| b.is_ascii_hexdigit() || b == b':')).then(|| a.to_string())
}

fn parse_gso_max_segs(json: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.as_array()?.first()?.get("gso_max_segs")?.as_u64()
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh id for a set of namespaces: `cclab-<pid>-<n>`.
pub(crate) fn new_id() -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("{PREFIX}{}-{n}", std::process::id())
}

/// Moves the calling thread (only it) into network namespace `name`, so
/// the sockets it creates from then on live there.
pub fn enter(name: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    validate_name(name)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let f = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns on a valid namespace fd; it affects only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Three namespaces joined by two veth pairs; removed on drop.
#[derive(Debug)]
pub struct Namespaces {
    /// `cclab-<pid>-<n>`.
    pub id: String,
    /// Client namespace.
    pub client: String,
    /// Router namespace.
    pub router: String,
    /// Server namespace.
    pub server: String,
    removed: bool,
}

impl Namespaces {
    /// Creates the namespaces and links, after removing leftovers of dead
    /// runs. With `forward`, the router forwards IP (the netem backend);
    /// without, only a relay in the router connects the two sides (emu).
    pub fn create(forward: bool) -> Result<Namespaces, NetnsError> {
        if !is_root() {
            return Err(NetnsError::NotRoot);
        }
        cleanup(true)?;
        let id = new_id();
        let t = Namespaces {
            client: format!("{id}-c"),
            router: format!("{id}-r"),
            server: format!("{id}-s"),
            id,
            removed: false,
        };
        t.build(forward)?;
        Ok(t)
    }

    fn build(&self, forward: bool) -> Result<(), NetnsError> {
        for ns in [&self.client, &self.router, &self.server] {
            validate_name(ns)?;
            run("ip", &["netns", "add", ns])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        // Each veth end is created directly inside its namespace, so no
        // name ever appears in (or collides in) the root namespace.
        let pairs = [
            (
                &self.client,
                CLIENT_DEV,
                CLIENT_IP,
                ROUTER_CLIENT_DEV,
                ROUTER_CLIENT_IP,
            ),
            (
                &self.server,
                SERVER_DEV,
                SERVER_IP,
                ROUTER_SERVER_DEV,
                ROUTER_SERVER_IP,
            ),
        ];
        // Forwarding (netem): every veth end segments GSO packets itself;
        // see [`GSO_MAX_SEGS`].
        let segs = GSO_MAX_SEGS.to_string();
        let gso: &[&str] = if forward {
            &["gso_max_segs", &segs]
        } else {
            &[]
        };
        for (ns, dev, ip, rdev, rip) in pairs {
            let mut add = vec!["link", "add", dev, "netns", ns];
            add.extend_from_slice(gso);
            add.extend_from_slice(&["type", "veth", "peer", "name", rdev, "netns", &self.router]);
            add.extend_from_slice(gso);
            run("ip", &add)?;
            run(
                "ip",
                &["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev],
            )?;
            run(
                "ip",
                &[
                    "-n",
                    &self.router,
                    "addr",
                    "add",
                    &format!("{rip}/24"),
                    "dev",
                    rdev,
                ],
            )?;
            run("ip", &["-n", ns, "link", "set", dev, "up"])?;
            run("ip", &["-n", &self.router, "link", "set", rdev, "up"])?;
            run(
                "ip",
                &["-n", ns, "route", "add", "default", "via", &rip.to_string()],
            )?;
            // Permanent neighbour entries both ways: no ARP crosses the
            // link. An ARP request or reply lost to the link's own loss
            // (netem drops every packet on the veth, ARP included) left
            // the path dead until ARP's 1 s retry, and the packets
            // queued meanwhile beyond the neighbour queue's 64 KB were
            // dropped before any qdisc saw them.
            let (mac, rmac) = (mac_address(ns, dev)?, mac_address(&self.router, rdev)?);
            run(
                "ip",
                &[
                    "-n",
                    ns,
                    "neigh",
                    "replace",
                    &rip.to_string(),
                    "lladdr",
                    &rmac,
                    "dev",
                    dev,
                    "nud",
                    "permanent",
                ],
            )?;
            run(
                "ip",
                &[
                    "-n",
                    &self.router,
                    "neigh",
                    "replace",
                    &ip.to_string(),
                    "lladdr",
                    &mac,
                    "dev",
                    rdev,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        if forward {
            self.enable_forwarding()?;
        }
        Ok(())
    }

    /// Checks that every veth end segments GSO packets itself (see
    /// [`GSO_MAX_SEGS`]) and turns on forwarding in the router.
    fn enable_forwarding(&self) -> Result<(), NetnsError> {
        for (ns, dev) in self.devices() {
            let segs = gso_max_segs(ns, dev)?;
            if segs != u64::from(GSO_MAX_SEGS) {
                return Err(NetnsError::Command {
                    command: format!("ip -n {ns} link add {dev} ... gso_max_segs {GSO_MAX_SEGS}"),
                    stderr: format!("the kernel left gso_max_segs at {segs}, so GSO trains would reach the bottleneck whole"),
                });
            }
        }
        run("ip", &forwarding_args(&self.router))?;
        Ok(())
    }

    /// Every veth end, as (namespace, device): client, the router's two,
    /// server.
    pub fn devices(&self) -> [(&str, &'static str); 4] {
        [
            (&self.client, CLIENT_DEV),
            (&self.router, ROUTER_CLIENT_DEV),
            (&self.router, ROUTER_SERVER_DEV),
            (&self.server, SERVER_DEV),
        ]
    }

    /// A command that runs `program` inside namespace `ns`.
    pub fn command(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).arg(program);
        c
    }

    /// Removes everything now (also done on drop).
    pub fn remove(&mut self) -> Result<(), NetnsError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        delete_all([&self.client, &self.router, &self.server])
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        for ok in ["cclab-12-0-c", "rc0", "a_b"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "a b", "a;rm", "a/b", &"x".repeat(65)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert_eq!(owner("cclab-123-4-c"), Some(123));
        assert_eq!(owner("other-123"), None);
        assert_eq!(owner("cclab-x-1"), None);
    }

    #[test]
    fn mac_from_ip_json() {
        let j =
            r#"[{"ifindex":2,"ifname":"c0","link_type":"ether","address":"9a:3b:0c:11:22:f0"}]"#;
        assert_eq!(parse_mac(j).as_deref(), Some("9a:3b:0c:11:22:f0"));
        assert_eq!(parse_mac(r#"[{"ifname":"c0","address":"x"}]"#), None);
        assert_eq!(parse_mac("[]"), None);
    }

    #[test]
    fn gso_max_segs_from_ip_json() {
        let j = r#"[{"ifindex":2,"ifname":"c0","linkinfo":{"info_kind":"veth"},"gso_max_size":65536,"gso_max_segs":1,"tso_max_segs":65535}]"#;
        assert_eq!(parse_gso_max_segs(j), Some(1));
        assert_eq!(parse_gso_max_segs(r#"[{"ifname":"c0"}]"#), None);
        assert_eq!(parse_gso_max_segs("[]"), None);
        assert_eq!(parse_gso_max_segs("not json"), None);
    }
}
