//! The server's self-signed certificate.

use std::path::PathBuf;

use quic_app::{hex, random_cid};

/// Writes a fresh self-signed certificate for `localhost` into a private
/// temporary directory; returns (certificate, key) paths. Nothing is kept.
pub fn self_signed() -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = std::env::temp_dir().join(format!(
        "cclab-cert-{}-{}",
        std::process::id(),
        hex(&random_cid()[..4])
    ));
    std::fs::create_dir_all(&dir)?;
    let cert = rcgen::generate_simple_self_signed(vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
    ])?;
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.cert.pem())?;
    std::fs::write(&k, cert.signing_key.serialize_pem())?;
    Ok((c, k))
}
