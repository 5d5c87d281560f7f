//! Keys of the TPC-C tables: big-endian, fixed-width composites of the primary keys of clause
//! 1.3, so that byte order is the clause's order. A scan of NEW-ORDER from the start of a
//! district finds its oldest order, a reverse scan of ORDER-BY-CUSTOMER a customer's newest,
//! and a customer-by-name scan returns a name group sorted by first name.

/// Bytes a last or first name takes in the customer-by-name key (both are at most 16).
pub const NAME_KEY_BYTES: usize = 16;

/// Bytes of the longest key (customer-by-name: 4 + 1 + 16 + 16 + 4).
pub const KEY_BYTES_MAX: usize = 41;

/// A key, its bytes inline (no allocation: a NewOrder builds some fifty of them). Reads as a
/// byte slice.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    len: u8,
    bytes: [u8; KEY_BYTES_MAX],
}

impl Key {
    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    /// Byte order, as the tree orders keys.
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02x?}", self.as_bytes())
    }
}

/// A key built field by field (every key of this module fits [`KEY_BYTES_MAX`]).
struct KeyBuilder(Key);

impl KeyBuilder {
    fn new() -> Self {
        KeyBuilder(Key {
            len: 0,
            bytes: [0; KEY_BYTES_MAX],
        })
    }
    fn push(mut self, bytes: &[u8]) -> Self {
        let at = usize::from(self.0.len);
        self.0.bytes[at..at + bytes.len()].copy_from_slice(bytes);
        self.0.len += bytes.len() as u8;
        self
    }
    fn u32(self, v: u32) -> Self {
        self.push(&v.to_be_bytes())
    }
    fn u8(self, v: u32) -> Self {
        let byte = u8::try_from(v).expect("a district or line number fits a byte (scale checked)");
        self.push(&[byte])
    }
    /// `text` padded with zero bytes to `NAME_KEY_BYTES`: a shorter name sorts first, as in
    /// a string comparison.
    fn name(self, bytes: &[u8]) -> Self {
        assert!(bytes.len() <= NAME_KEY_BYTES, "names are at most 16 bytes");
        let padding = [0u8; NAME_KEY_BYTES];
        self.push(bytes).push(&padding[bytes.len()..])
    }
    fn done(self) -> Key {
        self.0
    }
}

/// WAREHOUSE: (W_ID).
pub fn warehouse(w: u32) -> Key {
    KeyBuilder::new().u32(w).done()
}

/// DISTRICT: (D_W_ID, D_ID).
pub fn district(w: u32, d: u32) -> Key {
    KeyBuilder::new().u32(w).u8(d).done()
}

/// CUSTOMER: (C_W_ID, C_D_ID, C_ID).
pub fn customer(w: u32, d: u32, c: u32) -> Key {
    KeyBuilder::new().u32(w).u8(d).u32(c).done()
}

/// The customer-by-name index: (C_W_ID, C_D_ID, C_LAST, C_FIRST, C_ID).
pub fn customer_by_name(w: u32, d: u32, last: &[u8], first: &[u8], c: u32) -> Key {
    KeyBuilder::new()
        .u32(w)
        .u8(d)
        .name(last)
        .name(first)
        .u32(c)
        .done()
}

/// The prefix of every customer-by-name key of `last` in district (w, d).
pub fn customer_name_prefix(w: u32, d: u32, last: &str) -> Key {
    KeyBuilder::new().u32(w).u8(d).name(last.as_bytes()).done()
}

/// The customer id at the end of a customer-by-name key, if the key has the index's shape.
pub fn customer_id_of_name_key(key: &[u8]) -> Option<u32> {
    let tail: [u8; 4] = key.get(key.len().checked_sub(4)?..)?.try_into().ok()?;
    (key.len() == 41).then(|| u32::from_be_bytes(tail))
}

/// HISTORY (which has no primary key, clause 1.3): the paying district (H_W_ID, H_D_ID),
/// then the customer (H_C_W_ID, H_C_D_ID, H_C_ID) and the customer's payment count, which
/// makes it unique. The paying warehouse first: the row lives where the Payment runs (its
/// shard), even when the customer is remote.
pub fn history(paid_at: (u32, u32), customer: (u32, u32, u32), payment: u32) -> Key {
    let (w, d) = paid_at;
    let (cw, cd, c) = customer;
    KeyBuilder::new()
        .u32(w)
        .u8(d)
        .u32(cw)
        .u8(cd)
        .u32(c)
        .u32(payment)
        .done()
}

/// NEW-ORDER: (NO_W_ID, NO_D_ID, NO_O_ID).
pub fn new_order(w: u32, d: u32, o: u32) -> Key {
    KeyBuilder::new().u32(w).u8(d).u32(o).done()
}

/// ORDER: (O_W_ID, O_D_ID, O_ID).
pub fn order(w: u32, d: u32, o: u32) -> Key {
    KeyBuilder::new().u32(w).u8(d).u32(o).done()
}

/// The order-by-customer index: (O_W_ID, O_D_ID, O_C_ID, O_ID).
pub fn order_by_customer(w: u32, d: u32, c: u32, o: u32) -> Key {
    KeyBuilder::new().u32(w).u8(d).u32(c).u32(o).done()
}

/// ORDER-LINE: (OL_W_ID, OL_D_ID, OL_O_ID, OL_NUMBER).
pub fn order_line(w: u32, d: u32, o: u32, number: u32) -> Key {
    KeyBuilder::new().u32(w).u8(d).u32(o).u8(number).done()
}

/// ITEM: (I_ID).
pub fn item(i: u32) -> Key {
    KeyBuilder::new().u32(i).done()
}

/// STOCK: (S_W_ID, S_I_ID).
pub fn stock(w: u32, i: u32) -> Key {
    KeyBuilder::new().u32(w).u32(i).done()
}

/// The prefix every key of district (w, d) starts with (NEW-ORDER, ORDER, ORDER-LINE, the
/// indexes).
pub fn district_prefix(w: u32, d: u32) -> Key {
    district(w, d)
}

/// The first key after every key that starts with `prefix`: the engine's own helper.
pub use ringdb::prefix_end;

/// The 4-byte big-endian number at `offset` of `key`, if the key is long enough.
pub fn u32_at(key: &[u8], offset: usize) -> Option<u32> {
    let bytes: [u8; 4] = key.get(offset..offset + 4)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

/// Where the order id sits in NEW-ORDER, ORDER and ORDER-LINE keys.
pub const ORDER_ID_OFFSET: usize = 5;
/// Where the order id sits in an order-by-customer key.
pub const ORDER_ID_BY_CUSTOMER_OFFSET: usize = 9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_is_clause_order() {
        assert!(new_order(1, 2, 9) < new_order(1, 2, 10));
        assert!(new_order(1, 2, 3000) < new_order(1, 3, 1));
        assert!(order_line(1, 1, 5, 15) < order_line(1, 1, 6, 1));
        assert!(
            customer_by_name(1, 1, b"ABLE", b"Z", 9) < customer_by_name(1, 1, b"ABLEABLE", b"A", 1)
        );
        let prefix = customer_name_prefix(1, 1, "BARBAR");
        assert!(customer_by_name(1, 1, b"BARBAR", b"x", 3).starts_with(&prefix));
        assert!(!customer_by_name(1, 1, b"BARBARABLE", b"x", 3).starts_with(&prefix));
    }

    #[test]
    fn ids_come_back_out_of_keys() {
        assert_eq!(
            customer_id_of_name_key(&customer_by_name(3, 4, b"A", b"B", 77)),
            Some(77)
        );
        assert_eq!(customer_id_of_name_key(b"short"), None);
        assert_eq!(u32_at(&new_order(1, 2, 345), ORDER_ID_OFFSET), Some(345));
        let by_customer = order_by_customer(1, 2, 3, 456);
        assert_eq!(u32_at(&by_customer, ORDER_ID_BY_CUSTOMER_OFFSET), Some(456));
        assert_eq!(prefix_end(&[1, 2, 0xff]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}
