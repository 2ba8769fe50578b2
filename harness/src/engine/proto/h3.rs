//! HTTP/3 on one QUIC connection: which request is on which stream, and
//! what each stream's bytes answer (`engine::h3` reads them). Sans-IO over
//! quinn-proto's connection: it opens streams, writes requests and reads
//! responses through it; moving datagrams is the transport's
//! (`engine::quic`), and applying answers to slots the worker's
//! (`worker/h3.rs`).
//!
//! A request is started into `unsent` (its slot already in the ring) and
//! goes on a stream as soon as the connection is established and the
//! server's stream credit allows: the ring's capacity is `--streams`, and
//! credit the server has not granted yet only delays a request, never
//! fails it.

use quinn_proto::{Connection, Dir, ReadError, StreamId};

use crate::engine::h3::{self, Malformed, ResponseReader};
use crate::engine::quic::QuicConn;
use crate::engine::Plan;
use crate::stats::Failure;
use crate::stats::QuicCounts;

/// Readers kept for reuse per connection, at most (a connection has
/// `--streams` in flight).
const SPARE_READERS: usize = 1024;

/// A request stream in flight.
struct Stream {
    id: StreamId,
    /// Bytes of its request written so far, and whether that is all of
    /// them (the stream is finished).
    written: usize,
    finished: bool,
    /// Its slot's key in the connection's ring.
    key: u32,
    path: u8,
    reader: ResponseReader,
}

/// One connection's HTTP/3 over QUIC: its QUIC connection, when one is
/// open (the transport's state, kept here so that a connection of
/// another protocol carries none of it), and its requests.
#[derive(Default)]
pub(crate) struct H3Conn {
    pub quic: Option<Box<QuicConn>>,
    pub requests: Requests,
}

/// Which request is on which stream (kept across QUIC connections:
/// `close` empties it).
#[derive(Default)]
pub(crate) struct Requests {
    /// Requests started but not yet on a stream: (ring key, path).
    pub unsent: Vec<(u32, u8)>,
    streams: Vec<Stream>,
    /// The control stream is open on the current QUIC connection.
    control: bool,
    /// Request streams whose request is not all written yet (a body
    /// bigger than the stream's credit).
    unfinished: usize,
    /// The server's unidirectional streams (control, QPACK), read and
    /// dropped.
    uni: Vec<StreamId>,
    /// Readers of streams that ended, kept for the next ones (their
    /// buffers with them).
    spare: Vec<ResponseReader>,
    /// What this connection's closed QUIC connections counted.
    pub counts: QuicCounts,
    /// Answers are being applied: requests started meanwhile wait in
    /// `unsent` for the loop's next pass rather than recursing.
    pub pumping: bool,
}

/// What reading a connection's streams found, for the worker to apply.
#[derive(Debug)]
pub(crate) enum Answer {
    /// A complete response to the slot keyed `key`.
    Response {
        key: u32,
        status: u16,
        content_length: Option<u64>,
        body_len: u64,
        body_ok: bool,
    },
    /// The slot keyed `key` failed alone (its stream reset or malformed).
    Failed { key: u32, failure: Failure },
}

/// Each path's request as it goes on its stream (HEADERS, DATA), encoded
/// once. Empty for another protocol.
pub(crate) fn templates(plan: &Plan) -> Vec<Vec<u8>> {
    if !plan.framing().is_h3() {
        return Vec::new();
    }
    plan.routes()
        .iter()
        .map(|r| {
            let (content_type, body) = super::h2::split_body(&r.request.bytes);
            h3::request(
                &r.request.method,
                &plan.authority,
                &r.request.target,
                body,
                content_type,
            )
        })
        .collect()
}

impl Requests {
    /// Puts waiting requests on streams, as far as the server's credit
    /// goes (an established connection only): the bytes written.
    pub(crate) fn send(&mut self, conn: &mut Connection, templates: &[Vec<u8>]) -> u64 {
        if !self.control {
            if let Some(id) = conn.streams().open(Dir::Uni) {
                let _ = conn.send_stream(id).write(&h3::control_stream());
                self.control = true;
            }
        }
        let mut sent = 0;
        if self.unfinished > 0 {
            for st in &mut self.streams {
                if !st.finished {
                    let bytes = &templates[usize::from(st.path)];
                    sent += write_rest(conn, st.id, bytes, &mut st.written);
                    if st.written == bytes.len() {
                        st.finished = true;
                        self.unfinished -= 1;
                    }
                }
            }
        }
        let mut k = 0;
        while k < self.unsent.len() {
            let Some(id) = conn.streams().open(Dir::Bi) else {
                break;
            };
            let (key, path) = self.unsent[k];
            let bytes = &templates[usize::from(path)];
            let mut written = 0;
            sent += write_rest(conn, id, bytes, &mut written);
            let finished = written == bytes.len();
            if !finished {
                self.unfinished += 1;
            }
            let reader = match self.spare.pop() {
                Some(r) => r,
                None => ResponseReader::new(),
            };
            self.streams.push(Stream {
                id,
                written,
                finished,
                key,
                path,
                reader,
            });
            k += 1;
        }
        self.unsent.drain(..k);
        sent
    }

    /// The server opened unidirectional streams: taken, to be read and
    /// dropped.
    pub(crate) fn accept_uni(&mut self, conn: &mut Connection) {
        while let Some(id) = conn.streams().accept(Dir::Uni) {
            self.uni.push(id);
        }
    }

    /// Reads stream `id`: a request stream's response (an answer once it
    /// ends or fails), a server stream's bytes dropped. `expected`: each
    /// path's exact body, if its check has one. The bytes read.
    pub(crate) fn read<'e>(
        &mut self,
        conn: &mut Connection,
        id: StreamId,
        expected: impl Fn(u8) -> Option<&'e [u8]>,
        answers: &mut Vec<Answer>,
    ) -> u64 {
        let mut bytes = 0;
        let Some(at) = self.streams.iter().position(|s| s.id == id) else {
            if self.uni.contains(&id) {
                if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                    while let Ok(Some(c)) = chunks.next(usize::MAX) {
                        bytes += c.bytes.len() as u64;
                    }
                    let _ = chunks.finalize();
                }
            }
            return bytes;
        };
        let stream = &mut self.streams[at];
        let want = expected(stream.path);
        let mut end: Option<Result<(), Failure>> = None;
        let mut recv = conn.recv_stream(id);
        match recv.read(true) {
            Ok(mut chunks) => {
                loop {
                    match chunks.next(usize::MAX) {
                        Ok(Some(c)) => {
                            bytes += c.bytes.len() as u64;
                            if stream.reader.feed(&c.bytes, want) == Err(Malformed) {
                                end = Some(Err(Failure::Exception));
                                break;
                            }
                        }
                        Ok(None) => {
                            end = Some(Ok(()));
                            break;
                        }
                        Err(ReadError::Blocked) => break,
                        Err(ReadError::Reset(_)) => {
                            end = Some(Err(Failure::Reset));
                            break;
                        }
                    }
                }
                let _ = chunks.finalize();
            }
            Err(_) => end = Some(Err(Failure::Receive)),
        }
        let Some(end) = end else {
            return bytes;
        };
        let mut stream = self.streams.swap_remove(at);
        if !stream.finished {
            self.unfinished -= 1;
        }
        let r = &stream.reader;
        answers.push(match end {
            Ok(()) if r.headed => Answer::Response {
                key: stream.key,
                status: r.status,
                content_length: r.content_length,
                body_len: r.body_len,
                body_ok: r.body_ok,
            },
            Ok(()) => Answer::Failed {
                key: stream.key,
                failure: Failure::Exception,
            },
            Err(failure) => {
                if failure == Failure::Exception {
                    // Not read further: the server may stop sending.
                    let _ = conn.recv_stream(id).stop(0u32.into());
                }
                Answer::Failed {
                    key: stream.key,
                    failure,
                }
            }
        });
        if self.spare.len() < SPARE_READERS {
            stream.reader.reset();
            self.spare.push(stream.reader);
        }
        bytes
    }

    /// The QUIC connection closed: what it counted is kept, its streams
    /// and waiting requests go (their slots fail with the connection).
    pub(crate) fn close(&mut self, conn: Option<&Connection>) {
        if let Some(c) = conn {
            crate::engine::quic::count(&mut self.counts, c);
        }
        self.unsent.clear();
        self.streams.clear();
        self.uni.clear();
        self.control = false;
        self.unfinished = 0;
        self.pumping = false;
    }
}

/// Writes what is left of `bytes` on stream `id` from `*written` on, as
/// far as its credit goes, and finishes the stream once all is written:
/// the bytes written now.
fn write_rest(conn: &mut Connection, id: StreamId, bytes: &[u8], written: &mut usize) -> u64 {
    let mut s = conn.send_stream(id);
    let n = s.write(&bytes[*written..]).unwrap_or(0);
    *written += n;
    if *written == bytes.len() {
        let _ = s.finish();
    }
    n as u64
}
