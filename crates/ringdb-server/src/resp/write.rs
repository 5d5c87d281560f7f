//! Replies onto the wire, in the protocol the connection chose with `HELLO`: RESP2 (the
//! default) or RESP3. Where RESP3 has a type of its own (null, map, double, boolean) and RESP2
//! has none, the RESP2 form is what Redis 7 sends.

/// A connection's reply buffer and the protocol version replies are written in.
pub struct Replies<'a> {
    out: &'a mut Vec<u8>,
    resp3: bool,
}

impl<'a> Replies<'a> {
    /// Appends to `out`; RESP3 forms when `resp3`.
    pub fn new(out: &'a mut Vec<u8>, resp3: bool) -> Self {
        Replies { out, resp3 }
    }

    /// Whether replies are RESP3.
    pub fn resp3(&self) -> bool {
        self.resp3
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    fn line(&mut self, kind: u8, text: &[u8]) {
        self.out.push(kind);
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// A simple string (no CR or LF in it).
    pub fn simple(&mut self, text: &str) {
        debug_assert!(!text.contains(['\r', '\n']));
        self.line(b'+', text.as_bytes());
    }

    /// An error: `text` starts with its code (`ERR`, `WRONGTYPE`, ...). CR and LF become
    /// spaces, as Redis does.
    pub fn error(&mut self, text: &str) {
        self.out.push(b'-');
        self.out.extend(
            text.bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.out.extend_from_slice(b"\r\n");
    }

    /// An integer.
    pub fn integer(&mut self, value: i64) {
        let mut digits = itoa_buffer();
        let text = format_i64(value, &mut digits);
        self.line(b':', text);
    }

    /// A bulk string.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.length(b'$', bytes.len());
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(b"\r\n");
    }

    /// The null: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        if self.resp3 {
            self.out.extend_from_slice(b"_\r\n");
        } else {
            self.out.extend_from_slice(b"$-1\r\n");
        }
    }

    /// The null array (RESP2 `*-1`; RESP3 `_`).
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.out.extend_from_slice(b"_\r\n");
        } else {
            self.out.extend_from_slice(b"*-1\r\n");
        }
    }

    /// The header of an array of `count` elements.
    pub fn array(&mut self, count: usize) {
        self.length(b'*', count);
    }

    /// The header of a map of `count` pairs (RESP2: an array of 2 * `count`).
    pub fn map(&mut self, count: usize) {
        if self.resp3 {
            self.length(b'%', count);
        } else {
            self.length(b'*', count * 2);
        }
    }

    /// The header of a set of `count` elements (RESP2: an array).
    pub fn set(&mut self, count: usize) {
        self.length(if self.resp3 { b'~' } else { b'*' }, count);
    }

    /// A double: RESP3 `,`; RESP2 a bulk string of its shortest exact text.
    pub fn double(&mut self, value: f64) {
        let text = format_double(value);
        if self.resp3 {
            self.line(b',', text.as_bytes());
        } else {
            self.bulk(text.as_bytes());
        }
    }

    /// A boolean: RESP3 `#t`/`#f`; RESP2 the integer 1 or 0.
    pub fn boolean(&mut self, value: bool) {
        if self.resp3 {
            self.line(b'#', if value { b"t" } else { b"f" });
        } else {
            self.integer(i64::from(value));
        }
    }

    /// A verbatim string (RESP3 `=`, format `txt`); RESP2 a bulk string.
    pub fn verbatim(&mut self, text: &str) {
        if self.resp3 {
            self.length(b'=', text.len() + 4);
            self.out.extend_from_slice(b"txt:");
            self.out.extend_from_slice(text.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text.as_bytes());
        }
    }

    fn length(&mut self, kind: u8, length: usize) {
        let mut digits = itoa_buffer();
        let text = format_i64(length as i64, &mut digits);
        self.line(kind, text);
    }
}

fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

/// `value` in decimal, written at the end of `buffer`.
fn format_i64(value: i64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut at = buffer.len();
    let mut rest = value.unsigned_abs();
    // At most 19 digits and a sign fit the 20 bytes.
    loop {
        at -= 1;
        buffer[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if value < 0 {
        at -= 1;
        buffer[at] = b'-';
    }
    &buffer[at..]
}

/// A double as Redis prints it: `inf`, `-inf`, `nan`, or the shortest text that reads back
/// the same (integers without a fraction).
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        "nan".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if value == value.trunc() && value.abs() < 1e17 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_has_its_resp2_and_resp3_form() {
        let mut two = Vec::new();
        let mut replies = Replies::new(&mut two, false);
        replies.null();
        replies.map(1);
        replies.double(1.5);
        replies.boolean(true);
        replies.integer(-42);
        replies.integer(i64::MIN);
        assert_eq!(
            two,
            b"$-1\r\n*2\r\n$3\r\n1.5\r\n:1\r\n:-42\r\n:-9223372036854775808\r\n"
        );
        let mut three = Vec::new();
        let mut replies = Replies::new(&mut three, true);
        replies.null();
        replies.map(1);
        replies.double(1.5);
        replies.boolean(true);
        assert_eq!(three, b"_\r\n%1\r\n,1.5\r\n#t\r\n");
    }

    #[test]
    fn errors_never_break_the_line() {
        let mut out = Vec::new();
        Replies::new(&mut out, false).error("ERR bad\r\nthing");
        assert_eq!(out, b"-ERR bad  thing\r\n");
    }
}
