//! HTTP/2 on one connection (`Framing::H2c`, `Framing::H2`): the state a
//! connection of this protocol carries, and the glue between the loop and
//! the sans-IO codec (`engine::h2`). Nothing here does I/O or counts.
//!
//! - **open**: each socket gets a new codec, whose opening (the preface,
//!   SETTINGS, the connection's WINDOW_UPDATE) goes out with the first
//!   request; the ring's limit is 1 until the server's SETTINGS come.
//! - **encode**: a request's frames are written into [`H2Conn::out`] and
//!   its slot is keyed by the stream id.
//! - **feed**: received plaintext goes to the codec; what it owes the
//!   server lands in `out`; each event is handed to the loop as an
//!   [`Answer`]: a response judged by its path's check (settles its slot
//!   by key), a reset or a GOAWAY's refusal (fails its slot alone), the
//!   server's stream limit, a GOAWAY (no new stream; the socket closes once
//!   the ones in flight end).

use crate::engine::h2::{Config, Event, H2Client, Response, Template, REFUSED_STREAM};
use crate::engine::{Check, Plan, ProtoPlan};
use crate::stats::Failure;

/// A connection's HTTP/2 state (boxed in `Proto::H2`).
pub(crate) struct H2Conn {
    /// The open socket's codec (`None` before the first socket).
    codec: Option<H2Client>,
    /// What the codec writes, before it is queued on the connection.
    pub out: Vec<u8>,
    /// The events of one read (kept: no allocation per read).
    events: Vec<Event>,
    /// After a GOAWAY: no new stream on this socket; it closes once the
    /// ones in flight end.
    pub draining: bool,
}

/// What one codec event means for the loop.
pub(crate) enum Answer {
    /// The response to the request on its stream (judged by [`verdict`]).
    Response(Response),
    /// The request on `stream` failed alone (reset, or refused by GOAWAY).
    Failed { stream: u32, failure: Failure },
    /// The server's SETTINGS: at most this many streams in flight.
    Limit(u32),
}

impl H2Conn {
    /// `streams`: the most in flight per connection; `request_max`: the
    /// largest request's size (the out buffer's room for all of them).
    pub(crate) fn new(streams: usize, request_max: usize) -> H2Conn {
        H2Conn {
            codec: None,
            out: Vec::with_capacity(streams * request_max + 1024),
            events: Vec::with_capacity(2 * streams + 8),
            draining: false,
        }
    }

    /// A new socket: a new codec, its opening written into `out`.
    pub(crate) fn open(&mut self, templates: &[Template], config: Config) {
        let mut codec = H2Client::new(templates.to_vec(), config);
        self.out.clear();
        codec.opening(&mut self.out);
        self.codec = Some(codec);
        self.draining = false;
    }

    /// The socket closed: its codec goes with it (and its GOAWAY).
    pub(crate) fn close(&mut self) {
        self.codec = None;
        self.draining = false;
    }

    /// Encodes path `path`'s request after what `out` holds: its stream id,
    /// or `None` if the codec refused it (the connection fails).
    pub(crate) fn encode(&mut self, path: u16) -> Option<u32> {
        let codec = self.codec.as_mut()?;
        codec.encode(usize::from(path), &mut self.out).ok()
    }

    /// Feeds received plaintext to the codec: what it owes the server
    /// lands in `out`, its events in [`H2Conn::take_events`]. A GOAWAY
    /// sets [`H2Conn::draining`] at once: the responses ahead of it in
    /// this read must not start new streams. `false`: the codec failed
    /// (the connection fails).
    pub(crate) fn feed(&mut self, data: &[u8]) -> bool {
        let Some(codec) = self.codec.as_mut() else {
            return true;
        };
        let events = &mut self.events;
        events.clear();
        self.out.clear();
        let fed = codec.feed(data, &mut self.out, |e| events.push(e));
        if events.iter().any(|e| matches!(e, Event::GoAway { .. })) {
            self.draining = true;
        }
        fed.is_ok()
    }

    /// The events of the last feed, to be walked with [`answers`] and
    /// given back ([`H2Conn::give_back`]) so that their buffer is reused.
    pub(crate) fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    pub(crate) fn give_back(&mut self, events: Vec<Event>) {
        self.events = events;
    }
}

/// What each event of one read means for the loop, in order.
pub(crate) fn answers(events: &[Event]) -> impl Iterator<Item = Answer> + '_ {
    let mut after_goaway = false;
    events.iter().filter_map(move |e| match *e {
        Event::Response(r) => Some(Answer::Response(r)),
        Event::Reset { stream, code, .. } => Some(Answer::Failed {
            stream,
            failure: if after_goaway && code == REFUSED_STREAM {
                Failure::GoAway
            } else {
                Failure::Reset
            },
        }),
        Event::Settings {
            max_concurrent_streams,
        } => Some(Answer::Limit(max_concurrent_streams)),
        Event::GoAway { .. } => {
            after_goaway = true;
            None
        }
    })
}

/// A response's verdict by its path's check: status, Content-Length
/// against the DATA received, the exact body.
/// `head`: the request was a HEAD, whose Content-Length announces the
/// body a GET would get (RFC 9110 §9.3.2), not the empty one it has.
pub(crate) fn verdict(check: &Check, r: &Response, head: bool) -> Option<Failure> {
    if !check.status_ok(r.status) {
        Some(Failure::Status)
    } else if !head && r.content_length.is_some_and(|n| n != r.body_len) {
        Some(Failure::Length)
    } else if !r.body_ok {
        Some(Failure::Body)
    } else {
        None
    }
}

/// Each path of the plan as a request template, judged as its check says
/// (its exact body, when it has one). Empty for another protocol.
pub(crate) fn templates(plan: &Plan) -> Vec<Template> {
    if !matches!(plan.proto, ProtoPlan::H2 { .. }) {
        return Vec::new();
    }
    let scheme = if plan.tls().is_some() {
        "https"
    } else {
        "http"
    };
    plan.routes()
        .iter()
        .map(|r| {
            let (content_type, body) = split_body(&r.request.bytes);
            let mut t = Template::new(
                &r.request.method,
                scheme,
                &plan.authority,
                &r.request.target,
                body,
                content_type,
            );
            t.expected_body = r.check.body().map(<[u8]>::to_vec);
            t
        })
        .collect()
}

/// An encoded HTTP/1.1 request's Content-Type value and body (not
/// chunked: an HTTP/2 run refuses `--chunked`).
pub(crate) fn split_body(request: &[u8]) -> (Option<&str>, &[u8]) {
    let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (None, &[]);
    };
    let head = std::str::from_utf8(&request[..end]).unwrap_or("");
    let content_type = head.split("\r\n").find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-type")
            .then_some(value.trim())
    });
    (content_type, &request[end + 4..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(stream: u32, status: u16, content_length: Option<u64>, body_ok: bool) -> Response {
        Response {
            stream,
            template: 0,
            status,
            content_length,
            content_type_ok: true,
            body_len: 5,
            body_ok,
        }
    }

    #[test]
    fn a_refusal_after_a_goaway_is_a_goaway_failure_and_before_it_a_reset() {
        let reset = |stream| Event::Reset {
            stream,
            template: 0,
            code: REFUSED_STREAM,
        };
        let events = [
            Event::Settings {
                max_concurrent_streams: 7,
            },
            reset(1),
            Event::GoAway {
                last_stream: 1,
                code: 0,
            },
            Event::Response(response(1, 200, None, true)),
            reset(3),
        ];
        let got: Vec<String> = answers(&events)
            .map(|a| match a {
                Answer::Response(r) => format!("response {}", r.stream),
                Answer::Failed { stream, failure } => format!("{stream} {failure:?}"),
                Answer::Limit(n) => format!("limit {n}"),
            })
            .collect();
        assert_eq!(
            got,
            ["limit 7", "1 Reset", "response 1", "3 GoAway"],
            "the GOAWAY itself is no answer; it only names the refusals after it"
        );
    }

    #[test]
    fn a_response_is_judged_by_status_then_length_then_body() {
        let check = Check::Status(200);
        assert_eq!(
            verdict(&check, &response(1, 200, Some(5), true), false),
            None
        );
        // HEAD: 5 announced, none sent.
        let mut head = response(1, 200, Some(5), true);
        head.body_len = 0;
        assert_eq!(verdict(&Check::Status(200), &head, true), None);
        assert_eq!(
            verdict(&Check::Status(200), &head, false),
            Some(Failure::Length)
        );
        assert_eq!(
            verdict(&check, &response(1, 404, Some(4), false), false),
            Some(Failure::Status)
        );
        assert_eq!(
            verdict(&check, &response(1, 200, Some(4), false), false),
            Some(Failure::Length)
        );
        assert_eq!(
            verdict(&check, &response(1, 200, None, false), false),
            Some(Failure::Body)
        );
    }

    #[test]
    fn a_request_body_and_its_content_type_are_found_in_the_encoded_request() {
        let request = b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Type:  text/plain \r\nContent-Length: 2\r\n\r\nhi";
        assert_eq!(split_body(request), (Some("text/plain"), &b"hi"[..]));
        assert_eq!(split_body(b"GET / HTTP/1.1\r\n\r\n"), (None, &b""[..]));
        assert_eq!(split_body(b"no head end"), (None, &b""[..]));
    }

    #[test]
    fn a_closed_socket_ends_its_codec_and_its_drain() {
        let mut h2 = H2Conn::new(4, 64);
        assert_eq!(h2.encode(0), None, "no codec before a socket opens");
        h2.open(&[], Config::default());
        assert!(h2.out.starts_with(crate::engine::h2::PREFACE));
        h2.draining = true;
        h2.close();
        assert!(!h2.draining);
        assert!(h2.feed(b"anything"), "no codec: nothing to fail");
        assert!(h2.take_events().is_empty());
    }
}
