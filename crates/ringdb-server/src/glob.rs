//! Redis's glob patterns (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`, `[abc]`, `[^a-z]`
//! and `\` escapes, over bytes.

/// Whether `text` matches `pattern`. Iterative with one backtrack point, so the cost is
/// bounded by `pattern.len() * text.len()` whatever the pattern.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was and the text position it matched up to.
    let mut star: Option<(usize, usize)> = None;
    let bound = (pattern.len() + 1) * (text.len() + 1) + 1;
    for _ in 0..bound {
        if t == text.len() {
            return pattern[p..].iter().all(|&b| b == b'*');
        }
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => class(&pattern[p..], text[t]),
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == text[t]).then_some(2),
            Some(&b) => (b == text[t]).then_some(1),
            None => None,
        };
        match (step, star) {
            (Some(width), _) => {
                p += width;
                t += 1;
            }
            (None, Some((star_p, star_t))) => {
                p = star_p + 1;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            (None, None) => return false,
        }
    }
    false
}

/// A `[...]` class at the start of `pattern` against `byte`: the class's width if it matches.
fn class(pattern: &[u8], byte: u8) -> Option<usize> {
    debug_assert_eq!(pattern.first(), Some(&b'['));
    let mut at = 1;
    let negate = pattern.get(at) == Some(&b'^');
    if negate {
        at += 1;
    }
    let mut found = false;
    while at < pattern.len() && pattern[at] != b']' {
        if pattern[at] == b'\\' && at + 1 < pattern.len() {
            found |= pattern[at + 1] == byte;
            at += 2;
        } else if at + 2 < pattern.len() && pattern[at + 1] == b'-' && pattern[at + 2] != b']' {
            let (low, high) = (
                pattern[at].min(pattern[at + 2]),
                pattern[at].max(pattern[at + 2]),
            );
            found |= (low..=high).contains(&byte);
            at += 3;
        } else {
            found |= pattern[at] == byte;
            at += 1;
        }
    }
    // An unclosed class takes the rest of the pattern, as Redis does.
    let width = (at + 1).min(pattern.len());
    (found != negate).then_some(width)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_in_redis() {
        assert!(matches(b"*", b"anything"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h*llo", b"heeeello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-b]llo", b"hbllo"));
        assert!(matches(b"key:\\*", b"key:*"));
        assert!(!matches(b"key:\\*", b"key:x"));
        assert!(matches(b"a*b*c", b"axxbyyc"));
        assert!(!matches(b"a*b*c", b"axxbyy"));
        assert!(matches(b"", b""));
        assert!(!matches(b"", b"x"));
    }
}
