//! A thread's transport: plain TCP, or TLS through a thread's rustls
//! client (`tls.rs`, sans-IO: every byte of a connection goes through its
//! `tls::Session`, on either I/O backend). The loop asks the transport only
//! whether there is a session to go through (`Conn::tls`) and tells it how
//! each handshake ended; counting handshakes and deciding when failed ones
//! end the run are here.
//!
//! QUIC (`--h3`, `quic.rs`) is the third: its per-connection state is in
//! `Proto::H3` (the one protocol over it), not in `Conn`; its datagrams
//! move in `quic.rs` (the worker's `worker/h3.rs` calls it where a socket
//! is readable), and its earliest timer is in the loop's wait
//! (`Worker::wait_ns`).

use std::io;

use super::quic::Quic;
use super::tls::{self, Handshake, Session, TlsPlan};
use super::{ProtoPlan, TransportPlan};
use crate::stats::Stats;

/// This many failed handshakes in a row, none ever completed: the server
/// does not speak TLS as asked and the run ends.
pub(crate) const HANDSHAKE_FAIL_LIMIT: u32 = 10;

/// How a thread's connections carry their bytes.
pub(crate) enum Transport {
    Tcp,
    Tls(Tls),
    /// QUIC (`--h3`): datagrams, TLS inside, timers of its own.
    Quic(Box<Quic>),
}

/// TLS for one thread: its client (configuration, session cache) and its
/// handshakes' record.
pub(crate) struct Tls {
    pub client: tls::Client,
    server_name: String,
    /// `--h2`: a handshake must pick h2 by ALPN.
    h2: bool,
    /// Handshakes that failed in a row with none completed yet.
    fails: u32,
    completed: u64,
}

/// What a handshake's end means for the run.
pub(crate) enum Verdict {
    Go,
    /// The connection fails as a handshake failure.
    Fail,
    /// The run ends for this reason (the connection fails too).
    End(String),
}

impl Transport {
    /// The transport of `plan` for connections speaking `proto`: HTTP/3
    /// over QUIC (with the plan's TLS settings inside it; `now_ns`, the
    /// engine's clock, keeps QUIC's timers); else over TLS, HTTP/2 offers
    /// `h2` alone by ALPN, every other protocol `http/1.1` (whatever the
    /// plan's `TlsPlan::h2` says: the protocol decides).
    pub(crate) fn new(
        plan: &TransportPlan,
        proto: &ProtoPlan,
        now_ns: u64,
    ) -> io::Result<Transport> {
        Ok(match plan {
            TransportPlan::Tls(p) if matches!(proto, ProtoPlan::H3 { .. }) => {
                let offer = TlsPlan {
                    h2: false,
                    ..p.clone()
                };
                Transport::Quic(Box::new(Quic::new(&offer, now_ns)?))
            }
            TransportPlan::Tcp => Transport::Tcp,
            TransportPlan::Tls(p) => {
                let h2 = matches!(proto, ProtoPlan::H2 { .. });
                let offer = TlsPlan { h2, ..p.clone() };
                Transport::Tls(Tls {
                    client: tls::Client::new(&offer)?,
                    server_name: p.server_name.clone(),
                    h2,
                    fails: 0,
                    completed: 0,
                })
            }
        })
    }

    /// TLS: the thread's client, for a new connection's session.
    #[inline]
    pub(crate) fn client(&self) -> Option<&tls::Client> {
        match self {
            Transport::Tcp | Transport::Quic(_) => None,
            Transport::Tls(t) => Some(&t.client),
        }
    }

    #[inline]
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }
}

impl Tls {
    /// A handshake ended (`kind`) after `took_ns`; `measured`: its
    /// connection's first request counts.
    pub(crate) fn completed(
        &mut self,
        session: &Session,
        kind: Handshake,
        took_ns: u64,
        measured: bool,
        stats: &mut Stats,
        no_h2: impl Fn() -> String,
    ) -> Verdict {
        if self.h2 && !session.picked_h2() {
            // `--h2`: a server that does not speak it ends the run.
            return Verdict::End(no_h2());
        }
        self.completed += 1;
        self.fails = 0;
        if measured {
            match kind {
                Handshake::Full => stats.handshakes_full += 1,
                Handshake::Resumed => stats.handshakes_resumed += 1,
            }
            stats.handshake_us.saturating_record((took_ns + 500) / 1000);
        }
        if stats.tls.is_none() {
            stats.tls = Some(session.negotiated());
        }
        Verdict::Go
    }

    /// A handshake failed for `e` (its request fails as `Handshake`):
    /// counted like any failure; when every handshake so far failed,
    /// [`HANDSHAKE_FAIL_LIMIT`] of them in a row end the run
    /// (`Verdict::End`, and `refused` says the server refused TLS).
    #[cold]
    pub(crate) fn failed(
        &mut self,
        e: &rustls::Error,
        stats: &mut Stats,
        no_h2: impl Fn() -> String,
    ) -> (Verdict, bool) {
        let refused_h2 = self.h2
            && matches!(
                e,
                rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)
            );
        if refused_h2 {
            // `--h2` offered only h2 and the server refused it.
            stats.tls_error = Some(no_h2());
            return (Verdict::End(no_h2()), false);
        }
        if stats.tls_error.is_none() {
            stats.tls_error = Some(tls::explain(&self.server_name, e));
        }
        self.fails += 1;
        if self.completed == 0 && self.fails >= HANDSHAKE_FAIL_LIMIT {
            let why = format!(
                "{} ({} connections in a row, none established)",
                tls::explain(&self.server_name, e),
                self.fails
            );
            return (Verdict::End(why), true);
        }
        (Verdict::Fail, false)
    }
}
