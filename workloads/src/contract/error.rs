//! How a row failed.

use std::io;
use std::time::Duration;

use crate::probe::RawResponse;
use crate::Mismatch;

/// How a row failed. `Display` is the one-line reason `harness verify` prints.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    #[error("connect: {0}")]
    Connect(#[source] io::Error),
    #[error("send: {0}")]
    Send(#[source] io::Error),
    /// No complete answer: timed out, closed early, or not HTTP.
    #[error("{0}")]
    Receive(#[source] io::Error),
    /// An answer that is not the contract's; `response` is what came.
    #[error("{mismatch}")]
    Mismatch {
        #[source]
        mismatch: Mismatch,
        response: Box<RawResponse>,
    },
    #[error("405 without an Allow header")]
    NoAllow,
    #[error("Allow: {got:?} does not list {method}")]
    AllowWithout { got: String, method: &'static str },
    #[error("the connection was left open")]
    LeftOpen,
    #[error("answered in {took:?}, before {at_least:?}")]
    TooSoon { took: Duration, at_least: Duration },
    #[error("answer {answer} carries Connection: {got:?}, ab -k needs keep-alive")]
    NotKeptAlive { answer: usize, got: String },
    #[error("HEAD answers {what} {head:?}, GET {get:?}")]
    HeadDiffers {
        what: &'static str,
        head: String,
        get: String,
    },
    #[error("no Date header")]
    NoDate,
    #[error("bad Date {0:?}")]
    BadDate(String),
    #[error("Date {date} is {skew:?} off")]
    StaleDate { date: String, skew: Duration },
    /// A conformance probe's answers do not meet its requirement.
    #[error("{found}; expected {expected}")]
    Nonconforming {
        found: String,
        expected: &'static str,
    },
    /// A failure at one step of a multi-request exchange.
    #[error("{step}: {source}")]
    Step {
        step: String,
        #[source]
        source: Box<RowError>,
    },
}

impl RowError {
    /// The response that did not match, if that is how the row failed.
    pub fn response(&self) -> Option<&RawResponse> {
        match self {
            RowError::Mismatch { response, .. } => Some(response),
            RowError::Step { source, .. } => source.response(),
            _ => None,
        }
    }

    pub(crate) fn at(self, step: String) -> RowError {
        RowError::Step {
            step,
            source: Box::new(self),
        }
    }
}
