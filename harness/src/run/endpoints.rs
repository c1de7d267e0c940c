//! The endpoints of a repetition on `emu` or `netem`: one `quic-server`
//! process per flow, as separate hosts would be, and one `quic-client`
//! each, started at the flow's offset; at the end, each server's qlog
//! moved next to its client's. A Linux TCP flow (`cc = "tcp:NAME"`) runs
//! `tcp-bulk server` and `tcp-bulk client` in the same places instead, and
//! each end's records (`tcp-server.jsonl`, `tcp-client.jsonl`: the
//! sender's `TCP_INFO` samples, the receiver's counts) end up in the
//! flow's directory.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{RunConfig, RunError};
use crate::netem::Place;
use crate::scenario::{Direction, FlowSpec, Scenario};

/// `quic-server` and `quic-client`, and `tcp-bulk` for TCP flows.
pub(super) struct Binaries {
    pub server: PathBuf,
    pub client: PathBuf,
    /// Checked only when a TCP flow starts ([`Binaries::tcp`]).
    tcp: PathBuf,
    /// `cclab-syscount`, through which every endpoint starts when the
    /// run counts system calls (`RunConfig::count_syscalls`).
    syscount: Option<PathBuf>,
}

impl Binaries {
    /// The programs in `cfg.bin_dir`; an error if one is missing where
    /// the backend runs them.
    pub(super) fn find(cfg: &RunConfig) -> Result<Binaries, RunError> {
        let bins = Binaries {
            server: cfg.bin_dir.join("quic-server"),
            client: cfg.bin_dir.join("quic-client"),
            tcp: cfg.bin_dir.join(TCP_BULK),
            syscount: cfg
                .count_syscalls
                .then(|| cfg.bin_dir.join(crate::syscount::PROGRAM)),
        };
        if let Some(b) = &bins.syscount {
            if cfg.backend.real_time() && !b.exists() {
                return Err(RunError::Unsupported(format!(
                    "{} not found: --count-syscalls starts every endpoint through it; build it with `cargo build --release -p harness` (`make build` builds it too), or set CCLAB_BIN_DIR to where it is",
                    b.display()
                )));
            }
        }
        for b in [&bins.server, &bins.client] {
            if cfg.backend.real_time() && !b.exists() {
                return Err(RunError::MissingBinary(b.clone()));
            }
        }
        Ok(bins)
    }

    /// `tcp-bulk`, which flow `flow` (`spec`, Linux TCP) needs; an error
    /// saying how to build it when it is missing.
    fn tcp(&self, flow: usize, spec: &str) -> Result<&Path, RunError> {
        if self.tcp.exists() {
            return Ok(&self.tcp);
        }
        Err(RunError::Unsupported(format!(
            "{} not found: flow {flow} (`{spec}`) is a Linux TCP flow, which runs tcp-bulk at both ends; build it with `cargo build --release -p tcp-bulk` (`make build` builds it too), or set CCLAB_BIN_DIR to where it is",
            self.tcp.display()
        )))
    }
}

/// Where a repetition's system call counts go (`rep-N/syscalls/`).
pub const SYSCALLS_DIR: &str = "syscalls";

/// The program of Linux TCP flows.
pub const TCP_BULK: &str = "tcp-bulk";
/// Each end's records in a TCP flow's directory.
pub const TCP_SERVER_FILE: &str = "tcp-server.jsonl";
pub const TCP_CLIENT_FILE: &str = "tcp-client.jsonl";
/// The TCP sender's sampling interval, ms.
pub const TCP_INTERVAL_MS: u64 = 10;

/// A running server.
pub(super) struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    qlog_dir: PathBuf,
    /// A TCP flow's server: its records file.
    tcp_records: Option<PathBuf>,
}

/// A running (or ended) client.
pub(super) struct Client {
    pub child: Child,
    pub flow: usize,
    pub dir: PathBuf,
}

/// How the endpoints of one repetition are started: where (the netem
/// link's namespaces, or this host), on which address the servers listen,
/// and what both ends' qlogs record.
pub(super) struct Endpoints<'a> {
    bins: &'a Binaries,
    /// On netem, where each flow's client and server run.
    places: Option<Vec<Place>>,
    qlog_level: quic_app::QlogLevel,
    /// `qlog-scenario.json`: what both ends' qlogs say the run was taken
    /// under.
    event_file: PathBuf,
    /// When the run counts system calls: where each endpoint's count goes
    /// (`rep-N/syscalls/flow-I-ROLE.json`), and the tracepoints' ids the
    /// counter is handed (read once here: a namespace's /sys has no
    /// tracefs).
    syscalls: Option<(PathBuf, String)>,
}

impl<'a> Endpoints<'a> {
    /// Places the endpoints (in netem's namespaces, `places`, if there are
    /// any) and writes the repetition's `qlog-scenario.json`.
    pub(super) fn prepare(
        bins: &'a Binaries,
        places: Option<Vec<Place>>,
        qlog_level: quic_app::QlogLevel,
        event: &serde_json::Value,
        dir: &Path,
    ) -> Result<Endpoints<'a>, RunError> {
        let event_file = dir.join("qlog-scenario.json");
        std::fs::write(
            &event_file,
            serde_json::to_vec(event).map_err(std::io::Error::from)?,
        )?;
        let syscalls = match &bins.syscount {
            None => None,
            Some(_) => {
                let ids = crate::syscount::ids_env()
                    .map_err(|e| RunError::Unsupported(format!("--count-syscalls: {e}")))?;
                let d = dir.join(SYSCALLS_DIR);
                std::fs::create_dir_all(&d)?;
                Some((d, ids))
            }
        };
        Ok(Endpoints {
            bins,
            places,
            qlog_level,
            event_file,
            syscalls,
        })
    }

    /// One server per flow. Sharing one server process between flows
    /// couples their sending (one event loop, one socket) and, on a
    /// deterministic link, locks flows into drop-tail phase effects that
    /// real hosts do not have. Uploads use the server's default algorithm
    /// for its (tiny) sending.
    pub(super) fn start_servers(
        &self,
        flows: &[(usize, FlowSpec)],
        dir: &Path,
    ) -> Result<Vec<Server>, RunError> {
        // What cannot start is refused before any server runs.
        for (i, (_, f)) in flows.iter().enumerate() {
            if f.tcp_cc().is_some() {
                self.bins.tcp(i, &f.cc)?;
                self.tcp_place(i, f)?;
            }
        }
        // Dropped on an error, the servers started so far stop with it.
        let mut servers = Vec::new();
        for (i, (_, f)) in flows.iter().enumerate() {
            let sdir = dir.join(format!("servers/{i}"));
            servers.push(match f.tcp_cc() {
                Some(_) => self.spawn_tcp_server(i, f, &sdir)?,
                None => self.spawn_server(i, f.server_cc(), f.mtu, &f.transport, &sdir)?,
            });
        }
        Ok(servers)
    }

    /// Flow `i`'s `tcp-bulk server`, in the flow's server namespace. The
    /// kernel's TCP needs the kernel between the ends: namespaces joined
    /// by a link that carries IP (netem, or the emulator's IP mode); the
    /// UDP relay carries none.
    fn spawn_tcp_server(&self, i: usize, f: &FlowSpec, dir: &Path) -> Result<Server, RunError> {
        let bin = self.bins.tcp(i, &f.cc)?;
        let place = self.tcp_place(i, f)?;
        std::fs::create_dir_all(dir)?;
        let records = dir.join(TCP_SERVER_FILE);
        let listen = format!("{}:0", place.server_ip);
        let mut cmd = self.command(
            Some(place.server_ns.as_str()),
            bin,
            &format!("flow-{i}-server"),
        )?;
        cmd.args(["server", "--listen", listen.as_str(), "--samples"])
            .arg(&records);
        // The listener takes the flow's algorithm too: one that needs ECN
        // (dctcp) accepts it only on such a listener.
        if let Some(name) = f.tcp_cc() {
            cmd.args(["--cc", name]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("server.stderr"))?);
        let child = cmd
            .spawn()
            .map_err(|e| RunError::Server(format!("{}: {e}", bin.display())))?;
        let mut s = await_listening(child, dir)?;
        s.tcp_records = Some(records);
        Ok(s)
    }

    /// Where Linux TCP flow `i` runs: the kernel's TCP needs namespaces
    /// joined by a link that carries IP; the UDP relay has none.
    fn tcp_place(&self, i: usize, f: &FlowSpec) -> Result<&Place, RunError> {
        self.places.as_ref().map(|p| &p[i]).ok_or_else(|| {
            RunError::Unsupported(format!(
                "flow {i} (`{}`) is a Linux TCP flow, and the userspace emulator's UDP relay carries UDP datagrams only: run it with --link netem (--vm runs it in a guest when this kernel has no netem) or on the emulator's IP mode (root)",
                f.cc
            ))
        })
    }

    /// The command that starts `bin` in namespace `ns` (this host's own
    /// without one), through `cclab-syscount` when the run counts system
    /// calls (its count in `syscalls/ROLE.json`). Counting is refused for
    /// endpoints in the guest, whose kernel is not this one.
    fn command(&self, ns: Option<&str>, bin: &Path, role: &str) -> Result<Command, RunError> {
        let (Some(counter), Some((dir, ids))) = (&self.bins.syscount, &self.syscalls) else {
            return Ok(self.command_in(ns, bin));
        };
        if ns.is_some_and(|n| n.starts_with(crate::guest_router::GUEST_NS)) {
            return Err(RunError::Unsupported(format!(
                "{role} runs in the user-mode Linux guest (a Linux TCP algorithm only its kernel has), where --count-syscalls cannot count: count a flow whose endpoints run on this host"
            )));
        }
        let mut c = self.command_in(ns, counter);
        c.arg(dir.join(format!("{role}.json"))).arg("--").arg(bin);
        c.env(crate::syscount::IDS_ENV, ids);
        Ok(c)
    }

    fn command_in(&self, ns: Option<&str>, bin: &Path) -> Command {
        match ns {
            // An endpoint in the guest router (a Linux TCP algorithm only
            // the guest's kernel has).
            Some(ns) if ns.starts_with(crate::guest_router::GUEST_NS) => {
                crate::guest_router::exec_command(ns, bin).unwrap_or_else(|| {
                    // No guest router runs: a command that fails saying so.
                    let mut c = Command::new("sh");
                    c.args(["-c", "echo 'the guest router has stopped' >&2; exit 1"]);
                    c
                })
            }
            Some(ns) => crate::netns::Namespaces::command(ns, bin),
            None => Command::new(bin),
        }
    }

    fn spawn_server(
        &self,
        i: usize,
        cc: &str,
        mtu: Option<u16>,
        transport: &quic_app::transport::Transport,
        qlog_dir: &Path,
    ) -> Result<Server, RunError> {
        let bin = &self.bins.server;
        std::fs::create_dir_all(qlog_dir)?;
        let place = self.places.as_ref().map(|p| &p[i]);
        let listen = match place {
            Some(p) => format!("{}:0", p.server_ip),
            None => "127.0.0.1:0".to_string(),
        };
        let mut cmd = self.command(
            place.map(|p| p.server_ns.as_str()),
            bin,
            &format!("flow-{i}-server"),
        )?;
        cmd.args([
            "--listen",
            listen.as_str(),
            "--cc",
            cc,
            "--quiet",
            "--idle-timeout",
            "5",
            "--qlog-level",
            self.qlog_level.as_str(),
            "--qlog-scenario",
        ])
        .arg(&self.event_file)
        .arg("--qlog-dir")
        .arg(qlog_dir)
        .args(mtu.map(|m| format!("--mtu={m}")))
        .arg(format!("--ack-policy={}", transport.ack))
        .arg(format!("--small-packets={}", transport.small_packets))
        .arg(format!("--pacing={}", transport.pacing))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(qlog_dir.join("server.stderr"))?);
        let child = cmd
            .spawn()
            .map_err(|e| RunError::Server(format!("{}: {e}", bin.display())))?;
        await_listening(child, qlog_dir)
    }

    /// Starts flow `i`'s client against `addr` (the server, or the
    /// emulator's route to it), writing into `dir/flow-i`.
    pub(super) fn spawn_client(
        &self,
        sc: &Scenario,
        i: usize,
        f: &FlowSpec,
        addr: SocketAddr,
        dir: &Path,
    ) -> Result<Client, RunError> {
        let fdir = dir.join(format!("flow-{i}"));
        std::fs::create_dir_all(&fdir)?;
        let run_ns = f.run_ns(sc.duration_ns);
        let ns = self.places.as_ref().map(|p| p[i].client_ns.as_str());
        if let Some(name) = f.tcp_cc() {
            let mut cmd =
                self.command(ns, self.bins.tcp(i, &f.cc)?, &format!("flow-{i}-client"))?;
            cmd.args(["client", "--connect", &addr.to_string(), "--cc", name])
                .arg(match f.direction {
                    Direction::Download => "--download",
                    Direction::Upload => "--upload",
                })
                .args(match f.size {
                    Some(b) => ["--bytes".to_string(), b.to_string()],
                    None => ["--duration".into(), format!("{:.3}", run_ns as f64 / 1e9)],
                })
                .arg(format!("--interval-ms={TCP_INTERVAL_MS}"))
                .arg("--samples")
                .arg(fdir.join(TCP_CLIENT_FILE));
            return self.start_client(cmd, i, fdir);
        }
        let mut cmd = self.command(ns, &self.bins.client, &format!("flow-{i}-client"))?;
        cmd.arg(format!("https://{addr}{}", f.request_path()));
        if f.direction == Direction::Upload {
            cmd.args(["--upload", &f.bytes().to_string(), "--cc", &f.cc]);
        }
        if f.size.is_none() {
            cmd.args(["--duration", &format!("{:.3}", run_ns as f64 / 1e9)]);
        }
        if f.requests > 1 {
            cmd.arg(format!("--requests={}", f.requests));
        }
        if f.think_ns > 0 {
            cmd.arg(format!("--think={}", f.think_ns as f64 / 1e9));
        }
        if let Some(m) = f.mtu {
            cmd.arg(format!("--mtu={m}"));
        }
        cmd.arg(format!("--ack-policy={}", f.transport.ack))
            .arg(format!("--small-packets={}", f.transport.small_packets))
            .arg(format!("--pacing={}", f.transport.pacing));
        cmd.args(["--json", "--interval", "0.5", "--qlog-level"])
            .arg(self.qlog_level.as_str())
            .arg("--qlog-scenario")
            .arg(&self.event_file)
            .arg("--qlog-dir")
            .arg(&fdir);
        self.start_client(cmd, i, fdir)
    }

    /// Starts a client whose report goes to `client.json.part` in `fdir`.
    fn start_client(&self, mut cmd: Command, i: usize, fdir: PathBuf) -> Result<Client, RunError> {
        cmd.stdin(Stdio::null())
            .stdout(std::fs::File::create(fdir.join("client.json.part"))?)
            .stderr(std::fs::File::create(fdir.join("client.stderr"))?);
        let child = cmd.spawn()?;
        Ok(Client {
            child,
            flow: i,
            dir: fdir,
        })
    }
}

/// Waits for a server's `listening on ADDR` line; a server that prints
/// anything else is stopped, and its stderr becomes the error.
fn await_listening(mut child: Child, qlog_dir: &Path) -> Result<Server, RunError> {
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    let mut r = BufReader::new(stdout);
    let got = r.read_line(&mut line);
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse::<SocketAddr>().ok());
    match (got, addr) {
        (Ok(_), Some(addr)) => {
            // Keep draining stdout so the server never blocks on it.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while r.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                    sink.clear();
                }
            });
            Ok(Server {
                child,
                addr,
                qlog_dir: qlog_dir.to_path_buf(),
                tcp_records: None,
            })
        }
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            let err = std::fs::read_to_string(qlog_dir.join("server.stderr")).unwrap_or_default();
            Err(RunError::Server(format!(
                "printed `{}`; stderr: {}",
                line.trim(),
                err.trim()
            )))
        }
    }
}

/// A server or client dropped while its process still runs (a repetition
/// that failed half-way) kills it: on the relay nothing else would (on
/// netem and in IP mode, deleting the namespaces does). Ended the usual
/// way, by [`terminate`], it is already reaped and this does nothing.
fn kill_if_running(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_if_running(&mut self.child);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        kill_if_running(&mut self.child);
    }
}

/// Asks `child` to end (SIGTERM); kills it after `grace`.
pub(super) fn terminate(child: &mut Child, grace: Duration) {
    // SAFETY: signalling a child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The server's qlog of each connection, moved next to the client's (a
/// TCP flow's server records: [`TCP_SERVER_FILE`]), and each client's
/// report made final (`client.json`).
pub(super) fn gather_qlogs(clients: &[Client], servers: &[Server]) -> Result<(), RunError> {
    for c in clients {
        // Server i serves flow i.
        if let Some(records) = servers.get(c.flow).and_then(|s| s.tcp_records.as_ref()) {
            if records.exists() {
                std::fs::rename(records, c.dir.join(TCP_SERVER_FILE))?;
            }
        }
        let part = c.dir.join("client.json.part");
        let peer = std::fs::read(&part)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|r| r["peer_cid"].as_str().map(str::to_string))
            .unwrap_or_default();
        let server_qlog = servers
            .iter()
            .filter(|_| !peer.is_empty())
            .find_map(|s| quic_app::qlog_file::find(&s.qlog_dir, "server", &peer));
        if let Some(p) = server_qlog {
            let to = c.dir.join(p.file_name().unwrap());
            std::fs::rename(&p, &to)?;
        }
        let _ = std::fs::rename(&part, c.dir.join("client.json"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_dropped_server_or_client_stops_its_process() {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let server = Server {
            child,
            addr: "127.0.0.1:1".parse().unwrap(),
            qlog_dir: PathBuf::new(),
            tcp_records: None,
        };
        assert!(alive(pid));
        drop(server);
        // Killed and reaped: no process, not even a zombie.
        assert!(!alive(pid), "server process {pid} outlived its Server");
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        drop(Client {
            child,
            flow: 0,
            dir: PathBuf::new(),
        });
        assert!(!alive(pid), "client process {pid} outlived its Client");
    }

    #[test]
    fn a_tcp_flow_on_the_relay_is_refused_before_any_server_starts() {
        let sc = Scenario::parse(
            "[link]\nrate = \"10mbit\"\nrtt = \"40ms\"\n[[flows]]\ncc = \"cubic\"\n[[flows]]\ncc = \"tcp:cubic\"\n",
            "test",
            Path::new("."),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        // A QUIC server that cannot start: had flow 0's server been tried
        // first, the error would say so.
        let bins = Binaries {
            server: dir.path().join("no-such-quic-server"),
            client: dir.path().join("no-such-quic-client"),
            tcp: PathBuf::from("/bin/sh"),
            syscount: None,
        };
        let ends = Endpoints::prepare(
            &bins,
            None,
            quic_app::QlogLevel::Off,
            &serde_json::json!({}),
            dir.path(),
        )
        .unwrap();
        let flows = sc.rep_flows(1);
        match ends.start_servers(&flows, dir.path()) {
            Err(RunError::Unsupported(m)) => {
                assert!(
                    m.contains("flow 1 (`tcp:cubic`)") && m.contains("UDP relay"),
                    "{m}"
                )
            }
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("a TCP flow started on the relay"),
        }
        assert!(
            !dir.path().join("servers/0").exists(),
            "flow 0's server was started"
        );
    }
}
