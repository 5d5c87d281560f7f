//! Log, double-write and recovery I/O in pieces of at most [`MAX_IO`] bytes.
//!
//! Through NVMe passthrough a request is one NVMe command, bounded by the controller's
//! maximum data transfer size (MDTS; often 128-512 KiB), and nothing splits it for us as the
//! block layer does. The few large transfers the engine makes (a group of log records, the
//! double-write image, recovery's reads) therefore go out in pieces; on a file this costs
//! nothing measurable.

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

/// Reads `len` bytes at `offset` in pieces; the result is shorter at the end of the file.
pub async fn read(io: &Io, file: FileId, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let want = (len - out.len()).min(MAX_IO);
        let (r, piece) = io
            .read(file, offset + out.len() as u64, vec![0u8; want])
            .await;
        let n = r?;
        out.extend_from_slice(&piece[..n]);
        if n < want {
            break;
        }
    }
    Ok(out)
}
