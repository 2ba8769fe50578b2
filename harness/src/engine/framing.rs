//! How many requests a connection has in flight, and where the loop keeps
//! them: the plan's [`Framing`] (which protocol, how deep) and each
//! connection's [`Ring`] of [`Slot`]s. What a protocol puts on the wire and
//! how it matches answers to slots is `engine::proto`'s.
//!
//! - **capacity** ([`Framing::capacity`]): how many requests a connection
//!   may have in flight — 1 for HTTP/1.1, N for `--pipeline N`; for HTTP/2
//!   the smaller of `--streams` and the server's
//!   `SETTINGS_MAX_CONCURRENT_STREAMS` ([`Ring::set_limit`] lowers it at run
//!   time without reallocating).
//! - **per-request state**: a [`Ring`] of [`Slot`]s per connection,
//!   allocated once with the connection (never per request). A slot holds
//!   what the loop needs to judge and time one request: its path (which
//!   names its [`super::Check`]), its latency origin (the intended send time
//!   under `--rate`), its send time, its deadline, whether it is measured,
//!   and a `key` — the HTTP/2 stream id, or the order of sending.
//! - **matching**: a complete response is the oldest slot's
//!   ([`Ring::pop`], HTTP/1.1 and its pipelining, which answer in order) or
//!   the one with a given key ([`Ring::take`], HTTP/2 by stream id).
//! - **failure**: a connection that dies fails every request in its ring
//!   once; a reset stream (HTTP/2) fails its own slot only.

/// How requests are framed on each connection (`harness run --pipeline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Framing {
    /// HTTP/1.1, one request in flight per connection.
    #[default]
    H1,
    /// HTTP/1.1 pipelining: up to this many requests in flight per
    /// connection, answered in order.
    Pipelined(u16),
    /// WebSocket echo (`ws.rs`): after the upgrade, up to this many
    /// messages in flight per connection, each echoed in order.
    Ws(u16),
    /// HTTP/2 by prior knowledge over plaintext (`--h2c`): up to this many
    /// streams in flight per connection (`--streams`), fewer if the
    /// server's SETTINGS_MAX_CONCURRENT_STREAMS says so.
    H2c(u16),
    /// HTTP/2 over TLS, chosen by ALPN (`--h2`).
    H2(u16),
    /// HTTP/3 over QUIC (`--h3`): up to this many request streams in
    /// flight per connection (`--streams`), fewer while the server's
    /// stream credit says so.
    H3(u16),
}

/// The deepest pipeline a run may ask for.
pub const MAX_PIPELINE: u16 = 1024;

impl Framing {
    /// `--pipeline N`: HTTP/1.1 for N = 1, pipelined beyond.
    pub fn pipelined(depth: u16) -> Framing {
        if depth <= 1 {
            Framing::H1
        } else {
            Framing::Pipelined(depth)
        }
    }

    /// Requests in flight allowed per connection.
    pub fn capacity(self) -> usize {
        match self {
            Framing::H1 => 1,
            Framing::Pipelined(n)
            | Framing::Ws(n)
            | Framing::H2c(n)
            | Framing::H2(n)
            | Framing::H3(n) => usize::from(n),
        }
    }

    /// The protocol's name in reports.
    pub fn protocol(self) -> &'static str {
        match self {
            Framing::H1 => "http/1.1",
            Framing::Pipelined(_) => "http/1.1-pipelined",
            Framing::Ws(_) => "websocket",
            Framing::H2c(_) => "h2c",
            Framing::H2(_) => "h2",
            Framing::H3(_) => "h3",
        }
    }

    /// The pipeline depth, for reports (1 without pipelining; 1 for
    /// HTTP/2, whose depth is [`Framing::streams`]).
    pub fn depth(self) -> usize {
        match self {
            Framing::H2c(_) | Framing::H2(_) | Framing::H3(_) => 1,
            _ => self.capacity(),
        }
    }

    /// HTTP/2 and HTTP/3: the streams allowed in flight per connection
    /// (`--streams`).
    pub fn streams(self) -> Option<usize> {
        match self {
            Framing::H2c(n) | Framing::H2(n) | Framing::H3(n) => Some(usize::from(n)),
            _ => None,
        }
    }

    /// HTTP/2 (either transport).
    pub fn is_h2(self) -> bool {
        matches!(self, Framing::H2c(_) | Framing::H2(_))
    }

    /// HTTP/3 (over QUIC).
    pub fn is_h3(self) -> bool {
        matches!(self, Framing::H3(_))
    }

    /// Requests are encoded into the connection's own out buffer rather
    /// than sent from the plan's bytes.
    pub(crate) fn buffered(self) -> bool {
        !matches!(self, Framing::H1)
    }
}

/// One request in flight: what the loop needs to time and judge it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Slot {
    /// The path (an index into the plan's paths, at most
    /// `schedule::MAX_PATHS` of them; names its check). A byte, so that a
    /// slot is 32 bytes: every held connection carries at least one.
    pub path: u8,
    /// Where its latency counts from: its intended send time (`--rate`),
    /// its connect (a fresh connection per request) or its write.
    pub origin_ns: u64,
    pub sent_ns: u64,
    /// It fails with a timeout after this.
    pub deadline_ns: u64,
    /// Not a warm-up request.
    pub measured: bool,
    /// The order of sending, or an HTTP/2 stream id.
    pub key: u32,
    /// A room message (`ws_room`): deliveries still owed, of one per member.
    pub pending: u16,
}

/// A connection's requests in flight, oldest first: a fixed ring allocated
/// with the connection.
#[derive(Debug)]
pub(crate) struct Ring {
    slots: Box<[Slot]>,
    // u32 rather than usize: a ring is at most 65,535 slots (HTTP/2's
    // streams), and every held connection carries one (32 bytes, not 48).
    head: u32,
    len: u32,
    /// At most this many in flight (≤ the ring's size).
    limit: u32,
    next_key: u32,
}

impl Ring {
    pub(crate) fn new(capacity: usize) -> Ring {
        let capacity = capacity.max(1);
        Ring {
            slots: vec![Slot::default(); capacity].into_boxed_slice(),
            head: 0,
            len: 0,
            limit: capacity as u32,
            next_key: 0,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.limit
    }

    /// Lowers (or restores, up to the ring's size) how many may be in
    /// flight: HTTP/2's `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = limit.clamp(1, self.slots.len()) as u32;
    }

    /// Adds a request; its `key` is set to the order of sending. The caller
    /// checks [`Ring::is_full`] first.
    #[inline]
    pub(crate) fn push(&mut self, mut slot: Slot) -> &mut Slot {
        debug_assert!((self.len as usize) < self.slots.len());
        slot.key = self.next_key;
        self.next_key = self.next_key.wrapping_add(1);
        let at = self.at(self.len as usize);
        self.len += 1;
        self.slots[at] = slot;
        &mut self.slots[at]
    }

    /// The oldest request in flight (HTTP/1.1: the one being answered). On
    /// an empty ring, the last one that was (its fields stay readable).
    #[inline]
    pub(crate) fn head(&self) -> &Slot {
        &self.slots[self.head as usize]
    }

    #[inline]
    pub(crate) fn head_mut(&mut self) -> &mut Slot {
        &mut self.slots[self.head as usize]
    }

    /// Where the `k`th oldest request is (`k` ≤ the ring's size: one
    /// wrap at most, so a subtraction rather than a division).
    #[inline]
    fn at(&self, k: usize) -> usize {
        let i = self.head as usize + k;
        if i >= self.slots.len() {
            i - self.slots.len()
        } else {
            i
        }
    }

    /// The `k`th oldest request in flight (`k` < [`Ring::len`]).
    #[inline]
    pub(crate) fn nth_mut(&mut self, k: usize) -> &mut Slot {
        let at = self.at(k);
        &mut self.slots[at]
    }

    /// The key the next request pushed will get.
    #[inline]
    pub(crate) fn next_key(&self) -> u32 {
        self.next_key
    }

    /// The `k`th oldest request in flight (`k` < [`Ring::len`]).
    #[inline]
    pub(crate) fn nth(&self, k: usize) -> &Slot {
        &self.slots[self.at(k)]
    }

    /// Removes the oldest request (answered in order).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Slot> {
        if self.len == 0 {
            return None;
        }
        let slot = self.slots[self.head as usize];
        self.head = self.at(1) as u32;
        self.len -= 1;
        Some(slot)
    }

    /// Removes the request with `key` wherever it is (answered by stream
    /// id), the order of the others kept: the shorter side of the ring
    /// closes the gap. Streams are mostly answered oldest first, where this
    /// is a pop; moving the newer ones instead cost a copy per stream in
    /// flight for each answer (with 100 streams, 40% of the engine's CPU
    /// over TLS).
    pub(crate) fn take(&mut self, key: u32) -> Option<Slot> {
        let len = self.len as usize;
        let pos = (0..len).find(|&k| self.slots[self.at(k)].key == key)?;
        let slot = self.slots[self.at(pos)];
        if pos < len / 2 {
            // The older ones move one place toward the newer, the head
            // after them.
            for k in (0..pos).rev() {
                let (to, from) = (self.at(k + 1), self.at(k));
                self.slots[to] = self.slots[from];
            }
            self.head = self.at(1) as u32;
        } else {
            for k in pos..len - 1 {
                let (to, from) = (self.at(k), self.at(k + 1));
                self.slots[to] = self.slots[from];
            }
        }
        self.len -= 1;
        Some(slot)
    }

    /// Empties the ring (the connection died, or the run ended), handing
    /// each request to `each` once, oldest first.
    pub(crate) fn drain(&mut self, mut each: impl FnMut(Slot)) {
        while let Some(s) = self.pop() {
            each(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(path: u8) -> Slot {
        Slot {
            path,
            ..Slot::default()
        }
    }

    /// Taking by key from any place, wrapped or not, leaves the others in
    /// their order, and the ring takes as many new ones as it gave up.
    #[test]
    fn taking_by_key_keeps_the_order_of_the_rest() {
        for start in 0..6usize {
            for take in 0..6u32 {
                let mut r = Ring::new(6);
                // Turn the ring so that its head starts at `start`.
                for _ in 0..start {
                    r.push(slot(0));
                    r.pop();
                }
                let first = r.next_key();
                for p in 0..6 {
                    r.push(slot(p));
                }
                assert_eq!(r.take(first + take).unwrap().path, take as u8);
                assert!(r.take(first + take).is_none());
                let rest: Vec<u8> = (0..r.len()).map(|k| r.nth(k).path).collect();
                let want: Vec<u8> = (0..6).filter(|&p| p != take as u8).collect();
                assert_eq!(rest, want, "head at {start}, took {take}");
                assert!(!r.is_full());
                r.push(slot(9));
                assert_eq!(r.nth(5).path, 9);
                assert_eq!(r.head().path, want[0]);
            }
        }
    }

    #[test]
    fn a_ring_answers_in_order_and_wraps_without_growing() {
        let mut r = Ring::new(3);
        for round in 0..5u8 {
            for p in 0..3 {
                assert!(!r.is_full());
                r.push(slot(round * 10 + p));
            }
            assert!(r.is_full());
            for p in 0..3 {
                assert_eq!(r.head().path, round * 10 + p);
                assert_eq!(r.pop().unwrap().path, round * 10 + p);
            }
            assert!(r.is_empty() && r.pop().is_none());
        }
    }

    #[test]
    fn a_ring_hands_out_by_key_and_drains_each_once() {
        let mut r = Ring::new(4);
        let keys: Vec<u32> = (0..4).map(|p| r.push(slot(p)).key).collect();
        assert_eq!(r.take(keys[1]).unwrap().path, 1);
        assert!(r.take(keys[1]).is_none());
        assert_eq!(r.len(), 3);
        r.set_limit(2);
        assert!(r.is_full());
        let mut seen = Vec::new();
        r.drain(|s| seen.push(s.path));
        assert_eq!(seen, [0, 2, 3]);
        assert!(r.is_empty());
    }

    #[test]
    fn depth_one_is_plain_http1() {
        assert_eq!(Framing::pipelined(1), Framing::H1);
        assert_eq!(Framing::pipelined(16).capacity(), 16);
        assert!(Framing::pipelined(16).buffered());
        assert!(!Framing::H1.buffered());
    }
}
