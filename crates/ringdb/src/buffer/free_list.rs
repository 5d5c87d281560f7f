//! The pool's free pages: the ids reusable at once, and the pages of the free-list chain that
//! a meta page written (or being written) may still name, held until a newer meta write has
//! completed (see `freelist.rs` for why, and for the chain's format).
//!
//! A meta write takes a *cut* of the free list ([`BufferManager::cut_free_list`], synchronous):
//! every free id, its new chain pages picked among the reusable ones, and their images. Once
//! the write has completed, [`BufferManager::free_list_written`] makes the previous chain's
//! pages reusable. Cuts are numbered so that only the latest one's completion releases
//! anything: two meta writes may overlap (two flushes without a log), and the older one's
//! completion must not release the pages the newer one's predecessor named.

use super::{BufferManager, PageId};
use crate::freelist::{self, FreeList, FreeListImage};
use crate::meta::Meta;

/// Chain pages not reusable yet (all of them in the state's `freed` set, none in
/// `free_pages`).
#[derive(Default)]
pub(super) struct HeldChain {
    /// Pages of chains written earlier (or read on open) that a meta page on disk may name.
    held: Vec<PageId>,
    /// The latest cut's chain, until its write completes.
    pending: Vec<PageId>,
    /// Cuts taken so far: the latest one's number.
    cuts: u64,
}

/// One meta write's view of the free list (see [`BufferManager::cut_free_list`]).
pub struct FreeListCut {
    /// The cut's number, for [`BufferManager::free_list_written`].
    pub number: u64,
    /// What the meta page and the chain record.
    pub image: FreeListImage,
}

impl BufferManager {
    /// Every free page id: the reusable ones and the free-list chain's held pages (the pages
    /// neither in the tree nor in use).
    pub fn free_pages(&self) -> Vec<PageId> {
        let st = self.inner.state.borrow();
        let chain = &st.chain;
        let mut all = st.free_pages.clone();
        all.extend(chain.held.iter().chain(&chain.pending));
        all
    }

    /// Free pages that hold (or held, in the last meta write) the free-list chain: among
    /// [`free_pages`](Self::free_pages), but not reusable until the next meta write.
    pub fn free_list_pages(&self) -> usize {
        let chain = &self.inner.state.borrow().chain;
        chain.held.len() + chain.pending.len()
    }

    /// Restores the free list read on open: its ids are reusable, its chain's pages are held
    /// until the next meta write (the meta page on disk names them).
    pub fn restore_free_list(&self, list: FreeList) {
        let mut st = self.inner.state.borrow_mut();
        assert!(
            st.free_pages.is_empty() && st.table.len() <= 1,
            "the free list is restored on open only"
        );
        st.freed = list.free.iter().chain(&list.chain).copied().collect();
        assert_eq!(
            st.freed.len(),
            list.free.len() + list.chain.len(),
            "a page restored free twice (the reader refuses that)"
        );
        st.free_pages = list.free;
        st.chain = HeldChain {
            held: list.chain,
            pending: Vec::new(),
            cuts: 0,
        };
    }

    /// A meta write's cut of the free list (synchronous): every free page is either listed
    /// (in the meta page or on the chain) or is one of the new chain's pages. The new chain's
    /// pages come from the reusable ones (they stop being reusable), else from growing the
    /// data, else (a full target) from the held ones; a previous cut whose write never
    /// completed keeps its chain held. Call `next_pid` after this: the cut may grow the data.
    pub fn cut_free_list(&self) -> FreeListCut {
        let page_size = self.inner.cfg.page_size;
        let (in_meta, per_page) = (
            Meta::free_capacity(page_size),
            freelist::ids_per_page(page_size),
        );
        let capacity = self.inner.cfg.capacity_pages;
        let mut st = self.inner.state.borrow_mut();
        let st = &mut *st;
        let stale = std::mem::take(&mut st.chain.pending);
        st.chain.held.extend(stale);
        let mut listed = st.free_pages.len() + st.chain.held.len();
        let mut chain = Vec::new();
        while listed > in_meta + chain.len() * per_page {
            let pid = if let Some(pid) = st.free_pages.pop() {
                listed -= 1;
                pid
            } else if capacity.is_none_or(|cap| st.next_pid < cap) {
                st.next_pid += 1;
                assert!(st.freed.insert(st.next_pid - 1), "a new page was free");
                st.next_pid - 1
            } else {
                listed -= 1;
                st.chain
                    .held
                    .pop()
                    .expect("more listed than reusable means some held")
            };
            chain.push(pid);
        }
        let mut ids = st.free_pages.clone();
        ids.extend(&st.chain.held);
        assert_eq!(ids.len(), listed, "free ids miscounted at a cut");
        st.chain.cuts += 1;
        st.chain.pending = chain;
        FreeListCut {
            number: st.chain.cuts,
            image: freelist::build(&ids, &st.chain.pending, page_size),
        }
    }

    /// The meta write of cut `number` has completed: when no later cut was taken, the pages
    /// of earlier chains become reusable and this cut's chain is held in their place.
    pub fn free_list_written(&self, number: u64) {
        let mut st = self.inner.state.borrow_mut();
        let st = &mut *st;
        if st.chain.cuts != number {
            return;
        }
        let released = std::mem::take(&mut st.chain.held);
        debug_assert!(released.iter().all(|p| st.freed.contains(p)));
        st.free_pages.extend(released);
        st.chain.held = std::mem::take(&mut st.chain.pending);
    }
}
