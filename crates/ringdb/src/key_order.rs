//! Key comparison for node searches without a library call per step.
//!
//! A binary search over a node compares the search key with about log2(count) stored keys. Through
//! `<[u8] as Ord>` each comparison is a call to `memcmp` (which led the profile of an in-memory
//! point read for 8-byte keys: docs/results/issue15-cpu-per-op.md). Most keys differ within their
//! first eight bytes, so the search key's first eight bytes are loaded once as a big-endian integer
//! (its *head*, zero-padded when shorter), each stored key's head the same way, and two integers
//! are compared; only keys whose heads are equal fall back to the full comparison.
//!
//! Why zero padding keeps the order: for heads taken from the first `min(len, 8)` bytes and
//! zero-padded, `head(a) < head(b)` implies `a < b` in memcmp order (the first differing byte
//! within the first eight decides, and a padding zero is never greater than a real byte).
//! Equal heads decide nothing (`"ab"` and `"ab\0"` share one), so then the whole keys are
//! compared.

use std::cmp::Ordering;

/// Bytes of a key's head.
pub(crate) const HEAD_BYTES: usize = 8;

/// The first eight bytes of `key` as a big-endian integer, zero-padded: its *head*.
#[inline(always)]
pub(crate) fn key_head(key: &[u8]) -> u64 {
    if key.len() >= HEAD_BYTES {
        u64::from_be_bytes(key[..HEAD_BYTES].try_into().expect("eight bytes"))
    } else {
        let mut bytes = [0u8; HEAD_BYTES];
        bytes[..key.len()].copy_from_slice(key);
        u64::from_be_bytes(bytes)
    }
}

/// How `a` orders against `b`, two slices of one length (memcmp order): as two heads when
/// they fit one (no library call for the short prefixes of a node's keys).
#[inline(always)]
pub(crate) fn compare_same_length(a: &[u8], b: &[u8]) -> Ordering {
    debug_assert_eq!(a.len(), b.len(), "slices of one length");
    if a.len() <= HEAD_BYTES {
        // Equal lengths: zero padding cannot tie two different slices.
        key_head(a).cmp(&key_head(b))
    } else {
        a.cmp(b)
    }
}

/// A search key prepared for many comparisons (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyProbe<'a> {
    key: &'a [u8],
    head: u64,
}

impl<'a> KeyProbe<'a> {
    /// Prepares `key`.
    #[inline(always)]
    pub(crate) fn new(key: &'a [u8]) -> KeyProbe<'a> {
        KeyProbe {
            key,
            head: key_head(key),
        }
    }

    /// How `stored` orders against the probe's key (memcmp order, as `stored.cmp(key)`).
    #[inline(always)]
    #[cfg(test)]
    pub(crate) fn order_of(&self, stored: &[u8]) -> Ordering {
        self.order_of_head(key_head(stored), stored.len(), || stored)
    }

    /// How a stored key orders against the probe's key, from its head and length (a node's
    /// slot has both); `stored` gives the whole key, read only when the heads are equal and
    /// one of the keys is longer than a head.
    #[inline(always)]
    pub(crate) fn order_of_head<'s>(
        &self,
        stored_head: u64,
        stored_len: usize,
        stored: impl FnOnce() -> &'s [u8],
    ) -> Ordering {
        if stored_head != self.head {
            return stored_head.cmp(&self.head);
        }
        if stored_len <= HEAD_BYTES && self.key.len() <= HEAD_BYTES {
            // Equal heads of keys no longer than a head: one is a prefix of the other.
            return stored_len.cmp(&self.key.len());
        }
        stored().cmp(self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slices_of_one_length_compare_as_memcmp() {
        let cases: [(&[u8], &[u8]); 5] = [
            (b"", b""),
            (b"a\0", b"a\x01"),
            (b"key:0000", b"key:0000"),
            (b"\xff\0\0", b"\0\xff\xff"),
            (b"123456789", b"123456780"),
        ];
        for (a, b) in cases {
            assert_eq!(compare_same_length(a, b), a.cmp(b), "{a:?} vs {b:?}");
            assert_eq!(compare_same_length(b, a), b.cmp(a), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn padding_ties_are_broken_by_the_whole_key() {
        for (a, b) in [
            (&b"ab"[..], &b"ab\0"[..]),
            (b"", b"\0"),
            (b"12345678", b"12345678\0"),
            (b"1234567\0", b"12345678"),
            (b"abcdefgh1", b"abcdefgh2"),
        ] {
            assert_eq!(KeyProbe::new(b).order_of(a), a.cmp(b), "{a:?} vs {b:?}");
            assert_eq!(KeyProbe::new(a).order_of(b), b.cmp(a), "{b:?} vs {a:?}");
            assert_eq!(KeyProbe::new(a).order_of(a), Ordering::Equal);
        }
    }

    proptest! {
        /// The probe orders every pair as memcmp does, with keys drawn from few byte values
        /// so that shared prefixes, zeros and equal heads are common.
        #[test]
        fn orders_as_memcmp(
            a in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(255u8)], 0..20),
            b in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(255u8)], 0..20),
        ) {
            prop_assert_eq!(KeyProbe::new(&b).order_of(&a), a.as_slice().cmp(b.as_slice()));
        }
    }
}
