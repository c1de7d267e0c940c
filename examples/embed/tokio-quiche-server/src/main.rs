//! An HTTP/3 bulk-data server on Cloudflare's tokio-quiche whose congestion
//! control is any cc-algorithms spec. It answers `GET /bytes/<N>` with N
//! bytes, as cclab's `quic-server` does, so `quic-client` can download:
//!
//! ```text
//! tokio-quiche-server --cert cert.pem --key key.pem --cc vegas:alpha=1,beta=3 --qlog-dir qlog
//! quic-client https://127.0.0.1:4433/bytes/10000000
//! ```
//!
//! tokio-quiche's `listen()` builds the `quiche::Config` itself from its
//! `QuicSettings`, where congestion control is only a built-in's name, and
//! no hook of it reaches the config or a connection before the server's
//! first flight (after which quiche refuses a new controller). So this
//! server accepts connections itself, with a `quiche::Config` of its own,
//! and hands each to tokio-quiche with its low-level
//! `tokio_quiche::quic::raw::wrap_quiche_conn`; tokio-quiche's
//! `ServerH3Driver` then runs HTTP/3 and the connection's I/O as usual.
//! Datagrams are routed to connections by the client's address.

use std::collections::HashMap;
use std::error::Error;
use std::fs::File;
use std::io::LineWriter;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use quiche::h3::{Header, NameValue};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_quiche::http3::driver::{IncomingH3Headers, OutboundFrame, ServerH3Event};
use tokio_quiche::http3::settings::Http3Settings;
use tokio_quiche::metrics::DefaultMetrics;
use tokio_quiche::quic::{raw, Incoming, SimpleConnectionIdGenerator};
use tokio_quiche::socket::Socket;
use tokio_quiche::{ConnectionIdGenerator, ServerH3Driver};

const USAGE: &str = "usage: tokio-quiche-server --cert FILE --key FILE [--listen ADDR] [--cc SPEC] [--qlog-dir DIR] [--connections N]";

/// What responses are made of (one tokio-quiche buffer's worth).
static CHUNK: [u8; 64 * 1024] = [0x42; 64 * 1024];

struct Args {
    listen: String,
    cc: String,
    cert: String,
    key: String,
    qlog_dir: Option<PathBuf>,
    /// Exit after this many connections have ended.
    connections: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        listen: "127.0.0.1:4433".to_string(),
        cc: "cubic".to_string(),
        cert: String::new(),
        key: String::new(),
        qlog_dir: None,
        connections: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => args.listen = v?,
            "--cc" => args.cc = v?,
            "--cert" => args.cert = v?,
            "--key" => args.key = v?,
            "--qlog-dir" => args.qlog_dir = Some(v?.into()),
            "--connections" => {
                let v = v?;
                args.connections = Some(
                    v.parse()
                        .map_err(|_| format!("--connections: `{v}` is not a number"))?,
                );
            }
            _ => return Err(format!("unexpected argument `{a}`")),
        }
    }
    if args.cert.is_empty() || args.key.is_empty() {
        return Err("--cert and --key are required".to_string());
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tokio-quiche-server: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tokio-quiche-server: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args) -> Result<(), Box<dyn Error>> {
    // Pick the congestion controller from a spec such as `vegas:alpha=1,beta=3`.
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION)?;
    let cc = cc_algorithms::parse(&args.cc)?; // a plugin, or one of quiche's built-ins
    cc.apply(&mut config);

    config.load_cert_chain_from_pem_file(&args.cert)?;
    config.load_priv_key_from_pem_file(&args.key)?;
    config.set_application_protos(quiche::h3::APPLICATION_PROTOCOL)?;
    config.set_max_idle_timeout(10_000);
    config.set_max_send_udp_payload_size(1350);
    config.set_initial_max_data(16 << 20);
    config.set_initial_max_stream_data_bidi_local(16 << 20);
    config.set_initial_max_stream_data_bidi_remote(16 << 20);
    config.set_initial_max_stream_data_uni(1 << 20);
    config.set_initial_max_streams_bidi(100);
    config.set_initial_max_streams_uni(16);
    config.set_disable_active_migration(true);

    let socket = Arc::new(UdpSocket::bind(&args.listen).await?);
    let local = socket.local_addr()?;
    println!("listening on {local}");

    let mut conns: HashMap<SocketAddr, mpsc::Sender<Incoming>> = HashMap::new();
    let (ended_tx, mut ended_rx) = mpsc::unbounded_channel();
    let mut ended = 0;
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = tokio::select! {
            r = socket.recv_from(&mut buf) => r?,
            Some(addr) = ended_rx.recv() => {
                conns.remove(&addr);
                ended += 1;
                if args.connections == Some(ended) {
                    return Ok(());
                }
                continue;
            }
        };
        let packet = Incoming {
            peer_addr: from,
            local_addr: local,
            rx_time: None,
            buf: buf[..n].to_vec(),
            gro: None,
            #[cfg(target_os = "linux")]
            so_mark_data: None,
        };
        if let Some(tx) = conns.get(&from).filter(|tx| !tx.is_closed()) {
            let _ = tx.try_send(packet);
            continue;
        }
        // Only an Initial packet starts a connection.
        match quiche::Header::from_slice(&mut buf[..n], quiche::MAX_CONN_ID_LEN) {
            Ok(hdr) if hdr.ty == quiche::Type::Initial => {}
            _ => continue,
        }
        let scid = SimpleConnectionIdGenerator.new_connection_id();
        let accepted = quiche::accept_with_buf_factory(&scid, None, local, from, &mut config);
        let mut conn = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                eprintln!("tokio-quiche-server: {from}: {e}");
                continue;
            }
        };
        if let Some(dir) = &args.qlog_dir {
            std::fs::create_dir_all(dir)?;
            let name: String = scid.iter().map(|b| format!("{b:02x}")).collect();
            // One write per qlog record, so the file is complete at any exit.
            let writer = LineWriter::new(File::create(dir.join(format!("server-{name}.sqlog")))?);
            let title = format!("tokio-quiche-server cc={}", args.cc);
            conn.set_qlog(Box::new(writer), title, from.to_string());
        }

        let send = Socket {
            send: Arc::clone(&socket),
            recv: (),
            local_addr: local,
            peer_addr: from,
            capabilities: Default::default(),
        };
        let wrapped = raw::wrap_quiche_conn(conn, send, DefaultMetrics);
        let _ = wrapped.incoming_tx.try_send(packet);
        conns.insert(from, wrapped.incoming_tx);
        let (driver, mut controller) = ServerH3Driver::new(Http3Settings::default());
        wrapped.conn.start(driver);
        tokio::spawn(async move {
            while let Some(event) = controller.event_receiver_mut().recv().await {
                if let ServerH3Event::Headers {
                    incoming_headers, ..
                } = event
                {
                    tokio::spawn(respond(incoming_headers));
                }
            }
        });
        let (mut worker_done, ended_tx) = (wrapped.worker_shutdown_rx, ended_tx.clone());
        tokio::spawn(async move {
            worker_done.recv().await;
            let _ = ended_tx.send(from);
        });
    }
}

/// Answers `GET /bytes/<N>` with N bytes, anything else with 404.
async fn respond(request: IncomingH3Headers) {
    let Some(tx) = request.send.get_ref().cloned() else {
        return;
    };
    let path = request
        .headers
        .iter()
        .find(|h| h.name() == b":path")
        .map(|h| String::from_utf8_lossy(h.value()).into_owned())
        .unwrap_or_default();
    let path = path.split('?').next().unwrap_or_default();
    let size: Option<usize> = path.strip_prefix("/bytes/").and_then(|n| n.parse().ok());
    let Some(mut left) = size else {
        let headers = vec![Header::new(b":status", b"404")];
        let _ = tx.send(OutboundFrame::Headers(headers, None)).await;
        let _ = tx.send(OutboundFrame::Body(Bytes::new(), true)).await;
        return;
    };
    let length = left.to_string();
    let headers = vec![
        Header::new(b":status", b"200"),
        Header::new(b"content-length", length.as_bytes()),
    ];
    if tx
        .send(OutboundFrame::Headers(headers, None))
        .await
        .is_err()
    {
        return;
    }
    loop {
        let n = left.min(CHUNK.len());
        left -= n;
        let body = Bytes::from_static(&CHUNK[..n]);
        if tx.send(OutboundFrame::Body(body, left == 0)).await.is_err() || left == 0 {
            return;
        }
    }
}
