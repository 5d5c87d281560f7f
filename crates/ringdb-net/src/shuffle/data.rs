//! Deterministic tables, the partitioning function and the single-process reference join.
//!
//! Node `n` owns table R_n (`rows_per_node` tuples of `tuple_size` bytes, first 8 bytes the join
//! key). The build side S has one tuple per key in `0..s_rows()`; node `n` holds the S keys that
//! partition to it. The shuffle moves every R tuple to the node its key partitions to, builds a
//! probe table there, and joins it with the local S part.

use crate::error::{NetError, NetSetting, Result};
use crate::frame::checksum;
use serde::{Deserialize, Serialize};

/// The shape of one shuffle: nodes, workers, tables and chunks. Every node derives its table
/// from it, so the spec is all a node process needs to know.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShuffleSpec {
    /// Nodes (1..=64).
    pub nodes: usize,
    /// Worker threads per node, each with its own transport (1..=64).
    pub workers: usize,
    /// Bytes of one tuple, the first 8 the join key (64..=4096, a multiple of 8).
    pub tuple_size: usize,
    /// Tuples of each node's table R_n.
    pub rows_per_node: usize,
    /// Seed of the tables' contents.
    pub seed: u64,
    /// Payload bytes per network chunk (frames carry at most this much).
    pub chunk: usize,
    /// Tuples per morsel.
    pub morsel: usize,
}

impl ShuffleSpec {
    /// Refuses a spec outside the ranges above, before anything starts.
    pub fn validate(&self) -> Result<()> {
        NetError::check_range(NetSetting::Nodes, self.nodes, 1, 64)?;
        NetError::check_range(NetSetting::Workers, self.workers, 1, 64)?;
        NetError::check_range(NetSetting::TupleSize, self.tuple_size, 64, 4096)?;
        if !self.tuple_size.is_multiple_of(8) {
            return Err(NetError::NotMultiple {
                setting: NetSetting::TupleSize,
                value: self.tuple_size as u64,
                step: 8,
            });
        }
        // At least one tuple per chunk.
        NetError::check_range(NetSetting::Chunk, self.chunk, self.tuple_size, 64 << 20)?;
        NetError::check_range(NetSetting::RowsPerNode, self.rows_per_node, 1, usize::MAX)?;
        NetError::check_range(NetSetting::Morsel, self.morsel, 1, usize::MAX)
    }

    /// Tuples of all nodes' tables together.
    pub fn total_rows(&self) -> u64 {
        self.rows_per_node as u64 * self.nodes as u64
    }

    /// Keys of R are drawn from `0..key_space()`; S covers the lower half, so about half of R
    /// finds a partner.
    pub fn key_space(&self) -> u64 {
        self.total_rows().max(2)
    }

    /// Tuples of the build side S (one per key in `0..s_rows()`).
    pub fn s_rows(&self) -> u64 {
        self.key_space() / 2
    }

    /// Payload capacity of one frame: whole tuples only.
    pub fn chunk_payload(&self) -> usize {
        (self.chunk / self.tuple_size) * self.tuple_size
    }
}

/// A 64-bit mixer (splitmix64's finaliser).
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The node (of `nodes`) that key `key` partitions to.
#[inline]
pub fn partition(key: u64, nodes: usize) -> usize {
    ((mix64(key ^ 0x5bd1_e995) >> 32) % nodes as u64) as usize
}

/// Writes R tuple `row` of node `node` into `out` (its length is the tuple size).
pub fn fill_tuple(spec: &ShuffleSpec, node: usize, row: usize, out: &mut [u8]) {
    let id = ((node as u64) << 40) | row as u64;
    let r = mix64(spec.seed ^ mix64(id));
    let key = r % spec.key_space();
    out[..8].copy_from_slice(&key.to_le_bytes());
    let mut w = r;
    for c in out[8..].chunks_exact_mut(8) {
        w = w.wrapping_add(0x9e37_79b9_7f4a_7c15);
        c.copy_from_slice(&mix64(w).to_le_bytes());
    }
}

/// Node `node`'s table R_n, tuple after tuple.
pub fn generate_table(spec: &ShuffleSpec, node: usize) -> Vec<u8> {
    let ts = spec.tuple_size;
    let mut t = vec![0u8; ts * spec.rows_per_node];
    for (row, out) in t.chunks_exact_mut(ts).enumerate() {
        fill_tuple(spec, node, row, out);
    }
    t
}

/// The join key of a tuple: its first 8 bytes.
#[inline]
pub fn key_of(tuple: &[u8]) -> u64 {
    u64::from_le_bytes(tuple[..8].try_into().expect("tuple has a key"))
}

/// The value S holds for `key`.
#[inline]
pub fn s_value(seed: u64, key: u64) -> u64 {
    mix64(seed.rotate_left(17) ^ key ^ 0xabcd_ef01)
}

/// Count and order-independent checksum of the join's output pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinResult {
    /// Output pairs.
    pub count: u64,
    /// Sum of the pairs' hashes (wrapping), so the order of the pairs does not matter.
    pub checksum: u64,
}

impl JoinResult {
    /// Counts one output pair: R tuple `r_tuple` joined with S value `s_val`.
    #[inline]
    pub fn add_pair(&mut self, r_tuple: &[u8], s_val: u64) {
        self.count += 1;
        self.checksum = self.checksum.wrapping_add(mix64(checksum(r_tuple) ^ s_val));
    }

    /// Adds the pairs of `o` (another worker's or node's part).
    pub fn merge(&mut self, o: &JoinResult) {
        self.count += o.count;
        self.checksum = self.checksum.wrapping_add(o.checksum);
    }
}

/// The join computed in one process, without partitioning or network: what every shuffle must
/// reproduce.
pub fn reference_join(spec: &ShuffleSpec) -> JoinResult {
    let mut res = JoinResult::default();
    let mut t = vec![0u8; spec.tuple_size];
    let s_rows = spec.s_rows();
    for node in 0..spec.nodes {
        for row in 0..spec.rows_per_node {
            fill_tuple(spec, node, row, &mut t);
            let k = key_of(&t);
            if k < s_rows {
                res.add_pair(&t, s_value(spec.seed, k));
            }
        }
    }
    res
}
