//! The common page header: the first [`HEADER_SIZE`] bytes of every page in the data file.
//!
//! # Layout (little-endian, fixed offsets)
//!
//! ```text
//! offset size field        meaning
//!      0    4 checksum     CRC32C of the whole page, computed with this field read as zero
//!      4    1 magic        FORMAT_MAGIC: a ringdb page of this format version (never 0)
//!      5    1 page_type    PageType: 1 free, 2 meta, 3 leaf, 4 inner, 5 catalog, 6 free list
//!                          (0: never initialised)
//!      6    2 level        B+tree level: 0 for leaves, >= 1 for inner nodes (height above leaves)
//!      8    8 page_id      the page's own number, set by `seal`: catches misdirected writes/reads
//!     16    8 lsn          LSN of the last log record applied to this page (redo is idempotent)
//!     24    2 count        nodes: number of slots
//!     26    1 page_shift   log2(page size) the page was written with (catches a wrong page size)
//!     27    1 flags        reserved, 0
//!     28    4 data_start   nodes: lowest byte of the record area (= page size when empty)
//!     32    4 frag         nodes: dead bytes inside the record area (reclaimed by compaction)
//!     36    2 head_skip    nodes: bytes every key of the node begins with, left out of the
//!                          slots' key heads (0 in format 0xB2, whose bytes 36..40 were reserved)
//!     38    2 reserved     0
//!     40    8 link         inner nodes: the upper (rightmost) child; leaves: reserved, 0
//!     48      (body)       nodes: the slot array, then free space, then records up to the end
//! ```
//!
//! The node fields (`count` .. `link`) belong to [`crate::node`]; other page types may reuse
//! the bytes from offset 24 on as they like (meta page) but keep the first 24.
//!
//! A page that was never written reads back as all zeros; [`is_zeroed`] recognises it and
//! [`verify`] reports it as [`PageError::Zeroed`] rather than as a checksum mismatch, so that
//! recovery can tell "never written" from "torn".
//!
//! The magic byte and the page type are never 0, so a zero page can never pass as valid even if
//! its checksum were (CRC32C of zeros is not zero, but no need to rely on that).

use thiserror::Error;

/// Bytes of the header; the body starts here.
pub const HEADER_SIZE: usize = 48;
/// The smallest page size supported (keeps at least 4 records of the largest size per node).
pub const MIN_PAGE_SIZE: usize = 1024;
/// The largest page size supported: in-page offsets must fit the slots' `u16`.
pub const MAX_PAGE_SIZE: usize = 65536;
/// Format byte at offset 4; change it when the on-page format changes (0xB3: a node's key
/// heads start after the prefix all its keys share, `head_skip`; 0xB2: node slots carry a key
/// head, `node.rs`; 0xB1 files are refused as another format version).
pub const FORMAT_MAGIC: u8 = 0xB3;
/// The previous format, still read: its pages are 0xB3 pages whose `head_skip` is 0 (the
/// bytes were reserved and zero), and they are written back as 0xB3.
pub const FORMAT_MAGIC_B2: u8 = 0xB2;

// Field offsets (see the layout above).
pub(crate) const OFF_CHECKSUM: usize = 0;
pub(crate) const OFF_MAGIC: usize = 4;
pub(crate) const OFF_TYPE: usize = 5;
pub(crate) const OFF_LEVEL: usize = 6;
pub(crate) const OFF_PAGE_ID: usize = 8;
pub(crate) const OFF_LSN: usize = 16;
pub(crate) const OFF_COUNT: usize = 24;
pub(crate) const OFF_SHIFT: usize = 26;
#[cfg(any(test, feature = "__internal"))]
pub(crate) const OFF_FLAGS: usize = 27;
pub(crate) const OFF_DATA_START: usize = 28;
pub(crate) const OFF_FRAG: usize = 32;
pub(crate) const OFF_HEAD_SKIP: usize = 36;
#[cfg(any(test, feature = "__internal"))]
pub(crate) const OFF_RESERVED: usize = 38;
pub(crate) const OFF_LINK: usize = 40;

const _: () = assert!(OFF_LINK + 8 == HEADER_SIZE);
const _: () = assert!(MAX_PAGE_SIZE <= u16::MAX as usize + 1);

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PageType {
    /// On the free list.
    Free = 1,
    /// The meta page (tree root, checkpoint, ...).
    Meta = 2,
    /// A B+tree leaf.
    Leaf = 3,
    /// A B+tree inner node.
    Inner = 4,
    /// The table catalog: every named table's id and tree root (see `catalog.rs`).
    Catalog = 5,
    /// A page of the free-list chain (see `freelist.rs`).
    FreeList = 6,
}

impl PageType {
    pub fn from_u8(v: u8) -> Option<PageType> {
        match v {
            1 => Some(PageType::Free),
            2 => Some(PageType::Meta),
            3 => Some(PageType::Leaf),
            4 => Some(PageType::Inner),
            5 => Some(PageType::Catalog),
            6 => Some(PageType::FreeList),
            _ => None,
        }
    }
}

/// Why a page read from disk is not what it should be. Every message names the page.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PageError {
    /// The buffer's length is not a page size.
    #[error("page {page}: buffer of {len} bytes is not a page size (a power of two, {MIN_PAGE_SIZE}..={MAX_PAGE_SIZE})")]
    BadSize {
        /// The page.
        page: u64,
        /// The buffer's length in bytes.
        len: usize,
    },
    /// The page is all zeros: never written.
    #[error("page {page} was never written (all zeros)")]
    Zeroed {
        /// The page.
        page: u64,
    },
    /// The checksum does not match the contents: a torn or corrupted write.
    #[error("page {page}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): torn or corrupted write")]
    Checksum {
        /// The page.
        page: u64,
        /// The checksum in the header.
        stored: u32,
        /// The checksum of the contents.
        computed: u32,
    },
    /// Not this format's magic byte: not a ringdb page, or another format version.
    #[error("page {page}: bad magic {found:#04x} (expected {expected:#04x}): not a ringdb page, or another format version")]
    BadMagic {
        /// The page.
        page: u64,
        /// The magic byte found.
        found: u8,
        /// The magic byte this build writes.
        expected: u8,
    },
    /// A page type this build does not know.
    #[error("page {page}: unknown page type {found}")]
    BadType {
        /// The page.
        page: u64,
        /// The type byte found.
        found: u8,
    },
    /// The page was written with another page size.
    #[error("page {page}: written with 2^{written_shift}-byte pages, read as {len}-byte pages")]
    WrongPageSize {
        /// The page.
        page: u64,
        /// The page size it was written with, as a power of two.
        written_shift: u8,
        /// The page size it was read with, in bytes.
        len: usize,
    },
    /// The page holds another page's id: a misdirected write or read.
    #[error("page {expected}: holds page {found} instead (misdirected write or read)")]
    WrongPageId {
        /// The page that was read.
        expected: u64,
        /// The id the page holds.
        found: u64,
    },
}

#[cfg(any(test, feature = "__internal"))]
/// All header fields, decoded. For hot paths use the single-field accessors instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PageHeader {
    pub checksum: u32,
    pub magic: u8,
    /// Raw; see [`PageType::from_u8`].
    pub page_type: u8,
    pub level: u16,
    pub page_id: u64,
    pub lsn: u64,
    pub count: u16,
    pub page_shift: u8,
    pub flags: u8,
    pub data_start: u32,
    pub frag: u32,
    pub head_skip: u16,
    pub link: u64,
}

#[cfg(any(test, feature = "__internal"))]
impl PageHeader {
    /// Decodes the header of `page` (at least [`HEADER_SIZE`] bytes); validates nothing.
    pub fn read(page: &[u8]) -> PageHeader {
        PageHeader {
            checksum: get_u32(page, OFF_CHECKSUM),
            magic: page[OFF_MAGIC],
            page_type: page[OFF_TYPE],
            level: get_u16(page, OFF_LEVEL),
            page_id: get_u64(page, OFF_PAGE_ID),
            lsn: get_u64(page, OFF_LSN),
            count: get_u16(page, OFF_COUNT),
            page_shift: page[OFF_SHIFT],
            flags: page[OFF_FLAGS],
            data_start: get_u32(page, OFF_DATA_START),
            frag: get_u32(page, OFF_FRAG),
            head_skip: get_u16(page, OFF_HEAD_SKIP),
            link: get_u64(page, OFF_LINK),
        }
    }

    /// Encodes every field into `page` (the reserved bytes become 0).
    pub fn write(&self, page: &mut [u8]) {
        put_u32(page, OFF_CHECKSUM, self.checksum);
        page[OFF_MAGIC] = self.magic;
        page[OFF_TYPE] = self.page_type;
        put_u16(page, OFF_LEVEL, self.level);
        put_u64(page, OFF_PAGE_ID, self.page_id);
        put_u64(page, OFF_LSN, self.lsn);
        put_u16(page, OFF_COUNT, self.count);
        page[OFF_SHIFT] = self.page_shift;
        page[OFF_FLAGS] = self.flags;
        put_u32(page, OFF_DATA_START, self.data_start);
        put_u32(page, OFF_FRAG, self.frag);
        put_u16(page, OFF_HEAD_SKIP, self.head_skip);
        put_u16(page, OFF_RESERVED, 0);
        put_u64(page, OFF_LINK, self.link);
    }

    /// The page type, if the byte names one.
    pub fn page_type(&self) -> Option<PageType> {
        PageType::from_u8(self.page_type)
    }
}

/// Whether `len` is a supported page size.
pub fn valid_page_size(len: usize) -> bool {
    len.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&len)
}

/// Clears the whole page and writes a fresh header of type `ty` (page id and LSN 0: `seal`
/// sets the id, the log sets the LSN). Clearing the body too means no stale bytes of a
/// previous tenant of the frame ever reach the disk.
pub fn init(page: &mut [u8], ty: PageType) {
    assert!(valid_page_size(page.len()), "bad page size {}", page.len());
    page.fill(0);
    page[OFF_MAGIC] = FORMAT_MAGIC;
    page[OFF_TYPE] = ty as u8;
    page[OFF_SHIFT] = page.len().trailing_zeros() as u8;
}

/// Whether the page is all zeros, i.e. was never written.
pub fn is_zeroed(page: &[u8]) -> bool {
    let mut words = page.chunks_exact(8);
    words.all(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

/// CRC32C of the whole page with the checksum field read as zero.
pub fn compute_checksum(page: &[u8]) -> u32 {
    const ZERO: [u8; 4] = [0; 4];
    crc32c::crc32c_append(crc32c::crc32c(&ZERO), &page[OFF_CHECKSUM + 4..])
}

/// Prepares a page for writing: stamps its id (and the page size) and its checksum. The page
/// must have been initialised ([`init`], `node::NodeMut::init_leaf`, ...).
pub fn seal(page: &mut [u8], page_id: u64) {
    debug_assert!(valid_page_size(page.len()), "bad page size {}", page.len());
    debug_assert!(
        page[OFF_MAGIC] == FORMAT_MAGIC || page[OFF_MAGIC] == FORMAT_MAGIC_B2,
        "sealing uninitialised page {page_id}"
    );
    // A page read in the previous format is written in this one (its head skip is 0).
    page[OFF_MAGIC] = FORMAT_MAGIC;
    debug_assert!(
        PageType::from_u8(page[OFF_TYPE]).is_some(),
        "sealing page {page_id} of unknown type {}",
        page[OFF_TYPE]
    );
    put_u64(page, OFF_PAGE_ID, page_id);
    page[OFF_SHIFT] = page.len().trailing_zeros() as u8;
    let sum = compute_checksum(page);
    put_u32(page, OFF_CHECKSUM, sum);
}

/// Checks a page just read from disk: size, never-written, checksum, magic, type, page size and
/// page id, in that order (the checksum first, since a torn page can have any bytes elsewhere).
pub fn verify(page: &[u8], expected_id: u64) -> Result<(), PageError> {
    let page_id = expected_id;
    if !valid_page_size(page.len()) {
        return Err(PageError::BadSize {
            page: page_id,
            len: page.len(),
        });
    }
    if is_zeroed(page) {
        return Err(PageError::Zeroed { page: page_id });
    }
    let stored = get_u32(page, OFF_CHECKSUM);
    let computed = compute_checksum(page);
    if stored != computed {
        return Err(PageError::Checksum {
            page: page_id,
            stored,
            computed,
        });
    }
    check_header(page, page_id)?;
    let found = get_u64(page, OFF_PAGE_ID);
    if found != expected_id {
        return Err(PageError::WrongPageId {
            expected: expected_id,
            found,
        });
    }
    Ok(())
}

/// Magic, type and page size of a page of any origin (no checksum); `page_id` is for messages.
pub fn check_header(page: &[u8], page_id: u64) -> Result<PageType, PageError> {
    if !valid_page_size(page.len()) {
        return Err(PageError::BadSize {
            page: page_id,
            len: page.len(),
        });
    }
    if page[OFF_MAGIC] != FORMAT_MAGIC && page[OFF_MAGIC] != FORMAT_MAGIC_B2 {
        return Err(PageError::BadMagic {
            page: page_id,
            found: page[OFF_MAGIC],
            expected: FORMAT_MAGIC,
        });
    }
    let Some(ty) = PageType::from_u8(page[OFF_TYPE]) else {
        return Err(PageError::BadType {
            page: page_id,
            found: page[OFF_TYPE],
        });
    };
    let shift = page[OFF_SHIFT];
    if u32::from(shift) != page.len().trailing_zeros() {
        return Err(PageError::WrongPageSize {
            page: page_id,
            written_shift: shift,
            len: page.len(),
        });
    }
    Ok(ty)
}

/// The page type byte, decoded.
pub fn page_type(page: &[u8]) -> Option<PageType> {
    PageType::from_u8(page[OFF_TYPE])
}

/// The page id stamped by the last `seal`.
pub fn page_id(page: &[u8]) -> u64 {
    get_u64(page, OFF_PAGE_ID)
}

/// The page LSN.
pub fn lsn(page: &[u8]) -> u64 {
    get_u64(page, OFF_LSN)
}

/// Sets the page LSN (after applying a log record to the page).
pub fn set_lsn(page: &mut [u8], lsn: u64) {
    put_u64(page, OFF_LSN, lsn);
}

// Little-endian field access. Out-of-range offsets panic: callers pass header offsets or
// offsets they have bounds-checked.

#[inline]
pub(crate) fn get_u16(page: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(page[off..off + 2].try_into().expect("2 bytes"))
}

#[inline]
pub(crate) fn get_u32(page: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(page[off..off + 4].try_into().expect("4 bytes"))
}

#[inline]
pub(crate) fn get_u64(page: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(page[off..off + 8].try_into().expect("8 bytes"))
}

#[inline]
pub(crate) fn put_u16(page: &mut [u8], off: usize, v: u16) {
    page[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u32(page: &mut [u8], off: usize, v: u32) {
    page[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u64(page: &mut [u8], off: usize, v: u64) {
    page[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(size: usize) -> Vec<u8> {
        let mut p = vec![0xAAu8; size];
        init(&mut p, PageType::Leaf);
        p[100] = 7;
        p
    }

    #[test]
    fn seal_then_verify() {
        for size in [1024, 4096, 65536] {
            let mut p = leaf(size);
            seal(&mut p, 42);
            assert_eq!(verify(&p, 42), Ok(()));
            assert_eq!(page_id(&p), 42);
            assert_eq!(page_type(&p), Some(PageType::Leaf));
        }
    }

    #[test]
    fn init_clears_stale_bytes() {
        let p = leaf(1024);
        assert!(p[HEADER_SIZE..]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == 0 || i + HEADER_SIZE == 100));
    }

    #[test]
    fn wrong_id_is_reported_with_both_ids() {
        let mut p = leaf(4096);
        seal(&mut p, 7);
        let e = verify(&p, 8).unwrap_err();
        assert_eq!(
            e,
            PageError::WrongPageId {
                expected: 8,
                found: 7
            }
        );
        assert!(e.to_string().contains("page 8") && e.to_string().contains('7'));
    }

    #[test]
    fn flipped_bit_is_a_checksum_error() {
        let mut p = leaf(4096);
        seal(&mut p, 3);
        p[2000] ^= 0x10;
        let e = verify(&p, 3).unwrap_err();
        assert!(matches!(e, PageError::Checksum { page: 3, .. }), "{e}");
        assert!(e.to_string().starts_with("page 3:"));
        // The checksum field itself.
        let mut q = leaf(4096);
        seal(&mut q, 3);
        q[1] ^= 1;
        assert!(matches!(verify(&q, 3), Err(PageError::Checksum { .. })));
    }

    #[test]
    fn zero_page_is_recognised() {
        let p = vec![0u8; 4096];
        assert!(is_zeroed(&p));
        assert_eq!(verify(&p, 9), Err(PageError::Zeroed { page: 9 }));
        let mut q = p.clone();
        q[4095] = 1;
        assert!(!is_zeroed(&q));
    }

    #[test]
    fn bad_magic_type_and_size_are_typed() {
        let mut p = leaf(4096);
        p[OFF_MAGIC] = 0x42;
        let sum = compute_checksum(&p);
        put_u32(&mut p, OFF_CHECKSUM, sum);
        assert_eq!(
            verify(&p, 0),
            Err(PageError::BadMagic {
                page: 0,
                found: 0x42,
                expected: FORMAT_MAGIC,
            })
        );

        let mut p = leaf(4096);
        p[OFF_TYPE] = 9;
        let sum = compute_checksum(&p);
        put_u32(&mut p, OFF_CHECKSUM, sum);
        assert_eq!(verify(&p, 0), Err(PageError::BadType { page: 0, found: 9 }));

        let mut p = leaf(4096);
        seal(&mut p, 5);
        p[OFF_SHIFT] = 13;
        let sum = compute_checksum(&p);
        put_u32(&mut p, OFF_CHECKSUM, sum);
        assert!(matches!(
            verify(&p, 5),
            Err(PageError::WrongPageSize {
                written_shift: 13,
                ..
            })
        ));

        assert!(matches!(
            verify(&[1u8; 1000], 1),
            Err(PageError::BadSize { len: 1000, .. })
        ));
    }

    #[test]
    fn lsn_round_trips_and_is_covered_by_the_checksum() {
        let mut p = leaf(4096);
        set_lsn(&mut p, 0x0102_0304_0506_0708);
        assert_eq!(lsn(&p), 0x0102_0304_0506_0708);
        seal(&mut p, 1);
        set_lsn(&mut p, 99);
        assert!(matches!(verify(&p, 1), Err(PageError::Checksum { .. })));
    }

    #[test]
    fn header_round_trips() {
        let h = PageHeader {
            checksum: 0xDEAD_BEEF,
            magic: FORMAT_MAGIC,
            page_type: PageType::Inner as u8,
            level: 3,
            page_id: u64::MAX - 1,
            lsn: 77,
            count: 513,
            page_shift: 12,
            flags: 0,
            data_start: 4000,
            frag: 12,
            head_skip: 9,
            link: 1 << 40,
        };
        let mut p = vec![0xFFu8; 4096];
        h.write(&mut p);
        assert_eq!(PageHeader::read(&p), h);
        assert_eq!(h.page_type(), Some(PageType::Inner));
        assert_eq!(get_u16(&p, OFF_RESERVED), 0);
    }
}
