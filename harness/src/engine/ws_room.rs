//! WebSocket room fan-out (`harness run ws://…/ws/room?name=R --room`):
//! every connection is a member of a room, every member's messages reach
//! every member (its own included), and each arrival is one *delivery*,
//! judged and timed at its receiver.
//!
//! A message carries who sent it: its first [`HEADER`] bytes are the
//! sender's place in its room, its sequence number (the sender's ring key)
//! and the room's epoch, as lowercase hex (valid text too); the rest is
//! the plan's message, compared byte for byte. A sender's slot stays in
//! its ring until all K members received it, so a member has at most N
//! messages undelivered somewhere and the state kept per room is fixed:
//! the next sequence number each receiver expects from each sender (K × K)
//! and the order the first receiver saw the room's messages in (K × N),
//! both allocated with the room. Nothing here allocates per message.
//!
//! What a delivery is checked for:
//! - the right bytes (the plan's message after the header): `body`, `length`;
//! - its sender's order at its receiver: a sequence number past the one
//!   expected fails each skipped one (`order`: lost, or coming later), one
//!   before it (a duplicate or a late one), from no member, or never sent
//!   is a failed delivery of its own (`order`);
//! - the room's one order (the contract: "in the order the server received
//!   them"): the n-th delivery at every receiver is the same message
//!   (`interleave`). After a receiver's first such failure it is not
//!   checked again until the room rejoins, so one loss is not counted at
//!   every later delivery.
//!
//! A room starts sending once all its members are upgraded (a member is in
//! the room once its `101` is sent). A member whose connection fails
//! fails the room: every message in flight in it fails once per delivery
//! still owed, every member reconnects, and the room starts again under a
//! new epoch (messages of an old epoch that still arrive are dropped).

/// The bytes of a room message that name its sender, sequence and epoch.
pub const HEADER: usize = 24;

/// The most members a room may have: the receivers' table is K × K.
pub const MAX_MEMBERS: usize = 1024;

/// A room run: `rooms` rooms of `size` members each (`--room-size`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomPlan {
    pub size: usize,
    pub rooms: usize,
}

/// Room `k`'s upgrade target: `target`'s `name` parameter suffixed with
/// `-k` when there are several rooms, as it is with one.
pub fn target(target: &str, k: usize, rooms: usize) -> String {
    if rooms <= 1 {
        return target.to_string();
    }
    let Some((path, query)) = target.split_once('?') else {
        return format!("{target}?name=room-{k}");
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.strip_prefix("name=") {
            Some(name) => format!("name={name}-{k}"),
            None => p.to_string(),
        })
        .collect();
    format!("{path}?{}", params.join("&"))
}

/// The room's name in `target` (its `name` parameter), if any.
pub fn name(target: &str) -> Option<&str> {
    let (_, query) = target.split_once('?')?;
    query
        .split('&')
        .find_map(|p| p.strip_prefix("name="))
        .filter(|n| !n.is_empty())
}

/// A message's header: member, sequence and epoch as 8 hex digits each.
pub(crate) fn header(member: u32, seq: u32, epoch: u32) -> [u8; HEADER] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut h = [0u8; HEADER];
    for (field, v) in [member, seq, epoch].into_iter().enumerate() {
        for d in 0..8 {
            h[field * 8 + d] = HEX[((v >> (28 - 4 * d)) & 0xf) as usize];
        }
    }
    h
}

/// The member, sequence and epoch of a header; `None` if it is not one.
pub(crate) fn parse(h: &[u8; HEADER]) -> Option<(u32, u32, u32)> {
    let mut v = [0u32; 3];
    for (field, out) in v.iter_mut().enumerate() {
        for &c in &h[field * 8..field * 8 + 8] {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            *out = (*out << 4) | u32::from(d);
        }
    }
    Some((v[0], v[1], v[2]))
}

/// What an arriving message is, for its receiver.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Of an earlier epoch of the room: dropped, not counted.
    Stale,
    /// Not owed to this receiver (no such member, a duplicate, a late
    /// one already failed as skipped, or never sent): a failed delivery of
    /// its own.
    Extra,
    /// The delivery of `seq`; the sender's messages from `skipped_from` up
    /// to it were skipped (each a failed delivery).
    Deliver { skipped_from: u32, seq: u32 },
}

/// One room's state in the engine thread that holds all its members.
#[derive(Debug)]
pub(crate) struct Room {
    /// The thread's index of its first member's connection.
    pub first: usize,
    pub members: usize,
    /// Members upgraded in this epoch; it sends once all are.
    pub joined: usize,
    pub epoch: u32,
    /// `expected[r * members + s]`: the next sequence receiver r expects
    /// from sender s.
    expected: Box<[u32]>,
    /// The room's messages in the order the first receiver to reach each
    /// position saw them, `(sender, seq)`, a ring of `members × depth`.
    order: Box<[(u32, u32)]>,
    /// Positions written in `order`.
    written: u64,
    /// Deliveries each receiver has had in this epoch.
    seen: Box<[u64]>,
    /// Receivers no longer checked for the room's order this epoch.
    unchecked: Box<[bool]>,
}

impl Room {
    /// A room of `members` connections from `first`, each with up to
    /// `depth` messages in flight.
    pub(crate) fn new(first: usize, members: usize, depth: usize) -> Room {
        Room {
            first,
            members,
            joined: 0,
            epoch: 0,
            expected: vec![0; members * members].into_boxed_slice(),
            order: vec![(0, 0); members * depth.max(1)].into_boxed_slice(),
            written: 0,
            seen: vec![0; members].into_boxed_slice(),
            unchecked: vec![false; members].into_boxed_slice(),
        }
    }

    /// All members are in: sender s's first message will be `first_seq(s)`.
    pub(crate) fn start(&mut self, first_seq: impl Fn(usize) -> u32) {
        let k = self.members;
        for s in 0..k {
            let seq = first_seq(s);
            for r in 0..k {
                self.expected[r * k + s] = seq;
            }
        }
        self.written = 0;
        self.seen.fill(0);
        self.unchecked.fill(false);
    }

    /// A member failed: the room rejoins under a new epoch.
    pub(crate) fn reset(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        self.joined = 0;
    }

    /// Receiver `r` got message (`sender`, `seq`, `epoch`); the sender's
    /// messages in flight are `in_flight` (their keys from `.0`, `.1` of
    /// them).
    pub(crate) fn arrive(
        &mut self,
        r: usize,
        sender: u32,
        seq: u32,
        epoch: u32,
        in_flight: (u32, usize),
    ) -> Arrival {
        if epoch != self.epoch {
            return Arrival::Stale;
        }
        let s = sender as usize;
        if s >= self.members || self.joined < self.members {
            return Arrival::Extra;
        }
        let slot = &mut self.expected[r * self.members + s];
        let expected = *slot;
        let sent = seq.wrapping_sub(in_flight.0) < in_flight.1 as u32;
        if (seq.wrapping_sub(expected) as i32) < 0 || !sent {
            return Arrival::Extra;
        }
        *slot = seq.wrapping_add(1);
        Arrival::Deliver {
            skipped_from: expected,
            seq,
        }
    }

    /// Receiver `r`'s next delivery is (`sender`, `seq`): false if another
    /// receiver had a different message at that place in the room's order.
    pub(crate) fn in_room_order(&mut self, r: usize, sender: u32, seq: u32) -> bool {
        let n = self.seen[r];
        self.seen[r] += 1;
        if self.unchecked[r] {
            return true;
        }
        let size = self.order.len() as u64;
        let at = (n % size) as usize;
        if n == self.written {
            self.order[at] = (sender, seq);
            self.written += 1;
            return true;
        }
        if n + size < self.written {
            return true; // further behind than messages can be in flight
        }
        if self.order[at] == (sender, seq) {
            return true;
        }
        self.unchecked[r] = true;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_as_text() {
        let h = header(7, 0xdead_beef, 3);
        assert_eq!(&h, b"00000007deadbeef00000003");
        assert_eq!(parse(&h), Some((7, 0xdead_beef, 3)));
        let mut bad = h;
        bad[5] = b'G';
        assert_eq!(parse(&bad), None);
    }

    #[test]
    fn room_targets_get_their_index_only_when_there_are_several() {
        assert_eq!(target("/ws/room?name=R", 3, 1), "/ws/room?name=R");
        assert_eq!(target("/ws/room?name=R", 3, 5), "/ws/room?name=R-3");
        assert_eq!(target("/ws/room?a=1&name=R", 0, 2), "/ws/room?a=1&name=R-0");
        assert_eq!(name("/ws/room?a=1&name=R"), Some("R"));
        assert_eq!(name("/ws/room?name="), None);
        assert_eq!(name("/ws/room"), None);
    }

    #[test]
    fn a_receiver_fails_skipped_duplicate_and_unsent_messages() {
        let mut room = Room::new(0, 2, 4);
        room.joined = 2;
        room.start(|s| [10, 20][s]);
        // Sender 0 has 10..14 in flight.
        let flight = (10, 4);
        let d = |seq| Arrival::Deliver {
            skipped_from: seq,
            seq,
        };
        assert_eq!(room.arrive(1, 0, 10, 0, flight), d(10));
        assert_eq!(
            room.arrive(1, 0, 12, 0, flight),
            Arrival::Deliver {
                skipped_from: 11,
                seq: 12
            }
        );
        assert_eq!(room.arrive(1, 0, 11, 0, flight), Arrival::Extra, "late");
        assert_eq!(room.arrive(1, 0, 12, 0, flight), Arrival::Extra, "twice");
        assert_eq!(room.arrive(1, 0, 14, 0, flight), Arrival::Extra, "unsent");
        assert_eq!(
            room.arrive(1, 2, 20, 0, flight),
            Arrival::Extra,
            "no member"
        );
        assert_eq!(room.arrive(0, 0, 10, 1, flight), Arrival::Stale);
        // Receiver 0 is independent of receiver 1.
        assert_eq!(room.arrive(0, 0, 10, 0, flight), d(10));
        room.reset();
        assert_eq!(
            room.arrive(0, 0, 11, 1, flight),
            Arrival::Extra,
            "not joined"
        );
    }

    #[test]
    fn the_room_order_is_the_first_receivers_and_a_break_is_counted_once() {
        let mut room = Room::new(0, 3, 2);
        let seq = [(0, 1), (1, 1), (0, 2), (2, 1)];
        for &(s, q) in &seq {
            assert!(room.in_room_order(0, s, q));
        }
        for &(s, q) in &seq {
            assert!(room.in_room_order(1, s, q));
        }
        assert!(room.in_room_order(2, 0, 1));
        assert!(!room.in_room_order(2, 0, 2), "swapped with (1, 1)");
        assert!(room.in_room_order(2, 1, 1), "not checked again");
    }
}
