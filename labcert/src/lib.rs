//! The lab's TLS certificates, made per run: one private CA and an ECDSA
//! P-256 server certificate it signs, for `127.0.0.1`, `::1` and
//! `localhost`, written as PEM into a temporary directory that is removed
//! with the [`LabCert`]. Nothing is read from or written to the system's
//! trust store: a client trusts the CA by being given `ca.pem` (`harness
//! run --cacert`), a server is given `cert.pem` and `key.pem`.
//!
//! P-256 because every TLS stack of the lab (rustls, OpenSSL in nginx, PHP
//! and Node.js) signs and verifies it, and it is what a real deployment's
//! certificate (Let's Encrypt's ECDSA default) costs a handshake.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType, PKCS_ECDSA_P256_SHA256,
};

/// Why the certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot make the lab certificate: {0}")]
    Make(#[from] rcgen::Error),
    #[error("cannot write the lab certificate: {0}")]
    Write(#[from] std::io::Error),
}

/// A private CA and a server certificate, as PEM files in a directory of
/// their own (removed on drop).
pub struct LabCert {
    dir: tempfile::TempDir,
    /// The CA's certificate (PEM): what clients trust.
    pub ca_pem: String,
    /// The server's certificate (PEM), signed by the CA.
    pub cert_pem: String,
    /// The server's private key (PKCS#8 PEM).
    pub key_pem: String,
}

/// The names the server certificate is valid for.
pub const NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

impl LabCert {
    /// Makes a fresh CA and server certificate (rcgen's default validity:
    /// the CA's key lives only as long as this value, so there is nothing
    /// for an expiry to protect) and writes `ca.pem`, `cert.pem` and `key.pem`.
    pub fn new() -> Result<LabCert, Error> {
        let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name = name("benchlab private CA (made for one run)");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key)?;

        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut server = CertificateParams::new(Vec::<String>::new())?;
        server.distinguished_name = name("localhost");
        server.subject_alt_names = vec![
            SanType::IpAddress([127, 0, 0, 1].into()),
            SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
            SanType::DnsName("localhost".try_into()?),
        ];
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = server.signed_by(&key, &ca_cert, &ca_key)?;

        let dir = tempfile::Builder::new().prefix("labcert-").tempdir()?;
        let lab = LabCert {
            dir,
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        std::fs::write(lab.ca_path(), &lab.ca_pem)?;
        std::fs::write(lab.cert_path(), &lab.cert_pem)?;
        write_private(&lab.key_path(), &lab.key_pem)?;
        Ok(lab)
    }

    /// Writes `ca.pem`, `cert.pem` and `key.pem` (mode 0600) into `dir`
    /// too, which outlives this value (`harness certs DIR`); files already
    /// there are not overwritten.
    pub fn write_to(&self, dir: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dir)?;
        for (name, text) in [("ca.pem", &self.ca_pem), ("cert.pem", &self.cert_pem)] {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(name))
                .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))?;
        }
        write_private(&dir.join("key.pem"), &self.key_pem)?;
        Ok(())
    }

    /// The directory holding the three files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `ca.pem`: give it to clients (`--cacert`).
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// `cert.pem`: the server's certificate.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// `key.pem`: the server's private key (mode 0600).
    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join("key.pem")
    }
}

fn name(common: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common);
    dn.push(DnType::OrganizationName, "benchlab");
    dn
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_a_ca_and_a_server_certificate_on_disk() {
        let lab = LabCert::new().unwrap();
        for p in [lab.ca_path(), lab.cert_path(), lab.key_path()] {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(text.starts_with("-----BEGIN "), "{}", p.display());
        }
        assert_ne!(lab.ca_pem, lab.cert_pem);
        let dir = lab.dir().to_path_buf();
        drop(lab);
        assert!(!dir.exists(), "the directory outlived its LabCert");
    }
}
