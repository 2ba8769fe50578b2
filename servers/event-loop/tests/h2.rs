//! HTTP/2 on the event loop's one port (src/h2.rs): h2c by prior knowledge
//! and h2 by ALPN over TLS answer the contract's HTTP/2 rows
//! (workloads::h2rows), and HTTP/1.1 still answers on the same port.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use testkit::process::ServerProcess;
use workloads::h2rows::{self, Cleartext, Connect};

const BIN: &str = env!("CARGO_BIN_EXE_event-loop");
const TIMEOUT: Duration = Duration::from_secs(30);

/// The rows that need no database (none runs in these tests).
fn rows() -> Vec<h2rows::Row> {
    h2rows::rows().into_iter().filter(|r| !r.needs_db).collect()
}

fn assert_all_pass(verdicts: &[h2rows::Verdict]) {
    let failed: Vec<_> = verdicts.iter().filter(|v| v.result.is_err()).collect();
    assert!(failed.is_empty(), "HTTP/2 rows failed: {failed:#?}");
    assert!(verdicts.len() > 10, "only {} rows ran", verdicts.len());
}

fn config(server: &ServerProcess) -> workloads::ServerConfig {
    let r = workloads::probe::get(server.addr, "/config").expect("GET /config over HTTP/1.1");
    workloads::ServerConfig::from_json(&r.body).expect("/config parses")
}

#[test]
fn h2c_by_prior_knowledge_answers_the_contract_beside_http1() {
    let server = ServerProcess::start(BIN, &[]);
    assert_all_pass(&h2rows::check(&Cleartext(server.addr), &rows(), TIMEOUT));
    // The same port still speaks HTTP/1.1, and says what it serves.
    let hello = workloads::probe::get(server.addr, "/hello").unwrap();
    hello
        .verify(&workloads::expect("GET", "/hello"))
        .expect("HTTP/1.1 on the h2c port");
    let cfg = config(&server);
    assert_eq!(cfg.protocols, ["http/1.1", "h2c"]);
    assert_eq!(cfg.http2_unsupported, None);
}

#[test]
fn a_near_miss_of_the_preface_is_an_http1_request() {
    let server = ServerProcess::start(BIN, &[]);
    let r = workloads::probe::request(server.addr, "PRI", "/hello").unwrap();
    assert_eq!(
        r.status, 405,
        "PRI /hello HTTP/1.1 is a method the contract refuses"
    );
}

/// TLS with ALPN `h2`, trusting the lab's CA.
struct Tls {
    addr: std::net::SocketAddr,
    connector: tokio_rustls::TlsConnector,
}

impl Connect for Tls {
    type Io = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;
    fn connect(&self) -> impl std::future::Future<Output = std::io::Result<Self::Io>> + Send {
        let (addr, connector) = (self.addr, self.connector.clone());
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let tls = connector.connect(name, tcp).await?;
            let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
            if alpn.as_deref() != Some(b"h2") {
                return Err(std::io::Error::other(format!(
                    "ALPN chose {alpn:?}, not h2"
                )));
            }
            Ok(tls)
        }
    }
}

#[test]
fn h2_by_alpn_over_tls_answers_the_contract() {
    let cert = labcert::LabCert::new().unwrap();
    let (c, k) = (cert.cert_path(), cert.key_path());
    let server = ServerProcess::start(
        BIN,
        &[
            "--tls-cert",
            c.to_str().unwrap(),
            "--tls-key",
            k.to_str().unwrap(),
        ],
    );
    let mut roots = rustls::RootCertStore::empty();
    for ca in rustls::pki_types::CertificateDer::pem_file_iter(cert.ca_path()).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tls = Tls {
        addr: server.addr,
        connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
    };
    assert_all_pass(&h2rows::check(&tls, &rows(), TIMEOUT));
}
