//! The byte encoding the TPC-C rows share: fixed-width little-endian numbers and strings with
//! a one-byte length (every TPC-C string field fits 255 bytes but C_DATA, which takes two).
//! Decoding bytes read from the database never panics: a short or malformed row is a typed
//! [`RowError`] naming the table and where the row ended.
//!
//! A string field is a [`Text`]: its bytes inline, up to the column's size, as the clause's
//! fixed-size character columns are. Decoding a row therefore allocates nothing: a STOCK row
//! has eleven strings, and StockLevel reads about two hundred rows.

/// A row that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {table} row of {len_bytes} bytes is malformed at byte {offset}: {what}")]
pub struct RowError {
    /// The table the row was read from.
    pub table: &'static str,
    /// The row's length.
    pub len_bytes: usize,
    /// Where decoding stopped.
    pub offset: usize,
    /// What was expected there.
    pub what: &'static str,
}

/// A string column of at most `N` bytes, held inline (no allocation). TPC-C's strings are
/// ASCII; the bytes are kept as they are, since nothing here needs them as a `str`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Text<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Text<N> {
    /// `bytes` as a text of this column, or `None` when they do not fit it.
    pub fn new(bytes: &[u8]) -> Option<Self> {
        let mut text = Text::default();
        text.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        text.len = u16::try_from(bytes.len()).ok()?;
        Some(text)
    }

    /// `text`, which the caller made to fit the column (the population's generators draw
    /// lengths within the clause's sizes).
    pub fn of(text: &str) -> Self {
        Text::new(text.as_bytes()).expect("a generated string fits its column")
    }

    /// `parts` one after the other, cut at the column's size (C_DATA's rule: the newest entry
    /// first, the oldest bytes dropped).
    pub fn concat_truncated(parts: &[&[u8]]) -> Self {
        let mut text = Text::default();
        let mut len = 0;
        for part in parts {
            let take = part.len().min(N - len);
            text.bytes[len..len + take].copy_from_slice(&part[..take]);
            len += take;
        }
        text.len = len as u16;
        text
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl<const N: usize> Default for Text<N> {
    fn default() -> Self {
        Text {
            len: 0,
            bytes: [0; N],
        }
    }
}

impl<const N: usize> std::fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Appends fields to a row.
pub struct RowWriter(Vec<u8>);

impl RowWriter {
    /// An empty row with room for `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        RowWriter(Vec::with_capacity(capacity))
    }
    /// One byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// Four bytes.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Four bytes, signed.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Eight bytes.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Eight bytes, signed (money in cents).
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A string of at most 255 bytes with a one-byte length.
    pub fn short_text<const N: usize>(&mut self, text: &Text<N>) -> &mut Self {
        let text = text.as_bytes();
        let len = u8::try_from(text.len()).expect("short TPC-C strings are at most 255 bytes");
        self.0.push(len);
        self.0.extend_from_slice(text);
        self
    }
    /// A string of at most 65535 bytes with a two-byte length.
    pub fn long_text<const N: usize>(&mut self, text: &Text<N>) -> &mut Self {
        let text = text.as_bytes();
        let len = u16::try_from(text.len()).expect("long TPC-C strings are at most 500 bytes");
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(text);
        self
    }
    /// The row's bytes.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

/// Reads fields of a row in the order they were written.
pub struct RowReader<'a> {
    table: &'static str,
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> RowReader<'a> {
    /// A reader over a row of `table`.
    pub fn new(table: &'static str, bytes: &'a [u8]) -> Self {
        RowReader {
            table,
            bytes,
            offset: 0,
        }
    }

    fn error(&self, what: &'static str) -> RowError {
        RowError {
            table: self.table,
            len_bytes: self.bytes.len(),
            offset: self.offset,
            what,
        }
    }

    fn take<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], RowError> {
        let end = self.offset + N;
        let slice = self
            .bytes
            .get(self.offset..end)
            .ok_or_else(|| self.error(what))?;
        self.offset = end;
        Ok(slice.try_into().expect("the slice has N bytes"))
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, RowError> {
        Ok(self.take::<1>("a byte")?[0])
    }
    /// Four bytes.
    pub fn u32(&mut self) -> Result<u32, RowError> {
        Ok(u32::from_le_bytes(self.take("a 4-byte number")?))
    }
    /// Four bytes, signed.
    pub fn i32(&mut self) -> Result<i32, RowError> {
        Ok(i32::from_le_bytes(self.take("a 4-byte number")?))
    }
    /// Eight bytes.
    pub fn u64(&mut self) -> Result<u64, RowError> {
        Ok(u64::from_le_bytes(self.take("an 8-byte number")?))
    }
    /// Eight bytes, signed.
    pub fn i64(&mut self) -> Result<i64, RowError> {
        Ok(i64::from_le_bytes(self.take("an 8-byte number")?))
    }

    fn text<const N: usize>(&mut self, len: usize) -> Result<Text<N>, RowError> {
        let end = self.offset + len;
        let slice = self
            .bytes
            .get(self.offset..end)
            .ok_or_else(|| self.error("string bytes"))?;
        let text =
            Text::new(slice).ok_or_else(|| self.error("a string no longer than its column"))?;
        self.offset = end;
        Ok(text)
    }
    /// A string with a one-byte length, of at most `N` bytes.
    pub fn short_text<const N: usize>(&mut self) -> Result<Text<N>, RowError> {
        let len = self.u8()?;
        self.text(len.into())
    }
    /// A string with a two-byte length, of at most `N` bytes.
    pub fn long_text<const N: usize>(&mut self) -> Result<Text<N>, RowError> {
        let len = u16::from_le_bytes(self.take("a string length")?);
        self.text(len.into())
    }
    /// Refuses bytes after the last field.
    pub fn end(self) -> Result<(), RowError> {
        if self.offset == self.bytes.len() {
            Ok(())
        } else {
            Err(self.error("the end of the row"))
        }
    }
}

/// A row type of a table: encodes to bytes and back.
pub trait Row: Sized {
    /// The table's name in errors.
    const TABLE: &'static str;
    /// The row's bytes.
    fn encode(&self) -> Vec<u8>;
    /// Reads the fields from `r`.
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError>;
    /// The row `bytes` encode, or why they do not.
    fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        let mut r = RowReader::new(Self::TABLE, bytes);
        let row = Self::read(&mut r)?;
        r.end()?;
        Ok(row)
    }
}
