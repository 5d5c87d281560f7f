//! Stealing under a write-ahead log: what eviction checks and runs before it writes a dirty
//! page in place between two checkpoints.
//!
//! The log holds logical records (puts and deletes by key), so recovery replays them over a
//! tree whose *structure* must be exactly that of the last complete checkpoint: a page split
//! or merged since may not reach the data file outside a checkpoint (it is `structural`, see
//! `frame.rs`, until a checkpoint has written it). A leaf whose records changed in place may:
//! its key range is the checkpoint's, and replaying a blind put or delete over a leaf that
//! already holds it (or a later value) ends with the log's last value for every key. Two
//! rules make such a write safe:
//!
//! 1. **Write-ahead**: the log is durable past the page's LSN first, so the data file never
//!    holds a change whose record a crash could lose.
//! 2. **Torn pages**: in the modes that survive a power cut, the page's sealed image goes into
//!    the log first; recovery writes it in place again when the page there is torn or older
//!    (by page LSN). A process crash cannot tear a write the kernel has accepted, so mode
//!    `none` writes no images.
//!
//! Both are the [`WriteAhead`](super::WriteAhead) hook's job (it knows the log); this file
//! gathers the victims' images and puts back the victims the hook did not let go.

use super::evict::Outgoing;
use super::{BufferManager, PageId};
use crate::error::StorageError;
use crate::page;

impl BufferManager {
    /// Runs the write-ahead hook over dirty victims (sealed, in state `Writing`) before they
    /// are written in place. `Ok(true)` without a log or when the hook let them go.
    pub(super) async fn write_ahead_of(&self, victims: &[Outgoing]) -> Result<bool, StorageError> {
        let inner = &self.inner;
        if !inner.cfg.write_ahead || victims.is_empty() {
            return Ok(true);
        }
        let hook = inner
            .write_ahead
            .borrow()
            .clone()
            .expect("a pool under a log steals only with its write-ahead hook");
        let pages: Vec<(PageId, &[u8])> = victims
            .iter()
            .map(|(_, pid, buf)| (*pid, buf.as_slice()))
            .collect();
        let lsn = pages
            .iter()
            .map(|(_, image)| page::lsn(image))
            .max()
            .expect("victims");
        hook.before_write(&pages, lsn).await
    }

    /// Puts dirty victims the write-ahead hook did not let go back, resident and dirty.
    pub(super) fn keep_victims(&self, victims: Vec<Outgoing>) {
        let inner = &self.inner;
        for (slot, pid, buf) in victims {
            let mut st = inner.state.borrow_mut();
            let s = st.slot_mut(slot);
            assert!(
                s.dirty && !s.structural,
                "page {pid} stolen while structural"
            );
            s.finish_write(buf, &inner.cells[slot]);
            drop(st);
            inner.wake_io(pid);
        }
    }
}
