//! One hop per shard per turn of a worker's loop, whatever the number of connections.
//!
//! A batch whose group of commands has a write must run on the key's shard. Handed over one by
//! one, fifty clients without pipelining cost fifty hand-overs and fifty wake-ups of each side
//! per round. Instead, a batch on a worker leaves its group here ([`run_on_shard`]) and waits;
//! at the end of the turn the worker calls [`take_hops`] and drives one hop per shard carrying
//! every group queued for it. On the shard the groups run concurrently (each under its keys'
//! locks), so their commits share one group commit; each batch gets its own replies back.
//!
//! Off a worker's thread (a test driving `exec` directly), a group makes its own hop.

use crate::command::{KeyOp, Reply};
use crate::store::Store;
use futures_util::future::join_all;
use ringdb::Db;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Where a group's replies land: filled by the hop, awaited by the batch.
#[derive(Default)]
struct Slot {
    replies: Option<Vec<Reply>>,
    waker: Option<Waker>,
}

/// A group waiting for its shard's hop.
struct Queued {
    ops: Vec<KeyOp>,
    slot: Rc<RefCell<Slot>>,
}

thread_local! {
    /// Per shard, the groups queued this turn; `None` off a worker's thread.
    static QUEUED: RefCell<Option<Vec<Vec<Queued>>>> = const { RefCell::new(None) };
}

/// Marks this thread as a worker of a database with `shards` shards: groups queue for the
/// turn's hop from now on.
pub fn become_worker(shards: usize) {
    QUEUED.with(|queued| *queued.borrow_mut() = Some((0..shards).map(|_| Vec::new()).collect()));
}

/// Awaits a group's replies.
struct Waiting {
    slot: Rc<RefCell<Slot>>,
}

impl Future for Waiting {
    type Output = Vec<Reply>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<Reply>> {
        let mut slot = self.slot.borrow_mut();
        match slot.replies.take() {
            Some(replies) => Poll::Ready(replies),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Runs `ops` on `shard` (see the module documentation) and returns their replies in order.
pub async fn run_on_shard(db: &Db, store: &Store, shard: usize, ops: Vec<KeyOp>) -> Vec<Reply> {
    let slot = Rc::new(RefCell::new(Slot::default()));
    // The operations come back when this thread is no worker.
    let unqueued = QUEUED.with(|queued| match queued.borrow_mut().as_mut() {
        Some(shards) => {
            shards[shard].push(Queued {
                ops,
                slot: slot.clone(),
            });
            None
        }
        None => Some(ops),
    });
    match unqueued {
        Some(ops) => hop(db.clone(), store.clone(), shard, vec![ops])
            .await
            .pop()
            .unwrap_or_default(),
        None => Waiting { slot }.await,
    }
}

/// The hops of this turn: one future per shard with queued groups, each delivering its
/// groups' replies when it completes.
pub fn take_hops(db: &Db, store: &Store) -> Vec<Pin<Box<dyn Future<Output = ()>>>> {
    let taken: Vec<(usize, Vec<Queued>)> = QUEUED.with(|queued| {
        let mut queued = queued.borrow_mut();
        let Some(shards) = queued.as_mut() else {
            return Vec::new();
        };
        shards
            .iter_mut()
            .enumerate()
            .filter(|(_, groups)| !groups.is_empty())
            .map(|(shard, groups)| (shard, std::mem::take(groups)))
            .collect()
    });
    taken
        .into_iter()
        .map(|(shard, groups)| {
            let (db, store) = (db.clone(), store.clone());
            Box::pin(async move {
                let (ops, slots): (Vec<_>, Vec<_>) =
                    groups.into_iter().map(|q| (q.ops, q.slot)).unzip();
                let results = hop(db, store, shard, ops).await;
                debug_assert_eq!(results.len(), slots.len());
                for (slot, replies) in slots.into_iter().zip(results) {
                    let waker = {
                        let mut slot = slot.borrow_mut();
                        slot.replies = Some(replies);
                        slot.waker.take()
                    };
                    waker.into_iter().for_each(Waker::wake);
                }
            }) as Pin<Box<dyn Future<Output = ()>>>
        })
        .collect()
}

/// One hand-over to `shard` running every group at once there; their replies in order.
async fn hop(db: Db, store: Store, shard: usize, groups: Vec<Vec<KeyOp>>) -> Vec<Vec<Reply>> {
    let counts: Vec<usize> = groups.iter().map(Vec::len).collect();
    let result = db
        .call_on_async(shard, move |handle| async move {
            join_all(
                groups
                    .into_iter()
                    .map(|ops| crate::apply::apply_group(store.clone(), handle.clone(), ops)),
            )
            .await
        })
        .await;
    match result {
        Ok(replies) => replies,
        Err(error) => {
            let failed = Reply::error(format!("ERR shard unavailable: {error}"));
            counts
                .into_iter()
                .map(|count| vec![failed.clone(); count])
                .collect()
        }
    }
}
