//! `tcp-bulk server` and `tcp-bulk client`: see the library's
//! documentation ([`tcp_bulk`]).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use clap::{Args, Parser, Subcommand};
use tcp_bulk::proto::{Direction, Request};
use tcp_bulk::transfer::{self, ClientArgs};

#[derive(Parser)]
#[command(
    name = "tcp-bulk",
    about = "Linux TCP bulk transfer; the sender samples TCP_INFO into a JSON-lines file"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve transfers; prints `listening on ADDR` once it listens.
    Server(ServerArgs),
    /// One transfer; prints its report as JSON on standard output.
    Client(Client),
    /// The kernel's TCP congestion controls: available now and loadable.
    List {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct ServerArgs {
    /// Address to listen on (port 0: any free port).
    #[arg(long)]
    listen: String,
    /// This end's records (sender: samples; receiver: bytes and times);
    /// the k-th connection after the first writes STEM-k.EXT.
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Serve one connection, then exit with its status.
    #[arg(long)]
    once: bool,
    /// TCP congestion control of the listening socket, which connections
    /// start with before a request sets theirs. An algorithm that needs
    /// ECN must be set here: Linux's DCTCP sends its SYN ECN-capable, and
    /// only a listener whose algorithm needs ECN accepts ECN on such a
    /// SYN (otherwise the connection falls back to `dctcp-reno`).
    #[arg(long)]
    cc: Option<String>,
}

#[derive(Args)]
struct Client {
    /// The server, HOST:PORT.
    #[arg(long)]
    connect: String,
    /// Payload bytes to move.
    #[arg(
        long,
        conflicts_with = "duration",
        required_unless_present = "duration"
    )]
    bytes: Option<u64>,
    /// Seconds to send for (e.g. 30 or 2.5s).
    #[arg(long, value_parser = parse_seconds)]
    duration: Option<f64>,
    /// The server sends.
    #[arg(long, conflicts_with = "upload", required_unless_present = "upload")]
    download: bool,
    /// The client sends.
    #[arg(long)]
    upload: bool,
    /// The sender's congestion control (a name in
    /// /proc/sys/net/ipv4/tcp_available_congestion_control, or a module
    /// tcp_NAME root can load).
    #[arg(long)]
    cc: String,
    /// This end's records (sender: TCP_INFO samples; receiver: bytes and
    /// times), JSON lines.
    #[arg(long)]
    samples: PathBuf,
    /// The sender's sampling interval, ms.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    interval_ms: u64,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    s.trim_end_matches('s')
        .parse::<f64>()
        .ok()
        .filter(|d| *d > 0.0 && d.is_finite())
        .ok_or_else(|| format!("`{s}` is not a number of seconds above 0, such as 30 or 2.5s"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Server(a) => server(a),
        Cmd::Client(c) => client(c),
        Cmd::List { json } => list(json),
    };
    ExitCode::from(code as u8)
}

/// Connections being served, and whether SIGTERM came.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static TERM: AtomicBool = AtomicBool::new(false);

/// SIGTERM: exit at once when no connection is being served, else when
/// the last one has written its end record.
extern "C" fn on_term(_: libc::c_int) {
    TERM.store(true, Ordering::SeqCst);
    if ACTIVE.load(Ordering::SeqCst) == 0 {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(0) };
    }
}

fn server(a: ServerArgs) -> i32 {
    // SAFETY: installing a handler that only touches atomics and _exits.
    unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
    let l = match transfer::listen(&a.listen, a.cc.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tcp-bulk: {e}");
            return 2;
        }
    };
    match l.local_addr() {
        Ok(addr) => {
            println!("listening on {addr}");
            let _ = std::io::stdout().flush();
        }
        Err(e) => {
            eprintln!("tcp-bulk: {e}");
            return 1;
        }
    }
    let mut k = 0;
    for conn in l.incoming() {
        let s = match conn {
            Ok(s) => s,
            Err(e) => {
                eprintln!("tcp-bulk: accept: {e}");
                continue;
            }
        };
        let path = a.samples.as_ref().map(|p| transfer::nth_samples_path(p, k));
        k += 1;
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        if a.once {
            return match transfer::serve(s, path.as_deref()) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("tcp-bulk: {e}");
                    1
                }
            };
        }
        std::thread::spawn(move || {
            if let Err(e) = transfer::serve(s, path.as_deref()) {
                eprintln!("tcp-bulk: {e}");
            }
            if ACTIVE.fetch_sub(1, Ordering::SeqCst) == 1 && TERM.load(Ordering::SeqCst) {
                std::process::exit(0);
            }
        });
    }
    0
}

fn client(c: Client) -> i32 {
    let a = ClientArgs {
        connect: c.connect,
        request: Request {
            direction: if c.upload {
                Direction::Upload
            } else {
                Direction::Download
            },
            bytes: c.bytes,
            duration_s: c.duration,
            cc: c.cc,
            interval_ms: c.interval_ms,
        },
        samples: Some(c.samples),
    };
    let (report, code) = transfer::client(&a);
    println!("{report}");
    if let Some(e) = report["error"].as_str() {
        eprintln!("tcp-bulk: {e}");
    }
    code
}

fn list(json: bool) -> i32 {
    use tcp_bulk::cc;
    let available = cc::available().unwrap_or_default();
    let loadable = cc::loadable();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "kernel": cc::release(),
                "available": available,
                "allowed": cc::allowed(),
                "loadable": loadable,
            })
        );
    } else {
        println!("kernel {}", cc::release());
        println!("available: {}", available.join(" "));
        println!("loadable modules: {}", loadable.join(" "));
    }
    0
}
