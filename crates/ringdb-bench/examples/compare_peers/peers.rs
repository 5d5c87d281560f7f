//! The stores compared, behind one small trait: ringdb's `Db` (the embedding API, called from
//! the program's threads), LMDB through heed, redb and fjall. Each is opened fresh in its own
//! folder with the same memory budget and the same durability: writes acknowledged without a
//! sync of their own (ringdb `none`, LMDB `NO_SYNC`, redb `Durability::None`, fjall's journal
//! left to its background persistence), the setting each documents for a cache-like load.
//! The swap workload (two keys' values exchanged in one serializable transaction) and the pair
//! workload (two keys read in one read-only transaction) run on the stores with transactions
//! on their handle: ringdb's `Db::transaction` (locks on each key's shard), LMDB's and redb's
//! write and read transactions (a read one is a snapshot: no locks); fjall's plain keyspaces
//! have none (its transactional database is another type, not compared).

use heed::types::Bytes;
use heed::{CommitOrAbort, EnvFlags, EnvOpenOptions};
use std::path::Path;

/// A key and its value, for loading.
pub type Pair = (Vec<u8>, Vec<u8>);

/// A store the benchmark drives from many threads at once.
pub trait Peer: Sync {
    /// Its name in the report.
    fn name(&self) -> &'static str;
    /// Copies the value of `key` into `out` (cleared first); whether it was present.
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String>;
    /// Inserts or replaces one pair, one commit.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Inserts many pairs (a load: batched as the store prefers).
    fn load(&self, pairs: &[Pair]) -> Result<(), String>;
    /// Swaps the values of `a` and `b` in one serializable read-write transaction; `None`
    /// for a store compared without transactions.
    fn swap(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let _ = (a, b);
        None
    }
    /// Reads `a` and `b` (both must be present) in one read-only transaction; `None` for a
    /// store compared without transactions.
    fn read_pair(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let _ = (a, b);
        None
    }
}

/// Both values of a pair were found.
fn both_present(name: &str, found: [bool; 2]) -> Result<(), String> {
    match found {
        [true, true] => Ok(()),
        _ => Err(format!("{name}: a key of the pair is missing")),
    }
}

/// Opens peer `name` in a fresh `dir` with `memory_bytes` of cache (ringdb: its pool over
/// `shards` shards).
pub fn open(
    name: &str,
    dir: &Path,
    memory_bytes: u64,
    shards: usize,
) -> Result<Box<dyn Peer>, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match name {
        "ringdb" => Ok(Box::new(Ringdb::open(dir, memory_bytes, shards)?)),
        "lmdb" => Ok(Box::new(Lmdb::open(dir, memory_bytes)?)),
        "redb" => Ok(Box::new(Redb::open(dir, memory_bytes)?)),
        "fjall" => Ok(Box::new(Fjall::open(dir, memory_bytes)?)),
        other => Err(format!(
            "unknown peer {other:?}; expected ringdb, lmdb, redb or fjall"
        )),
    }
}

fn err(what: &'static str) -> impl Fn(&dyn std::fmt::Display) -> String {
    move |e| format!("{what}: {e}")
}

/// ringdb's thread-per-core `Db`, one shard per CPU.
struct Ringdb {
    db: ringdb::Db,
}

impl Ringdb {
    fn open(dir: &Path, memory_bytes: u64, shards: usize) -> Result<Ringdb, String> {
        let options = ringdb::Options {
            direct: false,
            fresh: true,
            durability: ringdb::Durability::None,
            ..ringdb::Options::default()
        };
        let db = ringdb::Db::builder(dir)
            .options(options)
            .pool_bytes(memory_bytes)
            .shards(shards)
            .open()
            .map_err(|e| err("ringdb open")(&e))?;
        Ok(Ringdb { db })
    }
}

impl Peer for Ringdb {
    fn name(&self) -> &'static str {
        "ringdb"
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        self.db
            .get_into(key, out)
            .map_err(|e| err("ringdb get")(&e))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db
            .insert(key, value)
            .map(|_| ())
            .map_err(|e| err("ringdb put")(&e))
    }

    fn load(&self, pairs: &[Pair]) -> Result<(), String> {
        let mut batch = ringdb::WriteBatch::new();
        for (key, value) in pairs {
            batch.put(key, value);
        }
        self.db.write(&batch).map_err(|e| err("ringdb load")(&e))
    }

    fn swap(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let swapped = self.db.transaction(|txn| {
            let mut both = txn.get_many_for_update(&[a, b])?;
            let value_b = both.pop().flatten().unwrap_or_default();
            let value_a = both.pop().flatten().unwrap_or_default();
            txn.insert(a, &value_b)?;
            txn.insert(b, &value_a)
        });
        Some(swapped.map_err(|e: ringdb::TxnError| err("ringdb swap")(&e)))
    }

    fn read_pair(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let read = self.db.transaction(|txn| {
            let both = txn.get_many(&[a, b])?;
            Ok::<_, ringdb::TxnError>([both[0].is_some(), both[1].is_some()])
        });
        let read = read.map_err(|e| err("ringdb pair")(&e));
        Some(read.and_then(|found| both_present("ringdb", found)))
    }
}

/// LMDB through heed: a read transaction per get, a write transaction per put.
struct Lmdb {
    env: &'static heed::Env,
    database: heed::Database<'static, Bytes, Bytes>,
}

impl Lmdb {
    fn open(dir: &Path, memory_bytes: u64) -> Result<Lmdb, String> {
        let mut options = EnvOpenOptions::new();
        options.map_size(memory_bytes as usize).max_dbs(1);
        // SAFETY (heed's contract for these flags and for `open`): the folder is this
        // process's own, opened once, and no other process maps it.
        let env = unsafe {
            options.flags(EnvFlags::NO_READ_AHEAD | EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC);
            options.open(dir)
        }
        .map_err(|e| err("lmdb open")(&e))?;
        // The benchmark's stores live until the process ends.
        let env: &'static heed::Env = Box::leak(Box::new(env));
        let wtxn = env.write_txn().map_err(|e| err("lmdb txn")(&e))?;
        let database = env
            .create_databases_and_commit(wtxn, |opener, wtxn| -> heed::Result<_> {
                let database = opener.create_database::<Bytes, Bytes>(wtxn, None)?;
                Ok(CommitOrAbort::<_, ()>::Commit(database))
            })
            .map_err(|e| err("lmdb create")(&e))?
            .unwrap_commit();
        Ok(Lmdb { env, database })
    }
}

impl Peer for Lmdb {
    fn name(&self) -> &'static str {
        "lmdb"
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        let txn = self.env.read_txn().map_err(|e| err("lmdb txn")(&e))?;
        out.clear();
        let found = self.database.get(&txn, key);
        match found.map_err(|e| err("lmdb get")(&e))? {
            Some(value) => {
                out.extend_from_slice(value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.load(&[(key.to_vec(), value.to_vec())])
    }

    fn load(&self, pairs: &[Pair]) -> Result<(), String> {
        let mut txn = self.env.write_txn().map_err(|e| err("lmdb txn")(&e))?;
        for (key, value) in pairs {
            let put = self.database.put(&mut txn, key, value);
            put.map_err(|e| err("lmdb put")(&e))?;
        }
        txn.commit().map_err(|e| err("lmdb commit")(&e))
    }

    fn swap(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let swap = || -> heed::Result<()> {
            let mut txn = self.env.write_txn()?;
            let value_a = self.database.get(&txn, a)?.unwrap_or_default().to_vec();
            let value_b = self.database.get(&txn, b)?.unwrap_or_default().to_vec();
            self.database.put(&mut txn, a, &value_b)?;
            self.database.put(&mut txn, b, &value_a)?;
            txn.commit()
        };
        Some(swap().map_err(|e| err("lmdb swap")(&e)))
    }

    fn read_pair(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let read = || -> heed::Result<[bool; 2]> {
            let txn = self.env.read_txn()?;
            let found_a = self.database.get(&txn, a)?.is_some();
            let found_b = self.database.get(&txn, b)?.is_some();
            Ok([found_a, found_b])
        };
        let read = read().map_err(|e| err("lmdb pair")(&e));
        Some(read.and_then(|found| both_present("lmdb", found)))
    }
}

const REDB_TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("kv");

/// redb: a read transaction per get, a write transaction (durability none) per put.
struct Redb {
    db: redb::Database,
}

impl Redb {
    fn open(dir: &Path, memory_bytes: u64) -> Result<Redb, String> {
        let db = redb::Database::builder()
            .set_cache_size(memory_bytes as usize)
            .create(dir.join("redb"))
            .map_err(|e| err("redb open")(&e))?;
        Ok(Redb { db })
    }
}

impl Peer for Redb {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        use redb::ReadableDatabase;
        let txn = self.db.begin_read().map_err(|e| err("redb txn")(&e))?;
        let table = txn
            .open_table(REDB_TABLE)
            .map_err(|e| err("redb table")(&e))?;
        out.clear();
        match table.get(key).map_err(|e| err("redb get")(&e))? {
            Some(value) => {
                out.extend_from_slice(value.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.load(&[(key.to_vec(), value.to_vec())])
    }

    fn load(&self, pairs: &[Pair]) -> Result<(), String> {
        let mut txn = self.db.begin_write().map_err(|e| err("redb txn")(&e))?;
        txn.set_durability(redb::Durability::None)
            .map_err(|e| err("redb durability")(&e))?;
        {
            let mut table = txn
                .open_table(REDB_TABLE)
                .map_err(|e| err("redb table")(&e))?;
            for (key, value) in pairs {
                let put = table.insert(key.as_slice(), value.as_slice());
                put.map_err(|e| err("redb put")(&e))?;
            }
        }
        txn.commit().map_err(|e| err("redb commit")(&e))
    }

    fn swap(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let swap = || -> Result<(), redb::Error> {
            use redb::ReadableTable;
            let mut txn = self.db.begin_write()?;
            txn.set_durability(redb::Durability::None)?;
            {
                let mut table = txn.open_table(REDB_TABLE)?;
                let value_a = table
                    .get(a)?
                    .map(|v| v.value().to_vec())
                    .unwrap_or_default();
                let value_b = table
                    .get(b)?
                    .map(|v| v.value().to_vec())
                    .unwrap_or_default();
                table.insert(a, value_b.as_slice())?;
                table.insert(b, value_a.as_slice())?;
            }
            txn.commit()?;
            Ok(())
        };
        Some(swap().map_err(|e| err("redb swap")(&e)))
    }

    fn read_pair(&self, a: &[u8], b: &[u8]) -> Option<Result<(), String>> {
        let read = || -> Result<[bool; 2], redb::Error> {
            use redb::ReadableDatabase;
            let txn = self.db.begin_read()?;
            let table = txn.open_table(REDB_TABLE)?;
            Ok([table.get(a)?.is_some(), table.get(b)?.is_some()])
        };
        let read = read().map_err(|e| err("redb pair")(&e));
        Some(read.and_then(|found| both_present("redb", found)))
    }
}

/// fjall: one keyspace; its journal is persisted in the background.
struct Fjall {
    db: fjall::Database,
    items: fjall::Keyspace,
}

impl Fjall {
    fn open(dir: &Path, memory_bytes: u64) -> Result<Fjall, String> {
        let db = fjall::Database::builder(dir)
            .cache_size(memory_bytes)
            .open()
            .map_err(|e| err("fjall open")(&e))?;
        let items = db
            .keyspace("kv", fjall::KeyspaceCreateOptions::default)
            .map_err(|e| err("fjall keyspace")(&e))?;
        Ok(Fjall { db, items })
    }
}

impl Peer for Fjall {
    fn name(&self) -> &'static str {
        "fjall"
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        out.clear();
        match self.items.get(key).map_err(|e| err("fjall get")(&e))? {
            Some(value) => {
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.items
            .insert(key, value)
            .map_err(|e| err("fjall put")(&e))
    }

    fn load(&self, pairs: &[Pair]) -> Result<(), String> {
        let mut batch = self.db.batch();
        for (key, value) in pairs {
            batch.insert(&self.items, key.as_slice(), value.as_slice());
        }
        batch.commit().map_err(|e| err("fjall load")(&e))
    }
}
