//! Which of Redis Cluster's 16384 slots a key belongs to: CRC16 (XMODEM) of the key, or of
//! its hash tag, modulo 16384. Clients compute the same function to pick a node, so it must
//! match Redis's bit for bit.

/// The number of hash slots.
pub const SLOT_COUNT: u16 = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection), one table lookup
/// per byte.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ byte)]
    })
}

/// The table of [`crc16`], built at compile time from the polynomial.
const CRC16_TABLE: [u16; 256] = crc16_table();

const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut index = 0;
    while index < 256 {
        let mut crc = (index as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[index] = crc;
        index += 1;
    }
    table
}

/// The part of `key` that decides its slot: what lies between the first `{` and the first `}`
/// after it, when that is not empty; else the whole key (Redis's hash tags).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(0) | None => key,
        Some(length) => &key[open + 1..open + 1 + length],
    }
}

/// The slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    let slot = crc16(hash_tag(key)) & (SLOT_COUNT - 1);
    debug_assert!(slot < SLOT_COUNT);
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_xmodem() {
        // The check value of CRC-16/XMODEM, and the example of Redis's cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_match_redis() {
        // Values redis-server 7 gives for CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b"somekey"), 11058);
    }

    #[test]
    fn hash_tags_follow_redis_rules() {
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        // An empty tag: the whole key.
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        // The first '{' and the first '}' after it.
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        // No closing brace: the whole key.
        assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
    }
}
