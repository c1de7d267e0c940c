//! Both ends of a transfer: the client ([`client`]) and one connection of
//! the server ([`serve`]), the sender's `TCP_INFO` sampler, and the
//! samples file.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::info::{self, round_us};
use crate::proto::{self, Direction, Request};
use crate::{cc, UNBOUNDED};

/// Bytes per write and per read.
const CHUNK: usize = 64 * 1024;
/// The sender keeps at most this much unsent data in its socket
/// (`TCP_NOTSENT_LOWAT`), so a timed transfer stops sending soon after
/// its time is up instead of draining a send buffer of seconds; data in
/// flight is not limited by it.
pub const NOTSENT_LOWAT: u32 = 256 * 1024;
/// How long a read may wait for the peer before the transfer fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the client waits for the connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Records between flushes of the samples file.
const FLUSH_EVERY: usize = 10;

/// A samples file (or none), one JSON object a line.
pub struct Samples {
    w: Option<BufWriter<File>>,
    n: usize,
}

impl Samples {
    /// Creates `path` (nothing is written without one).
    pub fn create(path: Option<&Path>) -> std::io::Result<Samples> {
        let w = match path {
            Some(p) => Some(BufWriter::new(File::create(p)?)),
            None => None,
        };
        Ok(Samples { w, n: 0 })
    }

    /// Appends a record.
    pub fn write(&mut self, v: &Value) -> std::io::Result<()> {
        if let Some(w) = &mut self.w {
            w.write_all(&proto::line(v))?;
            self.n += 1;
            if self.n.is_multiple_of(FLUSH_EVERY) {
                w.flush()?;
            }
        }
        Ok(())
    }

    /// Flushes what is left.
    pub fn finish(mut self) -> std::io::Result<()> {
        match &mut self.w {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

/// The sender's sampler: a thread that reads `TCP_INFO` every interval
/// into the samples file.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(Samples, std::io::Result<()>)>,
}

impl Sampler {
    /// Samples socket `fd` at `t0`, then every `interval` after it.
    pub fn start(fd: RawFd, t0: Instant, interval: Duration, mut out: Samples) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut k: u32 = 0;
            let r = loop {
                let now = Instant::now();
                let r = info::read(fd).and_then(|i| out.write(&i.sample((now - t0).as_secs_f64())));
                if r.is_err() || flag.load(Ordering::Relaxed) {
                    break r;
                }
                // The next tick after now (ticks missed while late are
                // skipped, not crowded in).
                let since = (Instant::now() - t0).as_nanos();
                k = (k + 1).max((since / interval.as_nanos().max(1)) as u32 + 1);
                let next = t0 + interval * k;
                while !flag.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now >= next {
                        break;
                    }
                    std::thread::sleep((next - now).min(Duration::from_millis(50)));
                }
            };
            (out, r)
        });
        Sampler { stop, handle }
    }

    /// Stops after one last sample; the file back.
    pub fn stop(self) -> (Samples, std::io::Result<()>) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_else(|_| {
            (
                Samples { w: None, n: 0 },
                Err(std::io::Error::other("the sampler panicked")),
            )
        })
    }
}

/// Sets `TCP_NOTSENT_LOWAT` on a sending socket.
fn set_notsent_lowat(fd: RawFd) -> std::io::Result<()> {
    let v: libc::c_int = NOTSENT_LOWAT as libc::c_int;
    // SAFETY: a valid fd and an int.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes up to `bytes` (or until `until`) of payload; the bytes written.
fn send(s: &mut TcpStream, bytes: u64, until: Option<Instant>) -> std::io::Result<u64> {
    let buf = vec![0x5a_u8; CHUNK];
    let mut sent = 0u64;
    while sent < bytes && until.is_none_or(|u| Instant::now() < u) {
        let n = (bytes - sent).min(CHUNK as u64) as usize;
        match s.write(&buf[..n]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(k) => sent += k as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Reads to the end; the bytes read and when the last arrived. A read
/// error ends it too, and is returned with what arrived before it.
fn receive(r: &mut impl Read) -> (u64, Option<Instant>, Option<std::io::Error>) {
    let mut buf = vec![0u8; 4 * CHUNK];
    let mut got = 0u64;
    let mut last = None;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return (got, last, None),
            Ok(n) => {
                got += n as u64;
                last = Some(Instant::now());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (got, last, Some(e)),
        }
    }
}

fn unix_time_s() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| round_us(d.as_secs_f64()))
}

/// A `start` record.
fn start_record(role: &str, side: &str, req: &Request, s: &TcpStream) -> Value {
    json!({
        "type": "start",
        "role": role,
        "side": side,
        "direction": req.direction.as_str(),
        "cc": req.cc,
        "bytes": req.bytes,
        "duration_s": req.duration_s,
        "interval_ms": req.interval_ms,
        // What the socket runs, read back (a receiver's is the system
        // default: it only acknowledges).
        "socket_cc": cc::get(s.as_raw_fd()).ok(),
        "local": s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        "peer": s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
        "unix_time_s": unix_time_s(),
        "kernel": cc::release(),
    })
}

/// An `end` record: payload `bytes` this end moved, `t` s since the start.
fn end_record(t: f64, bytes: u64, complete: bool, error: Option<&str>, fd: RawFd) -> Value {
    json!({
        "type": "end",
        "t": round_us(t),
        "bytes": bytes,
        "complete": complete,
        "error": error,
        "info": info::read(fd).map(|i| i.to_json()).unwrap_or(Value::Null),
    })
}

/// What the client is asked to do.
#[derive(Clone, Debug)]
pub struct ClientArgs {
    /// The server, `HOST:PORT`.
    pub connect: String,
    pub request: Request,
    /// This end's samples file.
    pub samples: Option<PathBuf>,
}

/// Why a client failed: bad input (a congestion control, status 2) or the
/// transfer (status 1).
fn fail(report: &mut Value, cc_problem: bool, msg: String) -> i32 {
    report["error"] = json!(msg);
    if cc_problem {
        2
    } else {
        1
    }
}

/// Runs the client: its report (what `tcp-bulk client` prints) and exit
/// status (0 complete, 1 failed, 2 bad input such as an unavailable
/// congestion control).
pub fn client(a: &ClientArgs) -> (Value, i32) {
    let req = &a.request;
    let mut report = json!({
        "transport": "tcp",
        "direction": req.direction.as_str(),
        "cc": req.cc,
        "server": a.connect,
        "bytes": 0,
        "duration_s": 0.0,
        "goodput_bps": 0.0,
        "complete": false,
        "error": null,
        "samples": a.samples,
    });
    let code = match run_client(a, &mut report) {
        Ok(()) => 0,
        Err((cc_problem, msg)) => fail(&mut report, cc_problem, msg),
    };
    (report, code)
}

type ClientError = (bool, String);

fn io_err(what: &str) -> impl Fn(std::io::Error) -> ClientError + '_ {
    move |e| (false, format!("{what}: {e}"))
}

fn run_client(a: &ClientArgs, report: &mut Value) -> Result<(), ClientError> {
    let req = &a.request;
    // The algorithm, checked before anything starts: the client's socket
    // takes it before connecting in both directions (for a download the
    // server's socket, the sender, takes it too), so that an algorithm
    // that needs ECN (dctcp) asks for it in the SYN, and the receiving
    // end runs its half of it (DCTCP's exact CE echo).
    cc::ensure(&req.cc).map_err(|e| (true, e.0))?;
    let mut samples = Samples::create(a.samples.as_deref()).map_err(|e| {
        (
            true,
            format!(
                "--samples {}: {e}",
                a.samples.as_deref().unwrap_or(Path::new("")).display()
            ),
        )
    })?;
    let addrs: Vec<SocketAddr> = a
        .connect
        .to_socket_addrs()
        .map_err(|e| (true, format!("--connect {}: {e}", a.connect)))?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| (true, format!("--connect {}: no address", a.connect)))?;
    let c0 = Instant::now();
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(io_err("socket"))?;
    cc::set(sock.as_raw_fd(), &req.cc).map_err(|e| (true, e.0))?;
    sock.connect_timeout(&addr.into(), CONNECT_TIMEOUT)
        .map_err(io_err(&format!("connecting to {addr}")))?;
    let mut s: TcpStream = sock.into();
    report["connect_ms"] = json!(round_us(c0.elapsed().as_secs_f64() * 1e3));
    s.set_read_timeout(Some(READ_TIMEOUT))
        .map_err(io_err("socket"))?;
    let fd = s.as_raw_fd();
    if req.direction == Direction::Upload {
        // Set before connecting; checked again now the handshake is done
        // (DCTCP falls back to Reno without ECN).
        cc::set(fd, &req.cc).map_err(|e| (true, e.0))?;
        set_notsent_lowat(fd).map_err(io_err("TCP_NOTSENT_LOWAT"))?;
    }
    let t0 = Instant::now();
    s.write_all(&proto::line(&req.to_json()))
        .map_err(io_err("sending the request"))?;
    let role = match req.direction {
        Direction::Download => "receiver",
        Direction::Upload => "sender",
    };
    samples
        .write(&start_record(role, "client", req, &s))
        .map_err(io_err("samples"))?;
    let mut reader = BufReader::with_capacity(4 * CHUNK, s.try_clone().map_err(io_err("socket"))?);
    let answer = proto::read_line(&mut reader).map_err(io_err("the server's answer"))?;
    if let Some(e) = answer["error"].as_str() {
        let cc_problem = answer["cc_error"].as_bool().unwrap_or(false);
        return Err((cc_problem, format!("the server refused: {e}")));
    }
    let (bytes, t_end, complete, err) = match req.direction {
        Direction::Download => {
            let (n, last, e) = receive(&mut reader);
            let t = last.unwrap_or_else(Instant::now) - t0;
            let (complete, err) = match (req.bytes, e) {
                (_, Some(e)) => (false, Some(format!("receiving: {e}"))),
                (Some(want), None) if n != want => (
                    false,
                    Some(format!("the server ended after {n} of {want} bytes")),
                ),
                _ => (true, None),
            };
            samples
                .write(&end_record(
                    t.as_secs_f64(),
                    n,
                    complete,
                    err.as_deref(),
                    fd,
                ))
                .map_err(io_err("samples"))?;
            (n, t, complete, err)
        }
        Direction::Upload => {
            let sampler = Sampler::start(fd, t0, interval(req), samples);
            let until = req.duration_s.map(|d| t0 + Duration::from_secs_f64(d));
            let sent = send(&mut s, req.bytes.unwrap_or(UNBOUNDED), until);
            let _ = s.shutdown(Shutdown::Write);
            let answer = proto::read_line(&mut reader);
            let t = Instant::now() - t0;
            let (out, r) = sampler.stop();
            samples = out;
            r.map_err(io_err("sampling TCP_INFO"))?;
            let received = answer.as_ref().ok().and_then(|v| v["received"].as_u64());
            let (complete, err) = match (&sent, &answer, received) {
                (Err(e), _, _) => (false, Some(format!("sending: {e}"))),
                (_, Err(e), _) => (false, Some(format!("the server's count: {e}"))),
                (_, _, None) => (false, Some("the server sent no count".to_string())),
                (Ok(_), Ok(_), Some(n)) => match req.bytes {
                    Some(want) if n != want => (
                        false,
                        Some(format!("the server received {n} of {want} bytes")),
                    ),
                    _ => (true, None),
                },
            };
            let n = received.unwrap_or(0);
            samples
                .write(&end_record(
                    t.as_secs_f64(),
                    *sent.as_ref().unwrap_or(&0),
                    complete,
                    err.as_deref(),
                    fd,
                ))
                .map_err(io_err("samples"))?;
            (n, t, complete, err)
        }
    };
    samples.finish().map_err(io_err("samples"))?;
    let d = t_end.as_secs_f64();
    report["bytes"] = json!(bytes);
    report["duration_s"] = json!(round_us(d));
    report["goodput_bps"] = json!(bytes as f64 * 8.0 / d.max(1e-9));
    report["complete"] = json!(complete);
    match err {
        Some(e) => Err((false, e)),
        None => Ok(()),
    }
}

fn interval(req: &Request) -> Duration {
    Duration::from_millis(req.interval_ms)
}

/// A listener on `addr`, its socket set to congestion control `cc` (when
/// given) before it listens, so that accepted connections start with it:
/// an algorithm that needs ECN (dctcp) accepts ECN only on such a
/// listener.
pub fn listen(addr: &str, cc: Option<&str>) -> Result<std::net::TcpListener, String> {
    let Some(cc) = cc else {
        return std::net::TcpListener::bind(addr).map_err(|e| format!("--listen {addr}: {e}"));
    };
    let sa: SocketAddr = addr
        .parse()
        .map_err(|e| format!("--listen {addr}: {e} (give IP:PORT with --cc)"))?;
    let s = socket2::Socket::new(
        socket2::Domain::for_address(sa),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(|e| format!("socket: {e}"))?;
    s.set_reuse_address(true)
        .map_err(|e| format!("SO_REUSEADDR: {e}"))?;
    cc::set(s.as_raw_fd(), cc).map_err(|e| format!("--cc: {e}"))?;
    s.bind(&sa.into())
        .map_err(|e| format!("--listen {addr}: {e}"))?;
    s.listen(128).map_err(|e| format!("listen: {e}"))?;
    Ok(s.into())
}

/// Serves one connection, writing this end's records into `samples`;
/// an error only for what could not even be answered.
pub fn serve(s: TcpStream, samples: Option<&Path>) -> Result<(), String> {
    s.set_read_timeout(Some(READ_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::with_capacity(4 * CHUNK, s.try_clone().map_err(|e| e.to_string())?);
    let mut w = s;
    let refuse = |w: &mut TcpStream, msg: String, cc_error: bool| -> Result<(), String> {
        let _ = w.write_all(&proto::line(&json!({"error": msg, "cc_error": cc_error})));
        Err(msg)
    };
    let v = proto::read_line(&mut reader).map_err(|e| format!("the request: {e}"))?;
    let req = match Request::from_json(&v) {
        Ok(r) => r,
        Err(e) => return refuse(&mut w, format!("bad request: {e}"), false),
    };
    let t0 = Instant::now();
    let fd = w.as_raw_fd();
    if req.direction == Direction::Download {
        if let Err(e) = cc::set(fd, &req.cc) {
            return refuse(&mut w, e.0, true);
        }
        if let Err(e) = set_notsent_lowat(fd) {
            return refuse(&mut w, format!("TCP_NOTSENT_LOWAT: {e}"), false);
        }
    }
    let mut out = Samples::create(samples).map_err(|e| format!("samples: {e}"))?;
    w.write_all(&proto::line(&json!({"ok": true, "cc": req.cc})))
        .map_err(|e| format!("answering: {e}"))?;
    match req.direction {
        Direction::Download => {
            out.write(&start_record("sender", "server", &req, &w))
                .map_err(|e| e.to_string())?;
            let sampler = Sampler::start(fd, t0, interval(&req), out);
            let until = req.duration_s.map(|d| t0 + Duration::from_secs_f64(d));
            let sent = send(&mut w, req.bytes.unwrap_or(UNBOUNDED), until);
            let _ = w.shutdown(Shutdown::Write);
            // The client closes once it has read everything: the data is
            // then acknowledged, and the samples cover all of it.
            let (_, _, e) = receive(&mut reader);
            let t = (Instant::now() - t0).as_secs_f64();
            let (mut out, r) = sampler.stop();
            let err = match (&sent, e) {
                (Err(e), _) => Some(format!("sending: {e}")),
                (_, Some(e)) => Some(format!("waiting for the client to close: {e}")),
                _ => None,
            };
            let n = *sent.as_ref().unwrap_or(&0);
            let complete = err.is_none() && req.bytes.is_none_or(|b| b == n);
            out.write(&end_record(t, n, complete, err.as_deref(), fd))
                .and(r)
                .and(out.finish())
                .map_err(|e| e.to_string())?;
            err.map_or(Ok(()), Err)
        }
        Direction::Upload => {
            out.write(&start_record("receiver", "server", &req, &w))
                .map_err(|e| e.to_string())?;
            let (n, last, e) = receive(&mut reader);
            let t = (last.unwrap_or_else(Instant::now) - t0).as_secs_f64();
            let answered = w.write_all(&proto::line(&json!({"received": n, "t_s": round_us(t)})));
            let err = e
                .map(|e| format!("receiving: {e}"))
                .or(answered.err().map(|e| format!("answering: {e}")));
            let complete = err.is_none() && req.bytes.is_none_or(|b| b == n);
            out.write(&end_record(t, n, complete, err.as_deref(), fd))
                .and(out.finish())
                .map_err(|e| e.to_string())?;
            err.map_or(Ok(()), Err)
        }
    }
}

/// The samples file of a server's `k`-th connection (from 0): `path`
/// itself for the first, `STEM-k.EXT` after it.
pub fn nth_samples_path(path: &Path, k: usize) -> PathBuf {
    if k == 0 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(e) => format!("{stem}-{k}.{}", e.to_string_lossy()),
        None => format!("{stem}-{k}"),
    };
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_start_with_the_listeners_algorithm() {
        // reno is built into every Linux kernel.
        let l = listen("127.0.0.1:0", Some("reno")).unwrap();
        let addr = l.local_addr().unwrap();
        let c = std::thread::spawn(move || TcpStream::connect(addr).unwrap());
        let (s, _) = l.accept().unwrap();
        let _c = c.join().unwrap();
        assert_eq!(cc::get(s.as_raw_fd()).unwrap(), "reno");
        assert_eq!(cc::get(l.as_raw_fd()).unwrap(), "reno");
        let e = listen("127.0.0.1:0", Some("nosuchcc")).unwrap_err();
        assert!(e.contains("--cc") && e.contains("nosuchcc"), "{e}");
        let e = listen("localhost:0", Some("reno")).unwrap_err();
        assert!(e.contains("IP:PORT"), "{e}");
    }

    #[test]
    fn later_connections_get_their_own_file() {
        let p = Path::new("/x/server.jsonl");
        assert_eq!(nth_samples_path(p, 0), p);
        assert_eq!(nth_samples_path(p, 2), Path::new("/x/server-2.jsonl"));
        assert_eq!(nth_samples_path(Path::new("s"), 1), Path::new("s-1"));
    }
}
