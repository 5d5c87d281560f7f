//! The database and the workload every phase of the ladder shares: the engine's options
//! (no log, pages written on eviction) and the stream of uniform updates.

use super::LadderOpts;
use crate::ycsb::Op;
use ringdb::Options;
use ringdb_io::IoConfig;

/// Victims per eviction round in the batched steps.
pub(super) fn evict_batch(opts: &LadderOpts) -> usize {
    64.min(opts.pool_pages / 16).max(1)
}

/// The database's options for a phase: the ladder's pages and pool, `io`, `evict_batch`
/// victims per eviction round, O_DIRECT, and no log; `fresh` starts from an empty database.
pub(super) fn db_options(
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

/// Uniform updates over `0..records`, one per transaction.
pub(super) fn uniform_updates(records: u64, seed: u64) -> impl FnMut(usize) -> Option<Op> {
    let mut x = seed | 1;
    move |_| {
        // xorshift64*: the key choice must cost next to nothing beside a B+tree update.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        Some(Op::Update(((r as u128 * records as u128) >> 64) as u64))
    }
}
