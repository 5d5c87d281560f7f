//! Byte strings packed end to end in one buffer: how a multi-get's keys travel to a shard and
//! its values come back.
//!
//! A multi-get of 16 keys used to send 16 key vectors to the shards and receive 16 value
//! vectors from them. Each was allocated on one thread and freed on another, and glibc's
//! allocator serves such frees under its arena lock once the freeing thread's cache of that
//! size is full: with eight client threads and two shards, 13% of the CPU went to waiting on
//! and waking that lock. Packed, a part is two allocations whatever its key count, and the
//! caller copies each value out on its own thread.

use std::ops::Range;

/// A list of byte strings, each present or absent, stored in one buffer.
#[derive(Debug, Default)]
pub(super) struct Packed {
    bytes: Vec<u8>,
    /// Per entry: its range in `bytes`, `None` where absent.
    spans: Vec<Option<Range<usize>>>,
}

impl Packed {
    /// An empty list with room for `entries` entries of `bytes` bytes in all.
    pub(super) fn with_capacity(entries: usize, bytes: usize) -> Packed {
        Packed {
            bytes: Vec::with_capacity(bytes),
            spans: Vec::with_capacity(entries),
        }
    }

    /// Appends an entry (`None`: absent).
    pub(super) fn push(&mut self, entry: Option<&[u8]>) {
        self.spans.push(None);
        self.set(self.spans.len() - 1, entry);
    }

    /// Replaces entry `index` (its old bytes stay unused in the buffer).
    pub(super) fn set(&mut self, index: usize, entry: Option<&[u8]>) {
        let span = entry.map(|bytes| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(bytes);
            start..self.bytes.len()
        });
        self.spans[index] = span;
    }

    /// Entry `index`.
    pub(super) fn get(&self, index: usize) -> Option<&[u8]> {
        self.spans[index]
            .as_ref()
            .map(|range| &self.bytes[range.clone()])
    }

    /// How many entries.
    pub(super) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there is no entry.
    pub(super) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The entries in their order.
    pub(super) fn iter(&self) -> impl Iterator<Item = Option<&[u8]>> + '_ {
        let bytes = &self.bytes;
        self.spans
            .iter()
            .map(move |span| span.as_ref().map(|range| &bytes[range.clone()]))
    }

    /// The present entries' bytes, in their order (absent ones skipped).
    pub(super) fn present(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_in_order_with_the_absent_ones_absent() {
        let mut packed = Packed::with_capacity(4, 8);
        packed.push(Some(b"ab"));
        packed.push(None);
        packed.push(Some(b""));
        packed.push(Some(b"cde"));
        assert_eq!(packed.len(), 4);
        let entries: Vec<_> = packed.iter().collect();
        assert_eq!(
            entries,
            vec![Some(&b"ab"[..]), None, Some(&b""[..]), Some(&b"cde"[..])]
        );
        assert_eq!(packed.present().count(), 3);
        packed.set(1, Some(b"f"));
        packed.set(0, None);
        assert_eq!(packed.get(1), Some(&b"f"[..]));
        assert_eq!(packed.get(0), None);
        assert_eq!(packed.get(3), Some(&b"cde"[..]));
        assert!(Packed::default().is_empty());
    }
}
