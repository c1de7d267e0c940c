//! IP mode's network: two namespaces, client side and server side, each
//! with one TUN device whose other end is the emulator
//! ([`super::tunnel`]), as mahimahi's shells have.
//!
//! ```text
//!  client ns                       emulator thread                  server ns
//!  10.202.1.1 ── cctun0 ══ fd ══► up link ══ fd ══► cctun0 ── 10.203.0.10, .11, ... (one per route)
//!                      ◄══════════ down link ◄══════
//! ```
//!
//! The client namespace has `10.202.1.1/32` on its device and a route to
//! the servers' network through it; the server namespace has a `local`
//! route for the whole servers' network (so a server binds any of its
//! addresses without one `ip addr` per flow) and a route to the client
//! through its device. Neither side can reach the other any other way.
//! The devices' MTU ([`TUN_MTU`]) fits a QUIC flow's largest datagram;
//! the routes make TCP segments Ethernet-sized ([`TCP_ADVMSS`]).
//! Route `i` (the scenario's flow `i`) has server address
//! [`server_ip`]`(i)`, so the emulator tells a packet's route from its
//! server address: the destination going up, the source coming down.
//! IPv6 is turned off in both namespaces, so no router solicitation or
//! other IPv6 chatter reaches the link.
//!
//! Each device is opened by a short-lived thread that entered its
//! namespace (a TUN device is created in the namespace of the thread that
//! opens it), non-blocking, `IFF_TUN | IFF_NO_PI`: every `read` is one
//! whole IP packet and every `write` injects one. The devices vanish when
//! their descriptors close; the namespaces (named like the netem
//! backend's, `cclab-<pid>-<n>-tc` and `-ts`, so [`netns::cleanup`] finds
//! what a killed run left) are deleted on drop, with any process still
//! inside them.

use std::net::Ipv4Addr;
use std::os::fd::{FromRawFd, OwnedFd};

use super::config::EmuError;
use crate::netns::{self, NetnsError};

/// The TUN device's name in both namespaces.
pub const TUN_DEV: &str = "cctun0";

/// The client side's address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 202, 1, 1);

/// The servers' network (route `i`'s address is [`server_ip`]`(i)`).
pub const SERVER_NET: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 203, 0, 0), 16);

/// The first server address.
const SERVER_BASE: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 10);

/// The most routes one network has: server addresses up to 10.203.255.254.
pub const MAX_ROUTES: usize = 65_524;

/// The devices' MTU: room for the largest UDP payload a QUIC flow may
/// send (1500 bytes, `mtu`) with its IPv4 and UDP headers, as the relay
/// carries it. TCP still builds Ethernet-sized segments (1500 bytes of IP):
/// both routes advertise an MSS of [`TCP_ADVMSS`].
pub const TUN_MTU: u32 = 1528;

/// The MSS both sides' routes advertise: Ethernet's (1500 − 40).
pub const TCP_ADVMSS: u32 = 1460;

/// Packets a TUN device's queue holds before its kernel drops (its
/// `txqueuelen`; Linux's default of 500 is a burst TCP can overrun before
/// the emulator's thread wakes).
const TUN_QUEUE: u32 = 10_000;

/// Route `i`'s server address.
pub fn server_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(SERVER_BASE) + i as u32)
}

/// The route whose server address is `ip`, if it is one of the first
/// `routes`.
pub fn route_of(ip: Ipv4Addr, routes: usize) -> Option<usize> {
    let i = u32::from(ip).checked_sub(u32::from(SERVER_BASE))? as usize;
    (i < routes).then_some(i)
}

/// Whether IP mode can run here: root, `/dev/net/tun` and `ip`; the error
/// names what is missing and that the relay needs none of it.
pub fn check() -> Result<(), EmuError> {
    let relay = "or use --emu-mode relay (the UDP relay), which needs neither but carries only UDP";
    if !netns::is_root() {
        return Err(EmuError::IpUnavailable(format!(
            "--emu-mode ip needs root (it creates network namespaces and TUN devices); run as root, {relay}"
        )));
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(EmuError::IpUnavailable(format!(
            "--emu-mode ip needs /dev/net/tun, which this system lacks (load the kernel's tun module, or in a container pass the device through); {relay}"
        )));
    }
    if netns::run("ip", &["-V"]).is_err() {
        return Err(EmuError::IpUnavailable(format!(
            "--emu-mode ip needs the `ip` program (iproute2), which is not installed; {relay}"
        )));
    }
    Ok(())
}

/// `struct ifreq` as TUNSETIFF reads it: a name and the flags, padded to
/// the kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens a new TUN device `dev` in the calling thread's namespace.
fn open_tun(dev: &str) -> std::io::Result<OwnedFd> {
    let path = c"/dev/net/tun";
    // SAFETY: open with a NUL-terminated path; the fd is owned below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is ours alone.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; 16],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..dev.len()].copy_from_slice(dev.as_bytes());
    // SAFETY: TUNSETIFF reads (and writes back) one ifreq we own.
    if unsafe { libc::ioctl(fd, libc::TUNSETIFF, &mut req as *mut IfReq) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(owned)
}

/// Opens TUN device `dev` inside namespace `ns`, from a thread that enters
/// it (the caller's thread stays where it is).
fn open_tun_in(ns: &str, dev: &str) -> Result<OwnedFd, EmuError> {
    let (ns2, dev2) = (ns.to_string(), dev.to_string());
    let r = std::thread::spawn(move || {
        netns::enter(&ns2)?;
        open_tun(&dev2)
    })
    .join()
    .map_err(|_| EmuError::Panicked)?;
    r.map_err(|source| EmuError::Tun {
        ns: ns.to_string(),
        dev: dev.to_string(),
        source,
    })
}

/// The two namespaces and their TUN devices; removed on drop.
#[derive(Debug)]
pub struct TunNet {
    /// `cclab-<pid>-<n>`.
    pub id: String,
    /// The client side's namespace.
    pub client_ns: String,
    /// The server side's namespace.
    pub server_ns: String,
    /// Routes (server addresses) it was made for.
    pub routes: usize,
    /// The devices' descriptors (client side, server side), until the
    /// emulator takes them.
    fds: Option<[OwnedFd; 2]>,
    /// Every `ip` command that built it, for the run's records.
    pub commands: Vec<Vec<String>>,
    removed: bool,
}

impl TunNet {
    /// Creates both namespaces with their devices, addresses and routes
    /// for `routes` server addresses, after removing what dead runs left.
    pub fn create(routes: usize) -> Result<TunNet, EmuError> {
        check()?;
        if routes == 0 || routes > MAX_ROUTES {
            return Err(EmuError::IpUnavailable(format!(
                "IP mode takes 1 to {MAX_ROUTES} routes, not {routes}"
            )));
        }
        netns::cleanup(true)?;
        let id = netns::new_id();
        let mut t = TunNet {
            client_ns: format!("{id}-tc"),
            server_ns: format!("{id}-ts"),
            id,
            routes,
            fds: None,
            commands: Vec::new(),
            removed: false,
        };
        // On error, drop removes whatever was made.
        t.build()?;
        Ok(t)
    }

    fn ip(&mut self, args: &[&str]) -> Result<(), NetnsError> {
        self.commands.push(
            std::iter::once("ip")
                .chain(args.iter().copied())
                .map(String::from)
                .collect(),
        );
        netns::run("ip", args).map(|_| ())
    }

    fn build(&mut self) -> Result<(), EmuError> {
        let (c, s) = (self.client_ns.clone(), self.server_ns.clone());
        for ns in [&c, &s] {
            netns::validate_name(ns)?;
            self.ip(&["netns", "add", ns])?;
            self.ip(&["-n", ns, "link", "set", "lo", "up"])?;
            // No IPv6 on the devices to be made (a kernel without IPv6
            // has none anyway, so a failure here is not one).
            let v6 = [
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ];
            self.commands
                .push(std::iter::once("ip").chain(v6).map(String::from).collect());
            let _ = netns::run("ip", &v6);
        }
        for ns in [&c, &s] {
            self.commands.push(vec![format!(
                "# open /dev/net/tun in {ns}: TUNSETIFF {TUN_DEV}, IFF_TUN | IFF_NO_PI"
            )]);
        }
        let fds = [open_tun_in(&c, TUN_DEV)?, open_tun_in(&s, TUN_DEV)?];
        self.fds = Some(fds);
        let (qlen, mtu, mss) = (
            TUN_QUEUE.to_string(),
            TUN_MTU.to_string(),
            TCP_ADVMSS.to_string(),
        );
        for ns in [&c, &s] {
            let dev = ["-n", ns, "link", "set", "dev", TUN_DEV];
            self.ip(&[&dev[..], &["mtu", &mtu, "txqueuelen", &qlen, "up"]].concat())?;
        }
        let net = format!("{}/{}", SERVER_NET.0, SERVER_NET.1);
        let client = CLIENT_IP.to_string();
        let client32 = format!("{client}/32");
        self.ip(&["-n", &c, "addr", "add", &client32, "dev", TUN_DEV])?;
        let to_servers = ["-n", &c, "route", "add", &net, "dev", TUN_DEV];
        self.ip(&[&to_servers[..], &["src", &client, "advmss", &mss]].concat())?;
        // Every server address is local on the server side (Linux's
        // "AnyIP"), so servers bind theirs without one command each.
        self.ip(&["-n", &s, "route", "add", "local", &net, "dev", "lo"])?;
        let to_client = ["-n", &s, "route", "add", &client32, "dev", TUN_DEV];
        self.ip(&[&to_client[..], &["advmss", &mss]].concat())?;
        Ok(())
    }

    /// The devices' descriptors (client side, server side), once: the
    /// emulator owns them from then on.
    pub fn take_fds(&mut self) -> Option<[OwnedFd; 2]> {
        self.fds.take()
    }

    /// Packets each side's kernel dropped at its TUN device's queue
    /// (`tx_dropped`: the emulator did not read them in time), client
    /// side then server side; `None` if a device is gone or unreadable.
    pub fn tun_dropped(client_ns: &str, server_ns: &str) -> Option<[u64; 2]> {
        let one = |ns: &str| {
            let out = netns::run(
                "ip",
                &["-n", ns, "-s", "-j", "link", "show", "dev", TUN_DEV],
            )
            .ok()?;
            parse_tx_dropped(&out)
        };
        Some([one(client_ns)?, one(server_ns)?])
    }

    /// Removes both namespaces now (also done on drop); the devices go
    /// with the emulator's descriptors.
    pub fn remove(&mut self) -> Result<(), NetnsError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        self.fds = None;
        netns::delete_all([&self.client_ns, &self.server_ns])
    }
}

impl Drop for TunNet {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// `stats64.tx.dropped` from `ip -s -j link show`.
fn parse_tx_dropped(json: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.as_array()?
        .first()?
        .get("stats64")?
        .get("tx")?
        .get("dropped")?
        .as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_map_back_to_their_routes() {
        assert_eq!(server_ip(0), Ipv4Addr::new(10, 203, 0, 10));
        assert_eq!(server_ip(246), Ipv4Addr::new(10, 203, 1, 0));
        assert_eq!(server_ip(MAX_ROUTES - 1), Ipv4Addr::new(10, 203, 255, 253));
        for i in [0, 1, 7, 300] {
            assert_eq!(route_of(server_ip(i), 301), Some(i));
        }
        assert_eq!(route_of(server_ip(3), 3), None);
        assert_eq!(route_of(Ipv4Addr::new(10, 203, 0, 9), 10), None);
        assert_eq!(route_of(CLIENT_IP, 10), None);
    }

    #[test]
    fn tx_dropped_from_ip_json() {
        let j = r#"[{"ifname":"cctun0","stats64":{"rx":{"bytes":1,"packets":1,"errors":0,"dropped":0},"tx":{"bytes":9,"packets":3,"errors":0,"dropped":7}}}]"#;
        assert_eq!(parse_tx_dropped(j), Some(7));
        assert_eq!(parse_tx_dropped("[]"), None);
        assert_eq!(parse_tx_dropped("no"), None);
    }
}
