//! The AFL++ targets' bodies, one function per decoder, and their seeds. Each takes the raw
//! input: a decoder's parameters (flags, page size, expected page id, LSN, read sizes) come
//! from its first bytes, the rest is what the decoder reads. A flag makes the input's checksum
//! right before decoding, since AFL++ cannot forge a CRC32C and would otherwise stop at it. A
//! target panics only when a decoder did (or broke what it promised), and AFL++ records that
//! as a crash.

use ringdb::checkpoint;
use ringdb::double_write;
use ringdb::meta::{Meta, META_PID};
use ringdb::node::{self, NodeMut, NodeRef};
use ringdb::page::{self, PageType};
use ringdb::wal::{self, Op};
use ringdb::tree::TreeRoot;
use ringdb_net::frame::{checksum, FrameDecoder, FrameSink, Header, FLAG_EOS, HEADER_LEN};

/// The targets, as their binaries are named.
pub const TARGETS: [&str; 8] = [
    "node_check",
    "racy_node",
    "page_verify",
    "meta",
    "wal_record",
    "dw_header",
    "frame",
    "resp",
];

const PAGE_SIZES: [usize; 5] = [1024, 2048, 4096, 8192, 65536];

/// The first 8 bytes as a number, and the rest.
fn split_u64(data: &[u8]) -> (u64, &[u8]) {
    if data.len() < 8 {
        return (0, data);
    }
    let (head, rest) = data.split_at(8);
    (u64::from_le_bytes(head.try_into().expect("8 bytes")), rest)
}

/// `node::check`; a node that passes can be read whole.
pub fn node_check(data: &[u8]) {
    if node::check(data).is_err() {
        return;
    }
    let node = NodeRef::new(data).expect("check passed, so the header is valid");
    let mut previous: Option<&[u8]> = None;
    for (key, value) in node.iter() {
        assert!(previous.is_none_or(|p| p < key), "keys out of order");
        assert!(
            !node.is_inner() || value.len() == 8,
            "inner value not a child id"
        );
        previous = Some(key);
    }
    if node.is_inner() {
        let _ = node.child_for(b"k");
    }
    assert!(node.used_space() <= node.capacity());
}

/// `racy_node`'s readers (what a read on the caller's thread decodes, from bytes a writer may
/// be changing): the first byte is the probe key's length, the probe follows, the rest (cut to
/// whole words) is the page. Whatever it holds, they return without a panic.
pub fn racy_node(data: &[u8]) {
    use ringdb::racy::{words_of, RacyPage};
    use ringdb::racy_node as racy;
    let Some((&probe_len, rest)) = data.split_first() else {
        return;
    };
    let (probe, page) = rest.split_at(usize::from(probe_len).min(rest.len()));
    let words = words_of(&page[..page.len() / 8 * 8]);
    let page = RacyPage::over(&words);
    let Some(header) = racy::header(&page) else {
        return;
    };
    let mut out = Vec::new();
    let _ = racy::search(&page, &header, probe);
    let _ = racy::child_for(&page, &header, probe);
    let _ = racy::value_into(&page, &header, probe, &mut out);
    for i in 0..header.count.min(64) {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        let _ = racy::pair_into(&page, &header, i, &mut key, &mut value);
        let _ = racy::separator_into(&page, &header, i, &mut key);
    }
    assert!(out.len() <= page.len(), "a value longer than its page");
}

/// The first byte, and the rest. Its low bit asks to make the input's checksum right before
/// decoding: AFL++ cannot forge a CRC32C, so without this it would never get past one.
fn split_flags(data: &[u8]) -> (u8, Vec<u8>) {
    match data.split_first() {
        Some((&flags, rest)) => (flags, rest.to_vec()),
        None => (0, Vec::new()),
    }
}

/// Sets a page's checksum field to the page's checksum.
fn fix_page_checksum(bytes: &mut [u8]) {
    if bytes.len() >= page::HEADER_SIZE {
        let sum = page::compute_checksum(bytes);
        bytes[..4].copy_from_slice(&sum.to_le_bytes());
    }
}

/// `page::verify` against the expected id in the 8 bytes after the flags.
pub fn page_verify(data: &[u8]) {
    let (flags, rest) = split_flags(data);
    let (expected_id, page_bytes) = split_u64(&rest);
    let mut page_bytes = page_bytes.to_vec();
    if flags & 1 != 0 {
        fix_page_checksum(&mut page_bytes);
    }
    if page::verify(&page_bytes, expected_id).is_ok() {
        assert!(page::check_header(&page_bytes, expected_id).is_ok());
        assert_eq!(page::page_id(&page_bytes), expected_id);
    }
}

/// The meta page as recovery reads it: `verify`, then `Meta::read_from` (which must not
/// panic on its own either).
pub fn meta(data: &[u8]) {
    let (flags, mut bytes) = split_flags(data);
    if flags & 1 != 0 {
        fix_page_checksum(&mut bytes);
    }
    let _ = page::verify(&bytes, META_PID);
    if let Ok(meta) = Meta::read_from(&bytes) {
        assert!(meta.root.root < meta.next_pid);
        assert!(meta.free_pages.len() <= Meta::free_capacity(bytes.len()));
    }
}

/// WAL records from the LSN in the 8 bytes after the flags, walked like recovery walks the
/// log (with the flag, each record's CRC is made right for its stated length first).
pub fn wal_record(data: &[u8]) {
    let (flags, rest) = split_flags(data);
    let (lsn, log) = split_u64(&rest);
    let mut log = log.to_vec();
    let mut at = 0;
    while at < log.len() {
        if flags & 1 != 0 && log.len() - at >= wal::RECORD_HEADER {
            let len = u32::from_le_bytes(log[at + 4..at + 8].try_into().expect("4")) as usize;
            if len >= 8 && len <= log.len() - at {
                let crc = crc32c::crc32c(&log[at + 4..at + len]);
                log[at..at + 4].copy_from_slice(&crc.to_le_bytes());
            }
        }
        let Some((len, _)) = wal::decode_record(&log[at..], lsn.wrapping_add(at as u64)) else {
            break;
        };
        assert!(len >= wal::RECORD_HEADER && len <= log.len() - at);
        at += len;
    }
}

/// The double-write file of the page size the flags' bits 1.. select (with the low bit, its
/// CRC is made right over the length its header names).
pub fn dw_header(data: &[u8]) {
    let (flags, mut file) = split_flags(data);
    let page_size = PAGE_SIZES[(flags >> 1) as usize % PAGE_SIZES.len()];
    if flags & 1 != 0 && file.len() >= 40 {
        let images = u64::from_le_bytes(file[24..32].try_into().expect("8"));
        let header_pages = u64::from(u32::from_le_bytes(file[36..40].try_into().expect("4")));
        let total = images
            .checked_add(header_pages)
            .and_then(|pages| pages.checked_mul(page_size as u64));
        if let Some(total) = total.filter(|&t| t >= 4 && t <= file.len() as u64) {
            let crc = crc32c::crc32c(&file[4..total as usize]);
            file[..4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    if let Some(dw) = double_write::decode_dw(&file, page_size) {
        assert!(!dw.pages.is_empty() && (dw.pages.len() + 1) * page_size <= file.len());
    }
}

/// Counts what a frame decoder hands its sink, and checks the order of the calls.
#[derive(Default, PartialEq, Eq, Debug)]
struct Counter {
    frames: u64,
    payload_bytes: u64,
    open: Option<(Header, u64)>,
}

impl FrameSink for Counter {
    fn begin(&mut self, h: &Header) -> ringdb_net::Result<()> {
        assert!(self.open.is_none(), "begin mid-frame");
        self.open = Some((*h, 0));
        Ok(())
    }
    fn payload(&mut self, data: &[u8]) -> ringdb_net::Result<()> {
        let (h, got) = self.open.as_mut().expect("payload outside a frame");
        *got += data.len() as u64;
        assert!(*got <= u64::from(h.len), "payload overran its header");
        self.payload_bytes += data.len() as u64;
        Ok(())
    }
    fn end(&mut self, h: &Header) -> ringdb_net::Result<()> {
        let (open, got) = self.open.take().expect("end outside a frame");
        assert!(
            open == *h && got == u64::from(h.len),
            "end before the whole payload"
        );
        assert!(h.flags & !FLAG_EOS == 0);
        self.frames += 1;
        Ok(())
    }
}

/// Feeds `stream` in pieces of `piece` bytes (0: whole); the counts and whether it failed.
fn feed(stream: &[u8], piece: usize) -> (Counter, bool) {
    let mut decoder = FrameDecoder::new("afl", 4096);
    let mut sink = Counter::default();
    let pieces: Vec<&[u8]> = if piece == 0 {
        vec![stream]
    } else {
        stream.chunks(piece).collect()
    };
    let failed = pieces.iter().any(|p| decoder.feed(p, &mut sink).is_err());
    (sink, failed)
}

/// The shuffle's frame decoding: the stream after the first byte, fed whole and in pieces of
/// the size the first byte names; both must agree.
pub fn frame(data: &[u8]) {
    let Some((&piece, stream)) = data.split_first() else {
        return;
    };
    let whole = feed(stream, 0);
    let split = feed(stream, usize::from(piece % 64) + 1);
    assert_eq!(whole, split, "the split changed the result");
}

/// Runs target `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "node_check" => node_check(data),
        "racy_node" => racy_node(data),
        "page_verify" => page_verify(data),
        "meta" => meta(data),
        "wal_record" => wal_record(data),
        "dw_header" => dw_header(data),
        "frame" => frame(data),
        "resp" => resp(data),
        other => panic!("no target {other}"),
    }
}

/// `ringdb_server::resp::parse` over a stream: the first byte picks the bulk limit, the rest
/// is what a client sent. Requests are taken off the front until an error or a wish for more;
/// each must consume bytes it was given, and the same stream fed in two pieces must give the
/// same requests up to the cut.
pub fn resp(data: &[u8]) {
    use ringdb_server::resp::{parse, Limits, Parsed};
    let Some((&limit, stream)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_bulk_bytes: usize::from(limit) * 16,
    };
    let mut at = 0;
    // Each pass consumes at least one byte or stops.
    while at < stream.len() {
        match parse(&stream[at..], &limits) {
            Ok(Parsed::Request(arguments, used)) => {
                assert!(used > 0 && at + used <= stream.len(), "consumed {used} past the input");
                assert!(!arguments.is_empty(), "a request without a name");
                assert!(arguments.iter().all(|a| a.len() <= limits.max_bulk_bytes.max(64 * 1024)));
                at += used;
            }
            Ok(Parsed::Skip(used)) => {
                assert!(used > 0 && at + used <= stream.len());
                at += used;
            }
            Ok(Parsed::Incomplete) | Err(_) => break,
        }
    }
}

/// Valid inputs to start each target from (name, file name, bytes).
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut seeds = Vec::new();
    seeds.push((
        "resp",
        "pipeline".to_string(),
        b"\x40*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec(),
    ));
    seeds.push(("resp", "inline".to_string(), b"\x40set \"a b\" 'c'\r\nPING\r\n".to_vec()));
    for (i, size) in [1024usize, 4096].into_iter().enumerate() {
        let mut leaf = vec![0u8; size];
        NodeMut::init_leaf(&mut leaf);
        let mut node = NodeMut::new(&mut leaf);
        for k in 0..8u8 {
            let _ = node.insert(&[b'k', k], &[k; 5]);
        }
        page::seal(&mut leaf, 7);
        seeds.push(("node_check", format!("leaf-{i}"), leaf.clone()));
        let mut racy_input = vec![2u8, b'k', 3];
        racy_input.extend_from_slice(&leaf);
        seeds.push(("racy_node", format!("leaf-{i}"), racy_input));
        let mut with_id = vec![0u8];
        with_id.extend_from_slice(&7u64.to_le_bytes());
        with_id.extend_from_slice(&leaf);
        seeds.push(("page_verify", format!("leaf-{i}"), with_id));
        let meta = Meta {
            page_size: size as u32,
            root: TreeRoot { root: 1, height: 1 },
            next_pid: 9,
            free_pages: vec![2, 3],
            free_list_head: 0,
            logged: true,
            epoch: 4,
            redo_lsn: 64,
            wal_bytes: 1 << 20,
            catalog: 0,
        };
        let image = checkpoint::meta_page(&meta, size);
        let mut input = vec![0u8];
        input.extend_from_slice(image.as_slice());
        seeds.push(("meta", format!("meta-{i}"), input));
    }
    seeds.extend(more_seeds());
    // The same inputs with the flag that makes their checksum right after AFL++ mutated them.
    let flagged: Vec<_> = seeds
        .iter()
        .filter(|(target, _, _)| !matches!(*target, "node_check" | "racy_node" | "frame"))
        .map(|(target, name, bytes)| {
            let mut bytes = bytes.clone();
            bytes[0] |= 1;
            (*target, format!("{name}-fix-checksum"), bytes)
        })
        .collect();
    seeds.extend(flagged);
    seeds
}

fn more_seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut log = vec![0u8];
    log.extend_from_slice(&4096u64.to_le_bytes());
    let mut records = Vec::new();
    let put = |k: &[u8]| Op::Put {
        table: ringdb::TableId::DEFAULT,
        key: k.to_vec(),
        value: b"value".to_vec(),
    };
    let delete = Op::Delete {
        table: ringdb::TableId::from_raw(3),
        key: b"b".to_vec(),
    };
    wal::encode_record(&mut records, 4096, &[put(b"a"), delete]);
    let next = 4096 + records.len() as u64;
    wal::encode_record(&mut records, next, &[put(b"c")]);
    log.extend_from_slice(&records);
    let mut stream = vec![3u8];
    for (flags, payload) in [(0u16, vec![9u8; 64]), (FLAG_EOS, Vec::new())] {
        let mut header = [0u8; HEADER_LEN];
        Header {
            sender: 1,
            flags,
            len: payload.len() as u32,
            tuple_size: 8,
            checksum: checksum(&payload),
        }
        .encode(&mut header);
        stream.extend_from_slice(&header);
        stream.extend_from_slice(&payload);
    }
    vec![
        ("wal_record", "two-records".into(), log),
        ("dw_header", "one-page".into(), dw_seed()),
        ("frame", "two-frames".into(), stream),
    ]
}

/// A double-write file of one 1 KiB page (flags 0: page size 1 KiB), as `checkpoint.rs` lays
/// it out.
fn dw_seed() -> Vec<u8> {
    let page_size = 1024;
    let mut image = vec![0u8; page_size];
    page::init(&mut image, PageType::Leaf);
    page::seal(&mut image, 5);
    let mut file = vec![0u8; 2 * page_size];
    file[8..16].copy_from_slice(b"RINGDBDW");
    file[16..24].copy_from_slice(&1u64.to_le_bytes());
    file[24..32].copy_from_slice(&1u64.to_le_bytes());
    file[32..36].copy_from_slice(&(page_size as u32).to_le_bytes());
    file[36..40].copy_from_slice(&1u32.to_le_bytes());
    file[40..48].copy_from_slice(&5u64.to_le_bytes());
    file[page_size..].copy_from_slice(&image);
    let crc = crc32c::crc32c(&file[4..]);
    file[..4].copy_from_slice(&crc.to_le_bytes());
    let mut input = vec![0u8];
    input.extend_from_slice(&file);
    input
}
