//! `--tls-cert FILE --tls-key FILE`: the loop terminates TLS itself, as a
//! Node.js `https` server does, with tokio-rustls on the `ring` provider
//! (the engine's, so both ends of a lab run use one crypto library). TLS 1.3
//! and 1.2, ALPN `http/1.1`, the session cache and TLS 1.3 tickets rustls
//! keeps by default (clients resume). The contract is the same over TLS.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A client that does not finish its handshake within this long is dropped
/// (as a head not finished within the header timeout is).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What `/config` says about TLS when it is on.
pub const DESCRIPTION: &str = "rustls 0.23 (ring): TLS 1.3, 1.2; ALPN http/1.1; resumption";

/// The acceptor for the certificate chain at `cert` and the private key at
/// `key` (PEM files).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading --tls-cert {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("--tls-cert {}: not a PEM certificate chain", cert.display()))?;
    if chain.is_empty() {
        bail!("--tls-cert {}: no certificate in it", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("--tls-key {}: no PEM private key read", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("--tls-cert and --tls-key do not make a usable pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
