//! `harness verify --h2c` / `--h2`: the contract over HTTP/2
//! ([`workloads::h2rows`]: its single requests, `/echo` bodies up to and
//! over 1 MiB, many streams in flight on one connection), each row on a
//! connection of its own, the `h2` crate as the client: h2c by prior
//! knowledge for `http://`, h2 by ALPN over TLS for `https://` (a server
//! whose ALPN does not pick h2 fails every row, saying what it picked).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use workloads::h2rows::{self, Cleartext, Connect};

use crate::engine::TlsPlan;

/// h2 by ALPN over TLS.
struct Tls {
    addr: SocketAddr,
    name: rustls_pki_types::ServerName<'static>,
    connector: tokio_rustls::TlsConnector,
}

impl Connect for Tls {
    type Io = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;
    fn connect(&self) -> impl std::future::Future<Output = std::io::Result<Self::Io>> + Send {
        let (addr, name, connector) = (self.addr, self.name.clone(), self.connector.clone());
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            let tls = connector.connect(name, tcp).await?;
            match tls.get_ref().1.alpn_protocol() {
                Some(b"h2") => Ok(tls),
                other => Err(std::io::Error::other(format!(
                    "ALPN chose {}, not h2",
                    other.map_or("nothing".into(), |p| String::from_utf8_lossy(p)
                        .into_owned())
                ))),
            }
        }
    }
}

/// Runs the HTTP/2 rows against `addr` (over TLS when `tls` is given),
/// prints a verdict per row; fails if any row does.
pub fn run(addr: SocketAddr, tls: Option<&TlsPlan>, timeout: Duration) -> anyhow::Result<ExitCode> {
    let verdicts = check(addr, tls, &h2rows::rows(), timeout)?;
    print!("{}", text(&verdicts));
    Ok(if verdicts.iter().all(|v| v.result.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `rows` against `addr`: h2c by prior knowledge, or h2 by ALPN over TLS
/// when `tls` is given. `Err` only when no TLS client can be made.
pub fn check(
    addr: SocketAddr,
    tls: Option<&TlsPlan>,
    rows: &[h2rows::Row],
    timeout: Duration,
) -> anyhow::Result<Vec<h2rows::Verdict>> {
    Ok(match tls {
        None => h2rows::check(&Cleartext(addr), rows, timeout),
        Some(plan) => {
            let mut config = plan.client_config().map_err(anyhow::Error::msg)?;
            config.alpn_protocols = vec![b"h2".to_vec()];
            let connect = Tls {
                addr,
                name: plan.name().map_err(anyhow::Error::msg)?,
                connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            };
            h2rows::check(&connect, rows, timeout)
        }
    })
}

/// PASS or FAIL per row (with what differed), then the count.
pub fn text(verdicts: &[h2rows::Verdict]) -> String {
    let width = verdicts.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for v in verdicts {
        match &v.result {
            Ok(()) => out.push_str(&format!("PASS  {}\n", v.name)),
            Err(why) => out.push_str(&format!("FAIL  {:<width$}  {why}\n", v.name)),
        }
    }
    let failed = verdicts.iter().filter(|v| v.result.is_err()).count();
    out.push_str(&format!(
        "{} HTTP/2 rows: {} passed, {failed} failed\n",
        verdicts.len(),
        verdicts.len() - failed
    ));
    out
}
