//! `--tls-cert FILE --tls-key FILE`: the servers that terminate TLS
//! themselves share these flags and this configuration: rustls 0.23 on the
//! `ring` provider (the harness's, so both ends of a lab run use one crypto
//! library), TLS 1.3 and 1.2, ALPN `http/1.1`, rustls' default session
//! cache and TLS 1.3 tickets (clients resume). The contract is the same
//! over TLS; `/config` says TLS is on ([`DESCRIPTION`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// What `/config`'s `tls` field says when TLS is on.
pub const DESCRIPTION: &str = "rustls 0.23 (ring): TLS 1.3, 1.2; ALPN http/1.1; resumption";

/// The flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// Serve HTTPS on --addr with this certificate chain (PEM, the server's
    /// certificate first) instead of plain HTTP; needs --tls-key. The lab
    /// makes one per run; for a server started by hand, `harness certs DIR`
    /// writes cert.pem, key.pem and the ca.pem clients trust
    /// (`harness run --cacert DIR/ca.pem https://...`).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The server configuration, if the flags ask for TLS.
    pub fn config(&self) -> Result<Option<Arc<ServerConfig>>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => config(cert, key).map(Some),
            _ => Ok(None),
        }
    }
}

/// The configuration for the certificate chain at `cert` and the private
/// key at `key` (PEM files).
pub fn config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>> {
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
    Ok(Arc::new(config))
}
