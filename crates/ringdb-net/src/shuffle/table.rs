//! The probe table a node builds from the tuples it receives: tuples live in one arena, a hash
//! map from key to the first tuple with that key, and a chain through the rest.

use super::data::{key_of, partition, s_value, JoinResult, ShuffleSpec};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hasher for u64 keys (SipHash would dominate the build).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, k: u64) {
        self.0 = (k ^ (k >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

const NIL: u32 = u32::MAX;

pub struct ProbeTable {
    tuple_size: usize,
    pub arena: Vec<u8>,
    heads: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    next: Vec<u32>,
}

impl ProbeTable {
    pub fn new(tuple_size: usize) -> Self {
        ProbeTable {
            tuple_size,
            arena: Vec::new(),
            heads: HashMap::default(),
            next: Vec::new(),
        }
    }

    /// Copies `tuple` into the arena and indexes it.
    pub fn insert_copy(&mut self, tuple: &[u8]) {
        self.arena.extend_from_slice(tuple);
        self.index_tail(1);
    }

    /// Indexes the last `n` tuples of the arena (appended by the receive path).
    pub fn index_tail(&mut self, n: usize) {
        let ts = self.tuple_size;
        let first = self.next.len();
        for idx in first..first + n {
            let k = key_of(&self.arena[idx * ts..idx * ts + 8]);
            let slot = self.heads.entry(k).or_insert(NIL);
            self.next.push(*slot);
            *slot = idx as u32;
        }
    }

    /// Joins with node `node`'s part of S.
    pub fn join_s_part(&self, spec: &ShuffleSpec, node: usize) -> JoinResult {
        let ts = self.tuple_size;
        let mut res = JoinResult::default();
        for (&k, &head) in &self.heads {
            if k >= spec.s_rows() || partition(k, spec.nodes) != node {
                continue;
            }
            let sv = s_value(spec.seed, k);
            let mut i = head;
            while i != NIL {
                let t = &self.arena[i as usize * ts..(i as usize + 1) * ts];
                res.add_pair(t, sv);
                i = self.next[i as usize];
            }
        }
        res
    }
}
