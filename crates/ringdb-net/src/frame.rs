//! The shuffle's wire format: a 24-byte header (magic, sender, flags, payload length, tuple
//! size, payload checksum) followed by the payload. A stream decoder reassembles frames from
//! arbitrary slices (partial reads) and refuses anything malformed with a
//! [`NetError::MalformedFrame`] whose [`FrameFault`] says what was wrong.
//!
//! This is a module of its own because it is a protocol: a peer of another build, a fuzzer or a
//! test speaks it byte for byte, and the decoder is the one place that must refuse whatever
//! they send without crashing, hanging or handing the sink a frame that breaks the format.

use crate::error::{FrameFault, NetError, Result};

/// The first four bytes of every header: `"RDBF"` little-endian.
pub const MAGIC: u32 = 0x4642_4452;
/// Bytes of a header.
pub const HEADER_LEN: usize = 24;
/// Last frame on a connection: no payload follows, ever.
pub const FLAG_EOS: u16 = 1;

/// A frame header, as it is on the wire (little-endian, after the magic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The node that sent the frame.
    pub sender: u16,
    /// [`FLAG_EOS`] or nothing; other bits are refused.
    pub flags: u16,
    /// Bytes of payload that follow the header.
    pub len: u32,
    /// Bytes of each tuple in the payload.
    pub tuple_size: u32,
    /// [`checksum`] of the payload.
    pub checksum: u64,
}

impl Header {
    /// Writes the header, magic first, into the first [`HEADER_LEN`] bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&self.sender.to_le_bytes());
        out[6..8].copy_from_slice(&self.flags.to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
        out[12..16].copy_from_slice(&self.tuple_size.to_le_bytes());
        out[16..24].copy_from_slice(&self.checksum.to_le_bytes());
    }

    /// Reads a header; refuses one without the magic (the other checks are the decoder's).
    pub fn decode(b: &[u8; HEADER_LEN]) -> std::result::Result<Header, FrameFault> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(FrameFault::BadMagic { found: magic });
        }
        Ok(Header {
            sender: u16::from_le_bytes([b[4], b[5]]),
            flags: u16::from_le_bytes([b[6], b[7]]),
            len: u32_at(8),
            tuple_size: u32_at(12),
            checksum: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
        })
    }

    /// Whether this is the end-of-stream frame.
    pub fn is_eos(&self) -> bool {
        self.flags & FLAG_EOS != 0
    }
}

/// 64-bit payload checksum (multiply-xorshift over 8-byte words, then the tail, then the length).
pub fn checksum(data: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: [u64; 4] = [K, K.rotate_left(17), K.rotate_left(31), K.rotate_left(47)];
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        for (l, w) in h.iter_mut().zip(c.chunks_exact(8)) {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            *l = (*l ^ w).wrapping_mul(K).rotate_left(29);
        }
    }
    let mut acc = h[0] ^ h[1].rotate_left(7) ^ h[2].rotate_left(13) ^ h[3].rotate_left(19);
    for w in chunks.remainder().chunks(8) {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        acc = (acc ^ u64::from_le_bytes(b))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    acc ^= data.len() as u64;
    acc ^= acc >> 33;
    acc.wrapping_mul(K)
}

/// Receives the pieces of frames from a [`FrameDecoder`].
pub trait FrameSink {
    /// A header arrived; its payload follows in `payload` calls.
    fn begin(&mut self, h: &Header) -> Result<()>;
    /// Bytes of the current frame's payload, in order (a payload may come in many pieces).
    fn payload(&mut self, data: &[u8]) -> Result<()>;
    /// The whole payload of `h` arrived.
    fn end(&mut self, h: &Header) -> Result<()>;
}

/// Reassembles frames from a byte stream, whatever the read sizes.
pub struct FrameDecoder {
    peer: String,
    max_len: u32,
    hdr: [u8; HEADER_LEN],
    hdr_fill: usize,
    cur: Option<(Header, u32)>,
    eos: bool,
}

impl FrameDecoder {
    /// A decoder of the stream from `peer` (named in errors) that refuses payloads longer than
    /// `max_len` bytes.
    pub fn new(peer: impl Into<String>, max_len: u32) -> Self {
        FrameDecoder {
            peer: peer.into(),
            max_len,
            hdr: [0; HEADER_LEN],
            hdr_fill: 0,
            cur: None,
            eos: false,
        }
    }

    /// The end-of-stream frame has arrived.
    pub fn finished(&self) -> bool {
        self.eos
    }

    /// Mid-frame: bytes of a header or payload are still due.
    pub fn mid_frame(&self) -> bool {
        self.hdr_fill > 0 || self.cur.is_some()
    }

    fn bad(&self, fault: FrameFault) -> NetError {
        NetError::MalformedFrame {
            peer: self.peer.clone(),
            fault,
        }
    }

    /// Decodes `data`, the next bytes of the stream, handing every header and payload piece to
    /// `sink` as it completes; fails on the first malformed byte or sink error.
    pub fn feed(&mut self, mut data: &[u8], sink: &mut dyn FrameSink) -> Result<()> {
        while !data.is_empty() {
            if self.eos {
                return Err(self.bad(FrameFault::BytesAfterEnd {
                    len_bytes: data.len(),
                }));
            }
            if let Some((h, left)) = self.cur {
                let n = (left as usize).min(data.len());
                sink.payload(&data[..n])?;
                data = &data[n..];
                let left = left - n as u32;
                if left == 0 {
                    self.cur = None;
                    sink.end(&h)?;
                } else {
                    self.cur = Some((h, left));
                }
                continue;
            }
            let n = (HEADER_LEN - self.hdr_fill).min(data.len());
            self.hdr[self.hdr_fill..self.hdr_fill + n].copy_from_slice(&data[..n]);
            self.hdr_fill += n;
            data = &data[n..];
            if self.hdr_fill < HEADER_LEN {
                continue;
            }
            self.hdr_fill = 0;
            let h = Header::decode(&self.hdr).map_err(|fault| self.bad(fault))?;
            if h.len > self.max_len {
                return Err(self.bad(FrameFault::TooLong {
                    len_bytes: h.len,
                    max_bytes: self.max_len,
                }));
            }
            if h.flags & !FLAG_EOS != 0 {
                return Err(self.bad(FrameFault::UnknownFlags { flags: h.flags }));
            }
            if h.is_eos() {
                if h.len != 0 {
                    return Err(self.bad(FrameFault::EndOfStreamWithPayload));
                }
                self.eos = true;
                sink.begin(&h)?;
                sink.end(&h)?;
                continue;
            }
            sink.begin(&h)?;
            if h.len == 0 {
                sink.end(&h)?;
            } else {
                self.cur = Some((h, h.len));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect {
        frames: Vec<(Header, Vec<u8>)>,
        buf: Vec<u8>,
    }

    impl FrameSink for Collect {
        fn begin(&mut self, _h: &Header) -> Result<()> {
            self.buf.clear();
            Ok(())
        }
        fn payload(&mut self, d: &[u8]) -> Result<()> {
            self.buf.extend_from_slice(d);
            Ok(())
        }
        fn end(&mut self, h: &Header) -> Result<()> {
            self.frames.push((*h, std::mem::take(&mut self.buf)));
            Ok(())
        }
    }

    fn frame(payload: &[u8], flags: u16) -> Vec<u8> {
        let mut v = vec![0; HEADER_LEN];
        Header {
            sender: 3,
            flags,
            len: payload.len() as u32,
            tuple_size: 8,
            checksum: checksum(payload),
        }
        .encode(&mut v);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn reassembles_from_any_split() {
        let mut stream = frame(&[7u8; 40], 0);
        stream.extend(frame(&[9u8; 16], 0));
        stream.extend(frame(&[], FLAG_EOS));
        for step in [1, 3, 7, 24, 25, 1000] {
            let mut d = FrameDecoder::new("t", 1 << 20);
            let mut c = Collect::default();
            for piece in stream.chunks(step) {
                d.feed(piece, &mut c).unwrap();
            }
            assert!(d.finished());
            assert_eq!(c.frames.len(), 3);
            assert_eq!(c.frames[0].1, vec![7u8; 40]);
            assert_eq!(c.frames[1].1, vec![9u8; 16]);
            assert!(c.frames[2].0.is_eos());
        }
    }

    #[test]
    fn refuses_garbage() {
        let mut d = FrameDecoder::new("t", 1 << 20);
        let mut c = Collect::default();
        let e = d.feed(&[0xAB; 30], &mut c).unwrap_err();
        assert!(matches!(e, NetError::MalformedFrame { .. }), "{e}");
        let mut d = FrameDecoder::new("t", 16);
        let e = d.feed(&frame(&[1u8; 32], 0), &mut c).unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
        assert!(
            matches!(
                e,
                NetError::MalformedFrame {
                    fault: FrameFault::TooLong {
                        len_bytes: 32,
                        max_bytes: 16
                    },
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn checksum_sees_every_byte() {
        let a = vec![1u8; 1000];
        let mut b = a.clone();
        b[999] ^= 1;
        assert_ne!(checksum(&a), checksum(&b));
        assert_ne!(checksum(&a[..999]), checksum(&a));
    }
}
