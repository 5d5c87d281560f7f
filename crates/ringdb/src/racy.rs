//! Page bytes another thread may be writing, read soundly: atomic word loads, every offset
//! bounds-checked (see `buffer/view.rs` for why this is sound and how a read is validated).
//!
//! A [`RacyPage`] never hands out `&[u8]` of the page: each accessor loads the aligned
//! `AtomicU64` words that hold the bytes asked for and returns a value, or `None` when the
//! bytes lie outside the page. What it returns may be torn (half an old value, half a new
//! one); callers use nothing before the page's version confirms it.

use std::cmp::Ordering as KeyOrdering;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes per word a [`RacyPage`] loads.
pub(crate) const WORD_BYTES: usize = 8;

/// A page's bytes read with atomic word loads, every offset bounds-checked: what another
/// thread may be writing, read soundly (see the module documentation). A read outside the
/// page is `None`.
pub struct RacyPage<'v> {
    /// The page's first word: 8-aligned, `len` bytes that stay allocated for `'v`.
    words: *const AtomicU64,
    len: usize,
    _memory: std::marker::PhantomData<&'v [AtomicU64]>,
}

impl<'v> RacyPage<'v> {
    /// The `len` bytes at `start`.
    ///
    /// # Safety
    /// `start` is 8-aligned, `len` is a multiple of 8, and the `len` bytes from `start` stay
    /// allocated (mapped) for `'v`. Anyone may write them meanwhile, the kernel included.
    pub(crate) unsafe fn from_raw(start: *const u8, len: usize) -> RacyPage<'v> {
        assert!(
            (start as usize).is_multiple_of(WORD_BYTES) && len.is_multiple_of(WORD_BYTES),
            "a racy page must be word-aligned"
        );
        RacyPage {
            words: start.cast(),
            len,
            _memory: std::marker::PhantomData,
        }
    }

    /// A page over `words` (for tests and fuzzing: any memory another thread may write
    /// through the same atomics).
    pub fn over(words: &'v [AtomicU64]) -> RacyPage<'v> {
        // SAFETY: a slice of `AtomicU64` is 8-aligned, `8 * len` bytes long and borrowed for
        // `'v`.
        unsafe { RacyPage::from_raw(words.as_ptr().cast(), words.len() * WORD_BYTES) }
    }

    /// Bytes in the page.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the page has no bytes (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Word `index` (< len / 8).
    #[inline(always)]
    fn word(&self, index: usize) -> u64 {
        assert!(index < self.len / WORD_BYTES, "word {index} of a page");
        // SAFETY: `words` is 8-aligned and `len` bytes stay allocated for `'v` (the contract
        // of `from_raw`); `index` is inside them (asserted). The load is atomic: a racing
        // write (by the shard, or the kernel's DMA into a reused frame) gives some value,
        // which the caller validates before using it.
        unsafe { (*self.words.add(index)).load(Ordering::Relaxed) }
    }

    /// The 8 bytes at `offset` as a little-endian integer.
    #[inline(always)]
    pub fn u64_le(&self, offset: usize) -> Option<u64> {
        if offset.checked_add(WORD_BYTES)? > self.len {
            return None;
        }
        let (index, shift) = (offset / WORD_BYTES, offset % WORD_BYTES);
        let low = self.word(index);
        if shift == 0 {
            return Some(u64::from_le(low));
        }
        // Two words: `offset + 8 <= len` keeps the second inside the page.
        let high = self.word(index + 1);
        let bits = (shift * 8) as u32;
        Some((u64::from_le(low) >> bits) | (u64::from_le(high) << (64 - bits)))
    }

    /// The 2 bytes at `offset`, little-endian.
    #[inline(always)]
    pub fn u16_le(&self, offset: usize) -> Option<u16> {
        Some(self.small(offset, 2)? as u16)
    }

    /// The 4 bytes at `offset`, little-endian.
    #[inline(always)]
    pub fn u32_le(&self, offset: usize) -> Option<u32> {
        Some(self.small(offset, 4)? as u32)
    }

    /// The byte at `offset`.
    #[inline(always)]
    pub fn u8(&self, offset: usize) -> Option<u8> {
        Some(self.small(offset, 1)? as u8)
    }

    /// `bytes` (1..=8) bytes at `offset`, little-endian, from the one or two words that hold
    /// them.
    #[inline(always)]
    fn small(&self, offset: usize, bytes: usize) -> Option<u64> {
        debug_assert!((1..=WORD_BYTES).contains(&bytes));
        if offset.checked_add(bytes)? > self.len {
            return None;
        }
        let (index, shift) = (offset / WORD_BYTES, offset % WORD_BYTES);
        let mut value = u64::from_le(self.word(index)) >> (shift * 8);
        if shift + bytes > WORD_BYTES {
            value |= u64::from_le(self.word(index + 1)) << ((WORD_BYTES - shift) * 8);
        }
        let mask = if bytes == WORD_BYTES {
            u64::MAX
        } else {
            (1u64 << (bytes * 8)) - 1
        };
        Some(value & mask)
    }

    /// Appends the `len` bytes at `offset` to `out`.
    pub fn copy_to(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        let base = out.len();
        out.resize(base + len, 0);
        let dest = &mut out[base..];
        // The head, up to the first word boundary.
        let within = offset % WORD_BYTES;
        let head = if within == 0 {
            0
        } else {
            (WORD_BYTES - within).min(len)
        };
        if head > 0 {
            let word = u64::from_le(self.word(offset / WORD_BYTES)).to_le_bytes();
            dest[..head].copy_from_slice(&word[within..within + head]);
        }
        // Whole words, one load and one 8-byte store each (no call per word).
        let first_word = (offset + head) / WORD_BYTES;
        let mut words = dest[head..].chunks_exact_mut(WORD_BYTES);
        for (slot, index) in (&mut words).zip(first_word..) {
            slot.copy_from_slice(&u64::from_le(self.word(index)).to_le_bytes());
        }
        // The tail, in the word after the last whole one.
        let tail = words.into_remainder();
        if !tail.is_empty() {
            let index = (end - tail.len()) / WORD_BYTES;
            let word = u64::from_le(self.word(index)).to_le_bytes();
            let tail_len = tail.len();
            tail.copy_from_slice(&word[..tail_len]);
        }
        Some(())
    }

    /// How the `len` bytes at `offset` order against `key` (memcmp order, as
    /// `stored.cmp(key)`).
    pub fn compare(&self, offset: usize, len: usize, key: &[u8]) -> Option<KeyOrdering> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        let common = len.min(key.len());
        let mut done = 0;
        // Bounded: `done` grows by up to 8 each step, to `common`.
        while done < common {
            let take = (common - done).min(WORD_BYTES);
            let stored = self.small(offset + done, take)?.to_le_bytes();
            match stored[..take].cmp(&key[done..done + take]) {
                KeyOrdering::Equal => done += take,
                other => return Some(other),
            }
        }
        Some(len.cmp(&key.len()))
    }
}

#[cfg(any(test, feature = "__internal"))]
/// `bytes` (a multiple of 8 long) as atomic words, for [`RacyPage::over`] in tests and fuzzing.
pub fn words_of(bytes: &[u8]) -> Vec<AtomicU64> {
    assert!(bytes.len().is_multiple_of(WORD_BYTES), "whole words");
    bytes
        .chunks_exact(WORD_BYTES)
        .map(|w| AtomicU64::new(u64::from_le_bytes(w.try_into().expect("8 bytes"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every accessor reads what a plain slice holds, and `None` outside the page.
        #[test]
        fn reads_as_a_slice_does(
            bytes in proptest::collection::vec(any::<u8>(), 64..=64),
            offset in 0usize..80,
            len in 0usize..40,
            key in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let words = words_of(&bytes);
            let page = RacyPage::over(&words);
            let at = |n: usize| bytes.get(offset..offset + n);
            prop_assert_eq!(page.u8(offset), at(1).map(|b| b[0]));
            prop_assert_eq!(page.u16_le(offset), at(2).map(|b| u16::from_le_bytes(b.try_into().unwrap())));
            prop_assert_eq!(page.u32_le(offset), at(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())));
            prop_assert_eq!(page.u64_le(offset), at(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())));
            let mut out = vec![7u8];
            let copied = page.copy_to(offset, len, &mut out);
            match at(len) {
                Some(want) => {
                    prop_assert!(copied.is_some());
                    prop_assert_eq!(&out[1..], want);
                }
                None => prop_assert!(copied.is_none()),
            }
            prop_assert_eq!(page.compare(offset, len, &key), at(len).map(|s| s.cmp(&key[..])));
        }
    }
}
