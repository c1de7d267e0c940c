//! `quic-client`: download or upload over HTTP/3 and report like iperf3.
//! Thin: parses arguments and runs [`quic_client::run`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use quic_client::{parse_size, parse_url, ClientConfig};

/// HTTP/3 bulk-data client. Exit status: 0 when the transfer completed as
/// asked, 1 when it did not, 2 for bad input.
#[derive(Parser, Debug)]
#[command(version, allow_negative_numbers = true)]
struct Args {
    /// URL to download, e.g. https://127.0.0.1:4433/bytes/50000000. A
    /// `?rate=BPS` query limits the rate (bit/s) at which the sending
    /// application writes the body: the server for a download, this client
    /// for an upload (https://host/upload?rate=2000000 --upload 10M).
    url: String,
    /// Upload this many bytes with POST instead (e.g. 50M).
    #[arg(long)]
    upload: Option<String>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Make the request this many times, one after another on the same
    /// connection: each starts when the previous response has finished
    /// (1 to 1000; not with --duration).
    #[arg(long, default_value_t = 1)]
    requests: u32,
    /// Wait this many seconds after each response before the next request
    /// (with --requests; the connection is idle meanwhile).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    think: f64,
    /// Congestion control when the client sends (uploads): `name` or
    /// `name:key=value,...`.
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// Write the client's qlog into this directory.
    #[arg(long)]
    qlog_dir: Option<PathBuf>,
    /// How much qlog: off, metrics (recovery metrics and losses only),
    /// core or its alias packets (packets, losses, recovery metrics),
    /// base (+ stream data and state changes) or extra (everything).
    #[arg(long, default_value = "extra")]
    qlog_level: String,
    /// Compress the qlog file with zstd (`client-CID.sqlog.zst`; true) or
    /// write plain JSON-SEQ (`client-CID.sqlog`; false). Default: the
    /// CCLAB_QLOG_COMPRESS environment variable, else true.
    #[arg(long, value_name = "BOOL")]
    qlog_compress: Option<String>,
    /// A JSON file whose content is written into the qlog as a
    /// `simulation:scenario` event (the conditions of the run).
    #[arg(long, value_name = "FILE")]
    qlog_scenario: Option<PathBuf>,
    /// Report every SECS seconds.
    #[arg(long, value_name = "SECS")]
    interval: Option<f64>,
    /// Print one JSON document at the end instead of text.
    #[arg(long)]
    json: bool,
    /// Give up if the connection is not up within this many seconds.
    #[arg(long, default_value_t = 10.0)]
    connect_timeout: f64,
    /// Largest UDP payload to send and to accept (the max_udp_payload_size
    /// transport parameter), bytes: 1200 to 1500 (default 1350).
    #[arg(long)]
    mtu: Option<usize>,
    /// When this end acknowledges: immediate (quiche's own: about one ACK
    /// per data packet), rfc9000 (every 2 ack-eliciting packets or 25 ms),
    /// or delayed:packets=N,max_delay=Dms.
    #[arg(long, default_value = "immediate", value_parser = quic_app::transport::AckPolicy::parse)]
    ack_policy: quic_app::transport::AckPolicy,
    /// Whether this end sends a data packet smaller than a full one because
    /// that is all the congestion window has room for: avoid (only when a
    /// full-size packet fits or nothing is in flight; the default, as
    /// cclab's scenarios) or allow (quiche's own).
    #[arg(long, default_value = "avoid", value_parser = quic_app::transport::SmallPackets::parse)]
    small_packets: quic_app::transport::SmallPackets,
    /// Pacing of what this end sends: on (quiche's pacer; a late sender
    /// makes up at most 2 ms at the pacing rate, 10 to 256 packets), off
    /// (as soon as the window has room, as ns-2's TCP sends), or
    /// on:credit=DURATION[,min=N][,max=N] (another bound on that burst).
    #[arg(long, default_value = "on", value_parser = quic_app::transport::Pacing::parse)]
    pacing: quic_app::transport::Pacing,
    /// Treat every received datagram as Not-ECT, whatever its IP header
    /// says: the client reports no ECN counts, as a peer without ECN
    /// support would, and an ECN-capable server's validation fails.
    #[arg(long)]
    ignore_ecn: bool,
    /// The socket path: `uring` (io_uring, one system call per wake-up),
    /// `epoll` (tokio's reactor, about three per datagram), or `auto`
    /// (io_uring where the kernel offers it). The environment variable
    /// QUIC_IO sets the default.
    #[arg(long, env = "QUIC_IO", default_value = "auto")]
    io: quic_app::uring::IoMode,
}

fn seconds(name: &str, v: f64) -> Result<Duration, String> {
    if v.is_finite() && v > 0.0 && v < 1e9 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!(
            "--{name}: `{v}` is not a positive number of seconds"
        ))
    }
}

fn read_json(p: &std::path::Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read(p).map_err(|e| format!("--qlog-scenario: {}: {e}", p.display()))?;
    serde_json::from_slice(&text)
        .map_err(|e| format!("--qlog-scenario: {} is not JSON: {e}", p.display()))
}

fn config(args: &Args) -> Result<ClientConfig, String> {
    let url = parse_url(&args.url).map_err(|e| e.to_string())?;
    if let Some(q) = url.query() {
        quic_app::rate::rate_from_path(&format!("?{q}"))
            .map_err(|e| format!("invalid URL `{}`: {e}", args.url))?;
    }
    if let Some(mtu) = args.mtu {
        quic_app::check_mtu(mtu).map_err(|e| format!("--mtu: {e}"))?;
    }
    quic_app::qlog_file::choose(args.qlog_compress.as_deref())?;
    Ok(ClientConfig {
        url,
        upload: args
            .upload
            .as_deref()
            .map(parse_size)
            .transpose()
            .map_err(|e| format!("--upload: {e}"))?,
        duration: args.duration.map(|d| seconds("duration", d)).transpose()?,
        requests: match (args.requests, args.duration) {
            (1..=1000, None) | (1, Some(_)) => args.requests,
            (1..=1000, Some(_)) => {
                return Err("--requests: a timed transfer (--duration) makes one request".into())
            }
            (n, _) => return Err(format!("--requests: {n} is not between 1 and 1000")),
        },
        think: if args.think == 0.0 {
            std::time::Duration::ZERO
        } else if args.requests < 2 {
            return Err("--think: the pause between requests needs --requests 2 or more".into());
        } else if args.think > quic_app::MAX_THINK.as_secs_f64() {
            return Err(format!(
                "--think: at most {} seconds (the connection is idle meanwhile, and closes after {} s idle)",
                quic_app::MAX_THINK.as_secs(),
                quic_app::IDLE_TIMEOUT.as_secs()
            ));
        } else {
            seconds("think", args.think)?
        },
        cc: cc_algorithms::parse(&args.cc).map_err(|e| format!("--cc: {e}"))?,
        qlog_dir: args.qlog_dir.clone(),
        qlog_level: quic_app::QlogLevel::parse(&args.qlog_level).ok_or_else(|| {
            format!(
                "--qlog-level: `{}` is not one of off, metrics, core (packets), base, extra",
                args.qlog_level
            )
        })?,
        qlog_events: match &args.qlog_scenario {
            Some(p) => vec![("simulation:scenario".to_string(), read_json(p)?)],
            None => Vec::new(),
        },
        interval: args.interval.map(|d| seconds("interval", d)).transpose()?,
        print_intervals: !args.json,
        timeout: seconds("connect-timeout", args.connect_timeout)?,
        mtu: args.mtu,
        transport: quic_app::transport::Transport {
            ack: args.ack_policy,
            small_packets: args.small_packets,
            pacing: args.pacing,
        },
        ignore_ecn: args.ignore_ecn,
        io: args.io,
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = match rt.block_on(quic_client::run(cfg)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        println!(
            "{} {} B in {:.3} s: {:.2} Mbit/s, {} packets lost, srtt {:.2} ms{}",
            report.direction,
            report.bytes,
            report.duration_s,
            report.goodput_bps / 1e6,
            report.lost_packets,
            report.srtt_ms,
            report
                .error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
    }
    if report.complete {
        ExitCode::SUCCESS
    } else {
        if !args.json {
            eprintln!(
                "error: {}",
                report.error.as_deref().unwrap_or("transfer incomplete")
            );
        }
        ExitCode::FAILURE
    }
}
