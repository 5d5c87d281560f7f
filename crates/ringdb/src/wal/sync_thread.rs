//! The thread that runs `fdatasync` on the log when asked (durability mode `thread`): the
//! sync never occupies an io-wq worker, and the ring's thread keeps running other tasks.

use crate::error::{LogFailure, OpenError};
use ringdb_io::Io;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A thread that runs `fdatasync` on the log when asked (durability mode `thread`): the sync
/// never occupies an io-wq worker, and the ring's thread keeps running other tasks.
pub(super) struct SyncThread {
    tx: Option<std::sync::mpsc::Sender<u64>>,
    /// Highest request done, and the error of the last one, if any.
    done: Arc<AtomicU64>,
    error: Arc<Mutex<Option<std::io::Error>>>,
    next: Cell<u64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl SyncThread {
    pub(super) fn start(file: std::fs::File) -> Result<SyncThread, OpenError> {
        let (tx, rx) = std::sync::mpsc::channel::<u64>();
        let done = Arc::new(AtomicU64::new(0));
        let error = Arc::new(Mutex::new(None));
        let (d, e) = (done.clone(), error.clone());
        let handle = std::thread::Builder::new()
            .name("ringdb-wal-sync".into())
            .spawn(move || {
                while let Ok(seq) = rx.recv() {
                    if let Err(err) = file.sync_data() {
                        *e.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
                    }
                    d.store(seq, Ordering::Release);
                }
            })
            .map_err(|source| OpenError::SyncThread { source })?;
        Ok(SyncThread {
            tx: Some(tx),
            done,
            error,
            next: Cell::new(0),
            handle: Some(handle),
        })
    }

    /// Asks for one `fdatasync` and waits for it, letting the ring's other tasks run.
    pub(super) async fn sync(&self, io: &Io) -> Result<(), LogFailure> {
        let seq = self.next.get() + 1;
        self.next.set(seq);
        self.tx
            .as_ref()
            .expect("running")
            .send(seq)
            .map_err(|_| LogFailure::SyncThreadGone)?;
        // The executor has no cross-thread wake-up source, so the waiting task yields until
        // the thread is done: other tasks run meanwhile, at the price of polling.
        while self.done.load(Ordering::Acquire) < seq {
            io.yield_now().await;
            std::hint::spin_loop();
        }
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(source) => Err(LogFailure::SyncThread { source }),
            None => Ok(()),
        }
    }
}

impl Drop for SyncThread {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
