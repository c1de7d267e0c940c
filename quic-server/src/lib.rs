//! HTTP/3 bulk-data server (tokio + quiche) for congestion-control
//! experiments: the socket loop around [`quic_app::server::ServerApp`].
//!
//! Routes: `GET /bytes/<N>` streams N bytes of generated data (no file
//! system access), no faster than BPS bit/s with `?rate=<BPS>`;
//! `POST /upload` discards the body and answers with its byte count;
//! everything else is 404.
//!
//! One server uses one congestion-control algorithm for the data it sends
//! (`--cc`). Several flows with different algorithms through one bottleneck
//! use one server process per algorithm, each on its own port: quiche can
//! only change a connection's controller before it has sent in-flight data,
//! which the handshake already does, so a per-request choice is not possible.

pub mod endpoint;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cc_algorithms::Controller;
pub use quic_app::server::ServerStats;
use quic_app::server::{ServerApp, ServerSettings};
use quic_app::QlogLevel;

use quic_app::io::{flush, Socket};
use quic_app::uring::{Event, IoMode, Ring};
use quic_app::MAX_DATAGRAM_SIZE;

/// How the server is set up.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks one).
    pub listen: SocketAddr,
    /// Congestion control for the data the server sends.
    pub cc: Controller,
    /// Write one qlog file per connection here.
    pub qlog_dir: Option<PathBuf>,
    /// How much qlog.
    pub qlog_level: QlogLevel,
    /// Generic events (name, data) written at the start of every qlog.
    pub qlog_events: Vec<(String, serde_json::Value)>,
    /// PEM certificate chain and private key files; when `None`, a
    /// self-signed pair is made that stays in memory.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// Most connections served at once.
    pub max_connections: usize,
    /// Idle timeout of a connection.
    pub idle_timeout: Duration,
    /// Log each connection's end to stderr.
    pub verbose: bool,
    /// Largest UDP payload to send and to accept, bytes (1200..=1500; see
    /// [`quic_app::set_mtu`]); `None`: the default, 1350.
    pub mtu: Option<usize>,
    /// ACK policy and small packets ([`quic_app::transport`]).
    pub transport: quic_app::transport::Transport,
    /// The socket path: io_uring (one system call per wake-up) or tokio's
    /// epoll reactor ([`IoMode`]).
    pub io: IoMode,
}

/// The server.
pub struct Server {
    socket: Path,
    app: ServerApp,
}

/// The two socket paths ([`IoMode`]).
enum Path {
    Epoll(Socket),
    Uring(Box<Ring>),
}

impl Server {
    /// Binds the socket and prepares TLS and HTTP/3.
    pub async fn bind(settings: ServerConfig) -> anyhow::Result<Server> {
        // The certificate and key go to TLS from memory: nothing is
        // written to disk, so nothing is left behind however we exit.
        let tls = match &settings.cert {
            Some((cert, key)) => endpoint::Identity::from_files(cert, key)?
                .tls_context(&cert.display().to_string(), &key.display().to_string())?,
            None => {
                endpoint::remove_stale_cert_dirs(&std::env::temp_dir());
                endpoint::self_signed()?.tls_context("(self-signed)", "(self-signed)")?
            }
        };
        let mut config =
            quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, tls)?;
        quic_app::configure(&mut config, quiche::h3::APPLICATION_PROTOCOL)?;
        config.set_max_idle_timeout(settings.idle_timeout.as_millis() as u64);
        settings.cc.apply(&mut config);
        settings.transport.apply(&mut config);
        if let Some(mtu) = settings.mtu {
            quic_app::set_mtu(&mut config, mtu).map_err(|e| anyhow::anyhow!("mtu: {e}"))?;
        }
        let socket = if quic_app::uring::choose(settings.io)? {
            Path::Uring(Box::new(Ring::bind(settings.listen)?))
        } else {
            Path::Epoll(Socket::bind(settings.listen).await?)
        };
        let mut cid_key = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut cid_key)
            .map_err(|_| anyhow::anyhow!("no system randomness"))?;
        let app = ServerApp::new(
            config,
            ServerSettings {
                max_connections: settings.max_connections,
                qlog_dir: settings.qlog_dir.clone(),
                qlog_level: settings.qlog_level,
                qlog_events: settings.qlog_events.clone(),
                verbose: settings.verbose,
            },
            &cid_key,
        )?;
        Ok(Server { socket, app })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        match &self.socket {
            Path::Epoll(s) => s.local_addr(),
            Path::Uring(r) => r.local_addr(),
        }
    }

    /// Turns address validation with Retry (RFC 9000 §8.1.2) on or off
    /// (off by default): when on, a client's first Initial gets a Retry
    /// packet whose token it must echo, and only then makes a connection.
    /// See [`ServerApp::set_retry`].
    pub fn set_retry(&mut self, on: bool) {
        self.app.set_retry(on);
    }

    /// Serves until `shutdown` completes, then closes every connection and
    /// flushes their qlog files. Returns the counters.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<ServerStats> {
        let Server { socket, app } = self;
        match socket {
            Path::Epoll(socket) => epoll_loop(app, socket, shutdown).await,
            Path::Uring(ring) => {
                // The ring's loop blocks in the kernel, so it has a thread
                // of its own; this task only tells it when to shut down.
                let waker = ring.waker();
                let mut done = tokio::task::spawn_blocking(move || uring_loop(app, ring));
                tokio::select! {
                    r = &mut done => return r?,
                    _ = shutdown => waker.wake(),
                }
                done.await?
            }
        }
    }
}

/// How long a server that shuts down keeps serving for its connections to
/// close (so their qlogs end with connection_closed), at most.
const CLOSING: Duration = Duration::from_secs(2);

/// A server's shutdown, shared by both loops: once it begins, every
/// connection is closed and the server keeps serving until they are
/// closed, at most [`CLOSING`].
#[derive(Default)]
struct Closing(Option<Instant>);

impl Closing {
    /// Begins the shutdown (once).
    fn begin(&mut self, app: &mut ServerApp) {
        if self.0.is_none() {
            app.shut_down();
            self.0 = Some(Instant::now() + CLOSING);
        }
    }

    fn begun(&self) -> bool {
        self.0.is_some()
    }

    /// Whether serving is over: every connection closed, or out of time.
    fn over(&self, app: &ServerApp) -> bool {
        self.0
            .is_some_and(|d| app.is_empty() || Instant::now() >= d)
    }

    /// When the loop must wake next: the connections' timers, and the
    /// end of the shutdown's time.
    fn wake(&self, app: &ServerApp) -> Option<Instant> {
        [app.timeout(), self.0].into_iter().flatten().min()
    }
}

/// Serving on tokio's epoll reactor.
async fn epoll_loop(
    mut app: ServerApp,
    socket: Socket,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<ServerStats> {
    tokio::pin!(shutdown);
    let mut rx = quic_app::io::RecvBatch::new();
    let mut batch = Vec::with_capacity(64 * MAX_DATAGRAM_SIZE);
    let local = socket.local_addr();
    let mut timer = quic_app::io::Timer::new()?;
    let mut closing = Closing::default();
    while !closing.over(&app) {
        let wake = closing.wake(&app);
        tokio::select! {
            biased;
            _ = &mut shutdown, if !closing.begun() => closing.begin(&mut app),
            n = socket.recv_batch(&mut rx) => {
                // One call read what was queued; a full batch may have
                // left more: read on without waiting, a few batches at
                // most before sending.
                let mut n = n?;
                for round in 1..=4 {
                    let now = Instant::now();
                    rx.for_each(|d, from, ecn| app.recv(d, from, local, ecn, now));
                    if n < rx.capacity() || round == 4 {
                        break;
                    }
                    n = socket.try_recv_batch(&mut rx)?;
                }
            }
            _ = timer.sleep_until(wake) => {}
        }
        app.process(Instant::now());
        while let Some(p) = app.pop_stateless() {
            // Stateless packets are unreliable by design: a client whose
            // Version Negotiation or Retry is lost tries again.
            let _ = socket
                .send(p.to, &p.data, p.data.len(), quiche::Ecn::NotEct)
                .await;
        }
        for peer in app.peers_mut() {
            // One peer's send failure must not stop the server; QUIC
            // recovers from the lost packets.
            peer.pace_until = flush(&mut peer.conn, &socket, &mut batch)
                .await
                .unwrap_or(None);
        }
    }
    Ok(app.stats())
}

/// Serving on an io_uring: one system call per wake-up hands the kernel
/// the packets of the last flush and waits for the next datagram,
/// deadline or shutdown ([`Ring::wait`]).
fn uring_loop(mut app: ServerApp, mut ring: Box<Ring>) -> anyhow::Result<ServerStats> {
    let local = ring.local_addr();
    let mut closing = Closing::default();
    while !closing.over(&app) {
        let wake = closing.wake(&app);
        let mut shut = false;
        // The time the wait ended, read at the first datagram.
        let mut now = None;
        ring.wait(wake, |ev| match ev {
            Event::Datagram(d, from, ecn) => {
                let now = *now.get_or_insert_with(Instant::now);
                app.recv(d, from, local, ecn, now)
            }
            Event::Wake => shut = true,
        })?;
        if shut {
            closing.begin(&mut app);
        }
        // Send errors are the peers' business, as on the epoll path: QUIC
        // recovers what was lost.
        let _ = ring.take_send_error();
        app.process(Instant::now());
        while let Some(p) = app.pop_stateless() {
            ring.send(p.to, &p.data, p.data.len(), quiche::Ecn::NotEct)?;
        }
        for peer in app.peers_mut() {
            peer.pace_until = ring.flush(&mut peer.conn).unwrap_or(None);
        }
    }
    // What the last flush queued leaves before the ring is dropped.
    ring.submit_queued()?;
    Ok(app.stats())
}
