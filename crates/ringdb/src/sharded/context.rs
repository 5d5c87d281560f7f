//! What a shard's thread knows about itself: which database and shard it runs, its doorbell,
//! and its local database handle. Kept in a thread-local so that code running on the shard
//! (a task, a closure given to [`Db::run_on`](super::Db::run_on)) can take the zero-hop path
//! for the shard's own keys, and so that the blocking API can refuse to run there.

use crate::db::DbHandle;
use ringdb_io::Doorbell;
use std::cell::RefCell;

/// The shard a thread runs.
#[derive(Clone)]
pub(super) struct CurrentShard {
    /// The database's identity (unique per open, see `Shared::id`).
    pub(super) db_id: u64,
    /// The shard's index.
    pub(super) index: usize,
    /// The doorbell of the shard's runtime: replies to its tasks ring it.
    pub(super) doorbell: Doorbell,
    /// The shard's database, for keys it owns.
    pub(super) handle: DbHandle,
}

thread_local! {
    static CURRENT: RefCell<Option<CurrentShard>> = const { RefCell::new(None) };
}

/// Marks this thread as running `shard` (once, when the shard's thread starts).
pub(super) fn enter(shard: CurrentShard) {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        assert!(c.is_none(), "a thread runs one shard");
        *c = Some(shard);
    });
}

/// Forgets the shard (its thread is ending: the handle goes before the runtime).
pub(super) fn leave() {
    CURRENT.with(|c| c.borrow_mut().take());
}

/// The doorbell of the shard this thread runs, if it runs one.
pub(super) fn current_doorbell() -> Option<Doorbell> {
    CURRENT.with(|c| c.borrow().as_ref().map(|s| s.doorbell.clone()))
}

/// The index of the shard this thread runs, of any database.
pub(super) fn current_shard_index() -> Option<usize> {
    CURRENT.with(|c| c.borrow().as_ref().map(|s| s.index))
}

/// The local handle when this thread runs shard `index` of database `db_id`.
pub(super) fn local_handle(db_id: u64, index: usize) -> Option<DbHandle> {
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|s| s.db_id == db_id && s.index == index)
            .map(|s| s.handle.clone())
    })
}
