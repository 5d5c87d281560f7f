//! The bank the cross-shard crash tests run: accounts spread over the shards, transfers
//! between them (each one transaction that also writes a record of itself), and the check
//! after a crash: every acknowledged transfer present, the balances what the present records
//! say (no transfer half applied), the sum unchanged.

// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]

use ringdb::{Db, TxnError};
use std::collections::HashSet;

pub const ACCOUNTS: u64 = 16;
pub const START_BALANCE: i64 = 10_000;

/// Opens every account with the starting balance.
pub fn open_accounts(db: &Db) {
    for i in 0..ACCOUNTS {
        db.insert(&account(i), &START_BALANCE.to_be_bytes())
            .unwrap();
    }
}

pub fn account(i: u64) -> Vec<u8> {
    format!("account{i:04}").into_bytes()
}

pub fn amount(value: &[u8]) -> i64 {
    i64::from_be_bytes(value[..8].try_into().expect("8 bytes"))
}

/// A transfer's record: amount, from, to.
pub fn record_value(from: u64, to: u64, moved: i64) -> Vec<u8> {
    [moved.to_be_bytes(), from.to_be_bytes(), to.to_be_bytes()].concat()
}

/// The `n`th transfer of a thread: from, to, amount (xorshift over `state`).
pub fn next_transfer(state: &mut u64) -> (u64, u64, i64) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let from = *state % ACCOUNTS;
    let to = (from + 1 + (*state >> 20) % (ACCOUNTS - 1)) % ACCOUNTS;
    (from, to, (*state >> 40) as i64 % 100 + 1)
}

pub fn transfer(db: &Db, from: u64, to: u64, moved: i64, record: &[u8]) -> Result<(), TxnError> {
    db.transaction(|txn| {
        let a = txn
            .get_for_update(&account(from))?
            .map_or(0, |v| amount(&v));
        let b = txn.get_for_update(&account(to))?.map_or(0, |v| amount(&v));
        txn.insert(&account(from), &(a - moved).to_be_bytes())?;
        txn.insert(&account(to), &(b + moved).to_be_bytes())?;
        txn.insert(record, &record_value(from, to, moved))
    })
}

/// Every acknowledged transfer present; the balances what the present records say; the sum
/// unchanged. Returns the number of transfers present.
pub fn check(db: &Db, acked: &HashSet<String>, context: &str) -> usize {
    let mut expected = vec![START_BALANCE; ACCOUNTS as usize];
    let mut present = 0;
    for pair in db.prefix(b"transfer/") {
        let (_, value) = pair.unwrap_or_else(|e| panic!("{context}: scan: {e}"));
        let moved = amount(&value);
        let from = u64::from_be_bytes(value[8..16].try_into().unwrap());
        let to = u64::from_be_bytes(value[16..24].try_into().unwrap());
        expected[from as usize] -= moved;
        expected[to as usize] += moved;
        present += 1;
    }
    for record in acked {
        let found = db.get(record.as_bytes()).unwrap();
        assert!(
            found.is_some(),
            "{context}: acknowledged transfer {record} lost"
        );
    }
    for (i, balance) in expected.iter().enumerate() {
        let stored = db.get(&account(i as u64)).unwrap().map(|v| amount(&v));
        assert_eq!(
            stored,
            Some(*balance),
            "{context}: account {i}: a transfer half applied"
        );
    }
    assert_eq!(
        expected.iter().sum::<i64>(),
        START_BALANCE * ACCOUNTS as i64
    );
    present
}
