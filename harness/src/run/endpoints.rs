//! The endpoints of a repetition on `emu` or `netem`: one `quic-server`
//! process per flow, as separate hosts would be, and one `quic-client`
//! each, started at the flow's offset; at the end, each server's qlog
//! moved next to its client's.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{RunConfig, RunError};
use crate::link::Backend;
use crate::netem_paths::Place;
use crate::scenario::{Direction, FlowSpec, Scenario};

/// `quic-server` and `quic-client`.
pub(super) struct Binaries {
    pub server: PathBuf,
    pub client: PathBuf,
}

impl Binaries {
    /// The programs in `cfg.bin_dir`; an error if one is missing where
    /// the backend runs them.
    pub(super) fn find(cfg: &RunConfig) -> Result<Binaries, RunError> {
        let bins = Binaries {
            server: cfg.bin_dir.join("quic-server"),
            client: cfg.bin_dir.join("quic-client"),
        };
        for b in [&bins.server, &bins.client] {
            if cfg.backend != Backend::Sim && !b.exists() {
                return Err(RunError::MissingBinary(b.clone()));
            }
        }
        Ok(bins)
    }
}

/// A running server.
pub(super) struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    qlog_dir: PathBuf,
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
        Ok(Endpoints {
            bins,
            places,
            qlog_level,
            event_file,
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
        let mut servers = Vec::new();
        for (i, (_, f)) in flows.iter().enumerate() {
            servers.push(self.spawn_server(
                i,
                f.server_cc(),
                f.mtu,
                &f.transport,
                &dir.join(format!("servers/{i}")),
            )?);
        }
        Ok(servers)
    }

    fn command(&self, ns: Option<&str>, bin: &Path) -> Command {
        match ns {
            Some(ns) => crate::netns::Topology::command(ns, bin),
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
        let mut cmd = self.command(place.map(|p| p.server_ns.as_str()), bin);
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
        let mut cmd = self.command(ns, &self.bins.client);
        cmd.arg(format!("https://{addr}{}", f.request_path()));
        if f.direction == Direction::Upload {
            cmd.args(["--upload", &f.bytes().to_string(), "--cc", &f.cc]);
        }
        if f.size.is_none() {
            cmd.args(["--duration", &format!("{:.3}", run_ns as f64 / 1e9)]);
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
            .arg(&fdir)
            .stdin(Stdio::null())
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

/// The server's qlog of each connection, moved next to the client's, and
/// each client's report made final (`client.json`).
pub(super) fn gather_qlogs(clients: &[Client], servers: &[Server]) -> Result<(), RunError> {
    for c in clients {
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
