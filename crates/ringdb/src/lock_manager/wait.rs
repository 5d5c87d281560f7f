//! Parking on a lock: the bounded loops that ask the lock table until a request is granted
//! or refused, and the future that parks a task on the lock in its way until that lock
//! changes (a waker list per lock, never a spin).
//!
//! A wait is registered in the same poll that found the lock taken (no await between the
//! answer and the registration), so a release cannot slip in between and be missed. A wait
//! that ends without a wake-up (its task dropped, or polled early) takes itself off the list.

use super::lock_entry::Waiter;
use super::locks::{entry_bytes, Attempt, Blocker, Grant, LockTable};
use super::queued_scan::ScanInQueue;
use super::{Age, TxnShared};
use crate::error::ConflictWith;
use crate::error::TxnError;
use crate::ids::TableId;
use crate::ids::TxnTimestamp;
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// Wake-ups one lock request waits through before it gives up. Under wait-die a waiter only
/// waits for younger transactions, which finish or die, so a request is granted after a few;
/// the bound turns a bug into a typed error instead of a hang.
pub(crate) const LOCK_WAIT_ROUNDS_MAX: u64 = 1 << 20;

/// A refused lock request: the error, and for a conflict the lock in the way.
pub(crate) struct Refusal {
    pub(crate) error: TxnError,
    pub(crate) blocker: Option<(TableId, Blocker)>,
}

/// Who parks, as its waiter record will say.
struct WaiterFields {
    age: Age,
    exclusive: bool,
    /// The key wanted, for a wait on a range lock.
    key: Option<Rc<[u8]>>,
    queued: bool,
}

impl TxnShared {
    /// Locks `key` of `table` for `age` (`exclusive` or shared), parking while younger
    /// transactions hold it; refuses with a conflict when an older one does, unless
    /// `waits_for_older`: the caller holds no lock (nobody can be waiting for it, so its wait
    /// closes no cycle) and chose to park instead.
    pub(crate) async fn lock_key(
        &self,
        table: TableId,
        key: &[u8],
        age: Age,
        exclusive: bool,
        waits_for_older: bool,
    ) -> Result<Grant, Refusal> {
        let mut waited = false;
        for _ in 0..LOCK_WAIT_ROUNDS_MAX {
            let blocker = match self.locks.try_key(table, key, age, exclusive) {
                Attempt::Granted(grant) => return Ok(grant),
                Attempt::Die { blocker, .. } if waits_for_older => blocker,
                Attempt::Die {
                    holder,
                    with,
                    key,
                    blocker,
                } => {
                    return Err(self.conflict(age, holder, (table, key, with), blocker));
                }
                Attempt::Wait(blocker) => blocker,
            };
            self.count_wait_once(&mut waited);
            let wants = matches!(blocker, Blocker::Range(_)).then(|| Rc::from(key));
            let waiter = WaiterFields {
                age,
                exclusive,
                key: wants,
                queued: true,
            };
            WaitTurn::new(&self.locks, table, blocker, waiter).await;
        }
        Err(stalled(age.timestamp, table, key))
    }

    /// Locks (`start`, `end`) of `table` shared for `age` (a scan); returns the range lock's
    /// number. `waits_for_older` as for [`TxnShared::lock_key`].
    pub(crate) async fn lock_range(
        &self,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        age: Age,
        waits_for_older: bool,
    ) -> Result<u64, Refusal> {
        let mut waited = false;
        // Its place in the table's queue of waiting scans, from its first wait to its end.
        let mut queued: Option<ScanInQueue<'_>> = None;
        for _ in 0..LOCK_WAIT_ROUNDS_MAX {
            let blocker = match self.locks.try_range(table, start, end, age) {
                Attempt::Granted(Grant::Range(id)) => return Ok(id),
                Attempt::Granted(_) => unreachable!("a range request granted as a key"),
                Attempt::Die { blocker, .. } if waits_for_older => blocker,
                Attempt::Die {
                    holder,
                    with,
                    key,
                    blocker,
                } => {
                    return Err(self.conflict(age, holder, (table, key, with), blocker));
                }
                Attempt::Wait(blocker) => blocker,
            };
            self.count_wait_once(&mut waited);
            let range = (table, start, end);
            ScanInQueue::enter(&mut queued, &self.locks, range, age);
            let waiter = WaiterFields {
                age,
                exclusive: false,
                key: None,
                queued: true,
            };
            WaitTurn::new(&self.locks, table, blocker, waiter).await;
        }
        let key = match start {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        Err(stalled(age.timestamp, table, key))
    }

    /// Parks `age` (a transaction that died and released its locks) until the lock `blocker`
    /// of `table` changes, once: then its retry does not meet the same holder at once.
    pub(crate) async fn wait_for_change(&self, table: TableId, blocker: Blocker, age: Age) {
        let waiter = WaiterFields {
            age,
            exclusive: false,
            key: None,
            queued: false,
        };
        WaitTurn::new(&self.locks, table, blocker, waiter).await;
    }

    /// Counts a request's wait, once however many times it parks.
    fn count_wait_once(&self, waited: &mut bool) {
        if !*waited {
            *waited = true;
            self.count_wait();
        }
    }

    /// The refusal of `age` (younger) by `holder` on `key` of `table`, counted.
    fn conflict(
        &self,
        age: Age,
        holder: Age,
        (table, key, with): (TableId, Vec<u8>, ConflictWith),
        blocker: Blocker,
    ) -> Refusal {
        self.count_conflict();
        let error = TxnError::Conflict {
            timestamp: age.timestamp,
            holder: holder.timestamp,
            table,
            key,
            with,
        };
        Refusal {
            error,
            blocker: Some((table, blocker)),
        }
    }
}

/// A request that woke [`LOCK_WAIT_ROUNDS_MAX`] times without its lock.
fn stalled(timestamp: TxnTimestamp, table: TableId, key: &[u8]) -> Refusal {
    let error = TxnError::LockWaitStalled {
        timestamp,
        table,
        key: key.to_vec(),
        rounds: LOCK_WAIT_ROUNDS_MAX,
    };
    Refusal {
        error,
        blocker: None,
    }
}

/// Parks until the lock `blocker` changes (or is gone).
struct WaitTurn<'a> {
    locks: &'a LockTable,
    table: TableId,
    blocker: Blocker,
    /// Its waiter record's fields (the key is taken when it registers).
    waiter: WaiterFields,
    /// The registration while parked.
    ticket: Option<u64>,
}

impl<'a> WaitTurn<'a> {
    fn new(locks: &'a LockTable, table: TableId, blocker: Blocker, waiter: WaiterFields) -> Self {
        WaitTurn {
            locks,
            table,
            blocker,
            waiter,
            ticket: None,
        }
    }

    /// Takes the registration off the lock's list, if the release has not already.
    fn forget(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.locks.forget(self.table, &self.blocker, ticket);
        }
    }
}

impl Future for WaitTurn<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.ticket.is_some() {
            // Woken (the release took the registration) or polled early: ask again.
            self.forget();
            return Poll::Ready(());
        }
        let ticket = self.locks.next_ticket();
        let waiter = Waiter {
            age: self.waiter.age,
            exclusive: self.waiter.exclusive,
            key: self.waiter.key.take(),
            queued: self.waiter.queued,
            ticket,
            waker: cx.waker().clone(),
        };
        if !self.locks.register(self.table, &self.blocker, waiter) {
            return Poll::Ready(());
        }
        self.ticket = Some(ticket);
        Poll::Pending
    }
}

impl Drop for WaitTurn<'_> {
    fn drop(&mut self) {
        self.forget();
    }
}

impl LockTable {
    /// Parks `waiter` on `blocker`; returns false when that lock is gone already (nothing to
    /// wait for: ask again).
    pub(crate) fn register(&self, table: TableId, blocker: &Blocker, waiter: Waiter) -> bool {
        self.update_waiters(table, blocker, |waiters| waiters.push(waiter))
    }

    /// Takes the waiter of `ticket` off `blocker`'s list, if it is still there.
    pub(crate) fn forget(&self, table: TableId, blocker: &Blocker, ticket: u64) {
        self.update_waiters(table, blocker, |waiters| {
            waiters.retain(|w| w.ticket != ticket);
        });
    }

    /// Runs `change` on the waiter list of `blocker`, keeping the bytes counted; returns
    /// whether the lock exists.
    fn update_waiters(
        &self,
        table: TableId,
        blocker: &Blocker,
        change: impl FnOnce(&mut Vec<Waiter>),
    ) -> bool {
        let mut tables = self.tables.borrow_mut();
        let Some(locks) = tables.get_mut(&table) else {
            return false;
        };
        let (before, after) = match blocker {
            Blocker::Key(k) => match locks.keys.get_mut(&**k) {
                Some(entry) => {
                    let before = entry_bytes(k.len(), entry);
                    change(&mut entry.waiters);
                    (before, entry_bytes(k.len(), entry))
                }
                None => return false,
            },
            Blocker::Range(id) => match locks.ranges.iter_mut().find(|r| r.id == *id) {
                Some(range) => {
                    let before = range.bytes();
                    change(&mut range.waiters);
                    (before, range.bytes())
                }
                None => return false,
            },
            Blocker::QueuedScan(age) => {
                match locks.queued_scans.iter_mut().find(|s| s.age == *age) {
                    Some(scan) => {
                        let before = scan.bytes();
                        change(&mut scan.waiters);
                        (before, scan.bytes())
                    }
                    None => return false,
                }
            }
        };
        self.account(&tables, before, after);
        true
    }
}
