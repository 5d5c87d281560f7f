//! Sizes and durations in fio's spelling: `4k`, `128KiB`, `2G`, `10s`, `500ms`, `2m`.

use crate::error::{BenchError, Quantity, Result};
use std::time::Duration;

/// Parses a byte size: a number with an optional binary suffix (k, m, g, t; with or without
/// `i`/`b`, any case). Plain numbers are bytes.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (num, suffix) = lower.split_at(digits_end);
    let mult: u64 = match suffix.trim_end_matches('b').trim_end_matches('i') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(unparsable(Quantity::Size, s)),
    };
    let v: f64 = num.parse().map_err(|_| unparsable(Quantity::Size, s))?;
    if v < 0.0 || !v.is_finite() {
        return Err(unparsable(Quantity::Size, s));
    }
    Ok((v * mult as f64).round() as u64)
}

/// Parses a duration: a number with an optional unit (us, ms, s, m, h); plain numbers are seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let t = s.trim().to_ascii_lowercase();
    let digits_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(digits_end);
    let v: f64 = num.parse().map_err(|_| unparsable(Quantity::Duration, s))?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(unparsable(Quantity::Duration, s)),
    };
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(unparsable(Quantity::Duration, s));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The error for `text` that does not spell a `quantity`.
fn unparsable(quantity: Quantity, text: &str) -> BenchError {
    BenchError::Unparsable {
        quantity,
        value: text.to_string(),
    }
}

/// fio spelling of a byte count (`4k`, `2g`) for passing sizes on to fio.
pub fn fio_size(bytes: u64) -> String {
    for (shift, suffix) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert!(matches!(
            parse_size("4q"),
            Err(BenchError::Unparsable {
                quantity: Quantity::Size,
                ..
            })
        ));
        assert_eq!(
            parse_size("4q").unwrap_err().to_string(),
            "bad size \"4q\"; use e.g. 4k, 1M, 2G"
        );
        assert!(parse_size("").is_err());
        assert_eq!(fio_size(4096), "4k");
        assert_eq!(fio_size(3 << 30), "3g");
        assert_eq!(fio_size(1000), "1000");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(matches!(
            parse_duration("fast"),
            Err(BenchError::Unparsable {
                quantity: Quantity::Duration,
                ..
            })
        ));
    }
}
