//! Interoperability with a QUIC stack no one here wrote: aioquic, installed
//! from PyPI into a virtualenv by `tests/interop/setup.sh`.

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
