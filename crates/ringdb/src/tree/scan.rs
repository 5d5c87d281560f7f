//! Range scans, one leaf per attempt: leaves are not linked, so the scan finds the next leaf
//! through the smallest separator above the current one (its *fence*), one descent per leaf.

use super::{Attempt, BTree, Need};
use crate::error::StorageError;
use crate::node::NodeRef;
use std::ops::Bound;

impl BTree {
    /// Appends the pairs of the leaf that holds `from` (up to `limit` in all, stopping at
    /// `end`); returns the fence where the next leaf starts, if the scan goes on.
    pub(super) fn scan_leaf_attempt(
        &self,
        from: &Bound<Vec<u8>>,
        end: Bound<&[u8]>,
        limit: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<Attempt<Option<Vec<u8>>>, StorageError> {
        let probe: &[u8] = match from {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let root = self.root.get();
        let mut fence: Option<Vec<u8>> = None;
        let mut g = fix!(self, root.root);
        while let Some((index, child)) = Self::route(&g, probe)? {
            let f = g
                .read(|p| {
                    NodeRef::new(p).map(|n| (index < n.count()).then(|| n.key(index).to_vec()))
                })
                .map_err(|e| Self::corrupt(g.pid(), e))?;
            if f.is_some() {
                fence = f;
            }
            g = fix!(self, child);
        }
        let done = g.read(|p| {
            let n = NodeRef::new(p).map_err(|e| Self::corrupt(g.pid(), e))?;
            let first = match from {
                Bound::Included(k) => n.search(k).unwrap_or_else(|i| i),
                Bound::Excluded(k) => match n.search(k) {
                    Ok(i) => i + 1,
                    Err(i) => i,
                },
                Bound::Unbounded => 0,
            };
            for i in first..n.count() {
                if out.len() >= limit {
                    return Ok::<_, StorageError>(true);
                }
                let k = n.key(i);
                let past = match end {
                    Bound::Included(e) => k > e,
                    Bound::Excluded(e) => k >= e,
                    Bound::Unbounded => false,
                };
                if past {
                    return Ok(true);
                }
                out.push((k.to_vec(), n.value(i).to_vec()));
            }
            Ok(out.len() >= limit)
        })?;
        if done {
            return Ok(Ok(None));
        }
        Ok(Ok(fence))
    }
}
