//! The database and the workload every phase of the ladder shares: the engine's options
//! (no log, pages written on eviction) and the stream of uniform updates.

use super::LadderOpts;
use crate::ycsb::Op;
use ringdb::Options;
use ringdb_io::IoConfig;

/// Victims per eviction round in the batched steps.
pub(crate) fn evict_batch(opts: &LadderOpts) -> usize {
    64.min(opts.pool_pages / 16).max(1)
}

/// The database's options for a phase: the ladder's pages and pool, `io`, `evict_batch`
/// victims per eviction round, O_DIRECT, and no log; `fresh` starts from an empty database.
pub(crate) fn db_options(
    opts: &LadderOpts,
    io: IoConfig,
    evict_batch: usize,
    fresh: bool,
) -> Options {
    Options {
        page_size: opts.page_size,
        pool_pages: opts.pool_pages,
        io,
        evict_batch: Some(evict_batch),
        free_target: Some(evict_batch.max(opts.pool_pages / 32).max(4)),
        direct: true,
        fresh,
        // The paper's ladder measures the engine without a log (pages written on eviction).
        durability: ringdb::Durability::Off,
        ..Options::default()
    }
}

/// Uniform transactions over `0..records`, one record each: a read with probability
/// `read_percent`%, else an update (the paper's ladder: 0, updates only).
pub(crate) fn uniform_mix(
    records: u64,
    read_percent: u8,
    seed: u64,
) -> impl FnMut(usize) -> Option<Op> {
    debug_assert!(read_percent <= 100);
    let mut x = seed | 1;
    move |_| {
        // xorshift64*: the key choice must cost next to nothing beside a B+tree update.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let key = ((r as u128 * records as u128) >> 64) as u64;
        // The low bits pick the kind: independent enough of the high bits that pick the key.
        if (r & 0xffff) * 100 < read_percent as u64 * 0x1_0000 {
            Some(Op::Read(key))
        } else {
            Some(Op::Update(key))
        }
    }
}
