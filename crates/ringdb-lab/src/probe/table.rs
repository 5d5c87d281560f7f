//! A tiny aligned key/value writer for the probe's text report: sections, rows whose values
//! line up in one column, and lists wrapped under that column.

use super::FeatureCheck;
use std::fmt::Write as _;

/// Width at which wrapped lists ([`Table::wrapped`]) end.
pub(super) const WRAP: usize = 88;

/// A text table being written.
#[derive(Default)]
pub(super) struct Table {
    out: String,
}

impl Table {
    /// Width of the key column.
    const KEY: usize = 30;

    /// The text written so far.
    pub(super) fn finish(self) -> String {
        self.out
    }

    /// A section title, after a blank line unless it is the first.
    pub(super) fn section(&mut self, name: &str) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        let _ = writeln!(self.out, "{name}");
    }

    /// A line as is.
    pub(super) fn line(&mut self, s: &str) {
        let _ = writeln!(self.out, "{s}");
    }

    /// `key` padded to the key column, then `value`.
    pub(super) fn row(&mut self, key: &str, value: &str) {
        let _ = writeln!(self.out, "  {key:<w$} {value}", w = Self::KEY);
    }

    /// A tried feature: `ok`, or `refused` with the reason.
    pub(super) fn check(&mut self, c: &FeatureCheck) {
        let key = match c.with {
            Some(w) => format!("{} (+{w})", c.name),
            None => c.name.to_string(),
        };
        let value = match (&c.ok, &c.error) {
            (true, _) => "ok".to_string(),
            (false, Some(e)) => format!("refused: {e}"),
            (false, None) => "refused".to_string(),
        };
        self.row(&key, &value);
    }

    /// `items` joined by spaces, wrapped under the value column.
    pub(super) fn wrapped(&mut self, key: &str, items: &[String]) {
        let indent = 2 + Self::KEY + 1;
        let mut lines: Vec<String> = vec![String::new()];
        for item in items {
            match lines.last_mut() {
                Some(cur) if cur.is_empty() || indent + cur.len() + 1 + item.len() <= WRAP => {
                    if !cur.is_empty() {
                        cur.push(' ');
                    }
                    cur.push_str(item);
                }
                _ => lines.push(item.clone()),
            }
        }
        let mut first = true;
        for l in lines {
            if first {
                self.row(key, if l.is_empty() { "-" } else { &l });
                first = false;
            } else {
                let _ = writeln!(self.out, "{:indent$}{l}", "");
            }
        }
    }
}
