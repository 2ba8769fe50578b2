//! A request's chunked body, checked byte by byte as it is read: for a
//! server whose HTTP library decodes the body itself (event-loop: hyper),
//! so that it sees only what the grammar allows.
//!
//! hyper 1.12's chunked decoder (`src/proto/h1/decode.rs`, `ChunkedState`)
//! is lenient where RFC 9112 is not: it skips a chunk extension to its line
//! end without reading it (a bare `;`, a name that is not a token, a
//! control character all pass), takes whitespace after the size, and waits
//! for more bytes after a trailer line ended by a bare LF. Each is a place
//! where a proxy in front and the server could disagree on where a body
//! ends. event-loop runs every chunked body through [`ChunkedBody`] on its
//! way to hyper and stops at the first byte that breaks the grammar (the
//! shared codec's, [`chunk_size`]): hyper then reads an error instead, and
//! the service answers 400 and closes, as the servers on the shared codec
//! do. fuzz/ (`chunk_line`) holds the two to the same verdicts.
//!
//! The cost is one pass over a chunked body's size lines and trailers; its
//! data is skipped by length, and a request without a chunked body (every
//! `/hello`) never gets here.

use crate::http1::{chunk_size, ParseError, MAX_CHUNK_LINE};

/// Where a chunked body is, between two reads.
#[derive(Debug)]
pub struct ChunkedBody {
    state: State,
    /// The size line read so far (without its LF).
    line: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    SizeLine,
    Data(u64),
    DataCr,
    DataLf,
    /// In a trailer line: its length so far (CR not counted), whether it
    /// has a colon, whether a CR came last.
    Trailer {
        len: usize,
        colon: bool,
        cr: bool,
    },
}

/// What one read did to the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// All of it was body; more is to come.
    More,
    /// The body ended with the byte before this index: what follows is the
    /// next request.
    Ended(usize),
    /// The byte at this index breaks the grammar.
    Refused(usize),
    /// A chunk size past 64 bits: hyper refuses it itself (its size
    /// overflows), and the connection ends; nothing more to check.
    Unchecked,
}

impl Default for ChunkedBody {
    fn default() -> Self {
        ChunkedBody {
            state: State::SizeLine,
            line: Vec::new(),
        }
    }
}

impl ChunkedBody {
    /// Reads the next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) -> Step {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match self.state {
                State::SizeLine if b == b'\n' => {
                    let line = std::mem::take(&mut self.line);
                    let Some(line) = line.strip_suffix(b"\r") else {
                        return Step::Refused(i);
                    };
                    if line.contains(&b'\r') {
                        return Step::Refused(i);
                    }
                    self.state = match chunk_size(line) {
                        Ok(0) => State::Trailer {
                            len: 0,
                            colon: false,
                            cr: false,
                        },
                        Ok(size) => State::Data(size as u64),
                        Err(ParseError::Malformed) => return Step::Refused(i),
                        Err(_) => return Step::Unchecked,
                    };
                }
                State::SizeLine => {
                    if self.line.len() > MAX_CHUNK_LINE {
                        return Step::Refused(i);
                    }
                    self.line.push(b);
                }
                State::Data(left) => {
                    let skip = left.min((bytes.len() - i) as u64);
                    self.state = match left - skip {
                        0 => State::DataCr,
                        left => State::Data(left),
                    };
                    i += skip as usize;
                    continue;
                }
                State::DataCr if b == b'\r' => self.state = State::DataLf,
                State::DataLf if b == b'\n' => self.state = State::SizeLine,
                State::DataCr | State::DataLf => return Step::Refused(i),
                State::Trailer { len, colon, cr } => match b {
                    // A line ends in CRLF: a bare LF, a CR twice or a CR
                    // inside the line is refused, as is a field line
                    // without a colon or starting with whitespace (obs-fold).
                    b'\n' if !cr => return Step::Refused(i),
                    b'\n' if len == 0 => return Step::Ended(i + 1),
                    b'\n' if !colon => return Step::Refused(i),
                    b'\n' => {
                        self.state = State::Trailer {
                            len: 0,
                            colon: false,
                            cr: false,
                        }
                    }
                    _ if cr => return Step::Refused(i),
                    b'\r' => {
                        self.state = State::Trailer {
                            len,
                            colon,
                            cr: true,
                        }
                    }
                    b' ' | b'\t' if len == 0 => return Step::Refused(i),
                    _ => {
                        self.state = State::Trailer {
                            len: len + 1,
                            colon: colon || b == b':',
                            cr: false,
                        }
                    }
                },
            }
            i += 1;
        }
        Step::More
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole body in one read, then byte by byte: the same step.
    fn step(body: &[u8]) -> Step {
        let whole = ChunkedBody::default().feed(body);
        let mut c = ChunkedBody::default();
        let mut split = Step::More;
        for (i, b) in body.iter().enumerate() {
            split = match c.feed(std::slice::from_ref(b)) {
                Step::More => continue,
                Step::Ended(n) => Step::Ended(i + n),
                Step::Refused(n) => Step::Refused(i + n),
                Step::Unchecked => Step::Unchecked,
            };
            break;
        }
        assert_eq!(whole, split, "{:?}", String::from_utf8_lossy(body));
        whole
    }

    #[test]
    fn a_body_ends_after_its_trailer_section() {
        let body = b"5\r\nhello\r\nA;ext=\"v\"\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nGET /";
        assert_eq!(step(body), Step::Ended(body.len() - 5));
        assert_eq!(step(b"0\r\n\r\n"), Step::Ended(5));
        assert_eq!(step(b"5 ; a = b\r\nhel"), Step::More);
        assert_eq!(
            step(b"1\r\n\n\r\n0\r\n\r\n"),
            Step::Ended(11),
            "data is data"
        );
    }

    #[test]
    fn what_the_grammar_refuses_is_refused_at_its_line_end() {
        for (body, at) in [
            (&b"5;\r\nhello\r\n0\r\n\r\n"[..], 3),
            (b"5;n@me=v\r\nhello\r\n0\r\n\r\n", 9),
            (b"5;name=va\x01lue\r\nhello\r\n0\r\n\r\n", 14),
            (b"5 \r\nhello\r\n0\r\n\r\n", 3),
            (b"5\nhello\r\n0\r\n\r\n", 1),
            (b"zz\r\n", 3),
            (b"5\r\nhelloX", 8),
            (b"5\r\nhello\rX", 9),
            (b"0\r\n\n", 3),
            (b"0\r\nX-T: 1\n\r\n", 9),
            (b"0\r\nno colon\r\n\r\n", 12),
            (b"0\r\n folded: x\r\n\r\n", 3),
            (b"0\r\nA: b\rc\r\n\r\n", 8),
        ] {
            assert_eq!(
                step(body),
                Step::Refused(at),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        let long = format!("5;{}", "a".repeat(2000));
        assert!(matches!(step(long.as_bytes()), Step::Refused(_)));
    }

    /// The codec and this check read the same bodies the same way (as
    /// fuzz/chunk_line holds them to on any input).
    #[test]
    fn the_codec_and_the_check_agree() {
        use crate::http1::scan_chunked;
        for body in [
            &b"5\r\nhello\r\n0\r\n\r\nGET"[..],
            b"5 ; a = \"q \\\" s\"\r\nhello\r\n0\r\nT: 1\r\n\r\n",
            b"5;\r\nhello\r\n0\r\n\r\n",
            b"5;a=b c\r\nhello\r\n0\r\n\r\n",
            b"5\t\r\nhello\r\n0\r\n\r\n",
            b"0\r\nT: 1\n\r\n",
            b"0\r\n\n",
            b"3\r\nhello\r\n0\r\n\r\n",
        ] {
            let stream = step(body);
            match (scan_chunked(body, |_| {}), stream) {
                (Ok(Some((wire, _))), Step::Ended(n)) => assert_eq!(wire, n),
                (Err(ParseError::Malformed), Step::Refused(_)) => {}
                (c, s) => panic!(
                    "{:?}: codec {c:?}, check {s:?}",
                    String::from_utf8_lossy(body)
                ),
            }
        }
    }

    #[test]
    fn a_size_past_64_bits_is_left_to_hyper() {
        assert_eq!(step(b"10000000000000005\r\nhello"), Step::Unchecked);
    }
}
