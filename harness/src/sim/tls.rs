//! TLS for simulated endpoints: a certificate whose size never changes.
//!
//! A determinism test compares runs byte for byte, so every packet must
//! have the same size in every run. TLS key material is random, and with
//! ECDSA the DER encoding of each signature (the certificate's own and
//! the handshake's CertificateVerify) varies by a byte or two from run to
//! run, which would shift every later packet by a few hundred nanoseconds
//! of serialization. RSA signatures are exactly as long as the modulus, so
//! the simulator's server uses a 2048-bit RSA key and a self-signed
//! certificate with fixed names, serial and validity. The key is a fixed
//! one, `sim-key.pem` next to this file, made once with `openssl genpkey`
//! for this purpose only: it protects nothing (both ends live in the
//! simulator and the client does not verify it), and a fixed key spares
//! every process the 50-200 ms (varying from run to run) that generating a
//! 2048-bit RSA key takes, a tenth of a short simulation's wall time.

use std::sync::OnceLock;

use boring::asn1::Asn1Time;
use boring::bn::BigNum;
use boring::hash::MessageDigest;
use boring::pkey::{PKey, Private};
use boring::ssl::{SslContextBuilder, SslMethod};
use boring::x509::{X509Builder, X509NameBuilder, X509};

/// The simulator's RSA-2048 key (see the module's doc).
const SIM_KEY_PEM: &str = include_str!("sim-key.pem");

struct Identity {
    key: PKey<Private>,
    cert: X509,
}

fn identity() -> Result<&'static Identity, boring::error::ErrorStack> {
    static ID: OnceLock<Identity> = OnceLock::new();
    if let Some(id) = ID.get() {
        return Ok(id);
    }
    let key = PKey::private_key_from_pem(SIM_KEY_PEM.as_bytes())?;
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_text("CN", "cclab-sim")?;
    let name = name.build();
    let mut b = X509Builder::new()?;
    b.set_version(2)?;
    let serial = BigNum::from_u32(1)?.to_asn1_integer()?;
    b.set_serial_number(&serial)?;
    b.set_subject_name(&name)?;
    b.set_issuer_name(&name)?;
    b.set_pubkey(&key)?;
    // Fixed times: UTCTime, 13 bytes each, whatever the date.
    let (from, to) = (
        Asn1Time::from_unix(1_700_000_000)?,
        Asn1Time::from_unix(2_040_000_000)?,
    );
    b.set_not_before(&from)?;
    b.set_not_after(&to)?;
    b.sign(&key, MessageDigest::sha256())?;
    let cert = b.build();
    Ok(ID.get_or_init(|| Identity { key, cert }))
}

/// A server configuration presenting the simulator's certificate.
pub fn server_config() -> Result<quiche::Config, String> {
    let id = identity().map_err(|e| format!("cannot make the simulator's certificate: {e}"))?;
    let mut ctx = SslContextBuilder::new(SslMethod::tls()).map_err(|e| e.to_string())?;
    ctx.set_private_key(&id.key).map_err(|e| e.to_string())?;
    ctx.set_certificate(&id.cert).map_err(|e| e.to_string())?;
    let mut c = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, ctx)
        .map_err(|e| e.to_string())?;
    quic_app::configure(&mut c, quiche::h3::APPLICATION_PROTOCOL).map_err(|e| e.to_string())?;
    Ok(c)
}

/// A client configuration (no certificate verification, no CA store).
pub fn client_config() -> Result<quiche::Config, String> {
    let ctx = SslContextBuilder::new(SslMethod::tls()).map_err(|e| e.to_string())?;
    let mut c = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, ctx)
        .map_err(|e| e.to_string())?;
    quic_app::configure(&mut c, quiche::h3::APPLICATION_PROTOCOL).map_err(|e| e.to_string())?;
    c.verify_peer(false);
    Ok(c)
}
