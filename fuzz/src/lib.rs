//! What the fuzz targets share.

/// How a target splits its input into reads: sizes from 1 to `max` bytes,
/// at most 64 of them, from a small xorshift generator seeded by `seed`
/// (the input's first byte), so that a crash replays with the same splits.
pub fn read_sizes(seed: u8, len: usize, max: u32) -> Vec<usize> {
    let mut x = u32::from(seed) | 0x9e37_7900;
    (0..len.clamp(1, 64))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % max) as usize + 1
        })
        .collect()
}
