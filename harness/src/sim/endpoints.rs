//! The simulated endpoints: per flow a [`ServerApp`] listening from the
//! start and a [`ClientApp`] started at the flow's offset, each run when
//! something arrives for it or its timers are due.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use quic_app::client::{ClientApp, ClientSettings, Report};
use quic_app::server::{ServerApp, ServerSettings};
use quic_app::QlogLevel;

use super::world::World;
use super::{tls, SimConfig, SimError};
use crate::emu::rng::Rng;
use crate::scenario;
use link_model::topology::LinkSinks;

/// One QUIC flow: a client and its own server, as separate hosts.
pub(super) struct Flow {
    pub(super) spec: scenario::FlowSpec,
    pub(super) dir: PathBuf,
    pub(super) client_addr: SocketAddr,
    pub(super) server_addr: SocketAddr,
    pub(super) server: ServerApp,
    pub(super) client: Option<ClientApp>,
    pub(super) client_pace: Option<Instant>,
    client_qlog: Option<PathBuf>,
    /// When the client and the server next need to run, ns (u64::MAX:
    /// not before something arrives). Only calls into an endpoint change
    /// its timers, so these are recomputed after each.
    pub(super) client_wake: u64,
    pub(super) server_wake: u64,
    /// Something arrived for the client, the server, this instant.
    pub(super) client_touched: bool,
    pub(super) server_touched: bool,
    /// Virtual ns the client runs for (duration-limited flows).
    run_ns: u64,
    pub(super) started: bool,
    pub(super) finished: bool,
    pub(super) killed: bool,
}

const CLIENT_NET: [u8; 3] = [10, 201, 1];
const SERVER_NET: [u8; 3] = [10, 201, 2];

fn addr(net: [u8; 3], host: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([net[0], net[1], net[2], host], port))
}

/// Each flow with its start in this repetition (`start_jitter`), as the
/// process runner starts them, its directory made and its server
/// listening.
pub(super) fn flows(
    cfg: &SimConfig,
    scenario_event: &serde_json::Value,
) -> Result<Vec<Flow>, SimError> {
    let sc = cfg.scenario;
    let mut key_rng = Rng::new(cfg.seed, 0x5e_0001);
    let mut flows = Vec::new();
    for (i, (_, spec)) in sc.rep_flows(cfg.seed).into_iter().enumerate() {
        let fdir = cfg.dir.join(format!("flow-{i}"));
        std::fs::create_dir_all(&fdir)?;
        let server = server(cfg, i, &spec, &fdir, scenario_event, &mut key_rng)?;
        let host = (i % 250) as u8 + 2;
        let port = 10_000 + (i / 250) as u16;
        let run_ns = spec.run_ns(sc.duration_ns);
        flows.push(Flow {
            spec,
            dir: fdir,
            client_addr: addr(CLIENT_NET, host, port),
            server_addr: addr(SERVER_NET, host, 443),
            server,
            client: None,
            client_pace: None,
            client_qlog: None,
            client_wake: u64::MAX,
            server_wake: u64::MAX,
            client_touched: false,
            server_touched: false,
            run_ns,
            started: false,
            finished: false,
            killed: false,
        });
    }
    Ok(flows)
}

/// Flow `i`'s server, with the flow's (server-side) algorithm.
fn server(
    cfg: &SimConfig,
    i: usize,
    spec: &scenario::FlowSpec,
    fdir: &std::path::Path,
    scenario_event: &serde_json::Value,
    key_rng: &mut Rng,
) -> Result<ServerApp, SimError> {
    let cc = cc_algorithms::parse(spec.server_cc()).map_err(|e| SimError::Cc {
        flow: i,
        msg: e.to_string(),
    })?;
    let mut config = tls::server_config().map_err(SimError::Setup)?;
    cc.apply(&mut config);
    spec.transport.apply(&mut config);
    if let Some(mtu) = spec.mtu {
        quic_app::set_mtu(&mut config, mtu as usize)
            .map_err(|e| SimError::Setup(format!("mtu: {e}")))?;
    }
    let mut key = [0u8; 32];
    for chunk in key.chunks_mut(8) {
        chunk.copy_from_slice(&key_rng.next_u64().to_be_bytes());
    }
    ServerApp::new(
        config,
        ServerSettings {
            max_connections: 16,
            qlog_dir: (cfg.qlog_level != QlogLevel::Off).then(|| fdir.to_path_buf()),
            qlog_level: cfg.qlog_level,
            qlog_events: vec![("simulation:scenario".into(), scenario_event.clone())],
            verbose: false,
        },
        &key,
    )
    .map_err(|e| SimError::Setup(format!("HTTP/3: {e}")))
}

impl World {
    /// Starts the clients whose time has come.
    pub(super) fn start_due_flows(&mut self, now: u64) -> Result<(), SimError> {
        for i in 0..self.flows.len() {
            if !self.flows[i].started && self.flows[i].spec.start_ns <= now {
                self.start_flow(i, now)?;
                self.flows[i].client_touched = true;
            }
        }
        Ok(())
    }

    /// A quiche client configuration for flow `i`: the flow's algorithm
    /// when the client sends (uploads), and its MTU.
    fn client_config(&self, i: usize) -> Result<quiche::Config, SimError> {
        let spec = &self.flows[i].spec;
        let mut config = tls::client_config().map_err(SimError::Setup)?;
        spec.transport.apply(&mut config);
        if spec.direction == scenario::Direction::Upload {
            let cc = cc_algorithms::parse(&spec.cc).map_err(|e| SimError::Cc {
                flow: i,
                msg: e.to_string(),
            })?;
            cc.apply(&mut config);
        }
        if let Some(mtu) = spec.mtu {
            quic_app::set_mtu(&mut config, mtu as usize)
                .map_err(|e| SimError::Setup(format!("mtu: {e}")))?;
        }
        Ok(config)
    }

    fn start_flow(&mut self, i: usize, now: u64) -> Result<(), SimError> {
        let now_i = self.at(now);
        let mut config = self.client_config(i)?;
        let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
        for chunk in scid.chunks_mut(8) {
            let r = self.cid_rng.next_u64().to_be_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        let f = &self.flows[i];
        let mut conn = quiche::connect(
            Some("cclab-sim"),
            &quiche::ConnectionId::from_ref(&scid),
            f.client_addr,
            f.server_addr,
            &mut config,
        )
        .map_err(|e| SimError::Setup(format!("connect: {e}")))?;
        let qlog = quic_app::qlog_to_file(
            &mut conn,
            &f.dir,
            "client",
            &scid,
            self.qlog_level,
            &[("simulation:scenario".into(), self.scenario_event.clone())],
            now_i,
        )?;
        let app = ClientApp::new(conn, client_settings(f), now_i)
            .map_err(|e| SimError::Setup(format!("HTTP/3: {e}")))?;
        self.marker(
            serde_json::json!({"type": "flow_start", "flow": i, "cc": f.spec.cc}),
            now_i,
        );
        let f = &mut self.flows[i];
        f.client = Some(app);
        f.client_qlog = qlog;
        f.started = true;
        Ok(())
    }

    /// Ends flow `i`'s client: its report goes to `client.json`.
    pub(super) fn finish_client(&mut self, i: usize, now: u64) -> Result<(), SimError> {
        let end = self.at(now);
        let f = &mut self.flows[i];
        if let Some(app) = f.client.take() {
            // The qlog's name, not its path: the report is part of the
            // run's deterministic output wherever the run is written.
            let qlog = f
                .client_qlog
                .take()
                .and_then(|p| p.file_name().map(PathBuf::from));
            let report: Report = app.report(end, qlog);
            crate::run::write_json_atomic(&f.dir.join("client.json"), &report)?;
        }
        f.finished = true;
        f.client_pace = None;
        Ok(())
    }

    /// Stops every client still running (past the deadline).
    pub(super) fn interrupt_clients(&mut self, now: u64) -> Result<(), SimError> {
        for i in 0..self.flows.len() {
            if let Some(c) = self.flows[i].client.as_mut() {
                c.interrupt();
                self.flows[i].killed = true;
                self.finish_client(i, now)?;
            }
        }
        Ok(())
    }

    /// Runs the endpoints that something arrived for or whose timers are
    /// due (timers, application, sending).
    pub(super) fn run_endpoints(
        &mut self,
        now: u64,
        log: &mut dyn LinkSinks,
    ) -> Result<(), SimError> {
        let now_i = self.at(now);
        for i in 0..self.flows.len() {
            let f = &mut self.flows[i];
            let client_due = f.client.is_some() && (f.client_touched || f.client_wake <= now);
            let server_due = f.server_touched || f.server_wake <= now;
            if !client_due && !server_due {
                continue;
            }
            f.client_touched = false;
            f.server_touched = false;
            if client_due {
                let c = self.flows[i].client.as_mut().unwrap();
                c.process(now_i);
                if c.is_closed() {
                    self.finish_client(i, now)?;
                } else {
                    self.flush_client(i, now, log);
                }
            }
            if server_due {
                self.flows[i].server.process(now_i);
                self.flush_server(i, now, log);
            }
            self.update_wakes(i);
        }
        Ok(())
    }
}

/// What flow `f`'s client asks for, as `quic-client` would.
fn client_settings(f: &Flow) -> ClientSettings {
    let path = f.spec.request_path();
    ClientSettings {
        authority: "cclab-sim".into(),
        url: format!("https://{}{path}", f.server_addr),
        path,
        upload: (f.spec.direction == scenario::Direction::Upload).then(|| f.spec.bytes()),
        duration: f
            .spec
            .size
            .is_none()
            .then(|| Duration::from_nanos(f.run_ns)),
        interval: Some(Duration::from_millis(500)),
        print_intervals: false,
        timeout: Duration::from_secs(10),
        cc: f.spec.cc.clone(),
    }
}
