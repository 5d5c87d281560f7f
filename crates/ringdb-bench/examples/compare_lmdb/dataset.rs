//! What both stores hold and read: keys `0..records` as 8-byte big-endian integers, each with
//! the value `ycsb::value_for(key, 0, value_size)`, loaded in the same scattered order
//! (`ycsb::scattered`, the order `ringdb ycsb` loads in), and the same read stream: the
//! bench's own YCSB-C uniform generator, seeded per round, so in each round both stores are
//! asked for the same keys in the same order.

use ringdb_bench::ycsb::{value_for, Distribution, OpGenerator, Workload};

/// Every this many reads of a round, the value returned is compared with the loaded one.
pub const CHECK_EVERY: u64 = 1024;

/// The records both stores hold.
#[derive(Clone, Copy, Debug)]
pub struct Dataset {
    /// Keys `0..records`.
    pub records: u64,
    /// Bytes per value.
    pub value_size: usize,
}

impl Dataset {
    /// The value loaded under `key`, into `out`.
    pub fn value(&self, key: u64, out: &mut Vec<u8>) {
        value_for(key, 0, self.value_size, out);
    }

    /// The read stream of a round: YCSB-C (reads only), keys uniform over the loaded ones.
    /// `tasks` is what the ringdb side runs with (it only bounds inserts, which C has none of,
    /// so both sides draw the same keys from the same seed).
    pub fn read_stream(&self, seed: u64, tasks: usize) -> OpGenerator {
        OpGenerator::new(Workload::C, Distribution::Uniform, self.records, seed).with_tasks(tasks)
    }
}
