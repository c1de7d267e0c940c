//! `tcp-bulk` on loopback: both directions, sized and timed, the samples
//! each end writes, the congestion control set on the sender, and an
//! unknown one refused.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_tcp-bulk");

/// A server on a free loopback port, stopped on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(samples: &Path) -> Server {
        let mut child = Command::new(BIN)
            .args(["server", "--listen", "127.0.0.1:0", "--samples"])
            .arg(samples)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_string();
        Server { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(addr: &str, args: &[&str], samples: &Path) -> (Output, Value) {
    let o = Command::new(BIN)
        .args(["client", "--connect", addr])
        .args(args)
        .arg("--samples")
        .arg(samples)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o, report)
}

fn records(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits for a server's file to hold its `end` record (the server writes
/// it once the client has closed).
fn wait_for_end(p: &Path) -> Vec<Value> {
    for _ in 0..200 {
        if let Ok(t) = std::fs::read_to_string(p) {
            if t.lines().any(|l| l.contains("\"type\":\"end\"")) {
                return records(p);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} has no end record", p.display());
}

/// The system's default algorithm, and another available one to ask for
/// (so that a socket running it shows the choice took).
fn not_the_default() -> String {
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    avail
        .split_whitespace()
        .find(|n| *n != default.trim())
        .expect("a kernel with one TCP congestion control only")
        .to_string()
}

fn check_samples(samples: &[Value], cc: &str) {
    let start = &samples[0];
    assert_eq!(start["type"], "start");
    assert_eq!(start["role"], "sender");
    assert_eq!(start["cc"], cc);
    assert_eq!(start["socket_cc"], cc, "the socket runs what was asked");
    let end = samples.last().unwrap();
    assert_eq!(end["type"], "end");
    assert_eq!(end["complete"], true, "{end}");
    let ticks: Vec<&Value> = samples.iter().filter(|s| s["type"] == "sample").collect();
    assert!(ticks.len() >= 2, "{} samples", ticks.len());
    let ts: Vec<f64> = ticks.iter().map(|s| s["t"].as_f64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[1] > w[0]), "times rise: {ts:?}");
    for s in &ticks {
        for k in [
            "cwnd",
            "mss",
            "srtt_us",
            "total_retrans",
            "bytes_acked",
            "bytes_sent",
        ] {
            assert!(s[k].is_u64(), "{k} in {s}");
        }
        assert!(s["cwnd"].as_u64().unwrap() > 0 && s["mss"].as_u64().unwrap() > 0);
    }
}

#[test]
fn a_sized_download_is_sampled_by_the_server_with_the_asked_algorithm() {
    let d = tempfile::tempdir().unwrap();
    let cc = not_the_default();
    let srv = Server::start(&d.path().join("server.jsonl"));
    let n = 200_000_000u64;
    let (o, r) = client(
        &srv.addr,
        &["--bytes", &n.to_string(), "--download", "--cc", &cc],
        &d.path().join("client.jsonl"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["complete"], true);
    assert_eq!(r["bytes"], n);
    // The goodput is what arrived over the time it took, no other figure
    // (the report rounds the time to the microsecond).
    let (g, dur) = (
        r["goodput_bps"].as_f64().unwrap(),
        r["duration_s"].as_f64().unwrap(),
    );
    let want = n as f64 * 8.0 / dur;
    assert!(
        (g - want).abs() <= (0.5e-6 / dur + 1e-12) * want,
        "goodput {g}, {n} B in {dur} s"
    );
    let s = wait_for_end(&d.path().join("server.jsonl"));
    check_samples(&s, &cc);
    let end = s.last().unwrap();
    assert_eq!(end["bytes"], n);
    // Everything was acknowledged: the payload and the answer line.
    let acked = end["info"]["bytes_acked"].as_u64().unwrap();
    assert!(acked > n && acked < n + 200, "{acked}");
    // The receiver's records: what arrived, and when.
    let c = records(&d.path().join("client.jsonl"));
    assert_eq!(c[0]["role"], "receiver");
    assert_eq!(c.last().unwrap()["bytes"], n);
    assert!(
        c.last().unwrap()["info"]["bytes_received"]
            .as_u64()
            .unwrap()
            > n
    );
}

#[test]
fn a_timed_upload_is_sampled_every_interval_by_the_client() {
    let d = tempfile::tempdir().unwrap();
    let cc = not_the_default();
    let srv = Server::start(&d.path().join("server.jsonl"));
    let (o, r) = client(
        &srv.addr,
        &[
            "--duration",
            "1",
            "--upload",
            "--cc",
            &cc,
            "--interval-ms",
            "10",
        ],
        &d.path().join("client.jsonl"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["complete"], true);
    // A timed run cannot end before its time; how long after depends on
    // the host, so nothing is asserted about that.
    let dur = r["duration_s"].as_f64().unwrap();
    assert!(dur >= 1.0, "ran {dur} s");
    let s = records(&d.path().join("client.jsonl"));
    check_samples(&s, &cc);
    // The sampler reads at ticks 10 ms apart from its start, each read
    // at or after its tick, and skips the ticks it missed rather than
    // crowding them in: so every sample but the last (taken when the run
    // stops) falls in a 10 ms slot of its own, whatever the host's load.
    let slots: Vec<u64> = s
        .iter()
        .filter(|s| s["type"] == "sample")
        .map(|s| (s["t"].as_f64().unwrap() * 1e6).round() as u64 / 10_000)
        .collect();
    assert!(slots.len() >= 3, "{} samples", slots.len());
    let ticks = &slots[..slots.len() - 1];
    assert!(
        ticks.windows(2).all(|w| w[1] > w[0]),
        "two samples in one 10 ms slot: {ticks:?}"
    );
    // What the server counted is what the client reports.
    let srv_end = wait_for_end(&d.path().join("server.jsonl"));
    assert_eq!(srv_end.last().unwrap()["bytes"], r["bytes"]);
    assert_eq!(srv_end[0]["role"], "receiver");
}

#[test]
fn an_unknown_algorithm_is_refused_with_what_the_kernel_has() {
    let d = tempfile::tempdir().unwrap();
    let srv = Server::start(&d.path().join("server.jsonl"));
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    for dir in ["--download", "--upload"] {
        let (o, r) = client(
            &srv.addr,
            &["--bytes", "1000", dir, "--cc", "nosuchcc"],
            &d.path().join("client.jsonl"),
        );
        assert_eq!(o.status.code(), Some(2), "{dir}");
        let e = r["error"].as_str().unwrap();
        assert!(e.contains("no TCP congestion control `nosuchcc`"), "{e}");
        for name in avail.split_whitespace() {
            assert!(e.contains(name), "{dir}: {e} does not list {name}");
        }
        assert_eq!(r["complete"], false);
    }
    // A name that cannot be one is refused before connecting.
    let (o, r) = client(
        "127.0.0.1:9",
        &["--bytes", "1000", "--upload", "--cc", "../x"],
        &d.path().join("c2.jsonl"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(r["error"]
        .as_str()
        .unwrap()
        .contains("not a TCP congestion control name"));
}

#[test]
fn a_timed_download_ends_soon_after_its_time() {
    let d = tempfile::tempdir().unwrap();
    let srv = Server::start(&d.path().join("server.jsonl"));
    let (o, r) = client(
        &srv.addr,
        &[
            "--duration",
            "0.5s",
            "--download",
            "--cc",
            &not_the_default(),
        ],
        &d.path().join("client.jsonl"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["complete"], true);
    let dur = r["duration_s"].as_f64().unwrap();
    // The sender stops writing at 0.5 s (its last write starts just
    // before); what it had queued (TCP_NOTSENT_LOWAT) drains in moments
    // on loopback. How many moments depends on the host, so only the
    // lower bound is asserted, and that the receiver got what was sent.
    assert!(dur >= 0.45, "ran {dur} s");
    let s = wait_for_end(&d.path().join("server.jsonl"));
    assert_eq!(s.last().unwrap()["bytes"], r["bytes"]);
}
