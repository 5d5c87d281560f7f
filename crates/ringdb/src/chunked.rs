//! Log, double-write and recovery I/O in pieces of at most [`MAX_IO`] bytes.
//!
//! Through NVMe passthrough a request is one NVMe command, bounded by the controller's
//! maximum data transfer size (MDTS; often 128-512 KiB), and nothing splits it for us as the
//! block layer does. The few large transfers the engine makes (a group of log records, the
//! double-write image, recovery's reads) therefore go out in pieces; on a file this costs
//! nothing measurable.
//!
//! # O_DIRECT
//! [`read`] reads into page-aligned memory ([`AlignedBuf`]), so a read of the data file,
//! which is opened with `O_DIRECT`, is accepted whenever its offset and length are multiples
//! of the file's direct I/O alignment (the free list's chain pages, recovery's look at a page
//! before it writes a logged image back: whole pages). A heap `Vec` is only 16-byte aligned,
//! and the kernel refuses it with `EINVAL` unless it happens to be aligned by chance, which
//! is how a database whose free list had grown a chain could be recovered once and then not
//! opened again (issue 38). [`write_all`] writes from a `Vec`: its callers write the log and
//! the double-write file, which a directory opens without `O_DIRECT` and a raw device serves
//! through the region engine, which bounces unaligned requests through aligned memory.

use ringdb_io::AlignedBuf;
use ringdb_io::Io;
use ringdb_io::{FileId, Result};

/// The largest single request these paths issue.
pub const MAX_IO: usize = 128 << 10;

/// Writes `bytes` at `offset` in pieces; returns the bytes written, short if a piece was.
pub async fn write_all(io: &Io, file: FileId, offset: u64, bytes: Vec<u8>) -> Result<usize> {
    if bytes.len() <= MAX_IO {
        // The common case (a log group): no copy.
        let (r, _) = io.write(file, offset, bytes).await;
        return r;
    }
    let mut done = 0;
    for piece in bytes.chunks(MAX_IO) {
        let (r, _) = io.write(file, offset + done as u64, piece.to_vec()).await;
        let n = r?;
        done += n;
        if n < piece.len() {
            break;
        }
    }
    Ok(done)
}

/// Reads `len` bytes at `offset` in pieces into page-aligned memory; the result is shorter
/// at the end of the file. On an `O_DIRECT` file, `offset` and `len` must be multiples of
/// its alignment (the kernel refuses the read otherwise).
pub async fn read(io: &Io, file: FileId, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    // Bounded: every piece but the last adds MAX_IO bytes, and a short piece ends the read.
    while out.len() < len {
        let want = (len - out.len()).min(MAX_IO);
        let at = offset + out.len() as u64;
        let (r, piece) = io.read(file, at, AlignedBuf::exact(want)).await;
        let n = r?;
        assert!(n <= want, "a read of {want} bytes returned {n}");
        out.extend_from_slice(&piece.as_slice()[..n]);
        if n < want {
            break;
        }
    }
    Ok(out)
}
