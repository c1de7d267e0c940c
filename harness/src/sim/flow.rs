//! The simulated hosts of each flow: a [`ServerApp`] listening from the
//! start and, once the flow starts, a [`ClientApp`]; built here, run by
//! [`super::endpoints`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use quic_app::client::{ClientApp, ClientSettings};
use quic_app::server::{ServerApp, ServerSettings};
use quic_app::QlogLevel;

use super::{tls, SimConfig, SimError};
use crate::emu::rng::Rng;
use crate::scenario;

/// One QUIC flow: a client and its own server, as separate hosts.
pub(super) struct Flow {
    pub(super) spec: scenario::FlowSpec,
    pub(super) dir: PathBuf,
    pub(super) client_addr: SocketAddr,
    pub(super) server_addr: SocketAddr,
    pub(super) server: ServerApp,
    pub(super) client: Option<ClientApp>,
    pub(super) client_pace: Option<Instant>,
    pub(super) client_qlog: Option<PathBuf>,
    /// When the client and the server next need to run, ns (u64::MAX:
    /// not before something arrives). Only calls into an endpoint change
    /// its timers, so these are recomputed after each.
    pub(super) client_wake: u64,
    pub(super) server_wake: u64,
    /// Something arrived for the client, the server, this instant.
    pub(super) client_touched: bool,
    pub(super) server_touched: bool,
    /// Datagrams delivered to the client, the server, not read yet (with
    /// a `[host] wake_latency`), oldest first, and when the host wakes to
    /// read them (u64::MAX: none waiting).
    pub(super) client_inbox: Vec<crate::emu::Packet>,
    pub(super) server_inbox: Vec<crate::emu::Packet>,
    pub(super) client_rx: u64,
    pub(super) server_rx: u64,
    /// Virtual ns the client runs for (duration-limited flows).
    pub(super) run_ns: u64,
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
            client_inbox: Vec::new(),
            server_inbox: Vec::new(),
            client_rx: u64::MAX,
            server_rx: u64::MAX,
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

/// What flow `f`'s client asks for, as `quic-client` would.
pub(super) fn client_settings(f: &Flow) -> ClientSettings {
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
        requests: f.spec.requests,
        think: Duration::from_nanos(f.spec.think_ns),
        interval: Some(Duration::from_millis(500)),
        print_intervals: false,
        timeout: Duration::from_secs(10),
        cc: f.spec.cc.clone(),
    }
}
