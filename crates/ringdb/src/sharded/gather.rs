//! One reply gathered from several shards, with one wake-up: what a multi-get waits on.
//!
//! A multi-get asks every shard that owns some of its keys. With a reply slot per shard the
//! caller would be woken once per shard, and on a machine where every CPU runs a shard each
//! wake-up is a context switch taken from a shard. Here every shard's part lands in one slot
//! and only the last part wakes the caller. A part whose sender is dropped unsent (its shard
//! stopped) counts as lost, so the wait always ends.

use super::reply::LOST_CHECK;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

struct Gathered<T> {
    parts: Mutex<Vec<Option<T>>>,
    /// Parts not delivered (or lost) yet.
    remaining: AtomicUsize,
    waiter: Thread,
}

/// One shard's part: deliver it with [`PartSender::send`], or drop it to mark it lost.
pub struct PartSender<T> {
    gathered: Option<Arc<Gathered<T>>>,
    index: usize,
}

/// The caller's end.
pub struct GatherReceiver<T> {
    gathered: Arc<Gathered<T>>,
}

/// A slot for `parts` parts, to be waited on by the calling thread.
pub fn gather<T>(parts: usize) -> (Vec<PartSender<T>>, GatherReceiver<T>) {
    let gathered = Arc::new(Gathered {
        parts: Mutex::new((0..parts).map(|_| None).collect()),
        remaining: AtomicUsize::new(parts),
        waiter: std::thread::current(),
    });
    let senders = (0..parts)
        .map(|index| PartSender {
            gathered: Some(gathered.clone()),
            index,
        })
        .collect();
    (senders, GatherReceiver { gathered })
}

impl<T> Gathered<T> {
    /// One part arrived (or was lost): the last one wakes the caller.
    fn arrived(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.waiter.unpark();
        }
    }
}

impl<T> PartSender<T> {
    /// Delivers this part.
    pub fn send(mut self, value: T) {
        let gathered = self.gathered.take().expect("a part is sent once");
        // The caller may have given up on a shard that went down (`wait_unless`) and taken the
        // parts: a part that comes after that is dropped.
        if let Some(part) =
            (gathered.parts.lock().unwrap_or_else(|p| p.into_inner())).get_mut(self.index)
        {
            *part = Some(value);
        }
        gathered.arrived();
    }
}

impl<T> Drop for PartSender<T> {
    fn drop(&mut self) {
        if let Some(gathered) = self.gathered.take() {
            gathered.arrived();
        }
    }
}

impl<T> GatherReceiver<T> {
    /// Blocks until every part arrived or was lost (spinning up to `spin` first), or until
    /// `lost` says a sender can no longer send (its shard panicked and leaked it, so it never
    /// drops); each part, `None` where it was lost or not in by then. `lost` is checked every
    /// [`LOST_CHECK`] of parking.
    pub fn wait_unless(self, spin: Duration, lost: impl Fn() -> bool) -> Vec<Option<T>> {
        let until = Instant::now() + spin;
        while self.gathered.remaining.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::hint::spin_loop();
        }
        while self.gathered.remaining.load(Ordering::Acquire) > 0 && !lost() {
            std::thread::park_timeout(LOST_CHECK);
        }
        std::mem::take(
            &mut *self
                .gathered
                .parts
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_part_wakes_the_caller_and_a_dropped_part_is_lost() {
        let (mut senders, receiver) = gather::<u32>(3);
        let last = senders.pop().unwrap();
        let lost = senders.pop().unwrap();
        let first = senders.pop().unwrap();
        let t = std::thread::spawn(move || {
            first.send(1);
            drop(lost);
            std::thread::sleep(Duration::from_millis(10));
            last.send(3);
        });
        assert_eq!(
            receiver.wait_unless(Duration::ZERO, || false),
            vec![Some(1), None, Some(3)]
        );
        t.join().unwrap();
    }

    #[test]
    fn a_part_whose_sender_leaked_is_given_up_once_its_shard_is_down() {
        let (mut senders, receiver) = gather::<u32>(2);
        let leaked = senders.pop().unwrap();
        senders.pop().unwrap().send(1);
        let down = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(30));
                down.store(true, Ordering::Release);
            });
            let parts = receiver.wait_unless(Duration::ZERO, || down.load(Ordering::Acquire));
            assert_eq!(parts, vec![Some(1), None]);
        });
        // A part sent after the caller gave up is dropped, not a panic.
        leaked.send(2);
    }
}
