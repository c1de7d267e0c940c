//! Interoperability with QUIC stacks no one here wrote: aioquic, installed
//! from PyPI into a virtualenv by `tests/interop/setup.sh`, and quiche's own
//! example HTTP/3 client (ignored by a plain `cargo test`: `make
//! test-quiche-example-client`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncBufReadExt, BufReader};

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop")
}

/// The virtualenv's python, set up once per test binary.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("aioquic-venv");
        let out = std::process::Command::new("bash")
            .arg(interop_dir().join("setup.sh"))
            .arg(&venv)
            .output()
            .expect("run setup.sh");
        assert!(
            out.status.success(),
            "installing aioquic failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aioquic_client_downloads_from_quic_server() {
    let python = python();
    let server = start_server("cubic", None).await;
    let n = 5_000_000;
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(interop_dir().join("aioquic_get.py"))
            .arg(format!("https://{}/bytes/{n}", server.addr))
            .output(),
    )
    .await
    .expect("aioquic client finishes")
    .expect("aioquic client runs");
    server.stop().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "aioquic failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), format!("200 {n}"), "aioquic saw: {stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quic_client_downloads_from_aioquic_server() {
    let python = python();
    let (cert, key) = quic_server::endpoint::self_signed()
        .unwrap()
        .write_to(&scratch_dir("aioquic-cert"))
        .unwrap();
    let mut child = tokio::process::Command::new(python)
        .arg(interop_dir().join("aioquic_server.py"))
        .arg(&cert)
        .arg(&key)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("aioquic server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("aioquic server announces itself")
        .unwrap()
        .unwrap_or_default();
    let addr = first
        .strip_prefix("listening on ")
        .expect("listening line")
        .to_string();

    let n = 3_000_000;
    let report = download(&format!("https://{addr}/bytes/{n}"), None).await;
    child.kill().await.ok();
    assert!(report.complete, "{report:?}");
    assert_eq!(report.bytes, n);
    assert_eq!(report.status, Some(200));
    eprintln!(
        "from aioquic: {} B in {:.3} s",
        report.bytes, report.duration_s
    );
}

/// quiche's own example HTTP/3 client (`examples/http3-client.rs` of the
/// pristine quiche 0.30.0 crate, unpatched), built once from cargo's
/// registry cache (brought there through `patches/fetch`, as
/// `patches/bootstrap.sh` does) in `target/quiche-example`, with its own
/// lock file and target directory.
fn quiche_example_client() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let manifest = repo.join("patches/fetch/Cargo.toml");
    let cargo = || std::process::Command::new(env!("CARGO"));
    let ok = |c: &mut std::process::Command| {
        let o = c.output().expect("cargo runs");
        assert!(
            o.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    };
    ok(cargo()
        .args(["fetch", "--locked", "--manifest-path"])
        .arg(&manifest));
    let meta: serde_json::Value = serde_json::from_slice(&ok(cargo()
        .args([
            "metadata",
            "--locked",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(&manifest)))
    .expect("cargo metadata's JSON");
    let src = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["manifest_path"].as_str())
        .find(|m| m.ends_with("/quiche-0.30.0/Cargo.toml"))
        .map(|m| Path::new(m).parent().unwrap().to_path_buf())
        .expect("the pristine quiche 0.30.0 crate in cargo's registry cache");
    let ex = repo.join("target/quiche-example");
    let copy = ex.join("quiche");
    if !copy.join("Cargo.toml").exists() {
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(&ex).unwrap();
        ok(std::process::Command::new("cp")
            .arg("-R")
            .arg(&src)
            .arg(&copy));
        ok(std::process::Command::new("chmod")
            .arg("-R")
            .arg("u+w")
            .arg(&copy));
        // Its own workspace: the copy sits inside ours, whose [patch] must
        // not apply to it.
        let toml = copy.join("Cargo.toml");
        let text = std::fs::read_to_string(&toml).unwrap();
        std::fs::write(&toml, format!("{text}\n[workspace]\n")).unwrap();
    }
    ok(cargo()
        .args([
            "build",
            "--release",
            "-q",
            "--example",
            "http3-client",
            "--manifest-path",
        ])
        .arg(copy.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(ex.join("target")));
    ex.join("target/release/examples/http3-client")
}

/// One download of `bytes` by `client` (with `args` before the URL), its
/// body checked against what quic-server sends; a line for the log, or
/// the failure.
async fn fetch_with(
    client: &Path,
    args: &[&str],
    addr: std::net::SocketAddr,
    bytes: usize,
) -> Result<String, String> {
    let t0 = std::time::Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(client)
            .args(args)
            .arg(format!("https://{addr}/bytes/{bytes}"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| "no answer in 120 s".to_string())?
    .map_err(|e| format!("{}: {e}", client.display()))?;
    let secs = t0.elapsed().as_secs_f64();
    let want: Vec<u8> = b"cclab-bulk-data-"
        .iter()
        .copied()
        .cycle()
        .take(64)
        .collect();
    let body = &out.stdout;
    if out.status.success() && body.len() == bytes && body.starts_with(&want) {
        Ok(format!(
            "{bytes} bytes in {secs:.3} s ({:.1} Mbit/s), body checked",
            bytes as f64 * 8.0 / secs / 1e6
        ))
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "{}, {} of {bytes} bytes in {secs:.3} s; client stderr: {}",
            out.status,
            body.len(),
            &err[err.len().saturating_sub(500)..]
        ))
    }
}

/// quiche's example client fetches BYTES (default 10 MB) from quic-server
/// REPS times (default 3) with its default options (just a URL); then once
/// from a DCTCP server, whose ECN validation must fail against a client
/// without ECN (RFC 9000, Section 13.4.2) while the transfer completes.
/// `QUICHE_CLIENT=PATH` (quiche's `quiche-client` from its apps/) runs too,
/// with `--no-verify` only: it starts with the reserved version 0xbabababa,
/// so this checks Version Negotiation as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds quiche's example client (minutes, ~800 MB): make test-quiche-example-client runs it"]
async fn quiche_example_client_downloads_from_quic_server() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (bytes, reps) = (env("BYTES", 10_000_000), env("REPS", 3));
    let client = tokio::task::spawn_blocking(quiche_example_client)
        .await
        .unwrap();
    let app_client = std::env::var_os("QUICHE_CLIENT").map(PathBuf::from);
    let mut failed = Vec::new();
    let mut record = |label: String, r: Result<String, String>| match r {
        Ok(line) => eprintln!("{label}: {line}"),
        Err(e) => {
            eprintln!("{label}: FAILED: {e}");
            failed.push(format!("{label}: {e}"));
        }
    };
    let server = start_server("cubic", None).await;
    for rep in 1..=reps {
        let r = fetch_with(&client, &[], server.addr, bytes).await;
        record(format!("http3-client run {rep}"), r);
    }
    if let Some(qc) = &app_client {
        for rep in 1..=reps {
            let r = fetch_with(qc, &["--no-verify"], server.addr, bytes).await;
            record(format!("quiche-client run {rep}"), r);
        }
    }
    let stats = server.stop().await;
    if app_client.is_some() {
        // One Version Negotiation (or more) per quiche-client connection.
        let vn = stats.version_negotiations;
        let r = if vn >= reps as u64 {
            Ok(format!("{vn} packets for {reps} quiche-client connections"))
        } else {
            Err(format!("{vn} packets for {reps} quiche-client connections"))
        };
        record("version negotiation".into(), r);
    }

    // ECN against a peer without it: a DCTCP server sends ECT(0) while it
    // tests the path; the unpatched client reports no ECN counts.
    let q = scratch_dir("quiche-example-ecn");
    let server = start_server("dctcp", Some(&q)).await;
    let r = fetch_with(&client, &[], server.addr, bytes).await;
    record("http3-client, DCTCP server".into(), r);
    server.stop().await;
    let mut states = Vec::new();
    for f in std::fs::read_dir(&q).unwrap().flatten() {
        for rec in read_qlog(&f.path()) {
            if rec["name"] == "quic:ecn_state_updated" {
                states.push(rec["data"]["new"].as_str().unwrap_or("?").to_string());
            }
        }
    }
    let r = if states.iter().any(|s| s == "failed") {
        Ok(format!(
            "the DCTCP server's validation: {}",
            states.join(" ")
        ))
    } else {
        Err(format!(
            "the DCTCP server's validation states were: {states:?}"
        ))
    };
    record("ECN".into(), r);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
