use std::io;
use std::time::Duration;

/// Everything that can go wrong talking to the server.
///
/// After [`Error::Server`] the connection is still usable (the server
/// answered the command with an error packet); after any other error
/// returned by a command the connection is broken and a [`crate::Pool`]
/// discards it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket error (connection refused, reset, closed by the server...).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// The server answered with an error packet.
    #[error("server error {code} ({state}): {message}")]
    Server {
        code: u16,
        state: String,
        message: String,
    },
    /// The server sent something this client does not understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Authentication could not be carried out by this client.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// A connect, read or write did not complete in time.
    #[error("timed out after {after:?} while {during}")]
    Timeout {
        during: &'static str,
        after: Duration,
    },
    /// No pooled connection became free in time.
    #[error("no database connection free after waiting {waited:?}")]
    PoolTimeout { waited: Duration },
    /// The connection URL is malformed.
    #[error("bad MySQL URL: {0}")]
    Url(String),
}

impl Error {
    /// Maps an I/O error, turning may's timer expiry into [`Error::Timeout`].
    pub(crate) fn io(during: &'static str, timeout: Duration, source: io::Error) -> Error {
        match source.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Error::Timeout {
                during,
                after: timeout,
            },
            _ => Error::Io {
                context: during.to_owned(),
                source,
            },
        }
    }

    /// The server's error code, if this is a server error (1045 = access denied).
    pub fn server_code(&self) -> Option<u16> {
        match self {
            Error::Server { code, .. } => Some(*code),
            _ => None,
        }
    }
}
