//! Starting the server in-process and running the client against it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use quic_client::{ClientConfig, Report};
use quic_server::{Server, ServerConfig, ServerStats};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct Running {
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow_result::Result<ServerStats>>,
}

mod anyhow_result {
    pub type Result<T> = std::result::Result<T, String>;
}

impl Running {
    pub async fn stop(self) -> ServerStats {
        let _ = self.stop.send(());
        self.task.await.expect("server task").expect("server ran")
    }
}

pub async fn start_server(cc: &str, qlog_dir: Option<&Path>) -> Running {
    start_server_with_limit(cc, qlog_dir, 100).await
}

pub async fn start_server_with_limit(
    cc: &str,
    qlog_dir: Option<&Path>,
    max_connections: usize,
) -> Running {
    start_server_with(cc, qlog_dir, max_connections, quic_app::uring::IoMode::Auto).await
}

/// A server on the socket path `io`.
pub async fn start_server_with(
    cc: &str,
    qlog_dir: Option<&Path>,
    max_connections: usize,
    io: quic_app::uring::IoMode,
) -> Running {
    let server = Server::bind(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        cc: cc_algorithms::parse(cc).unwrap(),
        qlog_dir: qlog_dir.map(Path::to_path_buf),
        qlog_level: quic_app::QlogLevel::Extra,
        qlog_events: Vec::new(),
        cert: None,
        max_connections,
        idle_timeout: Duration::from_secs(5),
        verbose: false,
        mtu: None,
        transport: Default::default(),
        io,
    })
    .await
    .expect("server binds");
    let addr = server.local_addr();
    let (stop, rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        server
            .run(async {
                let _ = rx.await;
            })
            .await
            .map_err(|e| e.to_string())
    });
    Running { addr, stop, task }
}

pub fn client_config(url: &str) -> ClientConfig {
    ClientConfig {
        url: quic_client::parse_url(url).unwrap(),
        upload: None,
        duration: None,
        requests: 1,
        think: std::time::Duration::ZERO,
        cc: cc_algorithms::parse("cubic").unwrap(),
        qlog_dir: None,
        qlog_level: quic_app::QlogLevel::Extra,
        qlog_events: Vec::new(),
        interval: Some(Duration::from_millis(200)),
        print_intervals: false,
        timeout: Duration::from_secs(10),
        mtu: None,
        transport: Default::default(),
        ignore_ecn: false,
        io: Default::default(),
    }
}

pub async fn download(url: &str, qlog_dir: Option<&Path>) -> Report {
    let mut cfg = client_config(url);
    cfg.qlog_dir = qlog_dir.map(Path::to_path_buf);
    quic_client::run(cfg).await.expect("client runs")
}

/// A fresh empty directory under the target directory.
pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Parses a JSON-SEQ qlog file, plain or compressed (a compressed one
/// must be finished); returns its records.
pub fn read_qlog(path: &Path) -> Vec<serde_json::Value> {
    let mut opened = qlog_analysis::input::open_file(path).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut opened.input, &mut text).unwrap();
    assert!(
        !opened.cut_short(),
        "{}: the {} stream is not finished",
        path.display(),
        opened.container
    );
    text.split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            serde_json::from_str(r)
                .unwrap_or_else(|e| panic!("{}: bad record: {e}", path.display()))
        })
        .collect()
}

/// The userspace emulator with a link of `pairs` (a link description's
/// keys and values) in front of the server at `server`.
pub fn emulator_in_front_of(server: SocketAddr, pairs: &[(&str, &str)]) -> harness::emu::Emulator {
    let link = harness::link::LinkSpec::from_pairs(pairs.iter().copied(), Path::new(".")).unwrap();
    harness::emu::Emulator::start(harness::emu::EmuConfig::new(
        link,
        vec![harness::emu::Forward {
            listen: "127.0.0.1:0".parse().unwrap(),
            target: server,
        }],
    ))
    .unwrap()
}
