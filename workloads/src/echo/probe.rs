//! [`EchoProbe`]: how an `/echo` row is run and its answers judged.

use std::net::SocketAddr;
use std::time::Duration;

use super::{expect, pattern, request, BodyFraming};
use crate::contract::error::RowError;
use crate::probe::{Conn, RawResponse};
use crate::verify::Expected;

/// An `/echo` row's exchange: one body, framed one way, its answer judged
/// against the body sent; then, on the same connection, a `GET /hello`
/// (the body was framed right if that is answered).
#[derive(Clone, Debug)]
pub struct EchoProbe {
    pub len: usize,
    pub framing: BodyFraming,
    pub then_hello: bool,
}

impl EchoProbe {
    /// Sends the request and judges the answer; a 413 must close the
    /// connection. A server may answer 413 before reading the whole body
    /// and close: a write that fails then is not the row's failure, the
    /// answer decides.
    pub fn run(&self, addr: SocketAddr, timeout: Duration) -> Result<(), RowError> {
        let body = pattern(self.len);
        let expected = expect(&body);
        let mut c = Conn::connect_within(addr, timeout, timeout).map_err(RowError::Connect)?;
        let mut raw = request(&body, self.framing);
        if self.then_hello {
            raw.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: verify\r\n\r\n");
        }
        let sent = c.send(&raw);
        let r = match c.read_response(false) {
            Ok(r) => r,
            Err(e) => {
                return Err(match sent {
                    Err(se) => RowError::Send(se),
                    Ok(()) => RowError::Receive(e),
                })
            }
        };
        let r = judge(r, &expected)?;
        if r.status == 413 {
            return if c.is_closed(Duration::from_secs(5)) {
                Ok(())
            } else {
                Err(RowError::LeftOpen)
            };
        }
        sent.map_err(RowError::Send)?;
        if self.then_hello {
            let hello = c
                .read_response(false)
                .map_err(RowError::Receive)
                .and_then(|r| judge(r, &crate::expect("GET", "/hello")))
                .map_err(|e| RowError::Step {
                    step: "GET /hello after the body".into(),
                    source: Box::new(e),
                })?;
            drop(hello);
        }
        Ok(())
    }
}

fn judge(r: RawResponse, expected: &Expected) -> Result<RawResponse, RowError> {
    match r.verify(expected) {
        Ok(()) => Ok(r),
        Err(mismatch) => Err(RowError::Mismatch {
            mismatch,
            response: Box::new(r),
        }),
    }
}
