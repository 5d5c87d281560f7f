//! Reading several pages in one batch: [`BufferManager::prefetch`] starts the loads of every
//! page that is not resident in one poll, so their reads go to the kernel in one submission
//! (`Io::submit_together`), and waits for them together. A range scan uses it for the leaves
//! it is about to visit (seeds/004: batched disk reads for range scans).
//!
//! No page stays pinned: each load's pin is dropped when its read completes, so a task waiting
//! for the rest of its batch holds no pin (the buffer manager's rule). A page just read has its
//! reference bit set, so the clock passes over it once before it can be evicted; a caller that
//! must be sure of one page pins it afterwards with [`load`](BufferManager::load), which does
//! nothing more when the page is still in.

use super::load::Lookup;
use super::{BufferManager, PageId};
use crate::error::StorageError;
use futures_util::future::join_all;

impl BufferManager {
    /// Reads every page of `pids` that is neither resident nor in an I/O, all in one
    /// submission (reads beyond the pool's admission limit follow as earlier ones finish),
    /// verified as every read is; waits until they are all in. Returns how many pages it read.
    /// Pins nothing. A page freed meanwhile (by a merge) is skipped.
    pub async fn prefetch(&self, pids: &[PageId]) -> Result<usize, StorageError> {
        let mut absent = Vec::with_capacity(pids.len());
        for &pid in pids {
            if matches!(self.lookup(pid)?, Lookup::Absent) && !absent.contains(&pid) {
                absent.push(pid);
            }
        }
        let loads = join_all(absent.iter().map(|&pid| async move {
            // The pin goes as soon as the page is in: no pin waits for the others.
            self.load(pid).await.map(drop)
        }));
        let results = self.inner.io.submit_together(loads).await;
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
        Ok(absent.len())
    }
}
