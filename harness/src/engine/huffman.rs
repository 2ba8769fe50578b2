//! HPACK's Huffman strings (RFC 7541 §5.2, Appendix B), decoded into a
//! buffer the caller reuses, without allocating.
//!
//! Written here rather than taken whole from `httlib-huffman`, whose code
//! table this uses: its `decode` allocates on every string (a `vec!` in
//! its padding check), and a server that Huffman-codes a field of every
//! response (hyper does) made that one allocation per HTTP/2 response.
//! The code is canonical: the codes of one length are consecutive, so a
//! symbol is found by its length's first code and count (checked by a
//! test against every symbol of the table).

use std::sync::LazyLock;

use httlib_huffman::encoder::table::ENCODE_TABLE;

/// The longest code (RFC 7541 Appendix B).
const MAX_LEN: usize = 30;
/// The end-of-string symbol: never valid inside a string.
const EOS: u16 = 256;

/// Why a string does not decode.
#[derive(Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// Bits that are no code, the EOS symbol, or padding that is longer
    /// than 7 bits or not all ones.
    Invalid,
}

struct Canonical {
    /// Per code length: the first code, how many codes, and where their
    /// symbols start in `symbols`.
    first: [u32; MAX_LEN + 1],
    count: [u32; MAX_LEN + 1],
    start: [u16; MAX_LEN + 1],
    /// Symbols ordered by (length, code).
    symbols: [u16; 257],
}

static TABLE: LazyLock<Canonical> = LazyLock::new(|| {
    let mut order: Vec<u16> = (0..257).collect();
    order.sort_by_key(|&s| {
        let (len, code) = ENCODE_TABLE[usize::from(s)];
        (len, code)
    });
    let mut t = Canonical {
        first: [0; MAX_LEN + 1],
        count: [0; MAX_LEN + 1],
        start: [0; MAX_LEN + 1],
        symbols: [0; 257],
    };
    for (i, &s) in order.iter().enumerate() {
        let (len, code) = ENCODE_TABLE[usize::from(s)];
        let len = usize::from(len);
        if t.count[len] == 0 {
            t.first[len] = code;
            t.start[len] = i as u16;
        }
        t.count[len] += 1;
        t.symbols[i] = s;
    }
    t
});

/// Appends the decoding of `src` to `dst`.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let t = &*TABLE;
    // Bits not yet decoded, the newest lowest; at most 30 + 8 of them.
    let mut acc: u64 = 0;
    let mut bits: usize = 0;
    let mut input = src.iter();
    loop {
        while bits <= MAX_LEN {
            match input.next() {
                Some(&b) => {
                    acc = (acc << 8) | u64::from(b);
                    bits += 8;
                }
                None => break,
            }
        }
        if bits == 0 {
            return Ok(());
        }
        match symbol(t, acc, bits) {
            Some((sym, len)) if sym != EOS => {
                dst.push(sym as u8);
                bits -= len;
                acc &= (1u64 << bits) - 1;
            }
            Some(_) => return Err(HuffmanError::Invalid),
            // What is left must be padding: under 8 bits, all ones (a
            // prefix of EOS).
            None if bits < 8 && acc == (1u64 << bits) - 1 => return Ok(()),
            None => return Err(HuffmanError::Invalid),
        }
    }
}

/// The symbol whose code begins the `bits` bits in `acc`, and its length.
fn symbol(t: &Canonical, acc: u64, bits: usize) -> Option<(u16, usize)> {
    for len in 5..=MAX_LEN.min(bits) {
        if t.count[len] == 0 {
            continue;
        }
        let code = ((acc >> (bits - len)) & ((1u64 << len) - 1)) as u32;
        let offset = code.wrapping_sub(t.first[len]);
        if offset < t.count[len] {
            return Some((t.symbols[usize::from(t.start[len]) + offset as usize], len));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes with the same table (the test's side of a round trip).
    fn encode(src: &[u8]) -> Vec<u8> {
        let (mut acc, mut bits, mut out) = (0u64, 0usize, Vec::new());
        for &b in src {
            let (len, code) = ENCODE_TABLE[usize::from(b)];
            acc = (acc << len) | u64::from(code);
            bits += usize::from(len);
            while bits >= 8 {
                out.push((acc >> (bits - 8)) as u8);
                bits -= 8;
                acc &= (1u64 << bits) - 1;
            }
        }
        if bits > 0 {
            let pad = 8 - bits;
            out.push(((acc << pad) | ((1 << pad) - 1)) as u8);
        }
        out
    }

    #[test]
    fn the_code_is_canonical_so_lengths_and_first_codes_find_every_symbol() {
        for (s, &(len, code)) in ENCODE_TABLE.iter().enumerate() {
            let bits = usize::from(len);
            assert_eq!(
                symbol(&TABLE, u64::from(code), bits),
                Some((s as u16, bits)),
                "symbol {s}"
            );
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        decode(&encode(&all), &mut out).unwrap();
        assert_eq!(out, all);
    }

    #[test]
    fn rfc7541_examples_decode() {
        // C.4.1 "www.example.com", C.6.1 a date.
        let mut out = Vec::new();
        decode(
            &[
                0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
            ],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, b"www.example.com");
        out.clear();
        let date = [
            0xd0, 0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04, 0x0b,
            0x81, 0x66, 0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff,
        ];
        decode(&date, &mut out).unwrap();
        assert_eq!(out, b"Mon, 21 Oct 2013 20:13:21 GMT");
    }

    #[test]
    fn bad_padding_and_eos_are_refused() {
        let mut out = Vec::new();
        // "0" is 00000 (5 bits): padded with zeros instead of ones.
        assert_eq!(decode(&[0x00], &mut out), Err(HuffmanError::Invalid));
        // A whole byte of ones after a symbol is 8 bits of padding.
        assert_eq!(decode(&[0x07, 0xff], &mut out), Err(HuffmanError::Invalid));
        // EOS (30 ones) inside a string.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut out),
            Err(HuffmanError::Invalid)
        );
        // The empty string is valid.
        assert_eq!(decode(&[], &mut out), Ok(()));
    }
}
