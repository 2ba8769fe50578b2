//! `harness certs DIR`: the lab's TLS certificate for servers you start
//! yourself (`labcert`): a private CA made for this call and an ECDSA P-256
//! server certificate it signs for 127.0.0.1, ::1 and localhost.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Writes three PEM files into DIR (created if missing; existing files are
never overwritten):
  ca.pem     the CA: what clients trust (harness run --cacert DIR/ca.pem,
             curl --cacert, wrk/h2load through SSL_CERT_FILE)
  cert.pem   the server's certificate (--tls-cert, nginx ssl_certificate)
  key.pem    its private key, mode 0600 (--tls-key, ssl_certificate_key)
Nothing is read from or added to the system's trust store, and the CA's own
key is never written: no other certificate can ever be signed by it.

Example:
  harness certs /tmp/lab
  event-loop --addr 127.0.0.1:8443 --tls-cert /tmp/lab/cert.pem --tls-key /tmp/lab/key.pem
  harness run https://127.0.0.1:8443/hello --cacert /tmp/lab/ca.pem -c 50 -d 10s")]
pub struct CertsArgs {
    /// Where to write ca.pem, cert.pem and key.pem.
    pub dir: PathBuf,
}

pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    let lab = labcert::LabCert::new()?;
    lab.write_to(&args.dir)
        .with_context(|| format!("cannot write the certificate into {}", args.dir.display()))?;
    println!(
        "wrote {0}/ca.pem, {0}/cert.pem and {0}/key.pem (for {1})",
        args.dir.display(),
        labcert::NAMES.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}
