//! The batch log's syncer: a thread that makes the cross-shard batch log durable for tasks on
//! the shards, so that their shard's thread does not block in `fdatasync`.
//!
//! A transaction across shards commits through one record of the batch log
//! ([`Db::log_across_async`](super::Db::log_across_async)). The blocking API syncs from the
//! calling thread; a task on a shard would stall every other task of its shard for the
//! whole sync (milliseconds on a disk) while it holds its locks. Such a task hands the sync
//! to this thread instead and awaits the reply. The thread takes every request queued by then
//! and serves them with one sync (group commit, shared with the blocking committers through
//! the coordinator's `sync_to`). It is started with the first request and ends when the
//! database's coordinator (which holds its queue) is dropped.

use super::cross::SyncState;
use super::reply::{self, ReplyReceiver, ReplySender};
use ringdb_io::BlockingFile;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// The result of one sync, for every committer it covered (an `io::Error` is not `Clone`).
pub(super) type SyncResult = Result<(), (std::io::ErrorKind, String)>;

/// One committer's request: make the log durable up to `end`.
struct SyncRequest {
    end: u64,
    reply: ReplySender<SyncResult>,
}

/// The handle the coordinator keeps: the queue into the thread, started on first use.
#[derive(Default)]
pub(super) struct Syncer {
    queue: Mutex<Option<Sender<SyncRequest>>>,
}

impl Syncer {
    /// Queues a sync of `file` up to `end`; the reply says when it is durable.
    pub(super) fn request(
        &self,
        sync: &Arc<SyncState>,
        file: &Arc<dyn BlockingFile>,
        end: u64,
    ) -> ReplyReceiver<SyncResult> {
        let (reply, receiver) = reply::channel();
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let sender = queue.get_or_insert_with(|| start(sync.clone(), file.clone()));
        // A send fails only if the thread has ended; the dropped reply then reports a loss.
        let _ = sender.send(SyncRequest { end, reply });
        receiver
    }
}

/// Starts the thread; returns its queue.
fn start(sync: Arc<SyncState>, file: Arc<dyn BlockingFile>) -> Sender<SyncRequest> {
    let (sender, receiver) = channel();
    let spawned = std::thread::Builder::new()
        .name("ringdb-batch-sync".into())
        .spawn(move || serve(&sync, &*file, &receiver));
    if let Err(e) = spawned {
        // The receiver is gone with the closure: every request's reply reports a loss.
        tracing::error!("cannot start the batch log's sync thread: {e}");
    }
    sender
}

/// Serves requests until the queue's senders are gone: all queued ones with one sync. Bounded
/// by the queue: each turn takes at least one request.
fn serve(sync: &SyncState, file: &dyn BlockingFile, receiver: &Receiver<SyncRequest>) {
    while let Ok(first) = receiver.recv() {
        let mut requests = vec![first];
        requests.extend(receiver.try_iter());
        let end = requests
            .iter()
            .map(|r| r.end)
            .max()
            .expect("one request at least");
        let result = sync
            .sync_to(file, end)
            .map_err(|e| (e.kind(), e.to_string()));
        for request in requests {
            request.reply.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn queued_requests_are_served_and_the_thread_ends_with_its_queue() {
        let path = std::env::temp_dir().join(format!("ringdb-syncer-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let file: Arc<dyn BlockingFile> = Arc::new(file);
        let sync = Arc::new(SyncState::new());
        let syncer = Syncer::default();
        let replies: Vec<_> = (1..=3)
            .map(|end| syncer.request(&sync, &file, end))
            .collect();
        for reply in replies {
            assert_eq!(reply.wait(Duration::ZERO), Some(Ok(())));
        }
        assert_eq!(Arc::strong_count(&file), 2, "the thread holds the file");
        drop(syncer);
        // Bounded: the thread sees its queue closed and drops its handle on the file.
        let until = Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&file) > 1 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(Arc::strong_count(&file), 1, "the thread ended");
        let _ = std::fs::remove_file(&path);
    }
}
