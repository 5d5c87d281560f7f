//! The log's records: their format, encoding and decoding.
//!
//! A record holds one write batch (its puts and deletes) and is the unit of atomicity: after a
//! crash a batch is replayed whole or not at all. Its LSN is its byte position in the log's
//! infinite stream; it lives at file offset `lsn % capacity`. Layout (little-endian):
//!
//! ```text
//! +0  crc32c  u32   over bytes 4..len
//! +4  len     u32   total bytes, a multiple of 8
//! +8  lsn     u64   its own position: a record left over from an earlier lap never matches
//! +16 kind    u8    1 batch (default table), 3 batch naming tables, 4 create table,
//!                   5 page image, 2 padding up to the end of the lap
//! +17 -       3 bytes 0
//! +20 count   u32   operations (kind 4: the table id)
//! +24 ops     kind 1: kind u8 (1 put, 2 delete) | 0 u8 | key_len u16 | value_len u32 | key |
//!                     value  (every op in the default table)
//!             kind 3: kind u8 | 0 u8 | key_len u16 | value_len u32 | table u32 | key | value
//!             kind 4: name_len u32 | name (UTF-8, 1..=64 bytes)
//!             kind 5: page id u64 | the page's sealed image (the rest of the record; count is
//!                     its length in bytes)
//! ```
//!
//! A page image is logged before eviction writes a page in place between two checkpoints
//! (modes that survive a power cut): recovery writes it again where the page is torn or older
//! (see `buffer/steal.rs`). It is not a batch: it changes no key.
//!
//! A batch whose ops are all in the default table is written as kind 1, the format from
//! before tables (so such a log reads as before, and its records cost no more); any other as
//! kind 3, each op naming its table. The decoder does not know which tables exist: recovery
//! refuses an op whose table the catalog does not hold at that point of the replay.

use crate::catalog;
use crate::ids::TableId;

/// Bytes of a record header.
pub const RECORD_HEADER: usize = 24;
/// Bytes of an operation header inside a record.
pub(super) const OP_HEADER: usize = 8;
/// Bytes of an operation header in a record that names tables.
pub(super) const TABLE_OP_HEADER: usize = 12;
/// Bytes before the name in a create-table record.
pub(super) const CREATE_HEADER: usize = RECORD_HEADER + 4;
pub(super) const KIND_BATCH: u8 = 1;
pub(super) const KIND_PAD: u8 = 2;
pub(super) const KIND_TABLE_BATCH: u8 = 3;
pub(super) const KIND_CREATE_TABLE: u8 = 4;
pub(super) const KIND_PAGE_IMAGE: u8 = 5;
/// Bytes of a page image record before the image: the header and the page id.
pub(super) const PAGE_IMAGE_HEADER: usize = RECORD_HEADER + 8;
pub(super) const OP_PUT: u8 = 1;
pub(super) const OP_DELETE: u8 = 2;

/// One operation of a batch, in its table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Put {
        table: TableId,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: TableId,
        key: Vec<u8>,
    },
}

impl Op {
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put { key, .. } | Op::Delete { key, .. } => key,
        }
    }

    /// The table the operation changes.
    pub fn table(&self) -> TableId {
        match self {
            Op::Put { table, .. } | Op::Delete { table, .. } => *table,
        }
    }

    /// The value a put writes (empty for a delete).
    pub fn value(&self) -> &[u8] {
        match self {
            Op::Put { value, .. } => value,
            Op::Delete { .. } => &[],
        }
    }

    fn encoded_len(&self, header: usize) -> usize {
        header + self.key().len() + self.value().len()
    }
}

/// Whether a record of `ops` must name their tables (kind 3): some op is not in the default
/// table.
pub(super) fn names_tables(ops: &[Op]) -> bool {
    ops.iter().any(|o| o.table() != TableId::DEFAULT)
}

/// Bytes a record of `ops` takes in the log.
pub fn record_len(ops: &[Op]) -> usize {
    let header = if names_tables(ops) {
        TABLE_OP_HEADER
    } else {
        OP_HEADER
    };
    let body: usize = ops.iter().map(|o| o.encoded_len(header)).sum();
    (RECORD_HEADER + body).next_multiple_of(8)
}

/// Bytes the record creating a table named `name` takes in the log.
pub fn create_record_len(name: &str) -> usize {
    (CREATE_HEADER + name.len()).next_multiple_of(8)
}

#[cfg(any(test, feature = "__internal"))]
/// Encodes the record of `ops` at `lsn`, appending to `out`.
pub fn encode_record(out: &mut Vec<u8>, lsn: u64, ops: &[Op]) {
    encode_record_len(out, lsn, ops, record_len(ops));
}

#[cfg(any(test, feature = "__internal"))]
/// Encodes the record creating table `table` named `name` at `lsn`, appending to `out`.
pub fn encode_create_record(out: &mut Vec<u8>, lsn: u64, table: TableId, name: &str) {
    encode_create_len(out, lsn, table, name, create_record_len(name));
}

/// The record header's fields (the CRC comes last, over the whole record).
pub(super) fn encode_header(
    out: &mut Vec<u8>,
    lsn: u64,
    kind: u8,
    count: u32,
    len: usize,
) -> usize {
    let start = out.len();
    out.resize(start + RECORD_HEADER, 0);
    out[start + 4..start + 8].copy_from_slice(&(len as u32).to_le_bytes());
    out[start + 8..start + 16].copy_from_slice(&lsn.to_le_bytes());
    out[start + 16] = kind;
    out[start + 20..start + 24].copy_from_slice(&count.to_le_bytes());
    start
}

/// Pads the record that starts at `start` to `len` bytes and stamps its CRC.
pub(super) fn finish_record(out: &mut Vec<u8>, start: usize, len: usize) {
    assert!(out.len() <= start + len, "record longer than its length");
    out.resize(start + len, 0);
    let crc = crc32c::crc32c(&out[start + 4..start + len]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

/// [`encode_record`] taking `len >= record_len(ops)` bytes (zeros after the ops: a log on a
/// raw device pads each record to a whole block).
pub(super) fn encode_record_len(out: &mut Vec<u8>, lsn: u64, ops: &[Op], len: usize) {
    debug_assert!(len >= record_len(ops) && len.is_multiple_of(8));
    let tabled = names_tables(ops);
    let kind = if tabled { KIND_TABLE_BATCH } else { KIND_BATCH };
    let start = encode_header(out, lsn, kind, ops.len() as u32, len);
    for op in ops {
        let (code, key, value) = match op {
            Op::Put { key, value, .. } => (OP_PUT, key, value.as_slice()),
            Op::Delete { key, .. } => (OP_DELETE, key, &[][..]),
        };
        out.push(code);
        out.push(0);
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        if tabled {
            out.extend_from_slice(&op.table().get().to_le_bytes());
        }
        out.extend_from_slice(key);
        out.extend_from_slice(value);
    }
    finish_record(out, start, len);
}

/// [`encode_create_record`] taking `len >= create_record_len(name)` bytes.
pub(super) fn encode_create_len(
    out: &mut Vec<u8>,
    lsn: u64,
    table: TableId,
    name: &str,
    len: usize,
) {
    debug_assert!(len >= create_record_len(name) && len.is_multiple_of(8));
    let start = encode_header(out, lsn, KIND_CREATE_TABLE, table.get(), len);
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    finish_record(out, start, len);
}

pub(super) fn encode_pad(out: &mut Vec<u8>, lsn: u64, len: usize) {
    let start = encode_header(out, lsn, KIND_PAD, 0, len);
    finish_record(out, start, len);
}

/// What a record read back holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    Batch(Vec<Op>),
    /// A table was created: `table` named `name`.
    CreateTable {
        table: TableId,
        name: String,
    },
    Pad,
    /// A page's sealed image (`buffer/steal.rs`).
    PageImage {
        page: u64,
        image: Vec<u8>,
    },
}

/// Bytes a record of a page image of `page_bytes` takes in the log.
pub fn page_image_record_len(page_bytes: usize) -> usize {
    (PAGE_IMAGE_HEADER + page_bytes).next_multiple_of(8)
}

/// [`page_image_record_len`] bytes at `lsn`: the image of page `page`.
pub(super) fn encode_page_image_len(
    out: &mut Vec<u8>,
    lsn: u64,
    page: u64,
    image: &[u8],
    len: usize,
) {
    debug_assert!(len >= page_image_record_len(image.len()) && len.is_multiple_of(8));
    let start = encode_header(out, lsn, KIND_PAGE_IMAGE, image.len() as u32, len);
    out.extend_from_slice(&page.to_le_bytes());
    out.extend_from_slice(image);
    finish_record(out, start, len);
}

/// A page image record (`record`: exactly its bytes, CRC checked).
pub(super) fn decode_page_image(record: &[u8]) -> Option<Decoded> {
    let image_len = u32_at(record, 20) as usize;
    let page_bytes = record.get(RECORD_HEADER..PAGE_IMAGE_HEADER)?;
    let image = record.get(PAGE_IMAGE_HEADER..PAGE_IMAGE_HEADER.checked_add(image_len)?)?;
    Some(Decoded::PageImage {
        page: u64::from_le_bytes(page_bytes.try_into().ok()?),
        image: image.to_vec(),
    })
}

/// Decodes a record expected at `lsn` from `bytes` (which start at it). `None` when the bytes
/// are not a complete, intact record written at this position: the end of the log.
pub fn decode_record(bytes: &[u8], lsn: u64) -> Option<(usize, Decoded)> {
    if bytes.len() < RECORD_HEADER {
        return None;
    }
    let len = u32_at(bytes, 4) as usize;
    if len < RECORD_HEADER || !len.is_multiple_of(8) || len > bytes.len() {
        return None;
    }
    if u64::from_le_bytes(bytes[8..16].try_into().expect("8")) != lsn {
        return None;
    }
    if crc32c::crc32c(&bytes[4..len]) != u32_at(bytes, 0) {
        return None;
    }
    let record = &bytes[..len];
    let decoded = match bytes[16] {
        KIND_PAD => Decoded::Pad,
        KIND_BATCH => Decoded::Batch(decode_ops(record, false)?),
        KIND_TABLE_BATCH => Decoded::Batch(decode_ops(record, true)?),
        KIND_CREATE_TABLE => decode_create(record)?,
        KIND_PAGE_IMAGE => decode_page_image(record)?,
        _ => return None,
    };
    Some((len, decoded))
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4"))
}

/// The ops of a batch record (`record`: exactly its bytes, CRC checked); `tabled`: each op
/// names its table.
pub(super) fn decode_ops(record: &[u8], tabled: bool) -> Option<Vec<Op>> {
    let len = record.len();
    let count = u32_at(record, 20) as usize;
    let header = if tabled { TABLE_OP_HEADER } else { OP_HEADER };
    let mut ops = Vec::with_capacity(count.min(4096));
    let mut at = RECORD_HEADER;
    for _ in 0..count {
        if at + header > len {
            return None;
        }
        let kind = record[at];
        let klen = u16::from_le_bytes(record[at + 2..at + 4].try_into().expect("2")) as usize;
        let vlen = u32_at(record, at + 4) as usize;
        let table = TableId::from_raw(if tabled { u32_at(record, at + 8) } else { 0 });
        at += header;
        if at + klen + vlen > len {
            return None;
        }
        let key = record[at..at + klen].to_vec();
        let value = record[at + klen..at + klen + vlen].to_vec();
        at += klen + vlen;
        ops.push(match kind {
            OP_PUT => Op::Put { table, key, value },
            OP_DELETE if vlen == 0 => Op::Delete { table, key },
            _ => return None,
        });
    }
    Some(ops)
}

/// A create-table record (`record`: exactly its bytes, CRC checked): a table id that is not
/// the default table's and a name the catalog can store.
pub(super) fn decode_create(record: &[u8]) -> Option<Decoded> {
    let table = TableId::from_raw(u32_at(record, 20));
    if record.len() < CREATE_HEADER || table == TableId::DEFAULT {
        return None;
    }
    let name_len = u32_at(record, RECORD_HEADER) as usize;
    let name_bytes = record.get(CREATE_HEADER..CREATE_HEADER.checked_add(name_len)?)?;
    let name = std::str::from_utf8(name_bytes).ok()?;
    catalog::check_name(name).ok()?;
    Some(Decoded::CreateTable {
        table,
        name: name.to_string(),
    })
}
