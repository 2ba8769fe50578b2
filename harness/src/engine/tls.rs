//! The TLS transport: rustls driven sans-IO by the one request loop.
//!
//! rustls never touches a socket here. Ciphertext the backends received
//! (epoll: `read` into the thread's buffer; io_uring: a provided buffer) is
//! handed to [`Session::receive`], which decrypts it and hands the
//! plaintext to the same response reader a plaintext connection feeds;
//! ciphertext to send is drained by [`Session::flush`] (epoll: `write` to
//! the socket) or [`Session::fill`] (io_uring: into the connection's own
//! out buffer, `conn::Outbox`, sent with a completion the loop sees,
//! because the bytes are the connection's, not the plan's). The request
//! loop (`worker`) is the same for both transports; only where its bytes
//! go differs (`engine::transport`).
//!
//! **Crypto provider: `ring`**, not aws-lc-rs (rustls' default). aws-lc-rs
//! builds AWS-LC's C (and wants cmake) on every clean build of the
//! workspace and of `fuzz/`, minutes on the lab's 2 cores; ring builds in
//! seconds. What a load generator's client side spends crypto on is one
//! X25519 (or P-256) exchange and one ECDSA P-256 or RSA signature check
//! per full handshake, and AES-128-GCM / ChaCha20-Poly1305 over a few
//! hundred bytes per request: ring's assembly for these is the same
//! BoringSSL-derived code aws-lc-rs uses, so the two are within a few
//! percent there (aws-lc-rs pulls ahead on RSA signing and bulk AES, which
//! are a server's costs, not ours). ring also offers no post-quantum key
//! exchange, so the engine negotiates the X25519 that Debian's OpenSSL
//! servers (nginx, PHP, Node.js) offer too: every server in a comparison
//! sees the same key exchange.
//!
//! **Allocations.** Plaintext HTTP/1.1 allocates nothing per request. Over
//! TLS, rustls allocates per record it seals or opens, so a kept-alive TLS
//! request costs two allocations (measured on both backends: the request's
//! record out, the response's plaintext in); `tests/allocations.rs` holds
//! it to [`ALLOCS_PER_REQUEST`]. A handshake costs about a hundred (the
//! session, certificate parsing and verification, key shares, the session
//! cache), paid once per connection with keep-alive and once per request
//! without.

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

pub use crate::stats::Negotiated;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// The bound `tests/allocations.rs` holds a kept-alive TLS request to (see
/// the module's doc).
pub const ALLOCS_PER_REQUEST: u64 = 3;

/// The protocol version a run speaks (exactly that one: a measurement says
/// what it measured).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsVersion {
    /// TLS 1.2.
    #[value(name = "1.2")]
    Tls12,
    /// TLS 1.3.
    #[default]
    #[value(name = "1.3")]
    Tls13,
}

/// Which server certificates a run accepts.
#[derive(Clone, Debug)]
pub enum Trust {
    /// Mozilla's public CAs (webpki-roots), as a browser would.
    Public,
    /// Only certificates issued by these CAs (`--cacert`).
    Cas(Vec<CertificateDer<'static>>),
    /// Any certificate (`--insecure`); its handshake signature is still
    /// checked, so the crypto done is what a verifying client does, less
    /// the chain.
    Any,
}

/// How a run speaks TLS (`harness run https://…`).
#[derive(Clone, Debug)]
pub struct TlsPlan {
    /// The name sent as SNI and checked against the certificate: the URL's
    /// host (an IP address is checked against the certificate's IP names).
    pub server_name: String,
    pub version: TlsVersion,
    /// Resume sessions (tickets, session IDs) as browsers do; off: every
    /// handshake is a full one.
    pub resume: bool,
    pub trust: Trust,
    /// Offer only `h2` by ALPN rather than `http/1.1` (a handshake made
    /// with this plan alone, as the lab's checks make; an engine run
    /// offers what its protocol speaks, see `ProtoPlan::H2`).
    pub h2: bool,
}

impl TlsPlan {
    /// A plan for `server_name` with the defaults: TLS 1.3, resumption on,
    /// the public CAs.
    pub fn new(server_name: &str) -> TlsPlan {
        TlsPlan {
            server_name: server_name.to_string(),
            version: TlsVersion::Tls13,
            resume: true,
            trust: Trust::Public,
            h2: false,
        }
    }

    /// The CAs in the PEM file at `path` (`--cacert`).
    pub fn cas_from_file(path: &Path) -> Result<Trust, String> {
        let pem =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let cas = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: not a PEM certificate file: {e}", path.display()))?;
        if cas.is_empty() {
            return Err(format!(
                "{}: no certificate in it (a PEM file with -----BEGIN CERTIFICATE----- blocks)",
                path.display()
            ));
        }
        Ok(Trust::Cas(cas))
    }

    /// The client configuration an engine thread uses (each its own, so
    /// each its own session cache: no lock shared between threads).
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let version: &'static rustls::SupportedProtocolVersion = match self.version {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        };
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[version])
            .map_err(|e| e.to_string())?;
        let mut config = match &self.trust {
            Trust::Any => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth(),
            trust => {
                let mut roots = RootCertStore::empty();
                match trust {
                    Trust::Cas(cas) => {
                        for ca in cas {
                            roots
                                .add(ca.clone())
                                .map_err(|e| format!("a --cacert certificate is unusable: {e}"))?;
                        }
                    }
                    _ => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
                }
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| format!("no certificate verifier: {e}"))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Remembered::new(webpki)))
                    .with_no_client_auth()
            }
        };
        config.alpn_protocols = vec![if self.h2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        config.resumption = if self.resume {
            Resumption::in_memory_sessions(256)
        } else {
            Resumption::disabled()
        };
        Ok(config)
    }

    /// The server name as rustls takes it.
    pub fn name(&self) -> Result<ServerName<'static>, String> {
        let host = self
            .server_name
            .trim_start_matches('[')
            .trim_end_matches(']');
        ServerName::try_from(host.to_string())
            .map_err(|e| format!("{host:?} is not a name TLS can check a certificate for: {e}"))
    }
}

/// One engine thread's TLS client: its configuration and the name it asks for.
pub(crate) struct Client {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl Client {
    pub(crate) fn new(plan: &TlsPlan) -> io::Result<Client> {
        let config = plan.client_config().map_err(io::Error::other)?;
        let name = plan.name().map_err(io::Error::other)?;
        Ok(Client {
            config: Arc::new(config),
            name,
        })
    }
}

/// How a handshake ended, when it just did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handshake {
    Full,
    Resumed,
}

/// What a chunk of ciphertext did.
#[derive(Default)]
pub(crate) struct Recv {
    /// The handshake ended in this chunk.
    pub handshake: Option<Handshake>,
    /// The peer sent `close_notify`: no more plaintext will come.
    pub closed: bool,
    /// The connection is broken (a bad record, an alert, a refused
    /// certificate); `during_handshake`: before it was established.
    pub error: Option<rustls::Error>,
}

/// One connection's TLS state.
pub(crate) struct Session {
    conn: ClientConnection,
    /// The current request's plaintext has been handed to rustls.
    pub queued: bool,
    /// When the handshake began (the connect completed), on the run's
    /// clock: kept here, not in every connection.
    pub began_ns: u64,
}

impl Session {
    pub(crate) fn new(client: &Client) -> io::Result<Session> {
        let mut conn = ClientConnection::new(Arc::clone(&client.config), client.name.clone())
            .map_err(io::Error::other)?;
        // rustls takes at most 64 KiB of unsent records by default and
        // silently short-writes beyond it, which `write_all` into its
        // writer turned into lost bytes: 8 pipelined 16 KB WebSocket
        // messages over TLS failed two thirds of their echoes. What waits
        // here is bounded by the run (requests in flight × their size),
        // as it is in a plaintext connection's own send buffer.
        conn.set_buffer_limit(None);
        Ok(Session {
            conn,
            queued: false,
            began_ns: 0,
        })
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Hands the request's plaintext to rustls once; it is sealed as soon
    /// as the handshake allows (with the client's `Finished`, on a new
    /// connection).
    pub(crate) fn queue(&mut self, request: &[u8]) {
        if !self.queued {
            self.queued = true;
            // Into rustls' own buffer: it cannot block, and fails only on a
            // connection already closed, which the next read reports.
            let _ = self.conn.writer().write_all(request);
        }
    }

    /// A buffered framing: hands one more request's plaintext to rustls.
    pub(crate) fn queue_more(&mut self, bytes: &[u8]) {
        self.queued = true;
        let _ = self.conn.writer().write_all(bytes);
    }

    /// epoll: writes pending ciphertext to `socket`. `Ok((written, true))`
    /// once nothing is left; `false`: the socket would block.
    pub(crate) fn flush(&mut self, mut socket: impl Write) -> io::Result<(usize, bool)> {
        let mut written = 0;
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut socket) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((written, false)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok((written, true))
    }

    /// io_uring: appends pending ciphertext to `out`.
    pub(crate) fn fill(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            // Into a Vec: cannot fail.
            if self.conn.write_tls(out).is_err() {
                return;
            }
        }
    }

    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Decrypts `data` (ciphertext as it arrived) and hands each piece of
    /// plaintext to `plain`, in order.
    pub(crate) fn receive(&mut self, mut data: &[u8], mut plain: impl FnMut(&[u8])) -> Recv {
        let mut r = Recv::default();
        let handshaking = self.conn.is_handshaking();
        while !data.is_empty() {
            // From a slice: only a full internal buffer stops it short, and
            // processing below empties that buffer.
            match self.conn.read_tls(&mut data) {
                Ok(0) => {
                    // Never from a non-empty slice; a guard against a spin.
                    r.error = Some(rustls::Error::General("no progress reading TLS".into()));
                    return r;
                }
                Ok(_) => {}
                Err(e) => {
                    r.error = Some(rustls::Error::General(e.to_string()));
                    return r;
                }
            }
            if let Err(e) = self.conn.process_new_packets() {
                r.error = Some(e);
                return r;
            }
            loop {
                let mut reader = self.conn.reader();
                match reader.fill_buf() {
                    Ok([]) => {
                        r.closed = true;
                        break;
                    }
                    Ok(bytes) => {
                        let n = bytes.len();
                        plain(bytes);
                        reader.consume(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        r.closed = true;
                        break;
                    }
                }
            }
        }
        if handshaking && !self.conn.is_handshaking() {
            r.handshake = Some(match self.conn.handshake_kind() {
                Some(rustls::HandshakeKind::Resumed) => Handshake::Resumed,
                _ => Handshake::Full,
            });
        }
        r
    }

    /// What the finished handshake negotiated.
    /// Whether the server picked `h2` by ALPN.
    pub(crate) fn picked_h2(&self) -> bool {
        self.conn.alpn_protocol() == Some(b"h2")
    }

    pub(crate) fn negotiated(&self) -> Negotiated {
        let name = |s: Option<&'static str>, d: &dyn std::fmt::Debug| {
            s.map_or_else(|| format!("{d:?}"), str::to_string)
        };
        let version = self
            .conn
            .protocol_version()
            .map(|v| name(v.as_str(), &v))
            .unwrap_or_default();
        let cipher_suite = self
            .conn
            .negotiated_cipher_suite()
            .map(|s| name(s.suite().as_str(), &s.suite()))
            .unwrap_or_default();
        let key_exchange = self
            .conn
            .negotiated_key_exchange_group()
            .map(|g| name(g.name().as_str(), &g.name()))
            .unwrap_or_default();
        let alpn = self
            .conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        Negotiated {
            version,
            cipher_suite,
            key_exchange,
            alpn,
        }
    }
}

/// A thread's certificate verifier (webpki's, against the trusted CAs)
/// that remembers the last chain it accepted, for [`Remembered::FOR_SECS`]:
/// the same chain for the same name within that is accepted without
/// parsing and verifying it again, as a browser's verifier caches its
/// results (Chromium's `CachingCertVerifier`). Every handshake still
/// checks the server's signature over the handshake with that
/// certificate's key, so each full handshake proves the server holds it.
/// Without this, a full handshake per request spent most of its
/// client-side CPU re-verifying the one chain the server always sends.
#[derive(Debug)]
struct Remembered {
    /// The verifier that decides (webpki's).
    webpki: Arc<dyn ServerCertVerifier>,
    last: Mutex<Option<Accepted>>,
}

/// A chain `Remembered` accepted, and when.
#[derive(Debug)]
struct Accepted {
    end_entity: CertificateDer<'static>,
    intermediates: Vec<CertificateDer<'static>>,
    name: ServerName<'static>,
    at_secs: u64,
}

impl Remembered {
    /// How long an accepted chain is taken on trust: a certificate that
    /// expires during a run is refused within this.
    const FOR_SECS: u64 = 1;

    fn new(webpki: Arc<dyn ServerCertVerifier>) -> Remembered {
        Remembered {
            webpki,
            last: Mutex::new(None),
        }
    }
}

impl ServerCertVerifier for Remembered {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = last.as_ref() {
            if now.as_secs().saturating_sub(a.at_secs) < Self::FOR_SECS
                && a.end_entity == *end_entity
                && a.intermediates.as_slice() == intermediates
                && a.name == *server_name
            {
                return Ok(ServerCertVerified::assertion());
            }
        }
        let verified =
            self.webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)?;
        *last = Some(Accepted {
            end_entity: end_entity.clone().into_owned(),
            intermediates: intermediates
                .iter()
                .map(|c| c.clone().into_owned())
                .collect(),
            name: server_name.to_owned(),
            at_secs: now.as_secs(),
        });
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.webpki.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.webpki.root_hint_subjects()
    }
}

/// `--insecure`: accepts any certificate chain and name, but checks the
/// handshake's signature with it (the client's crypto stays that of a
/// verifying client, less the chain).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Why a handshake failed, in words a user acts on.
pub(crate) fn explain(server_name: &str, e: &rustls::Error) -> String {
    let hint = match e {
        rustls::Error::InvalidCertificate(_) => {
            " (the server's certificate was refused: give the CA that issued it with \
             --cacert FILE, or skip the check with --insecure)"
        }
        rustls::Error::PeerIncompatible(_) | rustls::Error::AlertReceived(_) => {
            " (try the other --tls-version)"
        }
        rustls::Error::InvalidMessage(_) => {
            " (the server does not answer in TLS: is this port plain HTTP? try http://)"
        }
        _ => "",
    };
    format!("the TLS handshake with {server_name} failed: {e}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// webpki's verifier, counting the chains it is asked about.
    #[derive(Debug)]
    struct Counting(Arc<WebPkiServerVerifier>, AtomicUsize);

    impl ServerCertVerifier for Counting {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    /// A remembered chain stands in only for itself, for the same name,
    /// within its second: another CA's certificate or another name is
    /// verified (and refused) right after an accepted chain, a refusal is
    /// never remembered, and a second later the chain is verified again.
    #[test]
    fn a_remembered_chain_stands_in_only_for_itself_and_for_a_second() {
        let ours = labcert::LabCert::new().unwrap();
        let theirs = labcert::LabCert::new().unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(der(&ours.ca_pem)).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let counting = Arc::new(Counting(webpki, AtomicUsize::new(0)));
        let v = Remembered::new(counting.clone());
        let asked = || counting.1.load(Ordering::Relaxed);
        let ip = ServerName::try_from("127.0.0.1").unwrap();
        let t = UnixTime::now();
        let verify = |cert: &str, name: &ServerName<'_>, at: UnixTime| {
            v.verify_server_cert(&der(cert), &[], name, &[], at)
        };

        assert!(verify(&ours.cert_pem, &ip, t).is_ok());
        assert!(verify(&ours.cert_pem, &ip, t).is_ok());
        assert_eq!(asked(), 1, "the same chain within its second is remembered");

        assert!(verify(&theirs.cert_pem, &ip, t).is_err());
        assert!(verify(&theirs.cert_pem, &ip, t).is_err());
        assert_eq!(asked(), 3, "another CA's chain is verified, every time");

        let other = ServerName::try_from("example.com").unwrap();
        assert!(verify(&ours.cert_pem, &other, t).is_err());
        assert_eq!(asked(), 4, "another name is verified");

        assert!(verify(&ours.cert_pem, &ip, t).is_ok());
        assert_eq!(
            asked(),
            4,
            "a refusal is not remembered, nor replaces the chain"
        );
        let later = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            t.as_secs() + Remembered::FOR_SECS,
        ));
        assert!(verify(&ours.cert_pem, &ip, later).is_ok());
        assert_eq!(asked(), 5, "a second later it is verified again");
    }
}
