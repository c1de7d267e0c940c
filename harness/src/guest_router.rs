//! Kernel netem on a host whose kernel has none: a user-mode Linux guest
//! as the router, the endpoints on the host at native speed.
//!
//! ```text
//!  host                                         guest (user-mode Linux, one CPU)
//!  ┌ client ns ───────┐   ┌ wire ns ──────┐     ┌ client ns ─┐ ┌ router ns ┐ ┌ server ns ─┐
//!  │ quic-client      │   │  raw socket   │     │ vec0 → c0  │ │ rc0 / rs0 │ │ s0 → vec1  │
//!  │ c0 10.201.1.2 ───┼───┼─ w0 ═══ vec0 ─┼─────┤  netem up  ├─┤  shapers  ├─┤  netem down│
//!  └──────────────────┘   │               │     └────────────┘ └───────────┘ └────────────┘
//!  ┌ server ns ───────┐   │               │            (the netem backend's own topology,
//!  │ quic-server      │   │  raw socket   │             built by the same code as on a
//!  │ s0 10.201.2.2 ───┼───┼─ w1 ═══ vec1 ─┼─────        host that has netem)
//!  └──────────────────┘   └───────────────┘
//! ```
//!
//! The guest is booted once per `cclab` process ([`GuestRouter`], kept
//! in a process-wide slot, so a run's repetitions and a sweep's runs share
//! it) with its network interfaces on the host: interface `vecK` is UML's
//! vector driver on a raw packet socket bound to veth end `wK` in a
//! namespace of the guest's own (`cclab-<pid>-<n>-w`, where the UML
//! process runs), whose peer `hK` is moved into a host endpoint namespace
//! for each link. Inside the guest an agent (`cclab guest-agent`, this
//! same binary) builds the link exactly as the netem backend builds it on
//! a host with netem ([`KernelNet`]: netem on the sending
//! side's veth, the bottleneck's shaper and AQM on the router's egress),
//! then turns each of that topology's endpoint namespaces into a one-hop
//! forwarder: the endpoint's address moves off its veth, the vector
//! interface joins the namespace, and a host route plus a permanent
//! neighbour entry send the endpoint's packets out to the host. The host
//! endpoint namespace gets the address, gateway and neighbour entries the
//! guest's endpoint had, so the endpoints see the same addresses as on any
//! netem link. No ARP crosses the guest (every neighbour entry is
//! permanent), and every veth has `gso_max_segs` 1, so the guest sees
//! packets, not GSO trains.
//!
//! Why a routed hop and not a bridge: the raw transport reads its
//! interface with one packet socket and writes it with another, so it
//! also reads back what it sends; it filters frames whose source address
//! is the vector interface's own. A router's frames carry that address; a
//! bridge's carry the original sender's, which would loop back into the
//! guest.
//!
//! The agent speaks JSON lines on the guest's fourth console, which the
//! host connects to two pipes. Its samples of the qdiscs go to files in
//! the guest's job directory (the host's, mounted), which
//! [`GuestSampler::stop`] moves into the run's directory. The guest dies
//! with the thread that started it (`PR_SET_PDEATHSIG`, on a thread that
//! lives as long as the guest), and its wire namespace carries the
//! owner's pid, so [`netns::cleanup`] removes what a killed run left.

use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::netem::{Caps, KernelNet, NetemError, Place};
use crate::netns::{self, NetnsError};
use crate::scenario::Scenario;
use crate::vm::{self, VmError, VmOptions};

/// Interfaces a guest is booted with at least (room for a single link and
/// for paths of up to four flows without a second boot).
pub const MIN_INTERFACES: usize = 8;

/// How often the guest samples its qdiscs. Every sample is a `tc` query
/// by a guest process, whose system calls trap through the host: at 20
/// ms (the host's interval) sampling took 14 points of the guest's CPU
/// (98% busy against 84% at 1 s, CUBIC at 100 Mbit/s); at 50 ms it takes
/// a third of that.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

/// How long the guest may take to boot and greet.
const BOOT_TIMEOUT: Duration = Duration::from_secs(90);

/// How long one request may take (a link with many namespaces takes a few
/// seconds in the guest).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the guest router cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// The guest cannot start.
    #[error(transparent)]
    Vm(#[from] VmError),
    /// A namespace or device on the host.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The guest's kernel cannot build the link.
    #[error("the guest router's kernel ({kernel}) cannot build this link: {why}")]
    Link {
        /// The guest's `uname -r`.
        kernel: String,
        /// What is missing.
        why: NetemError,
    },
    /// The agent failed or stopped answering.
    #[error("the guest router: {0}")]
    Agent(String),
    /// Host I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// One request to the agent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Build the link of `scenario` (resolved TOML) for the repetition
    /// with `seed`: endpoint `i` reaches the host through `vec{i}`, whose
    /// host end has MAC address `host_macs[i]`.
    Link {
        /// The resolved scenario (`Scenario::to_toml`).
        scenario: String,
        /// The repetition's seed.
        seed: u64,
        /// The host ends' MAC addresses, by interface.
        host_macs: Vec<String>,
        /// Also give the guest's own endpoints (Linux TCP flows whose
        /// algorithm only the guest's kernel has) addresses behind the
        /// router (one link only).
        #[serde(default)]
        guest_endpoints: bool,
    },
    /// Start sampling the link's qdiscs into these files of the job
    /// directory (one per link).
    SampleStart {
        /// File names.
        files: Vec<String>,
        /// Interval, ms.
        interval_ms: u64,
    },
    /// Stop sampling and finish the files.
    SampleStop,
    /// The guest's `/proc/stat` (its first line).
    Stat,
    /// Run a program in the guest; its status and output.
    Exec {
        /// Program and arguments.
        argv: Vec<String>,
    },
    /// Remove the link (the interfaces return to the guest's root
    /// namespace).
    Teardown,
    /// End the agent (the guest powers off).
    Quit,
}

/// The agent's greeting.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    /// The guest kernel's qdiscs.
    pub caps: Caps,
    /// `uname -r`.
    pub kernel: String,
    /// Interfaces the guest has (`vec0`...).
    pub interfaces: usize,
    /// The guest kernel's TCP congestion controls.
    #[serde(default)]
    pub tcp: crate::scenario::tcp::KernelAlgorithms,
}

/// One endpoint of a link as the guest built it: what its host namespace
/// gets.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Endpoint {
    /// Its device name (`c0`, `s0`, `cl`, `sv`).
    pub dev: String,
    /// Its address and prefix length.
    pub ip: Ipv4Addr,
    /// Prefix length.
    pub prefix: u8,
    /// Its gateway (a guest address).
    pub gateway: Ipv4Addr,
    /// The MAC address the gateway is reached at (the vector interface's).
    pub gateway_mac: String,
}

/// What the agent built for one link.
#[derive(Debug, Serialize, Deserialize)]
pub struct LinkReply {
    /// Per interface `i`, endpoint `i`: flow k's client is `2k`, its
    /// server `2k + 1` (one link: 0 and 1 for every flow).
    pub endpoints: Vec<Endpoint>,
    /// Per flow, its server's address.
    pub server_ips: Vec<Ipv4Addr>,
    /// Every command run in the guest, one line each.
    pub commands: Vec<String>,
    /// Where the guest's own endpoints run (`guest_endpoints`): its
    /// client and server namespaces (in the guest) and the server's
    /// address.
    #[serde(default)]
    pub guest_place: Option<(String, String, Ipv4Addr)>,
}

/// The guest's own endpoints' addresses (`guest_endpoints`): a client
/// beside the host's client, a server beside the host's server, on the
/// same subnets, local addresses of the guest's forwarding namespaces.
pub const GUEST_CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 1, 3);
/// See [`GUEST_CLIENT_IP`].
pub const GUEST_SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 2, 3);

/// Where a guest endpoint's namespace is named in a [`Place`]: this
/// prefix, then the guest's namespace.
pub const GUEST_NS: &str = "guest:";

#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    #[serde(rename = "ok")]
    Ok(serde_json::Value),
    #[serde(rename = "err")]
    Err(String),
}

/// A running guest router.
pub struct GuestRouter {
    pid: i32,
    exited: mpsc::Receiver<std::io::Result<std::process::ExitStatus>>,
    to_guest: std::fs::File,
    from_guest: mpsc::Receiver<String>,
    job: vm::Job,
    console: PathBuf,
    /// The wire namespace (the guest's process and the `wK` ends).
    pub wire_ns: String,
    /// The host ends' MAC addresses, by interface.
    host_macs: Vec<String>,
    /// The guest kernel's qdiscs and version.
    pub hello: Hello,
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A classic BPF socket filter that passes the frames a packet socket
/// receives and drops those its own interface sends (`pkttype` 4,
/// `PACKET_OUTGOING`), as the kernel loads it (`struct sock_filter`, 8
/// bytes each, native byte order). The raw transport reads and writes its
/// interface on two sockets, so without it the guest would read back
/// every frame it sent: twice the receive work, all of it thrown away.
/// (The transport's own filter drops frames from the interface's address
/// only while the interface keeps the address it was given.)
fn incoming_only_filter() -> Vec<u8> {
    const SKF_AD_PKTTYPE: u32 = 0xffff_f000 + 4;
    const PACKET_OUTGOING: u32 = 4;
    let prog: [(u16, u8, u8, u32); 4] = [
        (0x20, 0, 0, SKF_AD_PKTTYPE),  // ld  [pkttype]
        (0x15, 0, 1, PACKET_OUTGOING), // jeq #4, drop, pass
        (0x06, 0, 0, 0),               // drop: ret #0
        (0x06, 0, 0, u32::MAX),        // pass: ret #all
    ];
    let mut out = Vec::with_capacity(32);
    for (code, jt, jf, k) in prog {
        out.extend_from_slice(&code.to_ne_bytes());
        out.push(jt);
        out.push(jf);
        out.extend_from_slice(&k.to_ne_bytes());
    }
    out
}

/// The receive buffer of the guest's packet sockets, bytes: what the host
/// holds for the guest while it is not reading (about 1,800 full-size
/// frames at their kernel size, 0.2 s at 100 Mbit/s). With the kernel's
/// default (208 KiB, some 90 frames) a flow at 100 Mbit/s lost 187
/// packets in 10 s there, where no qdisc counted them.
pub const GUEST_RCVBUF: u64 = 4 << 20;

/// `net.core.rmem_default` raised to at least a value until dropped (it
/// is not per namespace: the host's, for sockets made meanwhile).
struct RcvBuf {
    old: Option<String>,
}

const RMEM_DEFAULT: &str = "/proc/sys/net/core/rmem_default";

impl RcvBuf {
    fn raise(to: u64) -> RcvBuf {
        let old = std::fs::read_to_string(RMEM_DEFAULT).ok();
        let cur: u64 = old
            .as_deref()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if cur >= to || std::fs::write(RMEM_DEFAULT, to.to_string()).is_err() {
            return RcvBuf { old: None };
        }
        RcvBuf { old }
    }
}

impl Drop for RcvBuf {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            let _ = std::fs::write(RMEM_DEFAULT, old.trim());
        }
    }
}

/// Whether `e` says the guest ended before its agent answered (not a
/// refusal or a timeout: those would only repeat).
fn died_booting(e: &GuestError) -> bool {
    matches!(e, GuestError::Agent(m) if m.starts_with(GUEST_STOPPED))
}

/// How an answer that never came because the guest ended begins.
const GUEST_STOPPED: &str = "the guest stopped";

fn ip(args: &[&str]) -> Result<String, NetnsError> {
    netns::run("ip", args)
}

/// Runs `ip ARGS` and records it in `commands` (the run's
/// `netns-commands.txt`).
fn recorded_ip(commands: &mut Vec<String>, args: &[&str]) -> Result<(), NetnsError> {
    ip(args)?;
    commands.push(format!("ip {}", args.join(" ")));
    Ok(())
}

impl GuestRouter {
    /// Boots a guest with `interfaces` network interfaces on the host and
    /// waits for its agent.
    pub fn boot(interfaces: usize, verbose: bool) -> Result<GuestRouter, GuestError> {
        if !netns::is_root() {
            return Err(NetnsError::NotRoot.into());
        }
        netns::cleanup(true)?;
        let t0 = Instant::now();
        let wire_ns = format!("{}-w", netns::new_id());
        netns::validate_name(&wire_ns)?;
        ip(&["netns", "add", &wire_ns])?;
        let built = (|| -> Result<Vec<String>, GuestError> {
            // The wire namespace only carries frames between the host
            // ends and the guest's sockets: no IPv6 chatter of its own.
            netns::run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &wire_ns,
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            )?;
            let segs = netns::GSO_MAX_SEGS.to_string();
            let mut macs = Vec::new();
            for k in 0..interfaces {
                let (h, w) = (format!("h{k}"), format!("w{k}"));
                ip(&[
                    "link",
                    "add",
                    &h,
                    "netns",
                    &wire_ns,
                    "gso_max_segs",
                    &segs,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &w,
                    "netns",
                    &wire_ns,
                    "gso_max_segs",
                    &segs,
                ])?;
                ip(&["-n", &wire_ns, "link", "set", &w, "up"])?;
                macs.push(netns::mac_address(&wire_ns, &h)?);
            }
            Ok(macs)
        })();
        let host_macs = match built {
            Ok(m) => m,
            Err(e) => {
                let _ = netns::delete(&wire_ns);
                return Err(e);
            }
        };
        // A user-mode kernel now and then dies of a fault while it boots
        // (a fatal SIGSEGV in init, seen once under load): one more boot
        // on the same wires, said on the terminal.
        let mut booted = Self::start(&wire_ns, host_macs.clone(), interfaces, verbose, t0);
        if let Err(e) = &booted {
            if died_booting(e) {
                eprintln!("cclab: the guest router's kernel stopped while it booted; booting it once more ({e})");
                booted = Self::start(&wire_ns, host_macs, interfaces, verbose, t0);
            }
        }
        match booted {
            Ok(r) => Ok(r),
            Err(e) => {
                let _ = netns::delete(&wire_ns);
                Err(e)
            }
        }
    }

    fn start(
        wire_ns: &str,
        host_macs: Vec<String>,
        interfaces: usize,
        verbose: bool,
        t0: Instant,
    ) -> Result<GuestRouter, GuestError> {
        let job = vm::new_job()?;
        std::fs::create_dir_all(job.dir.join(crate::guest_exec::SPAWN_DIR))?;
        let (g_in_r, g_in_w) = pipe()?;
        let (g_out_r, g_out_w) = pipe()?;
        let bpf = job.dir.join("incoming-only.bpf");
        std::fs::write(&bpf, incoming_only_filter())?;
        let mut args: Vec<String> = (0..interfaces)
            .map(|k| {
                format!(
                    "vec{k}:transport=raw,ifname=w{k},depth=128,bpffile={}",
                    bpf.display()
                )
            })
            .collect();
        args.push("con3=fd:4,fd:5".into());
        let output = std::fs::File::create(job.dir.join("agent.log"))?;
        let extra = vm::UmlExtras {
            args,
            fds: vec![(g_in_r.as_raw_fd(), 4), (g_out_w.as_raw_fd(), 5)],
            netns: Some(wire_ns.to_string()),
            output: Some(output),
            die_with_parent: true,
        };
        let exe = std::env::current_exe()?.to_string_lossy().into_owned();
        let cmd = vec![
            exe,
            "guest-agent".to_string(),
            "--tty".to_string(),
            "/dev/tty3".to_string(),
        ];
        let opts = VmOptions {
            memory_mb: 1024,
            verbose,
            ..Default::default()
        };
        // The guest is started on a thread of its own that waits for it:
        // PR_SET_PDEATHSIG fires when the *thread* that forked it ends.
        let (tx_pid, rx_pid) = mpsc::channel();
        let (tx_exit, exited) = mpsc::channel();
        let job_ref = vm::Job {
            dir: job.dir.clone(),
        };
        std::thread::Builder::new()
            .name("guest-router".into())
            .spawn(move || {
                let spawned = vm::spawn_uml(&job_ref, &cmd, &opts, &extra);
                // The job directory is the router's to remove.
                std::mem::forget(job_ref);
                match spawned {
                    Ok((mut child, console)) => {
                        let _ = tx_pid.send(Ok((child.id() as i32, console)));
                        let _ = tx_exit.send(child.wait());
                    }
                    Err(e) => {
                        let _ = tx_pid.send(Err(e));
                    }
                }
            })?;
        let (pid, console) = rx_pid
            .recv()
            .map_err(|_| GuestError::Agent("the thread starting the guest ended".into()))??;
        drop((g_in_r, g_out_w));
        let to_guest = std::fs::File::from(g_in_w);
        let reader = BufReader::new(std::fs::File::from(g_out_r));
        let (tx_line, from_guest) = mpsc::channel();
        std::thread::Builder::new()
            .name("guest-router-reader".into())
            .spawn(move || {
                for line in reader.lines() {
                    let Ok(line) = line else { break };
                    if tx_line.send(line).is_err() {
                        break;
                    }
                }
            })?;
        let mut r = GuestRouter {
            pid,
            exited,
            to_guest,
            from_guest,
            job,
            console,
            wire_ns: wire_ns.to_string(),
            host_macs,
            hello: Hello {
                caps: Caps::default(),
                kernel: String::new(),
                interfaces: 0,
                tcp: Default::default(),
            },
        };
        let hello = r.receive(BOOT_TIMEOUT)?;
        r.hello = serde_json::from_value(hello)
            .map_err(|e| GuestError::Agent(format!("its greeting: {e}")))?;
        if r.hello.interfaces < interfaces {
            return Err(GuestError::Agent(format!(
                "the guest has {} of the {interfaces} network interfaces it was given",
                r.hello.interfaces
            )));
        }
        if verbose {
            eprintln!(
                "cclab: guest router up in {:.1} s (kernel {}, {interfaces} interfaces)",
                t0.elapsed().as_secs_f64(),
                r.hello.kernel
            );
        }
        Ok(r)
    }

    /// The last lines of the guest's console and agent log.
    fn last_words(&self) -> String {
        format!(
            "console:\n{}\nagent:\n{}",
            vm::tail(&self.console, 15),
            vm::tail(&self.job.dir.join("agent.log"), 15)
        )
    }

    fn receive(&mut self, timeout: Duration) -> Result<serde_json::Value, GuestError> {
        let line = loop {
            match self.from_guest.recv_timeout(timeout) {
                // Anything before the agent's raw mode (an echo) is not
                // a reply.
                Ok(l) if !l.trim_start().starts_with('{') => continue,
                Ok(l) => break l,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(GuestError::Agent(format!(
                        "no answer within {} s; {}",
                        timeout.as_secs(),
                        self.last_words()
                    )))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(GuestError::Agent(format!(
                        "{GUEST_STOPPED}; {}",
                        self.last_words()
                    )))
                }
            }
        };
        match serde_json::from_str::<Reply>(line.trim()) {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Err(e)) => Err(GuestError::Agent(e)),
            Err(e) => Err(GuestError::Agent(format!(
                "an unreadable answer ({e}): {line}"
            ))),
        }
    }

    /// Sends `req` and waits for the answer.
    pub fn call(&mut self, req: &Request) -> Result<serde_json::Value, GuestError> {
        let mut line = serde_json::to_string(req).map_err(std::io::Error::from)?;
        line.push('\n');
        self.to_guest.write_all(line.as_bytes())?;
        self.to_guest.flush()?;
        self.receive(CALL_TIMEOUT)
    }

    /// The first line of the guest's `/proc/stat` now.
    pub fn cpu(&mut self) -> Option<String> {
        let v = self.call(&Request::Stat).ok()?;
        v.as_str().map(str::to_string)
    }

    /// The job directory (the guest's `/run/job`).
    pub fn job_dir(&self) -> &Path {
        &self.job.dir
    }

    /// Asks the agent to end and waits a moment for the guest, then kills
    /// it and removes its namespace.
    pub fn shutdown(mut self) {
        let _ = self
            .to_guest
            .write_all(b"{\"op\":\"quit\"}\n")
            .and_then(|_| self.to_guest.flush());
        if self.exited.recv_timeout(Duration::from_secs(5)).is_err() {
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = self.exited.recv_timeout(Duration::from_secs(5));
        }
        let _ = netns::delete(&self.wire_ns);
    }
}

/// Whether netem links run in the guest router: `CCLAB_NETEM_ROUTER` =
/// `guest` or `host` decides; otherwise (`auto`) the guest when this is
/// not itself a guest and the host's kernel has no netem.
/// Decided once per process: the host's kernel does not change under a
/// run, and [`crate::netem::probe`] builds a scratch namespace each time.
pub fn wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| match std::env::var("CCLAB_NETEM_ROUTER").as_deref() {
        Ok("guest") => true,
        Ok("host") => false,
        _ => std::env::var_os("CCLAB_IN_VM").is_none() && !crate::netem::probe().netem,
    })
}

/// The process's guest router, booted on first use.
static ROUTER: Mutex<Option<GuestRouter>> = Mutex::new(None);

/// Runs `f` with the process's guest router, booting one with at least
/// `interfaces` interfaces first if there is none, or if the one there
/// has fewer.
pub fn with_router<T>(
    interfaces: usize,
    verbose: bool,
    f: impl FnOnce(&mut GuestRouter) -> Result<T, GuestError>,
) -> Result<T, GuestError> {
    let mut slot = ROUTER.lock().unwrap_or_else(|e| e.into_inner());
    if slot
        .as_ref()
        .is_some_and(|r| r.host_macs.len() < interfaces)
    {
        if let Some(r) = slot.take() {
            r.shutdown();
        }
    }
    if slot.is_none() {
        *slot = Some(GuestRouter::boot(interfaces.max(MIN_INTERFACES), verbose)?);
    }
    f(slot.as_mut().expect("booted"))
}

/// The command that runs `bin` in guest namespace `ns` (a [`Place`]'s
/// `guest:NAME`) through the guest router's spawner: `cclab guest-exec`,
/// a stand-in whose output and exit status are the program's
/// ([`crate::guest_exec`]). `None` when no guest router runs.
pub fn exec_command(ns: &str, bin: &Path) -> Option<std::process::Command> {
    let guest_ns = ns.strip_prefix(GUEST_NS)?;
    let spawn = with_existing(|r| r.job_dir().join(crate::guest_exec::SPAWN_DIR))?;
    // This process is cclab, or a test using the library: then the cclab
    // beside the endpoint programs.
    let exe = std::env::current_exe()
        .ok()
        .filter(|e| e.file_name().is_some_and(|n| n == "cclab"))
        .or_else(|| bin.parent().map(|d| d.join("cclab")))?;
    let mut c = std::process::Command::new(exe);
    c.arg("guest-exec")
        .arg("--dir")
        .arg(spawn)
        .args(["--ns", guest_ns, "--"])
        .arg(bin);
    Some(c)
}

/// Runs `f` with the process's guest router if one runs (never boots
/// one).
fn with_existing<T>(f: impl FnOnce(&mut GuestRouter) -> T) -> Option<T> {
    let mut slot = ROUTER.lock().unwrap_or_else(|e| e.into_inner());
    slot.as_mut().map(f)
}

/// Stops the process's guest router, if one runs (the end of `cclab
/// run`, `sweep`, ...; also safe to call when none was booted).
pub fn shutdown() {
    let r = ROUTER.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(r) = r {
        r.shutdown();
    }
}

/// One repetition's link built in the guest, with its host endpoint
/// namespaces; removed on drop.
pub struct GuestLink {
    /// Where each flow's endpoints run (host namespaces).
    pub places: Vec<Place>,
    /// The first client's address (in `places[0].client_ns`).
    pub client_ip: Ipv4Addr,
    /// Every command that built it, host and guest, one line each.
    pub commands: Vec<String>,
    /// Host endpoint namespaces and, per namespace, the interface index
    /// and device name of its host end.
    host: Vec<(String, usize, String)>,
    /// Links sampled (one per link of the topology).
    links: usize,
    removed: bool,
}

/// Builds `sc`'s link (one link, or its paths) for the repetition with
/// `seed` in the guest router, with host namespaces for the endpoints.
pub fn setup(sc: &Scenario, seed: u64, dir: &Path, verbose: bool) -> Result<GuestLink, GuestError> {
    let nflows = sc.flow_routes().len();
    // Linux TCP flows whose algorithm this host's kernel lacks run in the
    // guest.
    let host = crate::scenario::tcp::this_kernel();
    let in_guest: Vec<Option<String>> = sc
        .rep_flows(seed)
        .iter()
        .map(|(_, f)| f.tcp_cc().filter(|n| !host.has(n)).map(str::to_string))
        .collect();
    let guest_endpoints = in_guest.iter().any(Option::is_some);
    if guest_endpoints {
        let cwd = std::env::current_dir()?;
        if !vm::guest_can_write(dir, &cwd, &[]) {
            return Err(GuestError::Agent(format!(
                "a Linux TCP flow here runs in the guest, which writes its records only under {}, /tmp and /var/tmp, not {}: choose an --out there",
                cwd.display(),
                dir.display()
            )));
        }
    }
    let paths = sc.has_paths();
    if guest_endpoints
        && [&sc.link.up, &sc.link.down]
            .iter()
            .any(|d| d.aggregate.is_some())
    {
        return Err(GuestError::Agent(
            "aggregation on netem holds packets where they leave the guest for this host, and a Linux TCP flow whose algorithm only the guest's kernel has never leaves it: run the flow with an algorithm this host has, or on --link emu".into(),
        ));
    }
    if paths && guest_endpoints {
        return Err(GuestError::Agent(
            "Linux TCP flows whose algorithm only the guest's kernel has run on one link only, not on several links or per-flow paths".into(),
        ));
    }
    let interfaces = if paths { 2 * nflows } else { 2 };
    let scenario = toml::to_string(&sc.to_toml())
        .map_err(|e| GuestError::Agent(format!("the scenario as TOML: {e}")))?;
    with_router(interfaces, verbose, |r| {
        // Refused before any process starts: what this guest's kernel
        // lacks.
        let topo = sc.topology();
        for (i, name) in in_guest.iter().enumerate() {
            if let Some(name) = name.as_deref().filter(|n| !r.hello.tcp.has(n)) {
                return Err(GuestError::Agent(format!(
                    "flow {i} (`tcp:{name}`): neither this host's kernel ({}) nor the guest's ({}) has the TCP congestion control `{name}`; the guest's {}",
                    host.release,
                    r.hello.kernel,
                    r.hello.tcp.listing()
                )));
            }
        }
        if paths {
            crate::netem::net::refuse_one_link_elements(&topo).map_err(|e| GuestError::Link {
                kernel: r.hello.kernel.clone(),
                why: e,
            })?;
        }
        for l in &topo.links {
            crate::netem::check_link(&l.spec, &r.hello.caps, true).map_err(|e| {
                GuestError::Link {
                    kernel: r.hello.kernel.clone(),
                    why: e,
                }
            })?;
        }
        // The guest opens its interfaces' packet sockets when it brings
        // them up, here, with the host's default receive buffer.
        let v = {
            let _big = RcvBuf::raise(GUEST_RCVBUF);
            r.call(&Request::Link {
                scenario,
                seed,
                host_macs: r.host_macs[..interfaces].to_vec(),
                guest_endpoints,
            })?
        };
        let reply: LinkReply =
            serde_json::from_value(v).map_err(|e| GuestError::Agent(format!("its link: {e}")))?;
        let mut link = GuestLink {
            places: Vec::new(),
            client_ip: reply
                .endpoints
                .first()
                .map(|e| e.ip)
                .ok_or_else(|| GuestError::Agent("its link has no endpoints".into()))?,
            commands: reply
                .commands
                .iter()
                .map(|c| format!("guest# {c}"))
                .collect(),
            host: Vec::new(),
            links: topo.links.len(),
            removed: false,
        };
        let built = link.build_host(r, &reply, nflows, paths);
        if let Err(e) = built {
            link.remove_with(r);
            return Err(e);
        }
        if let Some((c, s, ip)) = &reply.guest_place {
            for (i, name) in in_guest.iter().enumerate() {
                let Some(name) = name else { continue };
                link.commands.push(format!(
                    "# flow {i} (tcp:{name}, which this host's kernel lacks): both endpoints in the guest, namespaces {c} and {s}, server {ip}"
                ));
                link.places[i] = Place {
                    client_ns: format!("{GUEST_NS}{c}"),
                    server_ns: format!("{GUEST_NS}{s}"),
                    server_ip: *ip,
                };
            }
        }
        Ok(link)
    })
}

impl GuestLink {
    fn build_host(
        &mut self,
        r: &mut GuestRouter,
        reply: &LinkReply,
        nflows: usize,
        paths: bool,
    ) -> Result<(), GuestError> {
        let id = netns::new_id();
        let mut names = Vec::new();
        for (k, e) in reply.endpoints.iter().enumerate() {
            let ns = if paths {
                format!("{id}-{}{}", if k % 2 == 0 { "c" } else { "s" }, k / 2)
            } else {
                format!("{id}-{}", if k == 0 { "c" } else { "s" })
            };
            netns::validate_name(&ns)?;
            netns::validate_name(&e.dev)?;
            let cmds = &mut self.commands;
            recorded_ip(cmds, &["netns", "add", &ns])?;
            self.host.push((ns.clone(), k, e.dev.clone()));
            let cmds = &mut self.commands;
            let (h, gw) = (format!("h{k}"), e.gateway.to_string());
            recorded_ip(cmds, &["-n", &ns, "link", "set", "lo", "up"])?;
            recorded_ip(cmds, &["-n", &r.wire_ns, "link", "set", &h, "netns", &ns])?;
            recorded_ip(cmds, &["-n", &ns, "link", "set", &h, "name", &e.dev])?;
            let cidr = format!("{}/{}", e.ip, e.prefix);
            recorded_ip(cmds, &["-n", &ns, "addr", "add", &cidr, "dev", &e.dev])?;
            recorded_ip(cmds, &["-n", &ns, "link", "set", &e.dev, "up"])?;
            recorded_ip(
                cmds,
                &[
                    "-n",
                    &ns,
                    "neigh",
                    "replace",
                    &gw,
                    "lladdr",
                    &e.gateway_mac,
                    "dev",
                    &e.dev,
                    "nud",
                    "permanent",
                ],
            )?;
            recorded_ip(cmds, &["-n", &ns, "route", "add", "default", "via", &gw])?;
            names.push(ns);
        }
        self.places = (0..nflows)
            .map(|k| {
                let (c, s) = if paths { (2 * k, 2 * k + 1) } else { (0, 1) };
                Place {
                    client_ns: names[c].clone(),
                    server_ns: names[s].clone(),
                    server_ip: reply.server_ips[k],
                }
            })
            .collect();
        Ok(())
    }

    fn remove_with(&mut self, r: &mut GuestRouter) {
        if self.removed {
            return;
        }
        self.removed = true;
        for (ns, k, dev) in self.host.drain(..) {
            // The host end goes back to the wire namespace (deleting the
            // namespace would delete the veth pair, and the guest's
            // interface with it), then the namespace goes.
            let _ = ip(&["-n", &ns, "link", "set", &dev, "netns", &r.wire_ns]);
            let _ = ip(&[
                "-n",
                &r.wire_ns,
                "link",
                "set",
                &dev,
                "name",
                &format!("h{k}"),
            ]);
            let _ = netns::delete(&ns);
        }
        let _ = r.call(&Request::Teardown);
    }

    /// Samples every link's qdiscs every `interval` into `files[i]` (link
    /// `i`) until the sampler is stopped.
    pub fn start_sampler(
        &self,
        interval: Duration,
        files: Vec<PathBuf>,
    ) -> Result<GuestSampler, GuestError> {
        if files.len() != self.links {
            return Err(GuestError::Agent(format!(
                "{} sample files for {} links",
                files.len(),
                self.links
            )));
        }
        let names: Vec<String> = (0..files.len())
            .map(|i| format!("samples-{i}.jsonl"))
            .collect();
        // The link's scheduled changes, applied by the guest's sampler,
        // are logged beside its first file.
        let changes_to = files[0].with_file_name(crate::netem::changes::LOG);
        with_existing(|r| {
            for n in names
                .iter()
                .map(String::as_str)
                .chain([crate::netem::changes::LOG])
            {
                let _ = std::fs::remove_file(r.job_dir().join(n));
            }
            r.call(&Request::SampleStart {
                files: names.clone(),
                interval_ms: interval.as_millis() as u64,
            })?;
            let from = names.iter().map(|n| r.job_dir().join(n)).collect();
            Ok(GuestSampler {
                from,
                to: files,
                changes: (r.job_dir().join(crate::netem::changes::LOG), changes_to),
            })
        })
        .unwrap_or_else(|| Err(GuestError::Agent("the guest router has stopped".into())))
    }

    /// Writes the guest's interface counters (every namespace's `ip -s -s
    /// link`, and its `softnet_stat`) into `path`: where packets were
    /// lost outside the qdiscs, if anywhere.
    pub fn record_counters(&self, path: &Path) -> Result<(), GuestError> {
        let script = "for n in $(ip netns list | cut -d' ' -f1); do echo \"== $n\"; ip -n $n -s -s link; done; echo '== softnet_stat'; cat /proc/net/softnet_stat";
        let (v, wire_ns) = with_existing(|r| {
            let v = r.call(&Request::Exec {
                argv: vec!["sh".into(), "-c".into(), script.into()],
            });
            (v, r.wire_ns.clone())
        })
        .ok_or_else(|| GuestError::Agent("the guest router has stopped".into()))?;
        let host = netns::run("ip", &["-n", &wire_ns, "-s", "-s", "link"]).unwrap_or_default();
        let text = format!(
            "{}\n== host: {wire_ns} (the guest's side of each interface)\n{host}",
            v?.get("stdout")
                .and_then(|s| s.as_str())
                .unwrap_or_default(),
        );
        crate::files::write_synced_atomic(path, text.as_bytes())?;
        Ok(())
    }

    /// The first line of the guest's `/proc/stat` now.
    pub fn guest_cpu(&self) -> Option<String> {
        with_existing(|r| r.cpu()).flatten()
    }
}

impl Drop for GuestLink {
    fn drop(&mut self) {
        if !self.removed {
            with_existing(|r| self.remove_with(r));
        }
    }
}

/// Sampling in the guest.
pub struct GuestSampler {
    from: Vec<PathBuf>,
    to: Vec<PathBuf>,
    /// The changes' log, there when the link has changes.
    changes: (PathBuf, PathBuf),
}

impl GuestSampler {
    /// Stops sampling and moves the files into place.
    pub fn stop(self) -> Result<(), GuestError> {
        with_existing(|r| r.call(&Request::SampleStop))
            .unwrap_or_else(|| Err(GuestError::Agent("the guest router has stopped".into())))?;
        let changes = Some(&self.changes).filter(|(from, _)| from.exists());
        let pairs = self.from.iter().zip(&self.to);
        for (from, to) in pairs.chain(changes.map(|(f, t)| (f, t))) {
            if let Some(d) = to.parent() {
                std::fs::create_dir_all(d)?;
            }
            if std::fs::rename(from, to).is_err() {
                std::fs::copy(from, to)?;
                let _ = std::fs::remove_file(from);
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- guest side

/// Runs in the guest: answers requests on `tty` until told to quit.
pub fn agent(tty: &Path) -> anyhow::Result<()> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(tty)?;
    raw_mode(&f)?;
    let mut out = f.try_clone()?;
    let input = BufReader::new(f);
    let caps = crate::netem::probe().as_router();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let interfaces = (0..)
        .take_while(|k| Path::new(&format!("/sys/class/net/vec{k}")).exists())
        .count();
    let hello = Hello {
        caps,
        kernel,
        interfaces,
        tcp: crate::scenario::tcp::this_kernel(),
    };
    let send = |out: &mut std::fs::File, r: Reply| -> std::io::Result<()> {
        let mut s = serde_json::to_string(&r).map_err(std::io::Error::from)?;
        s.push('\n');
        out.write_all(s.as_bytes())?;
        out.flush()
    };
    let spawning = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = spawning.clone();
        std::thread::spawn(move || {
            crate::guest_exec::spawner(
                Path::new("/run/job").join(crate::guest_exec::SPAWN_DIR),
                stop,
            )
        });
    }
    send(&mut out, Reply::Ok(serde_json::to_value(&hello)?))?;
    let mut built: Option<(KernelNet, Vec<(String, String)>)> = None;
    let mut sampler: Option<crate::netem::Sampler> = None;
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let req: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                send(&mut out, Reply::Err(format!("unreadable request: {e}")))?;
                continue;
            }
        };
        if matches!(req, Request::Quit) {
            break;
        }
        let r = handle(req, &mut built, &mut sampler);
        eprintln!("agent: {}", if r.is_ok() { "ok" } else { "error" });
        send(
            &mut out,
            match r {
                Ok(v) => Reply::Ok(v),
                Err(e) => Reply::Err(format!("{e:#}")),
            },
        )?;
    }
    spawning.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(s) = sampler.take() {
        let _ = s.stop();
    }
    if let Some((b, moved)) = built.take() {
        teardown(b, &moved);
    }
    Ok(())
}

fn raw_mode(f: &std::fs::File) -> std::io::Result<()> {
    // SAFETY: termios calls on an open terminal descriptor with a struct
    // they fill.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(f.as_raw_fd(), &mut t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::cfmakeraw(&mut t);
        if libc::tcsetattr(f.as_raw_fd(), libc::TCSANOW, &t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn handle(
    req: Request,
    built: &mut Option<(KernelNet, Vec<(String, String)>)>,
    sampler: &mut Option<crate::netem::Sampler>,
) -> anyhow::Result<serde_json::Value> {
    match req {
        Request::Link {
            scenario,
            seed,
            host_macs,
            guest_endpoints,
        } => {
            if let Some(s) = sampler.take() {
                s.stop()?;
            }
            if let Some((b, moved)) = built.take() {
                teardown(b, &moved);
            }
            let base = std::env::current_dir()?;
            let sc = Scenario::parse(&scenario, "the host's scenario", &base)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let caps = crate::netem::probe().as_router();
            let b = KernelNet::setup(
                &sc.topology().with_seed(seed),
                &sc.flow_routes(),
                &caps,
                1500,
                true,
            )?;
            let ends = b.endpoint_devices();
            let server_ips: Vec<_> = b.flows.iter().map(|f| f.server_ip).collect();
            let mut commands: Vec<String> = b.commands.iter().map(|c| c.join(" ")).collect();
            if host_macs.len() < ends.len() {
                anyhow::bail!(
                    "{} endpoints, {} host interfaces",
                    ends.len(),
                    host_macs.len()
                );
            }
            let mut endpoints = Vec::new();
            let mut moved = Vec::new();
            let mut result = Ok(());
            for (k, (ns, dev)) in ends.iter().enumerate() {
                match graft(ns, dev, k, &host_macs[k], &mut commands) {
                    Ok(e) => {
                        endpoints.push(e);
                        moved.push((ns.clone(), format!("vec{k}")));
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            if let (Ok(()), [l]) = (&result, b.topology.links.as_slice()) {
                result = aggregate_on_exits(&l.spec, &ends, &mut commands);
            }
            let mut guest_place = None;
            if result.is_ok() && guest_endpoints {
                result = match b.namespaces() {
                    Some(t) => guest_addresses(t, &mut commands).map(|p| {
                        guest_place = Some(p);
                    }),
                    None => Err(anyhow::anyhow!(
                        "guest endpoints on several links (refused by the host first)"
                    )),
                };
            }
            if let Err(e) = result {
                teardown(b, &moved);
                return Err(e);
            }
            *built = Some((b, moved));
            Ok(serde_json::to_value(LinkReply {
                endpoints,
                server_ips,
                commands,
                guest_place,
            })?)
        }
        Request::SampleStart { files, interval_ms } => {
            if let Some(s) = sampler.take() {
                s.stop()?;
            }
            let Some((b, _)) = built.as_ref() else {
                anyhow::bail!("no link to sample");
            };
            let job = Path::new("/run/job");
            let paths: Vec<PathBuf> = files.iter().map(|f| job.join(f)).collect();
            let every = Duration::from_millis(interval_ms.max(1));
            *sampler = Some(b.start_sampler(every, &paths)?);
            Ok(serde_json::Value::Null)
        }
        Request::SampleStop => {
            if let Some(s) = sampler.take() {
                s.stop()?;
            }
            Ok(serde_json::Value::Null)
        }
        Request::Stat => {
            let s = std::fs::read_to_string("/proc/stat")?;
            Ok(s.lines().next().unwrap_or_default().into())
        }
        Request::Teardown => {
            if let Some(s) = sampler.take() {
                let _ = s.stop();
            }
            if let Some((b, moved)) = built.take() {
                teardown(b, &moved);
            }
            Ok(serde_json::Value::Null)
        }
        Request::Exec { argv } => {
            let (prog, args) = argv
                .split_first()
                .ok_or_else(|| anyhow::anyhow!("exec: no program"))?;
            let out = std::process::Command::new(prog).args(args).output()?;
            Ok(serde_json::json!({
                "status": out.status.code(),
                "stdout": String::from_utf8_lossy(&out.stdout),
                "stderr": String::from_utf8_lossy(&out.stderr),
            }))
        }
        Request::Quit => Ok(serde_json::Value::Null),
    }
}

/// A single link's aggregation ([`crate::netem::aggregation_args`]) on
/// the device each direction leaves the guest by once it has crossed the
/// link: `vec1` in the server's forwarder going up, `vec0` in the
/// client's going down (`ends`: the forwarders, client first).
fn aggregate_on_exits(
    link: &crate::link::LinkSpec,
    ends: &[(String, String)],
    commands: &mut Vec<String>,
) -> anyhow::Result<()> {
    use crate::link::Dir;
    for (dir, k) in [(Dir::Up, 1usize), (Dir::Down, 0)] {
        let d = link.dir(dir);
        let Some(a) = d.aggregate else { continue };
        let args = crate::netem::aggregation_args(&ends[k].0, &format!("vec{k}"), &a, d.rate_bps);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        netns::run("tc", &refs)?;
        commands.push(format!("tc {}", args.join(" ")));
    }
    Ok(())
}

/// Makes endpoint namespace `ns` a forwarder between its veth `dev` and
/// the host, through `vec{k}` (whose host end has `host_mac`); what the
/// host's endpoint gets.
fn graft(
    ns: &str,
    dev: &str,
    k: usize,
    host_mac: &str,
    commands: &mut Vec<String>,
) -> anyhow::Result<Endpoint> {
    let vec = format!("vec{k}");
    let addr = netns::run("ip", &["-n", ns, "-j", "-4", "addr", "show", "dev", dev])?;
    let (ip, prefix) = parse_addr(&addr)
        .ok_or_else(|| anyhow::anyhow!("no IPv4 address on {dev} in {ns}: {addr}"))?;
    let routes = netns::run("ip", &["-n", ns, "-j", "route", "show", "default"])?;
    let gateway = parse_gateway(&routes)
        .ok_or_else(|| anyhow::anyhow!("no default route in {ns}: {routes}"))?;
    let mut run = |args: &[&str]| recorded_ip(commands, args);
    let cidr = format!("{ip}/{prefix}");
    run(&["link", "set", &vec, "netns", ns])?;
    run(&["-n", ns, "addr", "del", &cidr, "dev", dev])?;
    run(&[
        "-n",
        ns,
        "route",
        "replace",
        &gateway.to_string(),
        "dev",
        dev,
    ])?;
    run(&[
        "-n",
        ns,
        "route",
        "replace",
        "default",
        "via",
        &gateway.to_string(),
        "dev",
        dev,
    ])?;
    run(&["-n", ns, "link", "set", &vec, "up"])?;
    run(&[
        "-n",
        ns,
        "route",
        "replace",
        &format!("{ip}/32"),
        "dev",
        &vec,
    ])?;
    run(&[
        "-n",
        ns,
        "neigh",
        "replace",
        &ip.to_string(),
        "lladdr",
        host_mac,
        "dev",
        &vec,
        "nud",
        "permanent",
    ])?;
    run(&netns::forwarding_args(ns))?;
    let gateway_mac = netns::mac_address(ns, &vec)?;
    Ok(Endpoint {
        dev: dev.to_string(),
        ip,
        prefix,
        gateway,
        gateway_mac,
    })
}

/// Gives the forwarding namespaces of a single link addresses of their
/// own ([`GUEST_CLIENT_IP`], [`GUEST_SERVER_IP`]) for endpoints run in
/// the guest, and the router permanent neighbour entries for them: their
/// packets leave through the same qdiscs as the host's (netem on the
/// forwarder's veth, the shaper on the router's).
fn guest_addresses(
    t: &netns::Namespaces,
    commands: &mut Vec<String>,
) -> anyhow::Result<(String, String, Ipv4Addr)> {
    let mut run = |args: &[&str]| recorded_ip(commands, args);
    for (ns, dev, rdev, ip, gw) in [
        (
            &t.client,
            netns::CLIENT_DEV,
            netns::ROUTER_CLIENT_DEV,
            GUEST_CLIENT_IP,
            netns::ROUTER_CLIENT_IP,
        ),
        (
            &t.server,
            netns::SERVER_DEV,
            netns::ROUTER_SERVER_DEV,
            GUEST_SERVER_IP,
            netns::ROUTER_SERVER_IP,
        ),
    ] {
        let (ip, gw) = (ip.to_string(), gw.to_string());
        run(&["-n", ns, "addr", "add", &format!("{ip}/32"), "dev", "lo"])?;
        run(&[
            "-n", ns, "route", "replace", "default", "via", &gw, "dev", dev, "src", &ip,
        ])?;
        let mac = netns::mac_address(ns, dev)?;
        run(&[
            "-n",
            &t.router,
            "neigh",
            "replace",
            &ip,
            "lladdr",
            &mac,
            "dev",
            rdev,
            "nud",
            "permanent",
        ])?;
    }
    Ok((t.client.clone(), t.server.clone(), GUEST_SERVER_IP))
}

/// Moves the vector interfaces back to the guest's root namespace, then
/// removes the link.
fn teardown(b: KernelNet, moved: &[(String, String)]) {
    for (ns, vec) in moved {
        // An aggregation's netem, if there is one.
        let _ = netns::run("tc", &["-n", ns, "qdisc", "del", "dev", vec, "root"]);
        let _ = netns::run("ip", &["-n", ns, "link", "set", vec, "netns", "1"]);
    }
    drop(b);
}

/// The first IPv4 address and prefix in `ip -j addr show` output.
fn parse_addr(json: &str) -> Option<(Ipv4Addr, u8)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let a = v
        .as_array()?
        .first()?
        .get("addr_info")?
        .as_array()?
        .iter()
        .find(|a| a.get("family").and_then(|f| f.as_str()) == Some("inet"))?;
    Some((
        a.get("local")?.as_str()?.parse().ok()?,
        a.get("prefixlen")?.as_u64()? as u8,
    ))
}

/// The gateway of the default route in `ip -j route show default` output.
fn parse_gateway(json: &str) -> Option<Ipv4Addr> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.as_array()?
        .first()?
        .get("gateway")?
        .as_str()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_gateways_from_ip_json() {
        let a = r#"[{"ifindex":3,"ifname":"c0","addr_info":[{"family":"inet","local":"10.201.1.2","prefixlen":24}]}]"#;
        assert_eq!(parse_addr(a), Some((Ipv4Addr::new(10, 201, 1, 2), 24)));
        assert_eq!(parse_addr("[]"), None);
        let r = r#"[{"dst":"default","gateway":"10.201.1.1","dev":"c0","flags":[]}]"#;
        assert_eq!(parse_gateway(r), Some(Ipv4Addr::new(10, 201, 1, 1)));
        assert_eq!(parse_gateway("[]"), None);
    }

    #[test]
    fn requests_round_trip_as_json_lines() {
        let r = Request::Link {
            scenario: "name = \"x\"\n".into(),
            seed: 7,
            host_macs: vec!["02:00:00:00:00:01".into()],
            guest_endpoints: false,
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(!s.contains('\n'), "{s}");
        assert!(s.contains("\"op\":\"link\""), "{s}");
        let back: Request = serde_json::from_str(&s).unwrap();
        assert!(matches!(back, Request::Link { seed: 7, .. }));
        let e: Reply = serde_json::from_str(r#"{"err":"no netem"}"#).unwrap();
        assert!(matches!(e, Reply::Err(m) if m == "no netem"));
    }
}
