//! The server's TLS identity: a certificate chain and private key from PEM
//! files, or a fresh self-signed certificate that never leaves memory.
//!
//! Earlier versions wrote the self-signed pair into `cclab-cert-<pid>-<hex>`
//! directories under the temporary directory and left them there.
//! [`remove_stale_cert_dirs`] clears those whose process is gone.

use std::path::{Path, PathBuf};

use boring::pkey::PKey;
use boring::ssl::{SslContextBuilder, SslMethod};
use boring::x509::X509;

/// A PEM certificate chain and its private key, in memory.
pub struct Identity {
    /// PEM certificates, leaf first.
    pub cert_pem: Vec<u8>,
    /// PEM private key.
    pub key_pem: Vec<u8>,
}

impl Identity {
    /// Reads a PEM certificate chain and key; errors name the file.
    pub fn from_files(cert: &Path, key: &Path) -> anyhow::Result<Identity> {
        let read = |p: &Path, what: &str| {
            std::fs::read(p).map_err(|e| anyhow::anyhow!("cannot load {what} {}: {e}", p.display()))
        };
        Ok(Identity {
            cert_pem: read(cert, "certificate")?,
            key_pem: read(key, "private key")?,
        })
    }

    /// Writes the pair as `cert.pem` and `key.pem` into `dir` (for tools
    /// that want files, such as another QUIC server in a test); returns
    /// their paths. The key file is readable by its owner only.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&c, &self.cert_pem)?;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&k)?
            .write_all(&self.key_pem)?;
        Ok((c, k))
    }

    /// A TLS context that presents this identity, for
    /// `quiche::Config::with_boring_ssl_ctx_builder`. `cert` and `key` name
    /// where the PEM came from, in errors.
    pub fn tls_context(&self, cert: &str, key: &str) -> anyhow::Result<SslContextBuilder> {
        let chain = X509::stack_from_pem(&self.cert_pem)
            .map_err(|e| anyhow::anyhow!("cannot load certificate {cert}: {e}"))?;
        let mut chain = chain.into_iter();
        let leaf = chain
            .next()
            .ok_or_else(|| anyhow::anyhow!("cannot load certificate {cert}: no certificate"))?;
        let pkey = PKey::private_key_from_pem(&self.key_pem)
            .map_err(|e| anyhow::anyhow!("cannot load private key {key}: {e}"))?;
        let mut b = SslContextBuilder::new(SslMethod::tls())?;
        b.set_certificate(&leaf)?;
        for c in chain {
            b.add_extra_chain_cert(c)?;
        }
        b.set_private_key(&pkey)
            .and_then(|()| b.check_private_key())
            .map_err(|e| {
                anyhow::anyhow!("private key {key} does not match certificate {cert}: {e}")
            })?;
        Ok(b)
    }
}

/// A fresh self-signed certificate for `localhost`, `127.0.0.1` and `::1`,
/// in memory only.
pub fn self_signed() -> anyhow::Result<Identity> {
    let cert = rcgen::generate_simple_self_signed(vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
    ])?;
    Ok(Identity {
        cert_pem: cert.cert.pem().into_bytes(),
        key_pem: cert.signing_key.serialize_pem().into_bytes(),
    })
}

/// Removes `cclab-cert-<pid>-<hex>` directories in `tmp` that earlier
/// versions of the server left behind, when process `pid` no longer runs
/// and the directory holds nothing but `cert.pem` and `key.pem`. Returns
/// how many went. Best effort: what cannot be read or removed stays.
pub fn remove_stale_cert_dirs(tmp: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(stale_owner) else {
            continue;
        };
        if Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let dir = e.path();
        // Not a symbolic link, and only what the old server wrote.
        let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        let only_pems = std::fs::read_dir(&dir).is_ok_and(|files| {
            files
                .flatten()
                .all(|f| matches!(f.file_name().to_str(), Some("cert.pem" | "key.pem")))
        });
        if is_dir && only_pems && std::fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid in a name of the form `cclab-cert-<pid>-<8 hex digits>`.
fn stale_owner(name: &str) -> Option<u32> {
    let (pid, hex) = name.strip_prefix("cclab-cert-")?.split_once('-')?;
    let hex_ok = hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_ok && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| pid.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_old_cert_dir_names_have_an_owner() {
        assert_eq!(stale_owner("cclab-cert-1234-0a1b2c3d"), Some(1234));
        for other in [
            "cclab-cert-1234",
            "cclab-cert-x-0a1b2c3d",
            "cclab-cert-1234-0a1b2c3",
            "cclab-cert-1234-0a1b2c3g",
            "cclab-pair-1234",
            "cclab-cert--0a1b2c3d",
        ] {
            assert_eq!(stale_owner(other), None, "{other}");
        }
    }

    #[test]
    fn stale_dirs_of_dead_processes_go_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let mk = |name: &str, files: &[&str]| {
            let d = tmp.path().join(name);
            std::fs::create_dir(&d).unwrap();
            for f in files {
                std::fs::write(d.join(f), "x").unwrap();
            }
            d
        };
        // No pid is above the kernel's pid_max (at most 2^22).
        let dead = mk("cclab-cert-99999999-0a1b2c3d", &["cert.pem", "key.pem"]);
        let me = std::process::id();
        let alive = mk(
            &format!("cclab-cert-{me}-0a1b2c3d"),
            &["cert.pem", "key.pem"],
        );
        let foreign = mk("cclab-cert-99999998-0a1b2c3d", &["cert.pem", "notes.txt"]);
        let other = mk("cclab-pair-99999999", &["cert.pem"]);
        assert_eq!(remove_stale_cert_dirs(tmp.path()), 1);
        assert!(!dead.exists());
        assert!(alive.exists() && foreign.exists() && other.exists());
    }

    #[test]
    fn the_in_memory_identity_makes_a_tls_context_and_bad_pem_is_named() {
        let id = self_signed().unwrap();
        id.tls_context("(generated)", "(generated)").unwrap();
        let bad = Identity {
            cert_pem: b"not a certificate".to_vec(),
            key_pem: id.key_pem.clone(),
        };
        let e = bad.tls_context("c.pem", "k.pem").err().unwrap().to_string();
        assert!(e.contains("cannot load certificate c.pem"), "{e}");
        // A key that is not the certificate's.
        let other = self_signed().unwrap();
        let mismatched = Identity {
            cert_pem: id.cert_pem.clone(),
            key_pem: other.key_pem,
        };
        let e = mismatched
            .tls_context("c.pem", "k.pem")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("does not match"), "{e}");
    }
}
