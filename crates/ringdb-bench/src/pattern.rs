//! Deterministic block contents: every 8-byte word is a hash of its absolute file offset and a
//! seed, so any block can be regenerated and checked bit-exactly by any engine.

#[inline]
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Fills `buf` with the pattern for the bytes at `offset..offset + buf.len()`.
pub fn fill(buf: &mut [u8], offset: u64, seed: u64) {
    debug_assert_eq!(offset % 8, 0);
    for (i, word) in buf.chunks_exact_mut(8).enumerate() {
        let v = splitmix64((offset + 8 * i as u64) ^ seed.rotate_left(17));
        word.copy_from_slice(&v.to_le_bytes());
    }
}

/// Whether `buf` holds exactly the pattern for `offset` and `seed`.
pub fn check(buf: &[u8], offset: u64, seed: u64) -> bool {
    buf.chunks_exact(8).enumerate().all(|(i, word)| {
        let v = splitmix64((offset + 8 * i as u64) ^ seed.rotate_left(17));
        word == v.to_le_bytes()
    })
}

/// A small fast PRNG for offsets (xorshift64*), seeded per job.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(splitmix64(seed) | 1)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_round_trips_and_detects_flips() {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 8192, 7);
        assert!(check(&b, 8192, 7));
        assert!(!check(&b, 4096, 7), "offset is part of the pattern");
        assert!(!check(&b, 8192, 8), "seed is part of the pattern");
        b[100] ^= 1;
        assert!(!check(&b, 8192, 7));
    }

    #[test]
    fn rng_below_stays_in_range() {
        let mut r = Rng::new(1);
        assert!((0..10_000).all(|_| r.below(17) < 17));
    }
}
