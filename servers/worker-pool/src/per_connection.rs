//! `--per-connection`: the Apache prefork shape. No front: each worker
//! thread accepts a connection and owns it, with blocking reads and writes,
//! until the client closes it or goes idle for [`READ_TIMEOUT`]. Keep-alive
//! connections beyond the number of workers wait in the kernel's accept
//! queue, unanswered, until a worker is free.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use server_common::http1;
use server_common::shutdown::{InFlight, Shutdown};

use crate::inbox::{encode_reply, Inbox, Parsed};
use crate::worker::Worker;
use crate::{READ_TIMEOUT, WRITE_TIMEOUT};

/// After an error answer: shut our side, then drain what the client still
/// sends (as the front does, [`crate::front::LINGER`]), so that the close
/// does not reset the answer away. It holds this worker, as Apache's
/// lingering close holds its child.
fn linger(mut stream: TcpStream) {
    use crate::front::{LINGER, LINGER_MAX_BYTES};
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(LINGER));
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < LINGER_MAX_BYTES && Instant::now() < deadline {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

/// Starts `workers` threads accepting on `listener`, each with its own
/// [`Worker`] made by `make`.
pub fn start(
    listener: TcpListener,
    workers: usize,
    mut make: impl FnMut() -> Worker,
    name: &'static str,
    shutdown: &Shutdown,
) -> io::Result<Arc<TcpListener>> {
    let listener = Arc::new(listener);
    for i in 0..workers {
        let listener = Arc::clone(&listener);
        let shutdown = shutdown.clone();
        let worker = make();
        std::thread::Builder::new()
            .name(format!("worker-{i}"))
            .spawn(move || accept_loop(&listener, worker, name, &shutdown))?;
    }
    Ok(listener)
}

/// Stops accepting: workers blocked in `accept` wake up with an error, and
/// new connections are refused.
pub fn stop_accepting(listener: &TcpListener) {
    let _ = socket2::SockRef::from(listener).shutdown(std::net::Shutdown::Both);
}

fn accept_loop(
    listener: &TcpListener,
    mut worker: Worker,
    name: &'static str,
    shutdown: &Shutdown,
) {
    while !shutdown.is_stopping() {
        match listener.accept() {
            Ok((stream, _)) => serve(stream, &mut worker, name, shutdown),
            // Out of descriptors or an aborted handshake: back off quietly.
            Err(_) if !shutdown.is_stopping() => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => {}
        }
    }
}

/// One client connection, served on this worker thread until it ends.
fn serve(mut stream: TcpStream, worker: &mut Worker, name: &'static str, shutdown: &Shutdown) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let mut read_timeout = ReadTimeout::default();
    let mut inbox = Inbox::new();
    let mut out = Vec::with_capacity(256);
    let mut _unsent: Option<InFlight> = None;
    let mut deadline = Instant::now() + READ_TIMEOUT;
    loop {
        loop {
            let Parsed {
                routed,
                head,
                connection,
                allow,
                body,
                upgrade,
            } = match inbox.next_request() {
                Ok(Some(parsed)) => parsed,
                Ok(None) => break,
                Err(e) => {
                    http1::encode_error(&mut out, name, e, inbox.pending_is_head());
                    if stream.write_all(&out).is_ok() {
                        linger(stream);
                    }
                    return;
                }
            };
            match upgrade {
                None => {}
                Some(Ok((route, accept))) => {
                    // This worker is the connection's for the rest of its life.
                    if !out.is_empty() && stream.write_all(&out).is_err() {
                        return;
                    }
                    let leftover = inbox.take_pending();
                    return crate::ws::run(crate::ws::Upgrade {
                        stream: Box::new(stream),
                        leftover,
                        route,
                        accept,
                    });
                }
                Some(Err(why)) => {
                    let resp = workloads::ws::bad_handshake(why);
                    encode_reply(
                        &mut out,
                        name,
                        &resp,
                        false,
                        http1::Connection::Close,
                        workloads::ALLOW,
                        true,
                    );
                    let _ = stream.write_all(&out);
                    return;
                }
            }
            let in_flight = shutdown.request();
            // Earlier pipelined answers go out before this one is worked on.
            if !out.is_empty() {
                if stream.write_all(&out).is_err() {
                    return;
                }
                out.clear();
            }
            let response = worker.serve(routed, body);
            if encode_reply(
                &mut out,
                name,
                &response,
                head,
                connection,
                allow,
                shutdown.is_stopping(),
            ) {
                let _ = stream.write_all(&out);
                return;
            }
            _unsent = Some(in_flight);
            deadline = Instant::now() + READ_TIMEOUT;
        }
        if !out.is_empty() {
            if stream.write_all(&out).is_err() {
                return;
            }
            out.clear();
            _unsent = None;
        }
        if shutdown.is_stopping() {
            return;
        }
        // Between requests the full READ_TIMEOUT applies (one setsockopt per
        // connection); within a request, the time left, so that a client
        // that drips a head byte by byte is still dropped at the deadline.
        let wait = if inbox.is_empty() {
            READ_TIMEOUT
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        if wait.is_zero() || read_timeout.set(&stream, wait).is_err() {
            return;
        }
        match stream.read(inbox.spare()) {
            Ok(n) if n > 0 => inbox.filled(n),
            // Closed, reset, or the timeout expired.
            _ => return,
        }
    }
}

/// The socket's current read timeout, to skip redundant `setsockopt` calls.
#[derive(Default)]
struct ReadTimeout(Option<Duration>);

impl ReadTimeout {
    fn set(&mut self, stream: &TcpStream, wait: Duration) -> io::Result<()> {
        if self.0 != Some(wait) {
            stream.set_read_timeout(Some(wait))?;
            self.0 = Some(wait);
        }
        Ok(())
    }
}
