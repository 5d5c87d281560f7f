//! Fuzz tests of every decoder that reads bytes from disk: node `check`, page `verify`, the
//! meta page, WAL records (as recovery walks them) and the double-write file. Whatever the
//! bytes, a decoder returns a typed error (or `None`: "not an intact record") and never
//! panics, loops forever or allocates beyond its input.
//!
//! Each target runs twice: over arbitrary bytes, and structure-aware: a valid page, record or
//! file with mutations (bit flips, truncations, length and count fields set to extremes with
//! the checksum made right again so the decoder gets past it, swapped pages). Where a decoder
//! accepts its input the test also checks what it promised (a node that passes `check` can be
//! read without a panic, a record that decodes has a sane length, ...).
//!
//! `RINGDB_FUZZ_CASES`, `RINGDB_FUZZ_SECONDS` and `RINGDB_FUZZ_SEED` set how long each target
//! runs (see `fuzz_harness`); `scripts/fuzz` runs them long and prints executions per target.

mod fuzz_harness;

use fuzz_harness::{extreme, fuzz, mutate, mutations, noise, note, note_label, Field};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use ringdb::checkpoint;
use ringdb::double_write::{self, DoubleWrite};
use ringdb::meta::{Meta, META_PID};
use ringdb::node::{self, NodeMut, NodeRef};
use ringdb::page::{self, PageError, PageType};
use ringdb::tree::TreeRoot;
use ringdb::wal::{self, Decoded, Op};
use ringdb::TableId;

// ---------------------------------------------------------------------------------------------
// Inputs and the formats' field tables (mutations: `fuzz_harness`).

/// Page sizes: the valid ones, and a few that are not.
fn any_page_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => prop::sample::select(vec![1024usize, 2048, 4096, 8192, 65536]),
        1 => prop::sample::select(vec![0usize, 1, 47, 48, 111, 512, 1000, 4095, 4097, 65537, 131072]),
    ]
}

/// Arbitrary bytes: short ones byte by byte (so proptest shrinks them), page-sized ones from
/// a seed, sometimes with a plausible page header so the decoders get past their first check.
fn arbitrary_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (any_page_size(), any::<u64>(), any::<bool>(), 0u8..6).prop_map(
            |(len, seed, plausible, ty)| {
                let mut bytes = noise(seed, len);
                if plausible && len > page::HEADER_SIZE {
                    bytes[4] = page::FORMAT_MAGIC;
                    bytes[5] = ty;
                    bytes[26] = len.trailing_zeros() as u8;
                }
                bytes
            }
        ),
    ]
}

/// The common page header's fields (see `page.rs`).
const PAGE_FIELDS: [Field; 12] = [
    (0, 4),
    (4, 1),
    (5, 1),
    (6, 2),
    (8, 8),
    (16, 8),
    (24, 2),
    (26, 1),
    (27, 1),
    (28, 4),
    (32, 4),
    (40, 8),
];

/// The page header's fields and the first slots' offset and lengths (see `node.rs`).
fn node_fields() -> Vec<Field> {
    let mut fields = PAGE_FIELDS.to_vec();
    fields.extend((0..12).map(|i| (page::HEADER_SIZE + 2 * i, 2)));
    fields
}

// ---------------------------------------------------------------------------------------------
// Nodes: `node::check`.

/// A node built through the node API: leaf or inner, some records, some removed again.
#[derive(Clone, Debug)]
struct NodePlan {
    page_size: usize,
    /// Some(level) for an inner node.
    inner_level: Option<u16>,
    /// Bytes every record's key begins with (so the node's heads skip them).
    prefix: Vec<u8>,
    records: Vec<(Vec<u8>, Vec<u8>)>,
    removes: Vec<Index>,
    page_id: u64,
}

fn node_plan() -> impl Strategy<Value = NodePlan> {
    let record = (
        prop::collection::vec(any::<u8>(), 0..24),
        prop::collection::vec(any::<u8>(), 0..48),
    );
    (
        prop::sample::select(vec![1024usize, 4096, 65536]),
        prop::option::of(1u16..=node::MAX_LEVEL),
        prop::collection::vec(any::<u8>(), 0..20),
        prop::collection::vec(record, 0..48),
        prop::collection::vec(any::<Index>(), 0..6),
        any::<u64>(),
    )
        .prop_map(
            |(page_size, inner_level, prefix, records, removes, page_id)| NodePlan {
                page_size,
                inner_level,
                prefix,
                records,
                removes,
                page_id,
            },
        )
}

/// The sealed page of `plan` (records that do not fit are left out).
fn build_node(plan: &NodePlan) -> Vec<u8> {
    let mut page = vec![0u8; plan.page_size];
    match plan.inner_level {
        Some(level) => NodeMut::init_inner(&mut page, level, plan.page_id ^ 1),
        None => NodeMut::init_leaf(&mut page),
    }
    let mut node = NodeMut::new(&mut page);
    for (i, (key, value)) in plan.records.iter().enumerate() {
        let child = (i as u64).to_le_bytes();
        let value: &[u8] = if plan.inner_level.is_some() {
            &child
        } else {
            value
        };
        let key = [&plan.prefix[..], key].concat();
        if let Err(pos) = node.search(&key) {
            let _ = node.insert_at(pos, &key, value);
        }
    }
    for at in &plan.removes {
        if node.count() > 0 {
            node.remove(at.index(node.count()));
        }
    }
    page::seal(&mut page, plan.page_id);
    page
}

/// What `check` promises: a node that passes it can be read whole without a panic.
fn read_whole_node(bytes: &[u8]) -> Result<(), TestCaseError> {
    let node =
        NodeRef::new(bytes).map_err(|e| TestCaseError::fail(format!("check Ok, new {e}")))?;
    let mut previous: Option<&[u8]> = None;
    for (key, value) in node.iter() {
        prop_assert!(previous.is_none_or(|p| p < key), "keys out of order");
        prop_assert!(node.search(key).is_ok(), "a stored key is not found");
        if node.is_inner() {
            prop_assert_eq!(value.len(), 8);
        }
        previous = Some(key);
    }
    if node.is_inner() {
        let _ = node.child_for(b"k");
        let _ = node.child_at(node.count());
    }
    prop_assert!(node.used_space() <= node.capacity());
    let _ = (node.fill(), node.free_space(), node.contiguous_free());
    Ok(())
}

fn check_node(bytes: &[u8]) -> Result<(), TestCaseError> {
    let result = node::check(bytes);
    note(&result);
    match result {
        Ok(()) => read_whole_node(bytes),
        Err(e) => {
            prop_assert!(!e.to_string().is_empty());
            Ok(())
        }
    }
}

#[test]
fn node_check_arbitrary_bytes() {
    fuzz("node_check/bytes", arbitrary_bytes(), |bytes| {
        check_node(&bytes)
    });
}

#[test]
fn node_check_mutated_nodes() {
    let fields = node_fields();
    fuzz(
        "node_check/mutated",
        (node_plan(), mutations()),
        |(plan, muts)| {
            let mut bytes = build_node(&plan);
            prop_assert_eq!(node::check(&bytes), Ok(()), "a node the API built");
            read_whole_node(&bytes)?;
            mutate(&mut bytes, &muts, &fields);
            check_node(&bytes)
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Pages: `page::verify`.

fn verify_page(bytes: &[u8], expected_id: u64) -> Result<(), TestCaseError> {
    let result = page::verify(bytes, expected_id);
    note(&result);
    match result {
        Ok(()) => {
            prop_assert!(page::valid_page_size(bytes.len()));
            prop_assert!(page::check_header(bytes, expected_id).is_ok());
            prop_assert_eq!(page::page_id(bytes), expected_id);
            prop_assert_eq!(
                page::compute_checksum(bytes),
                page::PageHeader::read(bytes).checksum
            );
        }
        Err(e) => {
            let names_the_page = e.to_string().contains(&format!("page {expected_id}"));
            prop_assert!(names_the_page, "{}", e);
        }
    }
    Ok(())
}

#[test]
fn page_verify_arbitrary_bytes() {
    fuzz(
        "page_verify/bytes",
        (arbitrary_bytes(), extreme()),
        |(bytes, id)| verify_page(&bytes, id),
    );
}

/// A sealed page of any type with a random body.
fn sealed_page(page_size: usize, type_byte: u8, seed: u64, page_id: u64) -> Vec<u8> {
    let mut bytes = noise(seed, page_size);
    let ty = PageType::from_u8(type_byte).unwrap_or(PageType::Leaf);
    let body = bytes[page::HEADER_SIZE..].to_vec();
    page::init(&mut bytes, ty);
    bytes[page::HEADER_SIZE..].copy_from_slice(&body);
    page::seal(&mut bytes, page_id);
    bytes
}

#[test]
fn page_verify_mutated_pages() {
    let strategy = (
        prop::sample::select(vec![1024usize, 4096, 65536]),
        1u8..=4,
        any::<u64>(),
        any::<u64>(),
        mutations(),
        any::<bool>(),
    );
    fuzz(
        "page_verify/mutated",
        strategy,
        |(size, ty, seed, id, muts, reseal)| {
            let mut bytes = sealed_page(size, ty, seed, id);
            prop_assert_eq!(page::verify(&bytes, id), Ok(()));
            let before = bytes.clone();
            mutate(&mut bytes, &muts, &PAGE_FIELDS);
            if reseal && bytes.len() >= page::HEADER_SIZE {
                // The checksum made right again: the header checks behind it must hold alone.
                let sum = page::compute_checksum(&bytes);
                bytes[..4].copy_from_slice(&sum.to_le_bytes());
            } else if bytes != before {
                prop_assert!(page::verify(&bytes, id).is_err(), "damage went unnoticed");
            }
            verify_page(&bytes, id)
        },
    );
}

#[test]
fn page_verify_swapped_pages() {
    let strategy = (1u8..=4, any::<u64>(), any::<u64>(), any::<u64>());
    fuzz("page_verify/swapped", strategy, |(ty, seed, id, other)| {
        prop_assume!(id != other);
        let bytes = sealed_page(4096, ty, seed, id);
        prop_assert_eq!(
            page::verify(&bytes, other),
            Err(PageError::WrongPageId {
                expected: other,
                found: id
            })
        );
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// The meta page: `Meta::read_from`, as recovery reads page 0 (verify, then parse).

/// The meta record's fields, after the page header (see `meta.rs`).
fn meta_fields() -> Vec<Field> {
    let at = page::HEADER_SIZE;
    let mut fields = vec![
        (at, 8),
        (at + 8, 4),
        (at + 12, 4),
        (at + 16, 8),
        (at + 24, 8),
        (at + 32, 4),
        (at + 36, 4),
        (at + 40, 8),
        (at + 48, 8),
        (at + 56, 8),
        (at + 64, 8),
        (at + 72, 8),
    ];
    fields.extend((0..8).map(|i| (at + 96 + 8 * i, 8)));
    fields.extend(PAGE_FIELDS);
    fields
}

fn meta_plan() -> impl Strategy<Value = (usize, Meta)> {
    (
        prop::sample::select(vec![4096usize, 65536]),
        1u32..=64,
        3u64..1 << 40,
        prop::collection::vec(any::<u64>(), 0..32),
        any::<(bool, u64, u64, u64, bool)>(),
    )
        .prop_map(
            |(page_size, height, next_pid, free, (logged, epoch, redo, wal, tables))| {
                let root = 1 + (next_pid - 1) / 2;
                // A catalog page (named tables) in half the plans: the last page allocated.
                let catalog = if tables { next_pid - 1 } else { 0 };
                let free_pages = free
                    .into_iter()
                    .map(|f| 1 + f % (next_pid - 1))
                    .filter(|&f| f != root && f != catalog)
                    .collect();
                let meta = Meta {
                    page_size: page_size as u32,
                    root: TreeRoot { root, height },
                    next_pid,
                    free_pages,
                    free_list_head: 0,
                    logged,
                    epoch,
                    redo_lsn: redo,
                    wal_bytes: wal,
                    catalog,
                };
                (page_size, meta)
            },
        )
}

/// What `read_from` promises of a meta record it accepts.
fn read_meta(bytes: &[u8]) -> Result<(), TestCaseError> {
    let result = Meta::read_from(bytes);
    note(&result.as_ref().map(|_| ()));
    if let Ok(meta) = result {
        prop_assert_eq!(meta.page_size as usize, bytes.len());
        prop_assert!(meta.root.height >= 1 && meta.root.height <= 64);
        prop_assert!(meta.root.root != META_PID && meta.root.root < meta.next_pid);
        prop_assert!(meta.free_pages.len() <= Meta::free_capacity(bytes.len()));
        for &f in &meta.free_pages {
            prop_assert!(f != META_PID && f < meta.next_pid && f != meta.root.root);
            prop_assert!(f != meta.catalog, "the catalog page is free");
        }
        prop_assert!(meta.catalog < meta.next_pid && meta.catalog != meta.root.root);
    }
    Ok(())
}

#[test]
fn meta_arbitrary_bytes() {
    fuzz("meta/bytes", arbitrary_bytes(), |bytes| {
        let _ = page::verify(&bytes, META_PID);
        read_meta(&bytes)
    });
}

#[test]
fn meta_mutated_pages() {
    let fields = meta_fields();
    fuzz(
        "meta/mutated",
        (meta_plan(), mutations(), any::<bool>()),
        |((size, meta), muts, reseal)| {
            let image = checkpoint::meta_page(&meta, size);
            let mut bytes = image.as_slice().to_vec();
            prop_assert_eq!(page::verify(&bytes, META_PID), Ok(()));
            prop_assert_eq!(Meta::read_from(&bytes).ok(), Some(meta));
            mutate(&mut bytes, &muts, &fields);
            if reseal && page::valid_page_size(bytes.len()) {
                // The checksum made right again, so that fields set to extremes pass `verify`
                // (recovery runs it before it parses page 0) unless the header is broken.
                let sum = page::compute_checksum(&bytes);
                bytes[..4].copy_from_slice(&sum.to_le_bytes());
            }
            read_meta(&bytes)
        },
    );
}

// ---------------------------------------------------------------------------------------------
// WAL records: `wal::decode_record`, walked the way recovery walks the log.

fn op() -> impl Strategy<Value = Op> {
    let key = prop::collection::vec(any::<u8>(), 0..32);
    // Mostly the default table (records of the format before tables), sometimes others.
    let table = prop_oneof![3 => Just(0u32), 1 => any::<u32>()].prop_map(TableId::from_raw);
    prop_oneof![
        (
            table.clone(),
            key.clone(),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(table, key, value)| Op::Put { table, key, value }),
        (table, key).prop_map(|(table, key)| Op::Delete { table, key }),
    ]
}

fn batches() -> impl Strategy<Value = Vec<Vec<Op>>> {
    prop::collection::vec(prop::collection::vec(op(), 0..8), 1..6)
}

/// Walks `log` from `lsn` like recovery: record after record until one does not decode.
/// Returns the batches and where the log ends. Each step moves forward, so it ends.
fn walk_log(log: &[u8], start_lsn: u64) -> Result<(Vec<Vec<Op>>, usize), TestCaseError> {
    let mut at = 0usize;
    let mut batches = Vec::new();
    while at < log.len() {
        let record = wal::decode_record(&log[at..], start_lsn + at as u64);
        note_label(match &record {
            None => "None",
            Some((_, Decoded::Pad)) => "Pad",
            Some((_, Decoded::Batch(_))) => "Batch",
            Some((_, Decoded::CreateTable { .. })) => "CreateTable",
            Some((_, Decoded::PageImage { .. })) => "PageImage",
        });
        let Some((len, decoded)) = record else {
            break;
        };
        prop_assert!(len >= wal::RECORD_HEADER && len.is_multiple_of(8));
        prop_assert!(len <= log.len() - at, "a record longer than the bytes");
        if let Decoded::Batch(ops) = decoded {
            let payload: usize = ops.iter().map(|op| 8 + op.key().len()).sum();
            prop_assert!(payload <= len, "ops larger than their record");
            batches.push(ops);
        }
        at += len;
    }
    Ok((batches, at))
}

/// The log of `batches` from `lsn`, and each record's start.
fn encode_log(batches: &[Vec<Op>], lsn: u64) -> (Vec<u8>, Vec<usize>) {
    let mut log = Vec::new();
    let mut starts = Vec::new();
    for ops in batches {
        let start = log.len();
        starts.push(start);
        wal::encode_record(&mut log, lsn + start as u64, ops);
    }
    (log, starts)
}

#[test]
fn wal_arbitrary_bytes() {
    fuzz(
        "wal_record/bytes",
        (arbitrary_bytes(), extreme()),
        |(bytes, lsn)| walk_log(&bytes, lsn).map(|_| ()),
    );
}

/// A record's header fields, and its first ops' headers (kind, key length, value length).
fn record_fields(starts: &[usize]) -> Vec<Field> {
    let mut fields = Vec::new();
    for &s in starts {
        fields.extend([(s, 4), (s + 4, 4), (s + 8, 8), (s + 16, 1), (s + 20, 4)]);
        fields.extend([(s + 24, 1), (s + 26, 2), (s + 28, 4)]);
    }
    fields
}

#[test]
fn wal_mutated_records() {
    let strategy = (batches(), 0u64..1 << 40, mutations(), any::<bool>());
    fuzz(
        "wal_record/mutated",
        strategy,
        |(batches, lsn, muts, refix_crc)| {
            let lsn = lsn * 8;
            let (mut log, starts) = encode_log(&batches, lsn);
            let (decoded, end) = walk_log(&log, lsn)?;
            prop_assert_eq!(&decoded, &batches);
            prop_assert_eq!(end, log.len());
            mutate(&mut log, &muts, &record_fields(&starts));
            if refix_crc {
                // The CRC made right again for each record's stated length, so the body parser
                // sees the damaged fields.
                for &s in &starts {
                    fix_record_crc(&mut log, s);
                }
            }
            let (decoded, _) = walk_log(&log, lsn)?;
            prop_assert!(decoded.len() <= log.len() / wal::RECORD_HEADER);
            Ok(())
        },
    );
}

/// Recomputes the CRC of the record at `start` over its stated length, where that fits.
fn fix_record_crc(log: &mut [u8], start: usize) {
    if start + wal::RECORD_HEADER > log.len() {
        return;
    }
    let len = u32::from_le_bytes(log[start + 4..start + 8].try_into().unwrap()) as usize;
    if len >= 8 && start + len <= log.len() {
        let crc = crc32c::crc32c(&log[start + 4..start + len]);
        log[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

#[test]
fn wal_torn_and_misplaced_records() {
    let strategy = (batches(), 0u64..1 << 40, any::<Index>(), 1u64..1 << 20);
    fuzz("wal_record/torn", strategy, |(batches, lsn, cut, shift)| {
        let lsn = lsn * 8;
        let (log, _) = encode_log(&batches, lsn);
        let cut = cut.index(log.len());
        let (decoded, end) = walk_log(&log[..cut], lsn)?;
        prop_assert!(
            end <= cut && decoded.len() < batches.len(),
            "a torn record was read"
        );
        prop_assert_eq!(&decoded[..], &batches[..decoded.len()]);
        // Read at another position (an earlier lap): nothing matches.
        let (decoded, _) = walk_log(&log, lsn + shift * 8)?;
        prop_assert!(decoded.is_empty(), "a record of another position was read");
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// The double-write file: `double_write::decode_dw` (what `read_dw` runs on the file's bytes).

/// Bytes of the fixed header before the page ids (see `checkpoint.rs`).
const DW_FIXED: usize = 40;

/// A double-write file per the documented layout: crc, magic, epoch, count, page size, header
/// pages, page ids, then the images.
fn encode_dw(epoch: u64, page_size: usize, images: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let n = images.len();
    let header_pages = (DW_FIXED + 8 * n).div_ceil(page_size);
    let mut out = vec![0u8; (header_pages + n) * page_size];
    out[8..16].copy_from_slice(b"RINGDBDW");
    out[16..24].copy_from_slice(&epoch.to_le_bytes());
    out[24..32].copy_from_slice(&(n as u64).to_le_bytes());
    out[32..36].copy_from_slice(&(page_size as u32).to_le_bytes());
    out[36..40].copy_from_slice(&(header_pages as u32).to_le_bytes());
    for (i, (pid, image)) in images.iter().enumerate() {
        out[DW_FIXED + 8 * i..DW_FIXED + 8 * i + 8].copy_from_slice(&pid.to_le_bytes());
        let at = (header_pages + i) * page_size;
        out[at..at + page_size].copy_from_slice(image);
    }
    fix_dw_crc(&mut out);
    out
}

fn fix_dw_crc(file: &mut [u8]) {
    if file.len() >= 4 {
        let crc = crc32c::crc32c(&file[4..]);
        file[..4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// What `decode_dw` promises of a file it accepts.
fn decode_dw(bytes: &[u8], page_size: usize) -> Result<Option<DoubleWrite>, TestCaseError> {
    let dw = double_write::decode_dw(bytes, page_size);
    note_label(if dw.is_some() { "Some" } else { "None" });
    if let Some(dw) = &dw {
        prop_assert!(!dw.pages.is_empty());
        prop_assert!((dw.pages.len() + 1) * page_size <= bytes.len());
        prop_assert!(dw.pages.iter().all(|(_, image)| image.len() == page_size));
    }
    Ok(dw)
}

#[test]
fn dw_arbitrary_bytes() {
    fuzz(
        "dw_header/bytes",
        (arbitrary_bytes(), any_page_size()),
        |(bytes, size)| decode_dw(&bytes, size).map(|_| ()),
    );
}

#[test]
fn dw_mutated_files() {
    let fields: Vec<Field> = vec![(0, 4), (8, 8), (16, 8), (24, 8), (32, 4), (36, 4), (40, 8)];
    let strategy = (
        prop::sample::select(vec![1024usize, 4096]),
        prop::collection::vec((any::<u64>(), any::<u64>()), 1..8),
        any::<u64>(),
        mutations(),
        any::<bool>(),
    );
    fuzz(
        "dw_header/mutated",
        strategy,
        |(size, pages, epoch, muts, refix_crc)| {
            let images: Vec<(u64, Vec<u8>)> = pages
                .iter()
                .map(|&(pid, seed)| (pid, noise(seed, size)))
                .collect();
            let mut file = encode_dw(epoch, size, &images);
            let dw = decode_dw(&file, size)?.expect("an intact double-write file");
            prop_assert_eq!(dw.epoch, epoch);
            prop_assert_eq!(&dw.pages, &images);
            mutate(&mut file, &muts, &fields);
            if refix_crc {
                // Counts and sizes set to extremes behind a right CRC reach the arithmetic.
                fix_dw_crc(&mut file);
            }
            decode_dw(&file, size).map(|_| ())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Regressions: inputs the fuzzers found that made a decoder panic.

/// A meta page read from a buffer shorter than a page indexed past its end.
#[test]
fn regression_meta_of_a_short_buffer() {
    for len in [0usize, 1, 48, 63, 100, 111, 112, 1000] {
        let e = Meta::read_from(&vec![0u8; len]).unwrap_err();
        assert!(e.to_string().contains("not a page size"), "{len}: {e}");
    }
}

/// A double-write header whose image count overflows `8 * count` (and `(h + n) * page_size`)
/// behind a right CRC.
#[test]
fn regression_dw_count_that_overflows() {
    let image = vec![7u8; 4096];
    for count in [1u64 << 61, (1 << 61) + 1, u64::MAX / 8, u64::MAX] {
        let mut file = encode_dw(1, 4096, &[(5, image.clone())]);
        file[24..32].copy_from_slice(&count.to_le_bytes());
        file[36..40].copy_from_slice(&1u32.to_le_bytes());
        fix_dw_crc(&mut file);
        assert!(
            double_write::decode_dw(&file, 4096).is_none(),
            "count {count}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The racy node reader (`racy_node.rs`: what a read on the caller's thread decodes) on images
// torn by a concurrent writer.

/// Runs every racy decoder on `words` for `probe`; on an image equal to a stable node, checks
/// the answers against `NodeRef`'s.
fn read_racy(
    words: &[std::sync::atomic::AtomicU64],
    stable: Option<&[u8]>,
    probe: &[u8],
) -> Result<(), TestCaseError> {
    use ringdb::racy::RacyPage;
    use ringdb::racy_node;
    let page = RacyPage::over(words);
    let Some(header) = racy_node::header(&page) else {
        note_label("no header");
        return Ok(());
    };
    let searched = racy_node::search(&page, &header, probe);
    note(&searched.is_some());
    let mut out = Vec::new();
    let _ = racy_node::child_for(&page, &header, probe);
    let _ = racy_node::value_into(&page, &header, probe, &mut out);
    for i in 0..header.count.min(32) {
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let _ = racy_node::pair_into(&page, &header, i, &mut k, &mut v);
        let _ = racy_node::separator_into(&page, &header, i, &mut k);
    }
    prop_assert!(out.len() <= page.len(), "a value longer than the page");
    if let Some(bytes) = stable {
        let node = NodeRef::new(bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(searched, Some(node.search(probe)));
    }
    Ok(())
}

#[test]
fn racy_node_arbitrary_bytes() {
    let strategy = (arbitrary_bytes(), prop::collection::vec(any::<u8>(), 0..12));
    fuzz("racy_node/bytes", strategy, |(mut bytes, probe)| {
        bytes.truncate(bytes.len() / 8 * 8);
        read_racy(&ringdb::racy::words_of(&bytes), None, &probe)
    });
}

/// Two nodes of one page size, and an image that takes each 8-byte word from one or the other
/// (what a reader copies while a writer turns the first into the second): the decoders never
/// panic, and on a copy that is all of one node they answer as `NodeRef` does.
#[test]
fn racy_node_torn_between_two_nodes() {
    let strategy = (
        node_plan(),
        node_plan(),
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..12),
        any::<bool>(),
    );
    fuzz(
        "racy_node/torn",
        strategy,
        |(a, mut b, seed, probe, prefixed)| {
            b.page_size = a.page_size;
            // Half the probes begin with the first node's prefix, so its heads decide them.
            let probe = if prefixed {
                [&a.prefix[..], &probe].concat()
            } else {
                probe
            };
            let (first, second) = (build_node(&a), build_node(&b));
            let mut torn = first.clone();
            let mut x = seed;
            for (word, chunk) in torn.chunks_exact_mut(8).enumerate() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (x >> 33) % 3 == 0 {
                    chunk.copy_from_slice(&second[word * 8..word * 8 + 8]);
                }
            }
            let stable = if torn == first {
                Some(first.as_slice())
            } else if torn == second {
                Some(second.as_slice())
            } else {
                None
            };
            read_racy(&ringdb::racy::words_of(&torn), stable, &probe)?;
            read_racy(&ringdb::racy::words_of(&first), Some(&first), &probe)
        },
    );
}
