//! A small blocking RESP client, for the programs that drive servers (`ringdb cluster`) and
//! for tests: one connection, one command at a time, every reply's sizes bounded before
//! anything is allocated.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A reply, as RESP2 and RESP3 carry it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A status line (`+OK`).
    Simple(String),
    /// An error line.
    Error(String),
    /// An integer.
    Integer(i64),
    /// A bulk string (verbatim strings too, without their format).
    Bulk(Vec<u8>),
    /// Null (a null bulk string or array, or RESP3 `_`).
    Null,
    /// An array, set or push; a RESP3 map as its keys and values in turn.
    Array(Vec<Value>),
}

impl Value {
    /// The text of a status line or bulk string.
    pub fn text(&self) -> Option<String> {
        match self {
            Value::Simple(text) => Some(text.clone()),
            Value::Bulk(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }
}

/// Why a command got no reply.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection failed or timed out.
    #[error("{address}: {source}")]
    Io {
        /// The server's address.
        address: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The server sent something that is not RESP, or past the client's bounds.
    #[error("{address}: malformed reply: {what}")]
    Protocol {
        /// The server's address.
        address: String,
        /// What was wrong.
        what: String,
    },
}

/// The largest bulk string a reply may carry here.
const BULK_BYTES_MAX: usize = 512 << 20;
/// The most elements of one array.
const ARRAY_ITEMS_MAX: usize = 1 << 24;
/// The deepest nesting of arrays.
const DEPTH_MAX: usize = 16;

/// A command as RESP's array of bulk strings.
fn encode<A: AsRef<[u8]>>(out: &mut Vec<u8>, arguments: &[A]) {
    out.extend_from_slice(format!("*{}\r\n", arguments.len()).as_bytes());
    for argument in arguments {
        let argument = argument.as_ref();
        out.extend_from_slice(format!("${}\r\n", argument.len()).as_bytes());
        out.extend_from_slice(argument);
        out.extend_from_slice(b"\r\n");
    }
}

/// One connection to a server. Its replies are read from `R`: the socket itself, or (a
/// replica's link) a reader fed by a multishot receive on a ring. Fields drop in order: the
/// reader before the socket it reads.
pub struct Client<R: Read = TcpStream> {
    address: String,
    reader: BufReader<R>,
    writer: TcpStream,
}

impl Client<TcpStream> {
    /// Connects to `address` (`host:port`), with `timeout` on the connection and each reply.
    pub fn connect(address: &str, timeout: Duration) -> Result<Client, ClientError> {
        let io = |source| ClientError::Io {
            address: address.to_string(),
            source,
        };
        let resolved = std::net::ToSocketAddrs::to_socket_addrs(address)
            .map_err(io)?
            .next()
            .ok_or_else(|| io(std::io::Error::other("the address resolves to nothing")))?;
        let stream = TcpStream::connect_timeout(&resolved, timeout).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        let _ = stream.set_nodelay(true);
        let writer = stream.try_clone().map_err(io)?;
        Ok(Client {
            address: address.to_string(),
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// The client's socket (a replica's link reads it through a ring of its own).
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.writer
    }

    /// The same connection, its replies read from `reader` (which reads this socket).
    pub(crate) fn reading_from<R: Read>(self, reader: R) -> Client<R> {
        Client {
            address: self.address,
            reader: BufReader::new(reader),
            writer: self.writer,
        }
    }
}

impl<R: Read> Client<R> {
    /// Sends one command and reads its reply (an error reply is a [`Value::Error`]).
    pub fn command<A: AsRef<[u8]>>(&mut self, arguments: &[A]) -> Result<Value, ClientError> {
        let mut request = Vec::new();
        encode(&mut request, arguments);
        self.writer.write_all(&request).map_err(|e| self.io(e))?;
        self.read_value(0)
    }

    /// Sends `commands` at once (a pipeline) and reads their replies, in order.
    pub fn pipeline<A: AsRef<[u8]>>(
        &mut self,
        commands: &[Vec<A>],
    ) -> Result<Vec<Value>, ClientError> {
        let mut request = Vec::new();
        commands
            .iter()
            .for_each(|command| encode(&mut request, command));
        self.writer.write_all(&request).map_err(|e| self.io(e))?;
        commands.iter().map(|_| self.read_value(0)).collect()
    }

    /// Changes how long a reply may take (a long-running command: a slot migration).
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), ClientError> {
        self.writer
            .set_read_timeout(Some(timeout))
            .map_err(|e| self.io(e))
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            address: self.address.clone(),
            source,
        }
    }

    fn malformed(&self, what: impl Into<String>) -> ClientError {
        ClientError::Protocol {
            address: self.address.clone(),
            what: what.into(),
        }
    }

    /// One line without its CRLF, at most 64 KiB.
    fn line(&mut self) -> Result<String, ClientError> {
        let mut line = Vec::new();
        let mut limited = (&mut self.reader).take(64 * 1024);
        limited
            .read_until(b'\n', &mut line)
            .map_err(|e| self.io(e))?;
        if !line.ends_with(b"\r\n") {
            return Err(self.malformed("a line without CRLF (or the connection closed)"));
        }
        line.truncate(line.len() - 2);
        String::from_utf8(line).map_err(|_| self.malformed("a line that is not UTF-8"))
    }

    fn length(&self, text: &str, bound: usize) -> Result<Option<usize>, ClientError> {
        match text.parse::<i64>() {
            Ok(-1) => Ok(None),
            Ok(length) if length >= 0 && (length as u64) <= bound as u64 => {
                Ok(Some(length as usize))
            }
            _ => Err(self.malformed(format!("length '{text}'"))),
        }
    }

    fn read_value(&mut self, depth: usize) -> Result<Value, ClientError> {
        if depth > DEPTH_MAX {
            return Err(self.malformed("arrays nested too deep"));
        }
        let line = self.line()?;
        let Some(kind) = line.chars().next() else {
            return Err(self.malformed("an empty line"));
        };
        let rest = &line[kind.len_utf8()..];
        match kind {
            '+' => Ok(Value::Simple(rest.to_string())),
            '-' => Ok(Value::Error(rest.to_string())),
            ':' => rest
                .parse()
                .map(Value::Integer)
                .map_err(|_| self.malformed(format!("integer '{rest}'"))),
            '_' => Ok(Value::Null),
            ',' | '#' | '(' => Ok(Value::Simple(rest.to_string())),
            '$' | '=' | '!' => self.read_bulk(kind, rest),
            '*' | '~' | '>' | '%' => self.read_items(kind, rest, depth),
            _ => Err(self.malformed(format!("type '{kind}'"))),
        }
    }

    fn read_bulk(&mut self, kind: char, length: &str) -> Result<Value, ClientError> {
        let Some(length) = self.length(length, BULK_BYTES_MAX)? else {
            return Ok(Value::Null);
        };
        let mut bytes = vec![0u8; length + 2];
        self.reader.read_exact(&mut bytes).map_err(|e| self.io(e))?;
        if !bytes.ends_with(b"\r\n") {
            return Err(self.malformed("a bulk string without CRLF"));
        }
        bytes.truncate(length);
        match kind {
            // A verbatim string starts with its three-letter format and a colon.
            '=' if bytes.len() >= 4 => Ok(Value::Bulk(bytes.split_off(4))),
            '!' => Ok(Value::Error(String::from_utf8_lossy(&bytes).into_owned())),
            _ => Ok(Value::Bulk(bytes)),
        }
    }

    fn read_items(&mut self, kind: char, count: &str, depth: usize) -> Result<Value, ClientError> {
        let Some(count) = self.length(count, ARRAY_ITEMS_MAX)? else {
            return Ok(Value::Null);
        };
        let items = if kind == '%' { count * 2 } else { count };
        let mut values = Vec::with_capacity(items.min(1024));
        for _ in 0..items {
            values.push(self.read_value(depth + 1)?);
        }
        Ok(Value::Array(values))
    }
}
