//! Where each warehouse lives when TPC-C runs on a database of several shards: warehouse
//! `w` on shard `(w - 1) mod N`, the way the paper's guideline 2 would partition it (a ring
//! per thread, each owning its data). Every table but ITEM starts its key with the
//! warehouse id, so a key's shard is read from its first four bytes; ITEM is read-only and
//! copied to every shard, so a NewOrder reads it where it runs.

use super::keys;
use super::tables::TpccTables;
use ringdb::TableId;

/// The warehouses' shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    shards: usize,
}

impl Placement {
    /// Warehouses spread over `shards` shards (at least one).
    pub fn new(shards: usize) -> Placement {
        assert!(shards >= 1, "a database has a shard");
        Placement { shards }
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The shard that holds warehouse `w` (1-based).
    pub fn shard_of_warehouse(&self, w: u32) -> usize {
        assert!(w >= 1, "warehouses count from 1");
        (w as usize - 1) % self.shards
    }

    /// The warehouses of `shard`, in order, out of `warehouses`.
    pub fn warehouses_of(&self, shard: usize, warehouses: u32) -> Vec<u32> {
        (1..=warehouses)
            .filter(|&w| self.shard_of_warehouse(w) == shard)
            .collect()
    }

    /// The shard a key of `table` lives on; `None` for the tables every shard holds (ITEM
    /// and the meta row): read them where the transaction runs.
    pub fn shard_of_key(&self, tables: &TpccTables, table: TableId, key: &[u8]) -> Option<usize> {
        if table == tables.item || table == tables.meta || self.shards == 1 {
            return None;
        }
        // Every other table's key starts with its warehouse (see `keys.rs`); a key too short
        // to hold one is a scan bound before every warehouse: the first shard's.
        let w = keys::u32_at(key, 0).unwrap_or(1).max(1);
        Some(self.shard_of_warehouse(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warehouses_go_round_the_shards() {
        let p = Placement::new(2);
        assert_eq!(p.warehouses_of(0, 5), vec![1, 3, 5]);
        assert_eq!(p.warehouses_of(1, 5), vec![2, 4]);
        assert_eq!(p.shard_of_warehouse(4), 1);
        assert_eq!(Placement::new(1).warehouses_of(0, 3), vec![1, 2, 3]);
    }
}
